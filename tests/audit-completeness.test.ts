// Driven by the contract: every operation that changes something, and every refused
// request, leaves its audit record (operation, actor, source address, description, what
// changed, outcome consistent with the answer), and no record ever holds a secret that a
// request carried or an answer issued. Operations join the loops as the contract lists
// them, implemented or still answering 501.
import crypto from 'node:crypto'
import t from 'tap'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { build, login, userWithProfile, bearer } from './helpers.js'
import { alarmsOf, auditSince, indexEvents, lastAuditId, portsOf, query, queryColumn } from './seed.js'
import { gatewayEnv, enroll } from './fixtures/gateway.js'
import { addAgent, addDebugLogs } from './fixtures/fleet.js'
import { audit, detailsText, maskSecrets } from '../lib/audit.js'
import { problem } from '../lib/errors.js'
import type { AuditRow } from '../lib/platform/ports.js'
import { loadSpec, type Operation } from '../lib/contract.js'

type Json = Record<string, any>

const POLLER_SECRET = 'pes_audit-completeness-poller-secret'
// No periodic health check writes while a test compares the database.
const env = {
  ...gatewayEnv,
  PRIME_POLLER_ENROLLMENT_SECRET: POLLER_SECRET,
  PRIME_HEALTH_CHECK_SECONDS: '86400',
  PRIME_LOGIN_RATE_LIMIT_MAX: '100000',
  PRIME_LOCKOUT_THRESHOLD: '1000',
  // Webhook URLs in bodies point here, so that a destination can be saved and its secrets reach the handler.
  PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1',
  // Requests arrive as through a proxy that names each (x-request-id), so a record's id is the one sent.
  PRIME_TRUST_PROXY: 'true',
}
/** A documentation address: recorded as given, so the record cannot have it from a default. */
const SOURCE_IP = '198.51.100.23'
const PROFILE_NAMES: Record<number, string> = { 10: 'User', 20: 'Manager', 30: 'Administrator' }

// ---- the contract, read generically -------------------------------------------------

/** Resolves $refs and merges allOf, one level at a time (recursion happens as values are built). */
function resolve(spec: Json, node: any): any {
  while (node && typeof node.$ref === 'string') {
    node = node.$ref
      .slice(2)
      .split('/')
      .reduce((o: Json, k: string) => o[k.replace(/~1/g, '/').replace(/~0/g, '~')], spec)
  }
  if (node?.allOf) {
    const parts = node.allOf.map((p: any) => resolve(spec, p))
    const { allOf: _, ...rest } = node
    // biome-ignore lint/performance/noAccumulatingSpread: an allOf has a handful of parts
    return parts.reduce((acc: Json, p: Json) => ({ ...acc, ...p, properties: { ...acc.properties, ...p.properties }, required: [...(acc.required ?? []), ...(p.required ?? [])] }), {
      ...rest,
      properties: { ...rest.properties },
      required: [...(rest.required ?? [])],
    })
  }
  return node
}

/** The first alternative of anyOf/oneOf that is not the "null" one. */
function pick(spec: Json, schema: any): any {
  const s = resolve(spec, schema)
  const alts = s?.anyOf ?? s?.oneOf
  if (!alts) return s
  const useful = alts.map((a: any) => resolve(spec, a)).find((a: Json) => a && a.type !== 'null' && !a.enum?.every((v: unknown) => v === null))
  return pick(spec, useful ?? alts[0])
}

const SECRET_NAME = /pass(word|phrase)?$|secret$|token$|credentials?$|private_?key$|api_?key$|authorization$/i

const isSecretField = (key: string, schema: Json | undefined) => schema?.format === 'password' || schema?.writeOnly === true || (SECRET_NAME.test(key) && !schema?.enum && !schema?.format)

/** Builds request values and remembers every secret it puts in them. */
class Secrets {
  values: string[] = []
  private n = 0
  make(tag: string, schema?: Json, original?: unknown): string {
    const base = `Zq7-${tag.replace(/[^A-Za-z0-9]/g, '')}-${++this.n}-SecretValue`
    const max = schema?.maxLength ?? 256
    const candidates = [base, typeof original === 'string' ? `${original}\n${base}` : undefined].filter((c): c is string => !!c && c.length <= max)
    const pattern = schema?.pattern ? new RegExp(schema.pattern) : undefined
    // A secret that its schema refuses is sent all the same: a refusal must not echo it either.
    const value = candidates.find((c) => !pattern || pattern.test(c)) ?? base
    this.values.push(base)
    return value
  }
  /** Secrets the server issued in an answer (tokens, credentials): no record may hold them either. */
  collect(value: unknown, key = ''): void {
    if (typeof value === 'string') {
      if (SECRET_NAME.test(key) && value.length >= 12 && value !== '***') this.values.push(value)
    } else if (Array.isArray(value)) value.forEach((v) => this.collect(v, key))
    else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) this.collect(v, k)
  }
}

/** A minimal valid value for a schema: required properties, plus every secret one (the point of the exercise). */
function generate(spec: Json, schema: any, secrets: Secrets, key: string, counter: { n: number }): any {
  const s = pick(spec, schema)
  if (!s) return null
  if (s.example !== undefined) return fillSecrets(spec, s, structuredClone(s.example), secrets, key)
  if (s.enum) return s.enum.find((v: unknown) => v !== null)
  if (s.default !== undefined && s.type !== 'object' && s.type !== 'array') return s.default
  const n = ++counter.n
  const type = Array.isArray(s.type) ? s.type.find((x: string) => x !== 'null') : (s.type ?? (s.properties ? 'object' : s.items ? 'array' : 'string'))
  switch (type) {
    case 'object': {
      const out: Json = {}
      const props: Json = s.properties ?? {}
      const required: string[] = s.required ?? []
      for (const [k, p] of Object.entries(props)) {
        const ps = pick(spec, p)
        if (ps?.readOnly) continue
        if (required.includes(k) || isSecretField(k, ps)) out[k] = generate(spec, ps, secrets, k, counter)
      }
      for (const [k, p] of Object.entries(props)) {
        if (Object.keys(out).length >= (s.minProperties ?? 0)) break
        if (!(k in out) && !pick(spec, p)?.readOnly) out[k] = generate(spec, p, secrets, k, counter)
      }
      return out
    }
    case 'array': {
      const count = Math.max(1, s.minItems ?? 1)
      return Array.from({ length: count }, () => generate(spec, s.items ?? {}, secrets, key, counter))
    }
    case 'integer':
    case 'number':
      return Math.max(s.minimum ?? 1, s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : 1)
    case 'boolean':
      return true
    default: {
      if (isSecretField(key, s)) return secrets.make(key, s)
      if (s.format === 'uuid') return crypto.randomUUID()
      if (s.format === 'email') return `audit-${n}@example.com`
      if (s.format === 'date-time') return new Date().toISOString()
      if (s.format === 'date') return new Date().toISOString().slice(0, 10)
      if (s.format === 'uri') return 'http://127.0.0.1:9/audit-hook'
      const text = `audit-${n}`.padEnd(s.minLength ?? 0, 'x')
      return s.maxLength ? text.slice(0, s.maxLength) : text
    }
  }
}

/** Replaces the secrets of an example (and the values of webhook-style headers) with recognisable ones. */
function fillSecrets(spec: Json, schema: any, value: any, secrets: Secrets, key: string, underHeaders = false): any {
  const s = pick(spec, schema) ?? {}
  if (Array.isArray(value)) return value.map((v) => fillSecrets(spec, s.items, v, secrets, key))
  if (value && typeof value === 'object') {
    const out: Json = {}
    const headers = /headers$/i.test(key)
    for (const [k, v] of Object.entries(value)) {
      const ps = s.properties?.[k] ?? (typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined)
      out[k] = fillSecrets(spec, ps, v, secrets, k, headers)
    }
    // A header whose name says nothing of a secret: its value is one all the same.
    if (headers && typeof s.additionalProperties === 'object' && Object.keys(out).length < (s.maxProperties ?? 20)) out['X-Tenant'] = secrets.make('header')
    return out
  }
  if (typeof value === 'string' && (underHeaders || isSecretField(key, s))) return secrets.make(key, s, value)
  if (typeof value === 'string' && s.format === 'uri' && /^https?:/i.test(value)) return 'http://127.0.0.1:9/audit-hook'
  return value
}

/** The columns a CSV upload documents (the first column of the markdown table in its description). */
const documentedColumns = (description: string) => [...description.matchAll(/^\| `(\w+)` \|/gm)].map((m) => m[1])

/** Cell values for documented columns, from the example of a schema that has them all (the contract's own model of a row). */
function csvFor(spec: Json, raw: Json, secrets: Secrets, real: (column: string, value: unknown) => unknown): string {
  const columns = documentedColumns(raw.description ?? '')
  if (!columns.length) return 'name\r\naudit\r\n'
  let example: Json = {}
  for (const [path, item] of Object.entries<Json>(spec.paths)) {
    for (const op of Object.values<Json>(item)) {
      const ex = op?.requestBody?.content?.['application/json']?.example
      if (ex && typeof ex === 'object' && !Array.isArray(ex) && columns.filter((c) => c in ex).length >= 3 && path) example = ex
    }
  }
  // The example's cells (its secrets replaced by recognisable ones); the columns it leaves out stay empty.
  const cell = (c: string) => {
    const v = !(c in example) ? '' : SECRET_NAME.test(c) ? secrets.make(c) : real(c, example[c])
    const text = String(v)
    return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
  }
  return `${columns.join(',')}\r\n${columns.map(cell).join(',')}\r\n`
}

/**
 * Requests that name things that exist. The contract's examples are mostly coherent (the
 * poller a registration answers is the one a connection names): once an operation answered,
 * the ids of its answer stand in for the ids of its answer's example wherever later requests
 * use them; and an id no answer explained is taken to mean the latest one of the same name
 * that an operation of the same tag answered (the report just created, for an update).
 */
const ID_KEY = /(^id|Id|ID|^uuid|Uuid)s?$/

class Ids {
  private map = new Map<string, unknown>()
  private latest = new Map<string, unknown>()
  private key = (v: unknown) => `${typeof v}:${String(v)}`
  learn(tag: string, example: unknown, actual: unknown, key = ''): void {
    if (Array.isArray(actual)) actual.forEach((a, i) => this.learn(tag, Array.isArray(example) ? example[i] : undefined, a, key))
    else if (actual && typeof actual === 'object') {
      const ex = example && typeof example === 'object' ? (example as Json) : {}
      for (const [k, v] of Object.entries(actual)) this.learn(tag, ex[k], v, k)
    } else if ((typeof actual === 'string' || typeof actual === 'number') && ID_KEY.test(key)) {
      if (!this.latest.has(`${tag}:${key}`) || key === 'id') this.latest.set(`${tag}:${key}`, actual)
      if (example !== undefined && example !== actual && typeof example === typeof actual) this.map.set(this.key(example), actual)
    }
  }
  private value(tag: string, key: string, value: unknown): unknown {
    if (this.map.has(this.key(value))) return this.map.get(this.key(value))
    const latest = this.latest.get(`${tag}:${key}`)
    return latest !== undefined && typeof latest === typeof value ? latest : value
  }
  /** Id-like values (under an id-like key, or the items of a body that is a list of ids) replaced by real ones. */
  apply(tag: string, value: unknown, key = '', listItem = false): unknown {
    if (Array.isArray(value)) return value.map((v) => this.apply(tag, v, key, key === '' || ID_KEY.test(key)))
    if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.apply(tag, v, k)]))
    if (ID_KEY.test(key)) return this.value(tag, key, value)
    if (listItem) return this.value(tag, 'id', value)
    return value
  }
  param(tag: string, name: string, value: string): string {
    if (!ID_KEY.test(name)) return value
    const mapped = this.map.get(`string:${value}`) ?? this.map.get(`number:${value}`)
    if (mapped !== undefined) return String(mapped)
    const key = name.charAt(0).toLowerCase() + name.slice(1)
    const latest = this.latest.get(`${tag}:${key}`)
    return latest === undefined ? value : String(latest)
  }
}

interface Built {
  url: string
  method: string
  headers: Json
  payload?: string | Buffer
}

/** The request an operation's contract describes: path and required query parameters, and a body. */
function requestFor(spec: Json, op: Operation, secrets: Secrets, ids = new Ids()): Built {
  const raw = spec.paths[op.path][op.method.toLowerCase()]
  const tag = raw.tags?.[0] ?? ''
  const counter = { n: 0 }
  const params: Json[] = (raw.parameters ?? []).map((p: any) => resolve(spec, p))
  const value = (p: Json) => {
    const ex = p.example ?? resolve(spec, p.schema)?.example
    return ids.param(tag, p.name, String(ex !== undefined ? ex : generate(spec, p.schema, secrets, p.name, counter)))
  }
  const url = op.path.replace(/\{(\w+)\}/g, (_, name) => encodeURIComponent(value(params.find((p) => p.in === 'path' && p.name === name) ?? { name, schema: { type: 'string' } })))
  const query = new URLSearchParams()
  for (const p of params) if (p.in === 'query' && p.required) query.set(p.name, value(p))
  const built: Built = { url: query.size ? `${url}?${query}` : url, method: op.method, headers: {} }
  const content: Json | undefined = raw.requestBody?.content
  if (!content) return built
  if (content['multipart/form-data']) {
    const schema = resolve(spec, content['multipart/form-data'].schema)
    const boundary = `----audit${crypto.randomBytes(8).toString('hex')}`
    const parts = Object.entries<Json>(schema.properties ?? {}).map(([name, p]) =>
      p.format === 'binary'
        ? `--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="audit.csv"\r\nContent-Type: text/csv\r\n\r\n${csvFor(spec, raw, secrets, (column, value) => (ids.apply(tag, { [column]: value }) as Json)[column])}\r\n`
        : `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${generate(spec, p, secrets, name, counter)}\r\n`,
    )
    built.headers['content-type'] = `multipart/form-data; boundary=${boundary}`
    built.payload = Buffer.from(`${parts.join('')}--${boundary}--\r\n`)
    return built
  }
  const media: Json = content['application/json'] ?? Object.values(content)[0]
  const example = media.example ?? (media.examples ? (Object.values(media.examples)[0] as Json)?.value : undefined)
  const body = ids.apply(tag, example !== undefined ? fillSecrets(spec, media.schema, structuredClone(example), secrets, '') : generate(spec, media.schema, secrets, '', counter))
  built.headers['content-type'] = 'application/json'
  built.payload = JSON.stringify(body)
  return built
}

// ---- the audit trail, read from the database ----------------------------------------

const lastId = async (app: FastifyInstance) => lastAuditId(app)
const since = async (app: FastifyInstance, after: number): Promise<AuditRow[]> => auditSince(app, after)

/**
 * The tables of the schema but the audit trail: SQLite's (not its virtual tables), or
 * PostgreSQL's (a partitioned table once, not its partitions; not the leases on loops and deliveries, which
 * their holders renew on their own time).
 */
const stateTables = async (app: FastifyInstance): Promise<string[]> =>
  app.storage.backend === 'sqlite'
    ? ((await queryColumn(app, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('audit_trail') AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name")) as string[])
    : (
        await query<{ name: string }>(
          app,
          `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname NOT IN ('audit_trail', 'leases') ORDER BY 1`,
        )
      ).map((r) => r.name)

/** A table's rows as values, in an order of their own (PostgreSQL answers them in none). */
async function tableRows(app: FastifyInstance, name: string): Promise<unknown[]> {
  if (app.storage.backend === 'sqlite') {
    const where = name === 'sqlite_sequence' ? " WHERE name <> 'audit_trail'" : ''
    return app.db.prepare(`SELECT * FROM "${name}"${where}`).raw().all()
  }
  return (await query(app, `SELECT * FROM "${name}"`)).map((r) => JSON.stringify(Object.values(r))).sort()
}

/** Everything the database holds except the audit trail: equal before and after means nothing else changed. */
async function fingerprint(app: FastifyInstance): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  for (const name of await stateTables(app)) {
    const rows = await tableRows(app, name)
    out.set(
      name,
      crypto
        .createHash('sha1')
        .update(JSON.stringify(rows, (_, v) => (typeof v === 'bigint' ? String(v) : v)))
        .digest('hex'),
    )
  }
  return out
}
const changedTables = (a: Map<string, string>, b: Map<string, string>) => [...new Set([...a.keys(), ...b.keys()])].filter((k) => a.get(k) !== b.get(k))

/**
 * The tables that storing an audit record changes by itself (kept counts, outboxes filled by
 * triggers), learnt by storing one: they say nothing about what else a request changed.
 */
async function auditSideTables(app: FastifyInstance): Promise<Set<string>> {
  // Events written so far (an enrollment's) are queued for the alarm destinations now: on
  // PostgreSQL a background step queues them, and its move of the queue's mark must not land
  // between a refused request's two fingerprints.
  await alarmsOf(app).queueAllEvents()
  const before = await fingerprint(app)
  await app.storage.audit.insert({
    createdMs: Date.now(),
    severity: 6,
    category: 'System',
    user: null,
    sourceIp: null,
    description: 'audit completeness: probe',
    details: '{}',
    operationId: null,
    outcome: 'Succeeded',
  })
  return new Set(changedTables(before, await fingerprint(app)))
}

const rowText = (r: AuditRow) => Object.values(r).map(String).join('\u0001')

function leaks(rows: AuditRow[], secrets: string[]): string[] {
  const out: string[] = []
  for (const r of rows) for (const s of secrets) if (rowText(r).includes(s)) out.push(`record ${r.id} (${r.operation_id}) holds ${s.slice(0, 24)}...`)
  return out
}

const expectedCategory = (op: Operation) => op.auditCategory ?? 'System'

/** The longest value each column may hold: the contract's AuditTrailView, which answers them. */
const LIMITS: [keyof AuditRow, number][] = (() => {
  const props = loadSpec().components.schemas.AuditTrailView.properties
  const column: Record<string, keyof AuditRow> = { user: 'user_name', sourceIp: 'source_ip', description: 'description', details: 'details', operationId: 'operation_id' }
  return Object.entries(column)
    .filter(([name]) => props[name]?.maxLength)
    .map(([name, col]) => [col, props[name].maxLength])
})()

function outcomeFits(status: number, outcome: string): boolean {
  if (status === 401 || status === 403) return outcome === 'Refused'
  if (status >= 400) return outcome === 'Failed'
  return outcome === 'Succeeded' || outcome === 'Failed'
}

/** "What changed": a success must say more than its status. */
function saysWhatChanged(details: string): boolean {
  let parsed: unknown
  try {
    parsed = JSON.parse(details)
  } catch {
    return false
  }
  if (Array.isArray(parsed)) return parsed.length > 0
  if (!parsed || typeof parsed !== 'object') return false
  return Object.keys(parsed).filter((k) => k !== 'status').length > 0
}

const isStream = (op: Operation) => op.responseTypes.includes('text/event-stream')
// A read-only POST (x-read-only: the GraphQL query of /sepio-data) is a read.
const isMutating = (op: Operation) => !op.readOnly && (op.method !== 'GET' || op.auditCategory !== null)

async function send(app: FastifyInstance, req: Built, authorization: string | undefined, tag: string) {
  const opts: InjectOptions = {
    method: req.method as InjectOptions['method'],
    url: req.url,
    headers: { ...req.headers, 'x-request-id': tag, ...(authorization ? { authorization } : {}) },
    remoteAddress: SOURCE_IP,
  }
  if (req.payload !== undefined) opts.payload = req.payload
  return app.inject(opts)
}

/** The values of an operation's path parameters in a request's URL. */
function pathValues(op: Operation, url: string): string[] {
  if (!/\{\w+\}/.test(op.path)) return []
  const literal = (part: string) => part.replace(/[.*+?^$()|[\]\\{}]/g, '\\$&')
  const m = new RegExp(
    `^${op.path
      .split(/\{\w+\}/)
      .map(literal)
      .join('([^/?]+)')}(?:\\?|$)`,
    'i',
  ).exec(url)
  return m ? m.slice(1).map(decodeURIComponent) : []
}

// ---- the tests ------------------------------------------------------------------------

/** What is wrong with the records a request left: an empty list when it is audited as the rule says. */
function checkRecords(op: Operation, rows: AuditRow[], status: number, expect: { outcome?: string; actor?: string | null; exactlyOne?: boolean; url?: string; requestId?: unknown }): string[] {
  const problems: string[] = []
  const others = rows.filter((r) => r.operation_id !== null && r.operation_id !== op.operationId)
  if (others.length) problems.push(`records of other operations: ${others.map((r) => r.operation_id).join(', ')}`)
  const mine = rows.filter((r) => r.operation_id === op.operationId)
  if (mine.length === 0) return [...problems, `answered ${status} and left no audit record`]
  if (expect.exactlyOne && mine.length !== 1) problems.push(`${mine.length} records instead of one`)
  // A bulk operation may write one record per asset it touched (each names its asset) and one
  // for the items that failed; never two records of the same thing.
  const keys = mine.map((r) => r.asset_key ?? r.asset_name)
  const unnamed = keys.filter((k) => k === null).length
  if (mine.length > 1 && (unnamed > 1 || new Set(keys.filter(Boolean)).size !== keys.length - unnamed)) {
    problems.push(`${mine.length} records, more than one per touched asset: ${mine.map((r) => r.description).join(' | ')}`)
  }
  for (const r of mine) {
    const at = `record ${r.id}`
    if (r.source_ip !== SOURCE_IP) problems.push(`${at}: sourceIp ${r.source_ip}, not ${SOURCE_IP}`)
    if (r.request_id !== expect.requestId) problems.push(`${at}: requestId ${r.request_id}, not the answer's ${expect.requestId}`)
    if (r.category !== expectedCategory(op)) problems.push(`${at}: category ${r.category}, not ${expectedCategory(op)}`)
    if (!r.description.trim()) problems.push(`${at}: no description`)
    if (!(r.severity >= 0 && r.severity <= 7)) problems.push(`${at}: severity ${r.severity}`)
    for (const [col, max] of LIMITS) if (String(r[col] ?? '').length > max) problems.push(`${at}: ${col} of ${String(r[col]).length} characters, above ${max}`)
    if (expect.outcome ? r.outcome !== expect.outcome : !outcomeFits(status, r.outcome)) problems.push(`${at}: outcome ${r.outcome} for status ${status}`)
    if (expect.actor !== undefined && r.user_name !== expect.actor) problems.push(`${at}: user ${r.user_name}, not ${expect.actor}`)
    try {
      JSON.parse(r.details)
    } catch {
      problems.push(`${at}: details are not JSON`)
    }
    // The thing the path names (an entry, a token, an agent) is named by the record.
    for (const value of expect.url ? pathValues(op, expect.url) : []) {
      if (!`${r.description}\u0001${r.details}\u0001${r.asset_key}\u0001${r.asset_name}`.toLowerCase().includes(value.toLowerCase()))
        problems.push(`${at}: does not name ${value} (${r.description} ${r.details})`)
    }
  }
  return problems
}

t.test('refused requests and reads, on one app', async (t) => {
  const app = await build(t, env)
  const admin = await login(app)

  await t.test('every refused request (no credential, a wrong kind of credential) is audited and changes nothing', async (t) => {
    const agent = await enroll(app)
    const { spec, operations } = app.contract
    const secrets = new Secrets()
    secrets.values.push(admin, agent.credential)
    const side = await auditSideTables(app)
    let n = 0,
      checked = 0
    for (const op of operations.values()) {
      if (op.access.kind === 'public') continue
      const req = requestFor(spec, op, secrets)
      // No credential at all; and a credential of another kind (an agent's where a user's token
      // or a poller's is expected, a user's token at a gateway).
      const attempts: [string, string | undefined][] = [['without a credential', undefined]]
      if (op.access.kind === 'agent' || op.access.kind === 'poller') attempts.push(['with a user token', `Bearer ${admin}`])
      if (op.access.kind !== 'agent') attempts.push(['with an agent credential', `Bearer ${agent.credential}`])
      for (const [how, authorization] of attempts) {
        const before = await lastId(app)
        const state = await fingerprint(app)
        const tag = `audit-refused-request-${++n}`
        const res = await send(app, req, authorization, tag)
        const problems: string[] = []
        if (res.headers['x-request-id'] !== tag) problems.push('the answer does not name the request')
        if (res.statusCode !== 401) problems.push(`answered ${res.statusCode}, not 401`)
        problems.push(...checkRecords(op, await since(app, before), res.statusCode, { outcome: 'Refused', actor: null, exactlyOne: true, url: req.url, requestId: res.headers['x-request-id'] }))
        const changed = changedTables(state, await fingerprint(app)).filter((table) => !side.has(table))
        if (changed.length) problems.push(`changed ${changed.join(', ')}`)
        t.same(problems, [], `${op.operationId} ${how}: 401, audited once as Refused, nothing else changed`)
        checked++
      }
    }
    t.ok(checked > 50, `${checked} refusals checked`)
    t.same(leaks(await since(app, 0), secrets.values), [], 'no record holds a secret a refused request carried')
  })

  await t.test("every request refused for a profile below the operation's minimum is audited with its actor", async (t) => {
    const { spec, operations } = app.contract
    const tokens: Record<number, { token: string; name: string }[]> = {
      10: [{ token: await userWithProfile(app, admin, 'audit-user', 10), name: 'audit-user' }],
      20: [{ token: await userWithProfile(app, admin, 'audit-manager', 20), name: 'audit-manager' }],
    }
    // Integration tokens act too, as `token:<name>`.
    const create = [...operations.values()].find((o) => o.operationId === 'createIntegrationToken')
    for (const profile of create ? ([10, 20] as const) : []) {
      const created = await app.inject({ method: 'POST', url: create!.path, headers: bearer(admin), payload: { name: `audit-${profile}`, userProfile: profile } })
      t.equal(created.statusCode, 200, created.body)
      const token = created.json().token as string
      // Its first use records when it was used; later uses within the minute write nothing.
      await app.inject({ url: '/prime/webui/admin/profile', headers: bearer(token) })
      tokens[profile].push({ token, name: `token:audit-${profile}` })
    }
    // A token with the longest name there may be: `token:<name>` would not fit the record.
    if (create) {
      const name = 'audit-long-'.padEnd(100, 'n')
      const created = await app.inject({ method: 'POST', url: create.path, headers: bearer(admin), payload: { name, userProfile: 10 } })
      t.equal(created.statusCode, 200, created.body)
      const { token, id } = created.json() as { token: string; id: string }
      await app.inject({ url: '/prime/webui/admin/profile', headers: bearer(token) })
      const before = await lastId(app)
      t.equal((await app.inject({ url: '/prime/webui/admin/all', headers: bearer(token) })).statusCode, 403)
      const user = (await since(app, before))[0]?.user_name
      t.ok(user === `token:${name}` || user === `token:${id}`, `the long-named token is named (${user})`)
      t.ok(String(user).length <= 100, "within the record's 100 characters")
    }
    const secrets = new Secrets()
    secrets.values.push(
      admin,
      ...Object.values(tokens)
        .flat()
        .map((a) => a.token),
    )
    const side = await auditSideTables(app)
    let checked = 0,
      n = 0
    for (const op of operations.values()) {
      if (op.access.kind !== 'user' || op.access.minProfile <= 10) continue
      const req = requestFor(spec, op, secrets)
      for (const profile of [10, 20]) {
        if (profile >= op.access.minProfile) continue
        for (const actor of tokens[profile]) {
          const before = await lastId(app)
          const state = await fingerprint(app)
          const res = await send(app, req, `Bearer ${actor.token}`, `audit-forbidden-${++n}`)
          const problems: string[] = []
          if (res.statusCode !== 403) problems.push(`answered ${res.statusCode}, not 403`)
          const rows = await since(app, before)
          problems.push(...checkRecords(op, rows, res.statusCode, { outcome: 'Refused', actor: actor.name, exactlyOne: true, url: req.url, requestId: res.headers['x-request-id'] }))
          const row = rows.find((r) => r.operation_id === op.operationId)
          if (row && !row.description.includes(PROFILE_NAMES[op.access.minProfile])) problems.push(`description "${row.description}" does not name the profile needed`)
          const changed = changedTables(state, await fingerprint(app)).filter((table) => !side.has(table))
          if (changed.length) problems.push(`changed ${changed.join(', ')}`)
          t.same(problems, [], `${op.operationId} as ${actor.name} (${PROFILE_NAMES[profile]}): 403, audited once with the actor, nothing else changed`)
          checked++
        }
      }
    }
    t.ok(checked > 50, `${checked} refusals checked`)
    t.same(leaks(await since(app, 0), secrets.values), [], 'no record holds a secret a refused request carried')
  })

  await t.test('a request with a body of the wrong media type is refused or failed with its actor known', async (t) => {
    const { spec, operations } = app.contract
    const secrets = new Secrets()
    let checked = 0
    for (const op of operations.values()) {
      if (!isMutating(op) || op.access.kind !== 'user' || !op.requestTypes.some((type) => type.includes('json'))) continue
      const req = { ...requestFor(spec, op, secrets), headers: { 'content-type': 'application/xml' }, payload: '<audit/>' }
      for (const [who, authorization, status, expect] of [
        ['without a credential', undefined, 401, { outcome: 'Refused', actor: null }],
        ['as an Administrator', `Bearer ${admin}`, 415, { outcome: 'Failed', actor: 'admin' }],
      ] as const) {
        const before = await lastId(app)
        const res = await send(app, req, authorization, `audit-media-${op.operationId}`)
        const problems: string[] = []
        if (res.statusCode !== status) problems.push(`answered ${res.statusCode}, not ${status}`)
        problems.push(...checkRecords(op, await since(app, before), res.statusCode, { ...expect, exactlyOne: true, url: req.url, requestId: res.headers['x-request-id'] }))
        t.same(problems, [], `${op.operationId} with an XML body ${who}: ${status}, audited with ${expect.actor ?? 'nobody known'}`)
      }
      checked++
    }
    t.ok(checked > 20, `${checked} operations checked`)
  })

  await t.test('reads without an audit category change nothing and write no record', async (t) => {
    const { spec, operations } = app.contract
    const secrets = new Secrets()
    let n = 0
    // Caches are derived, not state: a recomputed insight may be kept.
    const side = await auditSideTables(app)
    const derived = (table: string) => /cache/.test(table) || side.has(table)
    const reads = [...operations.values()].filter((op) => !isMutating(op) && !isStream(op) && op.access.kind === 'user')
    // A first read may do work that is due anyway (a health check never run yet, a cache
    // filled): from the second on, reading changes nothing.
    for (const op of reads) await send(app, requestFor(spec, op, secrets), `Bearer ${admin}`, `audit-warm-${++n}`)
    for (const op of reads) {
      // Records written before are indexed now: a read that awaits (the GraphQL query) would
      // otherwise let the background indexer step in its middle.
      indexEvents(app)
      const before = await lastId(app)
      const state = await fingerprint(app)
      const res = await send(app, requestFor(spec, op, secrets), `Bearer ${admin}`, `audit-read-${++n}`)
      const problems: string[] = []
      if (res.statusCode >= 500 && res.statusCode !== 501) problems.push(`answered ${res.statusCode}`)
      const changed = changedTables(state, await fingerprint(app)).filter((table) => !derived(table))
      if (changed.length) problems.push(`changed ${changed.join(', ')}: it is not a read, and needs x-audit-category`)
      const written = (await since(app, before)).filter((r) => r.operation_id === op.operationId && res.statusCode < 400)
      if (written.length) problems.push(`wrote ${written.length} record(s) although it is a read`)
      t.same(problems, [], `${op.operationId}: reading again changes nothing`)
    }
  })
})

t.test('every mutating operation, called with enough rights, is audited with what changed and no secret', async (t) => {
  const app = await build(t, env)
  const { spec, operations } = app.contract
  const secrets = new Secrets()
  let admin = { token: await login(app), name: 'admin' }
  // A second Administrator, used only to bring back an acting one when an operation took it away
  // (a password changed, the account deleted or disabled, the session logged out).
  const reserve = await userWithProfile(app, admin.token, 'audit-reserve', 30)
  // The credentials requests carry are secrets too.
  secrets.values.push(admin.token, reserve)
  let spare = 0
  const actingAdmin = async () => {
    try {
      await app.tokens.authenticate(admin.token, Date.now())
    } catch {
      const name = `audit-admin-${++spare}`
      admin = { token: await userWithProfile(app, reserve, name, 30), name }
      secrets.values.push(admin.token)
    }
    return admin
  }
  // The agent the contract's examples speak of (the `agentId` example), with debug logs to download.
  const exampleAgent = Object.values<Json>(spec.paths)
    .flatMap((item) => Object.values<Json>(item))
    .flatMap((o) => o?.parameters ?? [])
    .map((p: any) => resolve(spec, p))
    .find((p: Json) => p.in === 'path' && p.name === 'agentId' && p.example)?.example as string | undefined
  const ensureExampleAgent = async () => {
    if (!exampleAgent || (await portsOf(app).agents.byUuid(exampleAgent))) return
    const { id } = await addAgent(app, { uuid: exampleAgent })
    await addDebugLogs(app, id, 'audit completeness: debug log line')
  }
  const ids = new Ids()
  const answerExample = (op: Operation) => {
    const content = spec.paths[op.path][op.method.toLowerCase()].responses?.['200']?.content
    return content?.['application/json']?.example
  }
  // A poller registered with the configured secret (once its gateway is built): the one the examples name.
  let poller: string | undefined
  const register = operations.get('pollerRegister')
  const registerExample = register && spec.paths[register.path].post.requestBody?.content?.['application/json']?.example
  if (register && registerExample) {
    const res = await app.inject({ method: 'POST', url: register.path, payload: { ...registerExample, enrollmentSecret: POLLER_SECRET, name: 'audit-poller' } })
    if (res.statusCode === 200 && typeof res.json().credential === 'string') {
      poller = res.json().credential as string
      secrets.values.push(poller)
      ids.learn(spec.paths[register.path].post.tags?.[0] ?? '', answerExample(register), res.json())
    }
  }

  let n = 0
  const answered: string[] = []
  const silentSuccesses: string[] = []
  // What creates first, what removes last, so that the ids learnt from answers are there to use.
  const rank = (op: Operation) => (/^(create|add|enroll|upload)/i.test(op.operationId) ? 0 : /^(delete|remove|revoke|unregister|logout)/i.test(op.operationId) ? 2 : 1)
  const mutating = [...operations.values()].filter((op) => isMutating(op) && !isStream(op)).sort((a, b) => rank(a) - rank(b))
  for (const op of mutating) {
    await ensureExampleAgent()
    let authorization: string | undefined
    let actor: string | null | undefined
    if (op.access.kind === 'user') {
      const a = await actingAdmin()
      authorization = `Bearer ${a.token}`
      actor = a.name
    } else if (op.access.kind === 'agent') {
      const agent = await enroll(app, crypto.randomUUID(), `AUDIT-HOST-${n}`)
      secrets.values.push(agent.credential)
      authorization = `Bearer ${agent.credential}`
      actor = `agent:${agent.uuid}`
    } else if (op.access.kind === 'poller') {
      authorization = `Bearer ${poller ?? 'ppl_not-registered'}`
      if (poller) actor = 'poller:audit-poller'
    }
    const req = requestFor(spec, op, secrets, ids)
    const before = await lastId(app)
    const tag = `audit-admin-request-${++n}`
    const res = await send(app, req, authorization, tag)
    answered.push(`${op.operationId} ${res.statusCode}`)
    if (res.statusCode < 300 && String(res.headers['content-type']).includes('json')) {
      secrets.collect(res.json())
      ids.learn(spec.paths[op.path][op.method.toLowerCase()].tags?.[0] ?? '', answerExample(op), res.json())
    }
    const problems: string[] = []
    if (res.headers['x-request-id'] !== tag) problems.push('the answer does not name the request')
    const declared501 = res.statusCode === 501 && spec.paths[op.path][op.method.toLowerCase()].responses['501']
    if (res.statusCode >= 500 && !declared501) problems.push(`answered ${res.statusCode}: ${res.body.slice(0, 300)}`)
    const rows = await since(app, before)
    // A refused gateway call has no actor; otherwise the record names the caller.
    problems.push(...checkRecords(op, rows, res.statusCode, { actor: res.statusCode === 401 ? null : actor, url: req.url, requestId: res.headers['x-request-id'] }))
    problems.push(...leaks(rows, secrets.values))
    t.same(problems, [], `${op.operationId} (${res.statusCode}): audited, with who, from where, an outcome that fits, no secret`)
    for (const r of rows) {
      if (r.operation_id === op.operationId && res.statusCode < 300 && r.outcome === 'Succeeded' && !saysWhatChanged(r.details)) silentSuccesses.push(`${op.operationId}: ${r.details}`)
    }
  }
  t.same(silentSuccesses, [], 'every success says what changed, not only its status')
  t.same(leaks(await since(app, 0), secrets.values), [], 'after everything: no record holds any secret sent or issued')
  t.ok(secrets.values.length > 10, `${secrets.values.length} secrets sent or issued`)
  t.comment(answered.join(', '))
})

t.test('masking: webhook header values are secrets whatever their names', async (t) => {
  const masked = maskSecrets({ webhook: { url: 'https://h.example', secret: 's3', headers: { Authorization: 'Bearer a', 'X-Tenant': 'tenant-secret', 'X-Empty': '***' } } }) as Json
  t.same(masked.webhook.headers, { Authorization: '***', 'X-Tenant': '***', 'X-Empty': '***' }, 'every value masked, names kept')
  t.equal(masked.webhook.secret, '***')
  t.equal(masked.webhook.url, 'https://h.example')
  t.same(maskSecrets({ headers: ['X-Tenant'], changedHeaders: { 'X-A': null } }), { headers: ['X-Tenant'], changedHeaders: { 'X-A': null } }, 'header names and unset values stay readable')
})

t.test('a request with a large body is audited with details that are still JSON, within the limit', async (t) => {
  const app = await build(t, env)
  const admin = await login(app)
  const { spec, operations } = app.contract
  const secrets = new Secrets()
  let checked = 0
  for (const op of operations.values()) {
    if (!isMutating(op) || op.access.kind !== 'user') continue
    const req = requestFor(spec, op, secrets)
    if (req.headers['content-type'] !== 'application/json') continue
    // Thousands of items, each with a secret-looking neighbour: too many to keep, none to leak.
    const many = Array.from({ length: 4000 }, (_, i) => `item-${i}-${'p'.repeat(40)}`)
    const body = JSON.parse(String(req.payload))
    const large = Array.isArray(body) ? [...body, ...many] : { ...body, zzPadding: many, password: secrets.make('large') }
    const before = await lastId(app)
    const res = await send(app, { ...req, payload: JSON.stringify(large) }, `Bearer ${admin}`, `audit-large-${op.operationId}`)
    const problems: string[] = []
    for (const r of (await since(app, before)).filter((r) => r.operation_id === op.operationId)) {
      if (r.details.length > 65536) problems.push(`record ${r.id}: details of ${r.details.length} characters`)
      try {
        JSON.parse(r.details)
      } catch {
        problems.push(`record ${r.id}: details are not JSON (${r.details.slice(-40)})`)
      }
      if (r.description.length > 1000) problems.push(`record ${r.id}: description of ${r.description.length} characters`)
    }
    if (!(await since(app, before)).some((r) => r.operation_id === op.operationId)) problems.push(`answered ${res.statusCode} and left no record`)
    t.same(problems, [], `${op.operationId} (${res.statusCode}): details within the limit, still JSON`)
    checked++
  }
  t.ok(checked > 20, `${checked} operations checked`)
  t.same(leaks(await since(app, 0), secrets.values), [], 'no record holds a secret')
})

t.test('a record written in a transaction that rolled back does not count: the request is audited all the same', async (t) => {
  const app = await build(t, env)
  // A route that records its change, then fails inside the same transaction (a constraint
  // found late, say): the record goes with the rollback.
  const op = app.contract.operations.get('addUser')!
  app.route({
    method: 'POST',
    url: '/prime/webui/test/audit-rollback',
    schema: {},
    config: { op },
    handler: async (req) => {
      await req.server.storage.uow.run(async () => {
        await audit(req, { description: 'Added an account that is about to be rolled back', details: { vid: '1234' } })
        throw problem('conflict', 'A conflict found after the change was recorded.')
      })
    },
  })
  const admin = await login(app)
  const before = await lastId(app)
  const res = await app.inject({ method: 'POST', url: '/prime/webui/test/audit-rollback', headers: bearer(admin), payload: {}, remoteAddress: SOURCE_IP })
  t.equal(res.statusCode, 409)
  const rows = await since(app, before)
  t.equal(rows.length, 1, 'one record')
  t.match(rows[0], { operation_id: 'addUser', outcome: 'Failed', user_name: 'admin', source_ip: SOURCE_IP })
  t.match(rows[0]?.description, /conflict found after the change/, 'the failure, not the change that never happened')
})

t.test('details: always JSON, at most 65536 characters, secrets masked', async (t) => {
  const huge = { items: Array.from({ length: 10000 }, (_, i) => ({ id: i, password: `pw-${i}`, note: 'n'.repeat(100) })), text: 'x'.repeat(200000) }
  const text = detailsText(huge)
  t.ok(text.length <= 65536, `${text.length} characters`)
  const parsed = JSON.parse(text)
  t.equal(parsed.truncated, true, 'says it was shortened')
  t.ok(parsed.length > 65536, 'and how long it was')
  t.equal(parsed.details.items.length, 51, 'the first items, and how many more')
  t.equal(parsed.details.items[50], '(9950 more)')
  t.equal(parsed.details.items[0].password, '***', 'secrets masked before shortening')
  t.notMatch(text, 'pw-1')
  const keys = detailsText({ ['k'.repeat(100000)]: 1 })
  t.ok(keys.length <= 65536 && JSON.parse(keys).truncated, 'even a huge key name: a preview that is still JSON')
  t.equal(detailsText(undefined), '{}')
  t.equal(detailsText({ a: 1 }), '{"a":1}', 'a small record is kept as it is')
})
