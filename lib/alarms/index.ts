import type { FastifyInstance } from 'fastify'
import type { HealthStatus } from '../health.js'

/** Starts the outbox worker that delivers alarms; it stops when the app closes. */
export function startAlarmDelivery(_app: FastifyInstance): void {}

/** The alarm-delivery subsystem's health: backlog and failures. */
export function alarmDeliveryHealth(_app: FastifyInstance): { status: HealthStatus; detail: string } {
  return { status: 'Healthy', detail: 'No alarm destinations' }
}
