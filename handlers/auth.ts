import crypto from 'node:crypto'
import { accountView, login } from '../lib/accounts.js'
import { audit } from '../lib/audit.js'
import { problem } from '../lib/errors.js'
import { unauthenticated } from '../lib/auth.js'
import { iso } from '../lib/time.js'
import type { IntegrationTokenRow } from '../db/integration-tokens.js'
import type { Config } from '../lib/config.js'
import type { Handlers, Ok, Req } from './types.js'

const tokenView = (t: IntegrationTokenRow) => ({
  id: t.id,
  name: t.name,
  userProfile: t.profile as 10 | 20 | 30,
  createdBy: t.created_by,
  createdTime: iso(t.created_ms),
  expiresAt: t.expires_ms === null ? null : iso(t.expires_ms),
  lastUsedTime: t.last_used_ms === null ? null : iso(t.last_used_ms),
  revokedTime: t.revoked_ms === null ? null : iso(t.revoked_ms),
})

const tokenAsset = (t: Pick<IntegrationTokenRow, 'id' | 'name'>) => ({ key: t.id, name: t.name, type: 'IntegrationToken', detail: 'Token' })

/** The answer of a login and of a refresh: the tokens, the account, the license, the start page. */
function sessionAnswer(config: Config, tokens: { token: string; expiresAt: string; refreshToken: string; refreshTokenExpiresAt: string }, user: Ok<'localLogin'>['user']): Ok<'localLogin'> {
  return {
    token: tokens.token,
    expiresAt: tokens.expiresAt,
    refreshToken: tokens.refreshToken,
    refreshTokenExpiresAt: tokens.refreshTokenExpiresAt,
    user,
    license: { primeAccountName: config.license.accountName, licenseStatus: licenseStatus(config.license.expirationDate) },
    navigation: { startPage: 'dashboard' },
  }
}

async function localLogin(req: Req<'localLogin'>) {
  const result = await login(req, req.body.username, req.body.password)
  return sessionAnswer(req.server.config, result, result.user)
}

export function licenseStatus(expiration: string | null): 'Activated' | 'Expired' {
  return expiration !== null && Date.parse(expiration) <= Date.now() ? 'Expired' : 'Activated'
}

export const authHandlers: Handlers<'localLogin' | 'signIn' | 'refreshToken' | 'logout' | 'listIntegrationTokens' | 'createIntegrationToken' | 'revokeIntegrationToken'> = {
  localLogin,
  signIn: localLogin,

  async refreshToken(req) {
    const { repos, db, tokens, config } = req.server
    const result = db.transaction(() => {
      const r = tokens.rotate(req.body.refreshToken, Date.now())
      const user = repos.users.byId(r.userId)
      audit(req, {
        description: r.reused ? `Refresh token reused for "${user?.user_name}": session revoked` : `Token refresh for "${user?.user_name}"`,
        user: user?.user_name ?? null,
        outcome: r.reused ? 'Refused' : 'Succeeded',
        severity: r.reused ? 3 : 6,
      })
      return { ...r, user }
    })()
    if (result.reused) throw unauthenticated('The refresh token was already used; its session has been revoked.')
    return sessionAnswer(config, result.tokens!, accountView(result.user!))
  },

  async logout(req) {
    const principal = req.principal!
    if (principal.kind !== 'session') throw problem('validation', 'Integration tokens are revoked with DELETE admin/integrationTokens/{integrationId}, not logged out.')
    const revoked = req.server.db.transaction(() => {
      const n = req.server.repos.sessions.revoke(principal.sessionId!, 'logout', Date.now())
      audit(req, { description: `Logout of "${principal.name}"`, details: { session: principal.sessionId } })
      return n
    })()
    return { loggedOut: true, revokedRefreshTokens: revoked }
  },

  async listIntegrationTokens(req) {
    return req.server.repos.integrationTokens.all().map(tokenView)
  },

  async createIntegrationToken(req) {
    const { repos, db, tokens } = req.server
    const body = req.body
    const creator = req.principal!
    if (creator.kind !== 'session') throw problem('forbidden', 'Integration tokens are created by an Administrator\'s session, not by another integration token.')
    if (body.userProfile > creator.profile) throw problem('forbidden', 'A token cannot have a higher profile than its creator.')
    const now = Date.now()
    const expires = body.expiresAt ? Date.parse(body.expiresAt) : null
    if (expires !== null && expires <= now) throw problem('validation', 'expiresAt must be in the future.', { errors: [{ location: 'body', name: 'expiresAt', reason: 'must be in the future' }] })
    const { token, hash } = tokens.createIntegrationSecret()
    const row = db.transaction(() => {
      if (repos.integrationTokens.byName(body.name)) throw problem('conflict', `An integration token named "${body.name}" already exists.`)
      const id = crypto.randomUUID()
      repos.integrationTokens.insert({ id, name: body.name, token_hash: hash, profile: body.userProfile, created_by: creator.name, created_by_user_id: creator.id as number, created_ms: now, expires_ms: expires })
      const created = repos.integrationTokens.byId(id)!
      audit(req, { description: `Created integration token "${body.name}" with profile ${body.userProfile}`, details: tokenView(created), asset: tokenAsset(created) })
      return created
    })()
    return { ...tokenView(row), token }
  },

  async revokeIntegrationToken(req) {
    const { repos, db } = req.server
    return db.transaction(() => {
      const row = repos.integrationTokens.byId(req.params.integrationId)
      if (!row || !repos.integrationTokens.revoke(row.id, Date.now())) throw problem('not-found', `No active integration token ${req.params.integrationId}.`)
      audit(req, { description: `Revoked integration token "${row.name}"`, asset: tokenAsset(row) })
      return tokenView(repos.integrationTokens.byId(row.id)!)
    })()
  },
}
