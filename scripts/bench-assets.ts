// Asset discovery at fleet scale, in process (app.inject, no network): a seeded fleet of
// BENCH_AGENTS agents (100,000) with 10 peripherals each, then the NAC connector's GraphQL
// query (its filters and system filters, riskLevel_desc) at the first page and a deep one,
// other orders, the older connector's REST pages of 5000 (first, middle, last), the
// overview and the distribution, and the REST list's global search of 1 to 4 random
// characters (a new term each request), alone and with riskLevel_desc, at pages of 10 and
// 100. Each case is asked BENCH_WARMUP times (1) first, then BENCH_REQUESTS times (5): the
// median and the slowest of those are shown, and the first request apart (a process's first
// GraphQL query, say, pays for what it compiles and reads into memory once).
//
//   npm run bench -- assets
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { openDatabase } from '../db/index.js'
import { seedFleet } from './seed.js'
import { Rand } from './fleet-data.js'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { median, ms, pct } from './bench-support.js'

const AGENTS = Number(process.env.BENCH_AGENTS ?? 100_000)
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5)
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1)
const PASSWORD = 'Bench-password-123'

const QUERY = `query GetDiscoveredAssets($pageNum: Int!, $pageSize: Int!, $filters: [ConditionalRowFilterInput], $systemFilters: [ConditionalRowFilterInput], $sortBy: String) {
  conditionalTable(query: { filters: $filters, systemFilters: $systemFilters, globalSearch: "" }
                   pagination: { pageNumber: $pageNum, pageSize: $pageSize, sortBy: $sortBy }) {
    recordsFiltered
    data { id mac key isRiskAccepted model iconDescription isOnline riskLevel statusDescription firstSeen lastSeen
           locations { displayString } indicatorViewDetails { subType riskIndicationString description } } } }`
const f = (field: string, expression: string, value: string, conditionTypeValue = 'single') => ({ field, expression, value, op: 'AND', conditionTypeValue, is_userattribute: false })
const FILTERS = [f('isOnline', 'Exact', 'true'), f('type', 'Exact', '2,3,8,9,10', 'multiple'), f('riskLevel', 'Exact', '2,3,4,5,6,7,8,9', 'multiple')]
const SYSTEM = [f('icon', 'NotExact', '50'), f('type', 'NotExact', '6'), f('hierarchy', 'NotExact', '1')]

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-assets-'))
console.error(`Seeding ${AGENTS} agents into ${dir} ...`)
// BENCH_ASSETS_SEED names a file the seeded database is kept in, to be copied by the next run
// instead of seeding again (migrations still run on it when the server starts).
const kept = process.env.BENCH_ASSETS_SEED
let seeded: { agents: number; peripherals: number; ms: number }
if (kept && fs.existsSync(kept)) {
  fs.copyFileSync(kept, path.join(dir, 'prime.sqlite'))
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  const count = (t: string) => db.prepare(`SELECT count(*) FROM ${t}`).pluck().get() as number
  seeded = { agents: count('agents'), peripherals: count('peripherals'), ms: 0 }
  db.close()
} else {
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  seeded = await seedFleet(db, { agents: AGENTS, peripheralsPerAgent: 10 })
  db.close()
  if (kept) fs.copyFileSync(path.join(dir, 'prime.sqlite'), kept)
}
console.error(`Seeded ${seeded.agents} agents, ${seeded.peripherals} peripherals in ${(seeded.ms / 1000).toFixed(1)} s`)

const app = await buildApp({
  config: loadConfig({
    PRIME_DATA_DIR: dir,
    PRIME_ADMIN_PASSWORD: PASSWORD,
    LOG_LEVEL: 'warn',
    PRIME_RATE_LIMIT_MAX: '100000000',
    PRIME_AGENT_DISCONNECT_SECONDS: '86400',
    PRIME_LICENSE_SEATS: String(AGENTS + 1000),
  }),
  logger: false,
})
const rows: string[][] = [['case', 'median ms', 'max ms', 'rows', 'matching', '']]
// Each case is also shown as it is measured (a long run that fails still shows its figures).
const push = rows.push.bind(rows)
rows.push = (...r: string[][]) => {
  for (const x of r) console.error(x.join(' | '))
  return push(...r)
}
try {
  const login = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: PASSWORD } })
  const headers = { authorization: `Bearer ${login.json().token}` }
  // Small reads (the version) asked one after another while `work` runs: how long any of
  // them waited, and the longest the event loop was held (a slice of the work).
  const meanwhile = async (work: () => Promise<unknown>) => {
    const small: number[] = []
    let done = false
    const loop = monitorEventLoopDelay({ resolution: 5 })
    loop.enable()
    const t = performance.now()
    const finished = work()
      .then(() => performance.now() - t)
      .finally(() => {
        done = true
      })
    while (!done) {
      const s = performance.now()
      await app.inject({ url: '/prime/webui/admin/PrimeVersion', headers })
      small.push(performance.now() - s)
      // One every 5 ms or so: a client polling, not a flood that piles up.
      await new Promise((r) => setTimeout(r, 5))
    }
    loop.disable()
    return { total: await finished, small, loopMax: loop.max / 1e6 }
  }
  const smallRow = (name: string, r: Awaited<ReturnType<typeof meanwhile>>) =>
    rows.push([name, ms(r.total), '', '', '', `${r.small.length} small reads: p50 ${ms(median(r.small))} p99 ${ms(pct(r.small, 0.99))}; loop held at most ${ms(r.loopMax)} ms`])

  // The rare models are computed once an hour (the uncommon-peripherals insight), the counts
  // every 30 s: the first call after start waits for both (computed in slices).
  smallRow('overview, first call (rare models and counts computed)', await meanwhile(() => app.inject({ url: '/prime/webui/transformerDataApi/assetsOverview', headers })))
  let t0 = performance.now()
  // An hour later: the rare models and the counts are computed again while the last ones are answered.
  const db2 = app.db
  const aged = () => db2.prepare("UPDATE insight_cache SET computed_ms = computed_ms - 7200000 WHERE name LIKE 'uncommonPeripherals:%' OR name LIKE 'assetSummary:%'").run()
  aged()
  const stamp = () => db2.prepare("SELECT group_concat(computed_ms) FROM insight_cache WHERE name LIKE 'uncommonPeripherals:%' OR name LIKE 'assetSummary:%'").pluck().get() as string
  const before = stamp()
  smallRow(
    'overview, an hour later (answered at once; refresh in slices)',
    await meanwhile(async () => {
      const t = performance.now()
      await app.inject({ url: '/prime/webui/transformerDataApi/assetsOverview', headers })
      rows.push(['  the answer meanwhile', ms(performance.now() - t), '', '', '', ''])
      // Both the rare models and the counts computed again.
      while (
        stamp()
          .split(',')
          .some((x) => before.split(',').includes(x))
      )
        await new Promise((r) => setTimeout(r, 20))
    }),
  )

  const time = async (name: string, send: (i: number) => Promise<{ statusCode: number; body: string }>, count: (body: any) => [number, number]) => {
    const times: number[] = []
    let last: [number, number] = [0, 0]
    for (let i = 0; i < WARMUP + REQUESTS; i++) {
      t0 = performance.now()
      const res = await send(i)
      times.push(performance.now() - t0)
      if (res.statusCode !== 200) throw new Error(`${name}: ${res.statusCode} ${res.body.slice(0, 300)}`)
      last = count(JSON.parse(res.body))
    }
    const timed = times.slice(WARMUP)
    rows.push([name, ms(median(timed)), ms(Math.max(...timed)), String(last[0]), String(last[1]), WARMUP > 0 ? `first request ${ms(times[0])}` : ''])
  }
  const graph = (variables: Record<string, unknown>) => () => app.inject({ method: 'POST', url: '/sepio-data', headers, payload: { query: QUERY, variables } })
  const table = (b: any): [number, number] => [b.data.conditionalTable.data.length, b.data.conditionalTable.recordsFiltered]
  const list = (b: any): [number, number] => [b.data.length, b.recordsFiltered]

  await time('GraphQL connector query, page 1 of 100', graph({ pageNum: 1, pageSize: 100, filters: FILTERS, systemFilters: SYSTEM, sortBy: 'riskLevel_desc' }), table)
  await time('GraphQL connector query, page 1 of 1000', graph({ pageNum: 1, pageSize: 1000, filters: FILTERS, systemFilters: SYSTEM, sortBy: 'riskLevel_desc' }), table)
  await time('GraphQL connector query, page 50 of 1000', graph({ pageNum: 50, pageSize: 1000, filters: FILTERS, systemFilters: SYSTEM, sortBy: 'riskLevel_desc' }), table)
  await time('GraphQL hosts by lastSeen_desc, page 1 of 100', graph({ pageNum: 1, pageSize: 100, systemFilters: [f('type', 'NotExact', '1')], sortBy: 'lastSeen_desc' }), table)
  await time('GraphQL all assets by riskLevel_desc, page 1 of 100', graph({ pageNum: 1, pageSize: 100, sortBy: 'riskLevel_desc' }), table)
  await time('GraphQL name contains, all assets, page 1 of 100', graph({ pageNum: 1, pageSize: 100, filters: [f('name', 'Contains', 'desk')], sortBy: 'firstSeen_asc' }), table)
  // The review's searches: random letters and digits, a new term each request (a term asked
  // again would find its count kept), the same terms in every run.
  const rand = new Rand(20240501)
  const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789'
  for (const length of [1, 2, 3, 4]) {
    for (const size of [10, 100]) {
      for (const order of ['', '&SortBy=riskLevel_desc']) {
        const terms = Array.from({ length: WARMUP + REQUESTS }, () => Array.from({ length }, () => rand.pick([...ALPHABET])).join(''))
        await time(
          `REST assets?PageSize=${size}&GlobalSearch=<${length} random>${order}`,
          (i) => app.inject({ url: `/prime/webui/transformerDataApi/assets?PageSize=${size}&GlobalSearch=${terms[i]}${order}`, headers }),
          list,
        )
      }
    }
  }
  // Seeded agents carry about ten peripherals each: the last page is read from the count.
  const total = (await app.inject({ url: '/prime/webui/transformerDataApi/assets?pageSize=1', headers })).json().recordsTotal as number
  const pages = Math.ceil(total / 5000)
  for (const n of [1, Math.ceil(pages / 2), pages]) {
    await time(`REST assets?pageSize=5000&pageNumber=${n}`, () => app.inject({ url: `/prime/webui/transformerDataApi/assets?pageSize=5000&pageNumber=${n}`, headers }), list)
  }
  // Paging to the end as the connectors do (BENCH_ASSETS_WALK=0 leaves it out): every page timed.
  const walk = async (name: string, ask: (page: number) => Promise<{ statusCode: number; body: string }>, count: (body: any) => [number, number]) => {
    const times: number[] = []
    let read = 0
    let matching = 0
    for (let page = 1; ; page++) {
      const t = performance.now()
      const res = await ask(page)
      times.push(performance.now() - t)
      if (res.statusCode !== 200) throw new Error(`${name}: ${res.statusCode} ${res.body.slice(0, 300)}`)
      const [n, m] = count(JSON.parse(res.body))
      read += n
      matching = m
      if (n === 0) break
    }
    rows.push([
      name,
      ms(median(times)),
      ms(Math.max(...times)),
      String(read),
      String(matching),
      `${times.length} pages: first ${ms(times[0])}, last full ${ms(times[times.length - 2] ?? NaN)}, p90 ${ms(pct(times, 0.9))}`,
    ])
  }
  if (process.env.BENCH_ASSETS_WALK !== '0') {
    for (const size of [100, 5000]) {
      await walk(`GraphQL connector query, pages of ${size} to the end`, (pageNum) => graph({ pageNum, pageSize: size, filters: FILTERS, systemFilters: SYSTEM, sortBy: 'riskLevel_desc' })(), table)
    }
    await walk('REST assets?pageSize=5000, pages to the end', (n) => app.inject({ url: `/prime/webui/transformerDataApi/assets?pageSize=5000&pageNumber=${n}`, headers }), list)
  }
  await time(
    'REST assetsOverview',
    () => app.inject({ url: '/prime/webui/transformerDataApi/assetsOverview', headers }),
    (b) => [1, b.totalAssets],
  )
  await time(
    'REST assetsDistribuition',
    () => app.inject({ url: '/prime/webui/transformerDataApi/assetsDistribuition', headers }),
    (b) => [b.byType.length, b.totalAssets],
  )
} finally {
  await app.close()
  fs.rmSync(dir, { recursive: true, force: true })
}
const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)))
console.log(`\n${seeded.agents} agents, ${seeded.peripherals} peripherals; ${REQUESTS} requests per case after ${WARMUP} not counted, in process (app.inject)\n`)
for (const r of rows)
  console.log(
    r
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]) : i === 5 ? c : c.padStart(widths[i])))
      .join('  ')
      .trimEnd(),
  )
