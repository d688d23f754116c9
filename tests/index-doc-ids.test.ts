// backend: sqlite-only — SQLite's event documents by id (db/event-engine/event-doc-ids.ts, migration 030)
// Pins the events' documents by id (event_doc_ids, migration 030; db/event-engine/event-doc-ids.ts): text
// filters over a time or id range are counted and paged from them, with the same counts and
// pages as a plain SQL count with LIKE over the rows: ranges that cut blocks of ids, events
// stored late (their times mix within a block), events not indexed yet, events the retention
// job deleted, the index starting over, and a database indexed before the table existed,
// whose documents are written afterwards, newest first.
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { build } from './helpers.js'
import { DAY, eventMaker, expectedEvents, writeEvents } from './fixtures/events.js'
import type { EventRow } from '../lib/events/ports.js'
import { idsOf } from '../db/event-engine/event-doc-ids.js'
import { eventFilter } from '../lib/events/filter.js'

const NOW = Date.UTC(2026, 5, 30, 12)
const iso = (ms: number) => new Date(ms).toISOString()

/** Column terms, checked against SQL's LIKE; GlobalSearch against the reference model (its columns include the severity's name). */
const terms: Record<string, string>[] = [
  { Details: 'removed' },
  { Details: 'kingston' },
  { Details: 'Armed', Category: 'Host' },
  { PeripheralAssetId: 'VID_0951' },
  // Rare trigrams (their AND, the device parts: db/event-engine/term-search.ts), a repeated one.
  { PeripheralAssetId: 'VID_0951&PID_1666' },
  { PeripheralAssetId: '0000000' },
  { Details: 'DataTraveler 3.0' },
  { GlobalSearch: 'kingston' },
  { GlobalSearch: 'warn' },
  { GlobalSearch: 'nyc', MinimumSeverity: 'Warning' },
]
const column: Record<string, string> = { Details: 'details', PeripheralAssetId: 'peripheral_asset_id' }

/** The ids a query selects: plain SQL over the rows (column terms), the reference model over `rows` otherwise. */
function expected(app: FastifyInstance, q: Record<string, string>, rows: EventRow[]): number[] {
  const colTerm = Object.keys(q).find((k) => column[k])
  if (!colTerm || q.GlobalSearch || q.MinimumSeverity) return expectedEvents(rows, q).map((e) => e.id)
  const conds: [string, unknown][] = [[`${column[colTerm]} LIKE ?`, `%${q[colTerm]}%`]]
  if (q.Category) conds.push(['category = ?', q.Category])
  if (q.FromDate) conds.push(['created_ms >= ?', Date.parse(q.FromDate)])
  if (q.ToDate) conds.push(['created_ms <= ?', Date.parse(q.ToDate)])
  if (q.FromEventId) conds.push(['id >= ?', Number(q.FromEventId)])
  if (q.ToEventId) conds.push(['id <= ?', Number(q.ToEventId)])
  const where = conds.map((c) => c[0])
  const params = conds.map((c) => c[1])
  return app.db
    .prepare(`SELECT id FROM events WHERE ${where.join(' AND ')} ORDER BY id DESC`)
    .pluck()
    .all(...params) as number[]
}

/** Reads of the documents by id (the count and the pages of a range read them; the old way reads rows). */
function watchReads(app: FastifyInstance) {
  const docIds = app.repos.eventQueries.indexer.docIds
  const each = docIds.each
  const seen = { reads: 0, restore: () => void (docIds.each = each) }
  docIds.each = (...args: Parameters<typeof each>) => {
    seen.reads++
    return each(...args)
  }
  return seen
}

/** Questions asked at an index mark: asked again at the same mark, their segments (and the ids of the blocks cut) are kept, and nothing is walked. */
const asked = new Set<string>()

/** Every range of `ranges` with every term: count, first page, a deeper page and the oldest first, against `expected`. */
function checkRanges(t: Test, app: FastifyInstance, ranges: Record<string, string>[], label: string, viaDocs: boolean) {
  const repo = app.repos.eventQueries.events
  const reads = watchReads(app)
  const rows = app.db.prepare('SELECT * FROM events ORDER BY id DESC').all() as EventRow[]
  for (const range of ranges) {
    for (const term of terms) {
      const q = { ...term, ...range }
      const want = expected(app, q, rows)
      const before = reads.reads
      const f = eventFilter(q)
      const first = repo.pageRows(f, { field: 'eventID', direction: 'desc' }, 20, 0)
      const deeper = repo.pageRows(f, { field: 'eventID', direction: 'desc' }, 15, 17)
      const oldest = repo.pageRows(f, { field: 'eventID', direction: 'asc' }, 25, 3)
      t.same(
        { n: first.filtered, first: first.rows.map((r) => r[0]), deeper: deeper.rows.map((r) => r[0]), oldest: oldest.rows.map((r) => r[0]) },
        { n: want.length, first: want.slice(0, 20), deeper: want.slice(17, 32), oldest: [...want].reverse().slice(3, 28) },
        `${label}: ${JSON.stringify(q)}`,
      )
      // (A range holding no event at all is answered without them; one asked before at this mark, from what its first asking kept.)
      const key = `${app.repos.eventQueries.indexer.indexed('events')}:${JSON.stringify(q)}`
      const firstAsked = !asked.has(key)
      asked.add(key)
      if (viaDocs && firstAsked && expected(app, { Details: '', ...range }, rows).length > 0) t.ok(reads.reads > before, `${label}: ${JSON.stringify(q)} is counted from the documents by id`)
    }
  }
  reads.restore()
}

/** The document of each event with one, by id, from event_doc_ids. */
function docsById(app: FastifyInstance): Map<number, number> {
  const out = new Map<number, number>()
  for (const s of app.db.prepare('SELECT lo, docs FROM event_doc_ids ORDER BY hi').all() as { lo: number; docs: Buffer }[]) {
    idsOf(s.docs).forEach((d, i) => d !== 0 && out.set(s.lo + i, d))
  }
  return out
}

/** The document each event has by its texts (the dictionary's own key). */
function docsByTexts(app: FastifyInstance): Map<number, number> {
  const rows = app.db
    .prepare(
      `SELECT e.id, d.id FROM events e
       JOIN event_kinds k ON k.event_code = e.event_code AND k.severity = e.severity AND k.category = e.category AND k.peripheral_icon = e.peripheral_icon
         AND k.description = e.description AND k.hashtags IS e.hashtags
       JOIN event_sources s ON s.entity_id = e.entity_id AND s.asset_key IS e.asset_key AND s.asset_name IS e.asset_name
       JOIN event_docs d ON d.kind = k.id AND d.source = s.id
       JOIN event_doc_texts x ON x.id = d.id AND x.details = e.details AND x.peripheral_asset_id IS e.peripheral_asset_id
       WHERE e.id <= (SELECT indexed FROM record_index_state WHERE name = 'events')`,
    )
    .raw()
    .all() as [number, number][]
  return new Map(rows)
}

/** Time ranges that cut blocks (thirds of the span, a day, a few hours) and id ranges. */
function rangesOf(app: FastifyInstance): Record<string, string>[] {
  const [lo, hi, top] = app.db.prepare('SELECT min(created_ms), max(created_ms), max(id) FROM events').raw().get() as number[]
  const third = (hi - lo) / 3
  return [
    { FromDate: iso(lo + third), ToDate: iso(lo + 2 * third) },
    { FromDate: iso(hi - 1.5 * DAY), ToDate: iso(hi - 0.5 * DAY) },
    { FromDate: iso(lo + 7_777_777), ToDate: iso(lo + 7_777_777 + 5 * 3_600_000) },
    { FromDate: iso(lo + third) },
    { FromEventId: String(Math.floor(top / 5)), ToEventId: String(Math.floor(top / 2)) },
  ]
}

t.test('a text filter over a range is counted and paged from the documents by id, as SQL counts and pages it', async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  // Six days, ids jumping across blocks on the way.
  writeEvents(app, 5000, { now: NOW, days: 6, jumps: [1200, 3100] })
  // Events stored late, with the time they happened: the times within their blocks mix.
  const make = eventMaker(9)
  for (let i = 0; i < 300; i++) app.db.transaction(() => app.repos.events.record(NOW - 6 * DAY + ((i * 7919) % 6) * DAY + i * 1000, [make()]))()
  writeEvents(app, 500, { now: NOW, days: 1, seed: 3 })
  app.repos.eventQueries.catchUp()
  t.equal(app.repos.eventQueries.indexer.docsFrom(), 1, 'every indexed event has its document')
  t.same(docsById(app), docsByTexts(app), 'each event has the document of its texts')
  checkRanges(t, app, rangesOf(app), 'indexed', true)

  // Written since: above the mark, read from the rows.
  writeEvents(app, 400, { now: NOW + DAY, days: 1, seed: 5 })
  checkRanges(t, app, [...rangesOf(app), { FromDate: iso(NOW - 2 * DAY) }], 'partly not indexed', true)
  app.repos.eventQueries.catchUp()
  t.same(docsById(app), docsByTexts(app), 'the next batches add theirs')
  checkRanges(t, app, rangesOf(app), 'indexed again', true)

  // An indexed event changed: the index starts over, and so do the documents by id.
  app.db.prepare("UPDATE events SET details = 'removed by hand' WHERE id = (SELECT id FROM events ORDER BY id LIMIT 1 OFFSET 2000)").run()
  checkRanges(t, app, rangesOf(app), 'starting over', false)
  app.repos.eventQueries.catchUp()
  t.same(docsById(app), docsByTexts(app), 'written again from the start')
  checkRanges(t, app, rangesOf(app), 'after starting over', true)
})

t.test('a text filter over every id pages from the documents by id: deep pages either way, sources alone, not indexed, pruned, as SQL pages it', async (t) => {
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '30' })
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 4000, { now: NOW, days: 60, jumps: [1300, 2900] })
  app.repos.eventQueries.catchUp()
  const repo = app.repos.eventQueries.events
  const reads = watchReads(app)
  /** Every page of 40 of each term, newest and oldest first (the count too), against SQL or the model; from the documents when `viaDocs`. */
  const check = (label: string, viaDocs: boolean) => {
    const rows = app.db.prepare('SELECT * FROM events ORDER BY id DESC').all() as EventRow[]
    for (const q of [...terms, { Source: 'lon-eng' }, { Source: 'zür' }, { AssetName: 'NYC' }, { Source: 'DESKTOP', Details: 'kingston' }]) {
      const want = q.Source || q.AssetName ? expectedEvents(rows, q).map((e) => e.id) : expected(app, q, rows)
      const f = eventFilter(q)
      const before = reads.reads
      const got: { n: number[]; desc: number[]; asc: number[] } = { n: [], desc: [], asc: [] }
      for (let offset = 0; offset < want.length + 40; offset += 40) {
        const d = repo.pageRows(f, { field: 'eventID', direction: 'desc' }, 40, offset)
        const a = repo.pageRows(f, { field: 'eventID', direction: 'asc' }, 40, offset)
        got.n.push(d.filtered, a.filtered)
        got.desc.push(...d.rows.map((r) => r[0] as number))
        got.asc.push(...a.rows.map((r) => r[0] as number))
      }
      t.same(got, { n: got.n.map(() => want.length), desc: want, asc: [...want].reverse() }, `${label}: ${JSON.stringify(q)}`)
      if (viaDocs && want.length > 0) t.ok(reads.reads > before, `${label}: ${JSON.stringify(q)} is paged from the documents by id`)
    }
  }
  check('indexed', true)
  // Written since: above the mark, read from the rows before and after the indexed ones.
  writeEvents(app, 300, { now: NOW + DAY, days: 1, seed: 5 })
  check('partly not indexed', true)
  app.repos.eventQueries.catchUp()
  // The retention job clears the deleted events' documents (kept in memory too).
  await app.retention.run(NOW)
  check('after the prune', true)
  // The index starting over: read from the rows until written again.
  app.db.prepare("UPDATE events SET details = 'removed by hand' WHERE id = (SELECT id FROM events ORDER BY id LIMIT 1 OFFSET 2000)").run()
  check('starting over', false)
  app.repos.eventQueries.catchUp()
  check('after starting over', true)
  reads.restore()
})

t.test("source terms are found among the sources' names in memory, as the rows have them, sources added since included", async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 1500, { now: NOW, days: 3 })
  app.repos.eventQueries.catchUp()
  // Without the trigram index of the sources, only the names in memory can answer.
  app.db.exec("INSERT INTO event_sources_fts (event_sources_fts) VALUES ('delete-all')")
  // Names whose case folds beyond ASCII: the Kelvin sign folds to k for a Unicode term only; İ lower-cases to two characters.
  app.db.transaction(() => {
    app.repos.events.record(NOW, [
      { ...eventMaker(4)(), entityId: 'HOST-\u212A9', assetName: 'İSTANBUL-ws7' },
      { ...eventMaker(5)(), entityId: 'KÖLN-host-3', assetName: 'köln-Ws8' },
    ])
  })()
  const repo = app.repos.eventQueries.events
  const check = (label: string) => {
    const rows = app.db.prepare('SELECT * FROM events ORDER BY id DESC').all() as EventRow[]
    for (const q of [
      { Source: 'lon-eng' },
      { Source: 'zür' },
      { Source: 'DESKTOP' },
      { Source: 'host-k' },
      { Source: 'köln' },
      { AssetName: 'NYC' },
      { AssetName: 'stanbul-w' },
      { AssetName: 'ws8' },
      { GlobalSearch: 'fra-ops' },
      { Source: 'nowhere' },
    ]) {
      const page = repo.pageRows(eventFilter(q), { field: 'eventID', direction: 'desc' }, 1000, 0)
      const want = expectedEvents(rows, q).map((e) => e.id)
      t.same({ n: page.filtered, ids: page.rows.map((r) => r[0]) }, { n: want.length, ids: want }, `${label}: ${JSON.stringify(q)}`)
    }
  }
  check('not indexed yet')
  app.repos.eventQueries.catchUp()
  check('indexed')
  // New sources after the names were read.
  writeEvents(app, 200, { now: NOW + DAY, days: 1, seed: 11 })
  app.db.transaction(() => app.repos.events.record(NOW + DAY, [{ ...eventMaker(6)(), entityId: 'lon-eng-new-1' }]))()
  app.repos.eventQueries.catchUp()
  check('sources added since')
})

t.test('events the retention job deleted leave the documents by id, and the counts, as a rebuild makes them', async (t) => {
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '30' })
  app.repos.eventQueries.holdIndexing(true)
  const rows = writeEvents(app, 3000, { now: NOW, days: 60, jumps: [900, 2000] })
  app.repos.eventQueries.catchUp()
  const cutoff = NOW - 30 * DAY
  // Ranges across the cutoff, so that they count pruned blocks and the blocks it cuts.
  const ranges = [{ FromDate: iso(cutoff - 5 * DAY), ToDate: iso(cutoff + 3 * DAY) }, { FromDate: iso(cutoff - 0.3 * DAY), ToDate: iso(cutoff + 0.4 * DAY) }, ...rangesOf(app)]
  checkRanges(t, app, ranges, 'before the prune', true)
  const run = await app.retention.run(NOW)
  t.equal(run.events.deleted, rows.filter((r) => r.created_ms < cutoff).length, 'the old events are deleted')
  t.same(docsById(app), docsByTexts(app), 'the deleted events have no document any more')
  checkRanges(t, app, ranges, 'after the prune', true)
})

t.test('a database indexed before the documents by id: they are written newest first, and answers stay exact meanwhile', async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 4000, { now: NOW, days: 4, jumps: [1000] })
  app.repos.eventQueries.catchUp()
  const written = docsById(app)
  // As migration 030 leaves an indexed database.
  app.db.exec("DELETE FROM event_doc_ids; UPDATE record_index_state SET docs_from = indexed + 1 WHERE name = 'events'")
  const indexer = app.repos.eventQueries.indexer
  const ranges = rangesOf(app)
  checkRanges(t, app, ranges, 'none written yet', false)
  t.equal(indexer.fillDocs(1500), 1500, 'a batch of the newest')
  const from = indexer.docsFrom()
  t.ok(from > 1, `written down to ${from}`)
  // A range above that mark is counted from them; one reaching below it from the rows.
  checkRanges(t, app, [{ FromEventId: String(from), ToEventId: String(from + 700) }], 'above the mark', true)
  checkRanges(t, app, ranges, 'partly written', false)
  // The background catch-up writes the rest when nothing new is to be indexed.
  app.repos.eventQueries.holdIndexing(false)
  app.repos.eventQueries.startIndexing()
  while (app.repos.eventQueries.indexSlice(50));
  t.equal(indexer.docsFrom(), 1, 'all written')
  t.same(docsById(app), written, 'the same documents as the indexer writes')
  checkRanges(t, app, ranges, 'all written', true)
})

t.test('the time span of each stretch of 64 ids is its events’ (late ones too), in the table and in memory; started over, written again; pruned, still bounds of what is left', async (t) => {
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '30' })
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 3000, { now: NOW, days: 60, jumps: [1300] })
  const make = eventMaker(13)
  for (let i = 0; i < 200; i++) app.db.transaction(() => app.repos.events.record(NOW - 50 * DAY + ((i * 7919) % 40) * DAY, [make()]))()
  app.repos.eventQueries.catchUp()
  const spans = () => app.db.prepare('SELECT sub, min_ms, max_ms FROM event_time_spans ORDER BY sub').raw().all() as number[][]
  const ofEvents = () => app.db.prepare('SELECT id >> 6, min(created_ms), max(created_ms) FROM events GROUP BY id >> 6 ORDER BY 1').raw().all() as number[][]
  const inMemory = () => {
    const fine = app.repos.eventQueries.indexer.summary('events').fine
    return spans().map(([sub]) => [sub, fine.min[sub], fine.max[sub]])
  }
  t.same(spans(), ofEvents(), 'the table holds each stretch’s span')
  t.same(inMemory(), spans(), 'and so does the summary')
  // Added since the summary was read: brought along with the step.
  writeEvents(app, 300, { now: NOW + DAY, days: 1, seed: 5 })
  app.repos.eventQueries.catchUp()
  t.same(spans(), ofEvents(), 'the next steps add theirs')
  t.same(inMemory(), spans(), 'in memory too')

  app.db.prepare("UPDATE events SET details = 'removed by hand' WHERE id = (SELECT id FROM events ORDER BY id LIMIT 1 OFFSET 1000)").run()
  app.repos.eventQueries.catchUp()
  t.same(spans(), ofEvents(), 'started over: written again from the start')

  await app.retention.run(NOW)
  const left = new Map(ofEvents().map(([sub, min, max]) => [sub, [min, max]]))
  t.ok(left.size > 0 && left.size < spans().length, 'the prune took whole stretches and left others')
  const loose = spans().filter(([sub, min, max]) => {
    const l = left.get(sub)
    return l !== undefined && (l[0] < min || l[1] > max)
  })
  t.same(loose, [], 'what is left of each stretch is within its span')
})
