// Load balancer probes: liveness (the process answers) and readiness (the database takes a
// write, its schema is this server's, and the server is not shutting down).
import type { FastifyInstance } from 'fastify'

declare module 'fastify' {
  interface FastifyInstance {
    /** Set when shutdown begins: readiness answers 503 from then on. */
    lifecycle: { shuttingDown: boolean }
  }
}

/** Why this node should not receive traffic now, or null when it should. */
export async function notReadyReason(app: FastifyInstance): Promise<string | null> {
  if (app.lifecycle.shuttingDown) return 'The server is shutting down.'
  try {
    await app.storage.ready()
  } catch (err) {
    return (err as Error).message
  }
  return null
}

/** Decorates the app with its lifecycle: shutting down from the first close hook on. */
export function registerLifecycle(app: FastifyInstance): void {
  app.decorate('lifecycle', { shuttingDown: false })
  app.addHook('preClose', async () => {
    app.lifecycle.shuttingDown = true
  })
}
