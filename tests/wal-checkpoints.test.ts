// backend: sqlite-only — SQLite's WAL checkpoints (db/checkpoints.ts)
// Pins the WAL checkpoints off the request path (db/checkpoints.ts, lib/platform/checkpointer.ts):
// the server's connection checkpoints in its commits only past the restart size, a worker thread on a connection
// of its own does, the WAL stays bounded under a long burst of writes, and closing stops the
// thread before the database closes.
import fs from 'node:fs'
import { setImmediate as nextTurn } from 'node:timers/promises'
import t from 'tap'
import { build, tempDb } from './helpers.js'
import { loadConfig } from '../lib/config.js'
import { checkpointerLoop } from '../lib/platform/checkpointer.js'

const MB = 1024 * 1024
const size = (file: string) => (fs.existsSync(file) ? fs.statSync(file).size : 0)

t.test('a long burst of writes: the thread checkpoints and restarts the WAL, which stays bounded', async (t) => {
  const app = await build(t, { PRIME_WAL_CHECKPOINT_MS: '10', PRIME_WAL_RESTART_MB: '1' })
  await app.ready()
  t.equal(app.db.pragma('wal_autocheckpoint', { simple: true }), 256, "the server's connection checkpoints in its commits only past the restart size (1 MB)")
  const file = app.testConfig.dbFile
  app.db.exec('CREATE TABLE burst (b BLOB)')
  // About 260 KB a commit (64 pages of 4 KiB), as a busy gateway writes, one turn of the event loop each.
  const insert = app.db.prepare('WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64) INSERT INTO burst (b) SELECT randomblob(4000) FROM n')
  const before = size(file)
  const COMMITS = 360
  let largest = 0
  let atHalf = 0
  for (let i = 0; i < COMMITS; i++) {
    insert.run()
    largest = Math.max(largest, size(`${file}-wal`))
    if (i === COMMITS / 2) atHalf = largest
    await nextTurn()
  }
  // Copied into the database file by the thread meanwhile (nothing else checkpoints).
  await new Promise((resolve) => setTimeout(resolve, 100))
  const written = size(file) - before
  t.ok(written > 80 * MB, `the burst reached the database file (${(written / MB).toFixed(0)} MB)`)
  // The thread starts once the WAL passes 4 MB and its first checkpoint copies all of it: the
  // WAL grows meanwhile, then is written again from its start, and grows no more.
  t.ok(largest < 24 * MB, `the WAL stayed below 24 MB (largest ${(largest / MB).toFixed(1)} MB) while ${(written / MB).toFixed(0)} MB went through it`)
  t.equal(largest, atHalf, `it grew no more in the second half of the burst (${(atHalf / MB).toFixed(1)} MB at the half)`)
  t.equal(app.db.prepare('SELECT count(*) FROM burst').pluck().get(), COMMITS * 64, 'every row is there')

  await app.close()
  t.notOk(fs.existsSync(`${file}-wal`), "the thread's connection was closed first: the server's, the last, checkpointed the rest and removed the WAL")
})

t.test('a burst of commits that gives the event loop no turn: the WAL is restarted by those commits and stays bounded', async (t) => {
  const app = await build(t, { PRIME_WAL_CHECKPOINT_MS: '10', PRIME_WAL_RESTART_MB: '2' })
  await app.ready()
  const file = app.testConfig.dbFile
  app.db.exec('CREATE TABLE burst (b BLOB)')
  const insert = app.db.prepare('WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 64) INSERT INTO burst (b) SELECT randomblob(4000) FROM n')
  // Past 4 MB with turns of the event loop: the thread starts.
  for (let i = 0; i < 24; i++) {
    insert.run()
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
  await new Promise((resolve) => setTimeout(resolve, 50))
  const before = size(file)
  // Then 300 commits of about 260 KB (75 MB) in one run: no message of the thread is handled meanwhile.
  let largest = 0
  let longest = 0
  for (let i = 0; i < 300; i++) {
    const t0 = performance.now()
    insert.run()
    longest = Math.max(longest, performance.now() - t0)
    largest = Math.max(largest, size(`${file}-wal`))
  }
  const written = size(file) - before
  t.ok(written > 40 * MB, `the burst reached the database file meanwhile (${(written / MB).toFixed(0)} MB)`)
  t.ok(largest < 12 * MB, `the WAL stayed below 12 MB (largest ${(largest / MB).toFixed(1)} MB) while 75 MB went through it`)
  t.comment(`longest commit ${longest.toFixed(1)} ms`)
  t.equal(app.db.prepare('SELECT count(*) FROM burst').pluck().get(), 324 * 64, 'every row is there')
})

t.test('with PRIME_WAL_CHECKPOINT_THREAD=false the connection checkpoints in its commits, as SQLite does', async (t) => {
  const app = await build(t, { PRIME_WAL_CHECKPOINT_THREAD: 'false' })
  await app.ready()
  t.equal(app.db.pragma('wal_autocheckpoint', { simple: true }), 10_000)
  t.throws(() => loadConfig({ PRIME_DATA_DIR: app.testConfig.dataDir, PRIME_WAL_CHECKPOINT_MS: '5' }), /PRIME_WAL_CHECKPOINT_MS must be an integer from 10 to 60000/)
})

t.test('a server that hardly writes starts no thread, and its connection gets its checkpoints back when the loop stops', async (t) => {
  const app = await build(t)
  await app.ready()
  t.same(
    app.loops.list().find((l) => l.name === 'wal-checkpoint'),
    { name: 'wal-checkpoint', singleton: false, running: true },
    'a loop of each process',
  )
  const { db, file } = tempDb(t)
  const messages: string[] = []
  const log = { info: (_: object, m: string) => void messages.push(m), warn: (_: object, m: string) => void messages.push(m), error: (_: object, m: string) => void messages.push(m) }
  const loop = checkpointerLoop({ db, file, settings: { thread: true, intervalMs: 10, restartBytes: MB }, log })
  loop.start()
  t.equal(db.pragma('wal_autocheckpoint', { simple: true }), 256, 'left to the thread while the loop runs, but past the restart size (1 MB)')
  db.exec('CREATE TABLE few (x)')
  db.prepare('INSERT INTO few VALUES (1)').run()
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.same(messages, [], 'no thread for a WAL below 4 MB')
  t.equal(loop.stats?.(), undefined, 'and nothing to report')
  await loop.stop()
  t.equal(db.pragma('wal_autocheckpoint', { simple: true }), 10_000, 'its own checkpoints back once stopped')
})

t.test("a database of a fleet's size has its thread at once, before any write", async (t) => {
  const { db, file } = tempDb(t)
  db.exec('CREATE TABLE few (x)')
  const messages: string[] = []
  const log = { info: (_: object, m: string) => void messages.push(m), warn: (_: object, m: string) => void messages.push(m), error: (_: object, m: string) => void messages.push(m) }
  // The file is a few KB here: the threshold (64 MB by default) is lowered to it.
  const loop = checkpointerLoop({ db, file, settings: { thread: true, intervalMs: 10_000, restartBytes: MB, startAtOnceBytes: fs.statSync(file).size }, log })
  loop.start()
  t.same(messages, ['WAL checkpoints: started the checkpointing thread'], 'started when the loop starts, not at the first look at the WAL')
  await loop.stop()
  t.equal(db.pragma('wal_autocheckpoint', { simple: true }), 10_000, 'stopped, the connection has its own checkpoints back')
})
