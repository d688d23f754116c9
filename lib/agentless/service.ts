// Agentless checking: connections as users manage them (one at a time or from a CSV file),
// their files, the worker pollers (the poller gateway and the users' operations on them),
// the asset producer and the upkeep of pollers and runs. Takes plain inputs (the caller's
// context and the parsed request), so it runs without Fastify.
import type { components } from '../../generated/openapi.js'
import type { HealthVerdict } from '../platform/health.js'
import type { Context } from '../platform/context.js'
import { iso } from '../time.js'
import { publishAssets } from './assets.js'
import { createConnection, deleteConnections, registerConnections, unregisterConnections, updateConnection } from './connections.js'
import { importConnections } from './csv-import.js'
import { defaultsOf, type AgentlessDeps } from './deps.js'
import { connectionEvent, pollerEvent } from './events.js'
import { exportConnections, exportStatus, type ExportSelection } from './exports.js'
import { deletePoller, listPollers, pollerAssignments, pollerHeartbeat, pollerReportRuns, registerPoller, setPollerActivated } from './pollers.js'
import type { AgentlessFilter, ConnectionRow, PollerWithCounts, PollingDefaults, Sort } from './ports.js'

type Schemas = components['schemas']

export type { AgentlessDeps } from './deps.js'

/** A run still Running this long after its start has lost its poller (timeouts are at most 300 s). */
export const RUN_GIVE_UP_MS = 10 * 60_000

/** A page of the status list: the rows, or (a very large page) the rows streamed a page at a time. */
export type StatusPage = { total: number; filtered: number; defaults: PollingDefaults } & ({ rows: ConnectionRow[] } | { stream: AsyncIterable<ConnectionRow> })

export function agentlessService(deps: AgentlessDeps) {
  const { store, uow } = deps
  return {
    /** The polling options of connections that do not override them. */
    defaults: (): PollingDefaults => defaultsOf(deps.settings),

    /** A page of the status list; above `streamAbove` rows, the ids in order then the rows a page at a time. */
    async statusPage(filter: AgentlessFilter, order: Sort, pageSize: number, offset: number, streamAbove: number): Promise<StatusPage> {
      const defaults = defaultsOf(deps.settings)
      if (pageSize > streamAbove) {
        // The ids in order (8 bytes a connection), then the rows a thousand at a time.
        const { total, filtered } = await store.counts(filter)
        const ids = await store.ids(filter, order, defaults, pageSize, offset)
        return { total, filtered, defaults, stream: store.connectionsInPages(ids) }
      }
      const { total, filtered, rows } = await store.list(filter, order, defaults, pageSize, offset)
      return { total, filtered, defaults, rows }
    },

    create: (ctx: Context, body: Schemas['AgentlessRsConnectionDetailsPostRequest']) => createConnection(deps, ctx, body),
    update: (ctx: Context, body: Schemas['AgentlessRsConnectionDetailsUpdateRequest']) => updateConnection(deps, ctx, body),
    remove: (ctx: Context, ids: number[]) => deleteConnections(deps, ctx, ids),
    register: (ctx: Context, pollerId: string, ids: number[]) => registerConnections(deps, ctx, pollerId, ids),
    unregister: (ctx: Context, pollerId: string | null | undefined, ids: number[]) => unregisterConnections(deps, ctx, pollerId, ids),
    /** Applies a CSV file of connections (`fileName` as uploaded, cleaned). */
    importCsv: (ctx: Context, fileName: string | null, data: Buffer) => importConnections(deps, ctx, fileName, data),
    exportStatus: (ctx: Context, format: 'csv' | 'pdf', sel: ExportSelection) => exportStatus(deps, ctx, format, sel),
    exportConnections: (ctx: Context, sel: ExportSelection) => exportConnections(deps, ctx, sel),

    listPollers: () => listPollers(deps),
    deletePoller: (ctx: Context, pollerId: string) => deletePoller(deps, ctx, pollerId),
    /** `by`: the account that changes it, as the poller's activationChangedBy shows it. */
    setPollerActivated: (ctx: Context, by: string | null, body: Schemas['WorkerAppActivatePollerPutRequest']) => setPollerActivated(deps, ctx, by, body),
    registerPoller: (ctx: Context, body: Schemas['PollerRegisterRequest']) => registerPoller(deps, ctx, body),
    /** The poller gateway: `pollerId` is the poller the call's credential belongs to. */
    heartbeat: (ctx: Context, pollerId: string | undefined, body: Schemas['PollerHeartbeatRequest']) => pollerHeartbeat(deps, ctx, pollerId, body),
    assignments: (ctx: Context, pollerId: string | undefined) => pollerAssignments(deps, ctx, pollerId),
    reportRuns: (ctx: Context, pollerId: string | undefined, body: Schemas['PollerRunReport']) => pollerReportRuns(deps, ctx, pollerId, body),

    publishAssets: (ctx: Context, trigger: 'ReplayAll' | 'SendMonitorOldLocation') => publishAssets(deps, ctx, trigger),

    /**
     * Marks pollers whose heartbeats stopped as offline (an event each) and fails runs whose
     * end never came. Answers what it did.
     */
    async sweep(now = Date.now()): Promise<{ offline: number; abandoned: number }> {
      const { settings, events } = deps
      let offline = 0
      let abandoned = 0
      await uow.run(async () => {
        for (const p of await store.goneQuiet(now - settings.offlineAfterSeconds * 1000)) {
          if (!(await store.setOffline(p.id, now))) continue
          offline++
          if (p.is_activated) {
            const since = p.last_heartbeat_ms === null ? 'it never sent one' : `the last was at ${iso(p.last_heartbeat_ms)}`
            await events.record(now, [pollerEvent('pollerOffline', p, `Worker poller ${p.name} sent no heartbeat for ${settings.offlineAfterSeconds} s; ${since}.`)])
          }
        }
        for (const c of await store.staleRuns(now - RUN_GIVE_UP_MS)) {
          const error = `The worker poller reported no end of this run within ${RUN_GIVE_UP_MS / 60_000} minutes of its start.`
          // Skipped when the poller's report of the run's end committed since it was found stale.
          if (!(await store.abandonRun({ runId: c.run_id!, status: 'Failed', startMs: c.start_ms!, endMs: now, description: null, error, now }))) continue
          await store.setLatest({ connectionId: c.id, runId: c.run_id!, status: 'Failed', startMs: c.start_ms!, endMs: now, description: null, error })
          if (c.last_result === 'Reachable') await events.record(now, [connectionEvent('hostUnreachable', c, `${c.name} (${c.address}) is no longer reachable: ${error}`)])
          abandoned++
        }
      })
      return { offline, abandoned }
    },
  }
}

export type AgentlessService = ReturnType<typeof agentlessService>

/** The worker pollers' health, from the pollers as they are now: whether every activated poller sends heartbeats. */
export function workerPollerVerdict(pollers: PollerWithCounts[], offlineAfterSeconds: number, now: number): HealthVerdict {
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
