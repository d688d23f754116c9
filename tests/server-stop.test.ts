// Ctrl-C on `npm start` and on `npm run demo`: the terminal signals the whole process group;
// the service stops once, cleanly: status 0, a last "stopped" line, no holder (pid) file
// left, and nothing it answered lost: on SQLite the WAL checkpointed into the database (no
// -wal file with anything in it); on PostgreSQL (the servers on a test database of their
// own) the writes it answered stored and its connections closed.
import fs from 'node:fs'
import path from 'node:path'
import t, { type Test } from 'tap'
import { connectPostgres } from '../db/postgres/index.js'
import { ADMIN_PASSWORD, testBackend } from './helpers.js'
import { pgTestDatabaseUrl } from './pg.js'
import { freePort } from './fixtures/receivers.js'
import { demoJs, jsonLines, start, startServer, tempDir, until } from './fixtures/processes.js'

t.setTimeout(180_000)

const walBytes = (dir: string) => fs.statSync(path.join(dir, 'prime.sqlite-wal'), { throwIfNoEntry: false })?.size ?? 0

/**
 * The backend the servers run on: the settings that put them there, what shows they have
 * written, and (after the stop) what shows nothing they answered was lost: on PostgreSQL,
 * `table` holds what they answered.
 */
async function backend(t: Test, table: string) {
  if (testBackend !== 'postgres') {
    return {
      env: {} as Record<string, string>,
      wrote: async (dataDir: string) => t.ok(walBytes(dataDir) > 0, 'it has written to its WAL'),
      stopped: async (dataDir: string) => t.equal(walBytes(dataDir), 0, 'the WAL checkpointed and removed'),
    }
  }
  const url = await pgTestDatabaseUrl(t)
  const db = connectPostgres(url, { max: 1, applicationName: 'server-stop test' })
  t.teardown(() => db.close())
  const count = async (sql: string) => Number(await db.value(sql))
  return {
    env: { PRIME_DATABASE_URL: url } as Record<string, string>,
    wrote: async () => t.ok((await count(`SELECT count(*) FROM ${table}`)) > 0, `it has written to the database (${table})`),
    stopped: async () => {
      t.ok((await count(`SELECT count(*) FROM ${table}`)) > 0, `what it answered is stored (${table})`)
      // The servers' own connections: the application name a server gives its pools.
      const open = await count("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'prime-webui%'")
      t.equal(open, 0, 'its connections to the database closed')
    },
  }
}

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
  const on = await backend(t, 'sessions')
  const server = await startServer(t, dataDir, path.join(root, 'server.log'), { PRIME_SHUTDOWN_DRAIN_SECONDS: '1', ...on.env })
  t.equal(await login(server.base), 200, 'it serves')
  await on.wrote(dataDir)

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
  await on.stopped(dataDir)
})

t.test('npm run demo: Ctrl-C stops the demo, its server and its simulator, status 0', async (t) => {
  const root = tempDir(t)
  const dataDir = path.join(root, 'data')
  const port = await freePort()
  // As from a shell with the usual umask: the demo's own files must not make the server warn.
  const previous = process.umask(0o022)
  t.teardown(() => process.umask(previous))
  const on = await backend(t, 'agents')
  const demo = start(t, [demoJs, '--port', String(port), '--agents', '3', '--data-dir', dataDir], on.env, path.join(root, 'demo.out'))
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
  await on.stopped(dataDir)
})
