// backend: postgres-pending — starts its server processes on the data dir's SQLite file itself; not yet given a test database
// Ctrl-C on `npm start` and on `npm run demo`: the terminal signals the whole process group;
// the service stops once, cleanly: status 0, a last "stopped" line, no holder (pid) file
// left, the WAL checkpointed into the database (no -wal file with anything in it).
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { ADMIN_PASSWORD } from './helpers.js'
import { freePort } from './fixtures/receivers.js'
import { demoJs, jsonLines, start, startServer, tempDir, until } from './fixtures/processes.js'

t.setTimeout(180_000)

const walBytes = (dir: string) => fs.statSync(path.join(dir, 'prime.sqlite-wal'), { throwIfNoEntry: false })?.size ?? 0

async function login(base: string) {
  const res = await fetch(`${base}/prime/webui/Auth/LocalLogin`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
  })
  await res.arrayBuffer()
  return res.status
}

t.test('npm start: Ctrl-C, and Ctrl-C again during the shutdown, stop it once, status 0', async (t) => {
  const root = tempDir(t)
  const dataDir = path.join(root, 'data')
  // A drain delay: the second Ctrl-C arrives while the first one's shutdown waits.
  const server = await startServer(t, dataDir, path.join(root, 'server.log'), { PRIME_SHUTDOWN_DRAIN_SECONDS: '1' })
  t.equal(await login(server.base), 200, 'it serves')
  t.ok(walBytes(dataDir) > 0, 'and has written to its WAL')

  process.kill(-server.child.pid!, 'SIGINT')
  await until(() => /"msg":"shutting down"/.test(server.output()), 'the shutdown')
  process.kill(-server.child.pid!, 'SIGINT')
  t.equal(await server.exited, 0, 'status 0')
  const lines = jsonLines(server.output())
  t.equal(lines.filter((l) => l.msg === 'shutting down').length, 1, 'one shutdown')
  t.match(
    lines.find((l) => l.msg === 'already stopping'),
    { signal: 'SIGINT' },
    'the second signal is ignored, and says so',
  )
  t.match(lines.at(-1), { level: 30, msg: 'stopped' }, 'the last line says it stopped')
  t.notOk(fs.existsSync(path.join(dataDir, 'server.pid')), 'no pid file left')
  t.equal(walBytes(dataDir), 0, 'the WAL checkpointed and removed')
})

t.test('npm run demo: Ctrl-C stops the demo, its server and its simulator, status 0', async (t) => {
  const root = tempDir(t)
  const dataDir = path.join(root, 'data')
  const port = await freePort()
  // As from a shell with the usual umask: the demo's own files must not make the server warn.
  const previous = process.umask(0o022)
  t.teardown(() => process.umask(previous))
  const demo = start(t, [demoJs, '--port', String(port), '--agents', '3', '--data-dir', dataDir], {}, path.join(root, 'demo.out'))
  let code: number | null | undefined
  void demo.exited.then((c) => (code = c))
  await until(() => /Simulating 3 agents/.test(demo.output()) || code !== undefined, 'the demo to start', 120_000)
  t.equal(code, undefined, 'started')
  const serverLog = path.join(dataDir, 'server.log')
  await until(() => /"url":"\/prime\/webui\/gateway\/checkin"/.test(fs.readFileSync(serverLog, 'utf8')), 'a check-in', 30_000)

  process.kill(-demo.child.pid!, 'SIGINT')
  t.equal(await demo.exited, 0, 'the demo ends with status 0')
  t.notMatch(demo.output(), /exited with status/, 'no word of a failed server')
  t.match(demo.output(), /The server stopped\.\n/, 'the demo says the server stopped')
  const lines = jsonLines(fs.readFileSync(serverLog, 'utf8'))
  t.equal(lines.filter((l) => l.msg === 'shutting down').length, 1, 'the server shut down once')
  t.match(lines.at(-1), { msg: 'stopped' }, "the server log's last line says it stopped")
  t.notOk(
    lines.some((l) => /readable by other users/.test(l.msg)),
    "the demo's log file does not make the server warn about the directory's modes",
  )
  t.equal((fs.statSync(serverLog).mode & 0o777).toString(8), '600', 'the log is private')
  t.notOk(fs.existsSync(path.join(dataDir, 'server.pid')), 'no pid file left')
  t.equal(walBytes(dataDir), 0, 'the WAL checkpointed and removed')
})
