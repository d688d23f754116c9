// The wiring of agentless checking: its settings and credential vault on the app, the
// worker pollers' health check, and the loop that sweeps pollers and runs (the service's).
import type { FastifyInstance } from 'fastify'
import { registerHealthCheck, type HealthStatus } from '../platform/health.js'
import type { Maybe } from '../platform/maybe.js'
import { everyInterval, type Loop } from '../platform/loops.js'
import { vault, type Vault } from '../vault.js'
import { workerPollerVerdict } from './service.js'
import type { AgentlessSettings } from './settings.js'

export { RUN_GIVE_UP_MS } from './service.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Agentless settings and the vault of connection credentials. */
    agentless: { settings: AgentlessSettings; vault: Vault }
  }
}

const SWEEP_INTERVAL_MS = 5000

/** One sweep of the service (see agentlessService().sweep). */
export function sweepAgentless(app: FastifyInstance, now = Date.now()) {
  return app.services.agentless.sweep(now)
}

/**
 * Puts the settings and the vault on the app (the same the service is made with, from the
 * configuration) and registers the pollers' health check; the loop sweeps every few seconds
 * while the app runs (one process at a time: it changes the shared pollers and runs).
 */
export function agentlessLoop(app: FastifyInstance): Loop {
  app.decorate('agentless', { settings: app.config.agentless, vault: vault(app.config.agentlessKey) })
  registerHealthCheck(app, { name: 'WorkerPoller', check: workerPollerHealth })
  return everyInterval(app.log, { name: 'agentless-sweeper', singleton: true, intervalMs: SWEEP_INTERVAL_MS, what: 'agentless sweep' }, () => sweepAgentless(app))
}

/**
 * The worker pollers' health: whether every activated poller sends heartbeats. At once on
 * SQLite (its health checks answer so: it reads the pollers directly), through the ports'
 * Promise on PostgreSQL.
 */
export function workerPollerHealth(app: FastifyInstance): Maybe<{ status: HealthStatus; detail: string }> {
  const offlineAfter = app.agentless.settings.offlineAfterSeconds
  if (app.storage.backend === 'sqlite') return workerPollerVerdict(app.repos.agentless.pollers(), offlineAfter, Date.now())
  return app.storage.ports!.agentless.pollers().then((pollers) => workerPollerVerdict(pollers, offlineAfter, Date.now()))
}
