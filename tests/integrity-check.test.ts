// backend: sqlite-only — SQLite's quick check in a worker thread
// Pins SQLite's quick check as the Database health check runs it: in a worker thread on a
// connection of its own (it reads the whole file, tens of seconds on a large database, and
// must not hold requests up), reported once finished, and failing on a damaged file.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import Database from 'better-sqlite3'
import type { FastifyInstance } from 'fastify'
import { quickCheck, quickChecksRunning } from '../db/integrity.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { ADMIN_PASSWORD, call, login } from './helpers.js'

function tempDir(t: Test): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-integrity-test-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** A database whose table `junk` fills several pages; answers that table's root page. */
function databaseWithJunk(file: string): number {
  const db = new Database(file)
  db.exec('CREATE TABLE junk (id INTEGER PRIMARY KEY, text TEXT)')
  const insert = db.prepare('INSERT INTO junk (text) VALUES (?)')
  db.transaction(() => {
    for (let i = 0; i < 2000; i++) insert.run(`row ${i} `.repeat(10))
  })()
  const root = db.prepare("SELECT rootpage FROM sqlite_master WHERE name = 'junk'").pluck().get() as number
  db.close()
  return root
}

/** Overwrites a page's b-tree header with bytes no page can start with. */
function damagePage(file: string, page: number) {
  const size = 4096
  const fd = fs.openSync(file, 'r+')
  fs.writeSync(fd, Buffer.alloc(64, 0xee), 0, 64, (page - 1) * size)
  fs.closeSync(fd)
}

t.test('quickCheck answers ok for a sound file, what it found for a damaged one, and why it could not run', async (t) => {
  const dir = tempDir(t)
  const file = path.join(dir, 'sound.sqlite')
  databaseWithJunk(file)
  t.equal(await quickCheck(file), 'ok')

  const damaged = path.join(dir, 'damaged.sqlite')
  damagePage(damaged, databaseWithJunk(damaged))
  const found = await quickCheck(damaged)
  t.not(found, 'ok')
  t.match(found, /page|malformed|corrupt/i, `names the damage: ${found}`)

  t.match(await quickCheck(path.join(dir, 'missing.sqlite')), /^the quick check could not run: /)
})

t.test('a quick check aborted ends its thread and says so', async (t) => {
  const dir = tempDir(t)
  const file = path.join(dir, 'sound.sqlite')
  databaseWithJunk(file)
  const stop = new AbortController()
  const answer = quickCheck(file, stop.signal)
  stop.abort()
  t.equal(await answer, 'the quick check was stopped')
  t.equal(await quickCheck(file, new AbortController().signal), 'ok', 'a signal never aborted changes nothing')
})

t.test('closing the app ends a quick check in hand, so its data directory can be removed at once', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-integrity-test-'))
  const app = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent' }), logger: false })
  const token = await login(app)
  t.match((await databaseCheck(app, token)).detail, /integrity check running/)
  await app.close()
  t.equal(quickChecksRunning(), 0, 'the thread ended with the app')
  // No retries: a thread still reading would reopen the WAL's files while they are removed.
  fs.rmSync(dir, { recursive: true })
  await new Promise((r) => setTimeout(r, 50))
  t.notOk(fs.existsSync(dir), 'nothing wrote into the directory after the close')
})

async function databaseCheck(app: FastifyInstance, token: string): Promise<{ status: string; detail: string }> {
  const res = await call(app, token, { url: '/prime/webui/admin/SubsystemHealth' })
  if (res.statusCode !== 200) throw new Error(`SubsystemHealth answered ${res.statusCode}: ${res.body}`)
  return res.json().subsystems.find((s: { name: string }) => s.name === 'Database')
}

async function until(app: FastifyInstance, token: string, done: (c: { status: string; detail: string }) => boolean) {
  for (let i = 0; i < 500; i++) {
    const c = await databaseCheck(app, token)
    if (done(c)) return c
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error('the quick check never finished')
}

t.test('SubsystemHealth reports the latest finished quick check, started in the background', async (t) => {
  const dir = tempDir(t)
  const app = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent' }), logger: false, validateResponses: true })
  t.teardown(() => app.close())
  const token = await login(app)
  const first = await databaseCheck(app, token)
  t.equal(first.status, 'Healthy')
  t.match(first.detail, /^Read and write succeeded; integrity (check running|ok at \S+Z); /)
  const done = await until(app, token, (c) => /integrity ok at/.test(c.detail))
  t.equal(done.status, 'Healthy')
  const at = /integrity ok at (\S+Z);/.exec(done.detail)![1]
  t.match((await databaseCheck(app, token)).detail, `integrity ok at ${at};`, 'a passing check is not run again within the hour')
})

t.test('a damaged database file turns the Database check Failed', async (t) => {
  const dir = tempDir(t)
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent' })
  // The server's own tables, then a table it never reads, damaged while the server is stopped.
  await (await buildApp({ config, logger: false })).close()
  damagePage(config.dbFile, databaseWithJunk(config.dbFile))

  const app = await buildApp({ config, logger: false, validateResponses: true })
  t.teardown(() => app.close())
  const token = await login(app)
  const failed = await until(app, token, (c) => c.status === 'Failed')
  t.match(failed.detail, /^Integrity check: /)
  const res = await call(app, token, { url: '/prime/webui/admin/SubsystemHealth' })
  t.equal(res.json().status, 'Failed', 'the worst subsystem sets the status')
})
