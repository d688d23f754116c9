// npm run bench -- reports: an agents inventory over a seeded fleet (100,000 agents by
// default), as CSV and as PDF, each run by RequestForRun on a fresh server process (so
// that its peak RSS is the run's). Measured: the run's own time (startedTime to
// finishedTime), the wall time from the request to the stored file, the server's peak
// RSS (VmHWM), and how a small read (GET reports/getall, one connection, back to back)
// is answered while the run goes on, against the same read on the idle server.
//
// Settings: BENCH_AGENTS (100000), BENCH_PERIPHERALS_PER_AGENT (10), BENCH_ROUNDS (3),
// BENCH_LOG_LEVEL (info, as in production), BENCH_PORT (18097), BENCH_SEEDED_DB (a prime.sqlite seeded before,
// e.g. by npm run seed: copied, never changed, instead of seeding again).
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { openDatabase } from '../db/index.js'
import { seedFleet } from './seed.js'
import { PIN, pct, median, start, stop, memory } from './bench-support.js'

const AGENTS = Number(process.env.BENCH_AGENTS ?? 100_000)
const PER_AGENT = Number(process.env.BENCH_PERIPHERALS_PER_AGENT ?? 10)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const PORT = Number(process.env.BENCH_PORT ?? 18097)
const PASSWORD = 'Bench-password-123'
const TARGETS = { CSV: 3, PDF: 15 }
const RSS_TARGET_MB = 300

const f1 = (x: number) => x.toFixed(1)
const f2 = (x: number) => x.toFixed(2)

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-reports-'))
// A failed run leaves no copy of the fleet behind either.
process.on('exit', () => fs.rmSync(dataDir, { recursive: true, force: true }))
const base = `http://127.0.0.1:${PORT}/prime/webui`
const env = {
  PRIME_DATA_DIR: dataDir,
  PRIME_ADMIN_PASSWORD: PASSWORD,
  PORT: String(PORT),
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  PRIME_RATE_LIMIT_MAX: '100000000',
  PRIME_ACCESS_TOKEN_TTL: '3600',
  // The seeded agents never check in: the sweeper must not start disconnecting them mid-run.
  PRIME_AGENT_DISCONNECT_SECONDS: '86400',
}

let fleet: { agents: number; peripherals: number }
if (process.env.BENCH_SEEDED_DB) {
  console.error(`Copying ${process.env.BENCH_SEEDED_DB} into ${dataDir} ...`)
  fs.copyFileSync(process.env.BENCH_SEEDED_DB, path.join(dataDir, 'prime.sqlite'))
  const db = openDatabase(path.join(dataDir, 'prime.sqlite'))
  fleet = db.prepare("SELECT (SELECT n FROM row_counts WHERE name = 'agents') AS agents, (SELECT n FROM row_counts WHERE name = 'peripherals') AS peripherals").get() as typeof fleet
  // The copy's accounts go: the first start creates admin with the bench's password.
  db.prepare('DELETE FROM users').run()
  db.close()
} else {
  console.error(`Seeding ${AGENTS} agents (${PER_AGENT} peripherals each) into ${dataDir} ...`)
  const db = openDatabase(path.join(dataDir, 'prime.sqlite'))
  const seeded = await seedFleet(db, { agents: AGENTS, peripheralsPerAgent: PER_AGENT })
  db.close()
  fleet = seeded
  console.error(`Seeded ${seeded.agents} agents, ${seeded.peripherals} peripherals in ${(seeded.ms / 1000).toFixed(1)} s`)
}
Object.assign(env, { PRIME_LICENSE_SEATS: String(fleet.agents + 1000) })
if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])

async function api(token: string | null, method: string, url: string, body?: unknown) {
  const res = await fetch(base + url, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`${method} ${url}: ${res.status} ${text.slice(0, 500)}`)
  return JSON.parse(text)
}

/** Latencies (ms) of back-to-back small reads until `until()` says stop. */
async function probe(token: string, until: () => boolean, atMost = 100_000): Promise<number[]> {
  const times: number[] = []
  while (!until() && times.length < atMost) {
    const t = performance.now()
    const res = await fetch(`${base}/reports/getall`, { headers: { authorization: `Bearer ${token}` } })
    await res.arrayBuffer()
    times.push(performance.now() - t)
  }
  return times
}

interface Result {
  runS: number
  wallS: number
  peakMb: number
  beforeMb: number
  sizeMb: number
  rows: number
  probes: number[]
}

async function measure(format: 'CSV' | 'PDF', round: number): Promise<Result> {
  const server = await start(env, path.join(dataDir, `server-${format}-${round}.log`))
  try {
    const { token } = await api(null, 'POST', '/Auth/LocalLogin', { username: 'admin', password: PASSWORD })
    const name = `Agents ${format} ${round}`
    const report = await api(token, 'POST', '/reports/create', { name, type: 'agentsInventory', format })
    await probe(token, () => false, 200) // warm-up of the probe's route
    const before = memory(server.pid!)
    let peak = before?.rss ?? 0
    const sampler = setInterval(() => {
      peak = Math.max(peak, memory(server.pid!)?.rss ?? 0)
    }, 10)
    const t0 = performance.now()
    const { runIds } = await api(token, 'POST', '/reports/RequestForRun', [report.id])
    let run: Record<string, any> | undefined
    let done = false
    const watcher = (async () => {
      while (!done) {
        await new Promise((r) => setTimeout(r, 50))
        const view = await api(token, 'GET', `/reports/get/${report.id}`)
        run = view.runs.find((r: { runId: string }) => r.runId === runIds[0])
        if (run && (run.status === 'succeeded' || run.status === 'failed')) done = true
      }
    })()
    const probes = await probe(token, () => done)
    await watcher
    const wall = (performance.now() - t0) / 1000
    clearInterval(sampler)
    const after = memory(server.pid!)
    if (run!.status !== 'succeeded') throw new Error(`${format} run failed: ${run!.reason}`)
    return {
      runS: (Date.parse(run!.finishedTime) - Date.parse(run!.startedTime)) / 1000,
      wallS: wall,
      peakMb: Math.max(peak, after?.hwm ?? 0) / 1024,
      beforeMb: (before?.rss ?? 0) / 1024,
      sizeMb: run!.sizeBytes / 1048576,
      rows: run!.rowCount,
      probes,
    }
  } finally {
    await stop(server)
  }
}

// The small read on the idle server, for comparison.
let idle: number[]
{
  const server = await start(env, path.join(dataDir, 'server-idle.log'))
  const { token } = await api(null, 'POST', '/Auth/LocalLogin', { username: 'admin', password: PASSWORD })
  await probe(token, () => false, 200)
  idle = await probe(token, () => false, 2000)
  await stop(server)
}

const rows: string[] = []
const results: Record<string, Result[]> = { CSV: [], PDF: [] }
for (let round = 0; round < ROUNDS; round++) {
  for (const format of ['CSV', 'PDF'] as const) {
    const r = await measure(format, round)
    results[format].push(r)
    console.error(`${format} round ${round + 1}: run ${f2(r.runS)} s, wall ${f2(r.wallS)} s, peak RSS ${r.peakMb.toFixed(0)} MB, ${r.probes.length} reads during it, p99 ${f1(pct(r.probes, 0.99))} ms`)
  }
}

rows.push('| agents inventory | rows in file | file size | run time (median) | wall time (median) | server peak RSS (median, max) | target |')
rows.push('|---|---|---|---|---|---|---|')
for (const format of ['CSV', 'PDF'] as const) {
  const rs = results[format]
  const run = median(rs.map((r) => r.runS))
  const wall = median(rs.map((r) => r.wallS))
  const peak = median(rs.map((r) => r.peakMb))
  const maxPeak = Math.max(...rs.map((r) => r.peakMb))
  const ok = (run < TARGETS[format] ? 'met' : 'MISSED') + ` (< ${TARGETS[format]} s); RSS ${maxPeak < RSS_TARGET_MB ? 'met' : 'MISSED'} (< ${RSS_TARGET_MB} MB)`
  rows.push(
    `| ${format} | ${rs[0].rows.toLocaleString('en-US')} | ${f1(rs[0].sizeMb)} MiB | ${f2(run)} s | ${f2(wall)} s | ${peak.toFixed(0)} MB, ${maxPeak.toFixed(0)} MB (${rs[0].beforeMb.toFixed(0)} MB before) | ${ok} |`,
  )
}
rows.push('', '| GET reports/getall, 1 connection back to back | reads | p50 ms | p99 ms | max ms | p99 / idle p99 |', '|---|---|---|---|---|---|')
rows.push(`| idle server | ${idle.length} | ${f1(pct(idle, 0.5))} | ${f1(pct(idle, 0.99))} | ${f1(Math.max(...idle))} | 1.0 |`)
for (const format of ['CSV', 'PDF'] as const) {
  const all = results[format].flatMap((r) => r.probes)
  const p99s = results[format].map((r) => pct(r.probes, 0.99))
  rows.push(
    `| during a ${format} run (all rounds) | ${all.length} | ${f1(pct(all, 0.5))} | ${f1(pct(all, 0.99))} (median of rounds ${f1(median(p99s))}) | ${f1(Math.max(...all))} | ${f1(pct(all, 0.99) / pct(idle, 0.99))} |`,
  )
}

fs.rmSync(dataDir, { recursive: true, force: true })
console.log(
  `\n${fleet.agents.toLocaleString('en-US')} agents, ${fleet.peripherals.toLocaleString('en-US')} peripherals; ${ROUNDS} rounds per format, each on a fresh server process${PIN ? '; client on CPU 0, server on CPU 1' : ''}; ` +
    `load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} at the end (${os.cpus().length} CPUs).`,
)
console.log("Run time: the run's startedTime to finishedTime (reading, rendering, writing the file). Wall time: from RequestForRun to the run seen succeeded (polled every 50 ms).\n")
for (const r of rows) console.log(r)
