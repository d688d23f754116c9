// What the benchmark scripts share: percentiles, the built server started as in production
// (its log in a file, on its own core when there are two), and its memory as Linux reports it.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { DB } from '../db/index.js'
import type { EventQueriesRepo } from '../db/event-queries.js'
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
