// npm run bench -- background: the work that shares the server's event loop with requests,
// in process, each beside its floor measured in the same run.
//
// 1. A burst of event writes through record() (100 events per transaction, one turn of the
//    event loop between transactions, synchronous = FULL): with SQLite's checkpoints in the
//    commits (every 10,000 pages: the way before) and with them in a thread of their own
//    (db/checkpoints.ts). What a request waits for is the longest commit. Floor: the same
//    writes with no checkpoint at all.
// 2. The index catching up with those events: in slices of 20 ms of steps of 2,048 records
//    (the way before) and in the server's slices (db/event-engine/event-catch-up.ts): 4 ms while requests
//    are in flight, 20 ms when idle (lib/platform/slices.ts), one turn of the event loop
//    between slices. Floor: catchUp() in one go.
// 3. The server connection's read settings (cache_size, mmap_size) on event lists, each in
//    a process of its own: p50 / p99 of each list and the process's RSS after them.
//
// Settings: BENCH_EVENTS (300000) seeded first, BENCH_WRITES (100000) written in the burst,
// BENCH_READS (200 per list case).
import { execFileSync, fork } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { openDatabase, type DB } from '../db/index.js'
import { checkpointerLoop } from '../lib/platform/checkpointer.js'
import { LONG_SLICE_MS, SHORT_SLICE_MS } from '../lib/platform/slices.js'
import { eventQueriesRepo } from '../db/event-engine/event-queries.js'
import { eventsRepo } from '../db/events.js'
import type { EventInput } from '../lib/events/ports.js'
import { eventFilter } from '../lib/events/filter.js'
import { seedEvents } from './seed-events.js'
import { ms, pct } from './bench-support.js'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 300_000)
const WRITES = Number(process.env.BENCH_WRITES ?? 100_000)
const READS = Number(process.env.BENCH_READS ?? 200)
const PER_TX = 100
const MB = 1024 * 1024
const load = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')

// ---------------------------------------------------------------------------------------
// 3's child: one read setting in a process of its own (its RSS is the setting's).

if (process.env.BENCH_BACKGROUND_READER) {
  const { file, cacheMb, mmapMb } = JSON.parse(process.env.BENCH_BACKGROUND_READER) as { file: string; cacheMb: number; mmapMb: number }
  const db = openDatabase(file, { cacheMb, mmapMb })
  const repo = eventQueriesRepo(db)
  repo.holdIndexing(true)
  const newest = db.prepare('SELECT max(created_ms) FROM events').pluck().get() as number
  const host = db.prepare('SELECT asset_name FROM event_sources WHERE asset_key IS NOT NULL ORDER BY n DESC LIMIT 1 OFFSET 500').pluck().get() as string
  const day = (n: number) => new Date(newest - n * 86_400_000).toISOString()
  const cases: [string, Record<string, string>][] = [
    ['default page', {}],
    ['MinimumSeverity=Warning + a day', { MinimumSeverity: 'Warning', FromDate: day(10), ToDate: day(9) }],
    ['Source contains a host', { Source: host }],
    ['GlobalSearch a vendor', { GlobalSearch: 'SanDisk' }],
    ['a page deep in the list (offset 100,000)', { offset: '100000' }],
  ]
  const out: Record<string, { p50: number; p99: number }> = {}
  for (const [name, q] of cases) {
    const { offset, ...filter } = q
    const run = () => repo.events.list(eventFilter(filter), { field: 'eventID', direction: 'desc' }, 100, Number(offset ?? 0))
    run()
    const times: number[] = []
    for (let i = 0; i < READS; i++) {
      const t = performance.now()
      run()
      times.push(performance.now() - t)
    }
    out[name] = { p50: pct(times, 0.5), p99: pct(times, 0.99) }
  }
  db.close()
  process.send!({ out, rssMb: process.memoryUsage().rss / MB })
  process.exit(0)
}

// ---------------------------------------------------------------------------------------
// Seed

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-background-'))
process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
const base = path.join(dir, 'base.sqlite')
const loadAtStart = load()
{
  console.error(`Seeding ${EVENTS} events ...`)
  const db = openDatabase(base)
  await seedEvents(db, { events: EVENTS, hosts: 10_000 })
  db.close()
}
const copy = (name: string) => {
  const file = path.join(dir, name)
  fs.copyFileSync(base, file)
  return file
}
const sampleInputs = (db: DB): EventInput[] =>
  (
    db
      .prepare('SELECT event_code, severity, category, entity_id, description, details, hashtags, peripheral_icon, asset_key, asset_name, peripheral_asset_id FROM events ORDER BY id DESC LIMIT 1000')
      .raw()
      .all() as unknown[][]
  ).map(
    ([code, severity, category, entityId, description, details, hashtags, icon, assetKey, assetName, device]) =>
      ({ code, severity, category, entityId, description, details, hashtags, peripheralIcon: icon, assetKey, assetName, peripheralAssetId: device }) as EventInput,
  )
const walSize = (file: string) => (fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0)
/** The WAL header's checkpoint sequence: it moves each time the WAL is written again from its start, whoever restarted it. */
const walSequence = (file: string) => {
  try {
    const fd = fs.openSync(`${file}-wal`, 'r')
    const header = Buffer.alloc(16)
    const n = fs.readSync(fd, header, 0, 16, 0)
    fs.closeSync(fd)
    return n === 16 ? header.readUInt32BE(12) : 0
  } catch {
    return 0
  }
}

// ---------------------------------------------------------------------------------------
// 1. The write burst

type Mode = 'none' | 'in commits' | 'thread'
async function burst(file: string, mode: Mode) {
  const db = openDatabase(file)
  db.pragma(`wal_autocheckpoint = ${mode === 'in commits' ? 10_000 : 0}`)
  // The server's loop, as it runs there (its defaults).
  const quiet = { info() {}, warn: (_: object, m: string) => console.error(m), error: (_: object, m: string) => console.error(m) }
  const loop = mode === 'thread' ? checkpointerLoop({ db, file, settings: { thread: true, intervalMs: 500, restartBytes: 16 * MB }, log: quiet }) : undefined
  loop?.start()
  const events = eventsRepo(db)
  const inputs = sampleInputs(db)
  const tx = db.transaction((batch: EventInput[]) => events.record(Date.now(), batch))
  const commits: number[] = []
  let largestWal = 0
  let restarted = 0
  let sequence = walSequence(file)
  const t0 = performance.now()
  for (let n = 0; n < WRITES; n += PER_TX) {
    const at = n % (inputs.length - PER_TX)
    const t = performance.now()
    tx(inputs.slice(at, at + PER_TX))
    commits.push(performance.now() - t)
    if (commits.length % 20 === 0) {
      largestWal = Math.max(largestWal, walSize(file))
      const now = walSequence(file)
      if (now !== sequence) restarted++
      sequence = now
    }
    await nextTurn()
  }
  const secs = (performance.now() - t0) / 1000
  largestWal = Math.max(largestWal, walSize(file))
  const stats = loop?.stats?.()
  await loop?.stop()
  db.close()
  return { rate: WRITES / secs, p50: pct(commits, 0.5), p99: pct(commits, 0.99), max: Math.max(...commits), largestWal, restarted, stats }
}

console.error('Write bursts ...')
const writes: string[] = []
const bursts: Record<Mode, Awaited<ReturnType<typeof burst>>> = {} as any
for (const mode of ['none', 'in commits', 'thread'] as Mode[]) bursts[mode] = await burst(copy(`write-${mode.replace(' ', '-')}.sqlite`), mode)
for (const mode of ['none', 'in commits', 'thread'] as Mode[]) {
  const b = bursts[mode]
  const label = {
    none: 'no checkpoint at all (floor)',
    'in commits': 'checkpoints in the commits (SQLite, every 10,000 pages: before)',
    thread: 'checkpoints in a thread (PASSIVE every 500 ms, RESTART past 16 MB: now)',
  }[mode]
  writes.push(
    `| ${label} | ${b.rate.toFixed(0)} (${(b.rate / bursts.none.rate).toFixed(2)} of the floor) | ${ms(b.p50)} / ${ms(b.p99)} / ${ms(b.max)} | ${(b.largestWal / MB).toFixed(0)} MB, restarted ${b.restarted} times | ${b.stats ? `${b.stats.checkpoints} (${b.stats.restarts} restarting the WAL), longest ${ms(b.stats.maxMs)} ms off the event loop; ${b.stats.helped} finished on it, longest ${ms(b.stats.helpMaxMs)} ms` : ''} |`,
  )
}

// ---------------------------------------------------------------------------------------
// 2. The index catching up with the burst (on copies of the database the thread wrote)

console.error('Index catch-up ...')
const written = path.join(dir, 'write-thread.sqlite')
{
  const db = openDatabase(written)
  db.pragma('wal_checkpoint(TRUNCATE)')
  db.close()
}
type CatchUp = 'floor' | 'before' | 'synced' | 'now' | 'idle'
async function catchUp(how: CatchUp) {
  const file = path.join(dir, `catch-up-${how}.sqlite`)
  fs.copyFileSync(written, file)
  const db = openDatabase(file)
  const repo = eventQueriesRepo(db, { syncedSteps: how === 'before' || how === 'synced' })
  const budget = how === 'idle' ? LONG_SLICE_MS : SHORT_SLICE_MS
  const behind = (db.prepare('SELECT max(id) FROM events').pluck().get() as number) - repo.indexer.indexed('events')
  const slices: number[] = []
  const t0 = performance.now()
  if (how === 'floor') repo.catchUp()
  else if (how === 'before') {
    // The slice as it was: steps of 2,048 records until 20 ms have passed.
    for (let more = true; more; await nextTurn()) {
      const t = performance.now()
      const until = t + 20
      do more = repo.indexer.step('events', 2048) + repo.indexer.step('audit_trail', 2048) > 0
      while (more && performance.now() < until)
      slices.push(performance.now() - t)
    }
  } else {
    repo.startIndexing()
    for (let more = true; more; await nextTurn()) {
      const t = performance.now()
      more = repo.indexSlice(budget)
      slices.push(performance.now() - t)
    }
  }
  const secs = (performance.now() - t0) / 1000
  db.close()
  return { behind, rate: behind / secs, slices: slices.length, p99: pct(slices, 0.99), max: slices.length ? Math.max(...slices) : Number.NaN }
}
const catchUps: string[] = []
const floorRate = (await catchUp('floor')).rate
const catchUpLabel: Record<Exclude<CatchUp, 'floor'>, string> = {
  before: 'slices of 20 ms, steps of 2,048, each commit synced (before)',
  synced: 'slices of 4 ms, steps sized to the time left, each commit synced',
  now: 'slices of 4 ms, steps sized to the time left, commits not synced on their own (now, while requests are in flight)',
  idle: 'slices of 20 ms, whole steps of 2,048, commits not synced on their own (now, when idle)',
}
for (const how of ['before', 'synced', 'now', 'idle'] as const) {
  const c = await catchUp(how)
  catchUps.push(`| ${catchUpLabel[how]} | ${c.behind} | ${c.rate.toFixed(0)} (${(c.rate / floorRate).toFixed(2)} of the floor) | ${c.slices} | ${ms(c.p99)} / ${ms(c.max)} |`)
}
catchUps.unshift(`| catchUp() in one go, steps of 4,096 (floor) | | ${floorRate.toFixed(0)} | | |`)

// ---------------------------------------------------------------------------------------
// 3. Read settings

console.error('Read settings ...')
const reads: string[] = []
const settings = [
  { cacheMb: 16, mmapMb: 0 },
  { cacheMb: 64, mmapMb: 0 },
  { cacheMb: 16, mmapMb: 2048 },
]
let names: string[] = []
const readFile = copy('read.sqlite')
const script = new URL(import.meta.url).pathname
for (const s of settings) {
  // Each from a cold start of the process, with the file in the OS cache as the server has it.
  execFileSync('cat', [readFile], { stdio: ['ignore', 'ignore', 'ignore'], maxBuffer: 1 })
  const r = await new Promise<{ out: Record<string, { p50: number; p99: number }>; rssMb: number }>((resolve, reject) => {
    const child = fork(script, [], { env: { ...process.env, BENCH_BACKGROUND_READER: JSON.stringify({ file: readFile, ...s }) } })
    child.once('message', (m) => resolve(m as any))
    child.once('exit', (code) => code && reject(new Error(`reader exited ${code}`)))
  })
  names = Object.keys(r.out)
  reads.push(`| cache_size ${s.cacheMb} MB, mmap_size ${s.mmapMb} MB | ${names.map((n) => `${ms(r.out[n].p50)} / ${ms(r.out[n].p99)}`).join(' | ')} | ${r.rssMb.toFixed(0)} MB |`)
}

console.log(`\n${EVENTS} events seeded (10,000 hosts), ${WRITES} written in the burst; in process, ${os.cpus().length} CPUs; load average ${loadAtStart} at the start, ${load()} at the end.\n`)
console.log(
  `| event writes, ${PER_TX} per transaction, a turn of the event loop between them | events/s | commit p50 / p99 / max ms | largest WAL, restarts (WAL header) | checkpoints |\n|---|---|---|---|---|`,
)
for (const w of writes) console.log(w)
console.log('\n| index catch-up of the burst | records behind | records/s | slices | slice p99 / max ms |\n|---|---|---|---|---|')
for (const c of catchUps) console.log(c)
console.log(`\n| read settings (${READS} lists each, p50 / p99 ms) | ${names.join(' | ')} | RSS after |\n|---|${names.map(() => '---|').join('')}---|`)
for (const r of reads) console.log(r)
