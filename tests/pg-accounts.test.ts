// Accounts, sessions, integration tokens and the system's figures on PostgreSQL answer as
// on SQLite: the same operations on both repositories, the same answers. Then what only
// PostgreSQL must show, with several connections at once: a refresh token used twice
// concurrently works once, concurrent failed logins all count, and a name taken by a
// concurrent unit of work is refused in the services' terms.
import t from 'tap'
import { AuthVersion } from '../db/auth-version.js'
import { type DB, latestSchemaVersion } from '../db/index.js'
import { integrationTokensRepo } from '../db/integration-tokens.js'
import { connectPostgres, type Postgres, pgMigrationFiles } from '../db/postgres/index.js'
import { DuplicateName, pgIntegrationTokensRepo, pgSessionsRepo, pgUsersRepo } from '../db/postgres/accounts.js'
import { pgSystemRepo } from '../db/postgres/system.js'
import { sessionsRepo } from '../db/sessions.js'
import { systemRepo } from '../db/system.js'
import { usersRepo } from '../db/users.js'
import type { NewUser } from '../lib/accounts/ports.js'
import { accountView } from '../lib/accounts/views.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

type Side = {
  users: ReturnType<typeof pgUsersRepo>
  sessions: ReturnType<typeof pgSessionsRepo>
  tokens: ReturnType<typeof pgIntegrationTokensRepo>
  system: ReturnType<typeof pgSystemRepo>
  version: AuthVersion
  /** Rows of a table, as plain SQL both dialects read alike. */
  rows(sql: string): Promise<unknown[]>
}

/** Every method of a SQLite repository, answering through a Promise (as the services see it). */
function promised<T extends object>(repo: T): T {
  return Object.fromEntries(Object.entries(repo).map(([k, fn]) => [k, typeof fn === 'function' ? async (...a: unknown[]) => fn(...a) : fn])) as T
}

function sqliteSide(db: DB): Side {
  const version = new AuthVersion()
  return {
    users: promised(usersRepo(db, version)) as unknown as Side['users'],
    sessions: promised(sessionsRepo(db, version)) as unknown as Side['sessions'],
    tokens: promised(integrationTokensRepo(db, version)) as unknown as Side['tokens'],
    system: promised(systemRepo(db)) as unknown as Side['system'],
    version,
    rows: async (sql) => db.prepare(sql).all(),
  }
}

function pgSide(db: Postgres): Side {
  const version = new AuthVersion(undefined, db.uow.afterCommit)
  return {
    users: pgUsersRepo(db, version),
    sessions: pgSessionsRepo(db, version),
    tokens: pgIntegrationTokensRepo(db, version),
    system: pgSystemRepo(db),
    version,
    rows: (sql) => db.query(sql),
  }
}

async function sides(t: Tap.Test) {
  const liteDb = tempDb(t).db
  const pg = await pgTestDatabase(t)
  return { lite: sqliteSide(liteDb), liteDb, pg: pgSide(pg), db: pg }
}

/** Runs `op` on both sides and compares the answers; answers them. */
async function same<T>(t: Tap.Test, s: { lite: Side; pg: Side }, what: string, op: (side: Side) => Promise<T>): Promise<T> {
  const lite = await op(s.lite)
  const pg = await op(s.pg)
  t.same(pg, lite, what)
  return pg
}

/** Runs `op` on both sides, for its effect (answers such as SQLite's run results are not compared). */
async function both(s: { lite: Side; pg: Side }, op: (side: Side) => Promise<unknown>): Promise<void> {
  await op(s.lite)
  await op(s.pg)
}

/** Both sides refuse `op`; answers the PostgreSQL error. */
async function bothRefuse(t: Tap.Test, s: { lite: Side; pg: Side }, what: string, op: (side: Side) => Promise<unknown>): Promise<unknown> {
  const caught = async (side: Side) => {
    try {
      await op(side)
    } catch (err) {
      return err
    }
    return undefined
  }
  const lite = await caught(s.lite)
  const pg = await caught(s.pg)
  t.ok(lite, `${what}: SQLite refuses`)
  t.ok(pg, `${what}: PostgreSQL refuses`)
  return pg
}

const user = (user_name: string, over: Partial<NewUser> = {}): NewUser => ({
  user_name,
  email: `${user_name}@example.com`,
  first_name: null,
  last_name: null,
  phone: null,
  image: null,
  profile: 10,
  password_hash: `hash-${user_name}`,
  is_active: 1,
  ...over,
})

t.test('accounts', { skip: noPostgres }, async (t) => {
  const s = await sides(t)
  await same(t, s, 'no account yet: empty list', (x) => x.users.all())
  await same(t, s, 'no account yet: counts', (x) => x.users.counts())
  await same(t, s, 'no account yet: no administrator', (x) => x.users.activeAdministrators())

  // Names whose order differs between code points and a linguistic collation ('a-b'/'ab',
  // '_x'), whose case differs only in ASCII ('Bob'/'bob') or only beyond it ('Ärger'/'ärger':
  // two names for SQLite's NOCASE, and so for PostgreSQL's lower() in the "C" collation).
  const names = ['bob', 'Zed', 'ab', 'a-b', '_x', 'Ärger', 'ärger', 'alice', 'ALAN', '123']
  for (const [i, name] of names.entries()) {
    await same(t, s, `insert ${name}: the same id`, (x) => x.users.insert(user(name, { profile: i % 3 === 0 ? 30 : 20, is_active: i === 3 ? 0 : 1, first_name: i % 2 ? 'F' : null }), 1000 + i))
  }
  await same(t, s, 'every account, in name order whatever the case', (x) => x.users.all())
  await same(t, s, 'every account as JSON', (x) => x.users.allJson(accountView))
  await same(t, s, 'one account as JSON', (x) => x.users.accountJson(2, accountView))
  await same(t, s, 'an absent account as JSON', (x) => x.users.accountJson(999, accountView))
  await same(t, s, 'one account', (x) => x.users.account(3))
  await same(t, s, 'an absent account', (x) => x.users.account(999))
  await same(t, s, 'by id', (x) => x.users.byId(1))
  await same(t, s, 'by an absent id', (x) => x.users.byId(999))
  await same(t, s, 'by name, another case', (x) => x.users.byName('BOB'))
  await same(t, s, 'by name, non-ASCII case differs: another account', (x) => Promise.all([x.users.byName('ÄRGER'), x.users.byName('ärger'), x.users.byName('Ärger')]))
  await same(t, s, 'by an absent name', (x) => x.users.byName('nobody'))
  await same(t, s, 'counts', (x) => x.users.counts())
  await same(t, s, 'active administrators', (x) => x.users.activeAdministrators())

  await both(s, (x) => x.users.update(1, { user_name: 'BOB', email: 'b@example.com', first_name: null, profile: 30 }, 5000))
  await both(s, (x) => x.users.update(2, {}, 5001))
  await both(s, (x) => x.users.update(3, { is_active: 0, password_hash: 'new' }, 5002))
  await both(s, (x) => x.users.update(999, { email: 'none@example.com' }, 5003))
  await same(t, s, 'after updates: every account', (x) => x.users.all())
  await same(t, s, 'after updates: the renamed account by its new name', (x) => x.users.byName('bob'))
  await same(t, s, 'after updates: password and state', (x) => x.users.byId(3))
  await same(t, s, 'after updates: counts', (x) => x.users.counts())
  await same(t, s, 'after updates: active administrators', (x) => x.users.activeAdministrators())

  await both(s, (x) => x.users.recordLogin(2, 6000))
  await both(s, (x) => x.users.recordLogin(999, 6000))
  await both(s, (x) => x.users.revokeTokens(2, 6001))
  await same(t, s, 'after a login and a revocation', (x) => x.users.byId(2))
  await same(t, s, 'remove an account', (x) => x.users.remove(4))
  await same(t, s, 'remove it again', (x) => x.users.remove(4))
  await same(t, s, 'after the removal', (x) => x.users.all())
  t.equal(s.pg.version.value, s.lite.version.value, 'the same writes moved the auth version')

  const inserted = await bothRefuse(t, s, 'a name taken in another case', (x) => x.users.insert(user('ALICE'), 7000))
  t.type(inserted, DuplicateName)
  t.match(inserted, { code: 'duplicate-name', kind: 'account', taken: 'ALICE' }, 'PostgreSQL says which name, in the services’ terms')
  const renamed = await bothRefuse(t, s, 'a rename to a name taken in another case', (x) => x.users.update(1, { user_name: 'Alan' }, 7001))
  t.match(renamed, { code: 'duplicate-name', taken: 'Alan' })
  await same(t, s, 'nothing changed by the refusals', (x) => x.users.all())
  // A refused insert used up an identity value on PostgreSQL (sequences are not rolled
  // back), not on SQLite: the next ids differ by design, and both are new.
  const next = { lite: await s.lite.users.insert(user('carol'), 7002), pg: await s.pg.users.insert(user('carol'), 7002) }
  t.ok(next.lite > names.length && next.pg >= next.lite, 'ids are never given again')
  t.equal(s.pg.version.value, s.lite.version.value, 'the refusals moved the auth version alike')
})

t.test('failed logins lock a name from a source', { skip: noPostgres }, async (t) => {
  const s = await sides(t)
  const threshold = 3
  const lockMs = 1000
  const fail = (name: string, source: string, now: number, n = threshold) => both(s, (x) => x.users.recordFailedLogin(name, source, n, lockMs, now))
  // SQLite keeps the case of the name that started a count; PostgreSQL the case of the row
  // it counts on: the names are compared folded.
  const table = (x: Side) => x.rows('SELECT lower(user_name) AS name, source, failures, last_ms, locked_until_ms FROM login_failures ORDER BY lower(user_name), source')
  const locked = (name: string, source: string, now: number) => same(t, s, `${name} from ${source} at ${now}`, (x) => x.users.loginLockedUntil(name, source, now))

  await locked('eve', 'a', 0)
  await fail('eve', 'a', 0)
  await fail('EVE', 'a', 100)
  await locked('eve', 'a', 150)
  await fail('Eve', 'b', 150)
  await fail('eve', 'a', 200)
  t.equal(await locked('eVe', 'a', 300), 1200, 'the third failure in a row locks, whatever the case of the name')
  t.equal(await locked('eve', 'b', 300), undefined, 'not from another source')
  await same(t, s, 'the counts', table)
  t.equal(await locked('eve', 'a', 1200), undefined, 'the lock ends')
  // Run out: the last failure was a lock period ago and the lock has ended; counting
  // starts again from 1, and other run-out counts go.
  await fail('mallory', 'c', 1300)
  await same(t, s, 'run-out counts dropped', table)
  await fail('EVE', 'a', 1300)
  await same(t, s, "eve's count started again", table)
  await fail('eve', 'a', 1400)
  t.equal(await locked('eve', 'a', 1400), undefined, 'two failures do not lock')
  await fail('eve', 'a', 1500)
  t.equal(await locked('eve', 'a', 1500), 2500, 'the third does')
  await fail('eve', 'a', 1600)
  await same(t, s, 'failures while locked count and move the lock', table)
  await fail('zed', 'a', 1600, 1)
  t.equal(await locked('zed', 'a', 1600), 2600, 'a threshold of one locks at the first failure')
  await both(s, (x) => x.users.clearFailedLogins('EVE', 'a'))
  await both(s, (x) => x.users.clearFailedLogins('nobody', 'a'))
  await same(t, s, 'a success clears its name and source only', table)
  t.equal(await locked('eve', 'a', 1700), undefined)
})

t.test('sessions and refresh tokens', { skip: noPostgres }, async (t) => {
  const s = await sides(t)
  for (const name of ['ann', 'ben', 'cat']) await both(s, (x) => x.users.insert(user(name), 100))
  const sessionsTable = (x: Side) => x.rows('SELECT id, user_id, created_ms, revoked_ms, revoked_reason FROM sessions ORDER BY id')
  const refreshTable = (x: Side) => x.rows('SELECT token_hash, session_id, created_ms, expires_ms, used_ms FROM refresh_tokens ORDER BY token_hash')

  await both(s, async (x) => {
    await x.sessions.create('s1', 1, 1000)
    await x.sessions.addRefreshToken('r1', 's1', 1000, 5000)
    await x.sessions.create('s2', 1, 1100)
    await x.sessions.addRefreshToken('r2', 's2', 1100, 5100)
    await x.sessions.create('s3', 2, 1200)
    await x.sessions.addRefreshToken('r3', 's3', 1200, 2000)
    await x.sessions.create('s4', 3, 1300)
    await x.sessions.addRefreshToken('r4', 's4', 1300, 9000)
    await x.sessions.create('s5', 3, 1400)
  })
  await same(t, s, 'a principal', (x) => x.sessions.principal('s1'))
  await same(t, s, 'an absent session', (x) => x.sessions.principal('nope'))
  await same(t, s, 'a refresh token', (x) => x.sessions.refreshToken('r1'))
  await same(t, s, 'an absent refresh token', (x) => x.sessions.refreshToken('nope'))
  await bothRefuse(t, s, 'a session of an absent account', (x) => x.sessions.create('s9', 999, 1500))
  await bothRefuse(t, s, 'a session id given twice', (x) => x.sessions.create('s1', 2, 1500))
  await bothRefuse(t, s, 'a refresh token of an absent session', (x) => x.sessions.addRefreshToken('r9', 'nope', 1500, 9000))

  t.equal(await same(t, s, 'rotation: first use', (x) => x.sessions.useRefreshToken('r1', 2000)), true)
  t.equal(await same(t, s, 'rotation: a replay', (x) => x.sessions.useRefreshToken('r1', 2001)), false)
  t.equal(await same(t, s, 'an absent token', (x) => x.sessions.useRefreshToken('nope', 2001)), false)
  await both(s, (x) => x.sessions.addRefreshToken('r1b', 's1', 2000, 6000))
  await same(t, s, 'the used token', (x) => x.sessions.refreshToken('r1'))

  await same(t, s, 'revoking answers the unused refresh tokens', (x) => x.sessions.revoke('s1', 'refresh token reused', 2100))
  await same(t, s, 'revoking again: the first revocation stands', (x) => x.sessions.revoke('s1', 'logout', 2200))
  await same(t, s, 'revoking an absent session', (x) => x.sessions.revoke('nope', 'logout', 2200))
  await same(t, s, 'the revoked principal', (x) => x.sessions.principal('s1'))
  await same(t, s, 'the revoked session’s refresh token', (x) => x.sessions.refreshToken('r1b'))

  // A change to the account ends every session it has open, and only those.
  await both(s, (x) => x.users.revokeTokens(1, 2300))
  await same(t, s, 'the account’s sessions revoked', sessionsTable)
  await same(t, s, 'its principal carries the cut-off', (x) => x.sessions.principal('s2'))
  await both(s, (x) => x.users.update(2, { is_active: 0 }, 2400))
  await same(t, s, 'a disabled account’s principal', (x) => x.sessions.principal('s3'))
  await same(t, s, 'a disabled account’s refresh token', (x) => x.sessions.refreshToken('r3'))

  // Deleting an account takes its sessions and their refresh tokens.
  await both(s, (x) => x.users.remove(3))
  await same(t, s, 'sessions after a removal', sessionsTable)
  await same(t, s, 'refresh tokens after a removal', refreshTable)
  await same(t, s, 'a removed account’s session', (x) => x.sessions.principal('s4'))

  await both(s, async (x) => {
    await x.users.insert(user('dan'), 3000)
    await x.sessions.create('s6', 4, 3000)
    await x.sessions.addRefreshToken('r6a', 's6', 3000, 3500)
    await x.sessions.addRefreshToken('r6b', 's6', 3100, 4500)
    await x.sessions.create('s7', 4, 3000)
  })
  // Revoked before 4000: s1, s2; all refresh tokens expired before 4000: s3 (2000); s6's
  // latest expires at 4500; s7 has no refresh token (never purged by expiry).
  await same(t, s, 'purge answers how many sessions went', (x) => x.sessions.purge(4000))
  await same(t, s, 'sessions after the purge', sessionsTable)
  await same(t, s, 'refresh tokens after the purge', refreshTable)
  await same(t, s, 'a purge with nothing to drop', (x) => x.sessions.purge(0))
  t.equal(s.pg.version.value, s.lite.version.value, 'the same writes moved the auth version')
})

t.test('integration tokens', { skip: noPostgres }, async (t) => {
  const s = await sides(t)
  for (const name of ['root', 'ops']) await both(s, (x) => x.users.insert(user(name, { profile: 30 }), 100))
  const token = (id: string, name: string, created_ms: number, creator: number | null, over = {}) => ({
    id,
    name,
    token_hash: `h-${id}`,
    profile: 20,
    created_by: 'root',
    created_by_user_id: creator,
    created_ms,
    expires_ms: null,
    ...over,
  })
  await same(t, s, 'none yet', (x) => x.tokens.all())
  await both(s, async (x) => {
    await x.tokens.insert(token('b-id', 'Siem', 1000, 1))
    await x.tokens.insert(token('a-id', 'backup', 1000, 2, { expires_ms: 9000, profile: 30 }))
    await x.tokens.insert(token('c-id', 'Orphan', 900, null))
    await x.tokens.insert(token('d-id', 'late', 2000, 1, { profile: 10 }))
  })
  await same(t, s, 'newest first, then by id', (x) => x.tokens.all())
  await same(t, s, 'by id', (x) => x.tokens.byId('a-id'))
  await same(t, s, 'by an absent id', (x) => x.tokens.byId('nope'))
  await same(t, s, 'by name, another case', (x) => x.tokens.byName('SIEM'))
  await same(t, s, 'by an absent name', (x) => x.tokens.byName('nope'))
  await same(t, s, 'by hash, with its creator', (x) => x.tokens.byHash('h-b-id'))
  await same(t, s, 'by hash, without a creator', (x) => x.tokens.byHash('h-c-id'))
  await same(t, s, 'by an absent hash', (x) => x.tokens.byHash('nope'))
  const refused = await bothRefuse(t, s, 'a name taken in another case', (x) => x.tokens.insert(token('e-id', 'siem', 3000, 1)))
  t.match(refused, { code: 'duplicate-name', kind: 'integration token', taken: 'siem' })

  await both(s, (x) => x.tokens.touch('b-id', 4000))
  await both(s, (x) => x.tokens.touch('nope', 4000))
  await same(t, s, 'touched', (x) => x.tokens.byId('b-id'))
  await same(t, s, 'revoke', (x) => x.tokens.revoke('b-id', 4100))
  await same(t, s, 'revoke again', (x) => x.tokens.revoke('b-id', 4200))
  await same(t, s, 'revoke an absent token', (x) => x.tokens.revoke('nope', 4200))
  await same(t, s, 'the revoked token', (x) => x.tokens.byHash('h-b-id'))
  // The creator changes: the token acts with at most what the creator may do now.
  await both(s, (x) => x.users.update(2, { profile: 10, is_active: 0 }, 4300))
  await same(t, s, 'a disabled creator', (x) => x.tokens.byHash('h-a-id'))
  await both(s, (x) => x.users.remove(1))
  await same(t, s, 'a deleted creator', (x) => x.tokens.byHash('h-d-id'))
  await same(t, s, 'after all', (x) => x.tokens.all())
  t.equal(s.pg.version.value, s.lite.version.value, 'the same writes moved the auth version')
})

t.test('the system’s figures', { skip: noPostgres }, async (t) => {
  const s = await sides(t)
  await same(t, s, 'no agents', (x) => x.system.agentCounts())
  const agents: [string, string][] = [
    ['Connected', 'Armed'],
    ['Connected', 'Free'],
    ['Disconnected', 'Free'],
    ['Disconnected', 'Free'],
    ['Disconnected', 'Armed'],
  ]
  const insertAgent = 'INSERT INTO agents (uuid, machine_id, enrolled_ms, host_identifier, connection_status, operational_status) VALUES '
  const values = (ph: (i: number) => string) => agents.map((_, i) => `('u${i}', 'm${i}', 1, 'host${i}', ${ph(2 * i)}, ${ph(2 * i + 1)})`).join(', ')
  s.liteDb.prepare(insertAgent + values(() => '?')).run(agents.flat())
  // The agents table is 003_agents.sql's: only the columns the counts read are set.
  await s.db.run(insertAgent + values((i) => `$${i + 1}`), agents.flat())
  await same(t, s, 'agent counts', (x) => x.system.agentCounts())

  t.equal(await s.lite.system.schemaVersion(), latestSchemaVersion(), 'SQLite: its latest migration')
  t.equal(await s.pg.system.schemaVersion(), pgMigrationFiles().length, 'PostgreSQL: its latest migration (a numbering of its own)')
  for (const side of [s.lite, s.pg]) t.ok((await side.system.sizeBytes()) > 0, 'a size')
  await same(t, s, 'the probe writes and rolls back', (x) => x.system.probe())
  await same(t, s, 'and again (nothing of it is left)', (x) => x.system.probe())
  await s.db.uow.run(async () => {
    await s.pg.users.insert(user('kept'), 1)
    await s.pg.system.probe()
  })
  t.ok(await s.pg.users.byName('kept'), 'a probe inside a unit of work rolls back its own transaction only')
  // A server that takes no writes (a standby, or read-only by setting) fails the probe.
  await s.db.run(`ALTER DATABASE ${new URL(s.db.url).pathname.slice(1)} SET default_transaction_read_only = on`)
  const readOnly = connectPostgres(s.db.url, { max: 1 })
  t.teardown(() => readOnly.close())
  await t.rejects(pgSystemRepo(readOnly).probe(), /read-only/)
  t.ok(await pgSystemRepo(readOnly).schemaVersion(), 'and the client it used goes on reading')
})

t.test('PostgreSQL with several connections at once', { skip: noPostgres }, async (t) => {
  const db = await pgTestDatabase(t, 12)
  const version = new AuthVersion(undefined, db.uow.afterCommit)
  const users = pgUsersRepo(db, version)
  const sessions = pgSessionsRepo(db, version)
  const tokens = pgIntegrationTokensRepo(db, version)
  const id = await users.insert(user('ann'), 100)
  await sessions.create('s1', id, 100)

  await t.test('a refresh token used by several requests at once works once', async (t) => {
    await sessions.addRefreshToken('burst', 's1', 100, 9000)
    const uses = await Promise.all(Array.from({ length: 8 }, (_, i) => db.uow.run(() => sessions.useRefreshToken('burst', 200 + i))))
    t.equal(uses.filter(Boolean).length, 1, 'exactly one use succeeds')
  })

  await t.test('a second use waits for the first unit of work, then fails', async (t) => {
    await sessions.addRefreshToken('held', 's1', 100, 9000)
    let release!: () => void
    const held = new Promise<void>((resolve) => (release = resolve))
    let firstUsed!: () => void
    const used = new Promise<void>((resolve) => (firstUsed = resolve))
    const first = db.uow.run(async () => {
      const ok = await sessions.useRefreshToken('held', 300)
      firstUsed()
      await held
      return ok
    })
    await used
    const second = db.uow.run(() => sessions.useRefreshToken('held', 301))
    // The second update waits on the first's row lock until the first commits.
    while (!(await db.value<boolean>("SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')")));
    release()
    t.same(await Promise.all([first, second]), [true, false])
    t.equal((await sessions.refreshToken('held'))!.used_ms, 300, 'the first use is the one kept')
  })

  await t.test('concurrent failed logins all count', async (t) => {
    await Promise.all(Array.from({ length: 10 }, (_, i) => db.uow.run(() => users.recordFailedLogin(i % 2 ? 'Eve' : 'eve', 'a', 5, 1000, 500))))
    t.same(await db.query('SELECT failures, locked_until_ms FROM login_failures'), [{ failures: 10, locked_until_ms: 1500 }])
    t.equal(await users.loginLockedUntil('EVE', 'a', 600), 1500)
  })

  await t.test('a name taken by a concurrent unit of work is refused as a duplicate', async (t) => {
    let arrived = 0
    let bothLooked!: () => void
    const looked = new Promise<void>((resolve) => (bothLooked = resolve))
    const create = (name: string) =>
      db.uow.run(async () => {
        const found = await users.byName(name)
        if (++arrived === 2) bothLooked()
        await looked
        if (found) throw new Error('found')
        return users.insert(user(name), 700)
      })
    const results = await Promise.allSettled([create('Zoe'), create('ZOE')])
    t.equal(results.filter((r) => r.status === 'fulfilled').length, 1, 'one insert stands')
    const refused = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')?.reason
    t.type(refused, DuplicateName)
    t.match(refused, { code: 'duplicate-name', kind: 'account' })

    const insertToken = (name: string, n: number) => tokens.insert({ id: `t${n}`, name, token_hash: `h${n}`, profile: 10, created_by: 'ann', created_by_user_id: id, created_ms: 1, expires_ms: null })
    const made = await Promise.allSettled([insertToken('Feed', 1), insertToken('feed', 2)])
    t.equal(made.filter((r) => r.status === 'rejected' && r.reason instanceof DuplicateName).length, 1, 'an integration token name too')
  })

  await t.test('listeners hear of a revocation once it commits, and never of one rolled back', async (t) => {
    let told = 0
    version.onBump(() => told++)
    await db.uow.run(async () => {
      await sessions.revoke('s1', 'logout', 800)
      t.equal(told, 0, 'not before the commit')
    })
    t.equal(told, 1, 'after it')
    await t.rejects(
      db.uow.run(async () => {
        await users.revokeTokens(id, 900)
        throw new Error('rolled back')
      }),
    )
    t.equal(told, 1, 'not for a rolled-back unit')
    t.equal((await users.byId(id))!.tokens_valid_after_ms, 0)
  })
})
