import crypto from 'node:crypto'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { AuditAsset } from '../db/audit.js'
import { limitKey } from './rate-limit.js'
import type { Loop } from './platform/loops.js'

export interface AuditEntry {
  description: string
  /** What changed; secrets are masked before it is stored. */
  details?: unknown
  asset?: AuditAsset
  severity?: number
  outcome?: 'Succeeded' | 'Failed' | 'Refused'
  /** The actor, when the request has no principal (a login). */
  user?: string | null
  /**
   * A refusal (outcome Failed or Refused) and why: repeats of the same refusal (actor,
   * operation, outcome, status, reason) within the window are counted, not written.
   */
  refusal?: { status: number; reason: string }
}

// A key that names a secret (`password`, `newPassword`, `webhookSecret`, `refreshToken`),
// not one that merely mentions it (`passwordChanged`, `tokenId`).
const SECRET_KEY = /(pass(word|phrase)?|passwd|pwd|pw|secret|tokens?|credentials?|private[_-]?key|api[_-]?key|authorization|cookie)$/i
const MAX_DEPTH = 12
const NOTICE = 5, WARNING = 4

// Custom request headers (a webhook's `headers`): every value may be a credential, whatever
// the header's name (`X-Tenant-Key`, `X-Auth`); the names are kept.
const HEADERS_KEY = /headers$/i

const isSet = (v: unknown) => v !== null && v !== undefined && typeof v !== 'boolean'

export function maskSecrets(value: unknown, depth = 0, headerValues = false): unknown {
  if (value === null || typeof value !== 'object') return value
  if (depth >= MAX_DEPTH) return '(nested too deep)'
  if (Array.isArray(value)) return value.map((v) => maskSecrets(v, depth + 1))
  const out: Record<string, unknown> = {}
  // A flag (`hasToken: true`) says nothing secret; null and absent mean "not set".
  for (const [k, v] of Object.entries(value)) {
    out[k] = (SECRET_KEY.test(k) || headerValues) && isSet(v) ? '***' : maskSecrets(v, depth + 1, HEADERS_KEY.test(k) && isPlainObject(v))
  }
  return out
}

const isPlainObject = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v)

// Audit records travel to SIEMs as lines: no control characters from callers.
const printable = (s: string) => s.replace(/[\u0000-\u001f\u007f]/g, '?')

const MAX_DETAILS = 65536
const MAX_USER = 100
const MAX_LISTED = 50
const MAX_TEXT = 1000

/** A copy small enough to keep: long lists and texts cut, saying how much was left out. */
function shorten(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.length > MAX_TEXT ? `${value.slice(0, MAX_TEXT)}... (${value.length} characters)` : value
  if (value === null || typeof value !== 'object' || depth >= MAX_DEPTH) return value
  if (Array.isArray(value)) {
    const kept = value.slice(0, MAX_LISTED).map((v) => shorten(v, depth + 1))
    return value.length > MAX_LISTED ? [...kept, `(${value.length - MAX_LISTED} more)`] : kept
  }
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shorten(v, depth + 1)]))
}

/**
 * The details as JSON text of at most MAX_DETAILS characters, secrets masked. A cut string
 * would not be JSON: a record too large is shortened, and says so.
 */
export function detailsText(details: unknown, max = MAX_DETAILS): string {
  const masked = maskSecrets(details ?? {})
  const text = JSON.stringify(masked) ?? '{}'
  if (text.length <= max) return text
  const short = JSON.stringify({ truncated: true, length: text.length, details: shorten(masked) })
  if (short.length <= max) return short
  for (let keep = max / 4; ; keep = Math.floor(keep / 2)) {
    const preview = JSON.stringify({ truncated: true, length: text.length, preview: text.slice(0, keep) })
    if (preview.length <= max) return preview
  }
}

// The newest record each request wrote: if the transaction it was written in rolled back,
// the request is not audited after all, and the fallback records it. (A rolled-back id may
// be given again to another record, hence the time and description too.)
const written = new WeakMap<FastifyRequest, { id: number; createdMs: number; description: string }>()

/** Who acted: the account or integration token, else the agent or worker poller whose credential the call carries. */
function actor(req: FastifyRequest): string | null {
  if (req.principal) {
    const { kind, name, id } = req.principal
    // `token:` and a name of up to 100 characters would not fit the record's 100: such a token is named by its id.
    return kind === 'integration' && name.length > MAX_USER ? `token:${id}` : name
  }
  if (req.agent) return `agent:${req.agent.uuid}`
  if (req.poller) return `poller:${req.poller.name}`
  return null
}

/** Writes the request's audit record; call it inside the transaction that makes the change. */
export function audit(req: FastifyRequest, entry: AuditEntry): void {
  const op = req.op
  const createdMs = Date.now()
  const description = printable(entry.description).slice(0, 1000)
  const user = (entry.user !== undefined ? (entry.user === null ? null : printable(entry.user)) : actor(req))?.slice(0, MAX_USER) ?? null
  const outcome = entry.outcome ?? 'Succeeded'
  let refusalKey: string | null = null
  if (entry.refusal && outcome !== 'Succeeded') {
    refusalKey = countedRefusal(req, user, outcome, entry.refusal, createdMs)
    if (refusalKey === null) {
      // A repeat: counted in its window's summary record.
      written.delete(req)
      req.audited = true
      return
    }
  }
  const id = req.server.repos.audit.insert({
    createdMs,
    severity: entry.severity ?? (outcome !== 'Succeeded' ? WARNING : NOTICE),
    category: op?.auditCategory ?? 'System',
    user,
    sourceIp: req.ip ?? null,
    description,
    details: detailsText(entry.details, refusalKey ? MAX_REFUSAL_DETAILS : MAX_DETAILS),
    operationId: op?.operationId ?? null,
    outcome,
    asset: entry.asset,
    requestId: req.id,
    refusalKey,
  })
  written.set(req, { id, createdMs, description })
  req.audited = true
}

// ---- repeated refusals ------------------------------------------------------------------

/** The details of a refusal record: enough to see what was sent, not a copy of a large body. */
const MAX_REFUSAL_DETAILS = 4096
/** Distinct reasons per actor, operation, outcome and status in a window; further ones are counted as one. */
export const MAX_REFUSAL_REASONS = 5
const MAX_SOURCE_IPS = 5
const OTHER_REASONS = '(other reasons)'
const FLUSH_BATCH = 500

const digest = (text: string) => crypto.createHash('sha256').update(text).digest('base64url').slice(0, 22)

/**
 * The key of a refusal to write, or null when it repeats one written in the open window
 * (then counted). Keys are `<group>:<reason>` digests, the group being actor (an
 * unauthenticated caller: its source address), operation, outcome and status, the reason
 * the refusal's reason and what the request sent; the reasons of one group are found as
 * one range of the index.
 */
function countedRefusal(req: FastifyRequest, user: string | null, outcome: string, refusal: { status: number; reason: string }, now: number): string | null {
  const repo = req.server.repos.audit
  const windowMs = req.server.config.auditRefusalWindowSeconds * 1000
  const who = user ?? `address:${limitKey(req.ip ?? '')}`
  const group = digest(JSON.stringify([who, req.op?.operationId ?? `${req.method} ${req.url.split('?')[0]}`, outcome, refusal.status]))
  let key = `${group}:${digest(`${refusal.reason}\u0000${requestFingerprint(req)}`)}`
  let first = repo.firstRefusal(key, now - windowMs)
  if (!first && repo.refusalReasons(group, now - windowMs) >= MAX_REFUSAL_REASONS) {
    // Reasons a caller can vary at will (names of unknown properties) cannot open windows without end.
    key = `${group}:${digest(OTHER_REASONS)}`
    first = repo.firstRefusal(key, now - windowMs)
  }
  if (!first) {
    // A new window: the counts of the one before are written first, so records stay in order.
    flushRefusal(req.server, key)
    return key
  }
  const counted = repo.refusalCount(key)
  const ips = new Set(counted?.source_ips ? counted.source_ips.split(' ') : [])
  if (req.ip && ips.size < MAX_SOURCE_IPS) ips.add(req.ip)
  repo.countRepeat(key, first.id, first.created_ms + windowMs, now, [...ips].join(' '))
  return null
}

/**
 * What the request sent: identical refusals are the same request refused for the same
 * reason (a flood), not two requests that happen to fail alike (no credential, then another
 * kind of credential). Only a digest of it is kept.
 */
function requestFingerprint(req: FastifyRequest): string {
  let body = ''
  try {
    body = JSON.stringify(req.body) ?? ''
  } catch {
    // a body that cannot be written as JSON is told apart by its other parts only
  }
  return digest([req.method, req.url, req.headers['content-type'] ?? '', req.headers.authorization ?? '', body].join('\u0000'))
}

/** Writes the summary record of one counter, if it has one, and drops the counter. */
function flushRefusal(app: FastifyInstance, key: string): void {
  const repo = app.repos.audit
  const counted = repo.refusalCount(key)
  if (!counted) return
  app.db.transaction(() => {
    const first = repo.byId(counted.first_id)
    if (first) {
      const windowSeconds = app.config.auditRefusalWindowSeconds
      repo.insert({
        createdMs: Date.now(),
        severity: first.severity,
        category: first.category,
        user: first.user_name,
        sourceIp: first.source_ip,
        description: `Repeated ${counted.repeats} more time${counted.repeats === 1 ? '' : 's'} within ${windowSeconds} s of record ${first.id}: ${first.description}`.slice(0, 1000),
        details: detailsText({
          count: counted.repeats + 1,
          repeats: counted.repeats,
          firstRecordId: first.id,
          firstTime: new Date(first.created_ms).toISOString(),
          lastTime: new Date(counted.last_ms).toISOString(),
          windowSeconds,
          sourceIps: counted.source_ips ? counted.source_ips.split(' ') : [],
        }),
        operationId: first.operation_id,
        outcome: first.outcome as 'Failed' | 'Refused',
        asset: { key: first.asset_key, name: first.asset_name, parentId: first.asset_parent_id, ipAddress: first.asset_ip, type: first.asset_type, subType: first.asset_sub_type, detail: first.asset_detail, icon: first.asset_icon },
        requestId: null,
      })
    }
    repo.dropRefusalCount(key)
  })()
}

/** Writes the summary records of every window that has closed by `now`; answers how many counters it closed. */
export function flushRefusals(app: FastifyInstance, now: number): number {
  let closed = 0
  for (;;) {
    const due = app.repos.audit.dueRefusals(now, FLUSH_BATCH)
    for (const c of due) flushRefusal(app, c.refusal_key)
    closed += due.length
    if (due.length < FLUSH_BATCH) return closed
  }
}

/**
 * Closes the windows of counted refusals as they end (and those a stop left open, at once).
 * One process at a time: the counters are shared.
 */
export function refusalFlushLoop(app: FastifyInstance): Loop {
  const run = () => {
    try {
      flushRefusals(app, Date.now())
    } catch (err) {
      app.log.error({ err }, 'writing the counts of repeated refusals failed; retrying on the next round')
    }
  }
  let timer: NodeJS.Timeout | undefined
  return {
    name: 'audit-refusal-flush',
    singleton: true,
    start() {
      run()
      timer = setInterval(run, Math.min(60_000, app.config.auditRefusalWindowSeconds * 1000)).unref()
    },
    stop() {
      clearInterval(timer)
    },
  }
}

/**
 * Every refused request (401/403) and every state-changing operation leaves a record, even
 * when its handler did not write one itself (it failed validation, say).
 */
export function auditFallback(req: FastifyRequest, reply: FastifyReply, detail: string | undefined): void {
  const last = written.get(req)
  if (req.audited && (last === undefined || req.server.repos.audit.exists(last.id, last.createdMs, last.description))) return
  const op = req.op
  const status = reply.statusCode
  const refused = status === 401 || status === 403
  if (!refused && (!op?.auditCategory || op.readOnly)) return
  if (status === 429 && !req.audited) return
  const outcome = refused ? 'Refused' : status >= 400 ? 'Failed' : 'Succeeded'
  const what = op ? `${op.operationId} (${op.method} ${op.path})` : `${req.method} ${req.url}`
  // What the request named (path and query parameters), and what it asked for when it failed.
  const named = (v: unknown) => (v && typeof v === 'object' && Object.keys(v).length > 0 ? v : undefined)
  audit(req, {
    description: `${outcome}: ${what}${detail ? ` - ${detail}` : ''}`,
    details: { status, params: named(req.params), query: named(req.query), body: outcome === 'Succeeded' ? undefined : req.body },
    outcome,
    refusal: outcome === 'Succeeded' ? undefined : { status, reason: detail ?? String(status) },
  })
}
