// backend: sqlite-only — event views written from SQLite rows read as arrays (db/event-rows.ts)
// Pins the events list's answer written from rows read as arrays (eventViewOf, no row
// object): for every row it is exactly the bytes that JSON.stringify writes for the row's
// view (same keys in the same order, the same forms of null, numbers and strings), over
// events stored through the real write path with every optional field present and absent,
// texts of every kind, and rows it does not expect; and the list answer as one string
// equals the answer's object stringified.
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { eventsRepo } from '../db/events.js'
import { EVENT_FIELDS, type EventInput, type EventRow, rowOf } from '../lib/events/ports.js'
import { EVENT_COLUMNS } from '../db/event-rows.js'
import { eventView, eventViewOf, eventsAnswer } from '../lib/events/views.js'
import { AnswerParts, listAnswer } from '../lib/listing.js'
import { eventMaker } from './fixtures/events.js'

const eventOf = rowOf(EVENT_FIELDS) as unknown as (r: unknown[]) => EventRow
const viewJson = (r: unknown[]) => JSON.stringify(eventView(eventOf(r)))
/** The answer's text of a row read as an array. */
const eventJson = (r: unknown[]) => JSON.stringify(eventViewOf(r))

/** Deterministic pseudo-random numbers (mulberry32). */
function rand(seed: number) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let x = a
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

// Characters JSON escapes or writes as they are: quotes, backslashes, controls, line
// separators, non-ASCII, astral characters and lone surrogates.
const ALPHABET = [
  'a',
  'Z',
  ' ',
  '"',
  '\\',
  '/',
  '\n',
  '\r',
  '\t',
  '\b',
  '\f',
  '\u0000',
  '\u001f',
  '\u007f',
  '\u2028',
  '\u2029',
  'é',
  'Ü',
  '中',
  '😀',
  '\ud800',
  '\udfff',
  '<',
  '>',
  '&',
  "'",
  '=',
  '%',
  '_',
]

function texts(seed: number) {
  const r = rand(seed)
  const text = (max: number) => Array.from({ length: Math.floor(r() * max) }, () => ALPHABET[Math.floor(r() * ALPHABET.length)]).join('')
  const maybe = (max: number) => (r() < 0.5 ? null : text(max))
  return { r, text, maybe }
}

t.test('a row read as an array is written as JSON.stringify writes its view, over stored events', async (t) => {
  const db = openDatabase(':memory:')
  t.teardown(() => db.close())
  const events = eventsRepo(db)
  const make = eventMaker(7)
  const { r, text, maybe } = texts(11)
  const inputs: EventInput[] = []
  for (let i = 0; i < 1500; i++) inputs.push(make())
  for (let i = 0; i < 1500; i++) {
    // Every optional field absent, present, or a text of every kind.
    const bare = r() < 0.3
    inputs.push({
      code: `0x${(0x110001 + (i % 7)).toString(16)}`,
      severity: i % 8,
      category: (['USB', 'Network', 'Host', 'System', 'General'] as const)[i % 5],
      entityId: text(40),
      description: text(30),
      details: text(200),
      ...(bare ? {} : { hashtags: maybe(20), peripheralIcon: Math.floor(r() * 257) - 1, assetKey: maybe(36), assetName: maybe(30), peripheralAssetId: maybe(50) }),
    })
  }
  const times = [0, 1, 999, 1_000, 86_399_999, Date.UTC(2026, 10, 26, 19, 0, 0, 5), Date.UTC(1999, 11, 31, 23, 59, 59, 999), 253402300799999]
  db.transaction(() => inputs.forEach((e, i) => events.record(times[i % times.length] + i, [e])))()
  const rows = db.prepare(`SELECT ${EVENT_COLUMNS} FROM events e ORDER BY e.id`).raw(true).all() as unknown[][]
  t.equal(rows.length, inputs.length)
  t.ok(
    rows.some((x) => x[8] === null && x[10] === null && x[11] === null && x[12] === null),
    'some rows have every optional field null',
  )
  t.ok(
    rows.some((x) => x[8] !== null && x[10] !== null && x[11] !== null && x[12] !== null),
    'some rows have every optional field',
  )
  const wrong = rows.filter((x) => eventJson(x) !== viewJson(x))
  t.same(wrong.slice(0, 3), [], 'the same text for every row')
})

t.test('rows it does not expect are written as their view is', async (t) => {
  const good = [42, Date.UTC(2026, 0, 1), '0x110001', 6, 'USB', 'H (10.0.0.1)', 'New USB peripheral detected', 'd', null, 2, 'k', 'n', 'p']
  const variants: [string, unknown[]][] = [
    ['the row as stored', good],
    ['a severity out of the scale', good.map((v, i) => (i === 3 ? 9 : v))],
    ['a severity as text', good.map((v, i) => (i === 3 ? '3' : v))],
    ['an icon as null', good.map((v, i) => (i === 9 ? null : v))],
    ['an icon as text', good.map((v, i) => (i === 9 ? '"x"' : v))],
    ['an id as text', good.map((v, i) => (i === 0 ? '42' : v))],
    ['a time with a fraction of a millisecond', good.map((v, i) => (i === 1 ? 1.5 : v))],
    ['a number for a text', good.map((v, i) => (i === 7 ? 1e21 : v))],
    ['a text cell missing', good.slice(0, 12)],
    ['an undefined cell', good.map((v, i) => (i === 10 ? undefined : v))],
    ['an id of Infinity', good.map((v, i) => (i === 0 ? Number.POSITIVE_INFINITY : v))],
  ]
  for (const [name, row] of variants) t.equal(eventJson(row), viewJson(row), name)
})

t.test('the list answer, as one string or in parts, is the answer object stringified', async (t) => {
  const { r, text, maybe } = texts(5)
  const rows: unknown[][] = Array.from({ length: 700 }, (_, i) => [
    i + 1,
    Date.UTC(2026, 0, 1) + Math.floor(r() * 1e9),
    '0x110001',
    i % 8,
    'USB',
    text(20),
    text(20),
    text(80),
    maybe(10),
    Math.floor(r() * 20) - 1,
    maybe(36),
    maybe(20),
    maybe(40),
  ])
  // One string up to 128 rows; above, parts of 64 rows (the last one shorter or whole).
  for (const [i, page] of [[], rows.slice(0, 1), rows.slice(0, 128), rows.slice(0, 129), rows.slice(0, 640), rows].entries()) {
    // recordsFilteredExact: true unless the count says it is an estimate (PostgreSQL).
    const exact = i % 2 === 0
    const answer = eventsAnswer({ total: 1000, filtered: rows.length, rows: page, ...(exact ? {} : { filteredExact: false }) })
    t.equal(typeof answer === 'string', page.length <= 128, `a page of ${page.length}: ${page.length <= 128 ? 'one string' : 'in parts'}`)
    const text = typeof answer === 'string' ? answer : Buffer.concat((answer as AnswerParts).parts).toString()
    if (answer instanceof AnswerParts) t.equal(answer.bytes, Buffer.byteLength(text), `a page of ${page.length}: its length in bytes`)
    t.equal(
      text,
      JSON.stringify(
        listAnswer(
          1000,
          rows.length,
          page.map((x) => eventView(eventOf(x))),
          exact,
        ),
      ),
      `a page of ${page.length}`,
    )
  }
})
