import type { FastifyInstance } from 'fastify'
import type { HealthStatus } from '../health.js'

/** Starts the periodic health checks that open and resolve system-health notifications. */
export function startNotifications(_app: FastifyInstance): void {}

/** The license's health: expiry and seats. */
export function licenseHealth(_app: FastifyInstance): { status: HealthStatus; detail: string } {
  return { status: 'Healthy', detail: 'License valid' }
}
