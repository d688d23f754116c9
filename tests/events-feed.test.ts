// Pins the polling rule of GetEventsIntegration: a page is the oldest PageSize matching
// events at or after FromEventId, newest first; a SIEM poller that asks again from
// data[0].eventID + 1 receives every event exactly once, through a backlog of many pages
// and while new events keep arriving, whether it reads a page as given or in reverse,
// and whatever part of the events the query index holds.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call } from './helpers.js'
import { addEvents, expectedEvents, sortEvents, eventMaker } from './fixtures/events.js'
import { backendOf, holdIndexing, query, recordEvents } from './seed.js'

const URL = '/prime/webui/Events/GetEventsIntegration'

interface Page {
  recordsTotal: number
  recordsFiltered: number
  data: { eventID: number; creationTimeEpoch: number; severity: number }[]
}

async function poll(app: FastifyInstance, token: string, q: Record<string, string>): Promise<Page> {
  const res = await call(app, token, { method: 'GET', url: `${URL}?${new URLSearchParams(q)}` })
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`)
  return res.json()
}

/** New events through the gateway's write path: a few check-ins' worth. */
async function live(app: FastifyInstance, make: ReturnType<typeof eventMaker>, n: number) {
  for (let i = 0; i < n; i += 3) await recordEvents(app, Date.now(), [make(), make(), make()].slice(0, n - i))
}

t.test('a poller following the rule receives every event exactly once, backlog and live traffic, either reading order', async (t) => {
  const app = await build(t)
  holdIndexing(app, true)
  const token = await login(app)
  await addEvents(app, 2600, { now: Date.now() - 60_000, days: 2, jumps: [1200] })
  const make = eventMaker(99)
  for (const reading of ['as given', 'in reverse']) {
    for (const filter of [{}, { MinimumSeverity: 'Warning' }, { Category: 'USB', GlobalSearch: 'desktop' }] as Record<string, string>[]) {
      const received: number[] = []
      let next = 0
      let polls = 0
      let emptyPolls = 0
      while (emptyPolls < 2 && polls < 200) {
        polls++
        const page = await poll(app, token, { ...filter, FromEventId: String(next), PageSize: '500' })
        const ids = page.data.map((e) => e.eventID)
        // Newest first, and the oldest matches at or after FromEventId.
        t.same(
          ids,
          [...ids].sort((a, b) => b - a),
          'a page is newest first',
        )
        const rows = (await query(app, 'SELECT * FROM events WHERE id >= ? ORDER BY id', next)) as Parameters<typeof expectedEvents>[0]
        const oldest = expectedEvents(rows, filter)
          .slice(0, 500)
          .map((e) => e.id)
        if (JSON.stringify([...ids].reverse()) !== JSON.stringify(oldest)) t.fail(`page from ${next} is not the oldest ${oldest.length} matches`)
        if (page.recordsFiltered !== expectedEvents(rows, filter).length) t.fail(`recordsFiltered from ${next}: ${page.recordsFiltered}`)
        const processed = reading === 'as given' ? ids : [...ids].reverse()
        received.push(...processed)
        if (ids.length) {
          next = page.data[0].eventID + 1
          emptyPolls = 0
        } else emptyPolls++
        // Meanwhile: new events, and the index moving on now and then.
        if (polls < 12) await live(app, make, 37)
        // SQLite's index moves on (PostgreSQL reads its own indexes).
        if (polls % 3 === 0 && backendOf(app) === 'sqlite') app.repos.eventQueries.indexer.step('events', 700)
      }
      const all = (await query(app, 'SELECT * FROM events ORDER BY id')) as Parameters<typeof expectedEvents>[0]
      const want = expectedEvents(all, filter).map((e) => e.id)
      const sorted = [...received].sort((a, b) => a - b)
      t.equal(new Set(received).size, received.length, `${reading} ${JSON.stringify(filter)}: no event twice`)
      t.same(sorted, want, `${reading} ${JSON.stringify(filter)}: every matching event (${want.length}) once, in ${polls} polls`)
      t.ok(polls > 5, 'the backlog took several pages')
      if (reading === 'in reverse') t.same(received, sorted, 'walking each page in reverse gives the events oldest first')
    }
  }
})

t.test('PageNumber takes the next slices from the oldest; SortBy reorders inside the page only', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const rows = await addEvents(app, 90, { now: Date.now(), days: 1 })
  const from = rows[10].id
  const after = rows.filter((e) => e.id >= from)
  const second = await poll(app, token, { FromEventId: String(from), PageSize: '20', PageNumber: '2' })
  t.same(
    second.data.map((e) => e.eventID),
    after
      .slice(20, 40)
      .map((e) => e.id)
      .reverse(),
    'page 2 is the 21st to 40th oldest, newest first',
  )
  t.equal(second.recordsFiltered, after.length, 'recordsFiltered counts the whole backlog')
  t.equal(second.recordsTotal, rows.length)
  const bySeverity = await poll(app, token, { FromEventId: String(from), PageSize: '20', SortBy: 'severity_asc' })
  const slice = after.slice(0, 20)
  t.same(
    bySeverity.data.map((e) => e.eventID),
    sortEvents(slice, 'severity_asc').map((e) => e.id),
    'the same 20 events, by severity',
  )
  const empty = await poll(app, token, { FromEventId: String(rows[rows.length - 1].id + 1) })
  t.same(empty.data, [], 'nothing newer yet: empty data')
  t.equal(empty.recordsFiltered, 0)
})

t.test('FromDate and FromCreationTimeEpoch narrow the feed too; the default page holds 20', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  const rows = await addEvents(app, 120, { now, days: 2 })
  const from = now - 86_400_000
  const want = rows.filter((e) => e.created_ms >= from)
  const page = await poll(app, token, { FromDate: new Date(from).toISOString() })
  t.same(
    page.data.map((e) => e.eventID),
    want
      .slice(0, 20)
      .map((e) => e.id)
      .reverse(),
  )
  const byEpoch = await poll(app, token, { FromCreationTimeEpoch: String(from), FromEventId: String(want[5].id), PageSize: '5' })
  t.same(
    byEpoch.data.map((e) => e.eventID),
    want
      .slice(5, 10)
      .map((e) => e.id)
      .reverse(),
  )
})
