// What a service knows of the request that called it: who acts, with which profile, from
// where, in which operation. Services take this instead of the request, so they run (and
// are tested) without Fastify.
import crypto from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { Operation } from '../contract.js'

export interface Context {
  /** As audit records name the actor: the user name, `token:<id>`, `agent:<uuid>`, `poller:<name>`; null when nobody is known. */
  actor: string | null
  /** The caller's profile rank (User 10, Manager 20, Administrator 30), when a user or token calls. */
  profile: number | null
  sourceAddress: string | null
  requestId: string
  /** `METHOD /path` as called, without the query: names what was called when no operation was reached. */
  target: string
  /** The operation called, when the request reached one. */
  operation?: Pick<Operation, 'operationId' | 'method' | 'path' | 'auditCategory' | 'readOnly'>
  /**
   * A digest of what the request sent: tells the same request refused again (a flood) from
   * requests that merely fail alike. Computed when first asked.
   */
  fingerprint(): string
  /** What the audit trail wrote for this request (see lib/audit.ts). */
  readonly audit: AuditState
}

export interface AuditState {
  audited: boolean
  /** The newest record written, to tell whether its transaction was rolled back. */
  last?: { id: number; createdMs: number; description: string }
}

const MAX_ACTOR = 100

/** Who acts: the account or integration token, else the agent or worker poller whose credential the call carries. */
function actorOf(req: FastifyRequest): string | null {
  if (req.principal) {
    const { kind, name, id } = req.principal
    // `token:` and a name of up to 100 characters would not fit the record's 100: such a token is named by its id.
    return kind === 'integration' && name.length > MAX_ACTOR ? `token:${id}` : name
  }
  if (req.agent) return `agent:${req.agent.uuid}`
  if (req.poller) return `poller:${req.poller.name}`
  return null
}

export const digest = (text: string) => crypto.createHash('sha256').update(text).digest('base64url').slice(0, 22)

function fingerprintOf(req: FastifyRequest): string {
  let body = ''
  try {
    body = JSON.stringify(req.body) ?? ''
  } catch {
    // a body that cannot be written as JSON is told apart by its other parts only
  }
  return digest([req.method, req.url, req.headers['content-type'] ?? '', req.headers.authorization ?? '', body].join('\u0000'))
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's context, once a service or the audit trail asked for it (contextOf). */
    primeContext: Context | null
  }
}

/**
 * A request's context. Actor, profile and target are read from the request when asked: a
 * gateway call learns its agent in the handler, after the context may have been made. A
 * class rather than an object of closures: one is made for most requests.
 */
class RequestContext implements Context {
  readonly audit: AuditState = { audited: false }
  private digest: string | undefined
  constructor(private readonly req: FastifyRequest) {}
  get actor() {
    return actorOf(this.req)
  }
  get profile() {
    return this.req.principal?.profile ?? null
  }
  get sourceAddress() {
    return this.req.ip ?? null
  }
  get requestId() {
    return String(this.req.id)
  }
  get target() {
    return `${this.req.method} ${this.req.url.split('?')[0]}`
  }
  get operation() {
    return this.req.op
  }
  fingerprint() {
    this.digest ??= fingerprintOf(this.req)
    return this.digest
  }
}

/** The request's context, made once (kept on the request: `primeContext`, decorated by the app). */
export function contextOf(req: FastifyRequest): Context {
  return (req.primeContext ??= new RequestContext(req))
}

/** What the audit trail wrote for the request, if it has a context yet (none is made). */
export function auditStateOf(req: FastifyRequest): AuditState | undefined {
  return req.primeContext?.audit
}

/** A context for work no request asked for (a background job), or for tests. */
export function systemContext(over: Partial<Omit<Context, 'audit' | 'fingerprint'>> = {}): Context {
  const requestId = over.requestId ?? crypto.randomUUID()
  return { actor: null, profile: null, sourceAddress: null, requestId, target: 'SYSTEM', ...over, fingerprint: () => digest(requestId), audit: { audited: false } }
}
