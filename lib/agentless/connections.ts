// Agentless connections as users manage them: create, change, delete, register to a
// worker poller and unregister. Credentials are sealed before they reach the database
// and never leave it through these operations.
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { components } from '../../generated/openapi.js'
import type { ConnectionRow, PollingDefaults, PreviousError } from '../../db/agentless.js'
import { audit } from '../audit.js'
import { problem, type FieldError } from '../errors.js'
import { iso } from '../time.js'
import { connectionAsset } from './events.js'
import { changedFields, checkDraft, draftOf, LIMITS, type Checked, type Draft, type RuleError } from './rules.js'
import type { Credentials } from '../vault.js'

type Schemas = components['schemas']
type ItemResult = Schemas['ItemResult']

export const defaultsOf = (app: FastifyInstance): PollingDefaults => ({
  intervalSeconds: app.agentless.settings.defaultIntervalSeconds,
  timeoutSeconds: app.agentless.settings.defaultTimeoutSeconds,
})

export function connectionView(r: ConnectionRow, d: PollingDefaults): Schemas['AgentlessConnection'] {
  return {
    id: r.id,
    name: r.name,
    address: r.address,
    protocol: r.protocol,
    port: r.port,
    useTls: r.use_tls === 1,
    userName: r.user_name,
    credentialType: r.credential_type,
    credentialsUpdatedTime: iso(r.credentials_updated_ms),
    isOverrideDefaults: r.is_override_defaults === 1,
    pollingIntervalSeconds: r.polling_interval_s ?? d.intervalSeconds,
    timeoutSeconds: r.timeout_s ?? d.timeoutSeconds,
    pollerId: r.poller_id,
    pollerName: r.poller_name,
    statusString: r.status,
    createdTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    updatedTime: iso(r.updated_ms),
  }
}

function previousErrors(json: string): PreviousError[] {
  try {
    const v = JSON.parse(json)
    return Array.isArray(v) ? v.slice(0, 10) : []
  } catch {
    return []
  }
}

export function statusView(r: ConnectionRow, d: PollingDefaults): Schemas['AgentlessConnectionStatus'] {
  return {
    id: r.id,
    computerName: r.name,
    address: r.address,
    protocol: r.protocol,
    port: r.port,
    userName: r.user_name,
    isOverrideDefaults: r.is_override_defaults === 1,
    pollingIntervalSeconds: r.polling_interval_s ?? d.intervalSeconds,
    timeoutSeconds: r.timeout_s ?? d.timeoutSeconds,
    pollerId: r.poller_id,
    pollerName: r.poller_name,
    statusString: r.status,
    statusDescription: r.status_description,
    statusErrorDescription: r.status_error,
    startTime: r.start_ms === null ? null : iso(r.start_ms),
    endTime: r.end_ms === null ? null : iso(r.end_ms),
    durationMs: r.start_ms === null || r.end_ms === null ? null : Math.max(0, r.end_ms - r.start_ms),
    lastReachableTime: r.last_reachable_ms === null ? null : iso(r.last_reachable_ms),
    prevRunningErrors: previousErrors(r.prev_errors),
    createdTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    updatedTime: iso(r.updated_ms),
  }
}

/** A 400 naming every broken rule of a JSON body. */
export function rulesProblem(errors: RuleError[]) {
  const fields: FieldError[] = errors.map((e) => ({ location: 'body', name: e.field, reason: e.reason }))
  return problem(
    'validation',
    fields
      .map((e) => `body/${e.name} ${e.reason}`)
      .join('; ')
      .slice(0, 1000),
    { errors: fields.slice(0, 20) },
  )
}

/**
 * The credentials stored for a connection. A value that does not open (sealed with another
 * key, or altered) answers none, and says so in the log, so that new ones can be set.
 */
export function openCredentials(app: FastifyInstance, row: ConnectionRow): Credentials {
  try {
    return app.agentless.vault.open(row.credentials, row.id)
  } catch (err) {
    app.log.warn({ connectionId: row.id, reason: (err as Error).message }, 'agentless credentials do not open with the current key; set them again')
    return { password: null, privateKey: null, privateKeyPassphrase: null }
  }
}

/**
 * Why the checked connection cannot be stored as it is (a duplicate name, an unknown or
 * full poller), or null. `id` is the connection it changes; `loads` keeps pollers'
 * connection counts across the rows of one import.
 */
export function storeProblem(app: FastifyInstance, c: Checked, id: number | null, loads?: Map<string, number>): { code: 'conflict' | 'not-found'; field: string; reason: string } | null {
  const { repos } = app
  const same = repos.agentless.connectionByName(c.values.name)
  if (same && same.id !== id) return { code: 'conflict', field: 'name', reason: `is already used by connection ${same.id} (names are unique, whatever their case)` }
  if (c.pollerId !== null) {
    const poller = repos.agentless.poller(c.pollerId)
    if (!poller) return { code: 'not-found', field: 'pollerId', reason: `names no worker poller (${c.pollerId})` }
    const current = id === null ? undefined : repos.agentless.connection(id)
    if (current?.poller_id !== c.pollerId) {
      const load = loads?.get(c.pollerId) ?? repos.agentless.pollerLoad(c.pollerId)
      if (load >= LIMITS.connectionsPerPoller) return { code: 'conflict', field: 'pollerId', reason: `poller ${poller.name} already holds ${LIMITS.connectionsPerPoller} connections` }
      // The caller stores it next: one more for this poller, one fewer for the one it leaves.
      if (loads) {
        loads.set(c.pollerId, load + 1)
        if (current?.poller_id && loads.has(current.poller_id)) loads.set(current.poller_id, loads.get(current.poller_id)! - 1)
      }
    }
  }
  return null
}

/** Writes a checked connection (new when `id` is null); call inside a transaction. Answers its id. */
export function storeConnection(app: FastifyInstance, c: Checked, id: number | null, now: number): number {
  const { repos } = app
  const before = id === null ? undefined : repos.agentless.connection(id)
  let connectionId: number
  if (id === null) connectionId = repos.agentless.insertConnection(c.values, c.credentialType, c.pollerId, now)
  else {
    connectionId = id
    repos.agentless.updateConnection(id, c.values, c.pollerId, now)
  }
  if (c.credentials) repos.agentless.setCredentials(connectionId, c.credentialType, app.agentless.vault.seal(c.credentials, connectionId), now)
  // Both pollers concerned fetch again: the one that gains it and the one that loses it.
  repos.agentless.bumpRevision(c.pollerId)
  if (before && before.poller_id !== c.pollerId) repos.agentless.bumpRevision(before.poller_id)
  return connectionId
}

/** What the audit record says of a change: settings as stored, secrets only as "changed". */
function auditValues(c: Checked) {
  const secrets = c.credentials
    ? Object.fromEntries(
        Object.entries(c.credentials)
          .filter(([, v]) => v !== null)
          .map(([k]) => [k, '***']),
      )
    : {}
  return { ...c.values, pollerId: c.pollerId, credentialType: c.credentialType, ...secrets }
}

function failStore(req: FastifyRequest, c: Checked, id: number | null) {
  const p = storeProblem(req.server, c, id)
  if (!p) return
  throw problem(p.code, `${p.field} ${p.reason}.`, { errors: [{ location: 'body', name: p.field, reason: p.reason }] })
}

export function createConnection(req: FastifyRequest, body: Schemas['AgentlessRsConnectionDetailsPostRequest']) {
  const app = req.server
  const draft: Draft = {
    name: body.name,
    address: body.address,
    protocol: body.protocol,
    port: body.port ?? null,
    useTls: body.useTls ?? null,
    userName: body.userName,
    password: body.password,
    privateKey: body.privateKey,
    privateKeyPassphrase: body.privateKeyPassphrase,
    isOverrideDefaults: body.isOverrideDefaults ?? false,
    pollingIntervalSeconds: body.pollingIntervalSeconds ?? null,
    timeoutSeconds: body.timeoutSeconds ?? null,
    pollerId: body.pollerId ?? null,
  }
  const { errors, checked } = checkDraft(draft)
  if (!checked) throw rulesProblem(errors)
  const now = Date.now()
  return app.db.transaction(() => {
    failStore(req, checked, null)
    const id = storeConnection(app, checked, null, now)
    const row = app.repos.agentless.connection(id)!
    audit(req, {
      description: `Created agentless connection "${row.name}" (${row.protocol} ${row.address}:${row.port})${row.poller_name ? `, registered to poller ${row.poller_name}` : ''}`,
      details: { id, ...auditValues(checked) },
      asset: connectionAsset(row),
    })
    return connectionView(row, defaultsOf(app))
  })()
}

export function updateConnection(req: FastifyRequest, body: Schemas['AgentlessRsConnectionDetailsUpdateRequest']) {
  const app = req.server
  const now = Date.now()
  return app.db.transaction(() => {
    const row = app.repos.agentless.connection(body.id)
    if (!row) throw problem('not-found', `No agentless connection with id ${body.id}.`)
    const stored = { row, credentials: openCredentials(app, row) }
    const draft = draftOf(row)
    const given = body as Record<string, unknown>
    const has = (k: string) => Object.hasOwn(given, k)
    if (has('name')) draft.name = body.name!
    if (has('address')) draft.address = body.address!
    if (has('protocol')) draft.protocol = body.protocol!
    if (has('port')) draft.port = body.port ?? null
    if (has('useTls')) draft.useTls = body.useTls ?? null
    if (has('userName')) draft.userName = body.userName!
    if (has('password')) draft.password = body.password
    if (has('privateKey')) draft.privateKey = body.privateKey
    if (has('privateKeyPassphrase')) draft.privateKeyPassphrase = body.privateKeyPassphrase ?? null
    if (has('isOverrideDefaults')) {
      draft.isOverrideDefaults = body.isOverrideDefaults!
      // Turning the override off drops the connection's own options.
      if (!body.isOverrideDefaults) {
        draft.pollingIntervalSeconds = null
        draft.timeoutSeconds = null
      }
    }
    if (has('pollingIntervalSeconds')) draft.pollingIntervalSeconds = body.pollingIntervalSeconds ?? null
    if (has('timeoutSeconds')) draft.timeoutSeconds = body.timeoutSeconds ?? null
    if (has('pollerId')) draft.pollerId = body.pollerId ?? null
    const { errors, checked } = checkDraft(draft, stored)
    if (!checked) throw rulesProblem(errors)
    failStore(req, checked, row.id)
    const changed = changedFields(row, checked, stored.credentials)
    if (changed.length > 0) storeConnection(app, checked, row.id, now)
    const after = app.repos.agentless.connection(row.id)!
    const secret = new Set(['password', 'privateKey', 'privateKeyPassphrase'])
    audit(req, {
      description: changed.length ? `Changed agentless connection "${after.name}": ${changed.join(', ')}` : `Agentless connection "${after.name}" unchanged (the values sent are the stored ones)`,
      details: {
        id: row.id,
        changes: Object.fromEntries(changed.map((f) => [f, secret.has(f) ? 'changed' : { from: beforeValue(row, f), to: afterValue(after, f) }])),
      },
      asset: connectionAsset(after),
    })
    return connectionView(after, defaultsOf(app))
  })()
}

const columnOf: Record<string, keyof ConnectionRow> = {
  name: 'name',
  address: 'address',
  protocol: 'protocol',
  port: 'port',
  useTls: 'use_tls',
  userName: 'user_name',
  isOverrideDefaults: 'is_override_defaults',
  pollingIntervalSeconds: 'polling_interval_s',
  timeoutSeconds: 'timeout_s',
  pollerId: 'poller_id',
}
const beforeValue = (row: ConnectionRow, field: string) => (columnOf[field] ? row[columnOf[field]] : null)
const afterValue = beforeValue

const done = (id: number | string): ItemResult => ({ id: String(id), status: 'done', reason: null, code: null })
const failed = (id: number | string, code: NonNullable<ItemResult['code']>, reason: string): ItemResult => ({ id: String(id), status: 'failed', code, reason })
const summary = (results: ItemResult[]) => {
  const failures = results.filter((r) => r.status === 'failed').length
  return { succeeded: results.length - failures, failed: failures, results }
}

export function deleteConnections(req: FastifyRequest, ids: number[]) {
  const app = req.server
  return app.db.transaction(() => {
    const results: ItemResult[] = []
    const deleted: { id: number; name: string }[] = []
    for (const id of ids) {
      const row = app.repos.agentless.connection(id)
      if (!row) {
        results.push(failed(id, 'not-found', `No agentless connection with id ${id}.`))
        continue
      }
      app.repos.agentless.deleteConnection(id)
      app.repos.agentless.bumpRevision(row.poller_id)
      deleted.push({ id, name: row.name })
      results.push(done(id))
    }
    const answer = summary(results)
    audit(req, {
      description: `Deleted ${deleted.length} agentless connection(s)${answer.failed ? `; ${answer.failed} unknown` : ''}`,
      details: { deleted, notFound: results.filter((r) => r.status === 'failed').map((r) => r.id) },
      outcome: deleted.length === 0 ? 'Failed' : 'Succeeded',
      asset: deleted.length === 1 ? { key: String(deleted[0].id), name: deleted[0].name, type: 'AgentlessHost' } : { type: 'AgentlessHost' },
    })
    return answer
  })()
}

export function registerConnections(req: FastifyRequest, pollerId: string, ids: number[]) {
  const app = req.server
  const now = Date.now()
  return app.db.transaction(() => {
    const poller = app.repos.agentless.poller(pollerId)
    if (!poller) throw problem('not-found', `No worker poller with id ${pollerId}.`)
    let load = app.repos.agentless.pollerLoad(poller.id)
    const results: ItemResult[] = []
    const moved: { id: number; from: string | null }[] = []
    for (const id of ids) {
      const row = app.repos.agentless.connection(id)
      if (!row) {
        results.push(failed(id, 'not-found', `No agentless connection with id ${id}.`))
        continue
      }
      if (row.poller_id === poller.id) {
        results.push(done(id))
        continue
      }
      if (load >= LIMITS.connectionsPerPoller) {
        results.push(failed(id, 'conflict', `Poller ${poller.name} already holds ${LIMITS.connectionsPerPoller} connections.`))
        continue
      }
      app.repos.agentless.setPoller(id, poller.id, now)
      app.repos.agentless.bumpRevision(row.poller_id)
      moved.push({ id, from: row.poller_name })
      load++
      results.push(done(id))
    }
    if (moved.length) app.repos.agentless.bumpRevision(poller.id)
    const answer = summary(results)
    audit(req, {
      description: `Registered ${moved.length} agentless connection(s) to worker poller ${poller.name}${answer.failed ? `; ${answer.failed} failed` : ''}${poller.is_activated ? '' : ' (the poller is not activated: it checks them once it is)'}`,
      details: { pollerId: poller.id, pollerName: poller.name, registered: moved, results: answer.results.filter((r) => r.status === 'failed') },
      outcome: answer.succeeded === 0 ? 'Failed' : 'Succeeded',
      asset: { key: poller.id, name: poller.name, type: 'WorkerPoller', detail: 'Poller' },
    })
    return answer
  })()
}

export function unregisterConnections(req: FastifyRequest, pollerId: string | null | undefined, ids: number[]) {
  const app = req.server
  const now = Date.now()
  return app.db.transaction(() => {
    const poller = pollerId ? app.repos.agentless.poller(pollerId) : undefined
    if (pollerId && !poller) throw problem('not-found', `No worker poller with id ${pollerId}.`)
    const results: ItemResult[] = []
    const unregistered: { id: number; from: string | null }[] = []
    for (const id of ids) {
      const row = app.repos.agentless.connection(id)
      if (!row) {
        results.push(failed(id, 'not-found', `No agentless connection with id ${id}.`))
        continue
      }
      if (row.poller_id === null) {
        results.push(done(id))
        continue
      }
      if (poller && row.poller_id !== poller.id) {
        results.push(failed(id, 'not-allowed', `Connection ${id} is registered to poller ${row.poller_name}, not ${poller.name}.`))
        continue
      }
      app.repos.agentless.setPoller(id, null, now)
      app.repos.agentless.bumpRevision(row.poller_id)
      unregistered.push({ id, from: row.poller_name })
      results.push(done(id))
    }
    const answer = summary(results)
    audit(req, {
      description: `Unregistered ${unregistered.length} agentless connection(s)${poller ? ` from worker poller ${poller.name}` : ''}${answer.failed ? `; ${answer.failed} failed` : ''}`,
      details: { pollerId: poller?.id ?? null, unregistered, results: answer.results.filter((r) => r.status === 'failed') },
      outcome: answer.succeeded === 0 ? 'Failed' : 'Succeeded',
      asset: poller ? { key: poller.id, name: poller.name, type: 'WorkerPoller', detail: 'Poller' } : { type: 'AgentlessHost' },
    })
    return answer
  })()
}
