// One server per data directory (lib/data-dir.ts DataDirLock, taken by lib/server.ts on
// either backend): a second server on the directory is refused at start naming the holder;
// a restore refuses while it is held, --force included (on PostgreSQL the restore is of the
// database, refused while a server is connected to it); backup and retention still run
// beside the server; and a server killed outright leaves no lock behind. On PostgreSQL the
// database is not the directory's: a second server with a directory of its own on the same
// database serves beside the first (several nodes, docs/operating.md).
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import t from 'tap'
import { DataDirLock } from '../lib/data-dir.js'
import { projectRoot } from '../lib/paths.js'
import { ADMIN_PASSWORD, testDatabaseEnv, testBackend } from './helpers.js'
import { backupJs, startServer, tempDir } from './fixtures/processes.js'

t.setTimeout(240_000)

const onPostgres = testBackend === 'postgres'

/**
 * /healthz's status, on a connection of its own: the spawnSync calls below block this
 * process past the server's keep-alive timeout, so a kept connection may have been closed
 * by the server without this process seeing it.
 */
const healthz = (base: string) =>
  new Promise<number>((resolve, reject) => {
    http
      .get(`${base}/healthz`, { agent: false }, (res) => {
        res.resume()
        resolve(res.statusCode!)
      })
      .on('error', reject)
  })

t.test('a second server, a restore, a backup and retention beside a running server; a killed one leaves no lock', async (t) => {
  const root = tempDir(t)
  const dataDir = path.join(root, 'data')
  // The servers' database: the data dir's file, or a test database of their own.
  const database = await testDatabaseEnv(t)
  const node = (args: string[]) => spawnSync(process.execPath, args, { env: { ...process.env, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, ...database }, encoding: 'utf8', timeout: 120_000 })
  const first = await startServer(t, dataDir, path.join(root, 'first.log'), database)
  const health = () => healthz(first.base)

  const second = await startServer(t, dataDir, path.join(root, 'second.log'), database)
  t.equal(await second.exited, 1, 'the second server exits with status 1')
  const refusal = second.output().trim()
  t.equal(refusal.split('\n').length, 1, 'one line')
  t.match(
    refusal,
    new RegExp(`^prime: not starting: the data directory ${dataDir} is in use by a server \\(pid ${first.child.pid}, since \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\)$`),
    'naming the holder: its pid and since when',
  )
  t.equal(await health(), 200, 'the first server still serves')

  if (onPostgres) {
    const beside = await startServer(t, path.join(root, 'beside'), path.join(root, 'beside.log'), database)
    t.equal(beside.child.exitCode, null, 'a server with a directory of its own starts on the same database')
    t.equal(await healthz(beside.base), 200, 'and serves')
    t.equal(await health(), 200, 'beside the first')
    process.kill(-beside.child.pid!, 'SIGTERM')
    t.equal(await beside.exited, 0, 'and stops cleanly')
  }

  const out = path.join(root, 'backup')
  const backedUp = node([backupJs, 'backup', '--out', out, '--data-dir', dataDir])
  t.equal(backedUp.status, 0, `a backup runs beside the server: ${backedUp.stderr}`)

  const before = fs.readdirSync(dataDir).sort()
  const restored = node([backupJs, 'restore', '--from', out, '--data-dir', dataDir, '--force'])
  t.equal(restored.status, 1, 'a restore --force is refused')
  if (onPostgres) t.match(restored.stderr, /server connection\(s\) are open to this database: stop every node before a restore/)
  else t.match(restored.stderr, new RegExp(`in use by a server \\(pid ${first.child.pid}, since .*\\): stop it first \\(--force does not override this\\)`))
  t.same(fs.readdirSync(dataDir).sort(), before, 'nothing in the directory moved')
  t.same(
    fs.readdirSync(root).filter((f) => f.includes('.replaced-')),
    [],
    'nothing was moved aside',
  )

  const retention = node([path.join(projectRoot, 'dist', 'scripts', 'retention.js'), '--data-dir', dataDir])
  t.equal(retention.status, 0, `retention runs beside the server: ${retention.stderr}`)
  t.equal(await health(), 200, 'and the server still serves')

  process.kill(-first.child.pid!, 'SIGKILL')
  await first.exited
  t.ok(fs.existsSync(path.join(dataDir, 'server.pid')), 'a killed server leaves its holder file behind')
  const third = await startServer(t, dataDir, path.join(root, 'third.log'), database)
  t.equal(third.child.exitCode, null, 'but not its lock: a new server starts at once')
  process.kill(-third.child.pid!, 'SIGTERM')
  t.equal(await third.exited, 0)
})

t.test('a server does not start on a directory a restore is writing into', async (t) => {
  const root = tempDir(t)
  const dataDir = path.join(root, 'data')
  const lock = DataDirLock.take(dataDir, 'restore')
  t.teardown(() => lock.release())
  const server = await startServer(t, dataDir, path.join(root, 'server.log'), await testDatabaseEnv(t))
  t.equal(await server.exited, 1)
  t.match(server.output(), new RegExp(`in use by a restore \\(pid ${process.pid}, since `))
  t.notOk(fs.existsSync(path.join(dataDir, 'prime.sqlite')), 'it opened no database there')
})
