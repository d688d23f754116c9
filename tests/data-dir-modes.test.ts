// The data directory is its user's alone: the database, its WAL and shared memory, the
// secrets and report files are created 0600 in 0700 folders whatever the umask; a
// directory others can read is made private at start (with a warning), one others can
// write is refused (with a message saying how to fix it). On PostgreSQL the secrets and
// the report files are in the database (tables secrets, report_files): the data directory
// holds neither, and what it holds is private all the same.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Writable } from 'node:stream'
import t from 'tap'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { projectRoot } from '../lib/paths.js'
import { ADMIN_PASSWORD, TS_LOADER, build, login, testBackend, testDatabaseEnv } from './helpers.js'
import { addAgent } from './fixtures/fleet.js'
import { queryColumn, queryValue } from './seed.js'
import { createReport, runNow } from './reports-support.js'

const mode = (p: string) => (fs.statSync(p).mode & 0o777).toString(8)

function dataDir(t: { teardown: (fn: () => void) => void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-modes-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** Builds on `dir` with warnings captured; answers the app, or the error it refused with. */
async function start(t: { teardown: (fn: () => unknown) => void }, dir: string) {
  const warnings: Record<string, any>[] = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) warnings.push(JSON.parse(line))
      done()
    },
  })
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent', ...(await testDatabaseEnv(t)) })
  try {
    const app = await buildApp({ config, logger: { level: 'warn', stream } })
    t.teardown(() => app.close())
    return { app, warnings }
  } catch (err) {
    return { error: err as Error, warnings }
  }
}

t.test('a new data directory: every file 0600, every folder 0700, whatever the umask', async (t) => {
  const previous = process.umask(0o022)
  t.teardown(() => process.umask(previous))
  const app = await build(t)
  const dir = app.testConfig.dataDir
  const token = await login(app)
  await addAgent(app)
  const report = await createReport(app, token, { name: 'Modes', type: 'agentsInventory', format: 'CSV' })
  const run = await runNow(app, token, report.id)
  t.equal(run.status, 'succeeded')
  const pdf = await runNow(app, token, (await createReport(app, token, { name: 'Modes PDF', type: 'agentsInventory', format: 'PDF' })).id)
  t.equal(pdf.status, 'succeeded')
  t.equal(mode(dir), '700')
  if (testBackend === 'postgres') {
    // Nothing of the database, no secret and no report file in the data directory: each
    // node reads the secrets and the runs' files from the database.
    const held = fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    for (const entry of held) {
      const p = path.join(entry.parentPath, entry.name)
      t.equal(mode(p), entry.isDirectory() ? '700' : '600', path.relative(dir, p))
    }
    const names = held.map((e) => e.name)
    for (const file of ['prime.sqlite', 'prime.sqlite-wal', 'jwt-secret', 'agent-enrollment-secret', 'agentless-key', 'reports']) t.notOk(names.includes(file), `no ${file}`)
    t.same(await queryColumn(app, 'SELECT name FROM secrets ORDER BY name'), ['agent-enrollment', 'agentless-key', 'jwt'], 'the secrets are in the database')
    t.equal(await queryValue(app, 'SELECT count(*) FROM report_files WHERE run_id IN (?, ?)', run.runId, pdf.runId), 2, "the runs' files are in the database")
    return
  }
  for (const file of ['prime.sqlite', 'prime.sqlite-wal', 'prime.sqlite-shm', 'jwt-secret', 'agent-enrollment-secret', 'agentless-key']) {
    t.equal(mode(path.join(dir, file)), '600', file)
  }
  const reports = path.join(dir, 'reports')
  t.equal(mode(reports), '700', 'reports/')
  const folders = fs.readdirSync(reports)
  t.equal(folders.length, 2)
  for (const folder of folders) {
    t.equal(mode(path.join(reports, folder)), '700', `reports/${folder}/`)
    for (const file of fs.readdirSync(path.join(reports, folder))) t.equal(mode(path.join(reports, folder, file)), '600', file)
  }
})

t.test('a data directory others can read is made private at start, with a warning', async (t) => {
  const dir = dataDir(t)
  // As an earlier version left it: a readable folder, a readable database and report file.
  fs.chmodSync(dir, 0o755)
  fs.mkdirSync(path.join(dir, 'reports', 'old'), { recursive: true, mode: 0o755 })
  fs.writeFileSync(path.join(dir, 'reports', 'old', 'run.csv'), 'a,b\n', { mode: 0o644 })
  fs.writeFileSync(path.join(dir, 'prime.sqlite'), '', { mode: 0o644 })
  fs.chmodSync(path.join(dir, 'prime.sqlite'), 0o644)
  fs.chmodSync(path.join(dir, 'reports'), 0o755)
  const outside = path.join(dataDir(t), 'shared.txt')
  fs.writeFileSync(outside, 'shared\n')
  fs.chmodSync(outside, 0o644)
  fs.symlinkSync(outside, path.join(dir, 'a-link'))
  const { app, warnings } = await start(t, dir)
  t.ok(app, 'it starts')
  t.equal(mode(dir), '700')
  t.equal(mode(path.join(dir, 'reports')), '700')
  t.equal(mode(path.join(dir, 'reports', 'old')), '700')
  t.equal(mode(path.join(dir, 'reports', 'old', 'run.csv')), '600')
  t.equal(mode(path.join(dir, 'prime.sqlite')), '600')
  // On PostgreSQL the planted file is only a file like any other: no WAL is made beside it.
  if (testBackend === 'sqlite') t.equal(mode(path.join(dir, 'prime.sqlite-wal')), '600', 'the WAL follows the database')
  t.equal(mode(outside), '644', 'a link is not followed')
  const warning = warnings.find((w) => /made private/.test(w.msg))
  t.ok(warning, 'one warning says so')
  t.equal(warning?.level, 40)
  t.equal(warning?.count, 5)
  t.match(warning?.tightened, [{ path: dir, from: '0755', to: '0700' }])
  const again = await start(t, dir)
  t.notOk(
    again.warnings.some((w) => /made private/.test(w.msg)),
    'nothing to say the next time',
  )
})

t.test('a data directory others can write is refused, saying how to fix it', async (t) => {
  const open = dataDir(t)
  fs.chmodSync(open, 0o777)
  const refused = await start(t, open)
  t.ok(refused.error, 'not started')
  t.match(refused.error?.message, `the data directory ${open} can be written by other users: ${open} (mode 0777)`)
  t.match(refused.error?.message, `chmod -R go-rwx ${open}`)
  t.notOk(fs.existsSync(path.join(open, 'prime.sqlite')), 'the database is not opened')
  t.equal(mode(open), '777', 'nothing is changed')

  const planted = dataDir(t)
  fs.writeFileSync(path.join(planted, 'jwt-secret'), 'x'.repeat(40) + '\n')
  fs.chmodSync(path.join(planted, 'jwt-secret'), 0o666)
  fs.chmodSync(planted, 0o755)
  const refusedFile = await start(t, planted)
  t.match(refusedFile.error?.message, `${path.join(planted, 'jwt-secret')} (mode 0666)`, 'a file others can write is named')

  // The server itself: one line on standard error, exit status 1, no stack.
  const run = spawnSync(process.execPath, [...TS_LOADER, path.join(projectRoot, 'lib', 'server.ts')], {
    env: { ...process.env, PRIME_DATA_DIR: open, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, PORT: '0', LOG_LEVEL: 'silent', ...(await testDatabaseEnv(t)) },
    encoding: 'utf8',
    timeout: 120_000,
  })
  t.equal(run.status, 1, `exit status 1: ${run.stderr.slice(0, 500)}`)
  t.match(run.stderr, /^prime: not starting: the data directory .* can be written by other users/m)
  t.notMatch(run.stderr, /\n\s+at /, 'no stack trace')
})
