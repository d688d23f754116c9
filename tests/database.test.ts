// backend: sqlite-only — SQLite's connection settings, migrations and the secrets kept in the data dir
// Pins the storage and first-start behaviour: SQLite settings, migrations, the JWT secret
// kept in the data dir, and the first Administrator account.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import Database from 'better-sqlite3'
import { openDatabase, migrate } from '../db/index.js'
import { loadConfig } from '../lib/config.js'
import { buildApp } from '../lib/app.js'
import { migrationsDir } from '../lib/paths.js'

function tempDir(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-db-test-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

const migrationCount = fs.readdirSync(migrationsDir).filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f)).length

/** A log destination that keeps every line. */
function capture() {
  const lines: Array<Record<string, any>> = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim()) lines.push(JSON.parse(line))
      done()
    },
  })
  return { lines, stream }
}

t.test('openDatabase settings', async (t) => {
  const dir = tempDir(t)
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  t.teardown(() => db.close())
  t.equal(db.pragma('journal_mode', { simple: true }), 'wal')
  t.equal(db.pragma('synchronous', { simple: true }), 2, 'FULL')
  t.equal(db.pragma('foreign_keys', { simple: true }), 1)
  t.equal(db.pragma('busy_timeout', { simple: true }), 5000)
  t.equal(db.pragma('journal_size_limit', { simple: true }), 64 * 1024 * 1024, 'the WAL is cut back to 64 MB after a long reader')
  t.equal(db.pragma('user_version', { simple: true }), migrationCount, 'migrated on open')
  const tables = db
    .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    .all()
    .map((r: any) => r.name)
  for (const name of ['users', 'sessions', 'refresh_tokens', 'integration_tokens', 'audit_trail']) t.ok(tables.includes(name), `table ${name}`)
  t.ok(fs.existsSync(path.join(dir, 'prime.sqlite-wal')), 'a WAL file beside the database')
  t.equal(db.pragma('cache_size', { simple: true }), -16 * 1024, 'a page cache of 16 MiB')
})

t.test("PRIME_DB_CACHE_MB sets the page cache of the server's connection", async (t) => {
  const dir = tempDir(t)
  const app = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: 'Given-Password-77', LOG_LEVEL: 'silent', PRIME_DB_CACHE_MB: '12' }), logger: false })
  t.teardown(() => app.close())
  t.equal(app.db.pragma('cache_size', { simple: true }), -12 * 1024)
  t.throws(() => loadConfig({ PRIME_DATA_DIR: dir, PRIME_DB_CACHE_MB: '0' }), /PRIME_DB_CACHE_MB must be an integer from 1 to 4096/)
})

t.test('foreign keys are enforced', async (t) => {
  const dir = tempDir(t)
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  t.teardown(() => db.close())
  t.throws(() => db.prepare("INSERT INTO sessions (id, user_id, created_ms) VALUES ('s', 999, 0)").run(), /FOREIGN KEY/)
  db.prepare("INSERT INTO users (user_name, email, profile, password_hash, created_ms, updated_ms) VALUES ('u', 'u@x', 10, 'h', 0, 0)").run()
  db.prepare("INSERT INTO sessions (id, user_id, created_ms) VALUES ('s', 1, 0)").run()
  db.prepare("INSERT INTO refresh_tokens (token_hash, session_id, created_ms, expires_ms) VALUES ('h', 's', 0, 1)").run()
  db.prepare('DELETE FROM users WHERE id = 1').run()
  t.equal((db.prepare('SELECT count(*) AS n FROM sessions').get() as any).n, 0, 'sessions go with their account')
  t.equal((db.prepare('SELECT count(*) AS n FROM refresh_tokens').get() as any).n, 0, 'and their refresh tokens')
})

t.test('migrate() is idempotent', async (t) => {
  t.ok(migrationCount >= 1, `${migrationCount} migration file(s)`)
  const dir = tempDir(t)
  const file = path.join(dir, 'prime.sqlite')
  const db = openDatabase(file)
  t.equal(migrate(db), migrationCount, 'answers the schema version')
  t.equal(migrate(db), migrationCount, 'again')
  t.equal(db.pragma('user_version', { simple: true }), migrationCount, 'user_version is the number of migration files')
  const schema = db.prepare('SELECT type, name, sql FROM sqlite_master ORDER BY name').all()
  db.close()

  const again = openDatabase(file)
  t.teardown(() => again.close())
  t.same(again.prepare('SELECT type, name, sql FROM sqlite_master ORDER BY name').all(), schema, 'reopening changes nothing')
  t.equal(again.pragma('user_version', { simple: true }), migrationCount)

  const fresh = new Database(':memory:')
  t.teardown(() => fresh.close())
  t.equal(migrate(fresh), migrationCount, 'a fresh database is brought to the latest version')
  t.equal(migrate(fresh), migrationCount)
})

t.test('the JWT secret is generated once into the data dir', async (t) => {
  const dir = path.join(tempDir(t), 'data', 'nested')
  const first = loadConfig({ PRIME_DATA_DIR: dir })
  const file = path.join(dir, 'jwt-secret')
  t.ok(fs.existsSync(file), 'written to <data dir>/jwt-secret')
  t.equal(fs.statSync(file).mode & 0o777, 0o600, 'readable by the owner only')
  t.equal(fs.statSync(dir).mode & 0o077, 0, 'the data dir is created private')
  t.ok(first.jwtSecret.length >= 32, 'long enough')
  t.equal(fs.readFileSync(file, 'utf8').trim(), first.jwtSecret)
  const second = loadConfig({ PRIME_DATA_DIR: dir })
  t.equal(second.jwtSecret, first.jwtSecret, 'reused by the next start')
  const other = loadConfig({ PRIME_DATA_DIR: path.join(tempDir(t), 'other') })
  t.not(other.jwtSecret, first.jwtSecret, 'each installation its own')

  const given = loadConfig({ PRIME_DATA_DIR: path.join(tempDir(t), 'env'), PRIME_JWT_SECRET: 's'.repeat(32) })
  t.equal(given.jwtSecret, 's'.repeat(32), 'PRIME_JWT_SECRET wins')
  t.notOk(fs.existsSync(path.join(given.dataDir, 'jwt-secret')), 'and nothing is written')
  t.throws(() => loadConfig({ PRIME_DATA_DIR: path.join(tempDir(t), 'short'), PRIME_JWT_SECRET: 'too-short' }), /PRIME_JWT_SECRET must be at least 32 characters/)
})

t.test('a short jwt-secret file is refused', async (t) => {
  const dir = tempDir(t)
  fs.writeFileSync(path.join(dir, 'jwt-secret'), 'abc\n', { mode: 0o600 })
  t.throws(() => loadConfig({ PRIME_DATA_DIR: dir }), /jwt-secret/)
})

t.test('first start without PRIME_ADMIN_PASSWORD', async (t) => {
  const dir = tempDir(t)
  const config = loadConfig({ PRIME_DATA_DIR: dir, LOG_LEVEL: 'silent' })
  t.equal(config.adminPassword, undefined)
  const log = capture()
  const app = await buildApp({ config, logger: { level: 'info', stream: log.stream } })
  t.teardown(() => app.close())

  const warnings = log.lines.filter((l) => l.level === 40 && /generated password/.test(l.msg))
  t.equal(warnings.length, 1, 'one warning names the generated password')
  const m = /generated password: (\S+)/.exec(warnings[0]?.msg ?? '')
  t.ok(m, warnings[0]?.msg)
  const password = m![1]
  t.ok(password.length >= 16, 'a long random password')
  t.equal(log.lines.filter((l) => JSON.stringify(l).includes(password)).length, 1, 'logged exactly once')

  const res = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password } })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().user.userProfile, 30, 'an Administrator')
  t.equal(res.json().user.userName, 'admin')

  const audit = app.repos.audit.latest(100)
  t.notOk(
    audit.some((r) => r.details.includes(password) || r.description.includes(password)),
    'the password is not in the audit trail',
  )
  const created = audit.find((r) => /first Administrator/.test(r.description))
  t.equal(JSON.parse(created!.details).passwordFrom, 'generated')
  const row = app.db.prepare("SELECT password_hash FROM users WHERE user_name = 'admin'").get() as { password_hash: string }
  t.match(row.password_hash, /^scrypt\$/, 'only a hash is stored')
  t.notMatch(row.password_hash, password)
  await app.close()

  // The next start finds the account: no new password, nothing logged.
  const log2 = capture()
  const app2 = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, LOG_LEVEL: 'silent' }), logger: { level: 'info', stream: log2.stream } })
  t.teardown(() => app2.close())
  t.notOk(
    log2.lines.some((l) => /generated password|Created account/.test(l.msg)),
    'no second password on the next start',
  )
  const again = await app2.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password } })
  t.equal(again.statusCode, 200, 'the first password still works')
  t.equal((app2.db.prepare('SELECT count(*) AS n FROM users').get() as any).n, 1)
})

t.test('first start with PRIME_ADMIN_PASSWORD', async (t) => {
  const dir = tempDir(t)
  const log = capture()
  const app = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: 'Given-Password-77' }), logger: { level: 'info', stream: log.stream } })
  t.teardown(() => app.close())
  t.notOk(
    log.lines.some((l) => JSON.stringify(l).includes('Given-Password-77')),
    'the given password is never logged',
  )
  t.ok(
    log.lines.some((l) => l.level === 30 && /PRIME_ADMIN_PASSWORD/.test(l.msg)),
    'says where the password came from',
  )
  const res = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: 'Given-Password-77' } })
  t.equal(res.statusCode, 200)
})

t.test('a weak PRIME_ADMIN_PASSWORD is refused at start', async (t) => {
  for (const [password, reason] of [
    ['short-1', /PRIME_ADMIN_PASSWORD must have at least 12 characters/],
    ['onlylettersherexx', /PRIME_ADMIN_PASSWORD must not be only letters or only digits/],
    ['123456789012345', /PRIME_ADMIN_PASSWORD must not be only letters or only digits/],
    ['my-Admin-password-1', /PRIME_ADMIN_PASSWORD must not contain the user name/],
  ] as const) {
    const dir = tempDir(t)
    const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: password })
    await t.rejects(buildApp({ config, logger: false }), reason, `${password}: ${reason}`)
    const db = new Database(config.dbFile, { readonly: true })
    t.equal((db.prepare('SELECT count(*) AS n FROM users').get() as any).n, 0, 'no account is created')
    db.close()
  }
})

t.test('a weak PRIME_ADMIN_PASSWORD does not matter once accounts exist', async (t) => {
  const dir = tempDir(t)
  const app = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: 'Given-Password-77' }), logger: false })
  await app.close()
  const again = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: 'weak' }), logger: false })
  t.teardown(() => again.close())
  const res = await again.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: 'Given-Password-77' } })
  t.equal(res.statusCode, 200, 'the variable only seeds the first start')
})
