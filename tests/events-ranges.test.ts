// backend: sqlite-only — SQLite's event counts through its time index and block counts (db/event-engine/event-counts.ts)
// Pins the event lists' range, filter and sort questions that read no row beyond the page:
// a time range's cut blocks counted and paged through the time index and the kinds' ids
// (db/event-engine/event-counts-cut.ts timeIndexWhere) or, once the texts are read, through the time index and
// the events' documents (kindMatchIds), a page deep in a block found through the kinds' ids
// or as a range of ids (db/event-engine/event-pages-ids.ts idPage), a deep page in time order from a moment of
// the blocks' times (timeSeek), against the brute-force model, over events
// whose times mix within blocks (stored late), with gaps in the ids, partly indexed, and
// pruned by time.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build } from './helpers.js'
import { eventMaker, expectedEvents, sortEvents, asRow, DAY } from './fixtures/events.js'
import { eventFilter } from '../lib/events/filter.js'
import type { EventRow } from '../lib/events/ports.js'

const NOW = Date.UTC(2025, 0, 10, 12, 0, 0)
const iso = (ms: number) => new Date(ms).toISOString()
const PHASE = 2.5 * DAY

/** A seeded generator (the same questions every run). */
function rand(seed: number) {
  let s = seed
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648
    return s / 2147483648
  }
}

/**
 * 40 days of events in batches, one in twenty stored late (`late`; with a time up to 3 or 20
 * days earlier: the blocks' times mix), ids jumping to another level 1 block once.
 */
function writeMixed(app: FastifyInstance, count: number, late = 0.05): EventRow[] {
  const make = eventMaker(5)
  const r = rand(11)
  const out: EventRow[] = []
  let written = 0
  let jumped = false
  while (written < count) {
    if (!jumped && written >= count / 2) {
      jumped = true
      const top = app.db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").pluck().get() as number
      app.db.prepare("UPDATE sqlite_sequence SET seq = ? WHERE name = 'events'").run(top + 70_000)
    }
    const n = Math.min(count - written, 1 + Math.floor(r() * 6))
    const due = NOW - 40 * DAY + Math.floor((written / count) * 40 * DAY)
    const x = r()
    const createdMs = x < late * 0.6 ? due - Math.floor(r() * 3 * DAY) : x < late ? due - Math.floor(r() * 20 * DAY) : due
    // After the jump, severities come in phases (PHASE): a block's kinds then hold stretches
    // of its times, and a time range can cut a block but none of its kinds.
    const batch = Array.from({ length: n }, () => (jumped ? { ...make(), severity: Math.floor((createdMs - NOW) / PHASE) & 7 } : make()))
    const ids = app.db.transaction(() => app.repos.events.record(createdMs, batch))()
    ids.forEach((id, i) => out.push(asRow(id, createdMs, batch[i])))
    written += n
  }
  return out
}

const FILTERS: Record<string, string>[] = [
  {},
  { Severity: 'Warning' },
  { MinimumSeverity: 'Warning' },
  { MinimumSeverity: 'Error' },
  { Category: 'USB' },
  { PeripheralIcon: '3' },
  { Category: 'USB,Host', MinimumSeverity: 'Notice' },
]
/**
 * Text terms (a vendor, a device, a host, a site, GlobalSearch over several columns): counted
 * per level 0 block once and kept (db/event-engine/event-counts-docs.ts blockCounts), a range then walking the
 * blocks it cuts only, deep pages passing over whole blocks by their counts.
 */
const TEXT_FILTERS: Record<string, string>[] = [
  { Details: 'Kingston' },
  { PeripheralAssetId: 'VID_046D&PID_C077' },
  { GlobalSearch: 'Logitech' },
  { GlobalSearch: 'NYC-FIN' },
  { GlobalSearch: 'warning' },
  { Source: 'LON-ENG' },
  { AssetName: 'fra-ops' },
  { Source: 'DESKTOP-9LR722S', MinimumSeverity: 'Warning' },
]
const SORTS = ['eventID_desc', 'eventID_asc', 'date_desc', 'date_asc', 'severity_desc', 'eventCode_asc', 'category_desc', 'description_asc', 'peripheralIcon_desc', 'severityString_asc']

function check(t: Test, app: FastifyInstance, rows: EventRow[], label: string, filters = FILTERS, sorts = SORTS) {
  const r = rand(3)
  const page = (q: Record<string, string>, sortBy: string, limit: number, offset: number) =>
    app.repos.eventQueries.events.pageRows(eventFilter(q), { field: sortBy.replace(/_(asc|desc)$/, ''), direction: sortBy.endsWith('asc') ? 'asc' : 'desc' }, limit, offset)
  let asked = 0
  let mismatches = 0
  // The model's answer to a question, worked out once for all its pages.
  const wanted = new Map<string, EventRow[]>()
  const model = (q: Record<string, string>, sortBy: string) => {
    const key = `${JSON.stringify(q)} ${sortBy}`
    if (!wanted.has(key)) wanted.set(key, sortEvents(expectedEvents(rows, q), sortBy))
    return wanted.get(key)!
  }
  const ask = (q: Record<string, string>, sortBy: string, limit: number, offset: number) => {
    asked++
    const want = model(q, sortBy)
    const got = page(q, sortBy, limit, offset)
    const wantIds = want.slice(offset, offset + limit).map((e) => e.id)
    const gotIds = got.rows.map((x) => x[0] as number)
    if (got.filtered !== want.length || got.total !== rows.length || JSON.stringify(gotIds) !== JSON.stringify(wantIds)) {
      mismatches++
      t.fail(`${label}: ${JSON.stringify(q)} ${sortBy} ${limit}@${offset}: got ${got.filtered} [${gotIds.slice(0, 6)}], want ${want.length} [${wantIds.slice(0, 6)}]`)
    }
    return want.length
  }
  const first = rows[0].created_ms
  for (const f of filters) {
    // 24 hours (or a few days) from random moments: both ends cut blocks whose times mix.
    for (let i = 0; i < 6; i++) {
      const from = first + Math.floor(r() * 39 * DAY)
      const span = [DAY, 6 * DAY, 15 * DAY][i % 3]
      const q = i % 2 ? { ...f, FromDate: iso(from), ToDate: iso(from + span) } : { ...f, FromCreationTimeEpoch: String(from), ToCreationTimeEpoch: String(from + span) }
      const n = ask(q, 'eventID_desc', 100, 0)
      // Deep pages, small ones (a page ending inside a cut block), both directions.
      for (const offset of [Math.floor(r() * n), Math.max(0, n - 3)]) {
        ask(q, 'eventID_desc', 7, offset)
        ask(q, 'eventID_asc', 7, offset)
      }
      // Deep pages in time order: the walk starts at a moment of the blocks' times (timeSeek).
      for (const sortBy of ['date_desc', 'creationTime_asc']) ask(q, sortBy, 20, Math.floor(r() * n))
    }
    // Ranges that are exactly a phase of severities: blocks cut, none of their kinds.
    for (let k = -8; k < 0; k++) {
      const q = { ...f, MinimumSeverity: f.MinimumSeverity ?? 'Warning', FromCreationTimeEpoch: String(NOW + k * PHASE), ToCreationTimeEpoch: String(NOW + (k + 1) * PHASE - 1) }
      const n = ask(q, 'eventID_desc', 10, 0)
      ask(q, 'eventID_desc', 10, Math.floor(n / 2))
      ask(q, 'eventID_asc', 10, Math.floor(n / 3))
    }
    // The filter alone, and every sort, at random depths.
    const n = ask(f, 'eventID_desc', 50, 0)
    for (const sortBy of sorts) for (let i = 0; i < 3; i++) ask(f, sortBy, 30, Math.floor(r() * Math.max(1, n)))
    // Past the first block's matches, and at the very end, in time order.
    for (const sortBy of ['date_desc', 'date_asc']) for (const offset of [4100 + Math.floor(r() * 6000), Math.max(0, n - 5)]) ask(f, sortBy, 30, offset)
  }
  t.equal(mismatches, 0, `${label}: ${asked} questions answer as the model does`)
}
type Test = Parameters<Parameters<typeof t.test>[1]>[0]

/** Runs the retention job (events older than 30 days go), then `check` with the events left. */
async function pruned(t: Test, app: FastifyInstance, rows: EventRow[], check: (left: EventRow[]) => void): Promise<void> {
  const run = await app.retention.run(NOW)
  t.ok(run.events.deleted > 2_000, `${run.events.deleted} events pruned by time`)
  const ids = new Set(app.db.prepare('SELECT id FROM events').pluck().all() as number[])
  const left = rows.filter((e) => ids.has(e.id))
  check(left)
}

t.test('ranges cutting blocks whose times mix, deep pages and every kind sort answer as the model, partly indexed, whole and pruned', async (t) => {
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '30', PRIME_RETENTION_AUDIT_DAYS: '30' })
  app.repos.eventQueries.holdIndexing(true)
  const rows = writeMixed(app, 14_000)
  t.ok(rows.at(-1)!.id > 80_000, 'the events span several blocks and a gap in the ids')
  const indexer = app.repos.eventQueries.indexer
  indexer.step('events', 9_000)
  check(t, app, rows, 'part indexed')
  // With the events' documents in memory, a cut block's matches are told by their documents' kinds (kindMatchIds).
  await app.repos.eventQueries.events.ready(eventFilter({ Source: 'x' }))
  t.ok(indexer.hasTexts(), 'the texts are read')
  check(t, app, rows, 'part indexed, documents read')
  app.repos.eventQueries.catchUp()
  check(t, app, rows, 'all indexed')
  await pruned(t, app, rows, (left) => {
    const gaps = left.filter((e, i) => i > 0 && e.id !== left[i - 1].id + 1 && Math.floor(e.id / 4096) === Math.floor(left[i - 1].id / 4096))
    t.ok(gaps.length > 10, `the prune leaves ${gaps.length} gaps inside blocks (events stored late went, their neighbours stayed)`)
    check(t, app, left, 'pruned')
  })
})

t.test('text terms with ranges cutting blocks and deep pages answer as the model, partly indexed, indexed further, whole and pruned', async (t) => {
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '30', PRIME_RETENTION_AUDIT_DAYS: '30' })
  app.repos.eventQueries.holdIndexing(true)
  const rows = writeMixed(app, 24_000)
  const indexer = app.repos.eventQueries.indexer
  const sorts = ['eventID_desc', 'eventID_asc', 'date_desc']
  indexer.step('events', 9_000)
  check(t, app, rows, 'text, part indexed', TEXT_FILTERS, sorts)
  // The blocks counted before the index moved on are taken over, but the last one.
  indexer.step('events', 6_000)
  check(t, app, rows, 'text, indexed further', TEXT_FILTERS, sorts)
  app.repos.eventQueries.catchUp()
  check(t, app, rows, 'text, all indexed', TEXT_FILTERS, sorts)
  await pruned(t, app, rows, (left) => check(t, app, left, 'text, pruned', TEXT_FILTERS, sorts))
})

t.test('ranges over events stored nearly in time order: the cut blocks told by the stretches of 64 ids, answer as the model, partly indexed, whole and pruned', async (t) => {
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '30', PRIME_RETENTION_AUDIT_DAYS: '30' })
  app.repos.eventQueries.holdIndexing(true)
  // One in a thousand late: a range's ends straddle a stretch or two of a block, not dozens.
  const rows = writeMixed(app, 14_000, 0.001)
  const indexer = app.repos.eventQueries.indexer
  indexer.step('events', 9_000)
  const kindFilters = FILTERS.filter((f) => Object.keys(f).length > 0)
  const sorts = ['eventID_desc', 'date_asc', 'severity_desc']
  check(t, app, rows, 'in order, part indexed', kindFilters, sorts)
  await app.repos.eventQueries.events.ready(eventFilter({ Source: 'x' }))
  check(t, app, rows, 'in order, part indexed, documents read', kindFilters, sorts)
  check(t, app, rows, 'in order, part indexed, documents read, texts', TEXT_FILTERS.slice(0, 3), sorts)
  app.repos.eventQueries.catchUp()
  check(t, app, rows, 'in order, all indexed', kindFilters, sorts)
  await pruned(t, app, rows, (left) => check(t, app, left, 'in order, pruned', kindFilters, sorts))
})
