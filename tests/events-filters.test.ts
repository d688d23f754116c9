// Pins GetEvents: every filter alone and combined, every sort order in both directions,
// paging, recordsTotal and recordsFiltered, against a brute-force model of the written
// events; the same answers whether the query index has indexed nothing, part or all of
// them; bad values answer 400 naming the parameter.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call, userWithProfile } from './helpers.js'
import { addEvents, expectedEvents, sortEvents, DAY } from './fixtures/events.js'
import { holdIndexing, indexEvents, query, recordEvents, stepIndex } from './seed.js'
import { parseCsv } from './fixtures/documents.js'
import type { EventRow } from '../lib/events/ports.js'

const URL = '/prime/webui/Events/GetEvents'
const NOW = Date.UTC(2025, 0, 10, 12, 0, 0)
const iso = (ms: number) => new Date(ms).toISOString()

const SORT_FIELDS = [
  'eventID',
  'date',
  'creationTime',
  'creationTimeEpoch',
  'eventCode',
  'severity',
  'severityString',
  'category',
  'eventEntityID',
  'description',
  'details',
  'hashtags',
  'peripheralIcon',
  'assetKey',
  'assetName',
  'peripheralAssetId',
]

function cases(rows: EventRow[]): Record<string, string>[] {
  const mid = rows[Math.floor(rows.length / 2)]
  // Time ranges that end exactly on a block's earliest or latest event (ids jump between
  // blocks), where a block's time span alone decides whether it is read.
  const block = rows.filter((r) => Math.floor(r.id / 4096) === Math.floor(mid.id / 4096))
  const [first, last] = [String(block[0].created_ms), String(block[block.length - 1].created_ms)]
  const edges = [
    { FromCreationTimeEpoch: first, ToCreationTimeEpoch: first },
    { FromCreationTimeEpoch: last, ToCreationTimeEpoch: last },
    { ToCreationTimeEpoch: first },
    { FromCreationTimeEpoch: last },
    { MinimumSeverity: 'Emergency', ToCreationTimeEpoch: first },
  ]
  return [
    ...edges,
    {},
    { Severity: 'Warning' },
    { Severity: '2' },
    { Severity: 'critical' },
    { Severity: 'Emergency' },
    { MinimumSeverity: 'Warning' },
    { MinimumSeverity: '3' },
    { MinimumSeverity: 'info' },
    { MinimumSeverity: 'Emergency' },
    { Category: 'USB' },
    { Category: 'usb,Host' },
    { Category: ' network , system ' },
    { Category: 'General' },
    { PeripheralIcon: '-1' },
    { PeripheralIcon: '1,2,3' },
    { PeripheralIcon: '14' },
    { Source: 'desktop-9lr' },
    { Source: 'DESKTOP-9LR722S (10.0.0.2)' },
    { Source: '(10.0.1' },
    { Source: 'zÜrich' },
    { Source: 'Prime' },
    { Source: 'ws' },
    { Source: 'nothing-like-this' },
    { Description: 'usb peripheral' },
    { Description: 'RECONNECTED' },
    { Description: 'failed' },
    { Details: 'was removed' },
    { Details: '100%' },
    { Details: 'on fra-ops_' },
    { Details: '=HYPERLINK' },
    { Details: '_x' },
    { Details: 'ü' },
    { AssetKey: '3b5e1c2a' },
    { AssetKey: '0000-4000' },
    { AssetName: 'lon-eng' },
    { AssetName: 'büro' },
    { PeripheralAssetId: 'VID_0951' },
    { PeripheralAssetId: '&0&' },
    { GlobalSearch: 'kingston' },
    { GlobalSearch: 'warning' },
    { GlobalSearch: 'usb' },
    { GlobalSearch: '0x2100' },
    { GlobalSearch: '#attack' },
    { GlobalSearch: 'nyc-fin' },
    { GlobalSearch: 'Alarm' },
    { GlobalSearch: 'ZÜRICH' },
    { GlobalSearch: 'x' },
    { Date: iso(NOW - DAY).slice(0, 10) },
    { Date: `${iso(NOW - 2 * DAY).slice(0, 10)}T23:59:59+05:00` },
    { FromDate: iso(NOW - DAY) },
    { ToDate: iso(NOW - 2 * DAY).slice(0, 10) },
    {
      FromDate: iso(NOW - 2 * DAY)
        .replace('T', ' ')
        .replace('Z', ''),
      ToDate: iso(NOW - DAY),
    },
    { FromCreationTimeEpoch: String(NOW - 36 * 3_600_000), ToCreationTimeEpoch: String(NOW - 12 * 3_600_000) },
    { FromEventId: String(mid.id) },
    { ToEventId: String(mid.id) },
    { FromEventId: String(mid.id - 5), ToEventId: String(mid.id + 5) },
    { FromEventId: '0' },
    { MinimumSeverity: 'Warning', FromDate: iso(NOW - 2 * DAY), ToDate: iso(NOW - DAY) },
    { Category: 'USB', PeripheralIcon: '3', Details: 'kingston' },
    { Source: 'nyc', MinimumSeverity: '4', FromEventId: String(mid.id) },
    { GlobalSearch: 'armed', Category: 'USB,Host', ToDate: iso(NOW - DAY) },
    { GlobalSearch: 'desktop', Severity: 'Warning' },
    { AssetName: 'desktop', Details: 'mouse', Severity: '6' },
    { Description: 'usb', GlobalSearch: 'removed', FromEventId: String(mid.id) },
    { Severity: 'Warning', MinimumSeverity: 'Critical' },
    { FromDate: iso(NOW), ToDate: iso(NOW - DAY) },
  ]
}

async function get(app: FastifyInstance, token: string, q: Record<string, string>) {
  const res = await call(app, token, { method: 'GET', url: `${URL}?${new URLSearchParams(q)}` })
  if (res.statusCode !== 200) throw new Error(`${JSON.stringify(q)}: ${res.statusCode} ${res.body}`)
  return res.json() as { recordsTotal: number; recordsFiltered: number; data: { eventID: number }[] }
}

t.test('every filter and sort matches the model, whatever part of the events the index holds', async (t) => {
  const app = await build(t)
  holdIndexing(app, true)
  const token = await login(app)
  const rows = await addEvents(app, 420, { now: NOW, days: 3, jumps: [150, 300] })
  t.ok(rows[rows.length - 1].id > 140_000, 'the events span several index blocks')
  const queries = cases(rows)
  for (const stage of ['nothing indexed', 'part indexed', 'all indexed']) {
    if (stage === 'part indexed') stepIndex(app, 'events', 230)
    if (stage === 'all indexed') indexEvents(app)
    let mismatches = 0
    for (const q of queries) {
      const want = sortEvents(expectedEvents(rows, q))
      const all = await get(app, token, { ...q, PageSize: '1000' })
      const ok = all.recordsTotal === rows.length && all.recordsFiltered === want.length && JSON.stringify(all.data.map((e) => e.eventID)) === JSON.stringify(want.map((e) => e.id))
      const paged = await get(app, token, { ...q, PageSize: '7', PageNumber: '3' })
      const pageOk = JSON.stringify(paged.data.map((e) => e.eventID)) === JSON.stringify(want.slice(14, 21).map((e) => e.id)) && paged.recordsFiltered === want.length
      if (!ok || !pageOk) {
        mismatches++
        t.fail(`${stage}: ${JSON.stringify(q)}: got ${all.recordsFiltered} [${all.data.slice(0, 8).map((e) => e.eventID)}], want ${want.length} [${want.slice(0, 8).map((e) => e.id)}]`)
      }
    }
    t.equal(mismatches, 0, `${stage}: ${queries.length} queries answer as the model does, whole and paged`)
    for (const field of SORT_FIELDS) {
      for (const dir of ['asc', 'desc']) {
        for (const q of [{}, { MinimumSeverity: 'Warning' }, { GlobalSearch: 'desktop' }, { FromDate: iso(NOW - DAY) }]) {
          const sortBy = `${field}_${dir}`
          // date_asc with a lower bound is the SOAR incident fetch: the feed's page (the 41st
          // to 80th oldest by id, newest first; tests/events-incident-fetch.test.ts).
          const incidentFetch = sortBy === 'date_asc' && 'FromDate' in q
          const want = incidentFetch ? expectedEvents(rows, q).slice(40, 80).reverse() : sortEvents(expectedEvents(rows, q), sortBy).slice(40, 80)
          const page = await get(app, token, { ...q, SortBy: sortBy, PageSize: '40', PageNumber: '2' })
          const got = page.data.map((e) => e.eventID)
          if (JSON.stringify(got) !== JSON.stringify(want.map((e) => e.id))) t.fail(`${stage}: ${sortBy} ${JSON.stringify(q)}: got [${got.slice(0, 6)}], want [${want.slice(0, 6).map((e) => e.id)}]`)
        }
      }
    }
    t.pass(`${stage}: every sort field in both directions pages as the model does`)
  }
})

t.test("a rare kind's pages pass over the index blocks by their counts, from any event id, in both directions", async (t) => {
  const app = await build(t)
  holdIndexing(app, true)
  const token = await login(app)
  // Three level 1 blocks of the kinds' ids (65,536 ids each): a page of a rare kind reads
  // the ids of the blocks it reaches and passes over the others by their counts.
  const rows = await addEvents(app, 420, { now: NOW, days: 3, jumps: [150, 300] })
  const mid = rows[210].id
  const queries = [
    { Severity: 'Critical' },
    { Severity: 'Error' },
    { Severity: 'Error', FromEventId: String(mid) },
    { Severity: 'Error', ToEventId: String(mid) },
    { Severity: 'Error', FromEventId: String(rows[40].id), ToEventId: String(rows[380].id) },
    { MinimumSeverity: 'Critical', FromEventId: String(mid) },
  ]
  for (const stage of ['part indexed', 'all indexed']) {
    if (stage === 'part indexed') stepIndex(app, 'events', 260)
    else indexEvents(app)
    let pages = 0
    for (const q of queries) {
      for (const sortBy of ['eventID_asc', 'eventID_desc', 'eventCode_asc', 'eventCode_desc']) {
        const want = sortEvents(expectedEvents(rows, q), sortBy).map((e) => e.id)
        for (let page = 1; page <= Math.ceil(want.length / 30) + 1; page++) {
          const got = (await get(app, token, { ...q, SortBy: sortBy, PageSize: '30', PageNumber: String(page) })).data.map((e) => e.eventID)
          const w = want.slice(30 * (page - 1), 30 * page)
          if (JSON.stringify(got) !== JSON.stringify(w)) t.fail(`${stage}: ${sortBy} ${JSON.stringify(q)} page ${page}: got [${got.slice(0, 6)}], want [${w.slice(0, 6)}]`)
          pages++
        }
      }
    }
    t.ok(pages >= 80, `${stage}: ${pages} pages answer as the model does`)
  }
})

t.test('the answer carries every field of an event as stored', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  const [id] = (await recordEvents(app, now, [
    {
      code: '0x110005',
      severity: 2,
      category: 'USB',
      entityId: 'DESKTOP-9LR722S (192.168.100.128)',
      description: 'Known attack tool detected',
      details: 'Hak5 USB Rubber Ducky on DESKTOP-9LR722S; agent is Armed, device blocked.',
      hashtags: '#attack-tool #armed',
      peripheralIcon: 1,
      assetKey: '3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b',
      assetName: 'DESKTOP-9LR722S',
      peripheralAssetId: 'USB\\VID_03EB&PID_2401\\000000000001',
    },
  ])) as number[]
  const body = await get(app, token, {})
  t.same(body.data[0], {
    eventID: id,
    creationTime: new Date(now).toISOString(),
    creationTimeEpoch: now,
    eventCode: '0x110005',
    severity: 2,
    severityString: 'Critical',
    category: 'USB',
    eventEntityID: 'DESKTOP-9LR722S (192.168.100.128)',
    description: 'Known attack tool detected',
    details: 'Hak5 USB Rubber Ducky on DESKTOP-9LR722S; agent is Armed, device blocked.',
    hashtags: '#attack-tool #armed',
    peripheralIcon: '1',
    assetKey: '3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b',
    assetName: 'DESKTOP-9LR722S',
    peripheralAssetId: 'USB\\VID_03EB&PID_2401\\000000000001',
  })
  const [server] = (await recordEvents(app, now, [{ code: '0x410001', severity: 3, category: 'System', entityId: 'Prime server', description: 'Alarm delivery failure', details: 'x' }])) as number[]
  const s = await get(app, token, { FromEventId: String(server) })
  t.match(s.data[0], { eventID: server, hashtags: null, peripheralIcon: '-1', assetKey: null, assetName: null, peripheralAssetId: null }, 'absent fields are null, no peripheral is -1')
})

t.test('parameter names in any case, empty ones ignored, a User may read', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'reader', 10)
  const rows = await addEvents(app, 60, { now: Date.now(), days: 1 })
  const want = sortEvents(expectedEvents(rows, { MinimumSeverity: 'Warning', Category: 'USB' }), 'severity_asc')
  const res = await call(app, user, { method: 'GET', url: `${URL.toLowerCase()}?minimumseverity=Warning&category=usb&sortBy=severity_asc&pageSize=100&source=&globalSearch=` })
  t.equal(res.statusCode, 200, res.body)
  t.same(
    res.json().data.map((e: { eventID: number }) => e.eventID),
    want.map((e) => e.id),
  )
})

t.test('bad values answer 400 naming the parameter', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const bad: [string, string][] = [
    ['Severity=Loud', 'Severity'],
    ['Severity=8', 'Severity'],
    ['MinimumSeverity=warn ing', 'MinimumSeverity'],
    ['MinimumSeverity=Severe', 'MinimumSeverity'],
    ['Category=USB,Printer', 'Category'],
    ['Category=1', 'Category'],
    ['PeripheralIcon=300', 'PeripheralIcon'],
    ['PeripheralIcon=a', 'PeripheralIcon'],
    ['PeripheralIcon=1,,2', 'PeripheralIcon'],
    ['Date=2024-02-30', 'Date'],
    ['FromDate=yesterday', 'FromDate'],
    ['ToDate=2024-05-01T25:00:00Z', 'ToDate'],
    ['FromDate=2024-05-01T10:00:00+15:00', 'FromDate'],
    ['SortBy=colour_asc', 'SortBy'],
    ['SortBy=severity', 'SortBy'],
    ['PageSize=0', 'PageSize'],
    ['PageSize=1000001', 'PageSize'],
    ['PageNumber=0', 'PageNumber'],
    ['FromEventId=-1', 'FromEventId'],
    ['ToEventId=abc', 'ToEventId'],
    ['FromCreationTimeEpoch=1.5', 'FromCreationTimeEpoch'],
    ['Source=a%00b', 'Source'],
    ['GlobalSearch=' + 'x'.repeat(257), 'GlobalSearch'],
    ['Details=' + 'y'.repeat(257), 'Details'],
  ]
  for (const [q, name] of bad) {
    for (const url of [URL, '/prime/webui/Events/GetEventsIntegration']) {
      const res = await call(app, token, { method: 'GET', url: `${url}?${q}` })
      t.equal(res.statusCode, 400, `${url} ${q.slice(0, 40)}`)
      t.ok(
        res.json().errors?.some((e: { name: string }) => e.name === name),
        `${q.slice(0, 40)} names ${name}: ${res.json().detail}`,
      )
    }
  }
})

t.test('unauthenticated callers are refused', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: URL })
  t.equal(res.statusCode, 401)
})

t.test('a broad text search passes over the blocks that hold no kind with a match, and pages and exports the same', async (t) => {
  const app = await build(t)
  holdIndexing(app, true)
  const token = await login(app)
  await addEvents(app, 200, { now: NOW - DAY, days: 2, jumps: [100] })
  // A mass disconnect: whole blocks of one kind whose texts hold none of the terms below,
  // then ordinary traffic again.
  const disconnects = Array.from({ length: 9000 }, (_, i) => ({
    code: '0x310002',
    severity: 4,
    category: 'Host' as const,
    description: 'Agent disconnected',
    entityId: `HOST-${i % 500}`,
    details: 'The agent stopped checking in.',
  }))
  for (let i = 0; i < disconnects.length; i += 500) await recordEvents(app, NOW - DAY / 2, disconnects.slice(i, i + 500))
  await addEvents(app, 150, { now: NOW, days: 0.5, seed: 3 })
  const rows = (await query(app, 'SELECT * FROM events ORDER BY id')) as EventRow[]
  const queries = [
    { GlobalSearch: 'kingston' },
    { GlobalSearch: 'usb' },
    { GlobalSearch: 'kingston', MinimumSeverity: 'Notice' },
    { GlobalSearch: 'fra-ops' },
    { Details: 'removed' },
    // In the sources' names only, not in any details or kind.
    { GlobalSearch: 'host-49' },
    { GlobalSearch: 'HOST-42' },
  ]
  for (const stage of ['part indexed', 'all indexed']) {
    // The mark first falls among the disconnects: the rows above it are read directly.
    if (stage === 'part indexed') stepIndex(app, 'events', 6000)
    else indexEvents(app)
    for (const q of queries) {
      for (const sortBy of ['eventID_desc', 'eventID_asc']) {
        const want = sortEvents(expectedEvents(rows, q), sortBy).map((e) => e.id)
        const whole = await get(app, token, { ...q, SortBy: sortBy, PageSize: '1000' })
        t.same({ n: whole.recordsFiltered, ids: whole.data.map((e) => e.eventID) }, { n: want.length, ids: want }, `${stage}: ${JSON.stringify(q)} ${sortBy}, in one page`)
        const paged: number[] = []
        for (let page = 1; page <= Math.ceil(want.length / 9) + 1; page++) {
          paged.push(...(await get(app, token, { ...q, SortBy: sortBy, PageSize: '9', PageNumber: String(page) })).data.map((e) => e.eventID))
        }
        t.same(paged, want, `${stage}: ${JSON.stringify(q)} ${sortBy}, page by page`)
        const csv = await call(app, token, { method: 'POST', url: '/prime/webui/Events/ExportGetEvents', payload: { ...q, SortBy: sortBy } })
        t.same(
          parseCsv(csv.body.slice(1))
            .slice(1)
            .map((r) => Number(r[0])),
          want,
          `${stage}: ${JSON.stringify(q)} ${sortBy}, exported`,
        )
      }
    }
  }
  t.ok(expectedEvents(rows, { GlobalSearch: 'usb' }).length > 100, 'the broad term matches many events')
})
