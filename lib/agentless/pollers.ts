// Worker pollers: the poller gateway (registration with the enrollment secret, heartbeats,
// fetching assignments, reporting runs) and the users' operations on pollers.
import crypto from 'node:crypto'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { components } from '../../generated/openapi.js'
import type { PollerRow, PollerWithCounts } from '../../db/agentless.js'
import { audit } from '../audit.js'
import { contextOf } from '../platform/context.js'
import { POLLER_PREFIX, unauthenticated } from '../auth.js'
import { problem } from '../errors.js'
import { newSecret, sha256 } from '../passwords.js'
import { iso } from '../time.js'
import { defaultsOf, openCredentials } from './connections.js'
import { connectionEvent, pollerAsset, pollerEvent } from './events.js'
import { secretMatches } from './settings.js'

type Schemas = components['schemas']
type ItemResult = Schemas['ItemResult']

const FUTURE_TOLERANCE_MS = 5 * 60_000

export function pollerView(p: PollerWithCounts, offlineAfterSeconds: number, now: number): Schemas['WorkerPoller'] {
  return {
    id: p.id,
    name: p.name,
    hostName: p.host_name,
    ipAddress: p.ip_address,
    version: p.version,
    isActivated: p.is_activated === 1,
    connectionStatus: p.last_heartbeat_ms !== null && now - p.last_heartbeat_ms <= offlineAfterSeconds * 1000 ? 'Online' : 'Offline',
    activationChangedTime: p.activation_changed_ms === null ? null : iso(p.activation_changed_ms),
    activationChangedBy: p.activation_changed_by,
    lastHeartbeatTime: p.last_heartbeat_ms === null ? null : iso(p.last_heartbeat_ms),
    createdTime: iso(p.created_ms),
    creationTimeEpoch: p.created_ms,
    connectionsAssigned: p.assigned,
    connectionsReachable: p.reachable,
    connectionsFailing: p.failing,
    connectionsPending: p.pending,
  }
}

const pollerUser = (p: Pick<PollerRow, 'name'>) => `poller:${p.name}`

/** The poller a gateway call comes from, as it is now (a poller deleted meanwhile answers 401). */
function caller(req: FastifyRequest): PollerRow {
  const p = req.poller ? req.server.repos.agentless.poller(req.poller.id) : undefined
  if (!p) throw unauthenticated('The worker poller was deleted; register it again.')
  return p
}

export function registerPoller(req: FastifyRequest, body: Schemas['PollerRegisterRequest']): Schemas['PollerRegistration'] {
  const app = req.server
  const { settings } = app.agentless
  const refuse = (why: string, detail: string) => {
    audit(req, {
      description: `Registration of worker poller "${body.name}" refused: ${why}`,
      details: { name: body.name, hostName: body.hostName ?? null, version: body.version },
      outcome: 'Refused',
      user: null,
      asset: { name: body.name, type: 'WorkerPoller', detail: 'Poller' },
    })
    return unauthenticated(detail)
  }
  if (settings.enrollmentSecret === null) throw refuse('registration is disabled', 'Worker poller registration is disabled on this server (PRIME_POLLER_ENROLLMENT_SECRET is not set).')
  if (!secretMatches(body.enrollmentSecret, settings.enrollmentSecret)) throw refuse('wrong enrollment secret', 'The enrollment secret is wrong.')
  const now = Date.now()
  return app.db.transaction(() => {
    const known = app.repos.agentless.pollerByName(body.name)
    if (known) throw problem('conflict', `A worker poller named "${known.name}" is already registered (id ${known.id}); delete it first to register it again.`)
    const id = crypto.randomUUID()
    const credential = newSecret(POLLER_PREFIX)
    app.repos.agentless.insertPoller({ id, name: body.name, hash: sha256(credential), hostName: body.hostName ?? null, ip: req.ip ?? null, version: body.version, now })
    audit(req, {
      description: `Worker poller "${body.name}" registered (not activated)`,
      details: { id, name: body.name, hostName: body.hostName ?? null, version: body.version },
      user: pollerUser(body),
      asset: pollerAsset({ id, name: body.name, ip_address: req.ip ?? null }),
    })
    return { pollerId: id, name: body.name, credential, isActivated: false, heartbeatIntervalSeconds: settings.heartbeatSeconds, serverTime: iso(now) }
  })()
}

const instruction = (p: PollerRow) => (p.is_activated ? 'Check' : 'StopChecking') as 'Check' | 'StopChecking'

export function pollerHeartbeat(req: FastifyRequest, body: Schemas['PollerHeartbeatRequest']): Schemas['PollerInstruction'] {
  const app = req.server
  const now = Date.now()
  return app.db.transaction(() => {
    const p = caller(req)
    const startedMs = body.startedTime ? Date.parse(body.startedTime) : null
    app.repos.agentless.heartbeat({
      id: p.id,
      now,
      version: body.version,
      hostName: body.hostName ?? null,
      ip: req.ip ?? null,
      startedMs: Number.isFinite(startedMs) ? startedMs : null,
      activeChecks: body.activeChecks ?? null,
    })
    const back = p.offline_since_ms !== null && p.last_heartbeat_ms !== null
    if (back && p.is_activated) {
      app.repos.events.record(now, [
        pollerEvent('pollerOnline', { ...p, ip_address: req.ip ?? p.ip_address }, `Worker poller ${p.name} sends heartbeats again (offline since ${iso(p.offline_since_ms!)}).`),
      ])
    }
    const changes: Record<string, { from: unknown; to: unknown }> = {}
    if (p.version !== body.version) changes.version = { from: p.version, to: body.version }
    if (body.hostName && p.host_name !== body.hostName) changes.hostName = { from: p.host_name, to: body.hostName }
    if (Object.keys(changes).length > 0 || back || p.last_heartbeat_ms === null) {
      const what = p.last_heartbeat_ms === null ? 'first heartbeat' : back ? 'online again' : `changed ${Object.keys(changes).join(', ')}`
      audit(req, { description: `Worker poller "${p.name}": ${what}`, details: { changes, startedTime: body.startedTime ?? null }, user: pollerUser(p), asset: pollerAsset(p) })
    } else {
      // A heartbeat that changes nothing but the time is not worth an audit record.
      contextOf(req).audit.audited = true
    }
    return {
      pollerId: p.id,
      isActivated: p.is_activated === 1,
      instruction: instruction(p),
      heartbeatIntervalSeconds: app.agentless.settings.heartbeatSeconds,
      assignmentsRevision: p.assignments_revision,
      serverTime: iso(now),
    }
  })()
}

export function pollerAssignments(req: FastifyRequest, reply: FastifyReply): Schemas['PollerAssignments'] {
  const app = req.server
  const now = Date.now()
  const p = caller(req)
  if (req.ip) app.repos.agentless.touch(p.id, req.ip)
  const d = defaultsOf(app)
  const rows = p.is_activated ? app.repos.agentless.assigned(p.id) : []
  const connections = rows.map((r) => {
    const c = openCredentials(app, r)
    return {
      id: r.id,
      name: r.name,
      address: r.address,
      protocol: r.protocol,
      port: r.port,
      useTls: r.use_tls === 1,
      userName: r.user_name,
      credentialType: r.credential_type,
      password: c.password,
      privateKey: c.privateKey,
      privateKeyPassphrase: c.privateKeyPassphrase,
      pollingIntervalSeconds: r.polling_interval_s ?? d.intervalSeconds,
      timeoutSeconds: r.timeout_s ?? d.timeoutSeconds,
      lastStartTime: r.start_ms === null ? null : iso(r.start_ms),
    }
  })
  audit(req, {
    description: p.is_activated
      ? `Worker poller "${p.name}" fetched its ${connections.length} connection(s) with their credentials`
      : `Worker poller "${p.name}" fetched its connections: none, it is not activated`,
    details: { revision: p.assignments_revision, connectionIds: rows.map((r) => r.id).slice(0, 1000) },
    user: pollerUser(p),
    asset: pollerAsset(p),
  })
  reply.header('cache-control', 'no-store')
  return { pollerId: p.id, isActivated: p.is_activated === 1, instruction: instruction(p), assignmentsRevision: p.assignments_revision, serverTime: iso(now), connections }
}

type Run = Schemas['PollerRun']

export function pollerReportRuns(req: FastifyRequest, body: Schemas['PollerRunReport']): Schemas['ItemResults'] {
  const app = req.server
  const { repos } = app
  const now = Date.now()
  return app.db.transaction(() => {
    const p = caller(req)
    if (!p.is_activated) {
      throw problem('poller-deactivated', `Worker poller ${p.name} is not activated: its runs are not recorded. Stop checking until a heartbeat answers Check.`)
    }
    if (req.ip) repos.agentless.touch(p.id, req.ip)
    const results: ItemResult[] = []
    const counts: Record<string, number> = {}
    const transitions: { id: number; from: string; to: string }[] = []
    for (const run of body.runs) {
      const outcome = recordRun(run)
      results.push(outcome.result)
      if (outcome.result.status === 'done') counts[run.statusString] = (counts[run.statusString] ?? 0) + 1
    }
    const failures = results.filter((r) => r.status === 'failed')
    audit(req, {
      description: `Worker poller "${p.name}" reported ${body.runs.length} run(s)${failures.length ? `, ${failures.length} refused` : ''}`,
      details: { recorded: counts, transitions: transitions.slice(0, 100), refused: failures.slice(0, 100) },
      outcome: failures.length === results.length ? 'Failed' : 'Succeeded',
      user: pollerUser(p),
      asset: pollerAsset(p),
    })
    return { succeeded: results.length - failures.length, failed: failures.length, results }

    function recordRun(run: Run): { result: ItemResult } {
      const id = run.runId
      const fail = (code: NonNullable<ItemResult['code']>, reason: string) => ({ result: { id, status: 'failed' as const, code, reason } })
      const c = repos.agentless.connection(run.connectionId)
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
      const known = repos.agentless.run(id)
      if (known) {
        if (known.connection_id !== c.id) return fail('conflict', `Run ${id} belongs to connection ${known.connection_id}.`)
        if (known.status !== 'Running') {
          const same = running || (known.status === run.statusString && known.end_ms === endMs && known.start_ms === startMs)
          return same ? { result: ok(id) } : fail('conflict', `Run ${id} was already reported as ${known.status}.`)
        }
        if (running) return { result: ok(id) }
        repos.agentless.finishRun(values)
      } else {
        repos.agentless.insertRun({ ...values, connectionId: c.id, pollerId: p.id })
      }
      // The latest run is the one started last; a late report of an older run only joins the history.
      if (c.run_id === id || c.start_ms === null || startMs >= c.start_ms) {
        repos.agentless.setLatest({ connectionId: c.id, ...values })
        if (!running) {
          const was = c.last_result
          const reachable = run.statusString === 'Reachable'
          if (was === 'Reachable' && !reachable) {
            repos.events.record(now, [connectionEvent('hostUnreachable', c, `${c.name} (${c.address}:${c.port}) is ${run.statusString}: ${run.statusErrorDescription}`)])
            transitions.push({ id: c.id, from: was, to: run.statusString })
          } else if ((was === 'Unreachable' || was === 'Failed') && reachable) {
            repos.events.record(now, [connectionEvent('hostReachable', c, `${c.name} (${c.address}:${c.port}) is reachable again${run.statusDescription ? `: ${run.statusDescription}` : ''}.`)])
            transitions.push({ id: c.id, from: was, to: run.statusString })
          }
        }
      }
      return { result: ok(id) }
    }
  })()
}

const ok = (id: string): ItemResult => ({ id, status: 'done', reason: null, code: null })

export function listPollers(req: FastifyRequest): Schemas['WorkerPollerDetails'] {
  const { settings } = req.server.agentless
  const now = Date.now()
  const data = req.server.repos.agentless.pollers().map((p) => pollerView(p, settings.offlineAfterSeconds, now))
  return { recordsTotal: data.length, recordsFiltered: data.length, heartbeatIntervalSeconds: settings.heartbeatSeconds, offlineAfterSeconds: settings.offlineAfterSeconds, data }
}

export function deletePoller(req: FastifyRequest, pollerId: string): Schemas['WorkerPollerDeleted'] {
  const app = req.server
  const now = Date.now()
  return app.db.transaction(() => {
    const p = app.repos.agentless.pollerWithCounts(pollerId)
    if (!p) throw problem('not-found', `No worker poller with id ${pollerId}.`)
    const view = pollerView(p, app.agentless.settings.offlineAfterSeconds, now)
    const unregistered = app.repos.agentless.deletePoller(p.id, now)
    audit(req, {
      description: `Deleted worker poller "${p.name}"; its credential is revoked and ${unregistered} connection(s) were unregistered`,
      details: { id: p.id, name: p.name, connectionsUnregistered: unregistered },
      asset: pollerAsset(p),
    })
    return { poller: view, connectionsUnregistered: unregistered }
  })()
}

export function setPollerActivated(req: FastifyRequest, body: Schemas['WorkerAppActivatePollerPutRequest']): Schemas['WorkerPoller'] {
  const app = req.server
  const now = Date.now()
  return app.db.transaction(() => {
    const p = app.repos.agentless.poller(body.pollerId)
    if (!p) throw problem('not-found', `No worker poller with id ${body.pollerId}.`)
    const changed = (p.is_activated === 1) !== body.isActivated
    if (changed) app.repos.agentless.setActivated(p.id, body.isActivated, now, req.principal?.name ?? null)
    const state = body.isActivated ? 'activated' : 'deactivated'
    audit(req, {
      description: changed ? `Worker poller "${p.name}" ${state}` : `Worker poller "${p.name}" was already ${state}; nothing changed`,
      details: { id: p.id, isActivated: { from: p.is_activated === 1, to: body.isActivated } },
      asset: pollerAsset(p),
    })
    return pollerView(app.repos.agentless.pollerWithCounts(p.id)!, app.agentless.settings.offlineAfterSeconds, now)
  })()
}
