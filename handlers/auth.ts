import { tokenView } from '../lib/integration-tokens/views.js'
import { contextOf } from '../lib/platform/context.js'
import type { Config } from '../lib/config.js'
import { licenseStatus } from '../lib/system/service.js'
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

export const authHandlers: Handlers<'localLogin' | 'signIn' | 'refreshToken' | 'logout' | 'listIntegrationTokens' | 'createIntegrationToken' | 'revokeIntegrationToken'> = {
  localLogin,
  signIn: localLogin,

  async refreshToken(req) {
    const { tokens, user } = await req.server.services.sessions.refresh(contextOf(req), req.body.refreshToken)
    return sessionAnswer(req.server.config, tokens, user)
  },

  async logout(req) {
    return { loggedOut: true, revokedRefreshTokens: await req.server.services.sessions.logout(contextOf(req), req.principal!) }
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
