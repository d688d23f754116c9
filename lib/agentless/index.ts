// Agentless checking on the server side: its settings and credential vault, the upkeep
// of worker pollers (heartbeats that stop, runs that never end) and their health.
import type { FastifyInstance } from 'fastify'
import { registerHealthCheck, type HealthStatus } from '../platform/health.js'
import { iso } from '../time.js'
import type { AgentlessSettings } from './settings.js'
import { vault, type Vault } from '../vault.js'
import { connectionEvent, pollerEvent } from './events.js'
import { everyInterval, type Loop } from '../platform/loops.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Agentless settings and the vault of connection credentials. */
    agentless: { settings: AgentlessSettings; vault: Vault }
  }
}

const SWEEP_INTERVAL_MS = 5000
/** A run still Running this long after its start has lost its poller (timeouts are at most 300 s). */
export const RUN_GIVE_UP_MS = 10 * 60_000

/**
 * Marks pollers whose heartbeats stopped as offline (an event each) and fails runs whose
 * end never came. Answers what it did.
 */
export function sweepAgentless(app: FastifyInstance, now = Date.now()) {
  const { db, repos } = app
  const { settings } = app.agentless
  let offline = 0
  let abandoned = 0
  db.transaction(() => {
    for (const p of repos.agentless.goneQuiet(now - settings.offlineAfterSeconds * 1000)) {
      if (!repos.agentless.setOffline(p.id, now)) continue
      offline++
      if (p.is_activated) {
        const since = p.last_heartbeat_ms === null ? 'it never sent one' : `the last was at ${iso(p.last_heartbeat_ms)}`
        repos.events.record(now, [pollerEvent('pollerOffline', p, `Worker poller ${p.name} sent no heartbeat for ${settings.offlineAfterSeconds} s; ${since}.`)])
      }
    }
    for (const c of repos.agentless.staleRuns(now - RUN_GIVE_UP_MS)) {
      const error = `The worker poller reported no end of this run within ${RUN_GIVE_UP_MS / 60_000} minutes of its start.`
      repos.agentless.finishRun({ runId: c.run_id!, status: 'Failed', startMs: c.start_ms!, endMs: now, description: null, error, now })
      repos.agentless.setLatest({ connectionId: c.id, runId: c.run_id!, status: 'Failed', startMs: c.start_ms!, endMs: now, description: null, error })
      if (c.last_result === 'Reachable') repos.events.record(now, [connectionEvent('hostUnreachable', c, `${c.name} (${c.address}) is no longer reachable: ${error}`)])
      abandoned++
    }
  })()
  return { offline, abandoned }
}

/**
 * Loads the settings and the key and registers the pollers' health check; the loop sweeps every few seconds while the app runs
 * (one process at a time: it changes the shared pollers and runs).
 */
export function agentlessLoop(app: FastifyInstance): Loop {
  app.decorate('agentless', { settings: app.config.agentless, vault: vault(app.config.agentlessKey) })
  registerHealthCheck(app, { name: 'WorkerPoller', check: workerPollerHealth })
  return everyInterval(app, { name: 'agentless-sweeper', singleton: true, intervalMs: SWEEP_INTERVAL_MS, what: 'agentless sweep' }, () => sweepAgentless(app))
}

/** The worker pollers' health: whether every activated poller sends heartbeats. */
export function workerPollerHealth(app: FastifyInstance): { status: HealthStatus; detail: string } {
  const now = Date.now()
  const { offlineAfterSeconds } = app.agentless.settings
  const pollers = app.repos.agentless.pollers()
  if (pollers.length === 0) return { status: 'Healthy', detail: 'No worker pollers registered' }
  const active = pollers.filter((p) => p.is_activated)
  if (active.length === 0) return { status: 'Healthy', detail: `${pollers.length} worker poller(s) registered, none activated` }
  const offline = active.filter((p) => p.last_heartbeat_ms === null || now - p.last_heartbeat_ms > offlineAfterSeconds * 1000)
  if (offline.length === 0) return { status: 'Healthy', detail: `All ${active.length} activated worker poller(s) online (heartbeat within ${offlineAfterSeconds} s)` }
  const names = offline
    .slice(0, 5)
    .map((p) => `${p.name} (${p.last_heartbeat_ms === null ? 'no heartbeat yet' : `last heartbeat ${iso(p.last_heartbeat_ms)}`})`)
    .join(', ')
  const unchecked = offline.reduce((n, p) => n + p.assigned, 0)
  const detail = `${offline.length} of ${active.length} activated worker poller(s) offline: ${names}${offline.length > 5 ? ', ...' : ''}; ${unchecked} connection(s) not checked`
  return { status: offline.length === active.length && unchecked > 0 ? 'Failed' : 'Warning', detail }
}
