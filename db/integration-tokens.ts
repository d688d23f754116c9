import type { DB } from './index.js'
import type { AuthVersion } from './auth-version.js'
import type { IntegrationPrincipalRow, IntegrationTokenRow } from '../lib/integration-tokens/ports.js'

export function integrationTokensRepo(db: DB, version: AuthVersion) {
  const insert = db.prepare(
    `INSERT INTO integration_tokens (id, name, token_hash, profile, created_by, created_by_user_id, created_ms, expires_ms)
     VALUES (@id, @name, @token_hash, @profile, @created_by, @created_by_user_id, @created_ms, @expires_ms)`,
  )
  const byHash = db.prepare<[string], IntegrationPrincipalRow>(
    `SELECT t.*, u.profile AS creator_profile, u.is_active AS creator_active
     FROM integration_tokens t LEFT JOIN users u ON u.id = t.created_by_user_id WHERE t.token_hash = ?`,
  )
  const byId = db.prepare<[string], IntegrationTokenRow>('SELECT * FROM integration_tokens WHERE id = ?')
  const byName = db.prepare<[string], IntegrationTokenRow>('SELECT * FROM integration_tokens WHERE name = ?')
  const all = db.prepare<[], IntegrationTokenRow>('SELECT * FROM integration_tokens ORDER BY created_ms DESC, id')
  const revoke = db.prepare<[number, string]>('UPDATE integration_tokens SET revoked_ms = ? WHERE id = ? AND revoked_ms IS NULL')
  const touch = db.prepare<[number, string]>('UPDATE integration_tokens SET last_used_ms = ? WHERE id = ?')

  return {
    insert: (row: Omit<IntegrationTokenRow, 'last_used_ms' | 'revoked_ms'>) => insert.run(row),
    byHash: (hash: string) => byHash.get(hash),
    byId: (id: string) => byId.get(id),
    byName: (name: string) => byName.get(name),
    all: () => all.all(),
    revoke(id: string, now: number): boolean {
      const revoked = revoke.run(now, id).changes === 1
      // Tokens are looked up on every request; what follows a revocation is the open notification streams.
      if (revoked) version.bump()
      return revoked
    },
    touch: (id: string, now: number) => touch.run(now, id),
  }
}
export type IntegrationTokensRepo = ReturnType<typeof integrationTokensRepo>
