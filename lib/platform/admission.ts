// What every request passes before anything of it is read (the onRequest hook): its
// security headers, the limits per source address and per credential, the caller
// (authentication and profile), the media types it sends and accepts.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import helmet from 'helmet'
import type { Operation } from '../contract.js'
import { authenticateAgent, authenticatePoller, bearerToken, isHeldCredential, unauthenticated } from '../auth.js'
import { problem } from '../errors.js'
import { chooseResponseType } from '../negotiate.js'
import { fixedWindowLimiter, limitKey } from '../rate-limit.js'
import { gateMediaType } from './media-types.js'
import { type Maybe, then } from './maybe.js'
import type { CredentialStore } from './ports.js'

/**
 * The operations' answers (JSON, CSV, PDF) carry the security headers the OWASP REST
 * Security Cheat Sheet lists for APIs; the rest of helmet's set concerns HTML documents,
 * and goes with the documentation pages and unknown paths.
 */
const API_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cross-origin-resource-policy': 'same-origin',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
}

type Limiter = ReturnType<typeof fixedWindowLimiter>

export interface Admission {
  /**
   * Limits, the caller, media types: what every request passes before anything is read.
   * Answers at once when the credential's lookups did (SQLite), else a Promise.
   */
  admit(req: FastifyRequest, reply: FastifyReply): Maybe<void>
  /** The limit of the operations that check a password or secret (`x-rate-limit: login`). */
  loginLimit: Limiter
}

/** The app's admission, with its limiters. */
export function createAdmission(app: FastifyInstance): Admission {
  const { config } = app
  const credentials = app.storage.credentials
  const securityHeaders = staticHeaders(
    helmet({
      contentSecurityPolicy: {
        directives: { defaultSrc: ["'self'"], scriptSrc: ["'self'"], styleSrc: ["'self'", "'unsafe-inline'"], imgSrc: ["'self'", 'data:'] },
      },
    }),
  )
  // Limits are checked first thing, per source address, before any authentication work:
  // refused and unknown requests count too, so floods cannot reach the token checks or
  // the audit log unthrottled.
  const requestLimit = fixedWindowLimiter(config.rateLimitMax, config.rateLimitWindowMs)
  const loginLimit = fixedWindowLimiter(config.loginRateLimitMax, 60_000)
  /** Counts the request; `headers` says whether this limit is the one the answer reports. */
  const limit = (req: FastifyRequest, reply: FastifyReply, limiter: Limiter, what: string, headers: boolean) => {
    const r = limiter.hit(limitKey(req.ip), Date.now())
    // As text: Node checks every header value's characters, and a number there is converted
    // on a slow path first (about 2% of a small request's CPU time for these three).
    if (headers) reply.header('x-ratelimit-limit', String(r.max)).header('x-ratelimit-remaining', String(r.remaining)).header('x-ratelimit-reset', String(r.resetSeconds))
    if (r.exceeded) {
      throw problem('rate-limited', `Too many ${what} from this address; retry in ${r.resetSeconds} seconds.`, { headers: { 'retry-after': String(r.resetSeconds) } })
    }
  }
  // Each credential has its own budget too, wherever it calls from (agents': the gateway's).
  const budgets = {
    session: fixedWindowLimiter(config.credentialRateLimits.user, config.rateLimitWindowMs),
    integration: fixedWindowLimiter(config.credentialRateLimits.token, config.rateLimitWindowMs),
    poller: fixedWindowLimiter(config.credentialRateLimits.poller, config.rateLimitWindowMs),
  }
  const credentialLimit = (req: FastifyRequest) => {
    const p = req.principal
    const limiter = p ? (p.kind === 'session' ? budgets.session : budgets.integration) : req.poller ? budgets.poller : undefined
    if (!limiter) return
    const what = p ? (p.kind === 'session' ? 'account' : 'integration token') : 'worker poller'
    const r = limiter.hit(p ? String(p.id) : req.poller!.id, Date.now())
    if (r.exceeded) {
      throw problem('rate-limited', `Too many requests from this ${what} (${r.max} per window); retry in ${r.resetSeconds} seconds.`, { headers: { 'retry-after': String(r.resetSeconds) } })
    }
  }

  function admit(req: FastifyRequest, reply: FastifyReply): Maybe<void> {
    const op = (req.op = req.routeOptions.config.op)
    reply.headers(op ? API_HEADERS : securityHeaders).header('x-request-id', req.id)
    if (op?.deprecation) reply.headers(op.deprecation)
    // Thousands of agents may share one address (NAT): calls with a valid agent credential
    // and enrollments have the gateway's own limits instead (refused agent calls count
    // here; failed enrollments are counted when answered, lib/platform/request-log.ts).
    if (op?.access.kind === 'agent') {
      return then(authenticateAgent(credentials, bearerToken(req)), (agent) => {
        req.agent = agent
        return admitCaller(req, reply, op)
      })
    }
    return admitCaller(req, reply, op)
  }

  function admitCaller(req: FastifyRequest, reply: FastifyReply, op: Operation | undefined): Maybe<void> {
    if (req.agent || op?.gatewayLimit === 'enrollment') app.services.gateway.admit({ address: req.ip, agentId: req.agent?.id, bytes: Number(req.headers['content-length'] ?? 0) || 0 }, op!, Date.now())
    // A load balancer's probes come every few seconds from the same addresses as the clients.
    else if (!op?.probe) limit(req, reply, requestLimit, 'requests', true)
    // The operations that check a password or secret (`x-rate-limit: login`).
    if (op?.rateLimit === 'login') limit(req, reply, loginLimit, 'failed login attempts', false)
    if (!op) return
    // The caller first: a refused one learns nothing more (401/403 before 415/406), and a
    // request that fails on its media types is audited with its actor.
    return then(authorize(app, credentials, req, op), () => {
      credentialLimit(req)
      gateMediaType(req, op)
      const type = chooseResponseType(req, op.responseTypes)
      if (op.responseTypes.length > 0 && !type) {
        throw problem('not-acceptable', `This operation answers ${op.responseTypes.join(', ')}; Accept allows none of them.`)
      }
      req.responseType = type
    })
  }

  return { admit, loginLimit }
}

/** The caller: the credential the operation's security scheme asks for, and a user's profile rank. */
function authorize(app: FastifyInstance, credentials: CredentialStore, req: FastifyRequest, op: Operation): Maybe<void> {
  const access = op.access
  if (access.kind === 'public') return
  if (access.kind === 'agent') {
    if (req.agent) return
    if (!bearerToken(req)) throw problem('unauthenticated', 'An agent credential is required.', { headers: { 'www-authenticate': 'Bearer realm="prime"' } })
    return then(isHeldCredential(credentials, bearerToken(req)), (held) => {
      if (held) throw unauthenticated("This credential awaits an Administrator's approval of the re-enrollment; retry later.")
      throw unauthenticated('The agent credential is unknown or was rotated, or the agent was deleted; enroll again.')
    })
  }
  if (access.kind === 'poller') {
    if (!bearerToken(req)) throw problem('unauthenticated', 'A worker poller credential is required.', { headers: { 'www-authenticate': 'Bearer realm="prime"' } })
    return then(authenticatePoller(credentials, bearerToken(req)), (poller) => {
      req.poller = poller
      if (poller) return
      throw unauthenticated('The worker poller credential is unknown, or the poller was deleted; register again.')
    })
  }
  return then(app.tokens.authenticate(bearerToken(req), Date.now()), (principal) => {
    req.principal = principal
    if (principal.profile < access.minProfile) {
      const names: Record<number, string> = { 10: 'User', 20: 'Manager', 30: 'Administrator' }
      throw problem('forbidden', `${op.operationId} needs the ${names[access.minProfile]} profile or higher.`)
    }
    // Whatever its profile, a token may not make accounts or tokens: it would mint itself a
    // session or a token that outlives its revocation.
    if (op.noIntegrationToken && principal.kind === 'integration') {
      throw problem('forbidden', `${op.operationId} manages accounts or tokens: it needs an account's session, never an integration token, whatever its profile.`)
    }
  })
}

/**
 * The headers a helmet middleware sets, computed once: with these options they are the same
 * for every answer, and running the middleware per request cost more than the rest of a
 * simple request's hooks together.
 */
function staticHeaders(middleware: ReturnType<typeof helmet>): Record<string, string> {
  const headers: Record<string, string> = {}
  const res = {
    setHeader: (name: string, value: unknown) => {
      headers[name.toLowerCase()] = String(value)
    },
    removeHeader: (name: string) => {
      delete headers[name.toLowerCase()]
    },
  }
  let failed: unknown
  middleware({} as never, res as never, (err?: unknown) => {
    failed = err
  })
  if (failed) throw failed
  return headers
}
