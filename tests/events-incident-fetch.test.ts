// Pins the incident fetch of the SOAR integration: GetEvents sorted date_asc with a lower
// bound answers as the integration feed does (the oldest matching events, newest first), so
// that the client, which keeps items[0].eventID + 1 as its next FromEventId from its first
// call (by FromDate and ToDate) on, receives every matching event exactly once, through a
// backlog of many pages and while new events arrive. Other shapes keep the order they ask.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call } from './helpers.js'
import { addEvents, expectedEvents, sortEvents, eventMaker, DAY } from './fixtures/events.js'
import { backendOf, holdIndexing, query, recordEvents } from './seed.js'
import type { EventRow } from '../lib/events/ports.js'

interface Page {
  recordsTotal: number
  recordsFiltered: number
  data: { eventID: number; creationTimeEpoch: number }[]
}

async function getEvents(app: FastifyInstance, token: string, query: string): Promise<Page> {
  const res = await call(app, token, { method: 'GET', url: `/prime/webui/events/getevents?${query}` })
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`)
  return res.json()
}

const allRows = async (app: FastifyInstance) => (await query(app, 'SELECT * FROM events ORDER BY id')) as EventRow[]

t.test('the SOAR fetch loop receives every matching event once, from its first call by date, backlog and live events', async (t) => {
  const app = await build(t)
  holdIndexing(app, true)
  const token = await login(app)
  const now = Date.now()
  await addEvents(app, 2400, { now: now - 60_000, days: 3, jumps: [900, 1700] })
  const make = eventMaker(42)
  // The integration's first fetch looks back from its configured start (here two days).
  const fromDate = new Date(now - 2 * DAY).toISOString()
  const filter = { Category: 'USB', MinimumSeverity: 'Warning' }
  const received: number[] = []
  let next: number | null = null
  let fetches = 0
  let empty = 0
  while (empty < 2 && fetches < 100) {
    fetches++
    // Exactly what the client sends: its parameters, in its spelling.
    const bound = next === null ? `FromDate=${encodeURIComponent(fromDate)}&ToDate=${encodeURIComponent(new Date().toISOString())}` : `FromEventId=${next}`
    const page = await getEvents(app, token, `pageSize=50&pageNumber=1&sortBy=date_asc&category=USB&minimumSeverity=Warning&${bound}`)
    const ids = page.data.map((e) => e.eventID)
    t.same(
      ids,
      [...ids].sort((a, b) => b - a),
      `fetch ${fetches}: newest first`,
    )
    if (next !== null) {
      const oldest = expectedEvents(await allRows(app), { ...filter, FromEventId: String(next) })
        .slice(0, 50)
        .map((e) => e.id)
      if (JSON.stringify([...ids].reverse()) !== JSON.stringify(oldest)) t.fail(`fetch ${fetches}: not the oldest ${oldest.length} matches from ${next}`)
    }
    received.push(...ids)
    if (ids.length) {
      // The client's rule: the next fetch starts after items[0].
      next = page.data[0].eventID + 1
      empty = 0
    } else empty++
    // Meanwhile new events arrive (some match), and the index moves on now and then.
    if (fetches < 10) for (let i = 0; i < 4; i++) await recordEvents(app, Date.now(), [make(), make(), make()])
    // SQLite's index moves on (PostgreSQL reads its own indexes).
    if (fetches % 3 === 0 && backendOf(app) === 'sqlite') app.repos.eventQueries.indexer.step('events', 600)
  }
  const want = expectedEvents(await allRows(app), { ...filter, FromDate: fromDate }).map((e) => e.id)
  t.equal(new Set(received).size, received.length, 'no event twice (no duplicate incident)')
  t.same(
    [...received].sort((a, b) => a - b),
    want,
    `every matching event since the start (${want.length}) once, in ${fetches} fetches`,
  )
  t.ok(fetches > 8, 'the backlog took several pages')
})

t.test('the first call by date answers the oldest events of its window, newest first', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  const rows = await addEvents(app, 400, { now, days: 4 })
  const from = new Date(now - 3 * DAY).toISOString()
  const to = new Date(now - DAY).toISOString()
  const window = expectedEvents(rows, { Category: 'USB', MinimumSeverity: 'Warning', FromDate: from, ToDate: to })
  t.ok(window.length > 30, 'the window holds more than a page')
  const page = await getEvents(app, token, `pageSize=20&pageNumber=1&sortBy=date_asc&category=USB&minimumSeverity=Warning&FromDate=${from}&ToDate=${to}`)
  t.same(
    page.data.map((e) => e.eventID),
    window
      .slice(0, 20)
      .map((e) => e.id)
      .reverse(),
    'the 20 oldest of the window, items[0] the newest of them',
  )
  t.equal(page.recordsFiltered, window.length, 'recordsFiltered counts the whole window')
  const second = await getEvents(app, token, `pageSize=20&pageNumber=2&sortBy=date_asc&category=USB&minimumSeverity=Warning&FromDate=${from}&ToDate=${to}`)
  t.same(
    second.data.map((e) => e.eventID),
    window
      .slice(20, 40)
      .map((e) => e.id)
      .reverse(),
    'PageNumber takes the next slice, as in the feed',
  )
})

t.test('consoles keep the order they ask for', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  const rows = await addEvents(app, 200, { now, days: 2 })
  const from = new Date(now - DAY).toISOString()
  const since = rows[50].id
  const cases: [string, Record<string, string>, string][] = [
    [`sortBy=creationTime_asc&FromDate=${from}`, { FromDate: from }, 'creationTime_asc'],
    [`sortBy=date_asc&ToDate=${from}`, { ToDate: from }, 'date_asc'],
    ['sortBy=date_asc&category=USB', { Category: 'USB' }, 'date_asc'],
    [`sortBy=date_desc&FromEventId=${since}`, { FromEventId: String(since) }, 'date_desc'],
    [`sortBy=eventID_asc&FromEventId=${since}`, { FromEventId: String(since) }, 'eventID_asc'],
    [`FromEventId=${since}`, { FromEventId: String(since) }, 'eventID_desc'],
  ]
  for (const [query, q, order] of cases) {
    const page = await getEvents(app, token, `${query}&pageSize=25`)
    t.same(
      page.data.map((e) => e.eventID),
      sortEvents(expectedEvents(rows, q), order)
        .slice(0, 25)
        .map((e) => e.id),
      query,
    )
  }
})
