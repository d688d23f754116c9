// npm run bench -- events: event queries, the integration feed, the CSV export and the
// event write path at scale. Seeds a temporary data dir (5,000,000 events of 100,000
// hosts over 30 days, scripts/seed-events.ts) or uses BENCH_EVENTS_DIR as it is (a dir
// seeded before: `npm run seed-events -- --events 5000000 --data-dir <dir>`; the write
// test writes into a copy of it, which it removes), starts the built server on 127.0.0.1 pinned to one core, and
// loads it with autocannon (10 connections, bounded durations) from the other. Each list
// case is also timed in-process (the repository call alone: the floor the API cannot go
// below) and once as a plain SQL query without the index (what the index saves).
//
// Settings: BENCH_EVENTS (5000000), BENCH_SECONDS per case and round (10), BENCH_ROUNDS (3), BENCH_EVENTS_DIR,
// BENCH_EXPORT_ROWS (1000000), BENCH_LOG_LEVEL (info, as in production). BENCH_LARGE_PAGE=only:
// the seed and the large pages (BENCH_EXPORT_ROWS events in one streamed page) alone.
// BENCH_EXPORT=only: the seed and the CSV export alone (with its in-process floor).
// BENCH_WRITE=only: the seed and the write path alone; BENCH_WRITE=w2: of the write path, the
// floor (record() at 100 per transaction) and the mass disconnect alone. BENCH_AGENTS: the fleet the write path's
// check-ins and mass disconnect use (100,000 at 5,000,000 events, in proportion below). The write path's WAL checkpoints
// are made in a thread, as the server makes them (PRIME_WAL_CHECKPOINT_THREAD and the default settings).
// BENCH_LISTS=only: the seed, the lists and the sweep alone. BENCH_MATCH (a regular expression): only the list
// cases and sweep shapes whose name it matches. BENCH_SWEEP (1; 0 leaves it out): every sort field alone and every documented filter alone
// and with one day, one round of BENCH_SWEEP_SECONDS (3) each, and each one's vary twin (a new question each
// request: a random page, term or day) as long, against 100 ms p99 (the verdict is the vary twin's).
// BENCH_READ_THROUGH (1; 0 leaves it out): the database file is read once before the lists, so that the
// file cache holds it as a running server's does; its residency (fincore) is noted before, after and at the lists' end.
//
// `--backend postgres` (or BENCH_BACKEND=sqlite,postgres): the issue's list cases against a server on
// SQLite and one on PostgreSQL over the same events (copied by scripts/pg-load.ts into BENCH_PG_DB,
// prime_bench_events_<N> by default, kept for the next run), taking turns each round, with the
// ratios and the bounds; and the events' write (32 check-ins x 3 events a unit of work, the
// servers' recorders with their hooks) on each, in process.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { openDatabase } from '../db/index.js'
import { eventQueriesRepo } from '../db/event-engine/event-queries.js'
import { EVENT_ROW_SORTS, type EventBatch, type EventInput } from '../lib/events/ports.js'
import { eventsRepo } from '../db/events.js'
import { asyncPort } from '../db/unit-of-work.js'
import { alarmsRepo } from '../db/alarms.js'
import { auditTrail } from '../lib/audit.js'
import { loadSpec, operations } from '../lib/contract.js'
import { agentGateway } from '../lib/gateway/service.js'
import { agentSweeperLoop, type SweepSlice } from '../lib/gateway/sweeper.js'
import { BULK_SLICE_MS, LONG_SLICE_MS, SHORT_SLICE_MS, requestActivity } from '../lib/platform/slices.js'
import { checkpointerLoop } from '../lib/platform/checkpointer.js'
import { systemContext } from '../lib/platform/context.js'
import { createRepos } from '../lib/repos.js'
import { seedFleet } from './seed.js'
import { eventFilter } from '../lib/events/filter.js'
import { csvFile, eventCells, exportColumns, exportLimits } from '../lib/events/exports.js'
import { sort } from '../lib/listing.js'
import { SORT_ROWS_MAX } from '../lib/events/service.js'
import { eventsAnswer } from '../lib/events/views.js'
import { seedEvents } from './seed-events.js'
import {
  PIN,
  pct,
  ms,
  start,
  stop,
  memory,
  cpuSeconds,
  readLines,
  integrityChecked,
  medianRound,
  largePage,
  largePageRow,
  readThrough,
  residency,
  idlePageout,
  textsReadAsServer,
  LARGE_PAGE_HEADER,
  loopDelay,
  loopDelayCell,
  bodiesDiscardedLoad,
  benchTerms,
  type LoopDelay,
  comparesBackends,
  benchPgUrl,
  comparisonData,
  startBackends,
  sideBySide,
  rateRow,
  RATE_HEADER,
  backendsRunLine,
  type SideCase,
} from './bench-support.js'
import { connectPostgres } from '../db/postgres/index.js'
import { pgEventParts } from '../db/postgres/events.js'
import { pgLatestEventTexts } from '../db/postgres/agent-texts.js'
import { pgRiskRaiser } from '../db/postgres/risk.js'
import { pgRiskFeed } from '../db/postgres/risk-feed.js'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 5_000_000)
const DURATION = Number(process.env.BENCH_SECONDS ?? 10)
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))
const EXPORT_ROWS = Number(process.env.BENCH_EXPORT_ROWS ?? 1_000_000)
const SWEEP = process.env.BENCH_SWEEP !== '0'
const W2_ONLY = process.env.BENCH_WRITE === 'w2'
const SWEEP_SECONDS = Number(process.env.BENCH_SWEEP_SECONDS ?? 3)
const CONNECTIONS = 10
const PORT = 18083
const PASSWORD = 'Bench-password-123'
const DAY = 86_400_000

const given = process.env.BENCH_EVENTS_DIR ? path.resolve(process.env.BENCH_EVENTS_DIR) : null
const dataDir = given ?? fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-events-'))
const dbFile = path.join(dataDir, 'prime.sqlite')
const notes: string[] = []
const writes: string[] = []
const rows: string[] = []
const loadAtStart = os
  .loadavg()
  .map((x) => x.toFixed(1))
  .join(' ')
const base = `http://127.0.0.1:${PORT}/prime/webui`
const baseEnv = {
  PRIME_DATA_DIR: dataDir,
  PRIME_ADMIN_PASSWORD: PASSWORD,
  PORT: String(PORT),
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  PRIME_ACCESS_TOKEN_TTL: '3600',
  PRIME_RATE_LIMIT_MAX: '100000000',
  // The event-loop delay of each case is asked for by signal (loopDelay): the hourly line never splits one.
  PRIME_LOOP_STATS_SECONDS: '3600',
}

// ---------------------------------------------------------------------------------------
// Seed (both cores)

const db = openDatabase(dbFile)
if (!given) {
  console.error(`Seeding ${EVENTS} events into ${dataDir} ...`)
  let last = 0
  const seeded = await seedEvents(db, {
    events: EVENTS,
    onProgress: (phase, done, total) => {
      if (performance.now() - last > 10_000) {
        last = performance.now()
        console.error(`  ${phase} ${done}/${total}`)
      }
    },
  })
  console.error(
    `Seeded: ${Object.entries(seeded.phases)
      .map(([k, v]) => `${k} ${(v / 1000).toFixed(1)} s`)
      .join(', ')}`,
  )
  notes.push(
    `seeding ${EVENTS} events: ${Object.entries(seeded.phases)
      .map(([k, v]) => `${k} ${(v / 1000).toFixed(0)} s`)
      .join(', ')}`,
  )
}
const total = db.prepare('SELECT count(*) FROM events').pluck().get() as number
const top = db.prepare('SELECT max(id) FROM events').pluck().get() as number
const newest = db.prepare('SELECT max(created_ms) FROM events').pluck().get() as number
const repo = eventQueriesRepo(db)
repo.holdIndexing(true)
const behind = repo.catchUp()
if (behind) notes.push(`${behind} records were not indexed yet and were indexed before measuring`)

// Real names from the data: one host's exact source, one site and department, a device vendor.
const host = db.prepare(`SELECT entity_id, asset_name FROM event_sources WHERE asset_key IS NOT NULL ORDER BY n DESC LIMIT 1 OFFSET 5000`).get() as { entity_id: string; asset_name: string }
// A site and department: the first two parts of a name like LON-HR-WS00042 (a fifth of the
// fleet generator's hosts are named DESKTOP-XXXXXXX instead).
const siteHost = db.prepare(`SELECT asset_name FROM event_sources WHERE asset_key IS NOT NULL AND asset_name GLOB '[A-Z][A-Z][A-Z]-*-*' ORDER BY n DESC LIMIT 1 OFFSET 5000`).pluck().get() as
  | string
  | undefined
const site = siteHost ? siteHost.split('-').slice(0, 2).join('-') : 'NYC-FIN'
// The "vary" twins ask a different question each request (a random page, day, host, site
// or vendor), so that no answer kept for a repeated question (lib/events/service.ts, kept
// from a question's second ask) is in their figures: 2,000 hosts and 50 sites of the same
// rank (a site with a random page), the data's vendors.
const { hosts, sites, vendors, devices } = benchTerms(db)
const pick = <T>(list: T[]) => list[Math.floor(Math.random() * list.length)]
/** A page of the first `n`, at random: with a random term, questions seldom repeat, so no kept answer serves them. */
const randomPage = (n: number) => String(1 + Math.floor(Math.random() * n))
const day = (n: number) => new Date(newest - n * DAY).toISOString()

interface Case {
  name: string
  url: string
  target: number
  floor: () => unknown
  plain?: string
  vary?: () => string
  /** Answers of megabytes: loaded by bodiesDiscardedLoad (autocannon would measure itself). */
  large?: boolean
}
// The floors are the repository calls the API makes (rows as arrays; the answer is written from them).
const list =
  (q: Record<string, string>, sortBy = 'eventID_desc') =>
  () =>
    repo.events.pageRows(eventFilter(q), { field: sortBy.replace(/_(asc|desc)$/, ''), direction: sortBy.endsWith('asc') ? 'asc' : 'desc' }, 100, 0)
const feedAt =
  (from: () => number, size = 100) =>
  () =>
    repo.events.pageRows(eventFilter({ FromEventId: String(from()) }), { field: 'eventID', direction: 'desc' }, size, 0, true)
const randomId = () => 1 + Math.floor(Math.random() * top)
const qs = (q: Record<string, string>) => new URLSearchParams({ ...q, PageSize: '100' }).toString()
const oneDay = { FromDate: day(10), ToDate: day(9) }
const bQuery = { MinimumSeverity: 'Warning', ...oneDay }
const like = (s: string) => `'%${s.replace(/'/g, "''")}%'`
const globalLike = (s: string) => ['description', 'details', 'entity_id', 'event_code', 'category', 'hashtags', 'asset_name'].map((c) => `${c} LIKE ${like(s)}`).join(' OR ')
const mid = Math.floor(top / 2)
// The "vary" twins of the text cases: a random real term and a random day each request, so
// that an answer kept from the request before cannot flatter them (each is a first time).
/** 24 hours from a random moment of the 28 days before the newest. */
const randomDay = () => {
  const from = newest - DAY * (1 + Math.random() * 28)
  return { FromDate: new Date(from).toISOString(), ToDate: new Date(from + DAY).toISOString() }
}
const varyUrl = (q: () => Record<string, string>) => () => `/Events/GetEvents?${qs(q())}`
const varyFloor = (q: () => Record<string, string>) => () => list(q())()
const varied: [string, () => Record<string, string>][] = [
  [`Details a vendor (random of ${vendors.length}) + a random day`, () => ({ Details: pick(vendors), ...randomDay() })],
  [`PeripheralAssetId a device (random of ${devices.length}) + a random day`, () => ({ PeripheralAssetId: pick(devices), ...randomDay() })],
  [`GlobalSearch a vendor (random of ${vendors.length}) + a random day`, () => ({ GlobalSearch: pick(vendors), ...randomDay() })],
]
const allCases: Case[] = [
  {
    name: '(a) GetEvents, default sort',
    url: `/Events/GetEvents?${qs({})}`,
    target: 20,
    floor: list({}),
    plain: 'SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM (SELECT * FROM events ORDER BY id DESC LIMIT 100))',
  },
  {
    name: '(a) vary: GetEvents, default sort, a random page of the first 1,000',
    url: `/Events/GetEvents?${qs({ PageNumber: '2' })}`,
    target: 20,
    floor: () => repo.events.pageRows(eventFilter({}), { field: 'eventID', direction: 'desc' }, 100, 100 * Math.floor(Math.random() * 1000), false),
    vary: () => `/Events/GetEvents?${qs({ PageNumber: randomPage(1000) })}`,
  },
  {
    name: '(b) MinimumSeverity=Warning + a day (FromDate/ToDate)',
    url: `/Events/GetEvents?${qs(bQuery)}`,
    target: 20,
    floor: list(bQuery),
    plain: `SELECT count(*) FROM events WHERE severity <= 4 AND created_ms BETWEEN ${Date.parse(day(10))} AND ${Date.parse(day(9))}`,
  },
  {
    name: '(b) vary: MinimumSeverity=Warning + a random day',
    url: `/Events/GetEvents?${qs({ MinimumSeverity: 'Warning', ...randomDay() })}`,
    target: 20,
    floor: () => list({ MinimumSeverity: 'Warning', ...randomDay() })(),
    vary: () => `/Events/GetEvents?${qs({ MinimumSeverity: 'Warning', ...randomDay() })}`,
  },
  {
    name: `(c) Source contains a host ("${host.asset_name}")`,
    url: `/Events/GetEvents?${qs({ Source: host.asset_name })}`,
    target: 50,
    floor: list({ Source: host.asset_name }),
    plain: `SELECT count(*) FROM events WHERE entity_id LIKE ${like(host.asset_name)}`,
  },
  {
    name: `(c) Source contains a site and department ("${site}")`,
    url: `/Events/GetEvents?${qs({ Source: site })}`,
    target: 50,
    floor: list({ Source: site }),
    plain: `SELECT count(*) FROM events WHERE entity_id LIKE ${like(site)}`,
  },
  {
    name: `(c) vary: Source contains a host, one of ${hosts.length}`,
    url: `/Events/GetEvents?${qs({ Source: hosts[0] ?? host.asset_name })}`,
    target: 50,
    floor: () => list({ Source: pick(hosts) })(),
    vary: () => `/Events/GetEvents?${qs({ Source: pick(hosts) })}`,
  },
  {
    name: `(c) vary: Source contains a site and department, one of ${sites.length}, a random page of the first 20`,
    url: `/Events/GetEvents?${qs({ Source: sites[0] ?? site })}`,
    target: 50,
    floor: () => repo.events.pageRows(eventFilter({ Source: pick(sites) }), { field: 'eventID', direction: 'desc' }, 100, 100 * Math.floor(Math.random() * 20), false),
    vary: () => `/Events/GetEvents?${qs({ Source: pick(sites), PageNumber: randomPage(20) })}`,
  },
  {
    name: `(c) Source contains a host ("${host.asset_name}") + a day`,
    url: `/Events/GetEvents?${qs({ Source: host.asset_name, ...oneDay })}`,
    target: 50,
    floor: list({ Source: host.asset_name, ...oneDay }),
  },
  {
    name: '(d) GlobalSearch a vendor ("SanDisk")',
    url: `/Events/GetEvents?${qs({ GlobalSearch: 'SanDisk' })}`,
    target: 50,
    floor: list({ GlobalSearch: 'SanDisk' }),
    plain: `SELECT count(*) FROM events WHERE ${globalLike('SanDisk')}`,
  },
  {
    name: `(d) GlobalSearch a host ("${host.asset_name}")`,
    url: `/Events/GetEvents?${qs({ GlobalSearch: host.asset_name })}`,
    target: 50,
    floor: list({ GlobalSearch: host.asset_name }),
    plain: `SELECT count(*) FROM events WHERE ${globalLike(host.asset_name)}`,
  },
  {
    name: `(d) vary: GlobalSearch a vendor (one of ${vendors.length}, a random page of the first 20) or a host (one of ${hosts.length})`,
    url: `/Events/GetEvents?${qs({ GlobalSearch: vendors[1] ?? 'SanDisk' })}`,
    target: 50,
    floor: () =>
      Math.random() < 0.5
        ? repo.events.pageRows(eventFilter({ GlobalSearch: pick(vendors) }), { field: 'eventID', direction: 'desc' }, 100, 100 * Math.floor(Math.random() * 20), false)
        : list({ GlobalSearch: pick(hosts) })(),
    vary: () => `/Events/GetEvents?${qs(Math.random() < 0.5 ? { GlobalSearch: pick(vendors), PageNumber: randomPage(20) } : { GlobalSearch: pick(hosts) })}`,
  },
  {
    name: '(d) GlobalSearch a vendor ("SanDisk") + a day',
    url: `/Events/GetEvents?${qs({ GlobalSearch: 'SanDisk', ...oneDay })}`,
    target: 50,
    floor: list({ GlobalSearch: 'SanDisk', ...oneDay }),
  },
  ...varied.map(([name, q]) => ({ name: `(d) ${name} (vary)`, url: varyUrl(q)(), target: 50, floor: varyFloor(q), vary: varyUrl(q) })),
  {
    name: 'GetEventsIntegration from an id (random, backlog up to all), PageSize=100',
    url: `/Events/GetEventsIntegration?FromEventId=${mid}&PageSize=100`,
    target: 20,
    floor: feedAt(randomId),
    plain: `SELECT (SELECT count(*) FROM events WHERE id >= ${mid}), (SELECT count(*) FROM (SELECT * FROM events WHERE id >= ${mid} ORDER BY id LIMIT 100))`,
    vary: () => `/Events/GetEventsIntegration?FromEventId=${randomId()}&PageSize=100`,
  },
  {
    name: 'GetEventsIntegration near the newest (a poller keeping up), PageSize=10000',
    url: `/Events/GetEventsIntegration?FromEventId=${top - 5000}&PageSize=10000`,
    target: 250,
    floor: feedAt(() => top - 5000, 10_000),
    large: true,
  },
  {
    // Pollers at different points of the newest records: a new question each request.
    name: 'vary: GetEventsIntegration from a random id among the newest 7,000 (pollers keeping up), PageSize=10000',
    url: `/Events/GetEventsIntegration?FromEventId=${top - 6000}&PageSize=10000`,
    target: 250,
    floor: feedAt(() => top - 5000 - Math.floor(Math.random() * 2000), 10_000),
    large: true,
    vary: () => `/Events/GetEventsIntegration?FromEventId=${top - 5000 - Math.floor(Math.random() * 2000)}&PageSize=10000`,
  },
]
/** BENCH_MATCH: only the list cases and sweep shapes whose name matches it (a regular expression, any case). */
const MATCH = process.env.BENCH_MATCH ? new RegExp(process.env.BENCH_MATCH, 'i') : null
const cases = allCases.filter((c) => !MATCH || MATCH.test(c.name))

// ---- the sweep's shapes ----
const spec = loadSpec()
const sortFields = operations(spec).get('getEvents')!.sortFields
const sortByDoc = String(spec.components.parameters.EventsSortBy.description)
const hostKey = (db.prepare('SELECT asset_key FROM event_sources WHERE asset_name = ? AND asset_key IS NOT NULL LIMIT 1').pluck().get(host.asset_name) as string | undefined) ?? host.asset_name
const deviceId = (db.prepare('SELECT peripheral_asset_id FROM events WHERE id > ? AND peripheral_asset_id IS NOT NULL LIMIT 1').pluck().get(mid) as string | undefined) ?? 'VID_0781'
const device = /VID_[0-9A-F]{4}&PID_[0-9A-F]{4}/i.exec(deviceId)?.[0] ?? deviceId
interface SweepShape {
  name: string
  q: Record<string, string>
  /** The sort field, when the shape is a sort. */
  sort?: string
  /** The shape's vary twin: a new question each request (a random page, term or day). */
  vary: () => Record<string, string>
}
// The vary twins' terms: real ones from the data, as the list cases' (hosts, sites, vendors,
// devices), the hosts' keys, and the words of the kinds' descriptions.
const hostKeys = (db.prepare(`SELECT asset_key FROM event_sources WHERE asset_key IS NOT NULL ORDER BY n DESC LIMIT 2000 OFFSET 5000`).pluck().all() as string[]).filter(Boolean)
const descriptionWords = [...new Set((db.prepare('SELECT DISTINCT description FROM event_kinds').pluck().all() as string[]).flatMap((d) => d.toLowerCase().match(/[a-z]{5,}/g) ?? []))].slice(0, 50)
/** A filter shape: its one question, and a random term (text filters) for its vary twins. */
const filterShape = (name: string, q: Record<string, string>, term: () => Record<string, string> = () => q) => ({ name, q, term })
const filterShapes = [
  filterShape('Severity=Warning', { Severity: 'Warning' }),
  filterShape('MinimumSeverity=Error', { MinimumSeverity: 'Error' }),
  filterShape('Category=Network', { Category: 'Network' }),
  filterShape('PeripheralIcon=3', { PeripheralIcon: '3' }),
  filterShape(`Source=${host.asset_name}`, { Source: host.asset_name }, () => ({ Source: pick(hosts) })),
  filterShape('Description=disconnected', { Description: 'disconnected' }, () => ({ Description: pick(descriptionWords) })),
  filterShape('Details=SanDisk', { Details: 'SanDisk' }, () => ({ Details: pick(vendors) })),
  filterShape('AssetKey=<a host uuid>', { AssetKey: hostKey }, () => ({ AssetKey: pick(hostKeys) })),
  filterShape(`AssetName=${site}`, { AssetName: site }, () => ({ AssetName: pick(sites) })),
  filterShape(`PeripheralAssetId=${device}`, { PeripheralAssetId: device }, () => ({ PeripheralAssetId: pick(devices) })),
  filterShape('GlobalSearch=SanDisk', { GlobalSearch: 'SanDisk' }, () => ({ GlobalSearch: pick(vendors) })),
]
const epochDay = () => {
  const d = randomDay()
  return { FromCreationTimeEpoch: String(Date.parse(d.FromDate)), ToCreationTimeEpoch: String(Date.parse(d.ToDate)) }
}
const randomIdRange = () => {
  const from = 1 + Math.floor(Math.random() * Math.max(1, top - 100_000))
  return { FromEventId: String(from), ToEventId: String(from + 100_000) }
}
// Vary twins: a sort with a random page of the first 1,000; a filter alone with a random
// page of the first 20 (and a random term); a filter with a random 24 hours; a range at random.
const sweepShapes: SweepShape[] = (
  SWEEP
    ? ([
        ...sortFields.map((f): SweepShape => ({ name: `SortBy=${f}_desc`, q: { SortBy: `${f}_desc` }, sort: f, vary: () => ({ SortBy: `${f}_desc`, PageNumber: randomPage(1000) }) })),
        ...filterShapes.map((s): SweepShape => ({ name: s.name, q: s.q, vary: () => ({ ...s.term(), PageNumber: randomPage(20) }) })),
        ...filterShapes.map((s): SweepShape => ({ name: `${s.name} + a day`, q: { ...s.q, ...oneDay }, vary: () => ({ ...s.term(), ...randomDay() }) })),
        { name: 'Date=<a day>', q: { Date: day(10).slice(0, 10) }, vary: () => ({ Date: day(1 + Math.floor(Math.random() * 28)).slice(0, 10) }) },
        { name: 'FromDate/ToDate (a day)', q: oneDay, vary: randomDay },
        { name: 'FromEventId/ToEventId (100,000 ids)', q: { FromEventId: String(mid), ToEventId: String(mid + 100_000) }, vary: randomIdRange },
        { name: 'FromCreationTimeEpoch/ToCreationTimeEpoch (a day)', q: { FromCreationTimeEpoch: String(Date.parse(day(10))), ToCreationTimeEpoch: String(Date.parse(day(9))) }, vary: epochDay },
      ] as SweepShape[])
    : []
).filter((s) => !MATCH || MATCH.test(s.name))
/** The repository call a sweep question makes (its page included), rows as arrays. */
const sweepCall = (q: Record<string, string>) => () => {
  const sortBy = q.SortBy ?? 'eventID_desc'
  return repo.events.pageRows(eventFilter(q), { field: sortBy.replace(/_(asc|desc)$/, ''), direction: sortBy.endsWith('asc') ? 'asc' : 'desc' }, 100, 100 * (Number(q.PageNumber ?? 1) - 1))
}
/** Whether the server refuses the shape (a free-text sort of more than SORT_ROWS_MAX matches): its floor would be that sort. */
const refused = (s: SweepShape) => !!s.sort && EVENT_ROW_SORTS.includes(s.sort) && (repo.events.count(eventFilter(s.q)) as number) > SORT_ROWS_MAX

/** Median and p99 of one in-process call, over about `spanMs` (at least 30 runs). */
function floor(fn: () => unknown, spanMs = 2000): { p50: number; p99: number } {
  for (let i = 0; i < 3; i++) fn()
  const times: number[] = []
  const until = performance.now() + spanMs
  while (times.length < 30 || (performance.now() < until && times.length < 5000)) {
    const t = performance.now()
    fn()
    times.push(performance.now() - t)
  }
  return { p50: pct(times, 0.5), p99: pct(times, 0.99) }
}
/**
 * The newest EXPORT_ROWS events in one page (PageSize=1000000), streamed: as a console's
 * list and as the SOAR integration's incident fetch with its largest limit (date_asc from
 * an id: the feed's page), each on a fresh server process (its peak RSS is the page's),
 * while one connection reads small pages.
 */
async function largePageCase() {
  const from = Math.max(1, top - EXPORT_ROWS + 1)
  rows.push('', ...LARGE_PAGE_HEADER)
  for (const [name, query] of [
    ['GetEvents, newest first', `PageSize=1000000&FromEventId=${from}`],
    ['GetEvents, the SOAR incident fetch', `pageSize=1000000&pageNumber=1&sortBy=date_asc&FromEventId=${from}`],
  ]) {
    const s = await start(baseEnv, path.join(dataDir, 'server-page.log'))
    const a = await login()
    await integrityChecked(base, a)
    // The first query loads the index's counts into memory (once per server start).
    await (await fetch(`${base}/Events/GetEvents?PageSize=1`, { headers: a })).arrayBuffer()
    const r = await largePage(`${base}/Events/GetEvents?${query}`, `${base}/Events/GetEvents?PageSize=20&MinimumSeverity=Warning`, a, s.pid!, '"eventID":')
    rows.push(largePageRow(`${name} (${query.replace(/FromEventId=\d+/, 'FromEventId=<newest - ' + EXPORT_ROWS + '>')})`, r))
    if (r.rows !== Math.min(EXPORT_ROWS, top - from + 1)) notes.push(`${name}: ${r.rows} events in the page`)
    await stop(s)
  }
}
// ---------------------------------------------------------------------------------------
// CSV export of EXPORT_ROWS events, on a fresh server process (its peak RSS is the export's)

/** The export's request: the newest EXPORT_ROWS events, in the list's default order. */
const exportQuery = { FromEventId: String(Math.max(1, top - EXPORT_ROWS + 1)), ToEventId: String(top) }

/**
 * The export's floor, in process (this process, before it is pinned): the rows read and
 * written as CSV as the service does it (lib/events/service.ts), without HTTP. Its
 * seconds and bytes.
 */
async function exportFloor(): Promise<{ seconds: number; bytes: number }> {
  const columns = exportColumns(spec.components.schemas).events
  const order = sort(operations(spec).get('getEvents')!, undefined)
  const t0 = performance.now()
  let bytes = 0
  // Text is encoded as the socket would (a string's UTF-8 length is that work).
  for await (const piece of csvFile(columns, eventCells, repo.events.rawChunks(eventFilter(exportQuery), order, exportLimits.csv)))
    bytes += typeof piece === 'string' ? Buffer.byteLength(piece) : (piece as Buffer).length
  return { seconds: (performance.now() - t0) / 1000, bytes }
}

/** ExportGetEvents of the newest EXPORT_ROWS events on a fresh server: rows, first byte, wall time, rows/s, peak RSS, beside the floor. */
async function exportCase(floor: { seconds: number; bytes: number }) {
  const s = await start(baseEnv, path.join(dataDir, 'server-export.log'))
  const a = await login()
  await integrityChecked(base, a)
  await (await fetch(`${base}/Events/GetEvents?PageSize=1`, { headers: a })).arrayBuffer()
  const before = memory(s.pid!)
  const cpu0 = cpuSeconds(s.pid!)
  let peakRss = before?.rss ?? 0
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, memory(s.pid!)?.rss ?? 0)
  }, 10)
  const t0 = performance.now()
  const res = await fetch(`${base}/Events/ExportGetEvents`, {
    method: 'POST',
    headers: { ...a, 'content-type': 'application/json' },
    body: JSON.stringify({ FromEventId: Number(exportQuery.FromEventId), ToEventId: top }),
  })
  const headersMs = performance.now() - t0
  const { bytes, lines, firstAt } = await readLines(res.body)
  const wall = (performance.now() - t0) / 1000
  clearInterval(sampler)
  const after = memory(s.pid!)
  // The server's CPU time for the export: on a shared machine its wall time also holds the waits for the core.
  const cpu = cpuSeconds(s.pid!) - cpu0
  await stop(s)
  const peakMb = Math.max(peakRss, after?.hwm ?? 0) / 1024
  const rate = (lines - 1) / wall
  const floorRate = (lines - 1) / floor.seconds
  rows.push(
    '',
    '| CSV export | rows | first byte | wall time | rows/s | server CPU time | server peak RSS (VmHWM) | in-process floor (rows read and written as CSV) | targets |',
    '|---|---|---|---|---|---|---|---|---|',
  )
  rows.push(
    `| ExportGetEvents, the newest ${EXPORT_ROWS} events | ${lines - 1} (${(bytes / 1048576).toFixed(0)} MiB) | ${ms(headersMs)} ms headers, ${ms(firstAt - t0)} ms first chunk | ${wall.toFixed(2)} s | ${rate.toFixed(0)} | ${cpu.toFixed(2)} s (${((lines - 1) / cpu).toFixed(0)} rows per CPU second) | ${peakMb.toFixed(0)} MB (${((before?.rss ?? 0) / 1024).toFixed(0)} MB before) | ${floor.seconds.toFixed(2)} s, ${floorRate.toFixed(0)} rows/s | >= 150,000 rows/s: ${rate >= 150_000 ? 'met' : 'MISSED'}; < 250 MB: ${peakMb < 250 ? 'met' : 'MISSED'} |`,
  )
  if (res.status !== 200) notes.push(`export answered ${res.status}`)
  if (res.headers.get('x-records-filtered') !== String(lines - 1))
    notes.push(`export: x-records-filtered ${res.headers.get('x-records-filtered')} for ${lines - 1} data lines (cells with line breaks would explain a difference)`)
}

// ---------------------------------------------------------------------------------------
// --backend postgres: both backends side by side

/** The sample events the write cases record, as the gateway gives them. */
function writeInputs(): EventInput[] {
  const sample = db
    .prepare('SELECT event_code, severity, category, entity_id, description, details, hashtags, peripheral_icon, asset_key, asset_name, peripheral_asset_id FROM events WHERE id > ? LIMIT 1000')
    .raw()
    .all(mid) as unknown[][]
  return sample.map(
    ([code, severity, category, entityId, description, details, hashtags, icon, assetKey, assetName, device]) =>
      ({ code, severity, category, entityId, description, details, hashtags, peripheralIcon: icon, assetKey, assetName, peripheralAssetId: device }) as EventInput,
  )
}

async function compareBackends() {
  const compareNotes: string[] = []
  const data = await comparisonData(db, benchPgUrl(`prime_bench_events_${EVENTS}`), PASSWORD, (l) => console.error(l))
  if (data.loaded) compareNotes.push(data.loaded)
  const inputs = writeInputs()
  db.close()
  if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])
  const servers = await startBackends(data, baseEnv, PORT)
  const url = (q: Record<string, string>) => `/Events/GetEvents?${qs(q)}`
  const ratio2 = { ratio: 2 }
  const under100 = { p99Ms: 100 }
  const cases: SideCase[] = [
    { name: 'default page (GetEvents, newest first)', path: url({}), bound: ratio2, idKey: 'eventID' },
    { name: 'MinimumSeverity=Warning + a day', path: url(bQuery), bound: ratio2, idKey: 'eventID' },
    { name: 'vary: MinimumSeverity=Warning + a random day', path: () => url({ MinimumSeverity: 'Warning', ...randomDay() }), bound: ratio2 },
    { name: 'vary: feed from a random id (GetEventsIntegration, PageSize=100)', path: () => `/Events/GetEventsIntegration?FromEventId=${randomId()}&PageSize=100`, bound: ratio2 },
    { name: `host filter: Source contains a host ("${host.asset_name}")`, path: url({ Source: host.asset_name }), bound: ratio2, idKey: 'eventID' },
    { name: `vary: host filter, Source contains one of ${hosts.length} hosts`, path: () => url({ Source: pick(hosts) }), bound: ratio2 },
    { name: 'text: Details contains a vendor ("SanDisk")', path: url({ Details: 'SanDisk' }), bound: under100, idKey: 'eventID' },
    { name: `vary text: Details a vendor (one of ${vendors.length}) + a random day`, path: () => url({ Details: pick(vendors), ...randomDay() }), bound: under100 },
    { name: `vary text: PeripheralAssetId a device (one of ${devices.length}) + a random day`, path: () => url({ PeripheralAssetId: pick(devices), ...randomDay() }), bound: under100 },
    { name: `text: Source contains a site ("${site}")`, path: url({ Source: site }), bound: under100, idKey: 'eventID' },
    { name: 'GlobalSearch a vendor ("SanDisk")', path: url({ GlobalSearch: 'SanDisk' }), bound: under100, idKey: 'eventID' },
    { name: 'GlobalSearch a vendor ("SanDisk") + a day', path: url({ GlobalSearch: 'SanDisk', ...oneDay }), bound: under100, idKey: 'eventID' },
    { name: `vary: GlobalSearch a vendor (one of ${vendors.length}), a random page of the first 20`, path: () => url({ GlobalSearch: pick(vendors), PageNumber: randomPage(20) }), bound: under100 },
    { name: `vary: GlobalSearch a vendor (one of ${vendors.length}) + a random day`, path: () => url({ GlobalSearch: pick(vendors), ...randomDay() }), bound: under100 },
  ].filter((c) => !MATCH || MATCH.test(c.name))
  const listRows = await sideBySide(servers, cases, { rounds: ROUNDS, seconds: DURATION, connections: CONNECTIONS, notes: compareNotes })
  for (const s of servers) await stop(s.child)

  // The events' write as the servers make it: the recorder with its hooks (on SQLite the risk
  // notifications and the agents' latest texts; on PostgreSQL the texts, the notifications
  // being raised behind the writes by the risk feed, measured after), CONCURRENT check-ins of
  // 3 events in one unit of work.
  const CONCURRENT = 32
  const seconds = Math.max(3, Math.min(DURATION, 5))
  const slice = (n: number) => Array.from({ length: 3 }, (_, i) => inputs[(n * 3 + i) % inputs.length])
  const lite = openDatabase(path.join(data.liteDir, 'prime.sqlite'))
  const liteEvents = createRepos(lite, 0).events
  const liteTx = lite.transaction((n: number) => liteEvents.recordMany(Array.from({ length: CONCURRENT }, (_, i) => ({ createdMs: Date.now(), events: slice(n * CONCURRENT + i) }))))
  const pgdb = connectPostgres(data.pgUrl, { max: 4 })
  const riskFeed = pgRiskFeed(pgdb, pgRiskRaiser(pgdb))
  // What an earlier run left unraised is not this run's.
  await riskFeed.catchUp()
  const pgEvents = pgEventParts(pgdb, { agentTexts: pgLatestEventTexts(pgdb) }).events
  const pgBatch = (n: number) => pgdb.uow.run(() => pgEvents.recordMany(Array.from({ length: CONCURRENT }, (_, i) => ({ createdMs: Date.now(), events: slice(n * CONCURRENT + i) }))))
  const writeRates: number[][] = [[], []]
  await pgBatch(0) // today's partition, the connections
  for (let round = 0; round < ROUNDS; round++) {
    for (const i of round % 2 ? [1, 0] : [0, 1]) {
      let n = 0
      const t0 = performance.now()
      while (performance.now() - t0 < seconds * 1000) {
        if (i === 0) liteTx(n)
        else await pgBatch(n)
        n++
      }
      writeRates[i].push((n * CONCURRENT * 3) / ((performance.now() - t0) / 1000))
    }
  }
  // Four writers at once on PostgreSQL (a server's concurrent check-ins each in its own unit): the feed lock serializes them.
  const parallel: number[] = []
  for (let round = 0; round < ROUNDS; round++) {
    let n = 0
    const t0 = performance.now()
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (performance.now() - t0 < seconds * 1000) await pgBatch(n++)
      }),
    )
    parallel.push((n * CONCURRENT * 3) / ((performance.now() - t0) / 1000))
  }
  // The risk feed raising the notifications of everything written above (the server's loop does it every 100 ms, one node at a time).
  const unraised = (await riskFeed.waiting()) ?? { upTo: 0, top: 0 }
  const feedT0 = performance.now()
  const feedSlices = await riskFeed.catchUp()
  const feedSecs = (performance.now() - feedT0) / 1000
  const feedRate = (unraised.top - unraised.upTo) / feedSecs
  lite.close()
  await pgdb.close()
  await data.release()
  if (!given) fs.rmSync(dataDir, { recursive: true, force: true })

  console.log(backendsRunLine(`${total} events (${top} the newest id)`, { connections: CONNECTIONS, seconds: DURATION, rounds: ROUNDS, loadAtStart }))
  for (const r of listRows) console.log(r)
  console.log('')
  for (const r of RATE_HEADER) console.log(r)
  console.log(
    rateRow(`event writes: ${CONCURRENT} check-ins x 3 events a unit of work, the server's recorder and hooks, one writer (${seconds} s per round)`, writeRates, { rate: 20_000 }, 'events/s'),
  )
  console.log(
    `| the same on PostgreSQL, 4 writers at once | | ${(parallel.sort((a, b) => a - b)[Math.floor(parallel.length / 2)] ?? 0).toFixed(0)} events/s | | ${parallel.map((x) => x.toFixed(0)).join(', ')} | >= 20,000/s | ${(parallel.sort((a, b) => a - b)[Math.floor(parallel.length / 2)] ?? 0) >= 20_000 ? 'within' : '**OVER BOUND**'} |`,
  )
  console.log(
    `| raising their risk notifications on PostgreSQL behind the writes (the risk feed: ${unraised.top - unraised.upTo} events in ${feedSlices} slices) | | ${feedRate.toFixed(0)} events/s | | ${feedRate.toFixed(0)} | keeps up with the writes above | ${feedRate >= 20_000 ? 'within' : '**OVER BOUND**'} |`,
  )
  if (compareNotes.length) {
    console.log('\nNotes:')
    for (const n of compareNotes) console.log(`- ${n}`)
  }
}

if (comparesBackends()) {
  await compareBackends()
  process.exit(0)
}

/** A part run alone (BENCH_LARGE_PAGE=only, BENCH_EXPORT=only): its rows and notes, then exit. */
function finishAlone(): never {
  if (!given) fs.rmSync(dataDir, { recursive: true, force: true })
  console.log(
    `\n${total} events (${top} the newest id); load average ${loadAtStart} at the start, ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} at the end (${os.cpus().length} CPUs).`,
  )
  for (const r of rows) console.log(r)
  for (const n of notes) console.log(`- ${n}`)
  process.exit(0)
}

if (process.env.BENCH_LARGE_PAGE === 'only') {
  await largePageCase()
  db.close()
  finishAlone()
}

if (process.env.BENCH_EXPORT === 'only') {
  const f = await exportFloor()
  db.close()
  if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])
  await exportCase(f)
  finishAlone()
}

if (process.env.BENCH_WRITE === 'only' || W2_ONLY) {
  db.close()
  await writePath()
  if (!given) fs.rmSync(dataDir, { recursive: true, force: true })
  console.log(
    `\n${total} events; load average ${loadAtStart} at the start, ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} at the end (${os.cpus().length} CPUs).`,
  )
  console.log('\n| write path | figure | in-process floor | target |\n|---|---|---|---|')
  for (const w of writes) console.log(w)
  process.exit(0)
}

console.error('In-process floors ...')
// As the server is by the time its text cases run: the texts, the sources' names and the
// peripheral ids' device parts read (a text filter's first request starts reading them in
// the background), so that a text floor takes the way the server's requests take.
await textsReadAsServer(repo, site)
const floors = cases.map((c) => floor(c.floor))
{
  // The poller's page written as the answer (lib/events/views.ts), in process: what the
  // API adds to the floor for the rows alone.
  const page = feedAt(() => top - 5000, 10_000)()
  const w = floor(() => eventsAnswer(page))
  notes.push(`writing the poller's page of ${page.rows.length} events as JSON (eventsAnswer), in process: p50 ${ms(w.p50)} ms, p99 ${ms(w.p99)} ms`)
}
console.error(`Sweep floors (${sweepShapes.length} shapes) ...`)
const sweepFloors = sweepShapes.map((s) => (refused(s) ? null : floor(list(s.q, s.q.SortBy ?? 'eventID_desc'), 500)))
// The vary twins' floors: each call a new question (a free-text sort is refused on every page).
const sweepVaryFloors = sweepShapes.map((s) => (refused(s) ? null : floor(() => sweepCall(s.vary())(), 500)))
console.error('Plain SQL without the index (once each) ...')
const plains = cases.map((c) => {
  if (!c.plain) return null
  const t = performance.now()
  db.prepare(c.plain).get()
  return performance.now() - t
})

console.error('Export floor ...')
const exportFloorFigures = await exportFloor()

// From here on the load generator (this process) keeps to CPU 0 and the server to CPU 1.
if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])
db.close()

// ---------------------------------------------------------------------------------------
// The lists over HTTP

async function login(): Promise<Record<string, string>> {
  const res = await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }) })
  const { token } = (await res.json()) as { token: string }
  return { authorization: `Bearer ${token}` }
}
/** A GET on a connection of its own. */
function getFresh(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers, agent: false }, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (chunk) => (body += chunk))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      })
      .on('error', reject)
  })
}
async function load(opts: autocannon.Options) {
  const r = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts })
  const codes = (r as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {}
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors, codes }
}

// The database file in the file cache, as a server's that has run a while (BENCH_READ_THROUGH=0
// leaves it as it is): a machine that reclaims cold pages on its own would otherwise put disk
// reads into the random days' figures. Its residency before, after and at the lists' end says.
{
  const before = residency(dbFile)
  if (process.env.BENCH_READ_THROUGH !== '0') {
    const s = readThrough(dbFile)
    notes.push(`the database file in the file cache before the lists: ${before ?? 'unknown (no fincore)'}; read through once (${s.toFixed(1)} s): ${residency(dbFile) ?? 'unknown'}`)
  } else notes.push(`the database file in the file cache before the lists: ${before ?? 'unknown (no fincore)'} (not read through: BENCH_READ_THROUGH=0)`)
}
const server = await start(baseEnv, path.join(dataDir, 'server.log'))
const auth = await login()
notes.push(`the server's database integrity check after start took ${(await integrityChecked(base, auth)).toFixed(0)} s; the measurements start after it`)
{
  // The first query loads the index's counts into memory (once per server start).
  const t0 = performance.now()
  await (await fetch(`${base}/Events/GetEvents?PageSize=1`, { headers: auth })).arrayBuffer()
  notes.push(`the first query after start (loading the index's counts into memory) took ${((performance.now() - t0) / 1000).toFixed(1)} s`)
}
rows.push(
  `| case | matches | first request ms | req/s | p50 / p99 ms | p99 of each round, ms | ms per request | in-process p50 / p99 ms | per request / in-process | plain SQL, no index, once | target p99 (median round) | loop delay p99 / max ms |`,
)
rows.push('|---|---|---|---|---|---|---|---|---|---|---|---|')
interface Measured {
  c: Case
  i: number
  firstMs: number
  body: { recordsFiltered?: number; data?: unknown[] }
  rounds: (Awaited<ReturnType<typeof load>> & { loop: Promise<LoopDelay | null> })[]
}
const measured: Measured[] = []
for (const [i, c] of cases.entries()) {
  // On its own connection; its time as the server logged it (the client's clock also
  // counts whatever this process was doing meanwhile).
  const logFile = path.join(dataDir, 'server.log')
  const logAt = fs.statSync(logFile).size
  const t0 = performance.now()
  const first = await getFresh(base + c.url, auth)
  // Request lines reach the log within a second (lib/platform/instance.ts).
  let logged: { ms?: unknown } | undefined
  for (let waited = 0; !logged && waited < 2000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    logged = fs
      .readFileSync(logFile, 'utf8')
      .slice(logAt)
      .split('\n')
      .map((l) => {
        try {
          return JSON.parse(l)
        } catch {
          return null
        }
      })
      .find((l) => l?.url === `/prime/webui${c.url}`)
  }
  const firstMs = typeof logged?.ms === 'number' ? logged.ms : performance.now() - t0
  const body = JSON.parse(first.body || 'null') as { recordsFiltered?: number; data?: unknown[]; detail?: string } | null
  if (first.status !== 200 || !body?.data) {
    rows.push(`| ${c.name} | ${first.status} ${body?.detail ?? ''} | | | | | | | | | | |`)
    continue
  }
  measured.push({ c, i, firstMs, body, rounds: [] })
}
// Rounds of every case in turn: whatever else the machine does at one moment (it is
// shared) falls on one round of a case, and the median round is the figure.
const requestsOf = (c: Case) => (c.vary ? [{ setupRequest: (req: any) => ({ ...req, path: `/prime/webui${c.vary!()}` }) }] : undefined)
const loadCase = (c: Case, duration = DURATION) =>
  c.large
    ? bodiesDiscardedLoad({ url: base + c.url, headers: auth, path: c.vary && (() => `/prime/webui${c.vary!()}`), connections: CONNECTIONS, seconds: duration })
    : load({ url: base + c.url, headers: auth, duration, requests: requestsOf(c) })
for (const m of measured) await loadCase(m.c, 2) // warm-up
for (let round = 0; round < ROUNDS; round++) {
  for (const m of measured) {
    const delay = loopDelay(server, path.join(dataDir, 'server.log'))
    delay.begin()
    const r = await loadCase(m.c)
    if (r.non2xx || r.errors) notes.push(`${m.c.name}: ${r.non2xx} non-2xx answers, ${r.errors} errors (${JSON.stringify(r.codes)})`)
    m.rounds.push({ ...r, loop: delay.end() })
  }
}
for (const { c, i, firstMs, body, rounds } of measured) {
  const r = medianRound(rounds)
  const f = floors[i]
  const perRequest = 1000 / r.rps
  const plain = plains[i]
  const target = c.target ? `< ${c.target} ms: ${r.p99 < c.target ? 'met' : 'MISSED'}` : ''
  rows.push(
    `| ${c.name} | ${body.recordsFiltered} (page of ${body.data!.length}) | ${ms(firstMs)} | ${r.rps.toFixed(0)} | ${r.p50} / ${r.p99} | ${rounds.map((x) => x.p99).join(', ')} | ${ms(perRequest)} | ${ms(f.p50)} / ${ms(f.p99)} | ${(perRequest / f.p50).toFixed(1)} | ${plain === null ? '' : `${ms(plain)} ms`} | ${target} | ${loopDelayCell(await r.loop)} |`,
  )
}

// ---------------------------------------------------------------------------------------
// The sweep: every sort field alone, every documented filter alone and with a day, one
// round each. A 400 is served fast only when the contract documents it (EventsSortBy names
// the field); its p99 is then the refusal's.

const sweepRows: string[] = []
if (sweepShapes.length) {
  sweepRows.push(
    `| shape (GetEvents, PageSize=100) | matches | first request ms (client) | repeated: req/s, p50 / p99 ms | vary: req/s, p50 / p99 ms | vary: ms per request | in-process p50 / p99 ms, repeated | in-process p50 / p99 ms, vary | vary per request / in-process | vary p99 < 100 ms |`,
    '|---|---|---|---|---|---|---|---|---|---|',
  )
  for (const [i, shape] of sweepShapes.entries()) {
    const url = `/Events/GetEvents?${qs(shape.q)}`
    const t0 = performance.now()
    const first = await getFresh(base + url, auth)
    const firstMs = performance.now() - t0
    let body: { recordsFiltered?: number; data?: unknown[]; errors?: { name?: string; reason?: string }[] } | null = null
    try {
      body = JSON.parse(first.body)
    } catch {
      body = null
    }
    const r = await load({ url: base + url, headers: auth, duration: SWEEP_SECONDS })
    // The vary twin: each request a new question, so no answer kept from an earlier ask serves it.
    const v = await load({
      url: base + url,
      headers: auth,
      duration: SWEEP_SECONDS,
      requests: [{ setupRequest: (req: any) => ({ ...req, path: `/prime/webui/Events/GetEvents?${qs(shape.vary())}` }) }],
    })
    const f = sweepFloors[i]
    const fv = sweepVaryFloors[i]
    const perRequest = 1000 / v.rps
    const documented = first.status === 400 && body?.errors?.[0]?.name === 'SortBy' && !!shape.sort && sortByDoc.includes('`' + shape.sort + '`')
    const badVary = v.non2xx && !documented ? ` (${v.non2xx} non-2xx: ${JSON.stringify(v.codes)})` : ''
    const verdict = first.status === 200 ? (v.p99 < 100 && !badVary ? 'met' : `MISSED${badVary}`) : documented ? '400 (documented)' : `MISSED (${first.status})`
    const matches = first.status === 200 ? `${body?.recordsFiltered}` : `${first.status}: ${(body?.errors?.[0]?.reason ?? '').slice(0, 60)}`
    sweepRows.push(
      `| ${shape.name} | ${matches} | ${ms(firstMs)} | ${r.rps.toFixed(0)}, ${r.p50} / ${r.p99} | ${v.rps.toFixed(0)}, ${v.p50} / ${v.p99} | ${ms(perRequest)} | ${f ? `${ms(f.p50)} / ${ms(f.p99)}` : 'refused'} | ${fv ? `${ms(fv.p50)} / ${ms(fv.p99)}` : 'refused'} | ${fv ? (perRequest / fv.p50).toFixed(1) : ''} | ${verdict} |`,
    )
    console.error(`  sweep ${i + 1}/${sweepShapes.length}: ${shape.name}: p99 ${r.p99} ms repeated, ${v.p99} ms vary, ${verdict}`)
  }
}
notes.push(`the database file in the file cache at the lists' end: ${residency(dbFile) ?? 'unknown (no fincore)'}`)
{
  const pageout = idlePageout()
  if (pageout) notes.push(`this host reclaims idle memory: ${pageout}; the random days read what it dropped from the disk again (docs/operating.md, "Memory")`)
}
await stop(server)

// BENCH_LISTS=only: the lists (and the sweep) alone.
if (process.env.BENCH_LISTS !== 'only') {
  await exportCase(exportFloorFigures)
  await largePageCase()
  await writePath()
}

/**
 * Writing events, last: copying the database and writing to it leaves the disk and the page
 * cache busy for a while, which must not overlap the measurements above. Into a copy of the
 * database: a given dir stays as it was (each run would otherwise add a few hundred thousand
 * events to it, and the next run would measure a larger data set). Each case has the floor
 * beside it: record() at 100 events per transaction, in the same run.
 */
async function writePath() {
  console.error('Write path ...')
  const db = openDatabase(dbFile)
  db.pragma('wal_checkpoint(TRUNCATE)')
  const writeCopy = path.join(os.tmpdir(), `prime-bench-write-${process.pid}.sqlite`)
  fs.copyFileSync(dbFile, writeCopy)
  const wdb = openDatabase(writeCopy)
  // A SIEM subscribed to every event, as a production server has one: each event written
  // gets its delivery queued behind (measured after the writes), which the seeded data alone would not.
  if (!wdb.prepare('SELECT 1 FROM alarm_destinations WHERE enabled = 1 AND feed_events = 1 AND min_severity = 7').get()) {
    wdb
      .prepare(`INSERT INTO alarm_destinations (id, name, name_key, type, min_severity, settings, created_ms, updated_ms) VALUES ('bench-siem', 'Bench SIEM', 'bench siem', 'webhook', 7, ?, ?, ?)`)
      .run(JSON.stringify({ url: 'http://127.0.0.1:9/' }), Date.now(), Date.now())
  }
  // WAL checkpoints as the server makes them (lib/app.ts, the default settings): in a thread,
  // not inside whichever commit crosses SQLite's own threshold.
  const checkpoints = checkpointerLoop({
    db: wdb,
    file: writeCopy,
    settings: { thread: true, intervalMs: 500, restartBytes: 16 * 1048576 },
    log: { info: () => {}, warn: (d, m) => console.error(m, d), error: (d, m) => console.error(m, d) },
  })
  checkpoints.start()
  const wrepo = eventQueriesRepo(wdb)
  wrepo.holdIndexing(true)
  const events = eventsRepo(wdb)
  const sample = db
    .prepare('SELECT event_code, severity, category, entity_id, description, details, hashtags, peripheral_icon, asset_key, asset_name, peripheral_asset_id FROM events WHERE id > ? LIMIT 1000')
    .raw()
    .all(mid) as unknown[][]
  const inputs: EventInput[] = sample.map(
    ([code, severity, category, entityId, description, details, hashtags, icon, assetKey, assetName, device]) =>
      ({
        code,
        severity,
        category,
        entityId,
        description,
        details,
        hashtags,
        peripheralIcon: icon,
        assetKey,
        assetName,
        peripheralAssetId: device,
      }) as EventInput,
  )
  const riskCodes = new Set(wdb.prepare('SELECT event_code FROM risk_notification_kinds').pluck().all() as string[])
  const risky = `${Math.round((100 * inputs.filter((e) => riskCodes.has(e.code)).length) / inputs.length)}% of them risky`
  /** `perTx` sample events at a time, taken in turn (whole batches only). */
  const slice = (n: number, perTx: number) => {
    const at = (n * perTx) % inputs.length
    return at + perTx <= inputs.length ? inputs.slice(at, at + perTx) : [...inputs.slice(at), ...inputs.slice(0, at + perTx - inputs.length)]
  }
  const newestId = () => wdb.prepare('SELECT coalesce(max(id), 0) FROM events').pluck().get() as number
  let floorRate = 0
  for (const perTx of W2_ONLY ? [100] : [10, 100]) {
    const tx = wdb.transaction((batch: EventInput[]) => events.record(Date.now(), batch))
    const t0 = performance.now()
    let n = 0
    // The WAL's size every 50 transactions, and the longest transaction (a commit that
    // restarts the WAL copies what the checkpointing thread left, on the event loop).
    let longest = 0
    const walMb: number[] = []
    while (performance.now() - t0 < 5000) {
      const t1 = performance.now()
      tx(slice(n++, perTx))
      longest = Math.max(longest, performance.now() - t1)
      if (n % 50 === 0) walMb.push(fs.existsSync(`${writeCopy}-wal`) ? fs.statSync(`${writeCopy}-wal`).size / 1048576 : 0)
    }
    const rate = (n * perTx) / ((performance.now() - t0) / 1000)
    const every = Math.max(1, Math.round(walMb.length / 10))
    writes.push(
      `| the WAL while record() writes ${perTx} per transaction (every 50 transactions; ${walMb.length * 50} in all) | largest ${Math.max(0, ...walMb).toFixed(1)} MB; ${walMb
        .filter((_, i) => i % every === 0)
        .map((x) => x.toFixed(0))
        .join(', ')} MB; longest transaction ${longest.toFixed(1)} ms | | |`,
    )
    if (perTx === 100) floorRate = rate
    writes.push(
      `| record(), ${perTx} events per transaction (synchronous = FULL; ${risky}) | ${rate.toFixed(0)} events/s | ${perTx === 100 ? '(the floor)' : ''} | ${perTx === 100 ? '>= 50,000/s: ' + (rate >= 50_000 ? 'met' : 'MISSED') : ''} |`,
    )
  }
  const floorText = `${floorRate.toFixed(0)} events/s`
  if (!W2_ONLY) {
    const t0 = performance.now()
    const n = wrepo.catchUp()
    const secs = (performance.now() - t0) / 1000
    writes.push(`| indexing them afterwards (db/event-engine/event-index.ts, off the write path) | ${(n / secs).toFixed(0)} events/s (${n} events) | | |`)
  }

  // A fleet in the copy: the agents that check in and then go quiet.
  const agentCount = Math.max(1000, Number(process.env.BENCH_AGENTS ?? Math.round((100_000 * EVENTS) / 5_000_000)))
  console.error(`  seeding ${agentCount} agents ...`)
  // The seed's bulk load takes the file for itself: the checkpointing thread's connection closed meanwhile.
  await checkpoints.stop()
  await seedFleet(wdb, { agents: agentCount })
  checkpoints.start()
  wdb.exec(`UPDATE agents SET connection_status = 'Connected' WHERE connection_status <> 'Connected'`)
  const repos = createRepos(wdb, 0)
  const uow = repos.uow
  const audit = auditTrail({ repo: asyncPort(repos.audit, uow), refusalWindowMs: 60_000, flushRefusal: async () => {} })
  const log = { warn: () => {}, error: (d: object, m: string) => console.error(m, d) }
  // The time the gateway's own batches spend writing their events (recordMany), apart from
  // the rest of a check-in (its agent and peripheral rows, audit record and commit).
  const recording = { ms: 0 }
  const timedEvents: typeof repos.events = {
    ...repos.events,
    recordMany(items) {
      const t = performance.now()
      try {
        return repos.events.recordMany(items)
      } finally {
        recording.ms += performance.now() - t
      }
    },
  }
  const gatewayOf = (grouped: boolean) =>
    agentGateway({
      store: asyncPort(repos.gateway, uow),
      events: asyncPort(timedEvents, uow),
      agentState: asyncPort(repos.agentState, uow),
      uow,
      checkIns: grouped ? { run: uow.runGrouped } : uow,
      batchCheckIns: grouped,
      audit,
      log,
      settings: {
        agents: { enrollmentSecret: 'pes_bench-enrollment-secret', checkInSeconds: 60, minCheckInSeconds: 0, enrollPerMinutePerAddress: 1e9, enrollPerMinute: 1e9, resultBytesPerDay: 1e9 },
        license: { accountName: 'Prime', accountId: null, seats: 1e9, expirationDate: null },
        rateLimitWindowMs: 60_000,
        agentRequests: 1e9,
      },
    })

  // (w1) A busy gateway: CONCURRENT check-ins at a time, each of an agent whose three
  // peripherals come and go (three events), through the gateway service and its ports.
  if (!W2_ONLY) {
    const CONCURRENT = 32
    type Agent = { id: number; uuid: string; host_identifier: string; local_ip_address: string | null; connection_status: 'Connected' | 'Disconnected'; state_digest: string | null }
    const agents = wdb.prepare('SELECT id, uuid, host_identifier, local_ip_address, connection_status, state_digest FROM agents ORDER BY id LIMIT ?').all(Math.min(agentCount, 4096)) as Agent[]
    const device = (vid: string, pid: string, serial: string) => ({
      deviceID: `USB\\VID_${vid}&PID_${pid}\\${serial}`,
      vid,
      pid,
      serialNumber: serial,
      description: 'USB Input Device',
      manufacturer: 'Bench',
      caption: 'USB Input Device',
      status: 'OK',
      classCode: '03',
      present: true,
    })
    const three = [device('046d', 'c077', 'B1'), device('046d', 'c31c', 'B2'), device('413c', '2113', 'B3')]
    const body = (a: Agent, present: boolean) => ({
      hostIdentifier: a.host_identifier,
      agentTime: new Date().toISOString(),
      osVersion: 'Windows 10 Pro 22H2 (10.0.19045)',
      serviceVersion: '4.2.1.118',
      operationalStatus: 'Free',
      isSystemLocked: false,
      localIpAddress: a.local_ip_address ?? '10.0.0.1',
      nics: [],
      loggedOnUsers: [],
      errors: [],
      peripherals: present ? three : [],
    })
    const ctx = () => systemContext({ sourceAddress: '127.0.0.1' })
    type CheckInBody = Parameters<ReturnType<typeof agentGateway>['checkIn']>[2]
    // Each agent has reported its three peripherals (the first check-in below): the measured
    // ones take them away and bring them back, as a busy gateway's agents do, rather than
    // meeting each one for the first time (the bench's few seconds cover under one round).
    const present = new Map<number, boolean>(agents.map((a) => [a.id, true]))
    const checkIns = async (gw: ReturnType<typeof gatewayOf>, seconds: number) => {
      let done = 0
      let round = 0
      const id0 = newestId()
      const t0 = performance.now()
      while (performance.now() - t0 < seconds * 1000) {
        for (let at = 0; at < agents.length && performance.now() - t0 < seconds * 1000; at += CONCURRENT) {
          const wave = agents.slice(at, at + CONCURRENT)
          // Each agent's three peripherals come, then go at its next check-in: three events each time.
          await Promise.all(
            wave.map((a) => {
              const now = !present.get(a.id)
              present.set(a.id, now)
              return gw.checkIn(ctx(), a, body(a, now) as unknown as CheckInBody)
            }),
          )
          done += wave.length
        }
        round++
      }
      return { secs: (performance.now() - t0) / 1000, checkIns: done, events: newestId() - id0, rounds: round }
    }
    // Each agent's first check-in reports what it is (its seeded peripherals go, the three come): not measured.
    const first = gatewayOf(false)
    for (const a of agents) await first.checkIn(ctx(), a, body(a, true) as unknown as CheckInBody)
    const seconds = Math.max(3, Math.min(DURATION, 5))
    for (const grouped of [false, true]) {
      recording.ms = 0
      const r = await checkIns(gatewayOf(grouped), seconds)
      const rate = r.events / r.secs
      const perCheckIn = (1000 * r.secs) / r.checkIns
      const eventsMs = recording.ms / r.checkIns
      // Whole check-ins: the events' target is judged on the events' own write in the batches
      // these form (recordMany below); this is the gateway's capacity, a fleet's check-ins a minute.
      writes.push(
        `| (w1) gateway-shaped: whole check-ins through the gateway service, ${CONCURRENT} at a time over ${agents.length} agents, ${(r.events / r.checkIns).toFixed(1)} events each; ${grouped ? 'group commit (PRIME_GROUP_COMMIT=true)' : 'a commit each (PRIME_GROUP_COMMIT=false)'} | ${rate.toFixed(0)} events/s (${(r.checkIns / r.secs).toFixed(0)} check-ins/s, ${perCheckIn.toFixed(2)} ms each, of which ${eventsMs.toFixed(3)} ms writing its events, ${((100 * eventsMs) / perCheckIn).toFixed(0)}%: the rest is its agent and peripheral rows, audit record and commit) | ${floorText} | reported: ${Math.round((60 * r.checkIns) / r.secs).toLocaleString('en-US')} changed check-ins a minute |`,
      )
    }
    // The recording alone, in the shape a group of check-ins forms.
    const tx = wdb.transaction((items: EventBatch[]) => events.recordMany(items))
    const t0 = performance.now()
    let n = 0
    while (performance.now() - t0 < seconds * 1000) {
      tx(Array.from({ length: CONCURRENT }, (_, i) => ({ createdMs: Date.now(), events: slice(n * CONCURRENT + i, 3), agentId: agents[(n * CONCURRENT + i) % agents.length].id })))
      n++
    }
    const rate = (n * CONCURRENT * 3) / ((performance.now() - t0) / 1000)
    writes.push(
      `| (w1) the events of a busy gateway's batches: ${CONCURRENT} check-ins × 3 events per transaction, recordMany (outbox, counters, notifications, the agents' texts) and its commit | ${rate.toFixed(0)} events/s (${(rate / floorRate).toFixed(2)} of the floor) | ${floorText} | >= 50,000/s: ${rate >= 50_000 ? 'met' : 'MISSED'} |`,
    )
  }

  // (w2) A mass disconnect: every agent goes quiet at once; the sweeper's own loop
  // (agentSweeperLoop) runs until none is left, its slices sized by the slice policy
  // (lib/platform/slices.ts) as in the server: once with nobody asking (long slices), once
  // with a request in flight all along (short slices: the server answers between them).
  for (const asking of [false, true]) {
    wdb.exec(`UPDATE agents SET connection_status = 'Connected', display_status = operational_status WHERE connection_status <> 'Connected'`)
    const connected = wdb.prepare(`SELECT count(*) FROM agents WHERE connection_status = 'Connected'`).pluck().get() as number
    const activity = requestActivity()
    if (asking) activity.begin()
    const deps = {
      store: asyncPort(repos.gateway, uow),
      events: asyncPort(repos.events, uow),
      agentState: asyncPort(repos.agentState, uow),
      uow,
      log,
      gateway: gatewayOf(false),
      // Quiet for a moment only: the loop's own clock finds every agent overdue.
      disconnectSeconds: 0,
      seats: 0,
      sliceMs: activity.sliceMs,
    }
    const id0 = newestId()
    const slices: SweepSlice[] = []
    // From the first slice's start to the last one's end.
    let begins = 0
    let ends = 0
    const done = new Promise<void>((resolve) => {
      const loop = agentSweeperLoop(deps, 10, (s) => {
        slices.push(s)
        ends = performance.now()
        if (slices.length === 1) begins = ends - s.ms
        if (!s.result.more) {
          void loop.stop()
          resolve()
        }
      })
      loop.start()
    })
    // The loop's timer does not keep a process alive: this does, until the sweep is done.
    const alive = setInterval(() => {}, 1000)
    await done
    clearInterval(alive)
    const took = slices.map((s) => s.ms)
    const wall = (ends - begins) / 1000
    const stored = newestId() - id0
    const rate = stored / wall
    const within = (3 * connected) / 100_000
    writes.push(
      `| (w2) mass disconnect: ${connected} agents, 1 event each, the sweeper loop ${asking ? `while a request is in flight (${SHORT_SLICE_MS} ms budget)` : `with nobody asking (${LONG_SLICE_MS} ms slices, disconnects in ${BULK_SLICE_MS} ms batches)`} | ${stored} events stored in ${wall.toFixed(2)} s, ${rate.toFixed(0)} events/s; ${slices.length} slices (${(stored / slices.length).toFixed(0)} agents each), longest ${ms(Math.max(...took))} ms, p99 ${ms(pct(took, 0.99))} ms, p50 ${ms(pct(took, 0.5))} ms | ${floorText} | within ${within.toFixed(1)} s (3 s per 100,000): ${wall <= within ? 'met' : 'MISSED'}; >= 50,000/s: ${rate >= 50_000 ? 'met' : 'MISSED'} |`,
    )
    if (stored !== connected) notes.push(`mass disconnect: ${stored} events for ${connected} agents`)
  }

  // The deliveries of everything written above, queued behind the writes as the server's
  // delivery worker does (db/alarm-queue.ts), a slice at a time: the other half of an
  // event's cost, off the writer's path. On one core the two share it: both rates combined.
  {
    const alarms = alarmsRepo(wdb)
    const t0 = performance.now()
    let rows = 0
    let slices = 0
    let longest = 0
    const waiting = wdb.prepare("SELECT (SELECT seq FROM sqlite_sequence WHERE name = 'events') - up_to FROM alarm_events_queued").pluck().get() as number
    while (alarms.eventsWaiting()) {
      const t1 = performance.now()
      rows += alarms.queueEvents()
      longest = Math.max(longest, performance.now() - t1)
      slices++
    }
    const secs = (performance.now() - t0) / 1000
    const rate = waiting / secs
    const both = 1 / (1 / floorRate + 1 / rate)
    writes.push(
      `| queueing the deliveries of the ${waiting} events written above (the delivery worker's slices, 1 destination) | ${rate.toFixed(0)} events/s (${rows} rows, ${slices} slices, longest ${longest.toFixed(1)} ms) | record() and queueing on one core: ${both.toFixed(0)} events/s | reported |`,
    )
  }

  const cp = checkpoints.stats?.() as { checkpoints: number; restarts: number; maxMs: number; helped: number; helpMaxMs: number; walMaxMb: number } | undefined
  await checkpoints.stop()
  writes.push(
    `| WAL checkpoints during the write path, in a thread as in the server | ${cp ? `${cp.checkpoints} (${cp.restarts} restarts, longest ${cp.maxMs} ms off the event loop; ${cp.helped} finished on it, longest ${cp.helpMaxMs} ms); WAL up to ${cp.walMaxMb} MB` : 'none'} | | |`,
  )
  wdb.close()
  db.close()
  for (const suffix of ['', '-wal', '-shm']) fs.rmSync(writeCopy + suffix, { force: true })
  writes.push(
    '| what writing an event does | the row and its time index; risky events raise their notifications per batch; its outbox row (a destination subscribed to every event) is queued behind by the delivery worker (measured above), the indexer does the rest afterwards | | |',
  )
}
if (!given) fs.rmSync(dataDir, { recursive: true, force: true })

console.log(
  `\n${total} events (${top} the newest id); ${CONNECTIONS} connections, ${DURATION} s per case and round, ${ROUNDS} rounds (the median round by p99 shown)${PIN ? '; load generator on CPU 0, server on CPU 1' : ''}; ` +
    `load average ${loadAtStart} at the start, ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} at the end (${os.cpus().length} CPUs).`,
)
console.log('"ms per request" is 1000 / req/s at 10 connections (the server\'s time per request), to compare with the in-process call (the repository alone).')
console.log('"first request" is a cold one (trigram results for the term not kept yet); the load that follows repeats it. The integration case asks from a random id each time.')
console.log('"loop delay" is the server\'s event-loop delay during the median round (its loop statistics, asked for by signal): what any request waited for the work in hand.')
console.log(
  "The pollers' cases (answers of megabytes) are loaded by keep-alive connections that discard the bodies: autocannon spends about 15 ms of the load generator's core per 2.7 MB answer, more than the server.\n",
)
for (const r of rows) console.log(r)
if (sweepRows.length) {
  console.log(`\nThe sweep: ${SWEEP_SECONDS} s, one round, ${CONNECTIONS} connections per shape; SortBy fields are those of x-sort-fields, descending.\n`)
  for (const r of sweepRows) console.log(r)
}
console.log('\n| write path | figure | in-process floor | target |\n|---|---|---|---|')
for (const w of writes) console.log(w)
if (notes.length) {
  console.log('\nNotes:')
  for (const n of notes) console.log(`- ${n}`)
}
