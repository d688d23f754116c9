// The health checks of a server, in one registry per app that features add their checks to
// at wiring time: admin/SubsystemHealth and the system-health notifications run them in
// registration order (lib/health.ts), so nothing here needs to know the features.
import type { FastifyInstance } from 'fastify'
import type { Maybe } from './maybe.js'

export type HealthStatus = 'Healthy' | 'Warning' | 'Failed'
export interface HealthVerdict {
  status: HealthStatus
  detail: string
}
export interface HealthCheck {
  name: string
  /** A verdict at once, or through a Promise where the check reads a server database (PostgreSQL). */
  check: (app: FastifyInstance) => Maybe<HealthVerdict>
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The registered health checks, in the order they are answered (lib/platform/health.ts). */
    healthChecks: readonly HealthCheck[]
  }
}

/** Gives the app its (empty) registry of health checks. */
export function registerHealthChecks(app: FastifyInstance): void {
  app.decorate('healthChecks', [])
}

/** Adds a check; it is answered after those registered before it, under its own name. */
export function registerHealthCheck(app: FastifyInstance, check: HealthCheck): void {
  const checks = app.healthChecks as HealthCheck[]
  if (checks.some((c) => c.name === check.name)) throw new Error(`health check ${check.name} is registered twice`)
  checks.push(check)
}
