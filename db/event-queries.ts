// Events and audit records: the lists with every filter and sort, the integration feeds
// and the streamed exports, at millions of rows.
//
// How a question is answered (the index is db/event-index.ts, maintained off the write path):
// - Filters on the low-cardinality fields (severity, category, icon, description; for
//   audit records also outcome, operation and asset type) select kinds; time and id
//   ranges select blocks of ids. Counts add up whole blocks and read rows only at the
//   ends of a range; a page skips the blocks without matches.
// - "Contains" filters and GlobalSearch on events look through the distinct sources and
//   documents (trigram indexes) and add up their counts; a page is read through the
//   events' asset index when the matches are few, or by walking the newest rows when
//   they are many (whichever reads fewer rows, from the exact count).
// - Records above the index's high-water mark are read directly, so every answer is exact.
import type { DB } from './index.js'
import { statementCache, rowOf } from './sql.js'
import { indexCatchUp } from './event-catch-up.js'
import { recordIndexer, LEVEL_SHIFT, SOURCE_BLOCK_SHIFT, type RecordTable, type IndexerOptions, type Summary, type Cell } from './event-index.js'
import { MAX_ID, type AuditFilter, type EventFilter } from './filters.js'
import { severityNames, type Sort } from './sql.js'
import { AUDIT_COLUMNS, AUDIT_FIELDS, EVENT_COLUMNS, EVENT_FIELDS, type AuditTrailRow, type EventRow } from './event-rows.js'
import {
  all,
  any,
  auditPlan,
  auditSorts,
  cond,
  eventPlan,
  eventSorts,
  inList,
  isIdSort,
  isTimeSort,
  orderSql,
  type Cond,
  type GlobalCols,
  type Plan,
  type Range,
  type SortField,
  type TextMatch,
} from './event-plans.js'

export { AUDIT_FIELDS, EVENT_FIELDS, type AuditTrailRow, type EventRow } from './event-rows.js'
export { textMatch } from './event-plans.js'
import { setImmediate as pause } from 'node:timers/promises'
import { LRUCache } from 'lru-cache'

// ---------------------------------------------------------------------------------------
// The engine

/**
 * A stretch of ids holding `n` matches (exactly), found at a level of the block counts
 * (-1: counted from the rows, -2: from the kinds' ids; either, a part of a level 0 block).
 */
interface Segment {
  lo: number
  hi: number
  n: number
  level: number
}

const EXPORT_CHUNK = 1000
/** Up to this many matches a page is read by finding them all and sorting them. */
const SEEK_MAX = 50_000
/** Trigram results kept per term (ids in all), so that a repeated search only looks at what is new. */
const TERM_CACHE_IDS = 4_000_000
/** More sources than this and a seek through the events' asset index is not worth it. */
const SEEK_SOURCES = 20_000

export interface ListAnswer<R> {
  total: number
  filtered: number
  rows: R[]
}

export function eventQueriesRepo(db: DB, opts: IndexerOptions = {}) {
  const indexer = recordIndexer(db, opts)
  const cached = statementCache(db, 256)
  // Unicode case folding for "contains" terms beyond ASCII (see textMatch).
  db.function('event_contains', { deterministic: true }, (text: unknown, term: unknown) => (typeof text === 'string' && typeof term === 'string' && text.toLowerCase().includes(term) ? 1 : 0))

  const tables = {
    events: { from: 'events', columns: EVENT_COLUMNS, row: rowOf(EVENT_FIELDS), sorts: eventSorts, idSort: 'eventID' },
    audit_trail: { from: 'audit_trail', columns: AUDIT_COLUMNS, row: rowOf(AUDIT_FIELDS), sorts: auditSorts, idSort: 'auditTrailID' },
  } as const
  const maxId = { events: db.prepare('SELECT max(id) FROM events').pluck(), audit_trail: db.prepare('SELECT max(id) FROM audit_trail').pluck() }
  const topId = (table: RecordTable) => (maxId[table].get() as number | null) ?? 0
  const hasIndex = (name: string) => !!db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?`).get(name)
  // The time indexes (migrations 001 and 003): a time order walks them.
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  const byTime = {
    events: hasIndex('events_created') ? 'INDEXED BY events_created' : '',
    audit_trail: hasIndex('audit_trail_created') ? 'INDEXED BY audit_trail_created' : '',
  }

  // ---- background indexing (db/event-catch-up.ts) ----
  const catchUp = indexCatchUp(db, indexer)
  const { startIndexing, textsReady } = catchUp

  // ---- kinds ----
  /** The ids of the kinds a plan allows (null: any). */
  function kindSet(p: Plan): number[] | null {
    if (!p.kindOk) return null
    const out: number[] = []
    for (const [id, k] of indexer.kinds(p.table) as Map<number, unknown>) if (p.kindOk(k)) out.push(id)
    return out
  }

  // ---- reading rows ----
  /** The id and time range; `hint` keeps the planner off the id order (`'id'`) or off both (`'both'`). */
  function rangeCond(p: Plan, lo: number, hi: number, hint: 'none' | 'id' | 'both' = 'none'): Cond {
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const c = [cond(`${hint === 'none' ? '' : '+'}e.id BETWEEN ? AND ?`, lo, hi)]
    if (p.times) c.push(cond(`${hint === 'both' ? '+' : ''}e.created_ms BETWEEN ? AND ?`, p.times.lo, p.times.hi))
    return all(c)!
  }
  const pred = (p: Plan) => all([p.kindSql, p.textSql])
  /** Matches with ids in [lo, hi], counted from the rows. */
  function countRows(p: Plan, lo: number, hi: number, sum?: Summary): number {
    if (lo > hi) return 0
    const w = all([rangeCond(p, lo, hi), pred(p)])!
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const sql = `SELECT count(*) FROM ${tables[p.table].from} e NOT INDEXED WHERE ${w.sql}`
    if (!sum || hi > sum.indexed)
      return cached(sql)
        .pluck()
        .get(...w.params) as number
    // Indexed records never change (a change starts the index over, with a new summary), so
    // neither does a count among them: the blocks a time range cuts are counted once, not
    // on every page of the same question. Within a block, the matches' ids are kept too.
    if (sum !== rowCountsFor) {
      keptRowCounts.clear()
      keptIds.clear()
      rowCountsFor = sum
    }
    if (hi - lo < 2 ** LEVEL_SHIFT[0]) return matchIds(p, lo, hi).length
    const key = `${sql}\u0001${JSON.stringify(w.params)}`
    let n = keptRowCounts.get(key)
    if (n === undefined) {
      n = cached(sql)
        .pluck()
        .get(...w.params) as number
      if (keptRowCounts.size >= 4096) keptRowCounts.delete(keptRowCounts.keys().next().value!)
      keptRowCounts.set(key, n)
    }
    return n
  }
  const keptRowCounts = new Map<string, number>()
  let rowCountsFor: Summary | null = null
  /**
   * The ids of the matches in a stretch of indexed ids no longer than a block, ascending
   * (kept while the summary is countRows'): a page then reads its rows by id instead of
   * walking the block again. A time range that cuts blocks whose times mix (events stored
   * late, with the time they happened) finds a few matches among thousands of rows there.
   */
  function matchIds(p: Plan, lo: number, hi: number): number[] {
    const w = all([rangeCond(p, lo, hi), pred(p)])!
    const key = `${p.table}\u0001${w.sql}\u0001${JSON.stringify(w.params)}`
    let ids = keptIds.get(key)
    if (!ids) {
      // plan: query-plans "events list" (tests/query-plans.test.ts)
      ids = cached(`SELECT e.id FROM ${tables[p.table].from} e NOT INDEXED WHERE ${w.sql} ORDER BY e.id`)
        .pluck()
        .all(...w.params) as number[]
      keptIds.set(key, ids)
    }
    return ids
  }
  // At most a million ids (about 8 MB), least recently used first out.
  const keptIds = new LRUCache<string, number[]>({ maxSize: 1_000_000, sizeCalculation: (ids) => ids.length + 1 })
  // Access is chosen here, not left to the planner: with statistics (ANALYZE) it may pick a
  // skip-scan of an index for a range of ids, which reads every entry. NOT INDEXED still
  // lets it use the ids (rowid ranges and lookups); the time order names its index.
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  const rowsOf = <R>(p: Plan, where: Cond, order: string, limit: number, offset: number, from = 'NOT INDEXED'): R[] =>
    (
      cached(`SELECT ${tables[p.table].columns} FROM ${tables[p.table].from} e ${from} WHERE ${where.sql} ORDER BY ${order} LIMIT ? OFFSET ?`)
        .raw(true)
        .all(...where.params, limit, offset) as unknown[][]
    ).map(tables[p.table].row) as R[]

  // ---- block counts ----
  /**
   * The indexed matches of a plan's kind and range conditions, as segments of ids in
   * ascending order with their exact counts: whole blocks from the counts in memory, and
   * the rows read where a block straddles an end of the id or time range. Descends to
   * level `floor` at least.
   */
  function segments(p: Plan, sum: Summary, kinds: number[] | null, floor = 0, ids = p.ids): Segment[] {
    const lo = Math.max(1, ids.lo)
    const hi = Math.min(ids.hi, sum.indexed)
    if (lo > hi || (kinds && kinds.length === 0)) return []
    const allowed = kinds ? new Set(kinds) : null
    const out: Segment[] = []
    const times = p.times
    const visit = (level: number, fromBlock: number, toBlock: number) => {
      const size = 2 ** LEVEL_SHIFT[level]
      const blocks = sum.blocks[level]
      const spans = sum.spans[level]
      for (let block = fromBlock; block <= toBlock; block++) {
        const cells = blocks.get(block)
        if (!cells) continue
        // A block whose records all fall outside the time range, or all inside it, is
        // told by its span; only a block that straddles an end is tested cell by cell.
        let cut = false
        if (times) {
          const span = spans.get(block)!
          if (span[1] < times.lo || span[0] > times.hi) continue
          cut = span[0] < times.lo || span[1] > times.hi
        }
        let n = 0
        let straddles = false
        const present: number[] = []
        for (let i = 0; i < cells.length; i++) {
          const cell = cells[i]
          const kind = cell[0]
          if (allowed && !allowed.has(kind)) continue
          if (cut) {
            const min = cell[2],
              max = cell[3]
            if (max < times!.lo || min > times!.hi) continue
            if (min < times!.lo || max > times!.hi) straddles = true
          }
          n += cell[1]
          present.push(kind)
        }
        // Ids start at 1: block 0 holds no id 0.
        const bLo = Math.max(1, block * size)
        const bHi = Math.min(block * size + size - 1, sum.indexed)
        const sLo = Math.max(bLo, lo)
        const sHi = Math.min(bHi, hi)
        const partial = sLo !== bLo || sHi !== bHi
        if (n === 0) continue
        if (!partial && !straddles && level <= floor) out.push({ lo: sLo, hi: sHi, n, level })
        else if (level > 0) visit(level - 1, Math.floor(sLo / 2 ** LEVEL_SHIFT[level - 1]), Math.floor(sHi / 2 ** LEVEL_SHIFT[level - 1]))
        else {
          // Rows are read only where their times decide; otherwise the kinds' ids do.
          const fromRows = straddles || p.textSql || p.table !== 'events'
          // A block whose every id is a match (no gaps, every kind counted) holds as many
          // in a stretch as the stretch has ids: a poller's cut costs no read at all.
          const exact = fromRows ? countRows(p, sLo, sHi, sum) : n === bHi - bLo + 1 ? sHi - sLo + 1 : countKindIds(present, n, bLo, bHi, sLo, sHi)
          if (exact > 0) out.push({ lo: sLo, hi: sHi, n: exact, level: fromRows ? -1 : -2 })
        }
      }
    }
    const top = LEVEL_SHIFT.length - 1
    visit(top, Math.floor(lo / 2 ** LEVEL_SHIFT[top]), Math.floor(hi / 2 ** LEVEL_SHIFT[top]))
    return out
  }

  /**
   * The indexed events of these kinds in [sLo, sHi], part of the level 0 block [bLo, bHi]
   * that holds `n` of them: counted in event_kind_ids (a few bytes an entry, against a few
   * hundred for a row: a block cut by a poller's id reads tens of pages instead of hundreds),
   * inside the cut or, when that is the larger part, outside it.
   */
  function countKindIds(kinds: number[], n: number, bLo: number, bHi: number, sLo: number, sHi: number): number {
    const list = JSON.stringify(kinds)
    const blk = Math.floor(sLo / 2 ** LEVEL_SHIFT[1])
    const between = (lo: number, hi: number) => (lo > hi ? 0 : (kindIdsBetween.get(blk, list, lo, hi) as number))
    return 2 * (sHi - sLo + 1) <= bHi - bLo + 1 ? between(sLo, sHi) : n - between(bLo, sLo - 1) - between(sHi + 1, bHi)
  }
  const kindIdsBetween = db.prepare('SELECT count(*) FROM event_kind_ids WHERE blk = ? AND kind IN (SELECT value FROM json_each(?)) AND id BETWEEN ? AND ?').pluck()

  /**
   * The ids that can hold records of the plan's time range: from the first to the last
   * block whose records reach into it, and every record above the mark.
   */
  function idsOfTimes(p: Plan, sum: Summary): Range {
    if (!p.times) return p.ids
    const segs = segments({ ...p, kindOk: null, kindSql: null, textSql: null }, sum, null, LEVEL_SHIFT.length - 1)
    const top = topId(p.table)
    const lo = segs.length ? segs[0].lo : sum.indexed + 1
    const hi = top > sum.indexed ? top : segs.length ? segs[segs.length - 1].hi : 0
    return { lo: Math.max(p.ids.lo, lo), hi: Math.min(p.ids.hi, hi) }
  }

  /** Every record of a table, from the block counts and the rows above the mark. */
  function countAll(table: RecordTable, sum: Summary): number {
    let n = 0
    for (const cells of sum.blocks[LEVEL_SHIFT.length - 1].values()) for (const c of cells) n += c[1]
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    return n + (cached(`SELECT count(*) FROM ${table} NOT INDEXED WHERE id > ?`).pluck().get(sum.indexed) as number)
  }

  // ---- text (events) ----
  const sourcesFts = db.prepare<[string, number, number], number>('SELECT rowid FROM event_sources_fts WHERE event_sources_fts MATCH ? AND rowid > ? AND rowid <= ? ORDER BY rowid').pluck()
  const docsFts = db.prepare<[string, number, number], number>('SELECT rowid FROM event_docs_fts WHERE event_docs_fts MATCH ? AND rowid > ? AND rowid <= ? ORDER BY rowid').pluck()
  const lastSource = db.prepare('SELECT coalesce(max(id), 0) FROM event_sources').pluck()
  const lastDoc = db.prepare('SELECT coalesce(max(id), 0) FROM event_docs').pluck()
  const sourceTexts = db.prepare<[string], { id: number; entity_id: string; asset_key: string | null; asset_name: string | null }>(
    'SELECT id, entity_id, asset_key, asset_name FROM event_sources WHERE id IN (SELECT value FROM json_each(?))',
  )

  // Trigram results by term, least recently used first; dictionaries only grow (and their
  // texts never change), so an entry stays right and only needs the ids added since.
  const terms = new Map<string, { upTo: number; ids: number[] }>()
  let termIds = 0
  function remembered(key: string, last: number, read: (after: number, upTo: number) => number[]): number[] {
    let entry = terms.get(key)
    if (entry) terms.delete(key)
    else entry = { upTo: 0, ids: [] }
    if (last > entry.upTo) {
      const more = read(entry.upTo, last)
      if (more.length) entry.ids = entry.ids.concat(more)
      entry.upTo = last
      termIds += more.length
    }
    terms.set(key, entry)
    while (termIds > TERM_CACHE_IDS && terms.size > 1) {
      const [oldest, e] = terms.entries().next().value!
      terms.delete(oldest)
      termIds -= e.ids.length
    }
    return entry.ids
  }

  /** Sources any of whose `columns` contains the term. */
  function matchSources(m: TextMatch, columns: string[]): number[] {
    if (!m.trigram) {
      const w = any(columns.map((c) => m.on(c)))
      return cached(`SELECT id FROM event_sources WHERE ${w.sql}`)
        .pluck()
        .all(...w.params) as number[]
    }
    // The trigram index narrows, the texts decide (the same test as on the rows).
    return remembered(`s\u0001${m.phrase(columns)}`, lastSource.get() as number, (after, upTo) => {
      const found = sourcesFts.all(m.phrase(columns), after, upTo)
      if (!found.length) return []
      return sourceTexts
        .all(JSON.stringify(found))
        .filter((r) => columns.some((c) => m.test(r[c as 'entity_id'])))
        .map((r) => r.id)
    })
  }
  /** Documents whose `column` contains the term. */
  function matchDocs(m: TextMatch, column: string): number[] {
    if (m.trigram) return remembered(`d\u0001${m.phrase([column])}`, lastDoc.get() as number, (after, upTo) => docsFts.all(m.phrase([column]), after, upTo))
    const w = m.on(column)
    return cached(`SELECT id FROM event_doc_texts WHERE ${w.sql}`)
      .pluck()
      .all(...w.params) as number[]
  }

  // Membership marks by id, reused from query to query (a new generation clears them).
  class Marks {
    at = new Int32Array(1024)
    gen = 0
    clear(size: number) {
      if (this.at.length < size) this.at = new Int32Array(Math.max(size, this.at.length * 2))
      if (++this.gen >= 2 ** 31 - 1) {
        this.at.fill(0)
        this.gen = 1
      }
      return this
    }
    add(ids: Iterable<number>) {
      for (const id of ids) this.at[id] = this.gen
      return this
    }
    has(id: number) {
      return this.at[id] === this.gen
    }
  }
  const docSeen = new Marks(),
    docIn = new Marks(),
    docInGlobal = new Marks(),
    sourceSeen = new Marks(),
    sourceIn = new Marks(),
    sourceInGlobal = new Marks()

  interface TextCount {
    /** Indexed matches. */
    n: number
    /** The asset keys of every source with an indexed match; null when too many or not worth a seek. */
    keys: (string | null)[] | null
    /** Those sources: a seek through the events-by-source index finds all their indexed events. */
    sources: number[] | null
    /** What such a seek reads: those events, and a probe per source and block. */
    seekRows: number
    /** The kinds (by id) of the indexed matches; null when not known (sources alone). */
    kinds: Uint8Array | null
    /** GlobalSearch: which of its columns can match among indexed records (null: no GlobalSearch). */
    globalCols: GlobalCols | null
    /** The stretches a walk reads (kindStretches), by id and time range: pages of one question ask again. */
    stretches?: Map<string, Range[]>
  }

  // Text counts of recent questions, kept while the index has not moved: a dashboard asking
  // again (or paging) gets the count without the pass over the documents. Exact: the
  // count is of indexed events only, and the key holds the index's mark.
  const keptCounts = new Map<string, TextCount>()
  let keptFor: Summary | null = null
  function keptTextCount(p: Plan, sum: Summary, kinds: number[] | null): TextCount {
    // Counts read again (another process indexed, or the index started over) start afresh.
    if (sum !== keptFor) {
      keptCounts.clear()
      keptFor = sum
    }
    const key = JSON.stringify([sum.indexed, p.kindSql, p.textSql])
    let t = keptCounts.get(key)
    if (t) {
      keptCounts.delete(key)
    } else {
      t = textCount(p, sum, kinds)
      if (keptCounts.size >= 64) keptCounts.delete(keptCounts.keys().next().value!)
    }
    keptCounts.set(key, t)
    return t
  }

  /**
   * The indexed events matching the text (and kind) conditions, from the documents'
   * counts in memory: one pass over the matching documents' ids, typed arrays only (a
   * broad term matches hundreds of thousands of documents).
   */
  function textCount(p: Plan, sum: Summary, kinds: number[] | null): TextCount {
    const t = p.text!
    const { docs, sources: srcs } = sum
    const nOf = docs.n.data,
      kindOf = docs.kind.data,
      sourceOf = docs.source.data
    let kindTop = 0
    for (const k of indexer.kinds('events').keys()) kindTop = Math.max(kindTop, k)
    const mask = (ids: Iterable<number>) => {
      const m = new Uint8Array(kindTop + 1)
      for (const k of ids) if (k <= kindTop) m[k] = 1
      return m
    }
    const kindAllowed = kinds ? mask(kinds) : null
    const hit = new Uint8Array(kindTop + 1)
    // Each condition's matches; several on one dictionary must all hold (counted per id).
    const both = (lists: number[][]): number[] | null => {
      if (!lists.length) return null
      if (lists.length === 1) return lists[0]
      const count = new Map<number, number>()
      for (const l of lists) for (const id of l) count.set(id, (count.get(id) ?? 0) + 1)
      return [...count].filter(([, c]) => c === lists.length).map(([id]) => id)
    }
    const S = both(t.source.map((x) => matchSources(x.match, x.columns)))
    const D = both(t.doc.map((x) => matchDocs(x.match, x.column)))
    let n = 0
    // Sources with matches, gathered while a seek through them may still pay.
    const matched: number[] = []
    sourceSeen.clear(srcs.size)
    const noteSource = (source: number) => {
      if (n <= SEEK_MAX && sourceSeen.at[source] !== sourceSeen.gen) {
        sourceSeen.at[source] = sourceSeen.gen
        matched.push(source)
      }
    }
    let globalCols: GlobalCols | null = null
    const seekOf = (): TextCount => {
      if (n > SEEK_MAX || matched.length > SEEK_SOURCES) return { n, keys: null, sources: null, seekRows: Infinity, kinds: hit, globalCols }
      const keys = new Set<string | null>()
      let rows = matched.length * (Math.floor(sum.indexed / 2 ** SOURCE_BLOCK_SHIFT) + 1)
      for (const id of matched) {
        keys.add(srcs.key[id] ?? null)
        rows += srcs.n.get(id)
      }
      return { n, keys: [...keys], sources: matched, seekRows: rows, kinds: hit, globalCols }
    }
    if (!t.global && !D && !kindAllowed) {
      // Sources alone: their own counts (their documents' kinds are not looked at).
      for (const id of S!) {
        const c = srcs.n.get(id)
        if (c > 0) {
          n += c
          noteSource(id)
        }
      }
      return { ...seekOf(), kinds: null }
    }
    sourceIn.clear(srcs.size)
    if (S) sourceIn.add(S)
    docIn.clear(docs.size)
    if (D) docIn.add(D)
    let global: Uint8Array | null = null
    if (t.global) {
      const g = t.global
      const hits: number[] = []
      for (const [id, k] of indexer.kinds('events')) {
        if ([k.description, k.event_code, k.category, severityNames[k.severity], k.hashtags].some((v) => g.test(v))) hits.push(id)
      }
      global = mask(hits)
      const gSources = matchSources(g, ['entity_id', 'asset_name'])
      globalCols = { kinds: hits.length > 0, sources: gSources.length > 0 }
      sourceInGlobal.clear(srcs.size).add(gSources)
      docInGlobal.clear(docs.size).add(matchDocs(g, 'details'))
    }
    docSeen.clear(docs.size)
    const seen = docSeen.at,
      seenGen = docSeen.gen
    /** Adds a candidate document's events when it meets every condition (`skip`: kinds counted already). */
    const consider = (id: number, skip: Uint8Array | null) => {
      if (seen[id] === seenGen) return
      seen[id] = seenGen
      const c = nOf[id]
      if (!c) return
      const kind = kindOf[id]
      if (kindAllowed && !kindAllowed[kind]) return
      if (skip?.[kind]) return
      const source = sourceOf[id]
      if (S && sourceIn.at[source] !== sourceIn.gen) return
      if (D && docIn.at[id] !== docIn.gen) return
      if (global && !(global[kind] || sourceInGlobal.at[source] === sourceInGlobal.gen || docInGlobal.at[id] === docInGlobal.gen)) return
      n += c
      hit[kind] = 1
      noteSource(source)
    }
    /** Every document of these sources (from the list of each source's documents). */
    const docsOf = (sourceIds: number[], skip: Uint8Array | null) => {
      for (const source of sourceIds) docs.bySource.each(source, (id) => consider(id, skip))
    }
    if (D) for (const id of D) consider(id, null)
    else if (S) docsOf(S, null)
    else {
      // GlobalSearch alone: kinds that match count whole (from the blocks); the documents
      // found through their sources or details add the events of other kinds.
      const whole: number[] = []
      for (const k of indexer.kinds('events').keys()) if (global![k] && (!kindAllowed || kindAllowed[k])) whole.push(k)
      for (const k of whole) hit[k] = 1
      if (whole.length) n += segments({ ...p, ids: { lo: 1, hi: MAX_ID }, times: null }, sum, whole, LEVEL_SHIFT.length - 1).reduce((a, x) => a + x.n, 0)
      const g = t.global!
      const gDocs = matchDocs(g, 'details')
      const gSources = matchSources(g, ['entity_id', 'asset_name'])
      // The documents whose details match, in one tight pass (the common, broad case).
      for (let i = 0; i < gDocs.length; i++) {
        const id = gDocs[i]
        const c = nOf[id]
        if (!c) continue
        const kind = kindOf[id]
        if (global![kind] || (kindAllowed && !kindAllowed[kind])) continue
        n += c
        hit[kind] = 1
        noteSource(sourceOf[id])
      }
      // Then those of matching sources not counted already.
      if (gSources.length) {
        docSeen.add(gDocs)
        docsOf(gSources, global)
      }
      if (whole.length) return { n, keys: null, sources: null, seekRows: Infinity, kinds: hit, globalCols }
    }
    return seekOf()
  }

  /**
   * Where a seek through the events-by-source index reads: the indexed events of these
   * sources in the id range (one probe per block of the range and source), and every event
   * above the mark.
   */
  function seekFrom(sources: number[], lo: number, hi: number, indexed: number): Cond {
    const parts: string[] = []
    const params: unknown[] = []
    const last = Math.min(hi, indexed)
    if (sources.length && lo <= last) {
      const blocks: number[] = []
      for (let b = Math.floor(lo / 2 ** SOURCE_BLOCK_SHIFT); b <= Math.floor(last / 2 ** SOURCE_BLOCK_SHIFT); b++) blocks.push(b)
      parts.push(`SELECT x.id FROM json_each(?) b CROSS JOIN event_source_ids x
        WHERE x.blk = b.value AND x.source IN (SELECT value FROM json_each(?)) AND x.id BETWEEN ? AND ?`)
      params.push(JSON.stringify(blocks), JSON.stringify(sources), lo, last)
    }
    // One range (two lower bounds would let SQLite pick the wrong one and scan).
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    parts.push('SELECT id FROM events NOT INDEXED WHERE id BETWEEN ? AND ?')
    params.push(Math.max(lo, indexed + 1), hi)
    return { sql: `e.id IN (${parts.join(' UNION ALL ')})`, params }
  }

  // ---- counting ----
  interface Counted {
    filtered: number
    sum: Summary
    kinds: number[] | null
    /** The ids that can hold matches (the time range made ids). */
    ids: Range
    /** Plans without text conditions: where the indexed matches are. */
    segments?: Segment[]
    /** Text plans: how a seek would find them. */
    text?: TextCount
    /** Matches above the mark. */
    tail: number
  }

  function count(p: Plan): Counted {
    const sum = indexer.summary(p.table, p.text !== null)
    const kinds = kindSet(p)
    if (p.empty) return { filtered: 0, sum, kinds, ids: { lo: 1, hi: 0 }, segments: [], tail: 0 }
    const tailLo = Math.max(p.ids.lo, sum.indexed + 1)
    if (!p.textSql) {
      const segs = segments(p, sum, kinds, LEVEL_SHIFT.length - 1)
      const tail = countRows(p, tailLo, p.ids.hi)
      return { filtered: segs.reduce((a, s) => a + s.n, 0) + tail, sum, kinds, ids: p.ids, segments: segs, tail }
    }
    const ids = idsOfTimes(p, sum)
    if (!p.text || sum.indexed === 0) return { filtered: countRows(p, ids.lo, ids.hi), sum, kinds, ids, tail: 0 }
    const t = keptTextCount(p, sum, kinds)
    const tail = countRows(p, tailLo, ids.hi)
    const top = topId(p.table)
    if (ids.lo <= 1 && ids.hi >= top && !p.times) return { filtered: t.n + tail, sum, kinds, ids, text: t, tail }
    // A range of ids: count inside it, or count outside and subtract from the whole,
    // whichever reads fewer rows (a poller near the newest events reads few either way).
    const hi = Math.min(ids.hi, top)
    if (!p.times) {
      const inside = rowsToRead(t, ids.lo, hi, top)
      const outside = rowsToRead(t, 1, ids.lo - 1, top) + rowsToRead(t, hi + 1, top, top)
      if (outside < inside) {
        const whole = t.n + countRows(p, sum.indexed + 1, top)
        const out = countIn(p, t, 1, ids.lo - 1, sum.indexed) + countIn(p, t, hi + 1, top, sum.indexed)
        return { filtered: whole - out, sum, kinds, ids, text: t, tail }
      }
    }
    return { filtered: countIn(p, t, ids.lo, hi, sum.indexed), sum, kinds, ids, text: t, tail }
  }

  /** About how many rows counting in [lo, hi] reads: the ids, or the seek's share of them. */
  function rowsToRead(t: TextCount, lo: number, hi: number, top: number): number {
    if (lo > hi) return 0
    const span = hi - lo + 1
    return Math.min(span, t.sources ? (t.seekRows * span) / Math.max(1, top) : Infinity)
  }

  /** Matches with ids in [lo, hi], through the asset index when that reads fewer rows. */
  function countIn(p: Plan, t: TextCount, lo: number, hi: number, indexed: number): number {
    if (lo > hi) return 0
    const span = hi - lo + 1
    if (t.sources && (t.seekRows * span) / Math.max(1, topId(p.table)) < span / 4) {
      const w = all([rangeCond(p, lo, hi, 'both'), seekFrom(t.sources, lo, hi, indexed), pred(p)])!
      return cached(`SELECT count(*) FROM events e WHERE ${w.sql}`)
        .pluck()
        .get(...w.params) as number
    }
    return countRows(p, lo, hi)
  }

  // ---- pages ----
  /**
   * The rollup's level 1 blocks that hold the plan's kinds in its id range and time span,
   * as (block, kind) cells, and how many events a seek through them reads (event_kind_ids,
   * migration 012), the rows above the mark included.
   */
  function kindSeek(p: Plan, c: Counted): { cells: [number, number][]; rows: number } | null {
    if (p.table !== 'events' || !c.kinds) return null
    const allowed = new Set(c.kinds)
    const size = 2 ** LEVEL_SHIFT[1]
    const lo = Math.max(1, p.ids.lo)
    const hi = Math.min(p.ids.hi, c.sum.indexed)
    const cells: [number, number][] = []
    let rows = c.tail
    const times = p.times
    const spans = c.sum.spans[1]
    for (let block = Math.floor(lo / size); lo <= hi && block <= Math.floor(hi / size); block++) {
      const blockCells = c.sum.blocks[1].get(block)
      if (!blockCells) continue
      const span = spans.get(block)!
      if (times && (span[1] < times.lo || span[0] > times.hi)) continue
      for (let i = 0; i < blockCells.length; i++) {
        const [kind, count, min, max] = blockCells[i]
        if (!allowed.has(kind) || (times && (max < times.lo || min > times.hi))) continue
        cells.push([block, kind])
        rows += count
      }
    }
    return { cells, rows }
  }
  /** The matches through the kinds' cells (indexed events), and the rows above the mark. */
  const kindWhere = (p: Plan, cells: [number, number][], indexed: number): Cond => {
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const seek: Cond = {
      sql: `e.id IN (SELECT x.id FROM json_each(?) j CROSS JOIN event_kind_ids x
        WHERE x.blk = j.value ->> 0 AND x.kind = j.value ->> 1 AND x.id BETWEEN ? AND ?
        UNION ALL SELECT id FROM events NOT INDEXED WHERE id > ?)`,
      params: [JSON.stringify(cells), p.ids.lo, Math.min(p.ids.hi, indexed), indexed],
    }
    return all([rangeCond(p, p.ids.lo, p.ids.hi, 'both'), seek, pred(p)])!
  }

  /** A page in id order, from the counted segments (and the rows above the mark). */
  function idPage<R>(p: Plan, c: Counted, dir: 'ASC' | 'DESC', limit: number, offset: number): R[] {
    const tailSeg: Segment = { lo: Math.max(p.ids.lo, c.sum.indexed + 1), hi: Math.min(p.ids.hi, topId(p.table)), n: c.tail, level: -1 }
    const segs = [...(c.segments ?? []), ...(tailSeg.n > 0 ? [tailSeg] : [])]
    // Sparse matches (a rare kind): the kinds' cells find them with fewer rows read than
    // walking the blocks that hold them would (about as many rows as the matches' share of the range).
    const span = segs.length ? segs[segs.length - 1].hi - segs[0].lo + 1 : 0
    const walkRows = Math.min(span, ((offset + limit) / Math.max(1, c.filtered)) * span)
    if (c.kinds && walkRows > 2 ** LEVEL_SHIFT[0]) {
      const seek = kindSeek(p, c)
      if (seek && seek.rows <= SEEK_MAX && seek.rows * 4 < walkRows) return rowsOf<R>(p, kindWhere(p, seek.cells, c.sum.indexed), `e.id ${dir}`, limit, offset)
    }
    if (dir === 'DESC') segs.reverse()
    const out: R[] = []
    let skip = offset
    const where = pred(p)
    for (const s of segs) {
      if (out.length === limit) break
      if (skip >= s.n) {
        skip -= s.n
        continue
      }
      // Rows are read from the finest blocks that hold matches, not from the whole stretch.
      const fine = s.level > 0 ? segments(p, c.sum, c.kinds, 0, { lo: s.lo, hi: s.hi }) : [s]
      if (dir === 'DESC') fine.reverse()
      for (const f of fine) {
        if (out.length === limit) break
        if (skip >= f.n) {
          skip -= f.n
          continue
        }
        if (f.level === -1 && f.hi <= c.sum.indexed) {
          // A block cut by the range: its matches' ids were kept when it was counted.
          const ids = matchIds(p, f.lo, f.hi)
          const wanted = dir === 'DESC' ? ids.slice(Math.max(0, ids.length - skip - (limit - out.length)), ids.length - skip) : ids.slice(skip, skip + limit - out.length)
          out.push(...rowsOf<R>(p, cond('e.id IN (SELECT value FROM json_each(?))', JSON.stringify(wanted)), `e.id ${dir}`, wanted.length, 0))
        } else {
          out.push(...rowsOf<R>(p, all([rangeCond(p, f.lo, f.hi), where])!, `e.id ${dir}`, limit - out.length, skip))
        }
        skip = 0
      }
    }
    return out
  }

  /** A stretch of ids and the condition its matches are read with (the stretch's range included). */
  interface Stretch extends Range {
    where: Cond
  }

  /**
   * Where the matches of a text plan are read from, as stretches in ascending id order:
   * its seek through their sources (few matches), or the range walked row by row (many).
   * A walk passes over the blocks that hold no event of a kind with a match (the
   * documents' counts tell which kinds have one): the newest hundred thousand events after
   * a mass disconnect, say, hold none of a vendor's, and testing them one by one cost 50 ms.
   */
  function textAccess(p: Plan, c: Counted, needed: number): Stretch[] {
    const t = c.text
    const top = topId(p.table)
    const { lo } = c.ids
    const hi = Math.min(c.ids.hi, top)
    const span = Math.max(0, hi - lo + 1)
    const walked = t?.kinds ? keptStretches(t, p, c.sum, t.kinds, lo, hi) : [{ lo, hi: c.ids.hi }]
    const walkSpan = walked.reduce((a, r) => a + Math.max(0, Math.min(r.hi, top) - r.lo + 1), 0)
    const walk = c.filtered === 0 ? 0 : Math.min(walkSpan, (needed * walkSpan) / c.filtered)
    const seek = t?.sources ? (t.seekRows * span) / Math.max(1, top) + c.tail : Infinity
    if (seek * 3 < walk) return [{ lo, hi, where: all([rangeCond(p, lo, hi, 'both'), seekFrom(t!.sources!, lo, hi, c.sum.indexed), pred(p)])! }]
    // A GlobalSearch walk tests the asset key first when the matches' keys are known: one
    // lookup instead of eight text conditions on most rows.
    const first = t?.keys && p.text?.global ? keysFirst(t.keys, c.sum.indexed) : null
    const codes = t?.kinds ? codesFirst(t.kinds, c.sum.indexed) : null
    // Indexed stretches test GlobalSearch only on the columns where it can match (one LIKE
    // instead of eight on most rows when only details have the term); the rows above the
    // mark may bring new kinds and sources, so they are tested on every column.
    const narrowed = t?.globalCols && p.text?.narrowed ? all([p.kindSql, p.text.narrowed(t.globalCols)]) : null
    return walked.map((r) => ({ ...r, where: all([rangeCond(p, r.lo, r.hi), codes, first, narrowed && r.hi <= c.sum.indexed ? narrowed : pred(p)])! }))
  }

  /**
   * The stretches of [lo, hi] that can hold events of these kinds in the plan's time span:
   * runs of level 0 blocks whose counts have such a kind, and everything above the mark.
   */
  function keptStretches(t: TextCount, p: Plan, sum: Summary, kinds: Uint8Array, lo: number, hi: number): Range[] {
    const key = `${lo}:${hi}:${p.times?.lo}:${p.times?.hi}`
    t.stretches ??= new Map()
    let out = t.stretches.get(key)
    if (!out) {
      if (t.stretches.size >= 16) t.stretches.clear()
      t.stretches.set(key, (out = kindStretches(p, sum, kinds, lo, hi)))
    }
    return out
  }
  function kindStretches(p: Plan, sum: Summary, kinds: Uint8Array, lo: number, hi: number): Range[] {
    const out: Range[] = []
    const times = p.times
    /** Whether the block has a record of these kinds in the time span. */
    const holds = (cells: Cell[]) => {
      for (let i = 0; i < cells.length; i++) {
        const cell = cells[i]
        if (kinds[cell[0]] === 1 && (!times || (cell[3] >= times.lo && cell[2] <= times.hi))) return true
      }
      return false
    }
    const visit = (level: number, fromBlock: number, toBlock: number) => {
      const size = 2 ** LEVEL_SHIFT[level]
      for (let block = fromBlock; block <= toBlock; block++) {
        const cells = sum.blocks[level].get(block)
        if (!cells) continue
        const span = sum.spans[level].get(block)!
        if (times && (span[1] < times.lo || span[0] > times.hi)) continue
        if (!holds(cells)) continue
        const sLo = Math.max(lo, block * size)
        const sHi = Math.min(hi, sum.indexed, block * size + size - 1)
        if (level > 0) visit(level - 1, Math.floor(sLo / 2 ** LEVEL_SHIFT[level - 1]), Math.floor(sHi / 2 ** LEVEL_SHIFT[level - 1]))
        else if (out.length && out[out.length - 1].hi + 1 === sLo) out[out.length - 1].hi = sHi
        else out.push({ lo: sLo, hi: sHi })
      }
    }
    const top = LEVEL_SHIFT.length - 1
    const last = Math.min(hi, sum.indexed)
    if (lo <= last) visit(top, Math.floor(lo / 2 ** LEVEL_SHIFT[top]), Math.floor(last / 2 ** LEVEL_SHIFT[top]))
    if (hi > sum.indexed) out.push({ lo: Math.max(lo, sum.indexed + 1), hi })
    return out
  }

  /** The matches of a text plan as one condition, over the whole range (orders other than the id's). */
  const textWhere = (p: Plan, c: Counted): Cond => textAccess(p, { ...c, text: c.text && { ...c.text, kinds: null } }, c.filtered)[0].where

  /** A page in id order of a text plan: the stretches in turn, until the page is full. */
  function textIdPage<R>(p: Plan, c: Counted, dir: 'ASC' | 'DESC', limit: number, offset: number): R[] {
    const stretches = textAccess(p, c, offset + limit)
    if (dir === 'DESC') stretches.reverse()
    const out: R[] = []
    let skip = offset
    for (const s of stretches) {
      if (out.length === limit) break
      if (skip > 0 && stretches.length > 1) {
        // How many of the matches to pass over this stretch holds (at most `skip`).
        // plan: query-plans "events list" (tests/query-plans.test.ts)
        const held = cached(`SELECT count(*) FROM (SELECT 1 FROM ${tables[p.table].from} e NOT INDEXED WHERE ${s.where.sql} LIMIT ?)`)
          .pluck()
          .get(...s.where.params, skip) as number
        if (held < skip) {
          skip -= held
          continue
        }
      }
      out.push(...rowsOf<R>(p, s.where, `e.id ${dir}`, limit - out.length, skip))
      skip = 0
    }
    return out
  }

  /**
   * The rows whose event code is one of these kinds', or above the mark (not indexed yet);
   * null when every code is. In blocks where kinds with and without matches mix, one
   * lookup passes over most rows that the text conditions would test one by one.
   */
  function codesFirst(kinds: Uint8Array, indexed: number): Cond | null {
    const hit = new Set<string>()
    const every = new Set<string>()
    for (const [id, k] of indexer.kinds('events')) {
      every.add(k.event_code)
      if (kinds[id] === 1) hit.add(k.event_code)
    }
    return hit.size === every.size ? null : cond('(e.id > ? OR e.event_code IN (SELECT value FROM json_each(?)))', indexed, JSON.stringify([...hit]))
  }

  /** The rows of these asset keys, or above the mark (their sources may not be known yet). */
  function keysFirst(keys: (string | null)[], indexed: number): Cond {
    const named = keys.filter((k): k is string => k !== null)
    return cond(`(e.id > ? OR e.asset_key IN (SELECT value FROM json_each(?))${named.length !== keys.length ? ' OR e.asset_key IS NULL' : ''})`, indexed, JSON.stringify(named))
  }

  /** A page in the order of a kind field: the field's values in order, each value's records by id. */
  function kindPage<R>(p: Plan, c: Counted, f: SortField, dir: 'ASC' | 'DESC', limit: number, offset: number): R[] {
    const column = f.kind!
    const kinds = indexer.kinds(p.table) as unknown as Map<number, Record<string, unknown>>
    const rank = (v: unknown) => (v === null || v === undefined ? null : f.rank!(v))
    // The values of the kinds, and of records above the mark (kinds not indexed yet).
    const values: unknown[] = [...kinds.values()].map((k) => k[column] ?? null)
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    values.push(...(cached(`SELECT DISTINCT ${column} FROM ${tables[p.table].from} NOT INDEXED WHERE id > ?`).pluck().all(c.sum.indexed) as unknown[]))
    // Values equal under the rank (text differing in case only) are one group.
    const groups = new Map<string, { rank: string | number | null; values: Set<unknown> }>()
    for (const v of values) {
      const r = rank(v)
      const key = `${typeof r}:${r}`
      const g = groups.get(key)
      if (g) g.values.add(v)
      else groups.set(key, { rank: r, values: new Set([v]) })
    }
    const ordered = [...groups.values()].sort((a, b) => {
      if (a.rank === null || b.rank === null) return a.rank === b.rank ? 0 : a.rank === null ? 1 : -1
      const cmp = a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : 0
      return dir === 'ASC' ? cmp : -cmp
    })
    const out: R[] = []
    let skip = offset
    const idField = tables[p.table].sorts[tables[p.table].idSort]
    for (const g of ordered) {
      if (out.length === limit) break
      const isNull = g.rank === null
      const list = [...g.values].filter((v) => v !== null)
      const gp: Plan = {
        ...p,
        kindOk: (k: Record<string, unknown>) => g.values.has(k[column] ?? null) && (!p.kindOk || p.kindOk(k)),
        kindSql: all([p.kindSql, isNull ? cond(`e.${column} IS NULL`) : inList(`e.${column}`, list)]),
      }
      const gc = count(gp)
      if (skip >= gc.filtered) {
        skip -= gc.filtered
        continue
      }
      out.push(...pageOf<R>(gp, gc, idField, dir, limit - out.length, skip))
      skip = 0
    }
    return out
  }

  function pageOf<R>(p: Plan, c: Counted, f: SortField, dir: 'ASC' | 'DESC', limit: number, offset: number): R[] {
    if (c.filtered <= offset || limit === 0) return []
    if (isIdSort(f)) {
      if (!p.textSql) return idPage<R>(p, c, dir, limit, offset)
      return textIdPage<R>(p, c, dir, limit, offset)
    }
    if (f.kind) return kindPage<R>(p, c, f, dir, limit, offset)
    const order = orderSql(f, dir)
    if (p.textSql) return rowsOf<R>(p, textWhere(p, c), order, limit, offset)
    if (c.filtered <= SEEK_MAX) {
      // Few matches: find them all through the kinds' cells and sort them, unless walking
      // the time index in order reaches the page sooner (rows in order are cheaper to read
      // than rows sought one by one and sorted).
      const seek = kindSeek(p, c)
      const span = Math.max(1, Math.min(p.ids.hi, topId(p.table)) - p.ids.lo + 1)
      const walk = isTimeSort(f) ? ((offset + limit) * span) / Math.max(1, c.filtered) : Infinity
      if (seek && seek.rows <= 4 * SEEK_MAX && seek.rows * 3 < walk) return rowsOf<R>(p, kindWhere(p, seek.cells, c.sum.indexed), order, limit, offset)
    }
    // A time order walks the time index (no sort); other fields have no index and are sorted.
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    return rowsOf<R>(p, all([rangeCond(p, p.ids.lo, p.ids.hi, isTimeSort(f) ? 'id' : 'none'), pred(p)])!, order, limit, offset, isTimeSort(f) ? byTime[p.table] : 'NOT INDEXED')
  }

  function list<R>(p: Plan, s: Sort, limit: number, offset: number): ListAnswer<R> {
    startIndexing()
    const c = count(p)
    const f = tables[p.table].sorts[s.field]
    const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
    return { total: countAll(p.table, c.sum), filtered: c.filtered, rows: pageOf<R>(p, c, f, dir, limit, offset) }
  }

  /**
   * The integration feed: the oldest `limit` matches (after `offset` of them), then ordered
   * by the sort (newest first by default).
   */
  function feed<R extends { id: number }>(p: Plan, s: Sort, limit: number, offset: number): ListAnswer<R> {
    const answer = list<R>(p, { field: tables[p.table].idSort, direction: 'asc' }, limit, offset)
    const f = tables[p.table].sorts[s.field]
    const sign = s.direction === 'asc' ? 1 : -1
    answer.rows = answer.rows
      .map((r) => ({ r, k: f.key(r) }))
      .sort((a, b) => {
        // Nulls last in either direction, as in the lists.
        if (a.k === null || b.k === null) return a.k === b.k ? sign * (a.r.id - b.r.id) : a.k === null ? 1 : -1
        const cmp = a.k < b.k ? -1 : a.k > b.k ? 1 : 0
        return sign * (cmp || a.r.id - b.r.id)
      })
      .map((x) => x.r)
    return answer
  }

  /**
   * Every match in order, up to `cap`, a chunk at a time (other requests run between
   * chunks; memory stays flat): an id order walks the blocks that hold matches; other
   * orders read the ordered ids once (8 bytes a record), then the rows by id. `raw`: rows
   * as arrays of the columns (faster to read; the CSV export writes them as they come).
   */
  async function* chunks(p: Plan, s: Sort, cap: number, raw: boolean, offset = 0): AsyncGenerator<unknown[]> {
    if (p.empty || cap <= 0) return
    const f = tables[p.table].sorts[s.field]
    const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
    const { from, columns } = tables[p.table]
    const idOf = raw ? (r: any) => r[0] as number : (r: any) => r.id as number
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const read = (where: Cond, order: string, limit: number): unknown[] =>
      cached(`SELECT ${columns} FROM ${from} e NOT INDEXED WHERE ${where.sql} ORDER BY ${order} LIMIT ?`)
        .raw(raw)
        .all(...where.params, limit)
    let c = count(p)
    if (offset > 0 && isIdSort(f)) {
      // An id order starts at the offset's record: the range narrowed to it, counted again.
      const at = pageOf<{ id: number }>(p, c, f, dir, 1, offset)[0]
      if (!at) return
      p = { ...p, ids: dir === 'ASC' ? { lo: at.id, hi: p.ids.hi } : { lo: p.ids.lo, hi: at.id } }
      c = count(p)
      offset = 0
    }
    let left = Math.min(cap, c.filtered - offset)
    if (left <= 0) return
    /** Walks [lo, hi] in id order, a chunk at a time. */
    async function* walk(lo: number, hi: number, where: Cond | null): AsyncGenerator<unknown[]> {
      while (left > 0 && lo <= hi) {
        const rows = read(all([rangeCond(p, lo, hi), where])!, `e.id ${dir}`, Math.min(EXPORT_CHUNK, left))
        if (rows.length) yield rows
        left -= rows.length
        if (rows.length < EXPORT_CHUNK) return
        if (dir === 'DESC') hi = idOf(rows[rows.length - 1]) - 1
        else lo = idOf(rows[rows.length - 1]) + 1
        await pause()
      }
    }
    if (isIdSort(f) && !p.textSql) {
      // Block by block, in order, skipping the blocks without matches.
      const segs = [...segments(p, c.sum, c.kinds, 0), { lo: Math.max(p.ids.lo, c.sum.indexed + 1), hi: p.ids.hi, n: c.tail, level: -1 }]
      if (dir === 'DESC') segs.reverse()
      for (const seg of segs) if (seg.n > 0 && left > 0) yield* walk(seg.lo, seg.hi, pred(p))
      return
    }
    if (isIdSort(f)) {
      const stretches = textAccess(p, c, c.filtered)
      if (dir === 'DESC') stretches.reverse()
      for (const s of stretches) yield* walk(s.lo, s.hi, s.where)
      return
    }
    const ids: number[] = []
    if (f.kind) {
      while (ids.length < left) {
        const rows = kindPage<{ id: number }>(p, c, f, dir, Math.min(10_000, left - ids.length), offset + ids.length)
        if (!rows.length) break
        for (const r of rows) ids.push(r.id)
        await pause()
      }
    } else {
      const where = p.textSql ? textWhere(p, c) : all([rangeCond(p, p.ids.lo, p.ids.hi, isTimeSort(f) ? 'id' : 'none'), pred(p)])!
      // plan: query-plans "events list" (tests/query-plans.test.ts)
      const access = isTimeSort(f) && !p.textSql ? byTime[p.table] : 'NOT INDEXED'
      for (const id of cached(`SELECT e.id FROM ${from} e ${access} WHERE ${where.sql} ORDER BY ${orderSql(f, dir)} LIMIT ? OFFSET ?`)
        .pluck()
        .iterate(...where.params, left, offset))
        ids.push(id as number)
    }
    const byIds = cached(`SELECT ${columns} FROM ${from} e NOT INDEXED WHERE e.id IN (SELECT value FROM json_each(?))`)
    for (let i = 0; i < ids.length; i += EXPORT_CHUNK) {
      if (i > 0) await pause()
      const chunk = ids.slice(i, i + EXPORT_CHUNK)
      const byId = new Map((byIds.raw(raw).all(JSON.stringify(chunk)) as unknown[]).map((r) => [idOf(r), r]))
      yield chunk.map((id) => byId.get(id)).filter((r) => r !== undefined)
    }
  }

  /**
   * A page too large to build whole, as chunks of rows (arrays of the columns), with the
   * counts: the records of the moment it is asked (those written meanwhile are left out,
   * as in the counts). `feed`: the page is the integration feed's (see `feed`), its records
   * then in the sort's order.
   */
  function pageChunks(p: Plan, s: Sort, limit: number, offset: number, feed: boolean): ListAnswer<never> & { chunks: AsyncIterable<unknown[]> } {
    startIndexing()
    const top = topId(p.table)
    p = { ...p, ids: { lo: p.ids.lo, hi: Math.min(p.ids.hi, top) } }
    p.empty ||= p.ids.lo > p.ids.hi
    const c = count(p)
    const answer = { total: countAll(p.table, c.sum), filtered: c.filtered, rows: [] as never[] }
    if (!feed) return { ...answer, chunks: chunks(p, s, limit, true, offset) }
    // The feed's page: the records from the offset's oldest to the one `limit` further, in any order.
    const byId = tables[p.table].sorts[tables[p.table].idSort]
    const first = c.filtered > offset ? pageOf<{ id: number }>(p, c, byId, 'ASC', 1, offset)[0] : undefined
    if (!first) return { ...answer, chunks: chunks({ ...p, empty: true }, s, 0, true) }
    const last = pageOf<{ id: number }>(p, c, byId, 'ASC', 1, offset + limit - 1)[0]
    return { ...answer, chunks: chunks({ ...p, ids: { lo: first.id, hi: last ? last.id : p.ids.hi } }, s, limit, true) }
  }

  async function* iterate<R>(p: Plan, s: Sort, cap: number): AsyncGenerator<R> {
    for await (const rows of chunks(p, s, cap, false)) yield* rows as R[]
  }

  return {
    indexer,
    /** Wants indexing in the background (the first list does it too). */
    startIndexing,
    indexSlice: catchUp.indexSlice,
    /** `fn` is called when indexing becomes wanted (the loop that runs the slices). */
    onIndexWanted: catchUp.onIndexWanted,
    /** Stops (true) or allows (false) indexing in the background: tests drive it with `catchUp` and `indexer.step`. */
    holdIndexing: catchUp.holdIndexing,
    /** Indexes everything written so far, now (tests, scripts); answers how many records. */
    catchUp(): number {
      return indexer.catchUp('events') + indexer.catchUp('audit_trail')
    },
    events: {
      /**
       * Awaited before a query with a text filter, so that reading the index's texts (the
       * first such query after a start) holds up no other request; undefined when nothing
       * is to be awaited.
       */
      ready: (f: EventFilter): Promise<void> | undefined => (eventPlan(f).text === null ? undefined : textsReady()),
      list: (f: EventFilter, s: Sort, limit: number, offset: number) => list<EventRow>(eventPlan(f), s, limit, offset),
      feed: (f: EventFilter, s: Sort, limit: number, offset: number) => feed<EventRow>(eventPlan(f), s, limit, offset),
      /** A large page of the list (or of the feed) as chunks of rows as arrays of EVENT_FIELDS, with the counts. */
      pageChunks: (f: EventFilter, s: Sort, limit: number, offset: number, isFeed = false) => pageChunks(eventPlan(f), s, limit, offset, isFeed),
      count: (f: EventFilter) => {
        startIndexing()
        return count(eventPlan(f)).filtered
      },
      iterate: (f: EventFilter, s: Sort, cap: number) => iterate<EventRow>(eventPlan(f), s, cap),
      /** The same rows as arrays of EVENT_FIELDS, in chunks (the CSV export). */
      rawChunks: (f: EventFilter, s: Sort, cap: number) => chunks(eventPlan(f), s, cap, true),
      lastId: () => topId('events'),
    },
    audit: {
      list: (f: AuditFilter, s: Sort, limit: number, offset: number) => list<AuditTrailRow>(auditPlan(f), s, limit, offset),
      feed: (f: AuditFilter, s: Sort, limit: number, offset: number) => feed<AuditTrailRow>(auditPlan(f), s, limit, offset),
      /** A large page of the list (or of the feed) as chunks of rows as arrays of AUDIT_FIELDS, with the counts. */
      pageChunks: (f: AuditFilter, s: Sort, limit: number, offset: number, isFeed = false) => pageChunks(auditPlan(f), s, limit, offset, isFeed),
      count: (f: AuditFilter) => {
        startIndexing()
        return count(auditPlan(f)).filtered
      },
      iterate: (f: AuditFilter, s: Sort, cap: number) => iterate<AuditTrailRow>(auditPlan(f), s, cap),
      /** The same rows as arrays of AUDIT_FIELDS, in chunks (the CSV export). */
      rawChunks: (f: AuditFilter, s: Sort, cap: number) => chunks(auditPlan(f), s, cap, true),
      lastId: () => topId('audit_trail'),
    },
  }
}
export type EventQueriesRepo = ReturnType<typeof eventQueriesRepo>
