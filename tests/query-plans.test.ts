// backend: sqlite-only — the plans SQLite's planner chooses (EXPLAIN QUERY PLAN)
// Pins the plan SQLite chooses for every statement that overrides the planner (NOT INDEXED,
// INDEXED BY, a unary + on a column). The statements are the ones the repositories really
// prepare: every db.prepare of the running server is watched while requests go through it,
// and those carrying an override are planned with EXPLAIN QUERY PLAN, on a small seeded
// fleet, as the server finds it (no statistics: it never runs ANALYZE) and as a bulk load
// leaves it (`npm run seed` ends with ANALYZE). A plan that changes fails here: look at it,
// and if it is right, run `npx tap tests/query-plans.test.ts --snapshot` and commit it.
// Each override in db/ and lib/ carries a comment `plan: query-plans "<scenario>"` naming
// the scenario whose snapshot holds it.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { openDatabase, type DB } from '../db/index.js'
import { projectRoot } from '../lib/paths.js'
import { seedFleet } from '../scripts/seed.js'
import { ADMIN_PASSWORD, call, login } from './helpers.js'

/** A planner override in SQL text: NOT INDEXED, INDEXED BY, or + before a column name. */
const OVERRIDE = /\bNOT INDEXED\b|\bINDEXED BY\b|(?:^|[\s(,=])\+[a-z_]+(?:\.[a-z_]+)?\b/i

const seen: string[] = []
const prepare = Database.prototype.prepare
Database.prototype.prepare = function (this: Database.Database, sql: string) {
  if (OVERRIDE.test(sql)) seen.push(sql)
  return prepare.call(this, sql)
} as typeof prepare
t.teardown(() => {
  Database.prototype.prepare = prepare
})

const norm = (sql: string) =>
  sql
    .replace(/--[^\n]*/g, '')
    .replace(/\s+/g, ' ')
    .trim()

/** EXPLAIN QUERY PLAN of `sql` as an indented tree, parameters bound to NULL. */
function plan(db: DB, sql: string): string {
  const named = [...new Set([...sql.matchAll(/[@:$]([A-Za-z_]\w*)/g)].map((m) => m[1]))]
  const stmt = db.prepare(`EXPLAIN QUERY PLAN ${sql}`)
  let rows: { id: number; parent: number; detail: string }[] | undefined
  for (let n = 0; n <= 64 && !rows; n++) {
    const args: unknown[] = Array(n).fill(null)
    if (named.length) args.push(Object.fromEntries(named.map((k) => [k, null])))
    try {
      rows = stmt.all(...args) as typeof rows
    } catch (err) {
      if (!(err instanceof RangeError)) throw err
    }
  }
  if (!rows) throw new Error(`cannot bind the parameters of ${sql}`)
  const depth = new Map<number, number>([[0, -1]])
  return rows
    .map((r) => {
      const d = (depth.get(r.parent) ?? -1) + 1
      depth.set(r.id, d)
      return `${'  '.repeat(d)}${r.detail}`
    })
    .join('\n')
}

type Scenario = { name: string; run: (go: (url: string, method?: 'GET' | 'POST', payload?: unknown) => Promise<void>, app: FastifyInstance) => Promise<void> }

const A = '/prime/webui/agents'
const E = '/prime/webui/Events'
// Each scenario's statements are those first prepared while it runs (statement caches keep
// them after), in the order of the list.
const scenarios: Scenario[] = [
  // Statements prepared once when the repositories are made (most static ones).
  { name: 'prepared at start', run: async () => {} },
  {
    name: 'agents list',
    run: async (go) => {
      for (const flag of ['hasUnapprovedPeripherals', 'hasVulnerablePeripherals', 'hasKnownAttackTools']) await go(`${A}?${flag}=true&SortBy=hostIdentifier_asc&PageSize=5`)
      await go(`${A}?SortBy=lastUpdated_desc&PageSize=5&connectionStatus=Connected`)
      await go(`${A}?SortBy=hostIdentifier_asc&PageSize=5&hostIdentifier=host&connectionStatus=Connected`)
      await go(`${A}?SortBy=osVersion_desc&PageSize=5&PageNumber=3&operationalStatus=Armed`)
      await go(`${A}?SortBy=pcModel_asc&PageSize=5&globalSearch=10&hasUnapprovedPeripherals=true`)
    },
  },
  {
    name: 'peripherals list',
    run: async (go) => {
      await go('/prime/webui/peripherals?PageSize=5&isUnapproved=true')
      await go('/prime/webui/peripherals?PageSize=5&SortBy=manufacturer_desc&present=true')
      await go('/prime/webui/peripherals?PageSize=5&hostIdentifier=host&isVulnerable=true')
      await go('/prime/webui/peripherals?PageSize=5&SortBy=manufacturer_asc&vendor=a&present=true')
    },
  },
  {
    name: 'events list',
    run: async (go, app) => {
      // The first questions with the index where the seed left it (the rows above its mark
      // read as rows): indexing in the background between the requests would move it.
      app.repos.eventQueries.holdIndexing(true)
      await go(`${E}/GetEvents?PageSize=5`)
      await go(`${E}/GetEvents?PageSize=5&SortBy=date_desc`)
      await go(`${E}/GetEvents?PageSize=5&SortBy=date_asc&MinimumSeverity=Warning`)
      await go(`${E}/GetEvents?PageSize=5&SortBy=severity_asc&Category=usb`)
      await go(`${E}/GetEvents?PageSize=5&Details=usb&SortBy=date_desc`)
      await go(`${E}/GetEvents?PageSize=5&FromEventId=3&ToEventId=40&FromDate=2020-01-01&ToDate=2040-01-01`)
      await go(`${E}/GetEvents?PageSize=5&Source=host-0`)
      await go(`${E}/GetEvents?PageSize=5&AssetKey=a&SortBy=eventCode_asc`)
      await go(`${E}/GetEvents?PageSize=5&PageNumber=7&Category=usb&SortBy=date_desc`)
      await go(`${E}/GetEvents?PageSize=5&PageNumber=4&MinimumSeverity=Critical&FromDate=2020-01-01`)
      // Blocks a time range cuts, counted and paged through the time index and the kinds' ids.
      app.repos.eventQueries.catchUp()
      await go(`${E}/GetEvents?PageSize=5&PageNumber=2&MinimumSeverity=Warning&FromDate=2026-01-08&ToDate=2026-01-12`)
      await go(`${E}/GetEvents?PageSize=5&PageNumber=3&FromDate=2026-01-09`)
      await go(`${E}/ExportGetEvents`, 'POST', {})
      await go(`${E}/ExportGetEvents`, 'POST', { SortBy: 'severity_desc', Details: 'usb' })
    },
  },
  {
    name: 'audit trail list',
    run: async (go) => {
      await go(`${E}/GetAuditTrails?PageSize=5`)
      await go(`${E}/GetAuditTrails?PageSize=5&SortBy=date_desc&User=adm`)
      await go(`${E}/GetAuditTrails?PageSize=5&SortBy=severity_desc&FromDate=2020-01-01`)
      await go(`${E}/ExportGetAudit`, 'POST', {})
    },
  },
  // The retention job's reads (no operation runs it).
  {
    name: 'retention',
    run: async (_go, app) => {
      app.repos.retention.due('events', Date.UTC(2026, 0, 10), [0, 0], Number.MAX_SAFE_INTEGER, 10)
      app.repos.retention.due('audit_trail', Date.UTC(2026, 0, 10), [0, 0], Number.MAX_SAFE_INTEGER, 10)
    },
  },
]

t.test('the plans of the statements that override the planner', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-plans-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
  // A small fleet with events, written as a bulk load does, without its ANALYZE.
  const seedDb = openDatabase(path.join(dir, 'prime.sqlite'))
  await seedFleet(seedDb, { agents: 60, peripheralsPerAgent: 3, seed: 11, now: Date.UTC(2026, 0, 15) })
  for (const table of ['sqlite_stat1', 'sqlite_stat4']) {
    if (seedDb.prepare('SELECT 1 FROM sqlite_master WHERE name = ?').get(table)) seedDb.exec(`DELETE FROM ${table}`)
  }
  seedDb.close()

  seen.length = 0
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent', PRIME_RATE_LIMIT_MAX: '100000' })
  const app = await buildApp({ config, logger: false, validateResponses: true })
  t.teardown(() => app.close())
  const token = await login(app)
  const db = (app as unknown as { db: DB }).db

  const byScenario = new Map<string, string[]>()
  let from = 0
  for (const s of scenarios) {
    await s.run(async (url, method = 'GET', payload) => {
      const res = await call(app, token, { method, url, ...(payload === undefined ? {} : { payload: payload as object }) })
      if (res.statusCode !== 200) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body.slice(0, 300)}`)
    }, app)
    byScenario.set(s.name, [...new Set(seen.slice(from).map(norm))].sort())
    from = seen.length
  }

  const render = () => Object.fromEntries([...byScenario].map(([name, sqls]) => [name, sqls.map((sql) => `${sql}\n${plan(db, sql)}`)]))
  for (const [name, sqls] of byScenario) t.ok(sqls.length > 0, `${name} runs statements that override the planner`)
  t.matchSnapshot(render(), 'as the server finds the database (no statistics)')
  db.exec('ANALYZE')
  t.matchSnapshot(render(), 'after ANALYZE, as a bulk load (npm run seed) leaves it')
})

t.test('every override in the code names the scenario that pins its plan', async (t) => {
  const names = new Set(scenarios.map((s) => s.name))
  const files = ['db', 'lib'].flatMap((d) => fs.readdirSync(path.join(projectRoot, d), { recursive: true, encoding: 'utf8' }).map((f) => path.join(d, f))).filter((f) => f.endsWith('.ts'))
  let sites = 0
  for (const file of files) {
    const lines = fs.readFileSync(path.join(projectRoot, file), 'utf8').split('\n')
    lines.forEach((line, i) => {
      const code = line.replace(/\/\/.*$/, '').replace(/^\s*\*.*$/, '')
      // Overrides in SQL text, and the builders of the unary-plus hints.
      if (!/NOT INDEXED|INDEXED BY|'\+'|`\+\$\{|'\+[a-z]|`\+[a-z]|[\s(]\+(?:has_|vid\b|pid\b)|\$\{[a-z]+ === '[a-z]+' \? '\+'/.test(code)) return
      sites++
      // The comment is on the line or within the 10 lines above.
      const near = lines.slice(Math.max(0, i - 10), i + 1).join('\n')
      const m = /plan: query-plans "([^"]+)"/.exec(near)
      t.ok(m && names.has(m[1]), `${file}:${i + 1} names the query-plans scenario that pins it`)
    })
  }
  t.ok(sites >= 20, `found the overrides (${sites})`)
})
