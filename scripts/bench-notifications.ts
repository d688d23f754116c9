// npm run bench -- notifications: risk notifications at scale. Seeds a temporary data dir
// with BENCH_NOTIFICATIONS (100,000) risk notifications raised the way production raises
// them (risky events through the events trigger; a fifth of them repeated, some pinned and
// dismissed), starts the built server on 127.0.0.1 and measures, one request at a time:
// the risk list with filters, the counts; then opens BENCH_SUBSCRIBERS (1,000) streams
// and times how long a notification raised by an agent check-in takes to reach them all.
// Each list case is also timed in-process (the repository call alone).
//
// Settings: BENCH_NOTIFICATIONS (100000), BENCH_REQUESTS per case (300),
// BENCH_SUBSCRIBERS (1000), BENCH_ROUNDS of the stream case (5), BENCH_LOG_LEVEL (info, as in production),
// BENCH_KEEP=1 keeps the data dir.
import { spawnSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { openDatabase } from '../db/index.js'
import { createRepos } from '../lib/repos.js'
import { hashPassword, sha256 } from '../lib/passwords.js'
import { eventOf } from '../lib/event-codes.js'
import type { RiskFilter } from '../lib/notifications/ports.js'
import type { Sort } from '../lib/listing.js'
import { PIN, pct, ms, start } from './bench-support.js'

const NOTIFICATIONS = Number(process.env.BENCH_NOTIFICATIONS ?? 100_000)
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 300)
const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 1000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const PORT = 18086
const PASSWORD = 'Bench-password-123'
const SECRET = 'pes_bench_enrollment_secret_0123456789'
const STREAMS_PER_CALLER = 5
const DAY = 86_400_000

// ---------------------------------------------------------------------------------------
// Seed

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-notifications-'))
const dbFile = path.join(dataDir, 'prime.sqlite')
const db = openDatabase(dbFile)
const repos = createRepos(db, 0)
const t0 = performance.now()
const now = Date.now()
const agents = Math.max(1, Math.ceil(NOTIFICATIONS / 10))
const kinds = [
  { ...eventOf('attackTool'), vid: '0483', pid: '5740' },
  { ...eventOf('vulnerable'), vid: '046D', pid: 'C52B' },
  { ...eventOf('unapprovedOnArmed'), vid: '0951', pid: '1666' },
]
const kindOf = (i: number) => kinds[i % 10 === 0 ? 0 : i % 10 <= 3 ? 1 : 2]
const hostOf = (a: number) => `BENCH-${String(a).padStart(6, '0')}`
const ipOf = (a: number) => `10.${(a >> 16) & 255}.${(a >> 8) & 255}.${a & 255}`
const uuids: string[] = []
console.error(`Seeding ${NOTIFICATIONS} risk notifications on ${agents} agents into ${dataDir} ...`)
db.transaction(() => {
  const insertAgent = db.prepare(`INSERT INTO agents (uuid, machine_id, enrolled_ms, host_identifier, local_ip_address, license_status)
    VALUES (?, ?, ?, ?, ?, 'Activated')`)
  for (let a = 0; a < agents; a++) {
    const uuid = crypto.randomUUID()
    uuids.push(uuid)
    insertAgent.run(uuid, crypto.randomUUID(), now - 60 * DAY, hostOf(a), ipOf(a))
  }
  const event = (i: number, createdMs: number) => {
    const a = i % agents
    const k = kindOf(i)
    const deviceId = `USB\\VID_${k.vid}&PID_${k.pid}\\SER${String(i).padStart(8, '0')}`
    repos.events.record(createdMs, [
      {
        code: k.code,
        severity: k.severity,
        category: 'USB',
        description: k.description,
        entityId: `${hostOf(a)} (${ipOf(a)})`,
        details: `Device (VID ${k.vid}, PID ${k.pid}) on ${hostOf(a)}.`,
        assetKey: uuids[a],
        assetName: hostOf(a),
        peripheralAssetId: deviceId,
        peripheralVid: k.vid,
        peripheralPid: k.pid,
        peripheralIcon: 1,
      },
    ])
  }
  const span = 30 * DAY
  for (let i = 0; i < NOTIFICATIONS; i++) event(i, now - span + Math.floor((i * span) / NOTIFICATIONS))
  // A fifth occur again later.
  for (let i = 0; i < NOTIFICATIONS; i += 5) event(i, now - span / 2 + Math.floor((i * span) / 2 / NOTIFICATIONS))
})()
const n = repos.notifications
db.transaction(() => {
  for (let id = 1; id <= NOTIFICATIONS; id += Math.max(1, Math.floor(NOTIFICATIONS / 50))) n.pinRisk(id, 'bench', now)
  for (let id = 7; id <= NOTIFICATIONS; id += 20) n.dismissRisk(id, 'bench', now)
})()
// The bench account and the streams' integration tokens (5 streams each).
const hash = await hashPassword(PASSWORD)
const adminId = repos.users.insert(
  { user_name: 'bench', email: 'bench@example.com', first_name: 'Bench', last_name: 'Runner', phone: null, image: null, profile: 30, password_hash: hash, is_active: 1 },
  now,
)
// The bench account has read everything up to the middle: isRead filters split the list.
n.setRiskMark(`user:${adminId}`, Math.floor(n.counter().seq / 2))
const callers = Math.ceil(SUBSCRIBERS / STREAMS_PER_CALLER)
const tokens: string[] = []
db.transaction(() => {
  for (let i = 0; i < callers; i++) {
    const token = `pit_${crypto.randomBytes(32).toString('base64url')}`
    tokens.push(token)
    repos.integrationTokens.insert({
      id: crypto.randomUUID(),
      name: `stream-${i}`,
      token_hash: sha256(token),
      profile: 10,
      created_by: 'bench',
      created_by_user_id: adminId,
      created_ms: now,
      expires_ms: null,
    })
  }
})()
db.pragma('wal_checkpoint(TRUNCATE)')
const counter = n.counter()
console.error(`Seeded in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${counter.risk_open} open, change number ${counter.seq}, ${(fs.statSync(dbFile).size / 1024 / 1024).toFixed(0)} MiB`)

// ---------------------------------------------------------------------------------------
// Cases, and their floor in-process

if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])
const mark = n.marks(`user:${adminId}`).risk_seq
const day = (d: number) => new Date(now - d * DAY).toISOString().slice(0, 10)
const sort = (field: string, direction: 'asc' | 'desc' = 'desc'): Sort => ({ field, direction })
const host = hostOf(Math.floor(agents / 3))
interface Case {
  name: string
  query: string
  filter: RiskFilter
  sort: Sort
  pageSize?: number
  offset?: number
}
const cases: Case[] = [
  { name: 'default (not dismissed, lastSeen desc)', query: '', filter: {}, sort: sort('lastSeen') },
  { name: 'kind + isRead=false', query: 'kind=KnownAttackTool&isRead=false', filter: { kinds: ['KnownAttackTool'], isRead: false }, sort: sort('lastSeen') },
  {
    name: 'minimumSeverity + isPinned=false + sort severity',
    query: 'minimumSeverity=Error&isPinned=False&sortBy=severity_asc',
    filter: { minimumSeverity: 3, isPinned: false },
    sort: sort('severity', 'asc'),
  },
  {
    name: 'kind + fromDate/toDate (10 days)',
    query: `kind=UnapprovedPeripheralOnArmedAgent&fromDate=${day(12)}&toDate=${day(3)}`,
    filter: { kinds: ['UnapprovedPeripheralOnArmedAgent'], from: Date.parse(day(12)), toExclusive: Date.parse(day(3)) + DAY },
    sort: sort('lastSeen'),
  },
  { name: 'hostIdentifier contains', query: `hostIdentifier=${host.toLowerCase()}`, filter: { hostIdentifier: host.toLowerCase() }, sort: sort('lastSeen') },
  { name: 'globalSearch + isRead=true', query: 'globalSearch=c52b&isRead=true', filter: { globalSearch: 'c52b', isRead: true }, sort: sort('lastSeen') },
  { name: 'vid/pid + severity', query: 'vid=0483&pid=5740&severity=Critical', filter: { vid: '0483', pid: '5740', severity: 2 }, sort: sort('lastSeen') },
  { name: 'isPinned=true', query: 'isPinned=true', filter: { isPinned: true }, sort: sort('lastSeen') },
  { name: 'isDismissed=true, 50 per page', query: 'isDismissed=true&pageSize=50', filter: { isDismissed: true }, sort: sort('lastSeen'), pageSize: 50 },
  { name: 'sort occurrences, page 100', query: 'sortBy=occurrences_desc&pageNumber=100', filter: {}, sort: sort('occurrences'), offset: 99 * 20 },
]

function floor(fn: () => unknown): { p50: number; p99: number } {
  for (let i = 0; i < 5; i++) fn()
  const times: number[] = []
  const until = performance.now() + 1000
  while (times.length < 50 || (performance.now() < until && times.length < 2000)) {
    const t = performance.now()
    fn()
    times.push(performance.now() - t)
  }
  return { p50: pct(times, 0.5), p99: pct(times, 0.99) }
}
console.error('Timing the cases in-process ...')
const floors = cases.map((c) => floor(() => n.riskList(c.filter, c.sort, mark, c.pageSize ?? 20, c.offset ?? 0)))
const countsFloor = floor(() => [n.riskUnread(mark), n.riskPinned(), n.counter(), n.healthCounts(0)])
db.close()

// ---------------------------------------------------------------------------------------
// Over HTTP, one request at a time

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
function request(method: string, url: string, headers: Record<string, string>, body?: unknown): Promise<{ status: number; body: string; ms: number; headers: http.IncomingHttpHeaders }> {
  const payload = body === undefined ? undefined : JSON.stringify(body)
  const t = performance.now()
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: PORT, path: `/prime/webui${url}`, method, agent, headers: { ...headers, ...(payload ? { 'content-type': 'application/json' } : {}) } },
      (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (c: string) => (text += c))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, ms: performance.now() - t, headers: res.headers }))
      },
    )
    req.on('error', reject)
    req.end(payload)
  })
}

const serverEnv = (kept: boolean) => ({
  PRIME_DATA_DIR: dataDir,
  PORT: String(PORT),
  LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
  PRIME_ADMIN_PASSWORD: PASSWORD,
  PRIME_RATE_LIMIT_MAX: '100000000',
  PRIME_AGENT_ENROLLMENT_SECRET: SECRET,
  PRIME_AGENT_MIN_CHECKIN_SECONDS: '0',
  PRIME_ACCESS_TOKEN_TTL: '3600',
  PRIME_LICENSE_SEATS: String(agents + 1000),
  PRIME_AGENT_DISCONNECT_SECONDS: '86400',
  // The checks' own cost (an integrity check of the whole file) stays out of the measurements.
  PRIME_HEALTH_CHECK_SECONDS: '3600',
  PRIME_KEPT_LIST_ANSWERS: kept ? '64' : '0',
  // Every subscriber connects from 127.0.0.1.
  PRIME_MAX_CONNECTIONS_PER_ADDRESS: '0',
})

async function signIn() {
  const login = await request('POST', '/Auth/LocalLogin', {}, { username: 'bench', password: PASSWORD })
  if (login.status !== 200) throw new Error(`login: ${login.status} ${login.body}`)
  return { authorization: `Bearer ${JSON.parse(login.body).token}` }
}

/** Every list case and the counts, one request at a time: p50 and p99 of each. */
async function measure(auth: Record<string, string>) {
  const out = { cases: [] as { matching: string; p50: number; p99: number }[], all: [] as number[], counts: [] as number[] }
  for (const c of cases) {
    const times: number[] = []
    let matching = ''
    for (let r = 0; r < REQUESTS + 5; r++) {
      const res = await request('GET', `/systemNotification/riskNotifications${c.query ? `?${c.query}` : ''}`, auth)
      if (res.status !== 200) throw new Error(`${c.name}: ${res.status} ${res.body}`)
      if (r >= 5) times.push(res.ms)
      matching = String(res.headers['x-total-count'])
    }
    out.all.push(...times)
    out.cases.push({ matching, p50: pct(times, 0.5), p99: pct(times, 0.99) })
  }
  for (let r = 0; r < REQUESTS * 2 + 5; r++) {
    const res = await request('GET', '/systemNotification', auth)
    if (res.status !== 200) throw new Error(`counts: ${res.status} ${res.body}`)
    if (r >= 5) out.counts.push(res.ms)
  }
  return out
}

// Without kept answers first: every request is answered from the database.
console.error('Measuring without kept answers ...')
let server = await start(serverEnv(false), path.join(dataDir, 'server-kept-off.log'))
let cold: Awaited<ReturnType<typeof measure>>
try {
  cold = await measure(await signIn())
} finally {
  await new Promise<void>((r) => {
    server.on('exit', () => r())
    server.kill('SIGTERM')
  })
}
console.error('Measuring with kept answers (the default) ...')
server = await start(serverEnv(true), path.join(dataDir, 'server.log'))
const rows: string[] = []
try {
  const auth = await signIn()
  const warm = await measure(auth)
  rows.push('| case | matching | p50 | p99 | p50, kept answers off | p99, kept answers off | in-process p50 | in-process p99 |', '|---|---:|---:|---:|---:|---:|---:|---:|')
  cases.forEach((c, i) => {
    const w = warm.cases[i],
      k = cold.cases[i]
    rows.push(`| ${c.name} | ${w.matching} | ${ms(w.p50)} | ${ms(w.p99)} | ${ms(k.p50)} | ${ms(k.p99)} | ${ms(floors[i].p50)} | ${ms(floors[i].p99)} |`)
  })
  rows.push(`| **all list cases** | | ${ms(pct(warm.all, 0.5))} | **${ms(pct(warm.all, 0.99))}** | ${ms(pct(cold.all, 0.5))} | **${ms(pct(cold.all, 0.99))}** | | |`)
  rows.push(
    `| counts (systemNotification) | | ${ms(pct(warm.counts, 0.5))} | **${ms(pct(warm.counts, 0.99))}** | ${ms(pct(cold.counts, 0.5))} | **${ms(pct(cold.counts, 0.99))}** | ${ms(countsFloor.p50)} | ${ms(countsFloor.p99)} |`,
  )

  // -------------------------------------------------------------------------------------
  // Streams: SUBSCRIBERS open at once; an agent plugs an attack tool in, each round a new one.

  console.error(`Opening ${SUBSCRIBERS} streams ...`)
  const streamAgent = new http.Agent({ keepAlive: false, maxSockets: Infinity })
  const arrivals: number[][] = []
  let round = -1
  let opened = 0
  const connections: http.ClientRequest[] = []
  await new Promise<void>((resolve, reject) => {
    for (let i = 0; i < SUBSCRIBERS; i++) {
      const token = tokens[Math.floor(i / STREAMS_PER_CALLER)]
      let buffer = ''
      let counted = false
      const req = http.get(
        { host: '127.0.0.1', port: PORT, path: '/prime/webui/systemNotification/stream', agent: streamAgent, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } },
        (res) => {
          if (res.statusCode !== 200) return reject(new Error(`stream ${i}: ${res.statusCode}`))
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => {
            buffer += chunk
            let end: number
            while ((end = buffer.indexOf('\n\n')) >= 0) {
              const block = buffer.slice(0, end)
              buffer = buffer.slice(end + 2)
              if (!counted && block.includes('event: counts')) {
                counted = true
                if (++opened === SUBSCRIBERS) resolve()
              }
              if (round >= 0 && block.includes('event: riskNotification') && block.includes(`"hostIdentifier":"BENCH-PLUG-${round}"`)) arrivals[round].push(performance.now())
            }
          })
        },
      )
      req.on('error', reject)
      connections.push(req)
    }
  })
  const enroll = await request('POST', '/gateway/enroll', {}, { enrollmentSecret: SECRET, machineId: 'bench-stream-machine', hostIdentifier: 'BENCH-PLUG' })
  if (enroll.status !== 200) throw new Error(`enroll: ${enroll.status} ${enroll.body}`)
  const credential = JSON.parse(enroll.body).credential as string
  const state = (r: number, plugged: boolean) => ({
    hostIdentifier: `BENCH-PLUG-${r}`,
    operationalStatus: 'Free',
    localIpAddress: '10.99.0.1',
    peripherals: plugged
      ? [{ deviceID: `USB\\VID_0483&PID_5740\\PLUG${r}`, vid: '0483', pid: '5740', serialNumber: `PLUG${r}`, present: true, classCode: '03', subclassCode: '01', protocolCode: '01' }]
      : [],
  })
  const latencies: { max: number; p50: number; p99: number; received: number }[] = []
  for (let r = 0; r < ROUNDS; r++) {
    arrivals[r] = []
    const res0 = await request('POST', '/gateway/checkin', { authorization: `Bearer ${credential}` }, state(r, false))
    if (res0.status !== 200) throw new Error(`check-in: ${res0.status} ${res0.body}`)
    await new Promise((r2) => setTimeout(r2, 300 + Math.random() * 250))
    round = r
    const sent = performance.now()
    const res = await request('POST', '/gateway/checkin', { authorization: `Bearer ${credential}` }, state(r, true))
    if (res.status !== 200) throw new Error(`check-in: ${res.status} ${res.body}`)
    const deadline = performance.now() + 5000
    while (arrivals[r].length < SUBSCRIBERS && performance.now() < deadline) await new Promise((r2) => setTimeout(r2, 5))
    const after = arrivals[r].map((t) => t - sent)
    latencies.push({ max: after.length ? Math.max(...after) : NaN, p50: pct(after, 0.5), p99: pct(after, 0.99), received: after.length })
  }
  for (const c of connections) c.destroy()
  const maxes = latencies.map((l) => l.max)
  rows.push('', `| stream: ${SUBSCRIBERS} subscribers (${callers} callers), ${ROUNDS} rounds | received | p50 | p99 | all (max) |`, '|---|---:|---:|---:|---:|')
  latencies.forEach((l, i) => rows.push(`| round ${i + 1} | ${l.received} | ${ms(l.p50)} | ${ms(l.p99)} | ${ms(l.max)} |`))
  rows.push(`| **median of rounds** | | | | **${ms(pct(maxes, 0.5))}** |`)
} finally {
  server.kill('SIGTERM')
}

console.log(`\nRisk notifications: ${NOTIFICATIONS} seeded (${counter.risk_open} not dismissed), ${REQUESTS} sequential requests per case, keep-alive, one connection; times in ms.`)
console.log(
  `Server ${PIN ? 'on CPU 1, load generator on CPU 0' : 'not pinned'}; load average at the end ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}.\n`,
)
console.log(rows.join('\n'))
console.log('\nTargets: list with filters p99 < 20 ms; counts < 5 ms; every subscriber receives a new notification within 1 s.')
if (process.env.BENCH_KEEP) console.error(`Kept ${dataDir}`)
else fs.rmSync(dataDir, { recursive: true, force: true })
