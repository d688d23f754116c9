import type { FastifyInstance } from 'fastify'
import type { HealthStatus } from '../health.js'

/** Starts the server-side upkeep of worker pollers (heartbeat timeouts). */
export function startAgentless(_app: FastifyInstance): void {}

/** The worker pollers' health: heartbeats. */
export function workerPollerHealth(_app: FastifyInstance): { status: HealthStatus; detail: string } {
  return { status: 'Healthy', detail: 'No worker pollers registered' }
}
