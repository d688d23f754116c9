import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import Database from 'better-sqlite3'
import { migrate } from '../db/index.js'
import { migrationsDir } from '../lib/paths.js'
import { build, login, bearer, USER_PASSWORD } from './helpers.js'

const USERS_REBUILT = 22
const CONNECTIONS_REBUILT = 23
const migrationFiles = () =>
  fs
    .readdirSync(migrationsDir)
    .filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f))
    .sort()

t.test("a deleted account's id is never given again: its integration tokens stay dead", async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const add = (userName: string) =>
    app.inject({
      method: 'POST',
      url: '/prime/webui/admin/adduser',
      headers: bearer(admin),
      payload: { userName, email: `${userName}@example.com`, userProfile: 30, password: USER_PASSWORD },
    })
  const ada = (await add('ada')).json()
  const adaToken = await login(app, 'ada', USER_PASSWORD)
  const created = await app.inject({ method: 'POST', url: '/prime/webui/admin/integrationTokens', headers: bearer(adaToken), payload: { name: 'siem', userProfile: 30 } })
  t.equal(created.statusCode, 200, created.body)
  const secret = created.json().token as string
  const all = () => app.inject({ url: '/prime/webui/admin/all', headers: bearer(secret) })
  t.equal((await all()).statusCode, 200, 'the token works while its creator exists')

  const del = await app.inject({ method: 'POST', url: '/prime/webui/admin/deleteUsers', headers: bearer(admin), payload: ['ada'] })
  t.equal(del.json().succeeded, 1)
  t.equal((await all()).statusCode, 401, 'its creator deleted, it is refused')

  // The newest account deleted, SQLite alone would give its id to the next one.
  const bob = (await add('bob')).json()
  t.ok(bob.id > ada.id, `the next account gets a new id (${bob.id} after ${ada.id})`)
  const refused = await all()
  t.equal(refused.statusCode, 401, "and the deleted creator's token stays refused")
  t.match(refused.json().detail, /creator is disabled or deleted/)
})

/** A database at the schema version before `version`, as a server of that version left it. */
function databaseBefore(t: Test, version: number): Database.Database {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-ids-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const db = new Database(path.join(dir, 'prime.sqlite'))
  t.teardown(() => db.close())
  db.pragma('journal_mode = WAL')
  db.pragma('foreign_keys = ON')
  db.pragma('recursive_triggers = ON')
  for (const name of migrationFiles()) {
    const n = Number(name.slice(0, 3))
    if (n >= version) continue
    db.transaction(() => {
      db.exec(fs.readFileSync(path.join(migrationsDir, name), 'utf8'))
      db.pragma(`user_version = ${n}`)
    })()
  }
  t.equal(db.pragma('user_version', { simple: true }), version - 1)
  return db
}

t.test('the rebuild keeps accounts and sessions, and starts new ids above every id still named', async (t) => {
  const db = databaseBefore(t, USERS_REBUILT)

  const user = db.prepare(`INSERT INTO users (id, user_name, email, profile, password_hash, created_ms, updated_ms, tokens_valid_after_ms, failed_logins, locked_until_ms, last_login_ms)
    VALUES (?, ?, ?, ?, 'scrypt$x', 1, 2, 3, 4, 5, 6)`)
  user.run(1, 'admin', 'admin@example.com', 30)
  user.run(3, 'Mona', 'mona@example.com', 20)
  db.prepare("INSERT INTO sessions (id, user_id, created_ms) VALUES ('s-admin', 1, 0), ('s-mona', 3, 0)").run()
  db.prepare("INSERT INTO refresh_tokens (token_hash, session_id, created_ms, expires_ms) VALUES ('h', 's-mona', 0, 9)").run()
  // Account 7 was deleted: its token and read marks are left, naming it.
  db.prepare("INSERT INTO integration_tokens (id, name, token_hash, profile, created_by, created_by_user_id, created_ms) VALUES ('t1', 'siem', 'hash', 30, 'gone', 7, 0)").run()
  db.prepare("INSERT INTO notification_read_marks (user_key, risk_seq) VALUES ('user:1', 4), ('user:9', 5), ('token:t1', 6)").run()
  // A later migration (024) drops the per-account login counters: failures are counted per user name and source address.
  const before = db
    .prepare('SELECT * FROM users ORDER BY id')
    .all()
    .map(({ failed_logins: _f, locked_until_ms: _l, ...kept }: any) => kept)

  t.equal(migrate(db), migrationFiles().length)
  t.equal(db.pragma('foreign_keys', { simple: true }), 1, 'foreign keys are on again')
  t.same(db.pragma('foreign_key_check'), [], 'every reference is whole')
  t.same(db.prepare('SELECT * FROM users ORDER BY id').all(), before, 'the accounts are kept as they were')
  t.same(
    db.prepare('SELECT id, user_id FROM sessions ORDER BY id').all(),
    [
      { id: 's-admin', user_id: 1 },
      { id: 's-mona', user_id: 3 },
    ],
    'the sessions are kept',
  )
  t.equal((db.prepare('SELECT count(*) AS n FROM refresh_tokens').get() as { n: number }).n, 1, 'and their refresh tokens')
  t.same(
    db
      .prepare('SELECT user_key FROM notification_read_marks ORDER BY user_key')
      .all()
      .map((r: any) => r.user_key),
    ['token:t1', 'user:1'],
    'read marks of accounts that are gone are dropped',
  )
  t.match(db.prepare("SELECT sql FROM sqlite_master WHERE name = 'users'").get(), { sql: /AUTOINCREMENT/ })
  t.same(db.prepare("SELECT name, seq FROM sqlite_sequence WHERE name LIKE 'users%'").all(), [{ name: 'users', seq: 9 }], 'one counter, at the highest id named')

  const fresh = new Database(':memory:')
  t.teardown(() => fresh.close())
  migrate(fresh)
  t.same(fresh.prepare("SELECT name, seq FROM sqlite_sequence WHERE name LIKE 'users%'").all(), [{ name: 'users', seq: 0 }], 'a new database has one counter too')

  const next = db.prepare("INSERT INTO users (user_name, email, profile, password_hash, created_ms, updated_ms) VALUES ('new', 'new@example.com', 10, 'x', 1, 1)").run()
  t.equal(Number(next.lastInsertRowid), 10, 'above the highest id still named (read mark user:9), not 4')
  t.equal((db.prepare("SELECT user_name FROM users WHERE user_name = 'mona'").get() as { user_name: string }).user_name, 'Mona', 'user names keep their case-insensitive uniqueness')
  t.throws(() => db.prepare("INSERT INTO users (user_name, email, profile, password_hash, created_ms, updated_ms) VALUES ('MONA', 'x@example.com', 10, 'x', 1, 1)").run(), /UNIQUE/)
  db.prepare('DELETE FROM users WHERE id = 3').run()
  t.equal((db.prepare('SELECT count(*) AS n FROM sessions').get() as { n: number }).n, 1, 'deleting an account still removes its sessions')
})

t.test("agentless connections: a deleted connection's id is never given again, and the rebuild keeps every row", async (t) => {
  const db = databaseBefore(t, CONNECTIONS_REBUILT)
  db.prepare("INSERT INTO worker_pollers (id, name, credential_hash, created_ms) VALUES ('p1', 'poller one', 'h', 1)").run()
  const connection = db.prepare(`INSERT INTO agentless_connections (id, name, address, protocol, port, user_name, credential_type, credentials,
    credentials_updated_ms, poller_id, created_ms, updated_ms, status, run_id, start_ms, prev_errors) VALUES (?, ?, '10.0.0.1', 'SSH', 22, 'root', 'Password', x'0102', 1, 'p1', 1, 2, 'Reachable', 'r', 3, '[]')`)
  connection.run(1, 'alpha')
  connection.run(5, 'Beta')
  db.prepare("INSERT INTO agentless_runs (run_id, connection_id, start_ms, status, recorded_ms) VALUES ('r5', 5, 3, 'Reachable', 4)").run()
  const columns = db.prepare('SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(\'agentless_connections\')').all()
  const before = db.prepare('SELECT * FROM agentless_connections ORDER BY id').all()

  t.equal(migrate(db), migrationFiles().length)
  t.same(db.pragma('foreign_key_check'), [], 'every reference is whole')
  t.same(db.prepare('SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(\'agentless_connections\')').all(), columns, 'the same columns')
  t.same(db.prepare('SELECT * FROM agentless_connections ORDER BY id').all(), before, 'the connections are kept as they were')
  t.same(db.prepare('SELECT run_id, connection_id FROM agentless_runs').all(), [{ run_id: 'r5', connection_id: 5 }], 'and their runs')
  t.same(
    db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'agentless_connections' AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .all()
      .map((r: any) => r.name),
    ['agentless_connections_poller', 'agentless_connections_start'],
    'its indexes are there again',
  )

  const add = (name: string) =>
    Number(
      db
        .prepare(`INSERT INTO agentless_connections (name, address, protocol, port, user_name, credential_type, credentials,
    credentials_updated_ms, created_ms, updated_ms) VALUES (?, '10.0.0.2', 'WinRM', 5985, 'admin', 'Password', x'00', 1, 1, 1)`)
        .run(name).lastInsertRowid,
    )
  const six = add('gamma')
  t.equal(six, 6)
  db.prepare('DELETE FROM agentless_connections WHERE id = ?').run(six)
  t.equal(add('delta'), 7, 'the newest deleted, the next connection still gets a new id')
  t.throws(() => add('ALPHA'), /UNIQUE/, 'names stay unique, in any case')
  db.prepare('DELETE FROM agentless_connections WHERE id = 5').run()
  t.equal((db.prepare('SELECT count(*) AS n FROM agentless_runs').get() as { n: number }).n, 0, 'deleting a connection still removes its runs')
})

t.test('a migration run with foreign keys off is rolled back if it leaves a broken reference', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-migrations-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.writeFileSync(
    path.join(dir, '001_tables.sql'),
    `CREATE TABLE a (id INTEGER PRIMARY KEY);
    CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER NOT NULL REFERENCES a (id) ON DELETE CASCADE);
    INSERT INTO a VALUES (1); INSERT INTO b VALUES (1, 1);`,
  )
  fs.writeFileSync(
    path.join(dir, '002_rebuild.sql'),
    `-- foreign keys: off
    CREATE TABLE a_new (id INTEGER PRIMARY KEY AUTOINCREMENT); DROP TABLE a; ALTER TABLE a_new RENAME TO a;`,
  )
  const db = new Database(':memory:')
  t.teardown(() => db.close())
  db.pragma('foreign_keys = ON')
  t.throws(() => migrate(db, dir), /002_rebuild.sql leaves 1 broken references/, 'the row of b would name no a')
  t.equal(db.pragma('user_version', { simple: true }), 1, 'the schema stays at the version before')
  t.same(db.prepare('SELECT id FROM a').all(), [{ id: 1 }], 'nothing of the migration stays')
  t.same(db.prepare('SELECT id, a_id FROM b').all(), [{ id: 1, a_id: 1 }], 'and the dropped table did not cascade')
  t.equal(db.pragma('foreign_keys', { simple: true }), 1, 'foreign keys are on again')

  fs.writeFileSync(
    path.join(dir, '002_rebuild.sql'),
    `-- foreign keys: off
    CREATE TABLE a_new (id INTEGER PRIMARY KEY AUTOINCREMENT); INSERT INTO a_new SELECT id FROM a; DROP TABLE a; ALTER TABLE a_new RENAME TO a;`,
  )
  t.equal(migrate(db, dir), 2, 'a rebuild that keeps the rows goes through')
  t.same(db.prepare('SELECT id, a_id FROM b').all(), [{ id: 1, a_id: 1 }])
  t.equal(db.pragma('foreign_keys', { simple: true }), 1)
})
