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

/** Writes the request's audit record; call it inside the transaction that makes the change. */
export function audit(req: FastifyRequest, entry: AuditEntry): void {
  const op = req.routeOptions.config.op
  req.server.repos.audit.insert({
    createdMs: Date.now(),
    severity: entry.severity ?? (entry.outcome && entry.outcome !== 'Succeeded' ? WARNING : NOTICE),
    category: op?.auditCategory ?? 'System',
    user: entry.user !== undefined ? (entry.user === null ? null : printable(entry.user)) : (req.principal?.name ?? (req.agent ? `agent:${req.agent.uuid}` : null)),
    sourceIp: req.ip ?? null,
    description: printable(entry.description).slice(0, 1000),
    details: JSON.stringify(maskSecrets(entry.details ?? {})).slice(0, 65536),
    operationId: op?.operationId ?? null,
    outcome: entry.outcome ?? 'Succeeded',
    asset: entry.asset,
  })
  req.audited = true
}

/**
 * Every refused request (401/403) and every state-changing operation leaves a record, even
 * when its handler did not write one itself (it failed validation, say).
 */
export function auditFallback(req: FastifyRequest, reply: FastifyReply, detail: string | undefined): void {
  if (req.audited) return
  const op = req.routeOptions.config.op
  const status = reply.statusCode
  const refused = status === 401 || status === 403
  if (!refused && !op?.auditCategory) return
  if (status === 429 && !req.audited) return
  const outcome = refused ? 'Refused' : status >= 400 ? 'Failed' : 'Succeeded'
  const what = op ? `${op.operationId} (${op.method} ${op.path})` : `${req.method} ${req.url}`
  audit(req, {
    description: `${outcome}: ${what}${detail ? ` - ${detail}` : ''}`,
    details: { status, body: outcome === 'Succeeded' ? undefined : req.body },
    outcome,
  })
}
