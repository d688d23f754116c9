// The server's signals (lib/server.ts): with loop statistics on, SIGUSR2 writes them
// and the server keeps serving; SIGTERM still shuts it down gracefully.
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../lib/paths.js'
import { freePort } from './fixtures/receivers.js'
import { ADMIN_PASSWORD, TS_LOADER, testDatabaseEnv } from './helpers.js'

t.setTimeout(120_000)
// From the sources, with the TypeScript loader this test runs under (no build needed).
const server = path.join(projectRoot, 'lib', 'server.ts')

const until = async (ok: () => boolean, what: string) => {
  for (let i = 0; i < 3000 && !ok(); i++) await new Promise((r) => setTimeout(r, 10))
  if (!ok()) throw new Error(`timed out waiting for ${what}`)
}

t.test('with loop statistics on, SIGUSR2 logs them and the server keeps serving; SIGTERM stops it', async (t) => {
  // Teardowns run last-registered first: the server is killed before its database is dropped.
  const database = await testDatabaseEnv(t)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-signals-'))
  const logFile = path.join(dir, 'server.log')
  let child: ChildProcess | undefined
  t.teardown(() => {
    child?.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const port = await freePort()
  const log = fs.openSync(logFile, 'w')
  child = spawn(process.execPath, [...TS_LOADER, server], {
    env: { ...process.env, PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', PRIME_LOOP_STATS_SECONDS: '3600', ...database },
    stdio: ['ignore', log, log],
  })
  fs.closeSync(log)
  let exited: number | null | undefined
  child.once('exit', (code) => (exited = code))
  const text = () => fs.readFileSync(logFile, 'utf8')
  await until(() => /Server listening/.test(text()) || exited !== undefined, 'the server to listen')
  t.equal(exited, undefined, 'listening')

  child.kill('SIGUSR2')
  await until(() => /"msg":"event loop"/.test(text()), 'the statistics line')
  await new Promise((r) => setTimeout(r, 200))
  t.equal(exited, undefined, 'still running after SIGUSR2')
  t.notMatch(text(), /shutting down/, 'SIGUSR2 is not a shutdown')
  const res = await fetch(`http://127.0.0.1:${port}/healthz`)
  t.equal(res.status, 200, 'and it still answers')

  child.kill('SIGTERM')
  await until(() => exited !== undefined, 'the server to exit')
  t.equal(exited, 0, 'SIGTERM: a clean exit')
  t.match(text(), /"signal":"SIGTERM".*"msg":"shutting down"/, 'after its shutdown line')
})
