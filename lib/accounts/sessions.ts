// Sessions: a refresh token traded for new tokens (once: a reused one ends its session),
// and logging out.
import { unauthenticated } from '../auth.js'
import { problem } from '../errors.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail, UnitOfWork } from '../platform/ports.js'
import type { AccountStore } from './ports.js'
import { accountView, type AccountView } from './views.js'

export interface Tokens {
  token: string
  expiresAt: string
  refreshToken: string
  refreshTokenExpiresAt: string
}

export interface SessionDeps {
  accounts: Pick<AccountStore, 'byId'>
  sessions: { revoke(sessionId: string, reason: string, now: number): Promise<number> }
  uow: UnitOfWork
  audit: AuditTrail
  /** Trades a refresh token (inside the unit of work: its use is written there); refuses unknown, revoked and expired ones. */
  rotate(refreshToken: string, now: number): Promise<{ reused: true; userId: number } | { reused: false; userId: number; tokens: Tokens }>
}

export function sessionService(deps: SessionDeps) {
  const { uow, audit } = deps
  return {
    async refresh(ctx: Context, refreshToken: string): Promise<{ tokens: Tokens; user: AccountView }> {
      const result = await uow.run(async () => {
        const r = await deps.rotate(refreshToken, Date.now())
        const user = await deps.accounts.byId(r.userId)
        await audit.record(ctx, {
          description: r.reused ? `Refresh token reused for "${user?.user_name}": session revoked` : `Token refresh for "${user?.user_name}"`,
          user: user?.user_name ?? null,
          outcome: r.reused ? 'Refused' : 'Succeeded',
          severity: r.reused ? 3 : 6,
        })
        return { ...r, user }
      })
      // Refused after the commit: the session's end and its audit record are kept.
      if (result.reused) throw unauthenticated('The refresh token was already used; its session has been revoked.')
      return { tokens: result.tokens, user: accountView(result.user!) }
    },

    /** Ends the caller's session and its refresh tokens; answers how many refresh tokens it revoked. */
    async logout(ctx: Context, caller: { kind: 'session' | 'integration'; name: string; sessionId?: string }): Promise<number> {
      if (caller.kind !== 'session') throw problem('validation', 'Integration tokens are revoked with DELETE admin/integrationTokens/{integrationId}, not logged out.')
      return uow.run(async () => {
        const n = await deps.sessions.revoke(caller.sessionId!, 'logout', Date.now())
        await audit.record(ctx, { description: `Logout of "${caller.name}"`, details: { session: caller.sessionId } })
        return n
      })
    },
  }
}

export type SessionService = ReturnType<typeof sessionService>
