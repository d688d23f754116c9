import crypto from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Config } from './config.js'
import type { GatewayAgent } from './gateway/ports.js'
import type { PollerRow } from './agentless/ports.js'
import type { CredentialStore } from './platform/ports.js'
import { type Maybe, then } from './platform/maybe.js'
import { problem } from './errors.js'
import { cacheIn } from './platform/cache.js'
import { newSecret, sha256 } from './passwords.js'

export interface Principal {
  kind: 'session' | 'integration'
  /** The account id (sessions) or the token id (integration tokens). */
  id: number | string
  /** As written in audit records: the user name, or `token:<name>`. */
  name: string
  profile: number
  sessionId?: string
}

interface AccessClaims {
  sub: string
  sid: string
  /** Issue time in ms: revocation works to the millisecond, JWT's iat only to the second. */
  ims: number
}

export const ISSUER = 'prime-webui'
const INTEGRATION_PREFIX = 'pit'
const REFRESH_PREFIX = 'prt'
/** Agents' gateway credentials. */
export const AGENT_PREFIX = 'pag'
/** Worker pollers' credentials. */
export const POLLER_PREFIX = 'ppl'

/** How far ahead of this server's clock a token's issue time may be (another host issued it). */
export const CLOCK_SKEW_MS = 30_000

/** Why an access token was refused, as told to its bearer. */
function accessTokenRefusal(err: { code?: string; message?: string }): string {
  switch (err.code) {
    case 'FAST_JWT_EXPIRED':
      return 'The access token has expired.'
    // "The exp claim is required."
    case 'FAST_JWT_MISSING_REQUIRED_CLAIM':
      return `The access token is invalid: ${err.message?.replace(/^The /, 'the ').replace(/\.$/, '')}.`
    case 'PRIME_JWT_FUTURE':
      return 'The access token is invalid: it was issued in the future.'
    case 'PRIME_JWT_TOO_LONG':
      return 'The access token is invalid: it lives longer than access tokens do.'
    default:
      return 'The access token is invalid.'
  }
}

export const unauthenticated = (detail: string) =>
  problem('unauthenticated', detail, { headers: { 'www-authenticate': `Bearer realm="prime", error="invalid_token", error_description="${detail.replace(/"/g, "'")}"` } })

// Printable ASCII, no blanks; at most 4,096 characters, checked apart: a counted repetition
// took twice as long as this one over a 260-character token.
const TOKEN_CHARS = /^[\x21-\x7e]+$/
const MAX_TOKEN = 4096
const isBlank = (code: number) => code === 32 || code === 9

/** The token of an `Authorization: Bearer <token>` header (scheme in any case), if it is one. */
export function bearerToken(req: FastifyRequest): string | undefined {
  const header = req.headers.authorization
  // Taken apart by hand: every request is authenticated, and a regular expression over the
  // whole header cost twice as much.
  if (!header || header.length < 8) return undefined
  if (!header.startsWith('Bearer') && header.slice(0, 6).toLowerCase() !== 'bearer') return undefined
  let start = 6
  while (start < header.length && isBlank(header.charCodeAt(start))) start++
  if (start === 6) return undefined
  let end = header.length
  while (end > start && isBlank(header.charCodeAt(end - 1))) end--
  if (end - start > MAX_TOKEN) return undefined
  const token = header.slice(start, end)
  return TOKEN_CHARS.test(token) ? token : undefined
}

/**
 * The agent a gateway credential belongs to, or undefined: only `pag_` credentials are
 * looked up (one indexed read of the hash, so a rotated credential or a deleted agent
 * fails at once), never a user's token.
 */
export function authenticateAgent(credentials: CredentialStore, token: string | undefined): Maybe<GatewayAgent | undefined> {
  if (!token?.startsWith(`${AGENT_PREFIX}_`)) return undefined
  return credentials.agentByCredential(sha256(token))
}

/** Whether the token is an agent credential held for an Administrator's approval of a re-enrollment. */
export function isHeldCredential(credentials: CredentialStore, token: string | undefined): Maybe<boolean> {
  return !!token?.startsWith(`${AGENT_PREFIX}_`) && credentials.heldAgentCredential(sha256(token))
}

/**
 * The worker poller a poller gateway credential belongs to, or undefined: only `ppl_`
 * credentials are looked up (a deleted poller's credential fails at once), never a
 * user's token or an agent's credential.
 */
export function authenticatePoller(credentials: CredentialStore, token: string | undefined): Maybe<PollerRow | undefined> {
  if (!token?.startsWith(`${POLLER_PREFIX}_`)) return undefined
  return credentials.pollerByCredential(sha256(token))
}

export function tokenService(app: FastifyInstance, config: Config, credentials: CredentialStore) {
  const touchIntervalMs = 60_000

  // Verified access tokens until they expire, keyed by the token itself: a client sends the
  // same token for 15 minutes, and checking its signature each time was most of the cost
  // of authenticating. Only verified tokens enter; revocation is checked per request anyway.
  // At most 10,000, the least recently used out first.
  const verified = cacheIn<string, AccessClaims>(app.caches, {
    name: 'verified-access-tokens',
    signal: "the token's expiry (revocation is checked per request, not kept)",
    max: 10_000,
    maxBytes: 16 * 1024 * 1024,
    // The token (its characters) and the claims (a few short strings and numbers).
    sizeOf: (_, token) => 2 * token.length + 256,
  })
  function verifyAccess(token: string, now: number): AccessClaims {
    const hit = verified.get(token, now)
    if (hit) return hit
    // The plugin checks the signature, the issuer and the expiry, and that exp, iat and iss are there.
    const claims = app.jwt.verify<AccessClaims & { exp: number; iat: number }>(token)
    // What this server never issues is refused even when signed with its key: a token from
    // the future (it would escape revocation, which compares issue times) or one that lives
    // longer than access tokens do.
    if (typeof claims.iat !== 'number' || typeof claims.ims !== 'number') throw new Error('iat or ims is not a number')
    if (claims.iat * 1000 > now + CLOCK_SKEW_MS || claims.ims > now + CLOCK_SKEW_MS) throw Object.assign(new Error('issued in the future'), { code: 'PRIME_JWT_FUTURE' })
    if (claims.exp - claims.iat > config.accessTokenTtlSec) throw Object.assign(new Error('lives too long'), { code: 'PRIME_JWT_TOO_LONG' })
    verified.set(token, claims, claims.exp * 1000)
    return claims
  }

  /** Resolves a bearer credential to its principal, or throws (or rejects with) a 401 problem. */
  function authenticate(token: string | undefined, now: number): Maybe<Principal> {
    if (!token) throw problem('unauthenticated', 'A bearer token is required.', { headers: { 'www-authenticate': 'Bearer realm="prime"' } })
    if (token.startsWith(`${INTEGRATION_PREFIX}_`)) {
      return then(credentials.integrationToken(sha256(token)), (row): Maybe<Principal> => {
        if (!row || row.revoked_ms !== null) throw unauthenticated('The integration token is unknown or revoked.')
        if (row.expires_ms !== null && row.expires_ms <= now) throw unauthenticated('The integration token has expired.')
        if (row.creator_profile === null || !row.creator_active) throw unauthenticated("The integration token's creator is disabled or deleted.")
        const principal: Principal = { kind: 'integration', id: row.id, name: `token:${row.name}`, profile: Math.min(row.profile, row.creator_profile) }
        // Recording every use would turn each read into a write; a minute's precision is plenty.
        if (row.last_used_ms === null || now - row.last_used_ms > touchIntervalMs) return then(credentials.touchIntegrationToken(row.id, now), () => principal)
        return principal
      })
    }
    let claims: AccessClaims
    try {
      claims = verifyAccess(token, now)
    } catch (err) {
      throw unauthenticated(accessTokenRefusal(err as { code?: string; message?: string }))
    }
    const session = typeof claims.sid === 'string' ? credentials.sessionPrincipal(claims.sid) : undefined
    return then(session, (row): Principal => {
      if (!row || String(row.user_id) !== claims.sub) throw unauthenticated('The session no longer exists.')
      if (row.revoked_ms !== null) throw unauthenticated('The session has been logged out or revoked.')
      if (!row.is_active) throw unauthenticated('The account is disabled.')
      if (!(claims.ims >= row.tokens_valid_after_ms)) throw unauthenticated('The token was revoked by a change to the account.')
      return { kind: 'session', id: row.user_id, name: row.user_name, profile: row.profile, sessionId: row.session_id }
    })
  }

  function signAccess(userId: number, sessionId: string, now: number) {
    const token = app.jwt.sign({ sub: String(userId), sid: sessionId, ims: now } satisfies AccessClaims)
    return { token, expiresAt: new Date(now + config.accessTokenTtlSec * 1000).toISOString() }
  }

  async function issueRefresh(sessionId: string, now: number) {
    const refreshToken = newSecret(REFRESH_PREFIX)
    const expires = now + config.refreshTokenTtlSec * 1000
    await credentials.addRefreshToken(sha256(refreshToken), sessionId, now, expires)
    return { refreshToken, refreshTokenExpiresAt: new Date(expires).toISOString() }
  }

  /** A new session for a login: an access token and its first refresh token. */
  async function startSession(userId: number, now: number) {
    const sessionId = crypto.randomUUID()
    await credentials.createSession(sessionId, userId, now)
    return { ...signAccess(userId, sessionId, now), ...(await issueRefresh(sessionId, now)) }
  }

  /** Rotates a refresh token; a replayed one revokes its whole session. */
  async function rotate(refreshToken: string, now: number) {
    const row = await credentials.refreshToken(sha256(refreshToken))
    if (!row) throw unauthenticated('The refresh token is unknown.')
    if (row.revoked_ms !== null) throw unauthenticated('The refresh token belongs to a revoked session.')
    if (row.expires_ms <= now) throw unauthenticated('The refresh token has expired.')
    if (!row.is_active) throw unauthenticated('The account is disabled.')
    if (!(await credentials.useRefreshToken(row.token_hash, now))) {
      await credentials.revokeSession(row.session_id, 'refresh token reused', now)
      return { reused: true as const, userId: row.user_id }
    }
    return { reused: false as const, userId: row.user_id, tokens: { ...signAccess(row.user_id, row.session_id, now), ...(await issueRefresh(row.session_id, now)) } }
  }

  function createIntegrationSecret() {
    const token = newSecret(INTEGRATION_PREFIX)
    return { token, hash: sha256(token) }
  }

  return { authenticate, startSession, rotate, createIntegrationSecret }
}
export type TokenService = ReturnType<typeof tokenService>
