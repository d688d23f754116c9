// Worker pollers: the poller gateway (registration with the enrollment secret, heartbeats,
// fetching assignments, reporting runs) and the users' operations on pollers.
import crypto from 'node:crypto'
import type { components } from '../../generated/openapi.js'
import { POLLER_PREFIX, unauthenticated } from '../auth.js'
import { problem } from '../errors.js'
import { newSecret, sha256 } from '../passwords.js'
import type { Context } from '../platform/context.js'
import { iso } from '../time.js'
import { openCredentials } from './connections.js'
import { defaultsOf, type AgentlessDeps } from './deps.js'
import { connectionEvent, pollerAsset, pollerEvent } from './events.js'
import type { EventInput, PollerRow } from './ports.js'
import { secretMatches } from './settings.js'
import { assignmentView, pollerView } from './views.js'

type Schemas = components['schemas']
type ItemResult = Schemas['ItemResult']

const FUTURE_TOLERANCE_MS = 5 * 60_000

const pollerUser = (p: Pick<PollerRow, 'name'>) => `poller:${p.name}`

/** The poller a gateway call comes from (`pollerId`: its credential's), as it is now (a poller deleted meanwhile answers 401). */
async function caller(deps: AgentlessDeps, pollerId: string | undefined): Promise<PollerRow> {
  const p = pollerId ? await deps.store.poller(pollerId) : undefined
  if (!p) throw unauthenticated('The worker poller was deleted; register it again.')
  return p
}

export async function registerPoller(deps: AgentlessDeps, ctx: Context, body: Schemas['PollerRegisterRequest']): Promise<Schemas['PollerRegistration']> {
  const { settings, store, uow, audit } = deps
  const ip = ctx.sourceAddress
  const refuse = async (why: string, detail: string) => {
    await audit.record(ctx, {
      description: `Registration of worker poller "${body.name}" refused: ${why}`,
      details: { name: body.name, hostName: body.hostName ?? null, version: body.version },
      outcome: 'Refused',
      user: null,
      asset: { name: body.name, type: 'WorkerPoller', detail: 'Poller' },
    })
    return unauthenticated(detail)
  }
  if (settings.enrollmentSecret === null) throw await refuse('registration is disabled', 'Worker poller registration is disabled on this server (PRIME_POLLER_ENROLLMENT_SECRET is not set).')
  if (!secretMatches(body.enrollmentSecret, settings.enrollmentSecret)) throw await refuse('wrong enrollment secret', 'The enrollment secret is wrong.')
  const now = Date.now()
  return uow
    .run(async () => {
      const known = await store.pollerByName(body.name)
      if (known) throw problem('conflict', `A worker poller named "${known.name}" is already registered (id ${known.id}); delete it first to register it again.`)
      const id = crypto.randomUUID()
      const credential = newSecret(POLLER_PREFIX)
      await store.insertPoller({ id, name: body.name, hash: sha256(credential), hostName: body.hostName ?? null, ip, version: body.version, now })
      await audit.record(ctx, {
        description: `Worker poller "${body.name}" registered (not activated)`,
        details: { id, name: body.name, hostName: body.hostName ?? null, version: body.version },
        user: pollerUser(body),
        asset: pollerAsset({ id, name: body.name, ip_address: ip }),
      })
      return { pollerId: id, name: body.name, credential, isActivated: false, heartbeatIntervalSeconds: settings.heartbeatSeconds, serverTime: iso(now) }
    })
    .catch((err) => {
      // Registered by another request between the look-up and the insert (PostgreSQL's unique
      // index refused this one): the conflict the look-up would have found.
      if ((err as { code?: string }).code === 'duplicate-key') throw problem('conflict', `A worker poller named "${body.name}" is already registered; delete it first to register it again.`)
      throw err
    })
}

const instruction = (p: PollerRow) => (p.is_activated ? 'Check' : 'StopChecking') as 'Check' | 'StopChecking'

export async function pollerHeartbeat(deps: AgentlessDeps, ctx: Context, pollerId: string | undefined, body: Schemas['PollerHeartbeatRequest']): Promise<Schemas['PollerInstruction']> {
  const { store, uow, audit } = deps
  const ip = ctx.sourceAddress
  const now = Date.now()
  return uow.run(async () => {
    const p = await caller(deps, pollerId)
    const startedMs = body.startedTime ? Date.parse(body.startedTime) : null
    await store.heartbeat({
      id: p.id,
      now,
      version: body.version,
      hostName: body.hostName ?? null,
      ip,
      startedMs: Number.isFinite(startedMs) ? startedMs : null,
      activeChecks: body.activeChecks ?? null,
    })
    const back = p.offline_since_ms !== null && p.last_heartbeat_ms !== null
    if (back && p.is_activated) {
      await deps.events.record(now, [
        pollerEvent('pollerOnline', { ...p, ip_address: ip ?? p.ip_address }, `Worker poller ${p.name} sends heartbeats again (offline since ${iso(p.offline_since_ms!)}).`),
      ])
    }
    const changes: Record<string, { from: unknown; to: unknown }> = {}
    if (p.version !== body.version) changes.version = { from: p.version, to: body.version }
    if (body.hostName && p.host_name !== body.hostName) changes.hostName = { from: p.host_name, to: body.hostName }
    if (Object.keys(changes).length > 0 || back || p.last_heartbeat_ms === null) {
      const what = p.last_heartbeat_ms === null ? 'first heartbeat' : back ? 'online again' : `changed ${Object.keys(changes).join(', ')}`
      await audit.record(ctx, { description: `Worker poller "${p.name}": ${what}`, details: { changes, startedTime: body.startedTime ?? null }, user: pollerUser(p), asset: pollerAsset(p) })
    } else {
      // A heartbeat that changes nothing but the time is not worth an audit record.
      ctx.audit.audited = true
    }
    return {
      pollerId: p.id,
      isActivated: p.is_activated === 1,
      instruction: instruction(p),
      heartbeatIntervalSeconds: deps.settings.heartbeatSeconds,
      assignmentsRevision: p.assignments_revision,
      serverTime: iso(now),
    }
  })
}

export async function pollerAssignments(deps: AgentlessDeps, ctx: Context, pollerId: string | undefined): Promise<Schemas['PollerAssignments']> {
  const { store, audit } = deps
  const now = Date.now()
  const p = await caller(deps, pollerId)
  if (ctx.sourceAddress) await store.touch(p.id, ctx.sourceAddress)
  const d = defaultsOf(deps.settings)
  const rows = p.is_activated ? await store.assigned(p.id) : []
  const connections = rows.map((r) => assignmentView(r, openCredentials(deps, r), d))
  await audit.record(ctx, {
    description: p.is_activated
      ? `Worker poller "${p.name}" fetched its ${connections.length} connection(s) with their credentials`
      : `Worker poller "${p.name}" fetched its connections: none, it is not activated`,
    details: { revision: p.assignments_revision, connectionIds: rows.map((r) => r.id).slice(0, 1000) },
    user: pollerUser(p),
    asset: pollerAsset(p),
  })
  return { pollerId: p.id, isActivated: p.is_activated === 1, instruction: instruction(p), assignmentsRevision: p.assignments_revision, serverTime: iso(now), connections }
}

type Run = Schemas['PollerRun']

export async function pollerReportRuns(deps: AgentlessDeps, ctx: Context, pollerId: string | undefined, body: Schemas['PollerRunReport']): Promise<Schemas['ItemResults']> {
  const { store, uow, audit } = deps
  const now = Date.now()
  return uow.run(async () => {
    const p = await caller(deps, pollerId)
    if (!p.is_activated) {
      throw problem('poller-deactivated', `Worker poller ${p.name} is not activated: its runs are not recorded. Stop checking until a heartbeat answers Check.`)
    }
    if (ctx.sourceAddress) await store.touch(p.id, ctx.sourceAddress)
    const results: ItemResult[] = []
    const counts: Record<string, number> = {}
    const transitions: { id: number; from: string; to: string }[] = []
    const raised: EventInput[] = []
    // The report's connections and runs are read once and kept current as its runs are
    // written: a storage round trip per run, not four.
    const connections = new Map((await store.connectionsByIds([...new Set(body.runs.map((r) => r.connectionId))])).map((c) => [c.id, c]))
    const runs = new Map((await store.runsByIds([...new Set(body.runs.map((r) => r.runId))])).map((r) => [r.run_id, r]))
    for (const run of body.runs) {
      const outcome = await recordRun(run)
      results.push(outcome.result)
      if (outcome.result.status === 'done') counts[run.statusString] = (counts[run.statusString] ?? 0) + 1
    }
    if (raised.length) await deps.events.record(now, raised)
    const failures = results.filter((r) => r.status === 'failed')
    await audit.record(ctx, {
      description: `Worker poller "${p.name}" reported ${body.runs.length} run(s)${failures.length ? `, ${failures.length} refused` : ''}`,
      details: { recorded: counts, transitions: transitions.slice(0, 100), refused: failures.slice(0, 100) },
      outcome: failures.length === results.length ? 'Failed' : 'Succeeded',
      user: pollerUser(p),
      asset: pollerAsset(p),
    })
    return { succeeded: results.length - failures.length, failed: failures.length, results }

    async function recordRun(run: Run): Promise<{ result: ItemResult }> {
      const id = run.runId
      const fail = (code: NonNullable<ItemResult['code']>, reason: string) => ({ result: { id, status: 'failed' as const, code, reason } })
      const c = connections.get(run.connectionId)
      if (!c) return fail('not-found', `No agentless connection with id ${run.connectionId}.`)
      if (c.poller_id !== p.id) return fail('not-allowed', `Connection ${run.connectionId} is not registered to this poller.`)
      const startMs = Date.parse(run.startTime)
      const endMs = run.endTime ? Date.parse(run.endTime) : null
      if (startMs > now + FUTURE_TOLERANCE_MS) return fail('invalid', 'startTime is more than 5 minutes in the future.')
      const running = run.statusString === 'Running'
      if (running && endMs !== null) return fail('invalid', 'A Running run has no endTime.')
      if (!running && endMs === null) return fail('invalid', `A ${run.statusString} run needs its endTime.`)
      if (endMs !== null && endMs < startMs) return fail('invalid', 'endTime is before startTime.')
      if (endMs !== null && endMs > now + FUTURE_TOLERANCE_MS) return fail('invalid', 'endTime is more than 5 minutes in the future.')
      if ((run.statusString === 'Unreachable' || run.statusString === 'Failed') && !run.statusErrorDescription) {
        return fail('invalid', `An ${run.statusString} run needs its statusErrorDescription.`)
      }
      const values = {
        runId: id,
        status: run.statusString,
        startMs,
        endMs,
        description: run.statusDescription ?? null,
        error: run.statusString === 'Reachable' ? null : (run.statusErrorDescription ?? null),
        now,
      }
      const known = runs.get(id)
      if (known) {
        if (known.connection_id !== c.id) return fail('conflict', `Run ${id} belongs to connection ${known.connection_id}.`)
        if (known.status !== 'Running') {
          const same = running || (known.status === run.statusString && known.end_ms === endMs && known.start_ms === startMs)
          return same ? { result: ok(id) } : fail('conflict', `Run ${id} was already reported as ${known.status}.`)
        }
        if (running) return { result: ok(id) }
      }
      // The latest run is the one started last; a late report of an older run only joins the history.
      const latest = c.run_id === id || c.start_ms === null || startMs >= c.start_ms
      await store.storeRun({ ...values, connectionId: c.id, pollerId: p.id }, !known, latest)
      runs.set(id, {
        run_id: id,
        connection_id: c.id,
        poller_id: known ? known.poller_id : p.id,
        status: run.statusString,
        start_ms: startMs,
        end_ms: endMs,
        description: values.description,
        error: values.error,
        recorded_ms: now,
      })
      if (latest) {
        const was = c.last_result
        // What the stored row now says, for the runs after this one in the report.
        Object.assign(c, { run_id: id, start_ms: startMs, end_ms: endMs, status: run.statusString, last_result: running ? was : run.statusString })
        if (!running) {
          const reachable = run.statusString === 'Reachable'
          if (was === 'Reachable' && !reachable) {
            raised.push(connectionEvent('hostUnreachable', c, `${c.name} (${c.address}:${c.port}) is ${run.statusString}: ${run.statusErrorDescription}`))
            transitions.push({ id: c.id, from: was, to: run.statusString })
          } else if ((was === 'Unreachable' || was === 'Failed') && reachable) {
            raised.push(connectionEvent('hostReachable', c, `${c.name} (${c.address}:${c.port}) is reachable again${run.statusDescription ? `: ${run.statusDescription}` : ''}.`))
            transitions.push({ id: c.id, from: was, to: run.statusString })
          }
        }
      }
      return { result: ok(id) }
    }
  })
}

const ok = (id: string): ItemResult => ({ id, status: 'done', reason: null, code: null })

export async function listPollers(deps: AgentlessDeps): Promise<Schemas['WorkerPollerDetails']> {
  const { settings } = deps
  const now = Date.now()
  const data = (await deps.store.pollers()).map((p) => pollerView(p, settings.offlineAfterSeconds, now))
  return { recordsTotal: data.length, recordsFiltered: data.length, heartbeatIntervalSeconds: settings.heartbeatSeconds, offlineAfterSeconds: settings.offlineAfterSeconds, data }
}

export async function deletePoller(deps: AgentlessDeps, ctx: Context, pollerId: string): Promise<Schemas['WorkerPollerDeleted']> {
  const { store, uow, audit } = deps
  const now = Date.now()
  return uow.run(async () => {
    const p = await store.pollerWithCounts(pollerId)
    if (!p) throw problem('not-found', `No worker poller with id ${pollerId}.`)
    const view = pollerView(p, deps.settings.offlineAfterSeconds, now)
    const unregistered = await store.deletePoller(p.id, now)
    await audit.record(ctx, {
      description: `Deleted worker poller "${p.name}"; its credential is revoked and ${unregistered} connection(s) were unregistered`,
      details: { id: p.id, name: p.name, connectionsUnregistered: unregistered },
      asset: pollerAsset(p),
    })
    return { poller: view, connectionsUnregistered: unregistered }
  })
}

export async function setPollerActivated(deps: AgentlessDeps, ctx: Context, by: string | null, body: Schemas['WorkerAppActivatePollerPutRequest']): Promise<Schemas['WorkerPoller']> {
  const { store, uow, audit } = deps
  const now = Date.now()
  return uow.run(async () => {
    const p = await store.poller(body.pollerId)
    if (!p) throw problem('not-found', `No worker poller with id ${body.pollerId}.`)
    const changed = (p.is_activated === 1) !== body.isActivated
    if (changed) await store.setActivated(p.id, body.isActivated, now, by)
    const state = body.isActivated ? 'activated' : 'deactivated'
    await audit.record(ctx, {
      description: changed ? `Worker poller "${p.name}" ${state}` : `Worker poller "${p.name}" was already ${state}; nothing changed`,
      details: { id: p.id, isActivated: { from: p.is_activated === 1, to: body.isActivated } },
      asset: pollerAsset(p),
    })
    return pollerView((await store.pollerWithCounts(p.id))!, deps.settings.offlineAfterSeconds, now)
  })
}
