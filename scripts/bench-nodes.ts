// npm run bench -- nodes: what a node and PostgreSQL cost per agent check-in and per small
// read, with one node and with three on one database, in one run. On a 2-core machine three
// nodes cannot serve more than one, so the figures are CPU time (user + system, from
// /proc/<pid>/stat) divided by the requests answered: of each node process, of the PostgreSQL
// backends of the nodes under load (told apart by their application_name), and of the
// server's own processes (checkpointer, walwriter, ...; they work for every database on it).
// This database's WAL is followed with pg_waldump (we run as root, next to the server), and
// the database is vacuumed after each check-in phase (autovacuum's work, measured apart).
//
// A fresh database (BENCH_DATABASE_URL, default postgres://prime@127.0.0.1:5432/
// prime_bench_nodes_<pid>; it must not exist: made, then dropped at the end). Four server
// processes (dist/lib/server.js), each its own port and data directory: node a alone for
// the one-node configuration, nodes b1, b2, b3 for the three-node one. BENCH_AGENTS agents
// (2000) are enrolled through the gateway, with their first check-in (ten peripherals each).
// Then BENCH_ROUNDS rounds (3); in each, the two configurations in turn (the order swapped
// every round), each with five phases of a load driver in this process (keep-alive HTTP,
// BENCH_CONNECTIONS connections, 12, spread evenly over the configuration's nodes):
// idle (5 s), check-ins of the mix, unchanged check-ins, GET admin/getuserdetails,
// GET agents?PageSize=10 (BENCH_SECONDS each, 15). Check-ins go to the agents in turn; in
// the mix BENCH_CHANGED of them (0.05) flip one
// peripheral's `present` (removed, or plugged in again: events), 1% more report one agent
// error; the rest are unchanged. Prints medians with the rounds' spread, and the capacity
// model that follows from them (docs/operating.md "Capacity").
//
// A shorter run: BENCH_CONFIGS=one (or three) measures that configuration alone (no ratios;
// the model then takes the one measured), BENCH_PHASES=mix,unchanged (of mix, unchanged,
// account, agents) only those phases besides the idle one.
import http from 'node:http'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { spawn, type ChildProcess } from 'node:child_process'
import pg from 'pg'
import type { components } from '../generated/openapi.js'
import { fleetHost } from './fleet-data.js'
import { cpuSeconds, median, start, stop } from './bench-support.js'

type Schemas = components['schemas']
const AGENTS = Number(process.env.BENCH_AGENTS ?? 2000)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 15)
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3))
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 12)
const CHANGED = Number(process.env.BENCH_CHANGED ?? 0.05)
const WITH_ERROR = 0.01
const IDLE_SECONDS = 5
const PORT = Number(process.env.BENCH_PORT ?? 18090)
const PASSWORD = 'Bench-password-123'
const SECRETS = {
  PRIME_JWT_SECRET: 'bench-nodes-signing-secret-0123456789abcdef',
  PRIME_AGENT_ENROLLMENT_SECRET: 'pes_bench_nodes_enrollment_0123456789',
  PRIME_AGENTLESS_KEY: '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff',
}
const CLK_TCK = 100

const dbUrl = process.env.BENCH_DATABASE_URL ?? `postgres://prime@127.0.0.1:5432/prime_bench_nodes_${process.pid}`
const dbName = decodeURIComponent(new URL(dbUrl).pathname.slice(1))
if (!/^[a-z_][a-z0-9_]*$/.test(dbName)) throw new Error(`BENCH_DATABASE_URL: a database name of lower-case letters, digits and _ please, got "${dbName}"`)
const adminUrl = new URL(dbUrl)
adminUrl.pathname = '/postgres'
const admin = new pg.Client({ connectionString: adminUrl.toString() })
await admin.connect()
if ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName])).rowCount) {
  await admin.end()
  throw new Error(`database ${dbName} exists: the bench makes a fresh one and drops it; name another in BENCH_DATABASE_URL`)
}
await admin.query(`CREATE DATABASE ${dbName}`)
const loadAtStart = os.loadavg().map((x) => x.toFixed(1))
const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-nodes-'))

interface Node {
  name: string
  base: string
  child: ChildProcess
}
const nodes: Node[] = []
let probe = null as pg.Client | null

/** A node's settings: the shared database and secrets, budgets out of the way of the load. */
function nodeEnv(name: string, port: number): NodeJS.ProcessEnv {
  const url = new URL(dbUrl)
  // Its backends then say whose they are in pg_stat_activity (the URL's setting wins over the pool's).
  url.searchParams.set('application_name', `bench-${name}`)
  const dir = path.join(workDir, name)
  fs.mkdirSync(dir)
  return {
    ...SECRETS,
    HOST: '127.0.0.1',
    PORT: String(port),
    PRIME_DATA_DIR: dir,
    PRIME_DATABASE_URL: url.toString(),
    PRIME_ADMIN_PASSWORD: PASSWORD,
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    PRIME_RATE_LIMIT_MAX: '100000000',
    PRIME_USER_RATE_LIMIT_MAX: '100000000',
    PRIME_AGENT_RATE_LIMIT_MAX: '100000000',
    PRIME_AGENT_MIN_CHECKIN_SECONDS: '0',
    PRIME_AGENT_ENROLL_PER_MINUTE: '100000000',
    PRIME_AGENT_ENROLL_PER_MINUTE_PER_ADDRESS: '100000000',
    PRIME_LICENSE_SEATS: String(AGENTS + 1000),
    // The agents check in only while a configuration is loaded: none may be swept to Disconnected meanwhile.
    PRIME_AGENT_DISCONNECT_SECONDS: '86400',
    PRIME_ACCESS_TOKEN_TTL: '3600',
    PRIME_EXPENSIVE_PER_CREDENTIAL: '64',
    PRIME_SHUTDOWN_DRAIN_SECONDS: '0',
  }
}

// ---------------------------------------------------------------------------------------
// CPU time from /proc

interface PgProcess {
  cpu: number
  background: boolean
}
// The server's own processes, which work for every database on it: the postmaster and these.
const BACKGROUND = /^postgres: (?:[^:]+: )?(?:checkpointer|background writer|walwriter|autovacuum|logical replication|stats|archiver|wal sender|wal receiver)/

/** CPU seconds of every process whose command is postgres (the server and all its backends), and whether it is one of the server's own. */
function pgProcesses(): Map<number, PgProcess> {
  const out = new Map<number, PgProcess>()
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      if (fs.readFileSync(`/proc/${d}/comm`, 'utf8').trim() !== 'postgres') continue
      const fields = fs.readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ')
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').replace(/\0/g, ' ')
      out.set(Number(d), { cpu: (Number(fields[11]) + Number(fields[12])) / CLK_TCK, background: BACKGROUND.test(cmd) || !cmd.startsWith('postgres:') })
    } catch {
      // Gone between the listing and the read.
    }
  }
  return out
}

/**
 * pg_waldump next to the server's binary and its WAL directory (from the postmaster's -D),
 * found through /proc; null when they cannot be (then WAL is counted for the whole server only).
 */
function walDumper(): { dump: string; walDir: string } | null {
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue
    try {
      const argv = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0')
      const at = argv.indexOf('-D')
      if (!argv[0].endsWith('/postgres') || at < 0) continue
      const dump = path.join(path.dirname(fs.realpathSync(`/proc/${d}/exe`)), 'pg_waldump')
      const walDir = path.resolve(fs.realpathSync(`/proc/${d}/cwd`), argv[at + 1], 'pg_wal')
      if (fs.existsSync(dump) && fs.existsSync(walDir)) return { dump, walDir }
    } catch {
      // Not ours to read, or gone.
    }
  }
  return null
}
const waldump = walDumper()
const walFailures = new Set<string>()
const lsnValue = (lsn: string) => {
  const [hi, lo] = lsn.split('/')
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`)
}
/** This database's WAL by record type: count and bytes (full-page images included). */
type WalTypes = Map<string, { n: number; bytes: number }>

/**
 * Follows the WAL from `from` as the server writes it (pg_waldump --follow, so that a
 * checkpoint recycling files in the middle of a phase loses nothing) and counts what this
 * database writes: the records of its relations (full-page images included) and the commit
 * records of their transactions. Others on the same server write WAL too; the position
 * alone would count theirs. `end(to)` waits until the follower has passed `to`.
 */
function followWal(from: string, flushed: string, dbOid: number) {
  if (!waldump) return { end: async (_to: string) => ({ bytes: Number.NaN, types: new Map() as WalTypes }) }
  // Line-buffered: the last records of a phase must not wait in stdio's buffer for more.
  // From a little before what is on disk: pg_waldump must find a record where it starts (past
  // the end of the WAL written it finds none and stops), and skips to the next one from there.
  const back = lsnValue(flushed) - 0x10000n
  const start = `${(back >> 32n).toString(16).toUpperCase()}/${(back & 0xffffffffn).toString(16).toUpperCase()}`
  const first = lsnValue(from)
  const child = spawn('stdbuf', ['-oL', waldump.dump, '-p', waldump.walDir, '-s', start, '--follow'], { stdio: ['ignore', 'pipe', 'pipe'] })
  const mine = new RegExp(`rel \\d+/${dbOid}/`)
  const xids = new Set<string>()
  const types: WalTypes = new Map()
  let until = 1n << 64n
  let last = 0n
  let bytes = 0
  let rest = ''
  let stderr = ''
  const add = (type: string, n: number) => {
    const t = types.get(type) ?? { n: 0, bytes: 0 }
    t.n++
    t.bytes += n
    types.set(type, t)
    bytes += n
  }
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
  child.stdout.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split('\n')
    rest = lines.pop()!
    for (const line of lines) {
      const m = /^rmgr: (\S+)\s+len \(rec\/tot\):\s*\d+\/\s*(\d+), tx:\s*(\d+), lsn: ([0-9A-F]+\/[0-9A-F]+), prev \S+ desc: (\S+)/.exec(line)
      if (!m) continue
      last = lsnValue(m[4])
      if (last >= until || last < first) continue
      const type = `${m[1]}/${m[5]}`
      if (mine.test(line)) {
        add(type, Number(m[2]))
        if (m[3] !== '0') xids.add(m[3])
      } else if (m[1] === 'Transaction' && xids.has(m[3])) add(type, Number(m[2]))
    }
  })
  return {
    async end(to: string): Promise<{ bytes: number; types: WalTypes }> {
      until = lsnValue(to)
      const deadline = Date.now() + 10_000
      while (last < until && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
      const behind = last < until
      child.kill()
      if (behind) {
        walFailures.add(`pg_waldump from ${from} did not reach ${to}${stderr ? `: ${stderr.trim().split('\n')[0]}` : ''}`)
        return { bytes: Number.NaN, types }
      }
      return { bytes, types }
    },
  }
}

/** The application_name of each backend of the bench's database. */
async function backendNames(): Promise<Map<number, string>> {
  const rows = (await probe!.query('SELECT pid, application_name FROM pg_stat_activity WHERE datname = $1', [dbName])).rows as { pid: number; application_name: string }[]
  return new Map(rows.map((r) => [r.pid, r.application_name]))
}

/** Events and audit records stored so far (their kept totals), and the WAL's position. */
async function counters(): Promise<{ events: number; audit: number; lsn: string; flushed: string }> {
  const r = await probe!.query(
    `SELECT (SELECT n FROM record_counts WHERE name = 'events')::float8 AS events, (SELECT n FROM record_counts WHERE name = 'audit_trail')::float8 AS audit, pg_current_wal_insert_lsn()::text AS lsn, pg_current_wal_flush_lsn()::text AS flushed`,
  )
  return r.rows[0]
}

// ---------------------------------------------------------------------------------------
// The load driver

interface Req {
  method: 'GET' | 'POST'
  path: string
  headers: Record<string, string>
  body?: string
}
interface Driven {
  ok: number
  codes: Record<string, number>
  errors: number
  seconds: number
}

/** `next()` requests for `seconds` over `bases`, CONNECTIONS at a time (connection w to base w mod n). */
async function drive(bases: string[], seconds: number, next: () => Req): Promise<Driven> {
  const agents = bases.map(() => new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS }))
  const codes: Record<string, number> = {}
  let ok = 0
  let errors = 0
  const ask = (w: number) =>
    new Promise<void>((resolve) => {
      const r = next()
      const u = new URL(bases[w % bases.length] + r.path)
      const req = http.request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: r.method, headers: r.headers, agent: agents[w % bases.length] }, (res) => {
        const code = res.statusCode ?? 0
        codes[code] = (codes[code] ?? 0) + 1
        if (code >= 200 && code < 300) ok++
        res.resume()
        res.on('end', resolve)
        res.on('error', () => resolve())
      })
      req.on('error', () => {
        errors++
        resolve()
      })
      req.end(r.body)
    })
  const t0 = performance.now()
  const until = t0 + seconds * 1000
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, w) => {
      while (performance.now() < until) await ask(w)
    }),
  )
  const elapsed = (performance.now() - t0) / 1000
  for (const a of agents) a.destroy()
  return { ok, codes, errors, seconds: elapsed }
}

// ---------------------------------------------------------------------------------------
// Agents: enrolled once, their state kept here so that a change sticks (the next check-ins
// of that agent send the new state, unchanged again)

interface Agent {
  credential: string
  state: Schemas['GatewayCheckInRequest']
  body: string
}
const agents: Agent[] = []
const mix = { unchanged: 0, changed: 0, withError: 0 }
let turn = 0
function checkIn(): Req {
  const a = agents[turn++ % agents.length]
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${a.credential}` }
  const r = Math.random()
  if (r < CHANGED) {
    mix.changed++
    const p = a.state.peripherals[Math.floor(Math.random() * a.state.peripherals.length)]
    p.present = !p.present
    a.body = JSON.stringify(a.state)
    return { method: 'POST', path: '/gateway/checkin', headers, body: a.body }
  }
  if (r < CHANGED + WITH_ERROR) {
    mix.withError++
    const errors = [{ time: new Date().toISOString(), code: 'E_DRIVER', message: 'The filter driver restarted after a watchdog timeout.' }]
    return { method: 'POST', path: '/gateway/checkin', headers, body: JSON.stringify({ ...a.state, errors }) }
  }
  mix.unchanged++
  return { method: 'POST', path: '/gateway/checkin', headers, body: a.body }
}
/** Every agent as it was at its last check-in. */
function unchangedCheckIn(): Req {
  const a = agents[turn++ % agents.length]
  return { method: 'POST', path: '/gateway/checkin', headers: { 'content-type': 'application/json', authorization: `Bearer ${a.credential}` }, body: a.body }
}

async function enroll(all: Node[]): Promise<number> {
  const t0 = performance.now()
  let next = 0
  const failures: string[] = []
  const post = async (base: string, p: string, body: string, auth?: string) => {
    const res = await fetch(base + p, { method: 'POST', headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${auth}` } : {}) }, body })
    const json = (await res.json().catch(() => ({}))) as Record<string, unknown>
    if (res.status !== 200) throw new Error(`${p} on ${base}: ${res.status} ${json.detail ?? ''}`)
    return json
  }
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, w) => {
      const base = all[w % all.length].base
      while (next < AGENTS && failures.length === 0) {
        const n = next++
        try {
          const host = fleetHost(11, 'bench-nodes', n, 10)
          host.peripherals = [...host.peripherals, ...fleetHost(11, 'bench-nodes-fill', n, 20).peripherals].slice(0, 10)
          const e = await post(base, '/gateway/enroll', JSON.stringify({ enrollmentSecret: SECRETS.PRIME_AGENT_ENROLLMENT_SECRET, machineId: host.machineId, hostIdentifier: host.hostIdentifier }))
          const { index: _i, machineId: _m, ...rest } = host
          const state: Schemas['GatewayCheckInRequest'] = { ...rest, operationalStatus: 'Armed', isSystemLocked: false, licenseAccountId: null, errors: [] }
          const body = JSON.stringify(state)
          await post(base, '/gateway/checkin', body, e.credential as string)
          agents.push({ credential: e.credential as string, state, body })
        } catch (err) {
          failures.push((err as Error).message)
        }
      }
    }),
  )
  if (failures.length) throw new Error(`enrollment failed: ${failures[0]}`)
  return (performance.now() - t0) / 1000
}

// ---------------------------------------------------------------------------------------
// Phases and rounds

const ALL_PHASES = ['idle', 'check-in, mix', 'check-in, unchanged', 'GET admin/getuserdetails', 'GET agents?PageSize=10'] as const
type Phase = (typeof ALL_PHASES)[number]
const PHASE_NAMES: Record<string, Phase> = { mix: 'check-in, mix', unchanged: 'check-in, unchanged', account: 'GET admin/getuserdetails', agents: 'GET agents?PageSize=10' }
const PHASES: Phase[] = process.env.BENCH_PHASES ? ['idle', ...process.env.BENCH_PHASES.split(',').map((n) => PHASE_NAMES[n.trim()] ?? (undefined as never))] : [...ALL_PHASES]
if (PHASES.includes(undefined as never)) throw new Error(`BENCH_PHASES: a comma-separated list of ${Object.keys(PHASE_NAMES).join(', ')}`)
const CONFIGS = process.env.BENCH_CONFIGS ?? 'both'
if (!['one', 'three', 'both'].includes(CONFIGS)) throw new Error('BENCH_CONFIGS: one, three or both')
interface Figures {
  requests: number
  seconds: number
  /** CPU seconds: the configuration's nodes (and each), their PostgreSQL backends, the server's own processes, everything else on the server. */
  nodeCpu: number
  nodeCpuEach: number[]
  pgOwn: number
  pgBackground: number
  pgOther: number
  /** Backends of the nodes that ended within the phase (their time in it is lost). */
  pgEnded: number
  events: number
  audit: number
  walOwn: number
  walAll: number
  walTypes: WalTypes
  /** After a check-in phase: VACUUM of the database (autovacuum's work), its backend's CPU seconds and WAL bytes. */
  vacuumCpu: number
  vacuumWal: number
  non2xx: Record<string, number>
  errors: number
}
let dbOid = 0

async function measure(cfg: Node[], phase: Phase, auth: Record<string, string>): Promise<Figures> {
  const own = new Set(cfg.map((n) => `bench-${n.name}`))
  const names0 = await backendNames()
  const c0 = await counters()
  const wal = followWal(c0.lsn, c0.flushed, dbOid)
  const pg0 = pgProcesses()
  const n0 = cfg.map((n) => cpuSeconds(n.child.pid!))
  let d: Driven
  const bases = cfg.map((n) => n.base)
  if (phase === 'idle') {
    const t0 = performance.now()
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000))
    d = { ok: 0, codes: {}, errors: 0, seconds: (performance.now() - t0) / 1000 }
  } else if (phase.startsWith('check-in')) {
    d = await drive(bases, SECONDS, phase === 'check-in, mix' ? checkIn : unchangedCheckIn)
    // Unchanged check-ins' times are written once a second per node: that write is theirs.
    await new Promise((r) => setTimeout(r, 1200))
  } else {
    const p = phase === 'GET admin/getuserdetails' ? '/admin/getuserdetails' : '/agents?PageSize=10'
    d = await drive(bases, SECONDS, () => ({ method: 'GET', path: p, headers: auth }))
  }
  const nodeCpuEach = cfg.map((n, i) => cpuSeconds(n.child.pid!) - n0[i])
  const pg1 = pgProcesses()
  const names1 = await backendNames()
  const c1 = await counters()
  let pgOwn = 0
  let pgBackground = 0
  let pgOther = 0
  for (const [pid, p] of pg1) {
    const delta = p.cpu - (pg0.get(pid)?.cpu ?? 0)
    const name = names1.get(pid) ?? names0.get(pid)
    if (name && own.has(name)) pgOwn += delta
    else if (p.background) pgBackground += delta
    else pgOther += delta
  }
  const pgEnded = [...names0].filter(([pid, name]) => own.has(name) && !pg1.has(pid)).length
  const walAll = (await probe!.query('SELECT pg_wal_lsn_diff($1, $2)::float8 AS b', [c1.lsn, c0.lsn])).rows[0].b as number
  const ownWal = await wal.end(c1.lsn)
  const vacuum = phase.startsWith('check-in') ? await vacuumed() : { cpu: 0, wal: 0 }
  const non2xx = Object.fromEntries(Object.entries(d.codes).filter(([c]) => !c.startsWith('2')))
  return {
    requests: d.ok,
    seconds: d.seconds,
    nodeCpu: nodeCpuEach.reduce((a, b) => a + b, 0),
    nodeCpuEach,
    pgOwn,
    pgBackground,
    pgOther,
    pgEnded,
    events: c1.events - c0.events,
    audit: c1.audit - c0.audit,
    walOwn: ownWal.bytes,
    walAll,
    walTypes: ownWal.types,
    vacuumCpu: vacuum.cpu,
    vacuumWal: vacuum.wal,
    non2xx,
    errors: d.errors,
  }
}

/**
 * VACUUM of the bench's database, as autovacuum would do it (this server may run without
 * autovacuum; without it the agents' old row versions pile up and slow the next phases):
 * the CPU of the probe's backend and the WAL it wrote.
 */
async function vacuumed(): Promise<{ cpu: number; wal: number }> {
  const pid = (await probe!.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number
  const lsn0 = (await probe!.query('SELECT pg_current_wal_insert_lsn()::text AS l')).rows[0].l
  const cpu0 = cpuSeconds(pid)
  await probe!.query('VACUUM')
  const cpu = cpuSeconds(pid) - cpu0
  const wal = (await probe!.query('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1)::float8 AS b', [lsn0])).rows[0].b as number
  return { cpu, wal }
}

async function run() {
  const a = await start(nodeEnv('a', PORT), path.join(workDir, 'a.log'), { pin: false })
  nodes.push({ name: 'a', base: `http://127.0.0.1:${PORT}/prime/webui`, child: a })
  // Node a has migrated the database; the other three start together.
  const bs = await Promise.all(
    [1, 2, 3].map(async (i) => {
      const name = `b${i}`
      const child = await start(nodeEnv(name, PORT + i), path.join(workDir, `${name}.log`), { pin: false })
      return { name, base: `http://127.0.0.1:${PORT + i}/prime/webui`, child }
    }),
  )
  nodes.push(...bs)
  probe = new pg.Client({ connectionString: dbUrl, application_name: 'bench-probe' })
  await probe.connect()
  dbOid = Number((await probe.query('SELECT oid FROM pg_database WHERE datname = $1', [dbName])).rows[0].oid)
  const enrollSeconds = await enroll(nodes)
  console.error(`Enrolled ${agents.length} agents (and their first check-ins) in ${enrollSeconds.toFixed(1)} s`)
  const login = await fetch(`${nodes[0].base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }) })
  if (login.status !== 200) throw new Error(`login: ${login.status} ${await login.text()}`)
  const auth = { authorization: `Bearer ${((await login.json()) as { token: string }).token}` }

  const configs = [
    { label: 'one node', nodes: [nodes[0]] },
    { label: 'three nodes', nodes: bs },
  ].filter((_, i) => CONFIGS === 'both' || CONFIGS === (i ? 'three' : 'one'))
  // Warm-up of each configuration (JIT, plans, kept answers), not measured.
  for (const cfg of configs) {
    const bases = cfg.nodes.map((n) => n.base)
    await drive(bases, 3, checkIn)
    await drive(bases, 2, () => ({ method: 'GET', path: '/admin/getuserdetails', headers: auth }))
    await drive(bases, 2, () => ({ method: 'GET', path: '/agents?PageSize=10', headers: auth }))
  }
  Object.assign(mix, { unchanged: 0, changed: 0, withError: 0 })
  const results = configs.map(() => new Map<Phase, Figures[]>(PHASES.map((p) => [p, []])))
  for (let round = 0; round < ROUNDS; round++) {
    for (const i of configs.length === 1 ? [0] : round % 2 ? [1, 0] : [0, 1]) {
      for (const phase of PHASES) {
        const f = await measure(configs[i].nodes, phase, auth)
        results[i].get(phase)!.push(f)
        console.error(
          `round ${round + 1}, ${configs[i].label}, ${phase}: ${f.requests} answered in ${f.seconds.toFixed(1)} s, node CPU ${f.nodeCpu.toFixed(2)} s (${f.nodeCpuEach.map((x) => x.toFixed(2)).join(' + ')}), PostgreSQL backends ${f.pgOwn.toFixed(2)} s, server processes ${f.pgBackground.toFixed(2)} s, other ${f.pgOther.toFixed(2)} s, events ${f.events}, WAL ${(f.walOwn / 1e6).toFixed(1)} of ${(f.walAll / 1e6).toFixed(1)} MB${Object.keys(f.non2xx).length ? `, non-2xx ${JSON.stringify(f.non2xx)}` : ''}`,
        )
      }
    }
  }
  report(configs, results)
}

// ---------------------------------------------------------------------------------------
// The tables

/** The median of the rounds that have a figure (a WAL figure may be missing). */
const med = (xs: number[]) => median(xs.filter(Number.isFinite))

/** Median and the rounds' spread: "123 (110–140)". */
function cell(xs: number[], digits = 0): string {
  const f = (x: number) => (Number.isFinite(x) ? x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits }) : 'n/a')
  const ys = xs.filter(Number.isFinite)
  return ys.length ? `${f(med(ys))} (${f(Math.min(...ys))}–${f(Math.max(...ys))})${ys.length < xs.length ? ` [${ys.length} of ${xs.length}]` : ''}` : 'n/a'
}

const ratioText = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a')
type Cost = 'nodeCpu' | 'pgOwn' | 'pgBackground' | 'walOwn' | 'walAll' | 'events' | 'audit' | 'vacuumCpu' | 'vacuumWal'
/** A figure per request answered, each round; µs for CPU seconds. */
const perReq = (xs: Figures[], k: Cost, scale = 1e6) => xs.map((f) => (f[k] * scale) / Math.max(1, f.requests))
/**
 * CPU µs per request beyond what the same nodes and backends use idle (the idle phase of the
 * same round and configuration, per second, times the phase's seconds): the part that grows
 * with the load.
 */
const aboveIdle = (xs: Figures[], idle: Figures[], k: 'nodeCpu' | 'pgOwn') => xs.map((f, r) => ((f[k] - (idle[r][k] / idle[r].seconds) * f.seconds) * 1e6) / Math.max(1, f.requests))

function report(configs: { label: string; nodes: Node[] }[], results: Map<Phase, Figures[]>[]) {
  const loadAtEnd = os.loadavg().map((x) => x.toFixed(1))
  console.log(
    `\n${AGENTS} agents on PostgreSQL ${dbName} (made and dropped by the run); ${ROUNDS} rounds, ${configs.length === 2 ? 'the two configurations in turn (order swapped each round)' : configs[0].label}, ${SECONDS} s per phase (idle ${IDLE_SECONDS} s), ${CONNECTIONS} keep-alive connections spread evenly over the configuration's nodes; nothing pinned; ` +
      `load average ${loadAtStart.join(' ')} at the start, ${loadAtEnd.join(' ')} at the end (${os.cpus().length} CPUs, shared with other work). Check-in mix measured: ${mix.unchanged} unchanged, ${mix.changed} flipping one peripheral's presence, ${mix.withError} reporting one agent error.`,
  )
  console.log(
    "Medians over the rounds, (min–max) the spread. CPU: user + system time from /proc/<pid>/stat (10 ms ticks) per request answered 2xx; PostgreSQL's backends are the nodes' (by application_name), its server processes (checkpointer, walwriter, background writer, postmaster) work for every database on it. WAL: this database's records (pg_waldump), and the whole server's.\n",
  )
  console.log(
    '| phase | configuration | answered /s | node CPU µs / request (all nodes) | node, above idle | PostgreSQL backends µs / request | backends, above idle | PostgreSQL server processes µs / request | events / request | events /s | audit records / request | WAL bytes / request: this database | whole server | non-2xx / errors |',
  )
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|')
  for (const phase of PHASES.slice(1)) {
    for (const [i, cfg] of configs.entries()) {
      const xs = results[i].get(phase)!
      const idle = results[i].get('idle')!
      const codes: Record<string, number> = {}
      for (const f of xs) for (const [c, n] of Object.entries(f.non2xx)) codes[c] = (codes[c] ?? 0) + n
      const bad = Object.values(codes).reduce((a, b) => a + b, 0)
      const errs = xs.reduce((n, f) => n + f.errors, 0)
      const cells = [
        cell(xs.map((f) => f.requests / f.seconds)),
        cell(perReq(xs, 'nodeCpu')),
        cell(aboveIdle(xs, idle, 'nodeCpu')),
        cell(perReq(xs, 'pgOwn')),
        cell(aboveIdle(xs, idle, 'pgOwn')),
        cell(perReq(xs, 'pgBackground')),
        cell(perReq(xs, 'events', 1), 3),
        cell(
          xs.map((f) => f.events / f.seconds),
          1,
        ),
        cell(perReq(xs, 'audit', 1), 3),
        cell(perReq(xs, 'walOwn', 1)),
        cell(perReq(xs, 'walAll', 1)),
        `${bad}${bad ? ` ${JSON.stringify(codes)}` : ''} / ${errs}`,
      ]
      console.log(`| ${phase} | ${cfg.label} | ${cells.join(' | ')} |`)
    }
  }
  if (configs.length === 2) console.log('\nRatio three nodes / one node of the medians per request (1.00: a request costs the same however many nodes share the load):\n')
  if (configs.length === 2) console.log('| phase | node CPU | node, above idle | PostgreSQL backends | backends, above idle | PostgreSQL server processes |')
  if (configs.length === 2) console.log('|---|---|---|---|---|---|')
  for (const phase of configs.length === 2 ? PHASES.slice(1) : []) {
    const [one, three] = results.map((r) => r.get(phase)!)
    const [idle1, idle3] = results.map((r) => r.get('idle')!)
    const ratio = (k: 'nodeCpu' | 'pgOwn' | 'pgBackground') => ratioText(med(perReq(three, k)) / med(perReq(one, k)))
    const ratioAbove = (k: 'nodeCpu' | 'pgOwn') => ratioText(med(aboveIdle(three, idle3, k)) / med(aboveIdle(one, idle1, k)))
    console.log(`| ${phase} | ${ratio('nodeCpu')} | ${ratioAbove('nodeCpu')} | ${ratio('pgOwn')} | ${ratioAbove('pgOwn')} | ${ratio('pgBackground')} |`)
  }
  console.log('\nIdle (no requests), CPU ms per second of wall time:\n')
  console.log("| configuration | each node | PostgreSQL, the nodes' backends | PostgreSQL server processes | the server's other backends (other work on it) |")
  console.log('|---|---|---|---|---|')
  for (const [i, cfg] of configs.entries()) {
    const xs = results[i].get('idle')!
    const rate = (k: 'nodeCpu' | 'pgOwn' | 'pgBackground' | 'pgOther', per = 1) =>
      cell(
        xs.map((f) => (f[k] * 1000) / f.seconds / per),
        1,
      )
    console.log(`| ${cfg.label} | ${rate('nodeCpu', cfg.nodes.length)} | ${rate('pgOwn')} | ${rate('pgBackground')} | ${rate('pgOther')} |`)
  }
  for (const phase of (['check-in, mix', 'check-in, unchanged'] as const).filter((p) => PHASES.includes(p))) {
    // Every round's, both configurations: this database's WAL by record type.
    const xs = results.flatMap((r) => r.get(phase)!).filter((f) => Number.isFinite(f.walOwn))
    const requests = xs.reduce((n, f) => n + f.requests, 0)
    const types: WalTypes = new Map()
    for (const f of xs)
      for (const [k, v] of f.walTypes) {
        const t = types.get(k) ?? { n: 0, bytes: 0 }
        t.n += v.n
        t.bytes += v.bytes
        types.set(k, t)
      }
    const total = [...types.values()].reduce((n, t) => n + t.bytes, 0)
    if (!total) continue
    console.log(`\nThis database's WAL in the "${phase}" phases by record type (${(total / 1e6).toFixed(0)} MB for ${requests} check-ins; the largest):\n`)
    console.log('| record | per check-in | bytes per check-in | share |')
    console.log('|---|---|---|---|')
    for (const [type, t] of [...types].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 8))
      console.log(`| ${type} | ${(t.n / requests).toFixed(2)} | ${(t.bytes / requests).toFixed(0)} | ${((100 * t.bytes) / total).toFixed(0)}% |`)
  }
  console.log("\nVACUUM after each check-in phase (autovacuum's work, outside the phase), per check-in of the phase:\n")
  console.log('| phase | configuration | PostgreSQL CPU µs | WAL bytes |')
  console.log('|---|---|---|---|')
  for (const phase of (['check-in, mix', 'check-in, unchanged'] as const).filter((p) => PHASES.includes(p)))
    for (const [i, cfg] of configs.entries()) {
      const xs = results[i].get(phase)!
      console.log(`| ${phase} | ${cfg.label} | ${cell(perReq(xs, 'vacuumCpu'))} | ${cell(perReq(xs, 'vacuumWal', 1))} |`)
    }
  if (walFailures.size) console.log(`\nWAL not followed to the end of these phases (their figure is left out):`)
  for (const f of walFailures) console.log(`- ${f}`)
  const all = results.flatMap((r) => [...r.values()].flat())
  const ended = all.reduce((n, f) => n + f.pgEnded, 0)
  if (ended) console.log(`\n${ended} backends of the nodes ended within a phase over the run (their time in that phase is not counted).`)
  const other = all.reduce((n, f) => n + f.pgOther, 0)
  const seconds = all.reduce((n, f) => n + f.seconds, 0)
  console.log(`\nOther work on the PostgreSQL server over the measured phases (backends of other databases): ${other.toFixed(1)} CPU s in ${seconds.toFixed(0)} s, not counted above.`)

  // The model: the three-node figures (the dearer ones), check-ins only, nothing subtracted, VACUUM added.
  if (!PHASES.includes('check-in, mix') || !PHASES.includes('check-in, unchanged')) return
  const modelled = configs.at(-1)!.label
  const three = results.at(-1)!.get('check-in, mix')!
  const still = results.at(-1)!.get('check-in, unchanged')!
  const nodeUs = med(perReq(three, 'nodeCpu'))
  const pgInPhase = med(perReq(three, 'pgOwn')) + med(perReq(three, 'pgBackground'))
  const pgUs = pgInPhase + med(perReq(three, 'vacuumCpu'))
  const events = med(perReq(three, 'events', 1))
  const wal = med(perReq(three, 'walOwn', 1))
  const target = 0.5
  // A changed check-in's own cost, from the mix and the unchanged ones: mix = (1 - p) x unchanged + p x changed.
  const p = (mix.changed + mix.withError) / Math.max(1, mix.changed + mix.withError + mix.unchanged)
  const changed = (mix: number, unchanged: number) => ((mix - (1 - p) * unchanged) / p).toFixed(0)
  const stillNode = med(perReq(still, 'nodeCpu'))
  const stillPg = med(perReq(still, 'pgOwn')) + med(perReq(still, 'pgBackground'))
  console.log(
    `\n${modelled}: an unchanged check-in ${stillNode.toFixed(0)} µs of node CPU and ${stillPg.toFixed(0)} µs of PostgreSQL; so a changed one (${(p * 100).toFixed(1)}% of the mix) about ${changed(nodeUs, stillNode)} µs and ${changed(pgInPhase, stillPg)} µs (VACUUM apart).`,
  )
  console.log(
    `\nCapacity model from the ${modelled} check-in medians, nothing subtracted (node ${nodeUs.toFixed(0)} µs, PostgreSQL ${pgUs.toFixed(0)} µs of the nodes' backends, the server processes and VACUUM, ${events.toFixed(3)} events and ${wal.toFixed(0)} WAL bytes per check-in), cores at ${target * 100}% utilization:\n`,
  )
  console.log('| agents, check-in every 60 s | check-ins /s | node cores | PostgreSQL cores | events /s | WAL MB/s |')
  console.log('|---|---|---|---|---|---|')
  for (const fleet of [100_000, 500_000, 1_000_000]) {
    const rate = fleet / 60
    console.log(
      `| ${fleet.toLocaleString('en-US')} | ${rate.toLocaleString('en-US', { maximumFractionDigits: 0 })} | ${((rate * nodeUs) / 1e6 / target).toFixed(1)} | ${((rate * pgUs) / 1e6 / target).toFixed(1)} | ${(rate * events).toFixed(0)} | ${((rate * wal) / 1e6).toFixed(1)} |`,
    )
  }
}

// Last: everything above is declared by now.
try {
  await run()
} finally {
  for (const n of nodes) await stop(n.child)
  await probe?.end()
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)
  await admin.end()
  fs.rmSync(workDir, { recursive: true, force: true })
}
