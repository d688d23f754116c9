// Pins the bytes of the events CSV export: a seeded export is compared with a line-by-line
// reference writer of the format (byte-order mark, the header, CRLF, times as ISO 8601
// with milliseconds, numbers as they are, nulls empty, quotes where a comma, quote, CR or
// LF needs them, formulas defused with a leading ' and quoted), over more rows than one
// chunk of the stream and across index blocks, in every way the export reads its rows (by
// id, by time, by a free text, with a text filter), and the small export in
// fixtures/events-export.csv (as the export wrote it when this test was added) byte for byte.
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call } from './helpers.js'
import { parseCsv } from './fixtures/documents.js'
import { addEvents, asRow } from './fixtures/events.js'
import { recordEvents } from './seed.js'
import type { EventInput, EventRow } from '../lib/events/ports.js'

const URL = '/prime/webui/Events/ExportGetEvents'
const GOLDEN = path.join(import.meta.dirname, 'fixtures', 'events-export.csv')
// A second before midnight: the odd events below cross into the next day.
const NOW = Date.UTC(2026, 0, 15, 23, 59, 58, 0)
const severityNames = ['Emergency', 'Alert', 'Critical', 'Error', 'Warning', 'Notice', 'Informational', 'Debug']

/** Cells the format must quote, defuse or leave alone, and texts beyond ASCII. */
const odd = [
  'plain',
  'with,comma',
  'with "quotes"',
  'line\r\nbreak',
  'lone\rcr',
  'lone\nlf',
  '=SUM(A1:A2)',
  '+1',
  '-x',
  '@cmd',
  '\tTab',
  '\rCR first',
  '＝full',
  '＋x',
  '－y',
  '＠z',
  'ü 漢字 😀 emoji',
  '',
  "'quote",
  ' leading space',
  '=a,"b"',
  'trailing comma,',
]

function oddEvents(): { createdMs: number; input: EventInput }[] {
  return odd.map((text, i) => ({
    // Milliseconds of 0, 7, 42, 999 ... and a second that starts the next day.
    createdMs: NOW + 1000 * Math.floor(i / 4) + [0, 7, 42, 999][i % 4],
    input: {
      code: i % 2 ? '0x110004' : '0x210001',
      severity: i % 8,
      category: i % 2 ? 'USB' : 'Network',
      entityId: `${odd[(i + 5) % odd.length]} (10.0.0.${i})`,
      description: odd[(i + 11) % odd.length] || 'x',
      details: text,
      hashtags: [null, '', '#a,#b', '#Attack-Tool'][i % 4],
      peripheralIcon: [-1, 0, 14][i % 3],
      assetKey: i % 3 ? `key-${i}` : null,
      assetName: i % 5 ? odd[(i + 3) % odd.length] : null,
      peripheralAssetId: i % 2 ? `USB\\VID_0951&PID_1666\\${i}` : null,
    },
  }))
}

/** One cell by the format's rules (the events export's: a defused formula is always quoted). */
function cell(v: string | number | null): string {
  if (v === null || v === '') return ''
  if (typeof v === 'number') return String(v)
  if (/^[=+\-@\t\r＝＋－＠]/.test(v)) return `"'${v.replaceAll('"', '""')}"`
  return /[",\r\n]/.test(v) ? `"${v.replaceAll('"', '""')}"` : v
}

/** An event's line, its cells in PrimeEventView's order. */
const line = (e: EventRow) =>
  [
    e.id,
    new Date(e.created_ms).toISOString(),
    e.created_ms,
    e.event_code,
    e.severity,
    severityNames[e.severity],
    e.category,
    e.entity_id,
    e.description,
    e.details,
    e.hashtags,
    e.peripheral_icon,
    e.asset_key,
    e.asset_name,
    e.peripheral_asset_id,
  ]
    .map(cell)
    .join(',') + '\r\n'

async function seeded(t: Parameters<typeof build>[0]): Promise<{ app: FastifyInstance; token: string; rows: EventRow[]; firstOdd: number }> {
  const app = await build(t)
  const token = await login(app)
  // Id jumps put the events into several blocks of the index.
  const rows = await addEvents(app, 2600, { now: NOW - 2000, days: 2, seed: 5, jumps: [900, 1800] })
  let firstOdd = 0
  for (const { createdMs, input } of oddEvents()) {
    const [id] = (await recordEvents(app, createdMs, [input])) as number[]
    firstOdd ||= id
    rows.push(asRow(id, createdMs, input))
  }
  return { app, token, rows, firstOdd }
}

const { app, token, rows, firstOdd } = await seeded(t)

t.test('the export is the reference format byte for byte, whichever way its rows are read', async (t) => {
  const header = Object.keys(app.contract.spec.components.schemas.PrimeEventView.properties)
  t.same(
    header,
    [
      'eventID',
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
    ],
    'the columns the reference writes',
  )
  const byId = new Map(rows.map((e) => [e.id, e]))
  for (const body of [{}, { SortBy: 'date_asc' }, { SortBy: 'details_asc' }, { SortBy: 'eventID_asc', GlobalSearch: 'Büro' }, { Details: 'emoji' }]) {
    const res = await call(app, token, { method: 'POST', url: URL, payload: body })
    t.equal(res.statusCode, 200, JSON.stringify(body))
    const text = res.rawPayload.toString('utf8')
    t.equal(Buffer.compare(Buffer.from(text, 'utf8'), res.rawPayload), 0, 'valid UTF-8')
    // The order is pinned elsewhere (tests/events-exports.test.ts): the file's own order of ids, each line by the reference.
    const ids = parseCsv(text.slice(1))
      .slice(1)
      .map((r) => Number(r[0]))
    t.equal(ids.length, Number(res.headers['x-records-filtered']), `${JSON.stringify(body)}: every match`)
    t.ok(
      ids.every((id) => byId.has(id)),
      'only events written',
    )
    const want = '\ufeff' + header.join(',') + '\r\n' + ids.map((id) => line(byId.get(id)!)).join('')
    t.equal(text, want, `${JSON.stringify(body)}: ${ids.length} lines`)
  }
  const all = await call(app, token, { method: 'POST', url: URL, payload: {} })
  t.equal(all.headers['x-records-filtered'], String(rows.length), 'the first export held every event')
})

t.test('a small export is the file in fixtures/events-export.csv byte for byte', async (t) => {
  const res = await call(app, token, { method: 'POST', url: URL, payload: { FromEventId: firstOdd - 3 } })
  t.equal(res.statusCode, 200)
  t.equal(Buffer.compare(res.rawPayload, fs.readFileSync(GOLDEN)), 0, 'the same bytes')
  t.equal(res.rawPayload.toString('utf8'), fs.readFileSync(GOLDEN, 'utf8'))
})
