import type { DB } from './index.js'
import type { AuthVersion } from './auth-version.js'
import type { RefreshRow, SessionPrincipal } from '../lib/platform/ports.js'

export function sessionsRepo(db: DB, version: AuthVersion) {
  const principals = new Map<string, { version: number; row: SessionPrincipal | undefined }>()
  const insertSession = db.prepare<[string, number, number]>('INSERT INTO sessions (id, user_id, created_ms) VALUES (?, ?, ?)')
  const insertRefresh = db.prepare<[string, string, number, number]>('INSERT INTO refresh_tokens (token_hash, session_id, created_ms, expires_ms) VALUES (?, ?, ?, ?)')
  const principal = db.prepare<[string], SessionPrincipal>(
    `SELECT s.id AS session_id, s.revoked_ms, u.id AS user_id, u.user_name, u.profile, u.is_active, u.tokens_valid_after_ms
     FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = ?`,
  )
  const refreshByHash = db.prepare<[string], RefreshRow>(
    `SELECT r.token_hash, r.session_id, r.expires_ms, r.used_ms, s.revoked_ms, s.user_id, u.is_active
     FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id JOIN users u ON u.id = s.user_id WHERE r.token_hash = ?`,
  )
  const useRefresh = db.prepare<[number, string]>('UPDATE refresh_tokens SET used_ms = ? WHERE token_hash = ? AND used_ms IS NULL')
  const revoke = db.prepare<[number, string, string]>('UPDATE sessions SET revoked_ms = ?, revoked_reason = ? WHERE id = ? AND revoked_ms IS NULL')
  const unusedRefresh = db.prepare<[string], { n: number }>('SELECT count(*) AS n FROM refresh_tokens WHERE session_id = ? AND used_ms IS NULL')
  const purge = db.prepare<[number, number]>('DELETE FROM sessions WHERE revoked_ms < ? OR id IN (SELECT session_id FROM refresh_tokens GROUP BY session_id HAVING max(expires_ms) < ?)')

  return {
    create(id: string, userId: number, now: number) {
      insertSession.run(id, userId, now)
    },
    addRefreshToken: (hash: string, sessionId: string, now: number, expires: number) => insertRefresh.run(hash, sessionId, now, expires),
    principal(sessionId: string): SessionPrincipal | undefined {
      const hit = principals.get(sessionId)
      if (hit && hit.version === version.value) return hit.row
      const row = principal.get(sessionId)
      if (principals.size >= 10_000) principals.clear()
      principals.set(sessionId, { version: version.value, row })
      return row
    },
    refreshToken: (hash: string) => refreshByHash.get(hash),
    /** Marks a refresh token used; false when it was used already (a replay). */
    useRefreshToken: (hash: string, now: number) => useRefresh.run(now, hash).changes === 1,
    /** Revokes the session; answers how many of its refresh tokens were still unused. */
    revoke(sessionId: string, reason: string, now: number): number {
      const n = unusedRefresh.get(sessionId)!.n
      revoke.run(now, reason, sessionId)
      version.bump()
      return n
    },
    /** Drops sessions revoked or expired before the cut-off. */
    purge(cutoff: number): number {
      version.bump()
      return purge.run(cutoff, cutoff).changes
    },
  }
}
export type SessionsRepo = ReturnType<typeof sessionsRepo>
