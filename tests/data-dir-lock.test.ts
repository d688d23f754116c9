// backend: postgres-pending — starts its server processes on the data dir's SQLite file itself; not yet given a test database
// One server per data directory (lib/data-dir.ts DataDirLock, taken by lib/server.ts): a
// second server on the directory is refused at start naming the holder; a restore refuses
// while it is held, --force included; backup and retention still run beside the server; and
// a server killed outright leaves no lock behind.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { DataDirLock } from '../lib/data-dir.js'
import { projectRoot } from '../lib/paths.js'
import { ADMIN_PASSWORD } from './helpers.js'
import { backupJs, startServer, tempDir } from './fixtures/processes.js'

t.setTimeout(240_000)

const node = (args: string[], env: Record<string, string> = {}) =>
  spawnSync(process.execPath, args, { env: { ...process.env, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, ...env }, encoding: 'utf8', timeout: 120_000 })

t.test('a second server, a restore, a backup and retention beside a running server; a killed one leaves no lock', async (t) => {
  const root = tempDir(t)
  const dataDir = path.join(root, 'data')
  const first = await startServer(t, dataDir, path.join(root, 'first.log'))
  const health = async () => (await fetch(`${first.base}/healthz`)).status

  const second = await startServer(t, dataDir, path.join(root, 'second.log'))
  t.equal(await second.exited, 1, 'the second server exits with status 1')
  const refusal = second.output().trim()
  t.equal(refusal.split('\n').length, 1, 'one line')
  t.match(
    refusal,
    new RegExp(`^prime: not starting: the data directory ${dataDir} is in use by a server \\(pid ${first.child.pid}, since \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z\\)$`),
    'naming the holder: its pid and since when',
  )
  t.equal(await health(), 200, 'the first server still serves')

  const out = path.join(root, 'backup')
  const backedUp = node([backupJs, 'backup', '--out', out, '--data-dir', dataDir])
  t.equal(backedUp.status, 0, `a backup runs beside the server: ${backedUp.stderr}`)

  const before = fs.readdirSync(dataDir).sort()
  const restored = node([backupJs, 'restore', '--from', out, '--data-dir', dataDir, '--force'])
  t.equal(restored.status, 1, 'a restore --force is refused')
  t.match(restored.stderr, new RegExp(`in use by a server \\(pid ${first.child.pid}, since .*\\): stop it first \\(--force does not override this\\)`))
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
  const third = await startServer(t, dataDir, path.join(root, 'third.log'))
  t.equal(third.child.exitCode, null, 'but not its lock: a new server starts at once')
  process.kill(-third.child.pid!, 'SIGTERM')
  t.equal(await third.exited, 0)
})

t.test('a server does not start on a directory a restore is writing into', async (t) => {
  const root = tempDir(t)
  const dataDir = path.join(root, 'data')
  const lock = DataDirLock.take(dataDir, 'restore')
  t.teardown(() => lock.release())
  const server = await startServer(t, dataDir, path.join(root, 'server.log'))
  t.equal(await server.exited, 1)
  t.match(server.output(), new RegExp(`in use by a restore \\(pid ${process.pid}, since `))
  t.notOk(fs.existsSync(path.join(dataDir, 'prime.sqlite')), 'it opened no database there')
})
