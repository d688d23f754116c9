// A text filter's count that its budget refused (PRIME_PG_COUNT_BUDGET_MS) is not tried again
// for REFUSED_COUNT_MS on that node (db/postgres/counts.ts refusedCounts): the same question
// gets the planner's estimate at once instead of spending the budget on the database again.
import t from 'tap'
import { pgAgentsRepo } from '../db/postgres/agents.js'
import { pgPeripheralsRepo } from '../db/postgres/peripherals.js'
import { agentListView } from '../lib/agents/views.js'
import { CacheRegistry } from '../lib/platform/cache.js'
import { Rand, seedFleet } from './fixtures/pg-lists-fleet.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const sort = { field: 'hostIdentifier', direction: 'asc' } as const

t.test('PostgreSQL: a count its budget refused is not tried again for a while; one that fitted is', { skip: noPostgres }, async (t) => {
  const { db: sqlite } = tempDb(t)
  const pg = await pgTestDatabase(t)
  await seedFleet(sqlite, pg, new Rand(11), { agents: 60, peripherals: 200 })
  const refusals = (caches: CacheRegistry, name: string) => caches.stats().find((c) => c.name === name)!

  const refusing = new CacheRegistry()
  const tight = pgAgentsRepo(pg, agentListView, { countBudgetMs: 0, caches: refusing })
  const first = await tight.list({ globalSearch: 'a' }, sort, 5, 5)
  t.equal(first.filteredExact, false, 'past its budget: an estimate')
  t.equal(refusals(refusing, 'agent-count-refusals').entries, 1, 'the refusal is kept')
  const again = await tight.list({ globalSearch: 'a' }, sort, 5, 10)
  t.equal(again.filteredExact, false, 'asked again: an estimate')
  t.equal(refusals(refusing, 'agent-count-refusals').hits, 1, 'at once, the budget not spent again')
  await tight.list({ globalSearch: 'e' }, sort, 5, 5)
  t.equal(refusals(refusing, 'agent-count-refusals').entries, 2, 'another term is tried on its own')

  const peripherals = pgPeripheralsRepo(pg, { countBudgetMs: 0, caches: refusing })
  t.equal((await peripherals.list({ hostIdentifier: 'a' }, sort, 5, 5)).filteredExact, false)
  t.equal(refusals(refusing, 'peripheral-count-refusals').entries, 1, 'the peripherals list keeps its own')

  const fitting = new CacheRegistry()
  const roomy = pgAgentsRepo(pg, agentListView, { countBudgetMs: 60_000, caches: fitting })
  const exact = await roomy.list({ globalSearch: 'a' }, sort, 5, 5)
  t.notOk('filteredExact' in exact, 'within its budget: exact')
  t.equal(
    exact.filtered,
    await pg.value<number>(
      "SELECT count(*)::int FROM agents WHERE host_identifier ILIKE '%a%' OR os_version ILIKE '%a%' OR pc_model ILIKE '%a%' OR service_version ILIKE '%a%' OR license_account_name ILIKE '%a%' OR latest_event_text ILIKE '%a%' OR hashtags ILIKE '%a%' OR uuid ILIKE '%a%' OR ip_addresses ILIKE '%a%' OR nics_text ILIKE '%a%'",
    ),
  )
  t.equal(refusals(fitting, 'agent-count-refusals').entries, 0, 'nothing kept')
})
