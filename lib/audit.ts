import type { FastifyReply, FastifyRequest } from 'fastify'
import type { AuditAsset } from '../db/audit.js'

export interface AuditEntry {
  description: string
  /** What changed; secrets are masked before it is stored. */
  details?: unknown
  asset?: AuditAsset
  severity?: number
  outcome?: 'Succeeded' | 'Failed' | 'Refused'
  /** The actor, when the request has no principal (a login). */
  user?: string | null
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
export function detailsText(details: unknown): string {
  const masked = maskSecrets(details ?? {})
  const text = JSON.stringify(masked) ?? '{}'
  if (text.length <= MAX_DETAILS) return text
  const short = JSON.stringify({ truncated: true, length: text.length, details: shorten(masked) })
  if (short.length <= MAX_DETAILS) return short
  for (let keep = MAX_DETAILS / 4; ; keep = Math.floor(keep / 2)) {
    const preview = JSON.stringify({ truncated: true, length: text.length, preview: text.slice(0, keep) })
    if (preview.length <= MAX_DETAILS) return preview
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
  const id = req.server.repos.audit.insert({
    createdMs,
    severity: entry.severity ?? (entry.outcome && entry.outcome !== 'Succeeded' ? WARNING : NOTICE),
    category: op?.auditCategory ?? 'System',
    user: (entry.user !== undefined ? (entry.user === null ? null : printable(entry.user)) : actor(req))?.slice(0, MAX_USER) ?? null,
    sourceIp: req.ip ?? null,
    description,
    details: detailsText(entry.details),
    operationId: op?.operationId ?? null,
    outcome: entry.outcome ?? 'Succeeded',
    asset: entry.asset,
    requestId: req.id,
  })
  written.set(req, { id, createdMs, description })
  req.audited = true
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
  })
}
