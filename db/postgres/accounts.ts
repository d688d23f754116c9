// Accounts, sessions and integration tokens on PostgreSQL: the same methods and answers as
// db/users.ts, db/sessions.ts and db/integration-tokens.ts. Nothing is kept between calls:
// another node may change an account or end a session at any time, and every read must see it.
import type { AccountRow, AccountStore, NewUser, UserChanges, UserRow } from '../../lib/accounts/ports.js'
import type { IntegrationPrincipalRow, IntegrationTokenRow, IntegrationTokenStore } from '../../lib/integration-tokens/ports.js'
import type { AuthVersion } from '../auth-version.js'
import type { IntegrationTokensRepo } from '../integration-tokens.js'
import type { SessionsRepo } from '../sessions.js'
import type { RefreshRow, SessionPrincipal } from '../../lib/platform/ports.js'
import type { Async } from '../unit-of-work.js'
import type { UsersRepo } from '../users.js'
import type { Postgres, Row } from './connection.js'

/**
 * What an insert or a rename rejects with when another account (or integration token) has
 * the name, whatever its case. The services look the name up first, but on PostgreSQL a
 * concurrent unit of work (on this node or another) may take it between the look-up and
 * the write. The unique index decides, and this names its refusal so that a service can
 * answer it as the conflict its look-up would have found: by `code`, since services import
 * nothing from db/.
 */
export class DuplicateName extends Error {
  readonly code = 'duplicate-name'
  constructor(
    readonly kind: 'account' | 'integration token',
    /** The name asked for. */
    readonly taken: string,
    options?: { cause: unknown },
  ) {
    super(`An ${kind} named "${taken}" already exists.`, options)
    this.name = 'DuplicateName'
  }
}

/** `work()`, with a unique violation of `index` turned into a DuplicateName. */
async function unique<T>(index: string, kind: DuplicateName['kind'], name: string | undefined, work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (err) {
    const e = err as { code?: string; constraint?: string }
    if (e.code === '23505' && e.constraint === index) throw new DuplicateName(kind, name ?? '', { cause: err })
    throw err
  }
}

const ACCOUNT_COLUMNS = 'id, user_name, email, first_name, last_name, phone, image, profile, is_active, created_ms, updated_ms, last_login_ms'
const CHANGEABLE = new Set(['user_name', 'email', 'first_name', 'last_name', 'phone', 'image', 'profile', 'password_hash', 'is_active'])

/** The SQLite repository's methods but its cache (`memo`); revoking answers nothing (SQLite's answer is its statement's run result). */
export type PgUsersRepo = Async<Omit<UsersRepo, 'memo' | 'revokeTokens'>> & { revokeTokens(id: number, now: number): Promise<void> }

export function pgUsersRepo(db: Postgres, version: AuthVersion): PgUsersRepo {
  const all = () => db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM users ORDER BY lower(user_name), id`)
  const account = (id: number) => db.one<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM users WHERE id = $1`, [id])

  const repo = {
    /** Every account, mapped by `view` and written as JSON (built per call: nothing is kept). */
    allJson: async (view: (u: AccountRow) => unknown) => JSON.stringify((await all()).map(view)),
    accountJson: async (id: number, view: (u: AccountRow) => unknown) => {
      const user = await account(id)
      return user && JSON.stringify(view(user))
    },
    byId: (id: number) => db.one<UserRow & Row>('SELECT * FROM users WHERE id = $1', [id]),
    /** The row lock: a change committed first is read (READ COMMITTED reads the newest version after the wait); a later one waits for this transaction. */
    byIdForChange: (id: number) => db.one<UserRow & Row>('SELECT * FROM users WHERE id = $1 FOR UPDATE', [id]),
    // The name is folded as the column is (its "C" collation: ASCII letters only, as SQLite's
    // NOCASE), not by the database's default collation.
    byName: (name: string) => db.one<UserRow & Row>('SELECT * FROM users WHERE lower(user_name) = lower($1 COLLATE "C")', [name]),
    all,
    account,
    counts: async () => (await db.one<{ total: number; active: number }>('SELECT count(*) AS total, coalesce(sum(is_active), 0) AS active FROM users'))!,
    // Held, the Administrators' rows stay locked to the end of the unit of work: two of them
    // demoting each other at once then count one after the other, the second seeing the first's change.
    activeAdministrators: async (hold?: boolean) => (await db.value<number>(`SELECT count(*) FROM (SELECT 1 FROM users WHERE profile = 30 AND is_active = 1${hold ? ' FOR UPDATE' : ''}) a`))!,
    async insert(user: NewUser, now: number): Promise<number> {
      const id = await unique('users_user_name', 'account', user.user_name, () =>
        db.value<number>(
          `INSERT INTO users (user_name, email, first_name, last_name, phone, image, profile, password_hash, is_active, created_ms, updated_ms)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING id`,
          [user.user_name, user.email, user.first_name, user.last_name, user.phone, user.image, user.profile, user.password_hash, user.is_active, now],
        ),
      )
      return id!
    },
    async update(id: number, changes: UserChanges, now: number): Promise<void> {
      const cols = Object.keys(changes)
        .filter((c) => CHANGEABLE.has(c))
        .sort()
      const values = cols.map((c) => changes[c as keyof UserChanges])
      const sets = cols.map((c, i) => `${c} = $${i + 3}`).concat('updated_ms = $2')
      await unique('users_user_name', 'account', changes.user_name, () => db.run(`UPDATE users SET ${sets.join(', ')} WHERE id = $1`, [id, now, ...values]))
      await version.bump()
    },
    async remove(id: number): Promise<boolean> {
      // Its sessions and their refresh tokens go with it (ON DELETE CASCADE).
      const removed = (await db.run('DELETE FROM users WHERE id = $1', [id])) > 0
      await version.bump()
      return removed
    },
    /**
     * The pair's lock in force, if any. In a unit of work, the attempts of one name from one
     * source then go one at a time until it commits (a transaction lock on the pair, on every
     * node): the login's check and its count (recordFailedLogin) are one step, so parallel
     * guesses cannot all read "not locked" before any of them counts.
     */
    async loginLockedUntil(name: string, source: string, now: number): Promise<number | undefined> {
      await db.query(`SELECT pg_advisory_xact_lock(hashtextextended(lower($1 COLLATE "C") || E'\\n' || $2, 0))`, [name, source])
      return db.value<number>('SELECT locked_until_ms FROM login_failures WHERE lower(user_name) = lower($1 COLLATE "C") AND source = $2 AND locked_until_ms > $3', [name, source, now])
    },
    /**
     * Counts a failed login with this user name from this source, and locks the pair once
     * `threshold` failures follow each other within `lockMs`; counts that have run out go.
     * One statement, so that concurrent failures (on any node) each count: the upsert
     * starts the pair's count again itself when it has run out (SQLite deletes it first,
     * which one statement cannot do to the row it then upserts), and the other run-out
     * counts are deleted beside it.
     */
    async recordFailedLogin(name: string, source: string, threshold: number, lockMs: number, now: number): Promise<void> {
      // A count has run out when its last failure is a lock period old and no lock is in force.
      const runOut = (row: string) => `${row}.last_ms <= $5::bigint AND ${row}.locked_until_ms <= $3::bigint`
      await db.run(
        `WITH run_out AS (
           DELETE FROM login_failures d WHERE ${runOut('d')} AND NOT (lower(d.user_name) = lower($1 COLLATE "C") AND d.source = $2)
         )
         INSERT INTO login_failures AS f (user_name, source, failures, last_ms, locked_until_ms)
         VALUES ($1, $2, 1, $3, CASE WHEN 1 >= $4::int THEN $6::bigint ELSE 0 END)
         ON CONFLICT (lower(user_name), source) DO UPDATE SET
           failures = CASE WHEN ${runOut('f')} THEN 1 ELSE f.failures + 1 END,
           locked_until_ms = CASE WHEN CASE WHEN ${runOut('f')} THEN 1 ELSE f.failures + 1 END >= $4::int THEN $6::bigint ELSE 0 END,
           last_ms = $3`,
        [name, source, now, threshold, now - lockMs, now + lockMs],
      )
    },
    async clearFailedLogins(name: string, source: string): Promise<void> {
      await db.run('DELETE FROM login_failures WHERE lower(user_name) = lower($1 COLLATE "C") AND source = $2', [name, source])
    },
    async recordLogin(id: number, now: number): Promise<void> {
      await db.run('UPDATE users SET last_login_ms = $1 WHERE id = $2', [now, id])
    },
    /** Voids the account's access tokens and ends its sessions, refresh tokens included. */
    async revokeTokens(id: number, now: number): Promise<void> {
      await db.run(
        `WITH ended AS (
           UPDATE sessions SET revoked_ms = $1, revoked_reason = 'account changed' WHERE user_id = $2 AND revoked_ms IS NULL
         )
         UPDATE users SET tokens_valid_after_ms = $1 WHERE id = $2`,
        [now, id],
      )
      await version.bump()
    },
  }
  return repo satisfies AccountStore
}

/** The SQLite repository's methods; adding a refresh token answers nothing (SQLite's answer is its statement's run result). */
export type PgSessionsRepo = Async<Omit<SessionsRepo, 'addRefreshToken'>> & {
  addRefreshToken(hash: string, sessionId: string, now: number, expires: number): Promise<void>
}

export function pgSessionsRepo(db: Postgres, version: AuthVersion): PgSessionsRepo {
  return {
    async create(id: string, userId: number, now: number): Promise<void> {
      await db.run('INSERT INTO sessions (id, user_id, created_ms) VALUES ($1, $2, $3)', [id, userId, now])
    },
    async addRefreshToken(hash: string, sessionId: string, now: number, expires: number): Promise<void> {
      await db.run('INSERT INTO refresh_tokens (token_hash, session_id, created_ms, expires_ms) VALUES ($1, $2, $3, $4)', [hash, sessionId, now, expires])
    },
    /** Read per request, never kept: a revocation by any node holds on the next request. */
    principal: (sessionId: string) =>
      db.one<SessionPrincipal & Row>(
        `SELECT s.id AS session_id, s.revoked_ms, u.id AS user_id, u.user_name, u.profile, u.is_active, u.tokens_valid_after_ms
         FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.id = $1`,
        [sessionId],
      ),
    refreshToken: (hash: string) =>
      db.one<RefreshRow & Row>(
        `SELECT r.token_hash, r.session_id, r.expires_ms, r.used_ms, s.revoked_ms, s.user_id, u.is_active
         FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id JOIN users u ON u.id = s.user_id WHERE r.token_hash = $1`,
        [hash],
      ),
    /**
     * Marks a refresh token used; false when it was used already (a replay). Of two uses at
     * once (on any nodes) the second waits for the first's row lock, then finds it used.
     */
    useRefreshToken: async (hash: string, now: number) => (await db.run('UPDATE refresh_tokens SET used_ms = $1 WHERE token_hash = $2 AND used_ms IS NULL', [now, hash])) === 1,
    /** Revokes the session; answers how many of its refresh tokens were still unused. */
    async revoke(sessionId: string, reason: string, now: number): Promise<number> {
      const n = await db.value<number>(
        `WITH revoked AS (
           UPDATE sessions SET revoked_ms = $1, revoked_reason = $2 WHERE id = $3 AND revoked_ms IS NULL
         )
         SELECT count(*) FROM refresh_tokens WHERE session_id = $3 AND used_ms IS NULL`,
        [now, reason, sessionId],
      )
      await version.bump()
      return n!
    },
    /** Drops sessions revoked or expired before the cut-off. */
    async purge(cutoff: number): Promise<number> {
      const n = await db.run(
        `DELETE FROM sessions WHERE revoked_ms < $1
           OR id IN (SELECT session_id FROM refresh_tokens GROUP BY session_id HAVING max(expires_ms) < $1)`,
        [cutoff],
      )
      await version.bump()
      return n
    },
  }
}

/** The SQLite repository's methods; inserting and touching answer nothing (SQLite's answers are its statements' run results). */
export type PgIntegrationTokensRepo = Async<Omit<IntegrationTokensRepo, 'insert' | 'touch'>> & {
  insert(row: Omit<IntegrationTokenRow, 'last_used_ms' | 'revoked_ms'>): Promise<void>
  touch(id: string, now: number): Promise<void>
}

export function pgIntegrationTokensRepo(db: Postgres, version: AuthVersion): PgIntegrationTokensRepo {
  const repo = {
    async insert(row: Omit<IntegrationTokenRow, 'last_used_ms' | 'revoked_ms'>): Promise<void> {
      await unique('integration_tokens_name', 'integration token', row.name, () =>
        db.run(
          `INSERT INTO integration_tokens (id, name, token_hash, profile, created_by, created_by_user_id, created_ms, expires_ms)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
          [row.id, row.name, row.token_hash, row.profile, row.created_by, row.created_by_user_id, row.created_ms, row.expires_ms],
        ),
      )
    },
    /** With what its creator may do now: the token works with at most that. */
    byHash: (hash: string) =>
      db.one<IntegrationPrincipalRow & Row>(
        `SELECT t.*, u.profile AS creator_profile, u.is_active AS creator_active
         FROM integration_tokens t LEFT JOIN users u ON u.id = t.created_by_user_id WHERE t.token_hash = $1`,
        [hash],
      ),
    byId: (id: string) => db.one<IntegrationTokenRow & Row>('SELECT * FROM integration_tokens WHERE id = $1', [id]),
    byName: (name: string) => db.one<IntegrationTokenRow & Row>('SELECT * FROM integration_tokens WHERE lower(name) = lower($1 COLLATE "C")', [name]),
    all: () => db.query<IntegrationTokenRow & Row>('SELECT * FROM integration_tokens ORDER BY created_ms DESC, id'),
    async revoke(id: string, now: number): Promise<boolean> {
      const revoked = (await db.run('UPDATE integration_tokens SET revoked_ms = $1 WHERE id = $2 AND revoked_ms IS NULL', [now, id])) === 1
      // Tokens are looked up on every request; what follows a revocation is the open notification streams.
      if (revoked) await version.bump()
      return revoked
    },
    async touch(id: string, now: number): Promise<void> {
      await db.run('UPDATE integration_tokens SET last_used_ms = $1 WHERE id = $2', [now, id])
    },
  }
  return repo satisfies IntegrationTokenStore
}
