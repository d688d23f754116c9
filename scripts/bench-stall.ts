// npm run bench -- stall: the expensive requests an outside review sent with low-privilege
// credentials (a User account and a User-profile integration token), against a seeded fleet
// of BENCH_AGENTS agents (100,000) with 10 peripherals each, while an Administrator's small
// read (admin/getuserdetails) and /healthz are asked every 100 ms. For each probe: its
// answers, how long it took, the small read's and the probe's worst and p99 waits, whether
// /healthz always answered, and the server's largest RSS. Bounds: the small read's worst
// wait under 250 ms, /healthz always answered, RSS under 1 GB.
//
// The server runs as a real process on 127.0.0.1 (unpinned: its reader threads may use the
// other core). BENCH_STALL_SEED names a file the seeded database is kept in and copied from
// on the next run. BENCH_SERVER names another build's server (dist/lib/server.js) to measure
// it the same way (a tree before a change); BENCH_STALL_SKIP skips probes by name (separated by ';').
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { openDatabase } from '../db/index.js'
import { memory, ms, pct, start, stop } from './bench-support.js'
import { seedFleet } from './seed.js'

const AGENTS = Number(process.env.BENCH_AGENTS ?? 100_000)
const LOOP_SECONDS = Number(process.env.BENCH_STALL_SECONDS ?? 30)
const PROBE_TIMEOUT_MS = Number(process.env.BENCH_STALL_TIMEOUT_SECONDS ?? 120) * 1000
const SKIP = new Set((process.env.BENCH_STALL_SKIP ?? '').split(';').filter(Boolean))
const PASSWORD = 'Bench-password-123'
const PORT = 20_000 + Math.floor(Math.random() * 20_000)
const base = `http://127.0.0.1:${PORT}`

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-stall-'))
const kept = process.env.BENCH_STALL_SEED
const file = path.join(dir, 'prime.sqlite')
if (kept && fs.existsSync(kept)) {
  fs.copyFileSync(kept, file)
} else {
  console.error(`Seeding ${AGENTS} agents into ${dir} ...`)
  const db = openDatabase(file)
  const seeded = await seedFleet(db, { agents: AGENTS, peripheralsPerAgent: 10 })
  db.close()
  console.error(`Seeded ${seeded.agents} agents, ${seeded.peripherals} peripherals in ${(seeded.ms / 1000).toFixed(1)} s`)
  if (kept) fs.copyFileSync(file, kept)
}

const server = await start(
  {
    PORT: String(PORT),
    PRIME_DATA_DIR: dir,
    PRIME_ADMIN_PASSWORD: PASSWORD,
    LOG_LEVEL: 'warn',
    PRIME_RATE_LIMIT_MAX: '100000000',
    PRIME_AGENT_DISCONNECT_SECONDS: '86400',
    PRIME_LICENSE_SEATS: String(AGENTS + 1000),
  },
  path.join(dir, 'server.log'),
  { pin: false, ...(process.env.BENCH_SERVER ? { args: [process.env.BENCH_SERVER] } : {}) },
)

interface Answer {
  status: number
  bytes: number
  ms: number
}
/** One request, its body read to the end (and dropped); status 0 when it failed or timed out. */
async function ask(url: string, init: RequestInit = {}, timeoutMs = PROBE_TIMEOUT_MS): Promise<Answer> {
  const t0 = performance.now()
  try {
    const res = await fetch(base + url, { ...init, signal: AbortSignal.timeout(timeoutMs) })
    let bytes = 0
    for await (const chunk of res.body ?? []) bytes += (chunk as Uint8Array).length
    return { status: res.status, bytes, ms: performance.now() - t0 }
  } catch {
    return { status: 0, bytes: 0, ms: performance.now() - t0 }
  }
}
const json = (body: unknown) => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })
const bearer = (token: string, init: RequestInit = {}): RequestInit => ({ ...init, headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` } })

async function must(url: string, init: RequestInit): Promise<any> {
  const res = await fetch(base + url, init)
  if (res.status !== 200) throw new Error(`${url}: ${res.status} ${(await res.text()).slice(0, 300)}`)
  return res.json()
}

const rows: string[][] = [['probe', 'answers', 'took s', 'small read p99 / worst ms', 'healthz worst ms (unanswered)', 'server RSS max MB']]
let failed = false
try {
  const login = async (username: string) => (await must('/prime/webui/Auth/LocalLogin', json({ username, password: PASSWORD }))).token as string
  const admin = await login('admin')
  await must('/prime/webui/admin/adduser', bearer(admin, json({ userName: 'reviewer', email: 'reviewer@example.com', userProfile: 10, password: PASSWORD })))
  const user = await login('reviewer')
  const token = (await must('/prime/webui/admin/integrationTokens', bearer(admin, json({ name: 'review-token', userProfile: 10 })))).token as string

  // The watchers: the small read and the probe, every 100 ms, each waiting for its answer.
  let small: number[] = []
  let health: number[] = []
  let unanswered = 0
  let rss = 0
  let watching = true
  const watch = async (url: string, headers: Record<string, string>, into: () => number[], isHealth: boolean) => {
    while (watching) {
      const t0 = performance.now()
      const a = await ask(url, { headers }, 5000)
      if (a.status !== 200 && isHealth) unanswered++
      into().push(a.ms)
      const left = 100 - (performance.now() - t0)
      if (left > 0) await new Promise((r) => setTimeout(r, left))
    }
  }
  const watchers = [watch('/prime/webui/admin/getuserdetails', { authorization: `Bearer ${admin}` }, () => small, false), watch('/healthz', {}, () => health, true)]
  const sampler = setInterval(() => {
    rss = Math.max(rss, (memory(server.pid!)?.rss ?? 0) * 1024)
  }, 100)

  const probe = async (name: string, work: () => Promise<Answer[]>) => {
    if (SKIP.has(name)) return
    small = []
    health = []
    unanswered = 0
    rss = 0
    const t0 = performance.now()
    const answers = await work()
    const took = performance.now() - t0
    // The probe is over when the server answers again (a request it still works on holds the loop).
    const until = performance.now() + PROBE_TIMEOUT_MS
    while ((await ask('/healthz', {}, 1000)).status !== 200 && performance.now() < until) {}
    const counts = new Map<number, number>()
    for (const a of answers) counts.set(a.status, (counts.get(a.status) ?? 0) + 1)
    const worst = Math.max(0, ...small)
    const ok = worst < 250 && unanswered === 0 && rss < 1024 ** 3
    if (!ok) failed = true
    const row = [
      name,
      [...counts].map(([s, n]) => `${n}x ${s || 'no answer'}`).join(', '),
      (took / 1000).toFixed(1),
      // A probe answered before the first sample shows none.
      small.length ? `${ms(pct(small, 0.99))} / ${ms(worst)}` : '-',
      health.length ? `${ms(Math.max(...health))} (${unanswered})` : '-',
      rss ? (rss / 1024 / 1024).toFixed(0) : '-',
      ok ? '' : 'OVER BOUND',
    ]
    console.error(row.join(' | '))
    rows.push(row)
  }

  const GRAPH = (filters: unknown[], system: unknown[], extra = '', size = 10, sort = 'riskLevel_desc', search = '') => ({
    query: `query Q($filters: [ConditionalRowFilterInput], $system: [ConditionalRowFilterInput]) {
      conditionalTable(query: { filters: $filters, systemFilters: $system, globalSearch: ${JSON.stringify(search)} }
                       pagination: { pageNumber: 1, pageSize: ${size}, sortBy: ${JSON.stringify(sort)} }) {
        recordsFiltered data { id name riskLevel ${extra} } } }`,
    variables: { filters, system },
  })
  // Values of 8 characters: 100 of them fit the 1024 characters a filter's value may have.
  const values = (n: number) => Array.from({ length: n }, () => crypto.randomBytes(4).toString('hex')).join(',')
  const notContains = (n = 100) => ({ field: 'name', expression: 'NotContains', value: values(n), op: 'AND', conditionTypeValue: 'multiple', is_userattribute: false })
  const sepio = (body: unknown, who = user) => ask('/sepio-data', bearer(who, json(body)))
  const random4 = () => crypto.randomBytes(3).toString('base64url').slice(0, 4).toLowerCase()

  await probe('idle (no probe, 3 s)', async () => {
    await new Promise((r) => setTimeout(r, 3000))
    return []
  })
  await probe('NotContains x100 values, 1 filter', async () => [await sepio(GRAPH([notContains()], []))])
  await probe('NotContains x100 values, 50 + 50 filters', async () => [
    await sepio(
      GRAPH(
        Array.from({ length: 50 }, () => notContains()),
        Array.from({ length: 50 }, () => notContains()),
      ),
    ),
  ])
  await probe('NotContains x50 values, 10 + 10 filters', async () => [
    await sepio(
      GRAPH(
        Array.from({ length: 10 }, () => notContains(50)),
        Array.from({ length: 10 }, () => notContains(50)),
      ),
    ),
  ])
  await probe('assets PageSize=1000000', async () => [await ask('/prime/webui/transformerDataApi/assets?PageSize=1000000', bearer(user))])
  await probe('assets PageSize=10001', async () => [await ask('/prime/webui/transformerDataApi/assets?PageSize=10001', bearer(user))])
  const aliases = Array.from({ length: 300 }, (_, i) => `a${i}: id`).join(' ')
  await probe('GraphQL 300 aliases x 10000', async () => [await sepio(GRAPH([], [], aliases, 10000), token)])
  await probe('GraphQL 300 aliases x 10000, 8 at once', async () => Promise.all(Array.from({ length: 8 }, (_, i) => sepio(GRAPH([], [], aliases, 10000), i % 2 ? token : user))))
  await probe('globalSearch "a"', async () => [await sepio(GRAPH([], [], '', 10, 'firstSeen_asc', 'a'))])
  await probe('globalSearch "a" + risk sort', async () => [await sepio(GRAPH([], [], '', 10, 'riskLevel_desc', 'a'))])
  await probe(`two clients loop search + risk sort (${LOOP_SECONDS} s)`, async () => {
    const end = performance.now() + LOOP_SECONDS * 1000
    const loop = async (who: string) => {
      const out: Answer[] = []
      while (performance.now() < end) out.push(await ask(`/prime/webui/transformerDataApi/assets?PageSize=10&GlobalSearch=${random4()}&SortBy=riskLevel_desc`, bearer(who)))
      return out
    }
    return (await Promise.all([loop(user), loop(token)])).flat()
  })
  await probe('peripherals PageSize=1000000', async () => [await ask('/prime/webui/peripherals?PageSize=1000000', bearer(user))])
  await probe('peripherals PageSize=1000000 sorted by description, 5 at once', async () =>
    Promise.all(Array.from({ length: 5 }, (_, i) => ask('/prime/webui/peripherals?PageSize=1000000&sortBy=description_asc', bearer(i % 2 ? token : user)))),
  )
  watching = false
  clearInterval(sampler)
  await Promise.all(watchers)
} finally {
  await stop(server)
  fs.rmSync(dir, { recursive: true, force: true })
}

const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)))
for (const r of rows) console.log(`| ${r.map((c, i) => (c ?? '').padEnd(widths[i])).join(' | ')} |`)
console.log(`\nBounds: the small read's worst wait under 250 ms, /healthz always answered, RSS under 1 GB: ${failed ? 'MISSED' : 'held'}.`)
if (failed) process.exitCode = 1
