// The credential lookups of authentication (lib/platform/ports.ts CredentialStore) on
// SQLite: each answers at once, with no Promise on a request's way in.
import type { CredentialStore } from '../lib/platform/ports.js'
import type { agentlessRepo } from './agentless.js'
import type { gatewayRepo } from './gateway.js'
import type { integrationTokensRepo } from './integration-tokens.js'
import type { sessionsRepo } from './sessions.js'

export interface CredentialRepos {
  gateway: Pick<ReturnType<typeof gatewayRepo>, 'byCredential' | 'heldReEnrollmentByCredential'>
  agentless: Pick<ReturnType<typeof agentlessRepo>, 'pollerByCredential'>
  integrationTokens: Pick<ReturnType<typeof integrationTokensRepo>, 'byHash' | 'touch'>
  sessions: Pick<ReturnType<typeof sessionsRepo>, 'principal' | 'create' | 'addRefreshToken' | 'refreshToken' | 'useRefreshToken' | 'revoke'>
}

export function sqliteCredentials({ gateway, agentless, integrationTokens, sessions }: CredentialRepos): CredentialStore {
  return {
    agentByCredential: (hash) => gateway.byCredential(hash),
    heldAgentCredential: (hash) => gateway.heldReEnrollmentByCredential(hash) !== undefined,
    pollerByCredential: (hash) => agentless.pollerByCredential(hash),
    integrationToken: (hash) => integrationTokens.byHash(hash),
    touchIntegrationToken: (id, now) => integrationTokens.touch(id, now),
    sessionPrincipal: (sessionId) => sessions.principal(sessionId),
    createSession: (sessionId, userId, now) => sessions.create(sessionId, userId, now),
    addRefreshToken: (hash, sessionId, now, expiresMs) => sessions.addRefreshToken(hash, sessionId, now, expiresMs),
    refreshToken: (hash) => sessions.refreshToken(hash),
    useRefreshToken: (hash, now) => sessions.useRefreshToken(hash, now),
    revokeSession: (sessionId, reason, now) => sessions.revoke(sessionId, reason, now),
  }
}
