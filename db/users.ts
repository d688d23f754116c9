import type { DB } from './index.js'
import { otherConnectionsCommits, type AuthVersion } from './auth-version.js'
import { cacheIn, type CacheRegistry } from '../lib/platform/cache.js'
import type { AccountRow, NewUser, UserChanges, UserRow } from '../lib/accounts/ports.js'
const ACCOUNT_COLUMNS = 'id, user_name, email, first_name, last_name, phone, image, profile, is_active, created_ms, updated_ms, last_login_ms'

const changeable = new Set(['user_name', 'email', 'first_name', 'last_name', 'phone', 'image', 'profile', 'password_hash', 'is_active'])

export function usersRepo(db: DB, version: AuthVersion, caches?: CacheRegistry) {
  const byId = db.prepare<[number], UserRow>('SELECT * FROM users WHERE id = ?')
  const byName = db.prepare<[string], UserRow>('SELECT * FROM users WHERE user_name = ?')
  const all = db.prepare<[], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM users ORDER BY user_name COLLATE NOCASE, id`)
  const accountById = db.prepare<[number], AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM users WHERE id = ?`)
  const insert = db.prepare(
    `INSERT INTO users (user_name, email, first_name, last_name, phone, image, profile, password_hash, is_active, created_ms, updated_ms)
     VALUES (@user_name, @email, @first_name, @last_name, @phone, @image, @profile, @password_hash, @is_active, @now, @now)`,
  )
  const remove = db.prepare<[number]>('DELETE FROM users WHERE id = ?')
  const count = db.prepare<[], { total: number; active: number }>('SELECT count(*) AS total, coalesce(sum(is_active), 0) AS active FROM users')
  const activeAdmins = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM users WHERE profile = 30 AND is_active = 1')
  const loginLock = db.prepare<[string, string, number], number>('SELECT locked_until_ms FROM login_failures WHERE user_name = ? AND source = ? AND locked_until_ms > ?').pluck()
  const loginFailed = db.prepare(
    `INSERT INTO login_failures (user_name, source, failures, last_ms, locked_until_ms)
     VALUES (@name, @source, 1, @now, CASE WHEN 1 >= @threshold THEN @now + @lockMs ELSE 0 END)
     ON CONFLICT (user_name, source) DO UPDATE SET
       failures = failures + 1,
       locked_until_ms = CASE WHEN failures + 1 >= @threshold THEN @now + @lockMs ELSE 0 END,
       last_ms = @now`,
  )
  // A lock ends a lock period after the failure that set it, so this also drops run-out
  // locks: counting starts again from 1 after a lock, not 1 short of the next one.
  const loginFailuresRunOut = db.prepare<[number, number]>('DELETE FROM login_failures WHERE last_ms <= ? AND locked_until_ms <= ?')
  const loginFailuresCleared = db.prepare<[string, string]>('DELETE FROM login_failures WHERE user_name = ? AND source = ?')
  const loginSucceeded = db.prepare<[number, number]>('UPDATE users SET last_login_ms = ? WHERE id = ?')
  const revokeTokens = db.prepare<[number, number]>('UPDATE users SET tokens_valid_after_ms = ? WHERE id = ?')
  const revokeSessions = db.prepare<[number, number]>("UPDATE sessions SET revoked_ms = ?, revoked_reason = 'account changed' WHERE user_id = ? AND revoked_ms IS NULL")
  const updateStatements = new Map<string, ReturnType<DB['prepare']>>()

  // Values derived from the accounts (answers of the account reads), kept until the table
  // changes: every console page reads them, and accounts change rarely. A change by this
  // connection clears them at once; one committed by another connection within a millisecond.
  const othersCommits = otherConnectionsCommits(db)
  // At most 1,000 answers, least recently used first out.
  const derived = cacheIn<string, unknown>(caches, {
    name: 'account-answers',
    signal: 'a change to the accounts by this connection, or a commit of another one',
    max: 1000,
    maxBytes: 4 * 1024 * 1024,
  })
  const changed = () => derived.clear()

  /**
   * `compute()`, or its value kept since the accounts last changed. Inside a transaction it
   * is always computed: what it reads there may yet be rolled back.
   */
  function memo<T>(key: string, compute: () => T): T {
    if (db.inTransaction) return compute()
    derived.validFor(othersCommits())
    return derived.getOrSet(key, compute) as T
  }

  return {
    memo,
    /** Every account, mapped by `view` and written as JSON, kept until the accounts change. */
    allJson(view: (u: AccountRow) => unknown): string {
      return memo('all', () => JSON.stringify(all.all().map(view)))
    },
    /** One account, mapped by `view` and written as JSON, kept until the accounts change. */
    accountJson(id: number, view: (u: AccountRow) => unknown): string | undefined {
      return memo(`account:${id}`, () => {
        const user = accountById.get(id)
        return user && JSON.stringify(view(user))
      })
    },
    byId: (id: number) => byId.get(id),
    /** As byId: SQLite's write transactions run one at a time, so nothing changes the row until this one ends. */
    byIdForChange: (id: number) => byId.get(id),
    byName: (name: string) => byName.get(name),
    all: () => all.all(),
    account: (id: number) => accountById.get(id),
    counts: () => count.get()!,
    activeAdministrators: () => activeAdmins.get()!.n,
    insert(user: NewUser, now: number): number {
      const id = Number(insert.run({ ...user, now }).lastInsertRowid)
      changed()
      return id
    },
    update(id: number, changes: UserChanges, now: number): void {
      const cols = Object.keys(changes)
        .filter((c) => changeable.has(c))
        .sort()
      const key = cols.join(',')
      let stmt = updateStatements.get(key)
      if (!stmt) {
        const sets = cols.map((c) => `${c} = @${c}`).concat('updated_ms = @now')
        stmt = db.prepare(`UPDATE users SET ${sets.join(', ')} WHERE id = @id`)
        updateStatements.set(key, stmt)
      }
      stmt.run({ ...changes, id, now })
      changed()
      version.bump()
    },
    remove(id: number): boolean {
      version.bump()
      const removed = remove.run(id).changes > 0
      changed()
      return removed
    },
    /** When the lock on logins with this user name (whether an account has it or not) from this source ends, if one is in force. */
    loginLockedUntil: (name: string, source: string, now: number): number | undefined => loginLock.get(name, source, now),
    /**
     * Counts a failed login with this user name from this source, and locks the pair once
     * `threshold` failures follow each other within `lockMs`; counts that have run out go.
     */
    recordFailedLogin(name: string, source: string, threshold: number, lockMs: number, now: number) {
      loginFailuresRunOut.run(now - lockMs, now)
      loginFailed.run({ name, source, threshold, lockMs, now })
    },
    /** A login with this user name from this source succeeded: its failures no longer count. */
    clearFailedLogins(name: string, source: string) {
      loginFailuresCleared.run(name, source)
    },
    recordLogin(id: number, now: number) {
      loginSucceeded.run(now, id)
      changed()
    },
    /** Voids the account's access tokens and ends its sessions, refresh tokens included. */
    revokeTokens(id: number, now: number) {
      version.bump()
      revokeSessions.run(now, id)
      const result = revokeTokens.run(now, id)
      changed()
      return result
    },
  }
}
export type UsersRepo = ReturnType<typeof usersRepo>
