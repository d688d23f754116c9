// Load balancer probes: liveness (the process answers) and readiness (the database takes a
// write, its schema is this server's, and the server is not shutting down).
import type { FastifyInstance } from 'fastify'
import { latestSchemaVersion } from '../db/index.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Set when shutdown begins: readiness answers 503 from then on. */
    lifecycle: { shuttingDown: boolean }
  }
}

/** Why this node should not receive traffic now, or null when it should. */
export function notReadyReason(app: FastifyInstance, expectedVersion: number): string | null {
  if (app.lifecycle.shuttingDown) return 'The server is shutting down.'
  try {
    app.repos.system.probe()
  } catch {
    return 'The database does not take writes.'
  }
  if (app.repos.system.schemaVersion() !== expectedVersion) return 'The database schema is not at the version of this server.'
  return null
}

/** Decorates the app with its lifecycle: shutting down from the first close hook on. */
export function registerLifecycle(app: FastifyInstance): void {
  app.decorate('lifecycle', { shuttingDown: false })
  app.addHook('preClose', async () => {
    app.lifecycle.shuttingDown = true
  })
}

/** The schema version readiness expects, read once. */
export const expectedSchemaVersion = latestSchemaVersion()
