// The insights on PostgreSQL (db/postgres/insights.ts) answer as on SQLite (db/insights.ts):
// a fleet is seeded on SQLite (its triggers and agent-state rules fill the derived
// columns), copied row for row into PostgreSQL, and every method's answers are compared.
// The events table is another part's (migration 004): while that migration is a
// placeholder, the test makes it with SQLite's columns (tests/pg-fleet.ts).
import t from 'tap'
import { insightsRepo } from '../db/insights.js'
import { connectPostgres } from '../db/postgres/index.js'
import { pgInsightsRepo } from '../db/postgres/insights.js'
import { tempDb } from './helpers.js'
import { CODES, copyTables, ensureForeignTables, FLEET_NOW, FLEET_TABLES, seedFleet } from './pg-fleet.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const NOW = FLEET_NOW
const DAY = 86_400_000

const sortedEntries = (m: Map<unknown, number>) => [...m].sort(([a], [b]) => String(a).localeCompare(String(b)))

t.test('insights: the same answers on PostgreSQL as on SQLite over one fleet', { skip: noPostgres }, async (t) => {
  const { db } = tempDb(t)
  const pg = await pgTestDatabase(t)
  await ensureForeignTables(pg)
  const sqlite = insightsRepo(db, CODES)
  const postgres = pgInsightsRepo(pg, CODES)

  await t.test('an empty fleet', async (t) => {
    t.same(await postgres.loggedAgents(), sqlite.loggedAgents())
    t.same(await postgres.connectedCount(), sqlite.connectedCount())
    t.same(await postgres.policyTest(), await sqlite.policyTest())
    t.same(await postgres.errorTotals(NOW - 30 * DAY, NOW), sqlite.errorTotals(NOW - 30 * DAY, NOW))
    t.same(await postgres.uncommonPeripherals(3), sqlite.uncommonPeripherals(3))
    t.same(await postgres.vulnerablePeripherals(), sqlite.vulnerablePeripherals())
    t.same(await postgres.whitelistViolations(NOW - 30 * DAY, NOW), await sqlite.whitelistViolations(NOW - 30 * DAY, NOW))
    const [a, b] = [await postgres.classification(), sqlite.classification()]
    t.same(a, b)
  })

  seedFleet(db, 400)
  await copyTables(db, pg, FLEET_TABLES)

  await t.test('logged agents (ties of check-in times by uuid; never checked in last)', async (t) => {
    const [a, b] = [await postgres.loggedAgents(), sqlite.loggedAgents()]
    t.ok(b.length > 100)
    t.same(a, b)
    t.equal(await postgres.connectedCount(), sqlite.connectedCount())
  })

  await t.test('policy test', async (t) => {
    const [a, b] = [await postgres.policyTest(), await sqlite.policyTest()]
    t.ok(b.agents.length > 10)
    t.same(a, b)
  })

  await t.test('error totals, over several windows (an empty one too)', async (t) => {
    for (const [from, to] of [
      [NOW - 30 * DAY, NOW],
      [NOW - 3 * DAY, NOW - DAY],
      [NOW + DAY, NOW + 2 * DAY],
    ]) {
      const [a, b] = [await postgres.errorTotals(from, to), sqlite.errorTotals(from, to)]
      t.same(a, b, `${(NOW - from) / DAY} days back`)
    }
  })

  await t.test('uncommon peripherals, for several host thresholds (more than the fleet: none)', async (t) => {
    for (const maxHosts of [1, 3, 10, 1000]) {
      const [a, b] = [await postgres.uncommonPeripherals(maxHosts), sqlite.uncommonPeripherals(maxHosts)]
      t.same(a, b, `at most ${maxHosts} hosts`)
      t.same(await postgres.uncommonPeripheralsSliced(maxHosts), await sqlite.uncommonPeripheralsSliced(maxHosts))
    }
    t.ok((await postgres.uncommonPeripherals(10)).total > 10)
  })

  await t.test('vulnerable peripherals', async (t) => {
    const [a, b] = [await postgres.vulnerablePeripherals(), sqlite.vulnerablePeripherals()]
    t.ok(b.total >= 3)
    t.same(a, b)
  })

  await t.test('whitelist violations (hosts gone named as their events named them; events without an asset)', async (t) => {
    for (const [from, to] of [
      [NOW - 30 * DAY, NOW],
      [NOW - DAY, NOW],
      [NOW + DAY, NOW + 2 * DAY],
    ]) {
      const [a, b] = [await postgres.whitelistViolations(from, to), await sqlite.whitelistViolations(from, to)]
      t.same(a, b)
    }
    t.ok((await postgres.whitelistViolations(NOW - 30 * DAY, NOW)).total > 30)
  })

  await t.test('classification (its maps compared by entries: their order is not part of the answer)', async (t) => {
    const [a, b] = [await postgres.classification(), sqlite.classification()]
    t.equal(a.totalAgents, b.totalAgents)
    for (const list of Object.keys(b.counts) as (keyof typeof b.counts)[]) t.same(sortedEntries(a.counts[list]), sortedEntries(b.counts[list]), list)
    t.same(sortedEntries(a.severities), sortedEntries(b.severities))
    t.same(a.risk, b.risk)
    t.same(a.peripheralsByClass, b.peripheralsByClass)
  })

  await t.test('the kept answers: get, put, peek, store, invalidate (with its variants only)', async (t) => {
    for (const repo of [postgres, sqlite]) {
      await repo.cachePut('vulnerablePeripherals', 5, '{"a":1}')
      await repo.cachePut('vulnerablePeripherals', 6, '{"a":2}')
      await repo.store('uncommonPeripherals:3', 7, { b: 1 })
      await repo.store('uncommonPeripherals:5', 8, { b: 2 })
      await repo.store('uncommonPeripheralsX', 9, { c: 1 })
    }
    const both = async <T>(fn: (r: typeof postgres | typeof sqlite) => T) => t.same(await fn(postgres), await fn(sqlite))
    await both((r) => r.cacheGet('vulnerablePeripherals'))
    await both((r) => r.cacheGet('absent'))
    await both((r) => r.peek('uncommonPeripherals:3'))
    await both((r) => r.peek('absent'))
    await postgres.invalidate('uncommonPeripherals')
    sqlite.invalidate('uncommonPeripherals')
    for (const name of ['uncommonPeripherals:3', 'uncommonPeripherals:5', 'uncommonPeripheralsX', 'vulnerablePeripherals']) await both((r) => r.cacheGet(name))
    t.equal(await postgres.cacheGet('uncommonPeripherals:3'), undefined)
    t.ok(await postgres.cacheGet('uncommonPeripheralsX'), 'a name that only begins the same stays')
  })
})

t.test('a kept answer dropped by one node is gone for another (the cache is the table)', { skip: noPostgres }, async (t) => {
  const pg = await pgTestDatabase(t)
  const other = connectPostgres(pg.url, { max: 1 })
  t.teardown(() => other.close())
  const a = pgInsightsRepo(pg, CODES)
  const b = pgInsightsRepo(other, CODES)
  await a.store('vulnerablePeripherals', 1, { x: 1 })
  t.match(await b.peek('vulnerablePeripherals'), { computedMs: 1, result: { x: 1 } })
  await b.invalidate('vulnerablePeripherals')
  t.equal(await a.peek('vulnerablePeripherals'), undefined)
})
