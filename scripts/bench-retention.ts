// npm run bench -- retention: the retention job's pruning rate (rows/s, archive written and
// synced included) and what it does to requests meanwhile (the p50 / p99 of small reads, one
// connection after another, before and during the job). Seeds a temporary data dir with
// BENCH_EVENTS (1,000,000) events over a year in mixed id and time order (the newest 30 days
// first, then the 335 days before them, as a bulk load of older history after a live start
// writes them), or uses a copy of BENCH_RETENTION_DIR; then serves it on 127.0.0.1 from this
// process and runs the job once, as its timer does, with events and audit records kept
// BENCH_RETENTION_DAYS (90). The reads come from a worker thread (an event loop of its own).
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { openDatabase } from '../db/index.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { dirBytes } from '../lib/health.js'
import { seedEvents } from './seed-events.js'
import { ms } from './bench-support.js'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000)
const KEEP_DAYS = Number(process.env.BENCH_RETENTION_DAYS ?? 90)
const PORT = 18091
const PASSWORD = 'Bench-password-123'
const DAY = 86_400_000
const uptime = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-retention-'))
process.on('exit', () => fs.rmSync(dataDir, { recursive: true, force: true }))
const now = Date.now()
const given = process.env.BENCH_RETENTION_DIR ? path.resolve(process.env.BENCH_RETENTION_DIR) : null
if (given) {
  console.error(`Copying ${given} ...`)
  fs.copyFileSync(path.join(given, 'prime.sqlite'), path.join(dataDir, 'prime.sqlite'))
} else {
  const db = openDatabase(path.join(dataDir, 'prime.sqlite'))
  const recent = Math.round((EVENTS * 30) / 365)
  console.error(`Seeding ${recent} events of the last 30 days, then ${EVENTS - recent} of the 335 days before them ...`)
  await seedEvents(db, { events: recent, days: 30, now, seed: 1 })
  await seedEvents(db, { events: EVENTS - recent, days: 335, now: now - 30 * DAY, seed: 2, anyOrder: true })
  db.close()
}

const env: NodeJS.ProcessEnv = {
  ...process.env,
  PRIME_DATA_DIR: dataDir,
  PRIME_ADMIN_PASSWORD: PASSWORD,
  PORT: String(PORT),
  LOG_LEVEL: 'warn',
  PRIME_RETENTION_EVENTS_DAYS: String(KEEP_DAYS),
  PRIME_RETENTION_AUDIT_DAYS: String(KEEP_DAYS),
  PRIME_RATE_LIMIT_MAX: '100000000',
}
const config = loadConfig(env)
const app = await buildApp({ config })
await app.listen({ port: PORT, host: '127.0.0.1' })
const indexer = app.repos.eventQueries.indexer
indexer.catchUp('events')
indexer.catchUp('audit_trail')
const count = (sql: string, ...args: unknown[]) =>
  app.db
    .prepare(sql)
    .pluck()
    .get(...args) as number
const cutoff = now - KEEP_DAYS * DAY
const before = { events: count('SELECT count(*) FROM events'), due: count('SELECT count(*) FROM events WHERE created_ms < ?', cutoff), bytes: dirBytes(dataDir) }

// The reader: small pages (the newest 10 events, as a console asks), one after another.
const base = `http://127.0.0.1:${PORT}/prime/webui`
const login = await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }) })
const { token } = (await login.json()) as { token: string }
const reader = new Worker(
  `
  const { parentPort, workerData } = require('node:worker_threads')
  let phase = null
  const times = { idle: [], pruning: [] }
  let stopped = false
  parentPort.on('message', (m) => { if (m === 'stop') stopped = true; else phase = m })
  ;(async () => {
    while (!stopped) {
      const t = performance.now()
      const res = await fetch(workerData.url, { headers: { authorization: 'Bearer ' + workerData.token } })
      await res.arrayBuffer()
      if (phase && res.status === 200) times[phase].push(performance.now() - t)
      if (res.status !== 200) times.failed = (times.failed ?? 0) + 1
    }
    parentPort.postMessage(times)
  })()
`,
  { eval: true, workerData: { url: `${base}/Events/GetEvents?PageSize=10`, token } },
)
const results = new Promise<{ idle: number[]; pruning: number[]; failed?: number }>((resolve) => reader.once('message', resolve))
const pause = (msec: number) => new Promise((r) => setTimeout(r, msec))

await pause(1000)
reader.postMessage('idle')
await pause(5000)
reader.postMessage('pruning')
const loadBefore = uptime()
const run = await app.retention.run(now)
reader.postMessage('stop')
const times = await results
await app.close()
const loadAfter = uptime()

const rows = run.events.deleted + run.audit.deleted + Object.values(run.other).reduce((a, b) => a + b, 0)
const archive = path.join(dataDir, 'archive')
const archived = fs.existsSync(archive) ? fs.readdirSync(archive).reduce((n, f) => n + fs.statSync(path.join(archive, f)).size, 0) : 0
const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] : NaN)
const reads = (xs: number[]) => `${xs.length}: ${ms(pct(xs, 0.5))} / ${ms(pct(xs, 0.99))} ms (max ${ms(Math.max(...xs))} ms)`
const left = openDatabase(path.join(dataDir, 'prime.sqlite'))
const older = left.prepare('SELECT count(*) FROM events WHERE created_ms < ?').pluck().get(cutoff) as number
left.close()

console.log(`Retention benchmark: ${before.events} events (${given ? `a copy of ${given}` : 'a year, mixed id and time order'}), ${(before.bytes / 1024 ** 3).toFixed(2)} GiB; keep ${KEEP_DAYS} days`)
console.log('')
console.log('| case | figure |')
console.log('|---|---|')
console.log(`| events past the rule before / after the run | ${before.due} / ${older} |`)
console.log(`| rows deleted (events ${run.events.deleted}, audit ${run.audit.deleted}, other ${rows - run.events.deleted - run.audit.deleted}) | ${rows} in ${(run.ms / 1000).toFixed(1)} s |`)
console.log(`| pruning rate, archive written and synced included | ${Math.round(rows / (run.ms / 1000))} rows/s |`)
console.log(`| archive written | ${(archived / 1024 ** 2).toFixed(1)} MiB in ${run.events.files.length + run.audit.files.length} files |`)
console.log(`| small reads (GetEvents PageSize=10) before the job: n, p50 / p99 | ${reads(times.idle)} |`)
console.log(`| small reads during the job: n, p50 / p99 | ${reads(times.pruning)} |`)
console.log(`| failed reads | ${times.failed ?? 0} |`)
console.log(`| load average (uptime) at the start / end of the job | ${loadBefore} / ${loadAfter} |`)
process.exit(0)
