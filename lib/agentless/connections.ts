// Agentless connections as users manage them: create, change, delete, register to a
// worker poller and unregister. Credentials are sealed before they reach the database
// and never leave it through these operations.
import type { components } from '../../generated/openapi.js'
import { problem, type FieldError } from '../errors.js'
import type { Context } from '../platform/context.js'
import type { Credentials } from '../vault.js'
import { defaultsOf, type AgentlessDeps } from './deps.js'
import { connectionAsset } from './events.js'
import type { ConnectionRow, PollerRow } from './ports.js'
import { changedFields, checkDraft, draftOf, LIMITS, type Checked, type Draft, type RuleError } from './rules.js'
import { connectionView } from './views.js'

type Schemas = components['schemas']
type ItemResult = Schemas['ItemResult']

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
export function openCredentials(deps: Pick<AgentlessDeps, 'vault' | 'log'>, row: ConnectionRow): Credentials {
  try {
    return deps.vault.open(row.credentials, row.id)
  } catch (err) {
    deps.log.warn({ connectionId: row.id, reason: (err as Error).message }, 'agentless credentials do not open with the current key; set them again')
    return { password: null, privateKey: null, privateKeyPassphrase: null }
  }
}

/**
 * What a file import reads once and writes last, so that its rows cost no storage round trip
 * they can do without: the stored connections of the names it holds (by `nocaseKey`), the
 * pollers, their connection counts, and the revision bumps, summed per poller.
 */
export interface StoreBatch {
  named: Map<string, ConnectionRow | null>
  pollers: Map<string, PollerRow | undefined>
  loads: Map<string, number>
  bumps: Map<string, number>
}

/** A name as the name column's NOCASE collation compares it: A-Z folded, nothing else. */
export const nocaseKey = (name: string) => name.replace(/[A-Z]+/g, (m) => m.toLowerCase())

/**
 * A batch over these names, inside a unit of work. The rows it read stand for the stored ones
 * while it is open: each connection is changed at most once, through it, and the names it
 * inserts are not asked for again.
 */
export async function openBatch(deps: AgentlessDeps, names: readonly string[]): Promise<StoreBatch> {
  const named = new Map<string, ConnectionRow | null>(names.map((n) => [nocaseKey(n), null]))
  for (const row of await deps.store.connectionsByNames(names)) named.set(nocaseKey(row.name), row)
  return { named, pollers: new Map(), loads: new Map(), bumps: new Map() }
}

/** Writes what the batch kept for the end: the revision bumps. */
export async function closeBatch(deps: AgentlessDeps, batch: StoreBatch): Promise<void> {
  for (const [pollerId, n] of batch.bumps) await deps.store.bumpRevision(pollerId, n)
  batch.bumps.clear()
}

async function connectionNamed(deps: AgentlessDeps, name: string, batch: StoreBatch | undefined) {
  const known = batch?.named.get(nocaseKey(name))
  return known !== undefined ? (known ?? undefined) : await deps.store.connectionByName(name)
}

/** The poller a connection is to be set to, held against its deletion (the unit sets it next). */
async function pollerOf(deps: AgentlessDeps, id: string, batch: StoreBatch | undefined) {
  if (!batch) return deps.store.poller(id, true)
  if (!batch.pollers.has(id)) batch.pollers.set(id, await deps.store.poller(id, true))
  return batch.pollers.get(id)
}

/**
 * Why the checked connection cannot be stored as it is (a duplicate name, an unknown or
 * full poller), or null. `current` is the stored connection it changes (none: a new one).
 */
export async function storeProblem(
  deps: AgentlessDeps,
  c: Checked,
  current: ConnectionRow | undefined,
  batch?: StoreBatch,
): Promise<{ code: 'conflict' | 'not-found'; field: string; reason: string } | null> {
  const same = await connectionNamed(deps, c.values.name, batch)
  if (same && same.id !== current?.id) return { code: 'conflict', field: 'name', reason: `is already used by connection ${same.id} (names are unique, whatever their case)` }
  if (c.pollerId !== null) {
    const poller = await pollerOf(deps, c.pollerId, batch)
    if (!poller) return { code: 'not-found', field: 'pollerId', reason: `names no worker poller (${c.pollerId})` }
    if (current?.poller_id !== c.pollerId) {
      const loads = batch?.loads
      // Held: the connection is stored next; concurrent ones to this poller count after it.
      const load = loads?.get(c.pollerId) ?? (await deps.store.pollerLoad(c.pollerId, true))
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

/**
 * Writes a checked connection over `current` (a new one when none); call inside a unit of
 * work. Answers its id.
 */
export async function storeConnection(deps: AgentlessDeps, c: Checked, current: ConnectionRow | undefined, now: number, batch?: StoreBatch): Promise<number> {
  const { store } = deps
  let connectionId: number
  if (current === undefined) connectionId = await store.insertConnection(c.values, c.credentialType, c.pollerId, now)
  else {
    connectionId = current.id
    await store.updateConnection(current.id, c.values, c.pollerId, now)
  }
  if (c.credentials) await store.setCredentials(connectionId, c.credentialType, deps.vault.seal(c.credentials, connectionId), now)
  // Both pollers concerned fetch again: the one that gains it and the one that loses it.
  const bump = async (pollerId: string | null) => {
    if (pollerId === null) return
    if (batch) batch.bumps.set(pollerId, (batch.bumps.get(pollerId) ?? 0) + 1)
    else await store.bumpRevision(pollerId)
  }
  await bump(c.pollerId)
  if (current && current.poller_id !== c.pollerId) await bump(current.poller_id)
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

/**
 * The name taken by another request between the look-up and the write (PostgreSQL's unique
 * index refused this one): the conflict storeProblem would have found.
 */
function nameTakenMeanwhile(err: unknown): never {
  if ((err as { code?: string }).code !== 'duplicate-key') throw err
  const reason = 'is already used by another connection (names are unique, whatever their case)'
  throw problem('conflict', `name ${reason}.`, { errors: [{ location: 'body', name: 'name', reason }] })
}

async function failStore(deps: AgentlessDeps, c: Checked, current: ConnectionRow | undefined) {
  const p = await storeProblem(deps, c, current)
  if (!p) return
  throw problem(p.code, `${p.field} ${p.reason}.`, { errors: [{ location: 'body', name: p.field, reason: p.reason }] })
}

export async function createConnection(deps: AgentlessDeps, ctx: Context, body: Schemas['AgentlessRsConnectionDetailsPostRequest']) {
  const { store, uow, audit } = deps
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
  return uow
    .run(async () => {
      await failStore(deps, checked, undefined)
      const id = await storeConnection(deps, checked, undefined, now)
      const row = (await store.connection(id))!
      await audit.record(ctx, {
        description: `Created agentless connection "${row.name}" (${row.protocol} ${row.address}:${row.port})${row.poller_name ? `, registered to poller ${row.poller_name}` : ''}`,
        details: { id, ...auditValues(checked) },
        asset: connectionAsset(row),
      })
      return connectionView(row, defaultsOf(deps.settings))
    })
    .catch(nameTakenMeanwhile)
}

export async function updateConnection(deps: AgentlessDeps, ctx: Context, body: Schemas['AgentlessRsConnectionDetailsUpdateRequest']) {
  const { store, uow, audit } = deps
  const now = Date.now()
  return uow
    .run(async () => {
      // Held: the whole row is written back below from this read, so a change committing
      // meanwhile must be read first (else its fields would be put back).
      const row = await store.connection(body.id, true)
      if (!row) throw problem('not-found', `No agentless connection with id ${body.id}.`)
      const stored = { row, credentials: openCredentials(deps, row) }
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
      await failStore(deps, checked, row)
      const changed = changedFields(row, checked, stored.credentials)
      if (changed.length > 0) await storeConnection(deps, checked, row, now)
      const after = (await store.connection(row.id))!
      const secret = new Set(['password', 'privateKey', 'privateKeyPassphrase'])
      await audit.record(ctx, {
        description: changed.length ? `Changed agentless connection "${after.name}": ${changed.join(', ')}` : `Agentless connection "${after.name}" unchanged (the values sent are the stored ones)`,
        details: {
          id: row.id,
          changes: Object.fromEntries(changed.map((f) => [f, secret.has(f) ? 'changed' : { from: beforeValue(row, f), to: afterValue(after, f) }])),
        },
        asset: connectionAsset(after),
      })
      return connectionView(after, defaultsOf(deps.settings))
    })
    .catch(nameTakenMeanwhile)
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

export async function deleteConnections(deps: AgentlessDeps, ctx: Context, ids: number[]) {
  const { store, uow, audit } = deps
  return uow.run(async () => {
    const results: ItemResult[] = []
    const deleted: { id: number; name: string }[] = []
    for (const id of ids) {
      const row = await store.connection(id)
      if (!row) {
        results.push(failed(id, 'not-found', `No agentless connection with id ${id}.`))
        continue
      }
      await store.deleteConnection(id)
      await store.bumpRevision(row.poller_id)
      deleted.push({ id, name: row.name })
      results.push(done(id))
    }
    const answer = summary(results)
    await audit.record(ctx, {
      description: `Deleted ${deleted.length} agentless connection(s)${answer.failed ? `; ${answer.failed} unknown` : ''}`,
      details: { deleted, notFound: results.filter((r) => r.status === 'failed').map((r) => r.id) },
      outcome: deleted.length === 0 ? 'Failed' : 'Succeeded',
      asset: deleted.length === 1 ? { key: String(deleted[0].id), name: deleted[0].name, type: 'AgentlessHost' } : { type: 'AgentlessHost' },
    })
    return answer
  })
}

export async function registerConnections(deps: AgentlessDeps, ctx: Context, pollerId: string, ids: number[]) {
  const { store, uow, audit } = deps
  const now = Date.now()
  return uow.run(async () => {
    // Held: the connections are set to it below, so it must not be deleted meanwhile.
    const poller = await store.poller(pollerId, true)
    if (!poller) throw problem('not-found', `No worker poller with id ${pollerId}.`, { errors: [{ location: 'body', name: 'pollerId', reason: `names no worker poller (${pollerId})` }] })
    let load = await store.pollerLoad(poller.id, true)
    const results: ItemResult[] = []
    const moved: { id: number; from: string | null }[] = []
    for (const id of ids) {
      const row = await store.connection(id)
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
      await store.setPoller(id, poller.id, now)
      await store.bumpRevision(row.poller_id)
      moved.push({ id, from: row.poller_name })
      load++
      results.push(done(id))
    }
    if (moved.length) await store.bumpRevision(poller.id)
    const answer = summary(results)
    await audit.record(ctx, {
      description: `Registered ${moved.length} agentless connection(s) to worker poller ${poller.name}${answer.failed ? `; ${answer.failed} failed` : ''}${poller.is_activated ? '' : ' (the poller is not activated: it checks them once it is)'}`,
      details: { pollerId: poller.id, pollerName: poller.name, registered: moved, results: answer.results.filter((r) => r.status === 'failed') },
      outcome: answer.succeeded === 0 ? 'Failed' : 'Succeeded',
      asset: { key: poller.id, name: poller.name, type: 'WorkerPoller', detail: 'Poller' },
    })
    return answer
  })
}

export async function unregisterConnections(deps: AgentlessDeps, ctx: Context, pollerId: string | null | undefined, ids: number[]) {
  const { store, uow, audit } = deps
  const now = Date.now()
  return uow.run(async () => {
    const poller = pollerId ? await store.poller(pollerId) : undefined
    if (pollerId && !poller) throw problem('not-found', `No worker poller with id ${pollerId}.`)
    const results: ItemResult[] = []
    const unregistered: { id: number; from: string | null }[] = []
    for (const id of ids) {
      const row = await store.connection(id)
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
      await store.setPoller(id, null, now)
      await store.bumpRevision(row.poller_id)
      unregistered.push({ id, from: row.poller_name })
      results.push(done(id))
    }
    const answer = summary(results)
    await audit.record(ctx, {
      description: `Unregistered ${unregistered.length} agentless connection(s)${poller ? ` from worker poller ${poller.name}` : ''}${answer.failed ? `; ${answer.failed} failed` : ''}`,
      details: { pollerId: poller?.id ?? null, unregistered, results: answer.results.filter((r) => r.status === 'failed') },
      outcome: answer.succeeded === 0 ? 'Failed' : 'Succeeded',
      asset: poller ? { key: poller.id, name: poller.name, type: 'WorkerPoller', detail: 'Poller' } : { type: 'AgentlessHost' },
    })
    return answer
  })
}
