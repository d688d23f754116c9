// Pins GetEvents sorted by a free-text field (eventEntityID, details, assetKey, assetName,
// peripheralAssetId): every match must be read and sorted, so above 20000 matches the list
// answers 400 naming SortBy and how to narrow it, as the contract says; a narrowed query
// still sorts as the model does; the kind and time orders, the feed and the exports are
// not limited.
import t from 'tap'
import { build, login, call } from './helpers.js'
import { recordEvents } from './seed.js'
import { asRow, eventMaker, expectedEvents, sortEvents, DAY } from './fixtures/events.js'
import { EVENT_ROW_SORTS, type EventRow } from '../lib/events/ports.js'
import { eventSorts, sortedByRows } from '../db/event-engine/event-plans.js'

const URL = '/prime/webui/Events/GetEvents'
const NOW = Date.UTC(2025, 0, 10, 12, 0, 0)
const LIMIT = 20_000

t.test("the event engine's sorts that read every match are the contract's free-text fields", async (t) => {
  t.same(sortedByRows(eventSorts), EVENT_ROW_SORTS)
})

t.test('a free-text sort of more than 20000 matches is refused with a 400 that says how to narrow it', async (t) => {
  const app = await build(t)
  const token = await login(app)
  // LIMIT + 1 events, a day apart in two halves: one day's half is under the limit.
  const make = eventMaker(3)
  const rows: EventRow[] = []
  for (const [at, n] of [
    [NOW - 2 * DAY, LIMIT / 2],
    [NOW - DAY / 2, LIMIT / 2 + 1],
  ] as const) {
    const batch = Array.from({ length: n }, make)
    const ids = (await recordEvents(app, at, batch)) as number[]
    ids.forEach((id, i) => rows.push(asRow(id, at, batch[i])))
  }
  const get = (q: Record<string, string>) => call(app, token, { method: 'GET', url: `${URL}?${new URLSearchParams(q)}` })

  for (const field of ['eventEntityID', 'details', 'assetKey', 'assetName', 'peripheralAssetId']) {
    for (const dir of ['asc', 'desc']) {
      const res = await get({ SortBy: `${field}_${dir}` })
      t.equal(res.statusCode, 400, `${field}_${dir}: 400`)
      const body = res.json()
      t.match(
        body,
        {
          code: 'validation',
          errors: [
            {
              location: 'query',
              name: 'SortBy',
              reason: `sorting by ${field} needs filters leaving at most ${LIMIT} events (these leave ${LIMIT + 1}): narrow with FromDate/ToDate, FromEventId/ToEventId or a text filter, or sort by eventID, date or a field such as severity`,
            },
          ],
        },
        `${field}_${dir}: names SortBy, the limit, the matches and how to narrow`,
      )
    }
  }
  // The parameter names arrive in any case (the SOAR and SIEM clients send camelCase).
  t.equal((await call(app, token, { method: 'GET', url: `${URL.toLowerCase()}?sortBy=details_asc&pageSize=5` })).statusCode, 400)
  t.match(
    (await get({ SortBy: 'details_asc', GlobalSearch: '0x' })).json(),
    { errors: [{ name: 'SortBy', reason: /these leave 20001\)/ }] },
    'a text filter that leaves more (every event code has 0x) is refused too',
  )

  // Narrowed under the limit, by a day, an id range or a text filter: sorted as the model sorts.
  const day = new Date(NOW - 2 * DAY).toISOString().slice(0, 10)
  const narrowings: Record<string, string>[] = [{ Date: day }, { FromEventId: String(rows[LIMIT / 2].id) }, { Source: 'zürich' }, { AssetName: 'nyc-fin', Details: 'mouse' }]
  for (const q of narrowings) {
    for (const sortBy of ['details_asc', 'eventEntityID_desc', 'assetName_asc', 'peripheralAssetId_desc', 'assetKey_asc']) {
      const want = sortEvents(expectedEvents(rows, q), sortBy)
      t.ok(want.length <= LIMIT, `${JSON.stringify(q)} leaves ${want.length}`)
      const res = await get({ ...q, SortBy: sortBy, PageSize: '50', PageNumber: '2' })
      t.equal(res.statusCode, 200, `${JSON.stringify(q)} ${sortBy}: served`)
      const body = res.json() as { recordsFiltered: number; data: { eventID: number }[] }
      t.same([body.recordsFiltered, body.data.map((e) => e.eventID)], [want.length, want.slice(50, 100).map((e) => e.id)], `${JSON.stringify(q)} ${sortBy}: sorted as the model`)
    }
  }

  // Not limited: the kind and time orders, the id order, the feed's page, the exports.
  for (const sortBy of ['severity_asc', 'description_desc', 'hashtags_asc', 'creationTime_desc', 'eventID_asc']) {
    const res = await get({ SortBy: sortBy, PageSize: '5' })
    t.equal(res.statusCode, 200, `${sortBy}: served`)
    t.equal(res.json().recordsFiltered, LIMIT + 1)
  }
  const feed = await call(app, token, { method: 'GET', url: `/prime/webui/Events/GetEventsIntegration?SortBy=details_asc&PageSize=100&FromEventId=1` })
  t.equal(feed.statusCode, 200, 'the feed sorts its page only')
  t.same(
    feed.json().data.map((e: { eventID: number }) => e.eventID),
    sortEvents(rows.slice(0, 100), 'details_asc').map((e) => e.id),
  )
  const csv = await call(app, token, { method: 'POST', url: '/prime/webui/Events/ExportGetEvents', payload: { SortBy: 'details_asc' } })
  t.equal(csv.statusCode, 200, 'an export sorts every match')
  t.equal(csv.headers['x-records-filtered'], String(LIMIT + 1))
})
