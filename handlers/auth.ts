import { accountView } from '../lib/accounts/views.js'
import { audit } from '../lib/audit.js'
import { problem } from '../lib/errors.js'
import { unauthenticated } from '../lib/auth.js'
import { tokenView } from '../lib/integration-tokens/views.js'
import { contextOf } from '../lib/platform/context.js'
import type { Config } from '../lib/config.js'
import type { Handlers, Ok, Req } from './types.js'

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
  const result = await req.server.services.accounts.login(contextOf(req), req.body.username, req.body.password)
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
    return (await req.server.services.integrationTokens.list()).map(tokenView)
  },

  async createIntegrationToken(req) {
    const { row, token } = await req.server.services.integrationTokens.create(contextOf(req), req.principal!, req.body)
    return { ...tokenView(row), token }
  },

  async revokeIntegrationToken(req) {
    return tokenView(await req.server.services.integrationTokens.revoke(contextOf(req), req.params.integrationId))
  },
}
