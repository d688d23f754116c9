// recordsFilteredExact: on PostgreSQL the count of a text filter that runs past its budget
// (PRIME_PG_COUNT_BUDGET_MS; 0 here: never counted exactly) is the planner's estimate, said
// so, with the rows still exact; filters without text, pages that end the matches and the
// embedded SQLite database answer exact counts. Then, on PostgreSQL, a count cancelled by
// its statement_timeout, and that timeout not left on the pool's connections.
import t from 'tap'
import pg from 'pg'
import { pgRecordStores } from '../db/postgres/events-query.js'
import { pgEventsRepo, recordPartitions } from '../db/postgres/events-write.js'
import { eventFilter } from '../lib/events/filter.js'
import { addEvents, eventMaker, expectedEvents, sortEvents } from './fixtures/events.js'
import { fastCommits } from './fixtures/pg-records.js'
import { build, call, login, testBackend } from './helpers.js'
import { noPostgres } from './pg.js'

const NOW = Date.UTC(2025, 0, 10, 12, 0, 0)
const estimating = testBackend === 'postgres'

t.test('event and audit lists: an estimated count says so, the rows stay exact', async (t) => {
  const app = await build(t, { PRIME_PG_COUNT_BUDGET_MS: '0' })
  const token = await login(app)
  await login(app)
  const rows = await addEvents(app, 300, { now: NOW, days: 3 })
  const get = async (url: string, query: Record<string, string>) => {
    const r = await call(app, token, { method: 'GET', url, query })
    t.equal(r.statusCode, 200, `${url} ${JSON.stringify(query)}`)
    return r.json()
  }

  const cases: { q: Record<string, string>; text: boolean }[] = [
    { q: { GlobalSearch: 'e', PageSize: '20' }, text: true },
    { q: { GlobalSearch: 'e', PageSize: '20', PageNumber: '3' }, text: true },
    { q: { Details: 'on', Source: '(10.0', PageSize: '7', PageNumber: '2' }, text: true },
    { q: { MinimumSeverity: 'Warning', PageSize: '20' }, text: false },
    { q: { Category: 'USB', PageSize: '5', PageNumber: '2' }, text: false },
  ]
  for (const { q, text } of cases) {
    const want = sortEvents(expectedEvents(rows, q))
    const size = Number(q.PageSize)
    const offset = (Number(q.PageNumber ?? '1') - 1) * size
    t.ok(want.length > offset + size, `${JSON.stringify(q)}: the page is full`)
    const a = await get('/prime/webui/Events/GetEvents', q)
    t.same(
      a.data.map((e: { eventID: number }) => e.eventID),
      want.slice(offset, offset + size).map((r) => r.id),
      'the rows are exact',
    )
    t.equal(a.recordsTotal, rows.length)
    if (estimating && text) {
      t.equal(a.recordsFilteredExact, false, `${JSON.stringify(q)}: an estimate`)
      t.ok(a.recordsFiltered <= a.recordsTotal && a.recordsFiltered >= offset + size, `estimate ${a.recordsFiltered} within [${offset + size}, ${a.recordsTotal}]`)
    } else {
      t.equal(a.recordsFilteredExact, true, `${JSON.stringify(q)}: exact`)
      t.equal(a.recordsFiltered, want.length)
    }
  }

  // A page that ends the matches tells their number: exact on both.
  const q = { GlobalSearch: 'e', PageSize: '70' }
  const want = expectedEvents(rows, q)
  const last = String(Math.ceil(want.length / 70))
  t.ok(want.length % 70 !== 0, 'the last page is not full')
  const end = await get('/prime/webui/Events/GetEvents', { ...q, PageNumber: last })
  t.equal(end.recordsFilteredExact, true)
  t.equal(end.recordsFiltered, want.length)

  // A free-text sort is refused on a count, never on an estimate: counted exactly up to its limit.
  const sorted = await get('/prime/webui/Events/GetEvents', { GlobalSearch: 'e', SortBy: 'details_asc', PageSize: '10' })
  t.equal(sorted.recordsFilteredExact, true)
  t.equal(sorted.recordsFiltered, want.length)

  // The feeds: the page (the oldest matches) is exact whatever the count.
  const feedQ = { GlobalSearch: 'e', PageSize: '10', FromEventId: String(rows[0].id) }
  const feed = await get('/prime/webui/Events/GetEventsIntegration', feedQ)
  const oldest = expectedEvents(rows, feedQ).slice(0, 10)
  t.same(
    feed.data.map((e: { eventID: number }) => e.eventID),
    oldest.map((r) => r.id).reverse(),
  )
  t.equal(feed.recordsFilteredExact, !estimating)

  const audit = await get('/prime/webui/Events/GetAuditTrails', { GlobalSearch: 'a', PageSize: '1' })
  t.equal(audit.data.length, 1)
  t.equal(audit.recordsFilteredExact, !estimating)
  t.ok(audit.recordsFiltered >= 1 && audit.recordsFiltered <= audit.recordsTotal)
  const plain = await get('/prime/webui/Events/GetAuditTrails', { PageSize: '1' })
  t.equal(plain.recordsFilteredExact, true)
  const auditFeed = await get('/prime/webui/Events/GetAuditsIntegration', { PageSize: '1', FromAuditTrailId: '1' })
  t.equal(auditFeed.recordsFilteredExact, true)
})

t.test('PostgreSQL: a count past its statement_timeout answers the estimate, and the timeout ends with its transaction', { skip: noPostgres }, async (t) => {
  const db = await fastCommits(t, 3)
  const events = pgEventsRepo(db, {}, recordPartitions(db))
  const make = eventMaker(3)
  for (let i = 0; i < 40; i++) await events.recordMany([{ createdMs: NOW - i * 1000, events: [make(), make()] }])
  const filter = eventFilter({ GlobalSearch: 'e' })
  const sort = { field: 'eventID', direction: 'desc' as const }
  const counted = await pgRecordStores(db, { countBudgetMs: 5000 }).events.pageRows(filter, sort, 10, 0)
  t.equal(counted.filteredExact, undefined, 'counted within the budget')
  t.equal(counted.filtered, 80)
  const stores = pgRecordStores(db, { countBudgetMs: 20 })

  // Another session holds the table: the count waits for its lock past the budget and is
  // cancelled; the estimate (its plan needs the lock too) and the page follow the release.
  const locker = new pg.Client({ connectionString: (db.pool as unknown as { options: { connectionString: string } }).options.connectionString })
  await locker.connect()
  t.teardown(() => locker.end())
  await locker.query('BEGIN')
  await locker.query('LOCK TABLE events IN ACCESS EXCLUSIVE MODE')
  const page = stores.events.pageRows(filter, sort, 10, 0)
  await new Promise((resolve) => setTimeout(resolve, 300))
  await locker.query('COMMIT')
  const a = await page
  t.equal(a.filteredExact, false, 'an estimate')
  t.equal(a.rows.length, 10)
  t.equal(a.total, 80)
  t.ok(a.filtered >= 10 && a.filtered <= 80, `estimate ${a.filtered}`)

  // Every pooled connection is back at the server's statement_timeout.
  const clients = await Promise.all([db.pool.connect(), db.pool.connect(), db.pool.connect()])
  try {
    for (const c of clients) t.equal((await c.query('SHOW statement_timeout')).rows[0].statement_timeout, '0')
  } finally {
    for (const c of clients) c.release()
  }
})
