// Backup and restore with PostgreSQL (lib/backup-postgres.ts, `npm run backup|restore` with
// PRIME_DATABASE_URL): a dump taken while the server runs restores into an empty database
// that a server then serves; a database with data or with servers connected is refused
// unless forced; a damaged dump is refused before anything is written.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { backupPostgres, PG_DUMP_FILE, restorePostgres } from '../lib/backup-postgres.js'
import { build, call, login } from './helpers.js'
import { noPostgres, pgEmptyDatabaseUrl, pgTestDatabaseUrl } from './pg.js'

const API = '/prime/webui'

t.test('a PostgreSQL backup restores into an empty database, and the refusals', { skip: noPostgres }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-pgbackup-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const source = await pgTestDatabaseUrl(t)
  const app = await build(t, { PRIME_DATABASE_URL: source })
  const admin = await login(app)
  const added = await call(app, admin, { method: 'POST', url: `${API}/admin/adduser`, payload: { userName: 'keeper', email: 'k@example.com', userProfile: 20, password: 'Battery-staple-97' } })
  t.equal(added.statusCode, 200, added.body)

  // Taken while the server is up.
  const out = path.join(dir, 'b1')
  const { manifest } = await backupPostgres(source, out)
  t.equal(manifest.backend, 'postgres')
  t.ok(manifest.schemaVersion > 0)
  t.equal(fs.statSync(out).mode & 0o777, 0o700, 'the backup directory is private')
  t.equal(fs.statSync(path.join(out, PG_DUMP_FILE)).mode & 0o777, 0o600)
  await t.rejects(backupPostgres(source, out), /exists/, 'never into an existing directory')

  const target = await pgEmptyDatabaseUrl(t)
  await restorePostgres(out, target)
  await t.rejects(restorePostgres(out, target), /already holds data/, 'a database with data is refused')
  await restorePostgres(out, target, { force: true })

  const restored = await build(t, { PRIME_DATABASE_URL: target })
  await t.rejects(restorePostgres(out, target, { force: true }), /server connection/, 'refused while a server is connected')
  const keeper = await restored.inject({ method: 'POST', url: `${API}/Auth/LocalLogin`, payload: { username: 'keeper', password: 'Battery-staple-97' } })
  t.equal(keeper.statusCode, 200, 'the restored database serves the account made before the backup')

  // A dump altered after the backup is refused before anything is written.
  const damaged = path.join(dir, 'b2')
  fs.cpSync(out, damaged, { recursive: true })
  fs.appendFileSync(path.join(damaged, PG_DUMP_FILE), 'x')
  await t.rejects(restorePostgres(damaged, await pgEmptyDatabaseUrl(t)), /does not match its manifest/)
})
