// npm run bench -- agents: the agent and peripheral lists, the CSV export and the agent
// gateway at fleet scale. Seeds a temporary data dir (100,000 agents and about a million
// peripherals by default), starts the built server on 127.0.0.1, and loads it with
// autocannon (10 connections, bounded durations). Each list case is also timed in-process
// against SQLite (the repository call alone): the floor the API cannot go below.
//
// Settings: BENCH_AGENTS (100000), BENCH_SECONDS per case and round (10), BENCH_ROUNDS (3), BENCH_GATEWAY_AGENTS (2000),
// BENCH_LOG_LEVEL (info, as in production). BENCH_LARGE_PAGE=only: the seed and the one
// large page (every agent in one streamed page) alone. BENCH_AGENTS_DIR: a data dir seeded
// before with as many agents (`npm run seed -- --agents N --data-dir DIR`), used instead of a new seed.
//
// `--backend postgres` (or BENCH_BACKEND=sqlite,postgres): the lists, small reads and gateway
// check-ins against a server on SQLite and one on PostgreSQL over the same data (the seed
// copied by scripts/pg-load.ts into BENCH_PG_DB, prime_bench_agents_<N> by default, kept for
// the next run), taking turns each round, with the ratios and the bounds of the issue.
import { spawnSync, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import autocannon from 'autocannon'
import { openDatabase } from '../db/index.js'
import { createRepos } from '../lib/repos.js'
import type { AgentFilter, PeripheralFilter } from '../lib/agents/filter.js'
import type { Sort } from '../lib/listing.js'
import type { components } from '../generated/openapi.js'
import { seedFleet, checkSeed } from './seed.js'
import { fleetHost } from './fleet-data.js'
import {
  PIN,
  pct,
  ms,
  start as startServer,
  stop as stopServer,
  loopDelay,
  memory,
  readLines,
  integrityChecked,
  medianRound,
  largePage,
  largePageRow,
  LARGE_PAGE_HEADER,
  comparesBackends,
  benchPgUrl,
  comparisonData,
  startBackends,
  sideBySide,
  rateRow,
  RATE_HEADER,
  backendsRunLine,
  type BackendServer,
  type SideCase,
} from './bench-support.js'

const AGENTS = Number(process.env.BENCH_AGENTS ?? 100_000)
const DURATION = Number(process.env.BENCH_SECONDS ?? 10)
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))
const GATEWAY_AGENTS = Number(process.env.BENCH_GATEWAY_AGENTS ?? 2000)
const CONNECTIONS = 10
const PORT = 18082
const PASSWORD = 'Bench-password-123'
const SECRET = 'pes_bench_enrollment_secret_0123456789'

const givenDir = process.env.BENCH_AGENTS_DIR ? path.resolve(process.env.BENCH_AGENTS_DIR) : null
const dataDir = givenDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-agents-'))
if (givenDir) fs.mkdirSync(givenDir, { recursive: true })
const dbFile = path.join(dataDir, 'prime.sqlite')
// The gateway cases enroll their fleet from one address: the enrollment limits (300 a minute
// per address) would stop them at 300 agents.
const ENROLL_LIFTED = { PRIME_AGENT_ENROLL_PER_MINUTE_PER_ADDRESS: '100000', PRIME_AGENT_ENROLL_PER_MINUTE: '100000' }
const baseEnv = {
  PRIME_DATA_DIR: dataDir,
  PRIME_ADMIN_PASSWORD: PASSWORD,
  PORT: String(PORT),
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  PRIME_AGENT_ENROLLMENT_SECRET: SECRET,
  PRIME_ACCESS_TOKEN_TTL: '3600',
  PRIME_LICENSE_SEATS: String(AGENTS + GATEWAY_AGENTS + 1000),
  // The seeded agents never check in: without this the sweeper would start marking them
  // Disconnected (and raising events) in the middle of the measurements.
  PRIME_AGENT_DISCONNECT_SECONDS: '86400',
}
const notes: string[] = []

// Each server's event loop from its start (first requests included) to its stop, from its
// loop statistics: the longest any task held it, the target being under 50 ms.
const loopHeld: string[] = []
const watched = new Map<ChildProcess, { name: string; delay: ReturnType<typeof loopDelay> }>()
async function start(env: NodeJS.ProcessEnv, logFile: string): Promise<ChildProcess> {
  const child = await startServer({ ...env, PRIME_LOOP_STATS_SECONDS: '3600' }, logFile)
  const delay = loopDelay(child, logFile)
  delay.begin()
  watched.set(child, { name: path.basename(logFile, '.log'), delay })
  return child
}
async function stop(child: ChildProcess): Promise<void> {
  const w = watched.get(child)
  if (w) {
    watched.delete(child)
    const d = await w.delay.end()
    loopHeld.push(d ? `${w.name}: held at most ${ms(d.max)} ms (p99 ${ms(d.p99)} ms, ${d.samples} samples of 10 ms)${d.max > 50 ? ' MISSED' : ''}` : `${w.name}: no loop statistics`)
  }
  await stopServer(child)
}
const loadAtStart = os
  .loadavg()
  .map((x) => x.toFixed(1))
  .join(' ')
const rows: string[] = []
const base = `http://127.0.0.1:${PORT}/prime/webui`

// ---------------------------------------------------------------------------------------
// Seed (both cores), then the in-process floors

const db = openDatabase(dbFile)
const present = db.prepare('SELECT count(*) FROM agents').pluck().get() as number
let seeded: { agents: number; peripherals: number; ms: number }
if (givenDir && present > 0) {
  if (present !== AGENTS) throw new Error(`${dbFile} holds ${present} agents, BENCH_AGENTS is ${AGENTS}`)
  seeded = { agents: present, peripherals: db.prepare('SELECT count(*) FROM peripherals').pluck().get() as number, ms: 0 }
} else {
  console.error(`Seeding ${AGENTS} agents into ${dataDir} ...`)
  seeded = await seedFleet(db, { agents: AGENTS, peripheralsPerAgent: 10 })
  const check = checkSeed(db, 100)
  if (check.mismatches.length) throw new Error(`seeded data differs from db/agent-state.ts: ${check.mismatches.slice(0, 3).join('; ')}`)
  console.error(`Seeded ${seeded.agents} agents, ${seeded.peripherals} peripherals in ${(seeded.ms / 1000).toFixed(1)} s`)
}

// From here on the load generator (this process) keeps to CPU 0 and the server to CPU 1.
if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])

interface ListCase {
  name: string
  url: string
  floor: () => unknown
}
// No kept answers: the floor is the query itself, as it runs after any change.
const repos = createRepos(db, 0)
const bySort = (field: string, direction: 'asc' | 'desc' = 'asc'): Sort => ({ field, direction })
// An agents page is its refs and their JSON (kept per row after the first call, as in the server).
const agentList = (f: AgentFilter, s: Sort) => () => repos.agents.views(repos.agents.list(f, s, 50, 0).rows)
const peripheralList = (f: PeripheralFilter, s: Sort) => () => repos.peripherals.list(f, s, 50, 0)
const listCases: ListCase[] = [
  { name: 'agents, default sort', url: '/agents?PageSize=50', floor: agentList({}, bySort('hostIdentifier')) },
  {
    name: 'agents, HostIdentifier contains + SortBy',
    url: '/agents?HostIdentifier=fin-lt&SortBy=lastConfiguration_desc&PageSize=50',
    floor: agentList({ hostIdentifier: 'fin-lt' }, bySort('lastConfiguration', 'desc')),
  },
  { name: 'agents, GlobalSearch', url: '/agents?GlobalSearch=Latitude%205440&PageSize=50', floor: agentList({ globalSearch: 'Latitude 5440' }, bySort('hostIdentifier')) },
  { name: 'agents, HasUnapprovedPeripherals=True', url: '/agents?HasUnapprovedPeripherals=True&PageSize=50', floor: agentList({ hasUnapprovedPeripherals: true }, bySort('hostIdentifier')) },
  { name: 'peripherals, vendor contains', url: '/peripherals?vendor=logitech&PageSize=50', floor: peripheralList({ vendor: 'logitech' }, bySort('hostUuid')) },
]

if (comparesBackends()) {
  await compareBackends()
  process.exit(0)
}

/** Median and p99 of one in-process call, over about 2 s (at least 50 runs). */
function floor(fn: () => unknown): { p50: number; p99: number; runs: number } {
  for (let i = 0; i < 5; i++) fn()
  const times: number[] = []
  const until = performance.now() + 2000
  while (times.length < 50 || (performance.now() < until && times.length < 5000)) {
    const t = performance.now()
    fn()
    times.push(performance.now() - t)
  }
  return { p50: pct(times, 0.5), p99: pct(times, 0.99), runs: times.length }
}
const floors = listCases.map((c) => {
  try {
    return floor(c.floor)
  } catch (err) {
    notes.push(`${c.name}: the in-process call failed: ${(err as Error).message}`)
    return null
  }
})

// ---------------------------------------------------------------------------------------
// The lists over HTTP

let server: ChildProcess
async function login(): Promise<Record<string, string>> {
  const res = await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }) })
  const { token } = (await res.json()) as { token: string }
  return { authorization: `Bearer ${token}` }
}
let auth: Record<string, string>

/**
 * Every agent in one page (PageSize=1000000, as the SOAR integration asks), streamed, on a
 * fresh server process (its peak RSS is the page's), while one connection reads small pages.
 */
async function largePageCase() {
  server = await start({ ...baseEnv, PRIME_RATE_LIMIT_MAX: '100000000' }, path.join(dataDir, 'server-page.log'))
  auth = await login()
  await integrityChecked(base, auth)
  const r = await largePage(`${base}/agents?PageSize=1000000`, `${base}/agents?PageSize=50&SortBy=lastConfiguration_desc`, auth, server.pid!, '"lastConfiguered":')
  rows.push('', ...LARGE_PAGE_HEADER, largePageRow(`every agent (PageSize=1000000)`, r))
  if (r.rows !== AGENTS) notes.push(`large page: ${r.rows} agents for ${AGENTS} seeded`)
  await stop(server)
}
if (process.env.BENCH_LARGE_PAGE === 'only') {
  await largePageCase()
  db.close()
  if (!givenDir) fs.rmSync(dataDir, { recursive: true, force: true })
  console.log(
    `\n${AGENTS} agents, ${seeded.peripherals} peripherals; load average ${loadAtStart} at the start, ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} at the end (${os.cpus().length} CPUs).`,
  )
  for (const r of rows) console.log(r)
  for (const l of loopHeld) console.log(`- event loop, ${l}`)
  for (const n of notes) console.log(`- ${n}`)
  process.exit(0)
}

async function load(opts: autocannon.Options) {
  const r = await autocannon({ connections: CONNECTIONS, duration: DURATION, ...opts })
  const codes = (r as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {}
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors, codes }
}

rows.push(
  '| case | answers kept | matches | req/s | p50 / p99 ms | p99 of each round, ms | ms per request | 1 connection p50 / p99 ms | in-process floor p50 / p99 ms | per request / floor | target p99 < 20 ms (median round) |',
)
rows.push('|---|---|---|---|---|---|---|---|---|---|---|')
// Twice: as served (a repeated query is answered from the kept answer while nothing
// changes), and with no answers kept (every request runs its query, as the first one after
// a change does).
for (const kept of ['yes', 'no']) {
  server = await start({ ...baseEnv, PRIME_RATE_LIMIT_MAX: '100000000', PRIME_KEPT_LIST_ANSWERS: kept === 'yes' ? '64' : '0' }, path.join(dataDir, `server-${kept}.log`))
  auth = await login()
  await integrityChecked(base, auth)
  const measured: { c: ListCase; i: number; filtered?: number; size: number; rounds: Awaited<ReturnType<typeof load>>[]; ones: Awaited<ReturnType<typeof load>>[] }[] = []
  for (const [i, c] of listCases.entries()) {
    const first = await fetch(base + c.url, { headers: auth })
    const body = (await first.json().catch(() => null)) as { recordsFiltered?: number; data?: unknown[]; detail?: string } | null
    const f = floors[i]
    const floorText = f ? `${ms(f.p50)} / ${ms(f.p99)}` : 'n/a'
    if (first.status !== 200 || !body?.data) {
      rows.push(`| ${c.name} | ${kept} | ${first.status}${first.status === 501 ? ' (not implemented)' : ''} | | | | | | ${floorText} | | |`)
      if (first.status !== 501) notes.push(`${c.name}: ${first.status} ${body?.detail ?? ''}`)
      continue
    }
    await load({ url: base + c.url, headers: auth, duration: 2 }) // warm-up
    measured.push({ c, i, filtered: body.recordsFiltered, size: body.data.length, rounds: [], ones: [] })
  }
  // Rounds of every case in turn: whatever else the machine does at one moment (it is
  // shared) falls on one round of a case, and the median round is the figure.
  for (let round = 0; round < ROUNDS; round++) {
    for (const m of measured) {
      m.rounds.push(await load({ url: base + m.c.url, headers: auth }))
      // One connection: the latency of a request that does not queue behind nine others.
      m.ones.push(await load({ url: base + m.c.url, headers: auth, connections: 1, duration: Math.max(2, Math.round(DURATION / 2)) }))
    }
  }
  for (const { c, i, filtered, size, rounds, ones } of measured) {
    for (const x of [...rounds, ...ones]) if (x.non2xx || x.errors) notes.push(`${c.name}: ${x.non2xx} non-2xx answers, ${x.errors} errors (${JSON.stringify(x.codes)})`)
    const r = medianRound(rounds)
    const one = medianRound(ones)
    const f = floors[i]
    const floorText = f ? `${ms(f.p50)} / ${ms(f.p99)}` : 'n/a'
    const perRequest = 1000 / r.rps
    rows.push(
      `| ${c.name} | ${kept} | ${filtered} (page of ${size}) | ${r.rps.toFixed(0)} | ${r.p50} / ${r.p99} | ${rounds.map((x) => x.p99).join(', ')} | ${ms(perRequest)} | ${one.p50} / ${one.p99} | ${floorText} | ${f ? (perRequest / f.p50).toFixed(1) : ''} | ${r.p99 < 20 ? 'met' : 'MISSED'} (1 connection: ${one.p99 < 20 ? 'met' : 'missed'}) |`,
    )
  }
  await stop(server)
}

// ---------------------------------------------------------------------------------------
// CSV export of every agent, on a fresh server process (its peak RSS is the export's)

server = await start({ ...baseEnv, PRIME_RATE_LIMIT_MAX: '100000000' }, path.join(dataDir, 'server-export.log'))
auth = await login()
await integrityChecked(base, auth)
{
  const before = memory(server.pid!)
  let peakRss = before?.rss ?? 0
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, memory(server.pid!)?.rss ?? 0)
  }, 10)
  const t0 = performance.now()
  const res = await fetch(`${base}/agents/exportagentcsv`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json', accept: 'text/csv' }, body: '{}' })
  const { bytes, lines } = await readLines(res.body)
  const wall = (performance.now() - t0) / 1000
  clearInterval(sampler)
  const after = memory(server.pid!)
  const peakMb = Math.max(peakRss, after?.hwm ?? 0) / 1024
  if (res.status === 200) {
    const okTime = wall < 5 ? 'met' : 'MISSED'
    const okMem = peakMb < 250 ? 'met' : 'MISSED'
    rows.push('', '| CSV export of all agents | wall time | server peak RSS (VmHWM) | target |', '|---|---|---|---|')
    rows.push(
      `| ${lines - 1} rows, ${(bytes / 1048576).toFixed(1)} MiB | ${wall.toFixed(2)} s | ${peakMb.toFixed(0)} MB (${((before?.rss ?? 0) / 1024).toFixed(0)} MB before) | < 5 s: ${okTime}; < 250 MB: ${okMem} |`,
    )
    if (lines - 1 !== AGENTS) notes.push(`CSV export: ${lines - 1} data rows for ${AGENTS} agents (rows with line breaks inside cells would also explain a difference)`)
  } else {
    rows.push('', `| CSV export of all agents | ${res.status}${res.status === 501 ? ' (not implemented)' : ''} | | |`)
  }
}
await stop(server)

await largePageCase()

// ---------------------------------------------------------------------------------------
// Gateway: unchanged check-ins of agents with ten peripherals. The per-address request
// limit is left at its default: gateway calls must not count against it.

type Schemas = components['schemas']
server = await start({ ...baseEnv, ...ENROLL_LIFTED, PRIME_AGENT_MIN_CHECKIN_SECONDS: '0' }, path.join(dataDir, 'server-gateway.log'))
await integrityChecked(base, await login())
{
  interface Enrolled {
    credential: string
    body: string
  }
  const enrolled: Enrolled[] = []
  const failures: string[] = []
  const t0 = performance.now()
  let next = 0
  // Ten at a time, like the load generator's connections.
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < GATEWAY_AGENTS) {
        const n = next++
        const host = fleetHost(7, 'bench', n, 10)
        host.peripherals = [...host.peripherals, ...fleetHost(7, 'bench-fill', n, 20).peripherals].slice(0, 10)
        const res = await fetch(`${base}/gateway/enroll`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ enrollmentSecret: SECRET, machineId: host.machineId, hostIdentifier: host.hostIdentifier }),
        })
        const e = (await res.json()) as Schemas['GatewayEnrollResponse'] & { detail?: string }
        if (res.status !== 200) {
          failures.push(`enroll ${res.status}: ${e.detail ?? ''}`)
          if (failures.length > 20) return
          continue
        }
        const { index: _i, machineId: _m, ...state } = host
        const body: Schemas['GatewayCheckInRequest'] = { ...state, operationalStatus: 'Armed', isSystemLocked: false, licenseAccountId: null, errors: [] }
        enrolled.push({ credential: e.credential, body: JSON.stringify(body) })
      }
    }),
  )
  const enrollSecs = (performance.now() - t0) / 1000
  // The first check-in of each: the full comparison, ten new peripherals, events.
  const t1 = performance.now()
  let k = 0
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (k < enrolled.length) {
        const a = enrolled[k++]
        const res = await fetch(`${base}/gateway/checkin`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${a.credential}` }, body: a.body })
        if (res.status !== 200) failures.push(`first check-in ${res.status}: ${((await res.json().catch(() => ({}))) as { detail?: string }).detail ?? ''}`)
        else await res.arrayBuffer()
      }
    }),
  )
  const firstSecs = (performance.now() - t1) / 1000
  rows.push('', '| gateway | figure | target |', '|---|---|---|')
  if (enrolled.length === 0) {
    rows.push(`| enroll | ${failures[0] ?? 'failed'} | |`)
  } else {
    rows.push(`| enrollments (${enrolled.length}, 10 at a time) | ${(enrolled.length / enrollSecs).toFixed(0)} /s | |`)
    rows.push(`| first check-ins (10 new peripherals each) | ${(enrolled.length / firstSecs).toFixed(0)} /s | |`)
    let i = 0
    const r = await load({
      url: `${base}/gateway/checkin`,
      requests: [
        {
          method: 'POST',
          setupRequest: (req) => {
            const a = enrolled[i++ % enrolled.length]
            return { ...req, headers: { 'content-type': 'application/json', authorization: `Bearer ${a.credential}` }, body: a.body }
          },
        },
      ],
    })
    const ok = r.rps >= 1000 ? 'met' : 'MISSED'
    rows.push(`| unchanged check-ins (${enrolled.length} agents, 10 peripherals each) | ${r.rps.toFixed(0)} /s, p50 / p99 ${r.p50} / ${r.p99} ms | >= 1000/s: ${ok} |`)
    if (r.non2xx) notes.push(`gateway check-ins: ${r.non2xx} non-2xx answers ${JSON.stringify(r.codes)}${r.codes['429'] ? ' (429: a request limit applied to agent check-ins)' : ''}`)
  }
  if (failures.length) notes.push(`gateway: ${failures.length} failures, first: ${failures[0]}`)
}
await stop(server)
db.close()
if (!givenDir) fs.rmSync(dataDir, { recursive: true, force: true })

console.log(
  `\n${AGENTS} agents, ${seeded.peripherals} peripherals (seeded in ${(seeded.ms / 1000).toFixed(1)} s); ${CONNECTIONS} connections, ${DURATION} s per case and round, ${ROUNDS} rounds (the median round by p99 shown)${PIN ? '; load generator on CPU 0, server on CPU 1' : ''}; ` +
    `load average ${loadAtStart} at the start, ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} at the end (${os.cpus().length} CPUs).`,
)
console.log('"ms per request" is 1000 / req/s at 10 connections: the server\'s time per request, to compare with the floor (the repository call alone).\n')
for (const r of rows) console.log(r)
console.log('\nEvent loop, each server from its start to its stop (loop statistics; target: no task over 50 ms):')
for (const l of loopHeld) console.log(`- ${l}`)
if (notes.length) {
  console.log('\nNotes:')
  for (const n of notes) console.log(`- ${n}`)
}

// ---------------------------------------------------------------------------------------
// --backend postgres: both backends side by side

/** Enrolls `count` agents on a server (ten peripherals each) and makes their first check-ins; their credentials and bodies. */
async function enrollOn(s: BackendServer, count: number): Promise<{ credential: string; body: string }[]> {
  type Schemas = components['schemas']
  const enrolled: { credential: string; body: string }[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < count) {
        const n = next++
        const host = fleetHost(7, 'bench', n, 10)
        host.peripherals = [...host.peripherals, ...fleetHost(7, 'bench-fill', n, 20).peripherals].slice(0, 10)
        const res = await fetch(`${s.base}/gateway/enroll`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ enrollmentSecret: SECRET, machineId: host.machineId, hostIdentifier: host.hostIdentifier }),
        })
        const e = (await res.json()) as Schemas['GatewayEnrollResponse'] & { detail?: string }
        if (res.status !== 200) throw new Error(`enroll on ${s.backend}: ${res.status} ${e.detail ?? ''}`)
        const { index: _i, machineId: _m, ...state } = host
        const body = JSON.stringify({ ...state, operationalStatus: 'Armed', isSystemLocked: false, licenseAccountId: null, errors: [] } satisfies Schemas['GatewayCheckInRequest'])
        const first = await fetch(`${s.base}/gateway/checkin`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${e.credential}` }, body })
        await first.arrayBuffer()
        if (first.status !== 200) throw new Error(`first check-in on ${s.backend}: ${first.status}`)
        enrolled.push({ credential: e.credential, body })
      }
    }),
  )
  return enrolled
}

async function compareBackends() {
  const notes: string[] = []
  const data = await comparisonData(db, benchPgUrl(`prime_bench_agents_${AGENTS}`), PASSWORD, (l) => console.error(l))
  if (data.loaded) notes.push(data.loaded)
  if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])
  const uuids = db.prepare('SELECT uuid FROM agents ORDER BY id').pluck().all() as string[]
  const env = { ...baseEnv, ...ENROLL_LIFTED, PRIME_RATE_LIMIT_MAX: '100000000', PRIME_AGENT_MIN_CHECKIN_SECONDS: '0' }
  const servers = await startBackends(data, env, PORT)
  const small = 1.5
  const cases: SideCase[] = [
    ...listCases.map((c) => ({ name: c.name, path: c.url, bound: { ratio: small }, idKey: c.url.startsWith('/agents') ? 'uuid' : undefined })),
    { name: 'agents, a page deep (PageNumber=500)', path: '/agents?PageSize=50&PageNumber=500', bound: { ratio: small }, idKey: 'uuid' },
    { name: 'small read: one agent (GET agents/agent/{id}, a random one)', path: () => `/agents/agent/${uuids[Math.floor(Math.random() * uuids.length)]}`, bound: { ratio: small } },
    { name: 'small read: agents, PageSize=10', path: '/agents?PageSize=10', bound: { ratio: small }, idKey: 'uuid' },
  ]
  const rows = await sideBySide(servers, cases, { rounds: ROUNDS, seconds: DURATION, connections: CONNECTIONS, notes })

  // Gateway: unchanged check-ins of agents enrolled on each server (the same agents), turn about.
  const enrolled = await Promise.all(servers.map((s) => enrollOn(s, GATEWAY_AGENTS)))
  const rates: number[][] = [[], []]
  const p99s: number[][] = [[], []]
  for (let round = 0; round < ROUNDS; round++) {
    for (const i of round % 2 ? [1, 0] : [0, 1]) {
      let k = 0
      const list = enrolled[i]
      const r = await autocannon({
        url: `${servers[i].base}/gateway/checkin`,
        connections: CONNECTIONS,
        duration: DURATION,
        requests: [
          {
            method: 'POST',
            setupRequest: (req) => {
              const a = list[k++ % list.length]
              return { ...req, headers: { 'content-type': 'application/json', authorization: `Bearer ${a.credential}` }, body: a.body }
            },
          },
        ],
      })
      if (r.non2xx || r.errors) notes.push(`gateway check-ins on ${servers[i].backend}: ${r.non2xx} non-2xx, ${r.errors} errors`)
      rates[i].push(r.requests.average)
      p99s[i].push(r.latency.p99)
    }
  }
  for (const s of servers) await stop(s.child)
  await data.release()
  db.close()
  if (!givenDir) fs.rmSync(dataDir, { recursive: true, force: true })

  console.log(backendsRunLine(`${AGENTS} agents, ${seeded.peripherals} peripherals`, { connections: CONNECTIONS, seconds: DURATION, rounds: ROUNDS, loadAtStart }))
  for (const r of rows) console.log(r)
  console.log('')
  for (const r of RATE_HEADER) console.log(r)
  console.log(
    rateRow(`unchanged check-ins through the gateway (${GATEWAY_AGENTS} agents enrolled, 10 peripherals each; p99 ms ${p99s.map((x) => x.join(', ')).join('; ')})`, rates, { rateRatio: 0.5 }),
  )
  if (notes.length) {
    console.log('\nNotes:')
    for (const n of notes) console.log(`- ${n}`)
  }
}
