// What the benchmark scripts share: percentiles, the built server started as in production
// (its log in a file, on its own core when there are two), and its memory as Linux reports it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import autocannon from 'autocannon'
import type { DB } from '../db/index.js'
import type { EventQueriesRepo } from '../db/event-engine/event-queries.js'
import { eventFilter } from '../lib/events/filter.js'
import { projectRoot } from '../lib/paths.js'

/** With 2+ cores and taskset, servers run on CPU 1 and the load generator (the bench) on CPU 0. */
export const PIN = os.cpus().length >= 2 && spawnSync('taskset', ['-c', '0', 'true']).status === 0

export const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b)
/** The p-th fraction of xs (0.5: the median); NaN when there are none. */
export const pct = (xs: number[], p: number) => (xs.length ? sorted(xs)[Math.min(xs.length - 1, Math.floor(xs.length * p))] : NaN)
export const median = (xs: number[]) => pct(xs, 0.5)
/** The median round of a case by its p99 (rounds of the same load, one after another). */
export const medianRound = <T extends { p99: number }>(rounds: T[]): T => [...rounds].sort((x, y) => x.p99 - y.p99)[Math.floor(rounds.length / 2)]
/** Milliseconds as a table shows them: two decimals below 10. */
export const ms = (x: number) => (x < 10 ? x.toFixed(2) : x.toFixed(0))

// A failed run leaves no server behind.
const started = new Set<ChildProcess>()
process.on('exit', () => {
  for (const child of started) child.kill('SIGTERM')
})

export interface StartOptions {
  /** The script and its arguments (default: the built server). */
  args?: string[]
  /** The log line that says it listens. */
  ready?: RegExp
  /** Run it on CPU 1 (default, when PIN). */
  pin?: boolean
}

/**
 * Starts a server whose log goes to a fresh file, as in production; resolves once it
 * listens, with the time that took. A server that exits first rejects with its log's end.
 * With LOG_LEVEL above info it writes no ready line: then it is ready when PORT accepts.
 */
export function startTimed(env: NodeJS.ProcessEnv, logFile: string, opts: StartOptions = {}): Promise<{ child: ChildProcess; ms: number }> {
  const t0 = performance.now()
  const args = opts.args ?? [path.join(projectRoot, 'dist', 'lib', 'server.js')]
  const ready = opts.ready ?? /Server listening/
  // A fresh log: a file used again would hold the last start's ready line.
  const log = fs.openSync(logFile, 'w')
  // BENCH_SERVER_NODE_ARGS (e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"): node's own flags for the server, to profile it under load.
  const nodeArgs = [...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? []), ...args]
  const [cmd, argv] = PIN && opts.pin !== false ? ['taskset', ['-c', '1', process.execPath, ...nodeArgs]] : [process.execPath, nodeArgs]
  const child = spawn(cmd, argv, { env: { ...process.env, ...env }, stdio: ['ignore', log, log] })
  fs.closeSync(log)
  started.add(child)
  child.once('close', () => started.delete(child))
  const quiet = env.PORT !== undefined && env.LOG_LEVEL !== undefined && !['trace', 'debug', 'info'].includes(env.LOG_LEVEL)
  return new Promise((resolve, reject) => {
    let done = false
    let probing = false
    const finish = () => {
      if (done) return
      done = true
      clearInterval(poll)
      child.off('exit', exited)
      resolve({ child, ms: performance.now() - t0 })
    }
    const exited = (code: number | null) => {
      clearInterval(poll)
      reject(new Error(`${path.basename(args[0])} exited ${code}: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`))
    }
    const poll = setInterval(() => {
      if (ready.test(fs.readFileSync(logFile, 'utf8'))) return finish()
      if (!quiet || probing) return
      probing = true
      const socket = net.connect(Number(env.PORT), '127.0.0.1')
      socket.once('connect', () => {
        socket.destroy()
        finish()
      })
      socket.once('error', () => {
        probing = false
      })
    }, 2)
    child.once('exit', exited)
  })
}

export const start = async (env: NodeJS.ProcessEnv, logFile: string, opts?: StartOptions) => (await startTimed(env, logFile, opts)).child

/** Stops a server (SIGTERM: a graceful shutdown) and resolves once it has exited. */
export const stop = (child: ChildProcess) =>
  new Promise<void>((r) => {
    child.removeAllListeners('exit')
    child.on('exit', () => r())
    child.kill('SIGTERM')
  })

/**
 * How much of a file is in the operating system's file cache, from util-linux's fincore
 * ("3.1 of 3.7 GB"); null without it. A page not in it is read from disk: on a machine that
 * reclaims cold pages on its own, a random day's rows can be.
 */
export function residency(file: string): string | null {
  const r = spawnSync('fincore', ['--bytes', '--noheadings', '-o', 'RES,SIZE', file], { encoding: 'utf8' })
  const [res, size] = (r.status === 0 ? r.stdout.trim().split(/\s+/) : []).map(Number)
  if (!Number.isFinite(res) || !Number.isFinite(size)) return null
  return `${(res / 2 ** 30).toFixed(1)} of ${(size / 2 ** 30).toFixed(1)} GB`
}

/**
 * Whether this host pages out memory left idle (Linux DAMON's `pageout` schemes, running):
 * file cache pages not touched for a while are dropped, and reads of them go to the disk
 * again, which puts disk reads into a benchmark's random days. Null when there is none.
 */
export function idlePageout(): string | null {
  const root = '/sys/kernel/mm/damon/admin/kdamonds'
  const read = (f: string) => {
    try {
      return fs.readFileSync(f, 'utf8').trim()
    } catch {
      return null
    }
  }
  // The numbered entries of a folder (kdamonds, contexts, schemes); none when it cannot be read.
  const numbered = (dir: string) => {
    try {
      return fs.readdirSync(dir).filter((d) => /^\d+$/.test(d))
    } catch {
      return []
    }
  }
  const found: string[] = []
  for (const k of numbered(root)) {
    if (read(`${root}/${k}/state`) !== 'on') continue
    for (const c of numbered(`${root}/${k}/contexts`)) {
      const ctx = `${root}/${k}/contexts/${c}`
      const aggrUs = Number(read(`${ctx}/monitoring_attrs/intervals/aggr_us`))
      for (const sc of numbered(`${ctx}/schemes`)) {
        if (read(`${ctx}/schemes/${sc}/action`) !== 'pageout') continue
        const idleS = (Number(read(`${ctx}/schemes/${sc}/access_pattern/age/min`)) * aggrUs) / 1e6
        const quota = Number(read(`${ctx}/schemes/${sc}/quotas/bytes`))
        const everyMs = Number(read(`${ctx}/schemes/${sc}/quotas/reset_interval_ms`))
        const limit = quota > 0 && everyMs > 0 ? `, up to ${(quota / 1048576).toFixed(0)} MB every ${everyMs} ms` : ''
        found.push(`memory idle for ${Number.isFinite(idleS) ? idleS.toFixed(0) : '?'} s is paged out (DAMON pageout${limit})`)
      }
    }
  }
  return found.length ? found.join('; ') : null
}

/** Reads a file once, a chunk at a time, so that the file cache holds it (as a server's that has run a while); its time in s. */
export function readThrough(file: string): number {
  const t0 = performance.now()
  const fd = fs.openSync(file, 'r')
  const chunk = Buffer.allocUnsafe(16 * 1024 * 1024)
  try {
    while (fs.readSync(fd, chunk, 0, chunk.length, null) > 0);
  } finally {
    fs.closeSync(fd)
  }
  return (performance.now() - t0) / 1000
}

/**
 * A repository as the server's is once its first text filters have run: the texts, the
 * sources' names (of `site`'s columns) and the peripheral ids' device parts read, so that an
 * in-process figure takes the way the server's requests take.
 */
export async function textsReadAsServer(repo: EventQueriesRepo, site: string, device = 'VID_0781'): Promise<void> {
  for (const q of [{ GlobalSearch: 'SanDisk' }, { Source: site }, { AssetName: site }, { Details: 'SanDisk' }, { PeripheralAssetId: device }]) await repo.events.ready(eventFilter(q))
  await repo.events.partsRead()
}

/** kB figures of /proc/<pid>/status (Linux). With taskset the child execs node in place: same pid. */
export function memory(pid: number): { rss: number; hwm: number } | null {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN)
    return { rss: kb('VmRSS'), hwm: kb('VmHWM') }
  } catch {
    return null
  }
}

/**
 * Reads a response body to its end: its bytes and lines, and when its first chunk came
 * (performance.now()). Native search for the line breaks: a byte-by-byte loop made the
 * client, not the server, the slower end of an export.
 */
export async function readLines(body: ReadableStream<Uint8Array> | null): Promise<{ bytes: number; lines: number; firstAt: number }> {
  let bytes = 0
  let lines = 0
  let firstAt = Number.NaN
  if (!body) return { bytes, lines, firstAt }
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    if (Number.isNaN(firstAt)) firstAt = performance.now()
    bytes += chunk.length
    const buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length)
    for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) lines++
  }
  return { bytes, lines, firstAt }
}

/**
 * Starts the server's database integrity check (SubsystemHealth starts it when due) and
 * waits until it has finished: it reads the whole file in a worker thread, which shares
 * the server's one core here and would otherwise land in the middle of a measurement
 * (the first scheduled health check comes a minute after start). Resolves with the wait
 * in seconds.
 */
export async function integrityChecked(base: string, headers: Record<string, string>, timeoutMs = 600_000): Promise<number> {
  const t0 = performance.now()
  while (performance.now() - t0 < timeoutMs) {
    const res = await fetch(`${base}/admin/SubsystemHealth`, { headers })
    const body = (await res.json()) as { subsystems?: { name: string; status: string; detail: string }[] }
    const database = body.subsystems?.find((s) => s.name === 'Database')
    if (!database) throw new Error(`SubsystemHealth answered ${res.status} without a Database check`)
    if (!database.detail.includes('integrity check running')) return (performance.now() - t0) / 1000
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
  throw new Error(`the integrity check did not finish within ${timeoutMs / 1000} s`)
}

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100

/** CPU seconds (user and system) a process has used so far, from /proc/<pid>/stat (Linux); NaN elsewhere. */
export function cpuSeconds(pid: number): number {
  try {
    // The fields after the command name (which may hold spaces): utime and stime are 14th and 15th.
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS
  } catch {
    return NaN
  }
}

/** What one large page cost: the first byte, the whole answer, the server's memory, and the small reads served meanwhile. */
export interface LargePage {
  status: number
  ttfbMs: number
  totalMs: number
  bytes: number
  rows: number
  beforeMb: number
  peakMb: number
  smallReads: number
  smallP50: number
  smallP99: number
}

/**
 * Reads one large page (`url`) to its end while one connection keeps asking `smallUrl` (a
 * small page, as consoles do meanwhile); counts the rows by `rowKey` (a JSON key each row
 * has once, such as `"eventID":`) and samples the server's RSS every 10 ms.
 */
export async function largePage(url: string, smallUrl: string, headers: Record<string, string>, pid: number, rowKey: string): Promise<LargePage> {
  const small: number[] = []
  let reading = true
  const smallReads = (async () => {
    while (reading) {
      const t = performance.now()
      const res = await fetch(smallUrl, { headers })
      await res.arrayBuffer()
      if (res.status === 200) small.push(performance.now() - t)
    }
  })()
  const before = memory(pid)
  let peak = before?.rss ?? 0
  const sampler = setInterval(() => {
    peak = Math.max(peak, memory(pid)?.rss ?? 0)
  }, 10)
  const key = Buffer.from(rowKey)
  const t0 = performance.now()
  const res = await fetch(url, { headers })
  let ttfb = NaN
  let bytes = 0
  let rows = 0
  // A key split across two chunks is counted through the tail kept from the previous one.
  let tail = Buffer.alloc(0)
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    if (Number.isNaN(ttfb)) ttfb = performance.now() - t0
    bytes += chunk.length
    const buf = Buffer.concat([tail, Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length)])
    for (let i = buf.indexOf(key); i !== -1; i = buf.indexOf(key, i + key.length)) rows++
    tail = buf.subarray(Math.max(0, buf.length - key.length + 1))
  }
  const totalMs = performance.now() - t0
  clearInterval(sampler)
  reading = false
  await smallReads
  const after = memory(pid)
  return {
    status: res.status,
    ttfbMs: ttfb,
    totalMs,
    bytes,
    rows,
    beforeMb: (before?.rss ?? 0) / 1024,
    peakMb: Math.max(peak, after?.hwm ?? 0) / 1024,
    smallReads: small.length,
    smallP50: pct(small, 0.5),
    smallP99: pct(small, 0.99),
  }
}

/** A large page's figures as a table row (see largePage), with the memory target (< 250 MB). */
export const largePageRow = (name: string, r: LargePage) =>
  `| ${name} | ${r.status} | ${r.rows} rows, ${(r.bytes / 1048576).toFixed(1)} MiB | ${ms(r.ttfbMs)} ms | ${(r.totalMs / 1000).toFixed(2)} s | ${r.peakMb.toFixed(0)} MB (${r.beforeMb.toFixed(0)} MB before) | ${r.smallReads}: ${ms(r.smallP50)} / ${ms(r.smallP99)} ms | < 250 MB: ${r.peakMb < 250 ? 'met' : 'MISSED'} |`
export const LARGE_PAGE_HEADER = [
  '| one large page | status | answer | first byte | total | server peak RSS (VmHWM) | small reads meanwhile: n, p50 / p99 | target |',
  '|---|---|---|---|---|---|---|---|',
]

/** The server's event-loop delay over a stretch of time (ms), and what its background loops did meanwhile. */
export interface LoopDelay {
  p50: number
  p99: number
  max: number
  samples: number
  loops: Record<string, Record<string, number>>
}

/**
 * The event-loop delay of a server during a stretch of load, from its loop statistics
 * (started with PRIME_LOOP_STATS_SECONDS, lib/log.ts): `begin()` sends SIGUSR2, on which the
 * server logs the time before and starts afresh; `end()` sends it again and reads from its
 * log the line that covers the stretch (lines reach the log within a second). Null when none
 * came within 3 s (a server without loop statistics).
 */
export function loopDelay(child: ChildProcess, logFile: string): { begin(): void; end(): Promise<LoopDelay | null> } {
  let begun = 0
  let offset = 0
  return {
    begin() {
      offset = fs.statSync(logFile).size
      begun = Date.now()
      child.kill('SIGUSR2')
    },
    async end() {
      const ended = Date.now()
      child.kill('SIGUSR2')
      for (let waited = 0; waited < 3000; waited += 50) {
        await sleep(50)
        const fd = fs.openSync(logFile, 'r')
        const text = Buffer.alloc(Math.max(0, fs.fstatSync(fd).size - offset))
        fs.readSync(fd, text, 0, text.length, offset)
        fs.closeSync(fd)
        for (const line of text.toString('utf8').split('\n')) {
          if (!line.includes('"event loop"')) continue
          const l = JSON.parse(line) as { loop?: { fromMs: number; toMs: number; samples: number; delayMs: { p50: number; p99: number; max: number }; loops: LoopDelay['loops'] } }
          if (l.loop && l.loop.fromMs >= begun && l.loop.toMs >= ended) return { ...l.loop.delayMs, samples: l.loop.samples, loops: l.loop.loops }
        }
      }
      return null
    },
  }
}

/** A loop delay as a table cell: "p99 / max" ms. */
export const loopDelayCell = (d: LoopDelay | null | undefined) => (d ? `${ms(d.p99)} / ${ms(d.max)}` : 'n/a')

/**
 * Load for answers of megabytes (a poller's page of 5,000 events is 2.7 MB): `connections`
 * keep-alive connections, each asking `path()` in turn for `seconds`, the bodies discarded
 * as they arrive. autocannon handles every byte of a body itself, about 15 ms of the load
 * generator's core per 2.7 MB answer against 4 ms of the server's: it measured itself.
 */
export async function bodiesDiscardedLoad(opts: { url: string; headers: Record<string, string>; path?: () => string; connections: number; seconds: number }) {
  const target = new URL(opts.url)
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.connections })
  const latencies: number[] = []
  const codes: Record<string, { count: number }> = {}
  let errors = 0
  const until = performance.now() + opts.seconds * 1000
  const ask = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now()
      const req = http.request({ host: target.hostname, port: target.port, path: opts.path ? opts.path() : target.pathname + target.search, headers: opts.headers, agent }, (res) => {
        const code = String(res.statusCode)
        codes[code] = { count: (codes[code]?.count ?? 0) + 1 }
        res.on('data', () => {})
        res.on('end', () => {
          latencies.push(performance.now() - t0)
          resolve()
        })
      })
      req.on('error', () => {
        errors++
        resolve()
      })
      req.end()
    })
  const t0 = performance.now()
  await Promise.all(
    Array.from({ length: opts.connections }, async () => {
      while (performance.now() < until) await ask()
    }),
  )
  const seconds = (performance.now() - t0) / 1000
  agent.destroy()
  const non2xx = Object.entries(codes).reduce((n, [code, c]) => n + (code.startsWith('2') ? 0 : c.count), 0)
  return { rps: latencies.length / seconds, p50: Math.round(pct(latencies, 0.5)), p99: Math.round(pct(latencies, 0.99)), non2xx, errors, codes }
}

/**
 * The terms the events benches ask, as the data holds them: 2,000 hosts and 50 sites of the
 * same rank (below the 5,000 busiest sources), and the vendors (the first word of a device's
 * details, "Logitech") and devices ("VID_046D&PID_C31C") of the first 20,000 documents.
 */
export function benchTerms(db: DB): { hosts: string[]; sites: string[]; vendors: string[]; devices: string[] } {
  const hosts = (db.prepare(`SELECT asset_name FROM event_sources WHERE asset_key IS NOT NULL ORDER BY n DESC LIMIT 2000 OFFSET 5000`).pluck().all() as string[]).filter(Boolean)
  const sites = [
    ...new Set(
      (db.prepare(`SELECT asset_name FROM event_sources WHERE asset_key IS NOT NULL AND asset_name GLOB '[A-Z][A-Z][A-Z]-*-*' ORDER BY n DESC LIMIT 400 OFFSET 5000`).pluck().all() as string[]).map(
        (n) => n.split('-').slice(0, 2).join('-'),
      ),
    ),
  ].slice(0, 50)
  const deviceTexts = db.prepare('SELECT details, peripheral_asset_id FROM event_doc_texts WHERE peripheral_asset_id IS NOT NULL LIMIT 20000').raw().all() as [string, string][]
  const distinctOf = (xs: (string | undefined)[]) => [...new Set(xs.filter((x): x is string => !!x))].slice(0, 50)
  const vendors = distinctOf(deviceTexts.map(([d]) => /^[A-Za-z][A-Za-z]{3,}/.exec(d)?.[0]))
  const devices = distinctOf(deviceTexts.map(([, id]) => /VID_[0-9A-F]{4}&PID_[0-9A-F]{4}/i.exec(id)?.[0]))
  return { hosts, sites, vendors, devices }
}

// ---------------------------------------------------------------------------------------
// Both backends side by side (`--backend postgres` or BENCH_BACKEND=sqlite,postgres): the
// same cases against a server on SQLite and one on PostgreSQL over the same data, the two
// taking turns within each round.

/**
 * Whether this run compares the backends: `--backend postgres` (or sqlite,postgres) on the
 * command line, or BENCH_BACKEND naming postgres. SQLite alone otherwise, as before.
 */
export function comparesBackends(argv = process.argv, env = process.env): boolean {
  const at = argv.indexOf('--backend')
  const given = (at >= 0 ? argv[at + 1] : argv.find((a) => a.startsWith('--backend='))?.slice(10)) ?? env.BENCH_BACKEND ?? 'sqlite'
  const names = given.split(',').map((s) => s.trim().toLowerCase())
  for (const n of names) if (n !== 'sqlite' && n !== 'postgres') throw new Error(`--backend: sqlite or postgres, got "${n}"`)
  return names.includes('postgres')
}

/**
 * The PostgreSQL server for a comparison: BENCH_PG_URL, else PRIME_TEST_DATABASE_URL, else
 * the local one; the database (of loaded data, kept between runs) is BENCH_PG_DB or `fallback`.
 */
export function benchPgUrl(fallback: string): string {
  const server = process.env.BENCH_PG_URL ?? process.env.PRIME_TEST_DATABASE_URL ?? 'postgres://prime@127.0.0.1:5432/prime'
  const u = new URL(server)
  u.pathname = `/${process.env.BENCH_PG_DB ?? fallback}`
  return u.toString()
}

/** Signs in as admin on a server; its bearer header. */
export async function benchLogin(base: string, password: string): Promise<Record<string, string>> {
  const res = await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password }) })
  if (res.status !== 200) throw new Error(`login at ${base}: ${res.status} ${await res.text()}`)
  const { token } = (await res.json()) as { token: string }
  return { authorization: `Bearer ${token}` }
}

export type Backend = 'SQLite' | 'PostgreSQL'
export interface BackendServer {
  backend: Backend
  base: string
  auth: Record<string, string>
  child: ChildProcess
}

/** A bound of the issue on a case: PostgreSQL's p99 at most `ratio` × SQLite's, or under `p99Ms`; a rate at least `rateRatio` × SQLite's, or `rate`. */
export interface Bound {
  ratio?: number
  p99Ms?: number
  rateRatio?: number
  rate?: number
}
export const boundText = (b: Bound) =>
  [
    b.ratio !== undefined ? `p99 <= ${b.ratio} x SQLite` : '',
    b.p99Ms !== undefined ? `p99 < ${b.p99Ms} ms` : '',
    b.rateRatio !== undefined ? `rate >= ${b.rateRatio} x SQLite` : '',
    b.rate !== undefined ? `>= ${b.rate.toLocaleString('en-US')}/s` : '',
  ]
    .filter(Boolean)
    .join(', ')

export interface SideCase {
  name: string
  /** The request's path below the API base (called per request when it varies). */
  path: string | (() => string)
  bound: Bound
  /** The key of a row's id in the answer's `data` (to compare the two answers' rows). */
  idKey?: string
}
export interface SideFigures {
  rps: number
  p50: number
  p99: number
  errors: number
}
const ratioText = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a')

/**
 * One case's first answer on each server, compared: the counts and the page's rows (their
 * ids in order, then the rows themselves). A difference goes to `notes`.
 */
export async function sameAnswers(servers: BackendServer[], c: SideCase, notes: string[]): Promise<string> {
  const p = typeof c.path === 'string' ? c.path : c.path()
  const bodies = await Promise.all(
    servers.map(async (s) => {
      const res = await fetch(s.base + p, { headers: s.auth })
      return { status: res.status, body: (await res.json().catch(() => null)) as { recordsTotal?: number; recordsFiltered?: number; data?: Record<string, unknown>[] } | null }
    }),
  )
  const [a, b] = bodies
  if (a.status !== b.status) {
    notes.push(`${c.name}: ${a.status} on SQLite, ${b.status} on PostgreSQL (${p})`)
    return `status ${a.status} / ${b.status}`
  }
  if (!a.body?.data || !b.body?.data) return `${a.status}`
  const key = c.idKey
  const ids = (d: Record<string, unknown>[]) => d.map((r) => String(key ? r[key] : JSON.stringify(r)))
  const counts = `${a.body.recordsFiltered ?? a.body.data.length}`
  if (a.body.recordsFiltered !== b.body.recordsFiltered || a.body.recordsTotal !== b.body.recordsTotal) {
    notes.push(`${c.name}: counts ${a.body.recordsTotal}/${a.body.recordsFiltered} on SQLite, ${b.body.recordsTotal}/${b.body.recordsFiltered} on PostgreSQL (${p})`)
    return `counts differ (${counts} / ${b.body.recordsFiltered})`
  }
  if (ids(a.body.data).join('\n') !== ids(b.body.data).join('\n')) {
    notes.push(`${c.name}: the page's rows differ (${p})`)
    return `${counts}; rows differ`
  }
  const differing = a.body.data.filter((r, i) => JSON.stringify(r) !== JSON.stringify(b.body!.data![i])).length
  if (differing) {
    const i = a.body.data.findIndex((r, i) => JSON.stringify(r) !== JSON.stringify(b.body!.data![i]))
    const x = a.body.data[i]
    const y = b.body.data[i]
    const fields = Object.keys({ ...x, ...y }).filter((k) => JSON.stringify(x[k]) !== JSON.stringify(y[k]))
    notes.push(
      `${c.name}: ${differing} of ${a.body.data.length} rows have the same id but other fields (${p}); the first: ${fields
        .map((k) => `${k} ${JSON.stringify(x[k])} / ${JSON.stringify(y[k])}`)
        .join(', ')
        .slice(0, 300)}`,
    )
  }
  return `${counts}; ${a.body.data.length} rows ${differing ? `same ids, ${differing} differ in fields` : 'equal'}`
}

/**
 * The cases against each server in turn, `rounds` times (the order of the two swapped every
 * round): the median round of each backend by p99, the ratio PostgreSQL/SQLite and the
 * bound's verdict. Table rows (with their header) to print.
 */
export async function sideBySide(servers: BackendServer[], cases: SideCase[], opts: { rounds: number; seconds: number; connections: number; notes: string[] }): Promise<string[]> {
  const rows = [
    '| case | SQLite p50 / p99 ms | PostgreSQL p50 / p99 ms | p99 ratio PG/SQLite | req/s SQLite / PG | p99 each round, SQLite; PG | bound | verdict | first answers compared |',
    '|---|---|---|---|---|---|---|---|---|',
  ]
  const answers = new Map<SideCase, string>()
  for (const c of cases) {
    answers.set(c, await sameAnswers(servers, c, opts.notes))
    // Warm-up: the first requests of a case (plans, caches, pages read) are not measured.
    for (const s of servers) await sideLoad(s, c, { connections: opts.connections, seconds: 1 })
  }
  const figures = new Map<SideCase, SideFigures[][]>(cases.map((c) => [c, servers.map(() => [])]))
  for (let round = 0; round < opts.rounds; round++) {
    for (const c of cases) {
      const order = round % 2 ? [1, 0] : [0, 1]
      for (const i of order) figures.get(c)![i].push(await sideLoad(servers[i], c, opts))
    }
  }
  for (const c of cases) {
    const [lite, pgs] = figures.get(c)!
    const a = medianRound(lite)
    const b = medianRound(pgs)
    const ratio = b.p99 / a.p99
    const over = (c.bound.ratio !== undefined && ratio > c.bound.ratio) || (c.bound.p99Ms !== undefined && b.p99 >= c.bound.p99Ms)
    for (const [i, f] of [lite, pgs].entries()) {
      const errs = f.reduce((n, x) => n + x.errors, 0)
      if (errs) opts.notes.push(`${c.name}: ${errs} non-2xx answers or errors on ${servers[i].backend}`)
    }
    rows.push(
      `| ${c.name} | ${a.p50} / ${a.p99} | ${b.p50} / ${b.p99} | ${ratioText(ratio)} | ${a.rps.toFixed(0)} / ${b.rps.toFixed(0)} | ${lite.map((x) => x.p99).join(', ')}; ${pgs.map((x) => x.p99).join(', ')} | ${boundText(c.bound)} | ${over ? '**OVER BOUND**' : 'within'} | ${answers.get(c)} |`,
    )
  }
  return rows
}

/** One case against one server for `seconds`. */
async function sideLoad(s: BackendServer, c: SideCase, opts: { seconds: number; connections: number }): Promise<SideFigures> {
  const url = s.base + (typeof c.path === 'string' ? c.path : c.path())
  const path = c.path
  const fullPath = (p: string) => {
    const u = new URL(s.base + p)
    return u.pathname + u.search
  }
  const r = await autocannon({
    url,
    connections: opts.connections,
    duration: opts.seconds,
    headers: s.auth,
    requests: typeof path === 'string' ? undefined : [{ setupRequest: (req) => ({ ...req, path: fullPath(path()) }) }],
  })
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.non2xx + r.errors }
}

/**
 * The data of a comparison, ready for two servers: a copy of the SQLite file in a data dir
 * of its own, and a copy of the loaded PostgreSQL database (`kept`, loaded from the file by
 * scripts/pg-load.ts when missing or when BENCH_PG_RELOAD=1), so that what a run writes
 * (sign-ins, enrollments) leaves the kept data as loaded. `release()` removes both copies.
 */
export async function comparisonData(db: DB, kept: string, password: string, log: (l: string) => void) {
  const { loadIntoPostgres, withDatabase, sqliteFileOf } = await import('./pg-load.js')
  const pg = (await import('pg')).default
  const name = decodeURIComponent(new URL(kept).pathname.slice(1))
  const admin = new pg.Client({ connectionString: withDatabase(kept, 'postgres') })
  await admin.connect()
  const exists = ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount ?? 0) > 0
  const liteDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-lite-'))
  await db.backup(path.join(liteDir, 'prime.sqlite'))
  let loaded: string | null = null
  if (!exists || process.env.BENCH_PG_RELOAD === '1') {
    log(`Loading the SQLite data into PostgreSQL (${name}) ...`)
    const r = await loadIntoPostgres(sqliteFileOf(liteDir), kept, { replace: true, log })
    if (r.mismatches.length) throw new Error(`the loaded data differs: ${r.mismatches.slice(0, 5).join('; ')}`)
    loaded = `loaded ${r.tables.reduce((n, t) => n + t.rows, 0)} rows into PostgreSQL in ${(r.totalMs / 1000).toFixed(0)} s (${r.tables
      .filter((t) => t.rows > 1000)
      .map((t) => `${t.name} ${t.rows} in ${(t.ms / 1000).toFixed(0)} s`)
      .join(', ')}; indexes ${(r.indexesMs / 1000).toFixed(0)} s); counts and a sample of rows checked equal`
  }
  const run = `${name}_run`
  await admin.query(`DROP DATABASE IF EXISTS ${run} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${run} TEMPLATE ${name} STRATEGY FILE_COPY`)
  const pgDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-pg-'))
  return {
    liteDir,
    pgDir,
    pgUrl: withDatabase(kept, run),
    loaded,
    password,
    async release() {
      await admin.query(`DROP DATABASE IF EXISTS ${run} WITH (FORCE)`)
      await admin.end()
      for (const d of [liteDir, pgDir]) fs.rmSync(d, { recursive: true, force: true })
    },
  }
}

/** A server on each backend over the comparison's data, on `port` and `port + 1`; signed in. */
export async function startBackends(data: { liteDir: string; pgDir: string; pgUrl: string; password: string }, env: NodeJS.ProcessEnv, port: number): Promise<BackendServer[]> {
  const out: BackendServer[] = []
  for (const [i, backend] of (['SQLite', 'PostgreSQL'] as const).entries()) {
    const dir = i ? data.pgDir : data.liteDir
    // Both: the load generator's connections share one account, and PostgreSQL counts every list as an expensive read (one per account by default).
    const e = { PRIME_EXPENSIVE_PER_CREDENTIAL: '16', ...env, PRIME_DATA_DIR: dir, PORT: String(port + i), PRIME_ADMIN_PASSWORD: data.password, ...(i ? { PRIME_DATABASE_URL: data.pgUrl } : {}) }
    if (!i) delete (e as Record<string, unknown>).PRIME_DATABASE_URL
    const child = await start(e, path.join(dir, `server-${backend}.log`))
    const base = `http://127.0.0.1:${port + i}/prime/webui`
    out.push({ backend, child, base, auth: await benchLogin(base, data.password) })
  }
  return out
}

/** Medians and ratio of rates measured per backend over rounds: a table row. */
export function rateRow(name: string, rates: number[][], bound: Bound, unit = '/s'): string {
  const [a, b] = rates.map((r) => median(r))
  const ratio = b / a
  const over = (bound.rateRatio !== undefined && ratio < bound.rateRatio) || (bound.rate !== undefined && b < bound.rate)
  return `| ${name} | ${a.toFixed(0)} ${unit} | ${b.toFixed(0)} ${unit} | ${ratioText(ratio)} | ${rates.map((r) => r.map((x) => x.toFixed(0)).join(', ')).join('; ')} | ${boundText(bound)} | ${over ? '**OVER BOUND**' : 'within'} |`
}
export const RATE_HEADER = ['| case | SQLite | PostgreSQL | ratio PG/SQLite | each round, SQLite; PG | bound | verdict |', '|---|---|---|---|---|---|---|']

/** The first line of a side-by-side run's tables: what was measured, how, and how busy the machine was. */
export function backendsRunLine(what: string, run: { connections: number; seconds: number; rounds: number; loadAtStart: string }): string {
  const loadNow = os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')
  return `\n${what}, the same rows on both backends; ${run.connections} connections, ${run.seconds} s per case, backend and round, ${run.rounds} rounds (the two backends take turns, the order swapped each round; the median round by p99 shown)${PIN ? '; load generator on CPU 0, the Node servers on CPU 1, PostgreSQL unpinned' : ''}; load average ${run.loadAtStart} at the start, ${loadNow} at the end (${os.cpus().length} CPUs, shared with other work).\n`
}
