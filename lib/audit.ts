import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { AuditEntry, AuditStore, AuditTrail, UnitOfWork } from './platform/ports.js'
import { auditStateOf, contextOf, digest, type Context } from './platform/context.js'
import { limitKey } from './rate-limit.js'
import type { Loop } from './platform/loops.js'

export type { AuditEntry } from './platform/ports.js'

// A key that names a secret (`password`, `newPassword`, `webhookSecret`, `refreshToken`),
// not one that merely mentions it (`passwordChanged`, `tokenId`).
const SECRET_KEY = /(pass(word|phrase)?|passwd|pwd|pw|secret|tokens?|credentials?|private[_-]?key|api[_-]?key|authorization|cookie)$/i
const MAX_DEPTH = 12
const NOTICE = 5,
  WARNING = 4

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

/** What writing an audit record needs: the trail's storage and the refusal window. */
export interface AuditDeps {
  repo: AuditStore
  /** PRIME_AUDIT_REFUSAL_WINDOW_SECONDS, in ms. */
  refusalWindowMs: number
  /** Writes the summary record of a counter whose window ended (in a unit of work: the caller's, or one of its own). */
  flushRefusal(key: string): Promise<void>
}

export function auditDeps(app: FastifyInstance): AuditDeps {
  const { audit, uow } = app.storage
  const windowSeconds = app.config.auditRefusalWindowSeconds
  return { repo: audit, refusalWindowMs: windowSeconds * 1000, flushRefusal: (key) => flushRefusal(audit, uow, windowSeconds, key) }
}

/**
 * Writes an audit record for the context's request; call it inside the unit of work (or
 * transaction) that makes the change. If that rolls back, the record goes with it, and the
 * request's fallback record is written instead.
 */
export async function recordAudit(deps: AuditDeps, ctx: Context, entry: AuditEntry): Promise<void> {
  const createdMs = Date.now()
  const description = printable(entry.description).slice(0, 1000)
  const user = (entry.user !== undefined ? (entry.user === null ? null : printable(entry.user)) : ctx.actor)?.slice(0, MAX_USER) ?? null
  const outcome = entry.outcome ?? 'Succeeded'
  let refusalKey: string | null = null
  if (entry.refusal && outcome !== 'Succeeded') {
    refusalKey = await countedRefusal(deps, ctx, user, outcome, entry.refusal, createdMs)
    if (refusalKey === null) {
      // A repeat: counted in its window's summary record.
      ctx.audit.last = undefined
      ctx.audit.audited = true
      return
    }
  }
  const op = ctx.operation
  const id = await deps.repo.insert({
    createdMs,
    severity: entry.severity ?? (outcome !== 'Succeeded' ? WARNING : NOTICE),
    category: op?.auditCategory ?? 'System',
    user,
    sourceIp: ctx.sourceAddress,
    description,
    details: detailsText(entry.details, refusalKey ? MAX_REFUSAL_DETAILS : MAX_DETAILS),
    operationId: op?.operationId ?? null,
    outcome,
    asset: entry.asset,
    requestId: ctx.requestId,
    refusalKey,
  })
  ctx.audit.last = { id, createdMs, description }
  ctx.audit.audited = true
}

/** The audit trail as services see it: records written in the caller's unit of work. */
export function auditTrail(deps: AuditDeps): AuditTrail {
  return { record: (ctx: Context, entry: AuditEntry) => recordAudit(deps, ctx, entry) }
}

/** Writes the request's audit record; call it inside the unit of work that makes the change. */
export function audit(req: FastifyRequest, entry: AuditEntry): Promise<void> {
  return recordAudit(auditDeps(req.server), contextOf(req), entry)
}

// ---- repeated refusals ------------------------------------------------------------------

/** The details of a refusal record: enough to see what was sent, not a copy of a large body. */
const MAX_REFUSAL_DETAILS = 4096
/** Distinct reasons per actor, operation, outcome and status in a window; further ones are counted as one. */
export const MAX_REFUSAL_REASONS = 5
const MAX_SOURCE_IPS = 5
const OTHER_REASONS = '(other reasons)'
const FLUSH_BATCH = 500

/**
 * The key of a refusal to write, or null when it repeats one written in the open window
 * (then counted). Keys are `<group>:<reason>` digests, the group being actor (an
 * unauthenticated caller: its source address), operation, outcome and status, the reason
 * the refusal's reason and what the request sent; the reasons of one group are found as
 * one range of the index.
 */
async function countedRefusal(deps: AuditDeps, ctx: Context, user: string | null, outcome: string, refusal: { status: number; reason: string }, now: number): Promise<string | null> {
  const repo = deps.repo
  const windowMs = deps.refusalWindowMs
  const who = user ?? `address:${limitKey(ctx.sourceAddress ?? '')}`
  const group = digest(JSON.stringify([who, ctx.operation?.operationId ?? ctx.target, outcome, refusal.status]))
  let key = `${group}:${digest(`${refusal.reason}\u0000${ctx.fingerprint()}`)}`
  let first = await repo.firstRefusal(key, now - windowMs)
  if (!first && (await repo.refusalReasons(group, now - windowMs)) >= MAX_REFUSAL_REASONS) {
    // Reasons a caller can vary at will (names of unknown properties) cannot open windows without end.
    key = `${group}:${digest(OTHER_REASONS)}`
    first = await repo.firstRefusal(key, now - windowMs)
  }
  if (!first) {
    // A new window: the counts of the one before are written first, so records stay in order.
    await deps.flushRefusal(key)
    return key
  }
  const counted = await repo.refusalCount(key)
  const ips = new Set(counted?.source_ips ? counted.source_ips.split(' ') : [])
  if (ctx.sourceAddress && ips.size < MAX_SOURCE_IPS) ips.add(ctx.sourceAddress)
  await repo.countRepeat(key, first.id, first.created_ms + windowMs, now, [...ips].join(' '))
  return null
}

/** Writes the summary record of one counter, if it has one, and drops the counter. */
async function flushRefusal(repo: AuditStore, uow: UnitOfWork, windowSeconds: number, key: string): Promise<void> {
  const counted = await repo.refusalCount(key)
  if (!counted) return
  await uow.run(async () => {
    const first = await repo.byId(counted.first_id)
    if (first) {
      await repo.insert({
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
        asset: {
          key: first.asset_key,
          name: first.asset_name,
          parentId: first.asset_parent_id,
          ipAddress: first.asset_ip,
          type: first.asset_type,
          subType: first.asset_sub_type,
          detail: first.asset_detail,
          icon: first.asset_icon,
        },
        requestId: null,
      })
    }
    await repo.dropRefusalCount(key)
  })
}

/** Writes the summary records of every window that has closed by `now`; answers how many counters it closed. */
export async function flushRefusals(app: FastifyInstance, now: number): Promise<number> {
  const { audit, uow } = app.storage
  let closed = 0
  for (;;) {
    const due = await audit.dueRefusals(now, FLUSH_BATCH)
    for (const c of due) await flushRefusal(audit, uow, app.config.auditRefusalWindowSeconds, c.refusal_key)
    closed += due.length
    if (due.length < FLUSH_BATCH) return closed
  }
}

/**
 * Closes the windows of counted refusals as they end (and those a stop left open, at once).
 * One process at a time: the counters are shared.
 */
export function refusalFlushLoop(app: FastifyInstance): Loop {
  // One round at a time: a round still writing when the next is due lets it pass.
  let round: Promise<void> | undefined
  const run = () => {
    round ??= flushRefusals(app, Date.now())
      .then(
        () => {},
        (err) => app.log.error({ err }, 'writing the counts of repeated refusals failed; retrying on the next round'),
      )
      .finally(() => (round = undefined))
    return round
  }
  let timer: NodeJS.Timeout | undefined
  return {
    name: 'audit-refusal-flush',
    // Each process writes the counts it holds in memory.
    singleton: false,
    start() {
      timer = setInterval(run, Math.min(60_000, app.config.auditRefusalWindowSeconds * 1000)).unref()
      return run()
    },
    async stop() {
      clearInterval(timer)
      await round
    },
  }
}

/**
 * Every refused request (401/403) and every state-changing operation leaves a record, even
 * when its handler did not write one itself (it failed validation, say).
 */
export function auditFallback(req: FastifyRequest, reply: FastifyReply, detail: string | undefined): Promise<void> | undefined {
  // Read without making a context: most requests (reads) have none and need no record, and
  // are done with here, without a Promise.
  const state = auditStateOf(req)
  if (!state?.audited) return needsFallback(req, reply, false) ? writeFallback(req, reply, detail) : undefined
  const last = state.last
  if (last === undefined) return undefined
  // The request's own record may have been rolled back with its unit of work.
  return req.server.storage.audit.exists(last.id, last.createdMs, last.description).then((kept) => {
    if (!kept && needsFallback(req, reply, true)) return writeFallback(req, reply, detail)
  })
}

function needsFallback(req: FastifyRequest, reply: FastifyReply, audited: boolean): boolean {
  const op = req.op
  const status = reply.statusCode
  const refused = status === 401 || status === 403
  if (!refused && (!op?.auditCategory || op.readOnly)) return false
  return !(status === 429 && !audited)
}

function writeFallback(req: FastifyRequest, reply: FastifyReply, detail: string | undefined): Promise<void> {
  const op = req.op
  const status = reply.statusCode
  const refused = status === 401 || status === 403
  const outcome = refused ? 'Refused' : status >= 400 ? 'Failed' : 'Succeeded'
  const what = op ? `${op.operationId} (${op.method} ${op.path})` : `${req.method} ${req.url}`
  // What the request named (path and query parameters), and what it asked for when it failed.
  const named = (v: unknown) => (v && typeof v === 'object' && Object.keys(v).length > 0 ? v : undefined)
  return audit(req, {
    description: `${outcome}: ${what}${detail ? ` - ${detail}` : ''}`,
    details: { status, params: named(req.params), query: named(req.query), body: outcome === 'Succeeded' ? undefined : req.body },
    outcome,
    refusal: outcome === 'Succeeded' ? undefined : { status, reason: detail ?? String(status) },
  })
}
