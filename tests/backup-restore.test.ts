// backend: sqlite-only — the backup and restore of a SQLite data directory; PostgreSQL's: tests/pg-backup.test.ts
// Pins the backup and restore of a data directory: a backup taken while the server writes
// restores into a fresh directory where every record, credential and file is there and
// works; a restore checks the copy first and refuses to overwrite what it should not.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { backup, PID_FILE, restore, verifyBackup } from '../lib/backup.js'
import { DataDirLock } from '../lib/data-dir.js'
import { build, call, login, userWithProfile, USER_PASSWORD } from './helpers.js'
import { createReport, download, runNow } from './reports-support.js'

const tmp = (t: { teardown: (fn: () => void) => void }) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-backup-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
  return dir
}
const mode = (p: string) => fs.statSync(p).mode & 0o777
const event = (i: number) => ({
  code: '0x110001',
  severity: 6,
  category: 'USB' as const,
  entityId: `HOST-${i % 7} (10.0.0.${i % 7})`,
  description: 'New USB peripheral detected',
  details: `device ${i}`,
})
const rows = (db: FastifyInstance['db'], table: string, upTo: number) => JSON.stringify(db.prepare(`SELECT * FROM ${table} WHERE id <= ? ORDER BY id`).all(upTo))

t.test('a backup taken under write load restores whole: records, accounts, tokens, files', async (t) => {
  const app = await build(t)
  const dataDir = app.testConfig.dataDir
  const admin = await login(app)
  await userWithProfile(app, admin, 'olga', 20)
  const pit = (await call(app, admin, { method: 'POST', url: '/prime/webui/admin/integrationTokens', payload: { name: 'siem', userProfile: 10 } })).json().token as string
  const report = await createReport(app, admin, { name: 'Events', type: 'agentsInventory', format: 'CSV' })
  const run = await runNow(app, admin, report.id)
  const file = (await download(app, admin, report.id, run.fileId)).rawPayload
  t.ok(file.length > 0)
  for (let i = 0; i < 200; i++) app.repos.events.record(Date.now(), [event(i)])

  // Writes keep coming, between the copy's steps, until the backup has finished.
  const maxEvent = () => app.db.prepare('SELECT max(id) FROM events').pluck().get() as number
  const maxAudit = () => app.db.prepare('SELECT max(id) FROM audit_trail').pluck().get() as number
  const before = { events: maxEvent(), audit: maxAudit() }
  let writing = true
  let written = 0
  const load = (async () => {
    while (writing) {
      app.repos.events.record(Date.now(), [event(written), event(written + 1)])
      written += 2
      await new Promise((r) => setImmediate(r))
    }
  })()
  const out = path.join(tmp(t), 'backup')
  const result = await backup(dataDir, out)
  writing = false
  await load
  t.ok(written > 0, `${written} events were written while the backup ran`)
  t.equal(mode(out), 0o700, 'the backup directory is private')
  t.equal(mode(path.join(out, 'prime.sqlite')), 0o600)
  const names = result.manifest.files.map((f) => f.path)
  t.ok(names.includes('jwt-secret') && names.includes('agentless-key') && names.includes('agent-enrollment-secret'), 'the keys are in it')
  t.ok(
    names.some((n) => n.startsWith('reports/')),
    'the report files are in it',
  )
  for (const f of result.manifest.files) t.equal(mode(path.join(out, 'files', f.path)), 0o600, `${f.path} is 0600`)
  t.notOk(
    names.some((n) => n.startsWith('prime.sqlite')),
    'the database is copied by SQLite, not as a file',
  )

  const restoredDir = path.join(tmp(t), 'data')
  restore(out, restoredDir)
  t.equal(mode(restoredDir), 0o700)
  const restored = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: restoredDir, LOG_LEVEL: 'silent' }), logger: false, validateResponses: true })
  t.teardown(() => restored.close())

  t.equal(rows(restored.db, 'events', before.events), rows(app.db, 'events', before.events), 'every event from before the backup, identical')
  t.equal(rows(restored.db, 'audit_trail', before.audit), rows(app.db, 'audit_trail', before.audit), 'every audit record from before the backup, identical')
  const copied = restored.db.prepare('SELECT max(id) FROM events').pluck().get() as number
  t.equal(rows(restored.db, 'events', copied), rows(app.db, 'events', copied), 'the copy is the database as of one instant: no gap, no torn write')

  const olga = await login(restored, 'olga', USER_PASSWORD)
  t.equal((await call(restored, olga, { url: '/prime/webui/admin/getuserdetails' })).json().userName, 'olga', 'an account logs in')
  t.equal((await call(restored, admin, { url: '/prime/webui/admin/profile' })).statusCode, 200, 'a token issued before the backup still works (same signing secret)')
  t.equal((await call(restored, pit, { url: '/prime/webui/Events/GetEventsIntegration?PageSize=10' })).statusCode, 200, 'the integration token works')
  const again = await download(restored, olga, report.id, run.fileId)
  t.equal(again.statusCode, 200)
  t.same(again.rawPayload, file, 'the report file downloads, the same bytes')
  t.equal(restored.config.agents.enrollmentSecret, app.config.agents.enrollmentSecret, 'agents enroll with the same secret')
})

t.test('a restore checks the copy, and refuses to overwrite', async (t) => {
  const app = await build(t)
  const root = tmp(t)
  const out = path.join(root, 'backup')
  await backup(app.testConfig.dataDir, out)
  t.rejects(backup(app.testConfig.dataDir, out), /not empty/, 'a backup never writes over another')

  const target = path.join(root, 'target')
  fs.mkdirSync(target)
  fs.writeFileSync(path.join(target, 'something'), 'x')
  t.throws(() => restore(out, target), /not empty.*--force/)
  t.ok(fs.existsSync(path.join(target, 'something')), 'nothing was touched')
  const forced = restore(out, target, { force: true })
  t.ok(forced.movedAside && fs.existsSync(path.join(forced.movedAside, 'something')), 'with force the old contents are moved aside, not deleted')
  t.ok(fs.existsSync(path.join(target, 'prime.sqlite')))

  const running = path.join(root, 'running')
  fs.mkdirSync(running)
  const held = DataDirLock.take(running, 'server')
  t.throws(() => restore(out, running, { force: true }), /in use by a server \(pid \d+, since .*\): stop it first \(--force does not override this\)/, 'never under a running server')
  t.same(fs.readdirSync(running).sort(), ['server.lock', 'server.pid'], 'nothing was moved or written')
  held.release()
  fs.writeFileSync(path.join(running, PID_FILE), `${JSON.stringify({ pid: 999999999, since: new Date().toISOString(), by: 'server' })}\n`)
  t.doesNotThrow(() => restore(out, running, { force: true }), 'a holder file left by a server that is gone does not block: only the lock counts')
  t.notOk(fs.existsSync(path.join(running, PID_FILE)), 'the restore leaves no holder file')

  const damaged = path.join(root, 'damaged')
  fs.cpSync(out, damaged, { recursive: true })
  fs.appendFileSync(path.join(damaged, 'files', 'jwt-secret'), 'x')
  t.throws(() => verifyBackup(damaged), /jwt-secret does not match its checksum/)
  const fresh = path.join(root, 'fresh')
  t.throws(() => restore(damaged, fresh), { name: 'BackupError' })
  t.notOk(fs.existsSync(fresh), 'a damaged backup writes nothing')

  const torn = path.join(root, 'torn')
  fs.cpSync(out, torn, { recursive: true })
  const manifest = JSON.parse(fs.readFileSync(path.join(torn, 'manifest.json'), 'utf8'))
  const db = path.join(torn, 'prime.sqlite')
  const bytes = fs.readFileSync(db)
  bytes.fill(0x55, 4096 * 3, 4096 * 4)
  fs.writeFileSync(db, bytes)
  manifest.database.sha256 = (await import('node:crypto')).createHash('sha256').update(bytes).digest('hex')
  fs.writeFileSync(path.join(torn, 'manifest.json'), JSON.stringify(manifest))
  t.throws(() => verifyBackup(torn), /integrity check|malformed/, 'a database that fails the integrity check is refused even with a matching checksum')

  const newer = path.join(root, 'newer')
  fs.cpSync(out, newer, { recursive: true })
  const m2 = JSON.parse(fs.readFileSync(path.join(newer, 'manifest.json'), 'utf8'))
  m2.schemaVersion = 999
  fs.writeFileSync(path.join(newer, 'manifest.json'), JSON.stringify(m2))
  t.throws(() => verifyBackup(newer), /schema version 999 is newer/)

  const unsafe = path.join(root, 'unsafe')
  fs.cpSync(out, unsafe, { recursive: true })
  const m3 = JSON.parse(fs.readFileSync(path.join(unsafe, 'manifest.json'), 'utf8'))
  m3.files.push({ path: '../escape', size: 1, sha256: 'x' })
  fs.writeFileSync(path.join(unsafe, 'manifest.json'), JSON.stringify(m3))
  t.throws(() => verifyBackup(unsafe), /unsafe path/)
  t.throws(() => verifyBackup(path.join(root, 'nothing')), /no readable manifest.json/)
})
