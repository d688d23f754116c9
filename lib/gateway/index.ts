// The gateway's wiring: the enrollment secret announced once and the sweeper loop made
// from the app's ports.
import type { FastifyInstance } from 'fastify'
import type { Loop } from '../platform/loops.js'
import { agentSweeperLoop, type SweeperDeps } from './sweeper.js'

export function announceEnrollmentSecret(app: FastifyInstance): void {
  const { config } = app
  if (!config.agents.enrollmentSecretGenerated) return
  // Printed once, on the start that generated it: kept in the data dir, or on PostgreSQL in
  // the database, where every node reads the same one.
  const kept = config.databaseUrl ? "in the database's secrets, shared by every node" : `in ${config.dataDir}/agent-enrollment-secret`
  app.log.warn(`Generated the agent enrollment secret: ${config.agents.enrollmentSecret}  (kept ${kept}; PRIME_AGENT_ENROLLMENT_SECRET overrides it)`)
}

/**
 * The credential is one held for an Administrator's approval (a refused agent call's only
 * extra read). Synchronous, as authentication is: it runs in the request's first hook.
 */
/** What the sweeper works with, from the app's ports (either backend) and settings. */
export function sweeperDeps(app: FastifyInstance): SweeperDeps {
  const { config, storage } = app
  const ports = storage.ports!
  return {
    store: ports.gatewayStore,
    events: ports.eventRecorder,
    agentState: ports.agentState,
    uow: storage.uow,
    log: app.log,
    gateway: app.services.gateway,
    disconnectSeconds: config.agents.disconnectSeconds,
    seats: config.license.seats,
    sliceMs: app.loops.sliceMs,
  }
}

export function gatewaySweeperLoop(app: FastifyInstance): Loop {
  return agentSweeperLoop(sweeperDeps(app))
}
