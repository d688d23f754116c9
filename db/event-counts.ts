// Counting the records a question matches, exactly: whole blocks from the index's counts in
// memory; where a block straddles an end of a time range, the time index and the kinds' ids
// (no row) when the question has no text, else the rows; the rows above the mark;
// "contains" filters through the counts of the matching sources and documents. The pages
// (db/event-pages.ts) and the streams (db/event-stream.ts) read where these counts say the
// matches are.
import { LRUCache } from 'lru-cache'
import { FINE_SHIFT, LEVEL_SHIFT, SOURCE_BLOCK_SHIFT, type RecordTable, type Summary } from './event-index.js'
import { MAX_ID } from './filters.js'
import { severityNames } from './sql.js'
import { all, any, cond, type Cond, type GlobalCols, type Plan, type Range, type TextMatch } from './event-plans.js'
import { SEEK_MAX, pred, rangeCond, seekFrom, type QueryState } from './event-query-state.js'
import { GLOBAL_SOURCE_COLUMNS, sourceNames, type SourceColumn } from './source-names.js'
import { termSearch, type DocColumn } from './term-search.js'

/**
 * A stretch of ids holding `n` matches (exactly), found at a level of the block counts
 * (-1: counted from the rows, -2: from the kinds' ids; either, a part of a level 0 block).
 */
export interface Segment {
  lo: number
  hi: number
  n: number
  level: number
  /** The matches' ids, ascending, where the count collected them (a block a range cuts): its page reads them without a second walk. */
  ids?: number[]
}

/** Trigram results kept per term (ids in all), so that a repeated search only looks at what is new. */
const TERM_CACHE_IDS = 4_000_000
/**
 * A source term (Source, AssetName, AssetKey) with at least this many matches is counted over
 * a range from the events' documents; one with fewer (a host: about a hundred) is counted from
 * its sources' own entries, which reads far less than walking a day's documents.
 */
const SOURCE_WALK_MIN = 4096
/** More sources than this and a seek through the events' asset index is not worth it. */
const SEEK_SOURCES = 20_000
/** More matching documents than this are not listed (a text count keeps its list: 4 bytes each). */
const DOC_LIST_MAX = 2_000_000
/**
 * Text counts kept (a console's few terms over many ranges, a dashboard's tiles, the hosts
 * a team looks up): the range is what varies, the term's count is made again only when
 * evicted. Their memory is bounded by KEPT_DOCS_MAX.
 */
const KEPT_COUNTS = 4096
/**
 * The listed documents and sources of the text counts kept, in all (about 4 to 8 bytes each;
 * a count's block counts weigh in too). A console's working set at 5,000,000 events (31
 * vendors in Details and GlobalSearch, 50 devices, 2,000 hosts, 50 sites) kept 1,229 counts
 * weighing 7.4 million here. At 4 million, 134 counts fitted: the broad ones were evicted in
 * turn and made again (20-30 ms each), and 1.4% of the questions took over 15 ms instead of
 * 0.2% (`npm run bench -- working-set`), for about 30 MB less.
 */
export const KEPT_DOCS_MAX = 8_000_000
/**
 * The match bits of the text counts walked last (bitsOf), kept: a bit per document (340 KB
 * each at 2.7 million documents), this many bytes in all, and at least 16 of them: a
 * console's few dozen vendors or devices over random days each build theirs once.
 */
const KEPT_BITS_BYTES = 16 * 1024 * 1024
/** An id range without a time range is counted from the events' documents up to this many ids (4 bytes each read). */
const DOC_PASS_MAX = 1_048_576
/** Ids per fine time span (event_time_spans). */
const FINE = 2 ** FINE_SHIFT
/** The documents' column GlobalSearch searches (the counts and the phrase queries asked ahead must agree). */
const GLOBAL_DOC_COLUMN: DocColumn = 'details'
/** Stretches straddling a time range's end, at most, for a cut block to be read by its stretches rather than the time index. */
const STRADDLING_MAX = 4

export interface TextCount {
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
  /**
   * The matching documents counted one by one, and the kinds counted whole (GlobalSearch):
   * an indexed event matches when its document is one of those or of such a kind. Null
   * when not gathered (sources alone, or too many documents).
   */
  docs: Int32Array | null
  whole: Uint8Array | null
  /** The matches' segments per level 0 block (docSegments), by id and time range: pages of one question ask again. */
  docSegs?: Map<string, Segment[]>
  /**
   * The indexed matches per level 0 block, -1 where not counted yet (blockCounts): filled
   * as walks meet the blocks, so a random day walks only the blocks it cuts and a deep page
   * passes over whole blocks by their counts. Kept with the count (for one summary).
   */
  blocks?: Int32Array
  /** The mark the count was made at (kept counts). */
  indexed?: number
}

export interface Counted {
  filtered: number
  sum: Summary
  kinds: number[] | null
  /** The ids that can hold matches (the time range made ids). */
  ids: Range
  /** Plans without text conditions: where the indexed matches are. */
  segments?: Segment[]
  /** Text plans: how a seek would find them. */
  text?: TextCount
  /** Text plans counted from the events' documents (event_doc_ids): the indexed matches per level 0 block. */
  docSegments?: Segment[]
  /** Matches above the mark. */
  tail: number
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

/** `keptDocsMax`: the listed documents and sources of the text counts kept (KEPT_DOCS_MAX; a benchmark compares). */
export function eventCounts(state: QueryState, { keptDocsMax = KEPT_DOCS_MAX }: { keptDocsMax?: number } = {}) {
  const { db, indexer, cached, tables, topId, byTime } = state

  // ---- kinds ----
  /** The ids of the kinds a plan allows (null: any). */
  function kindSet(p: Plan): number[] | null {
    if (!p.kindOk) return null
    const out: number[] = []
    for (const [id, k] of indexer.kinds(p.table) as Map<number, unknown>) if (p.kindOk(k)) out.push(id)
    return out
  }

  /** Matches with ids in [lo, hi], counted from the rows. */
  function countRows(p: Plan, lo: number, hi: number, sum?: Summary): number {
    if (lo > hi) return 0
    const w = all([rangeCond(p, lo, hi), pred(p)])!
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const sql = `SELECT count(*) FROM ${tables[p.table].from} e NOT INDEXED WHERE ${w.sql}`
    if (sum && hi <= sum.indexed && hi - lo < 2 ** LEVEL_SHIFT[0]) {
      keep(sum)
      const byKinds = kindMatchCount(p, lo, hi, sum)
      if (byKinds !== null) return byKinds === 'none' ? 0 : byKinds
      const byStretches = stretchKindIds(p, lo, hi, sum)
      if (byStretches !== null) return byStretches === 'none' ? 0 : byStretches.length
      const byTimes = timeIndexWhere(p, lo, hi, sum)
      // plan: query-plans "events list" (tests/query-plans.test.ts)
      if (byTimes) return byTimes === 'none' ? 0 : keptCount(`SELECT count(*) FROM events t ${byTime.events} WHERE ${byTimes.sql}`, byTimes.params, hi, sum)
      return matchIds(p, lo, hi).length
    }
    return keptCount(sql, w.params, hi, sum)
  }
  /**
   * A count among indexed records, kept: they never change (a change starts the index over,
   * with a new summary), so neither does a count among them. The blocks a time range cuts
   * are counted once, not on every page of the same question. Within a block, the matches'
   * ids are kept too (matchIds). Counts reaching above the mark are not kept.
   */
  function keptCount(sql: string, params: unknown[], hi: number, sum?: Summary): number {
    if (!sum || hi > sum.indexed)
      return cached(sql)
        .pluck()
        .get(...params) as number
    keep(sum)
    const key = `${sql}\u0001${JSON.stringify(params)}`
    let n = keptRowCounts.get(key)
    if (n === undefined) {
      n = cached(sql)
        .pluck()
        .get(...params) as number
      if (keptRowCounts.size >= 4096) keptRowCounts.delete(keptRowCounts.keys().next().value!)
      keptRowCounts.set(key, n)
    }
    return n
  }
  /** What is kept is kept for one summary. */
  function keep(sum: Summary) {
    if (sum !== rowCountsFor) {
      keptRowCounts.clear()
      keptIds.clear()
      keptSegs.clear()
      rowCountsFor = sum
    }
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

  /**
   * Where the matches of an event plan without text conditions in [lo, hi] (indexed, within
   * one level 0 block that the time range cuts) can be in the time index: the window of
   * times of the block's allowed kinds in the time range, and the kinds of the block in
   * the time range, allowed (`inKinds`, `nIn` events) or not. 'none' when the block holds
   * no allowed kind in the time range; null when the time index would read more than a few
   * times the block's ids (a block whose times mix, events stored late with the time they
   * happened): the rows are read then.
   */
  function cutWindow(p: Plan, lo: number, hi: number, sum: Summary): { wLo: number; wHi: number; inKinds: number[]; outKinds: number[]; nIn: number; nOut: number } | 'none' | null {
    const times = p.times
    if (p.table !== 'events' || p.textSql || !times || !byTime.events) return null
    const size = 2 ** LEVEL_SHIFT[0]
    const block = Math.floor(lo / size)
    if (Math.floor(hi / size) !== block || hi > sum.indexed) return null
    const cells = sum.blocks[0].get(block)
    if (!cells) return 'none'
    const allowed = p.kindOk ? new Set(kindSet(p)) : null
    // The kinds of the block with a record in the time range, allowed or not, and the
    // times where the allowed ones can be.
    const inKinds: number[] = []
    const outKinds: number[] = []
    let nIn = 0
    let nOut = 0
    let wLo = Number.POSITIVE_INFINITY
    let wHi = Number.NEGATIVE_INFINITY
    for (let i = 0; i < cells.length; i++) {
      const [kind, n, min, max] = cells[i]
      if (max < times.lo || min > times.hi) continue
      if (allowed && !allowed.has(kind)) {
        outKinds.push(kind)
        nOut += n
        continue
      }
      inKinds.push(kind)
      nIn += n
      wLo = Math.min(wLo, Math.max(min, times.lo))
      wHi = Math.max(wHi, Math.min(max, times.hi))
    }
    if (!inKinds.length) return 'none'
    if (!timeEntriesWithin(sum, wLo, wHi, 4 * (hi - lo + 1) + 1024)) return null
    return { wLo, wHi, inKinds, outKinds, nIn, nOut }
  }

  /**
   * The matches of an event plan without text conditions in [lo, hi] (indexed, within one
   * level 0 block that the time range cuts) as a condition over the time index (alias `t`)
   * and the kinds' ids, which read no row: an entry there is a few bytes, a row a few
   * hundred, and a random day's two cut blocks cost 5 ms read row by row. 'none' and null
   * as cutWindow.
   */
  function timeIndexWhere(p: Plan, lo: number, hi: number, sum: Summary): Cond | 'none' | null {
    const win = cutWindow(p, lo, hi, sum)
    if (!win || win === 'none') return win
    const { wLo, wHi, inKinds, outKinds, nIn, nOut } = win
    const w = cond('t.created_ms BETWEEN ? AND ? AND t.id BETWEEN ? AND ?', wLo, wHi, lo, hi)
    if (!outKinds.length) return w
    // The kinds' ids tell the allowed from the others in the window: those of whichever side has fewer.
    const [not, kinds] = nIn <= nOut ? ['', inKinds] : ['NOT ', outKinds]
    return all([
      w,
      cond(
        `t.id ${not}IN (SELECT x.id FROM event_kind_ids x WHERE x.blk = ? AND x.kind IN (SELECT value FROM json_each(?)) AND x.id BETWEEN ? AND ?)`,
        Math.floor(lo / 2 ** LEVEL_SHIFT[1]),
        JSON.stringify(kinds),
        lo,
        hi,
      ),
    ])!
  }

  /**
   * The stretches of 64 ids (event_time_spans) of [lo, hi] whose events' times may lie in
   * [tLo, tHi], in id order, as [first id, last id, wholly inside]: neighbours wholly inside
   * joined in one run; those straddling an end (or of unknown span) one each. Null when more
   * than STRADDLING_MAX straddle (a block whose times mix: events stored late).
   */
  function stretchesIn(sum: Summary, lo: number, hi: number, tLo: number, tHi: number): [number, number, boolean][] | null {
    const fineMin = sum.fine.min,
      fineMax = sum.fine.max
    const out: [number, number, boolean][] = []
    let straddling = 0
    for (let f = Math.floor(lo / FINE); f <= Math.floor(hi / FINE); f++) {
      if (fineMax[f] < tLo || fineMin[f] > tHi) continue
      const a = Math.max(lo, f * FINE),
        b = Math.min(hi, f * FINE + FINE - 1)
      // Unknown spans (NaN) straddle too.
      const inside = fineMin[f] >= tLo && fineMax[f] <= tHi
      const last = out[out.length - 1]
      if (inside && last?.[2] && last[1] === a - 1) last[1] = b
      else out.push([a, b, inside])
      if (!inside && ++straddling > STRADDLING_MAX) return null
    }
    return out
  }

  /** Ids in ascending order: a typed array's sort (the kinds' runs of a cut block, thousands of ids, took a third of its count with a comparator). */
  const ascending = (ids: number[]): number[] => Array.from(Float64Array.from(ids).sort())

  /**
   * The ids of the matches of an event plan with kind conditions in [lo, hi] (indexed,
   * within one level 0 block that the time range cuts), ascending, kept as matchIds' are,
   * without the documents: the stretches of 64 ids wholly inside the times give theirs from
   * the kinds' ids (event_kind_ids: a range of entries per allowed kind, where the time
   * index read half a block's entries and joined the kinds' ids to them), and those that
   * straddle an end of the times are read from their rows. Null when more than a few
   * stretches straddle (a block whose times mix) or as cutWindow: the time index serves.
   */
  function stretchKindIds(p: Plan, lo: number, hi: number, sum: Summary): number[] | 'none' | null {
    if (!p.kindOk || p.table !== 'events') return null
    const win = cutWindow(p, lo, hi, sum)
    if (!win || win === 'none') return win
    if (!win.outKinds.length) return null
    const times = p.times!
    const key = `s\u0001${p.kindSql?.sql}\u0001${JSON.stringify(p.kindSql?.params)}\u0001${lo}:${hi}:${times.lo}:${times.hi}`
    let ids = keptIds.get(key)
    if (ids) return ids
    const stretches = stretchesIn(sum, lo, hi, times.lo, times.hi)
    if (!stretches) return null
    const found: number[] = []
    const kinds = JSON.stringify(win.inKinds)
    const blk = Math.floor(lo / 2 ** LEVEL_SHIFT[1])
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    for (const [a, b, inside] of stretches) if (inside) for (const id of kindIdsIn.all(blk, kinds, a, b)) found.push(id)
    for (const [a, b, inside] of stretches) {
      if (inside) continue
      const w = all([rangeCond(p, a, b), pred(p)])!
      // plan: query-plans "events list" (tests/query-plans.test.ts)
      for (const id of cached(`SELECT e.id FROM ${tables[p.table].from} e NOT INDEXED WHERE ${w.sql}`)
        .pluck()
        .all(...w.params) as number[])
        found.push(id)
    }
    ids = ascending(found)
    keptIds.set(key, ids)
    return ids
  }
  const kindIdsIn = db.prepare<[number, string, number, number], number>('SELECT id FROM event_kind_ids WHERE blk = ? AND kind IN (SELECT value FROM json_each(?)) AND id BETWEEN ? AND ?').pluck()

  /**
   * The ids of the matches of an event plan with kind conditions in [lo, hi] (indexed,
   * within one level 0 block that the time range cuts and where kinds allowed and not mix),
   * ascending, kept as matchIds' are: the time index's entries in the window, each one's
   * kind told by its document (event_doc_ids, and the documents' kinds in memory once the
   * texts are read). The kinds' ids of a block spread over a page or two per kind, some
   * sixty pages a block read cold: several ms a cut block, where this reads the window and
   * one stretch of documents. Null when the kinds' ids serve instead (the texts not read
   * yet, documents not all there, every kind of the window allowed) or as cutWindow.
   */
  function kindMatchIds(p: Plan, lo: number, hi: number, sum: Summary): number[] | 'none' | null {
    if (!p.kindOk || !sum.texts || lo < indexer.docsFrom()) return null
    const win = cutWindow(p, lo, hi, sum)
    if (!win || win === 'none') return win
    if (!win.outKinds.length) return null
    const key = `k\u0001${p.kindSql?.sql}\u0001${JSON.stringify(p.kindSql?.params)}\u0001${lo}:${hi}:${win.wLo}:${win.wHi}`
    let ids = keptIds.get(key)
    if (ids) return ids
    const found = docKindIds(sum, win.inKinds, lo, hi, win.wLo, win.wHi)
    if (!found) return null
    ids = found.sort((a, b) => a - b)
    keptIds.set(key, ids)
    return ids
  }

  /**
   * How many matches kindMatchIds finds, counted on whichever side of the time range's
   * end reads fewer entries of the time index: inside, or outside and taken from the
   * block's count of the allowed kinds (a whole block only). The ids of a cut block are
   * needed only where a page starts; the other end of a day is only counted.
   */
  function kindMatchCount(p: Plan, lo: number, hi: number, sum: Summary): number | 'none' | null {
    if (!p.kindOk || !sum.texts || lo < indexer.docsFrom()) return null
    const win = cutWindow(p, lo, hi, sum)
    if (!win || win === 'none') return win
    if (!win.outKinds.length) return null
    const size = 2 ** LEVEL_SHIFT[0]
    const block = Math.floor(lo / size)
    const span = sum.spans[0].get(block)!
    const times = p.times!
    const whole = lo === Math.max(1, block * size) && hi === Math.min(block * size + size - 1, sum.indexed)
    // The share of the block's times inside the window, as if its records were spread evenly over them.
    const inside = (win.wHi - win.wLo + 1) / Math.max(1, span[1] - span[0] + 1)
    if (!whole || inside <= 0.5 || keptIds.has(`k\u0001${p.kindSql?.sql}\u0001${JSON.stringify(p.kindSql?.params)}\u0001${lo}:${hi}:${win.wLo}:${win.wHi}`)) {
      const ids = kindMatchIds(p, lo, hi, sum)
      return ids === null || ids === 'none' ? ids : ids.length
    }
    const key = `o\u0001${p.kindSql?.sql}\u0001${JSON.stringify(p.kindSql?.params)}\u0001${lo}:${hi}:${times.lo}:${times.hi}`
    let n = keptRowCounts.get(key)
    if (n !== undefined) return n
    const allowed = kindSet(p)!
    const ok = new Set(allowed)
    let all = 0
    for (const [kind, count] of sum.blocks[0].get(block)!) if (ok.has(kind)) all += count
    const outside = [
      [span[0], Math.min(span[1], times.lo - 1)],
      [Math.max(span[0], times.hi + 1), span[1]],
    ].filter(([a, b]) => a <= b)
    // A block whose times mix (events stored late) may share those times with many others: the inside then.
    if (!outside.every(([a, b]) => timeEntriesWithin(sum, a, b, 2 * size))) {
      const ids = kindMatchIds(p, lo, hi, sum)
      return ids === null || ids === 'none' ? ids : ids.length
    }
    let out = 0
    for (const [a, b] of outside) {
      const ids = docKindIds(sum, allowed, lo, hi, a, b)
      if (!ids) return null
      out += ids.length
    }
    n = all - out
    if (keptRowCounts.size >= 4096) keptRowCounts.delete(keptRowCounts.keys().next().value!)
    keptRowCounts.set(key, n)
    return n
  }

  /**
   * The indexed events of these kinds in [lo, hi] (one level 0 block, all of it at or above
   * docsFrom) with times in [tLo, tHi], ascending: each one's kind told by its document, its
   * time by the span of its stretch of 64 ids (event_time_spans), and read from the rows
   * only for the stretches that straddle an end of the times (events arrive nearly in time
   * order: one or two a block). Null when an event has no document (not expected among
   * indexed ones): the kinds' ids decide then.
   */
  function docKindIds(sum: Summary, kinds: number[], lo: number, hi: number, tLo: number, tHi: number): number[] | null {
    const stretches = stretchesIn(sum, lo, hi, tLo, tHi)
    if (!stretches) return docKindIdsByTime(sum, kinds, lo, hi, tLo, tHi)
    let kindTop = 0
    for (const k of kinds) kindTop = Math.max(kindTop, k)
    const allowed = new Uint8Array(kindTop + 1)
    for (const k of kinds) allowed[k] = 1
    const kindOf = sum.docs.kind.data
    // The straddling stretches' events in the times, from their rows (a few dozen each).
    const timed = new Set<number>()
    for (const [a, b, inside] of stretches) if (!inside) for (const id of stretchInTimes.all(a, b, tLo, tHi)) timed.add(id)
    const docOf = docScratch.of(hi - lo + 1)
    docOf.fill(0, 0, hi - lo + 1)
    indexer.docIds.each(lo, hi, (sLo, docs) => {
      const from = Math.max(lo, sLo)
      const to = Math.min(hi, sLo + docs.length - 1)
      if (from <= to) docOf.set(docs.subarray(from - sLo, to - sLo + 1), from - lo)
      return true
    })
    const out: number[] = []
    for (const [a, b, inside] of stretches) {
      for (let id = a; id <= b; id++) {
        if (!inside && !timed.has(id)) continue
        const d = docOf[id - lo]
        // No event here (a gap, or pruned: from docsFrom up every indexed event has its
        // document), or one read from its row without one.
        if (d === 0) {
          if (timed.has(id)) return null
          continue
        }
        const kind = d < kindOf.length ? kindOf[d] : 0
        if (kind <= kindTop && allowed[kind] === 1) out.push(id)
      }
    }
    return out
  }
  /** A block's documents by id, reused from call to call. */
  const docScratch = {
    at: new Int32Array(2 ** LEVEL_SHIFT[0]),
    of(size: number): Int32Array {
      if (this.at.length < size) this.at = new Int32Array(size)
      return this.at
    },
  }
  // A range of rowids: left to the planner, it scans the time index over the window (a
  // block's span, thousands of entries) for the few dozen ids of a stretch.
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  const stretchInTimes = db.prepare<[number, number, number, number], number>('SELECT id FROM events NOT INDEXED WHERE id BETWEEN ? AND ? AND created_ms BETWEEN ? AND ?').pluck()
  /** docKindIds through the time index's entries in the window (a block whose times mix: many stretches straddle). */
  function docKindIdsByTime(sum: Summary, kinds: number[], lo: number, hi: number, tLo: number, tHi: number): number[] | null {
    let kindTop = 0
    for (const k of kinds) kindTop = Math.max(kindTop, k)
    const allowed = new Uint8Array(kindTop + 1)
    for (const k of kinds) allowed[k] = 1
    const docOf = new Int32Array(hi - lo + 1)
    indexer.docIds.each(lo, hi, (sLo, docs) => {
      const from = Math.max(lo, sLo)
      const to = Math.min(hi, sLo + docs.length - 1)
      if (from <= to) docOf.set(docs.subarray(from - sLo, to - sLo + 1), from - lo)
      return true
    })
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const inWindow = cached(`SELECT t.id FROM events t ${byTime.events} WHERE t.created_ms BETWEEN ? AND ? AND t.id BETWEEN ? AND ?`).pluck().all(tLo, tHi, lo, hi) as number[]
    const kindOf = sum.docs.kind
    const out: number[] = []
    for (let i = 0; i < inWindow.length; i++) {
      const id = inWindow[i]
      const d = docOf[id - lo]
      if (d === 0) return null
      const kind = kindOf.get(d)
      if (kind <= kindTop && allowed[kind] === 1) out.push(id)
    }
    return out
  }
  /**
   * A page of the indexed events of these kinds in [lo, hi] (all of it at or above
   * docsFrom) in id order, after `skip` of them, told by each event's document (the texts
   * read): a block's kinds' ids spread over a page or two per kind, and a page of a block
   * through them read and sorted every entry of its kinds. Null when the texts are not read.
   */
  function blockKindIds(sum: Summary, kinds: number[], lo: number, hi: number, dir: 'ASC' | 'DESC', limit: number, skip: number): number[] | null {
    if (!sum.texts || lo < indexer.docsFrom()) return null
    let kindTop = 0
    for (const k of kinds) kindTop = Math.max(kindTop, k)
    const allowed = new Uint8Array(kindTop + 1)
    for (const k of kinds) allowed[k] = 1
    const kindOf = sum.docs.kind
    const out: number[] = []
    if (limit <= 0) return out
    const desc = dir === 'DESC'
    indexer.docIds.each(
      lo,
      hi,
      (sLo, docs) => {
        const from = Math.max(lo, sLo) - sLo
        const to = Math.min(hi, sLo + docs.length - 1) - sLo
        for (let i = desc ? to : from; desc ? i >= from : i <= to; i += desc ? -1 : 1) {
          const d = docs[i]
          if (d === 0) continue
          const kind = kindOf.get(d)
          if (kind > kindTop || allowed[kind] !== 1) continue
          if (skip > 0) {
            skip--
            continue
          }
          out.push(sLo + i)
          if (out.length === limit) return false
        }
        return true
      },
      desc,
    )
    return out
  }
  /**
   * The ids of a page of the matches in [lo, hi] (a stretch counted by countRows, which a
   * time range cuts) in id order, after `skip` of them: through the time index when it
   * serves (timeIndexWhere), else from the matches' ids kept.
   */
  function pageIds(p: Plan, lo: number, hi: number, sum: Summary, dir: 'ASC' | 'DESC', limit: number, skip: number): number[] {
    keep(sum)
    const byKinds = kindMatchIds(p, lo, hi, sum)
    if (byKinds === 'none') return []
    if (byKinds) return dir === 'DESC' ? byKinds.slice(Math.max(0, byKinds.length - skip - limit), byKinds.length - skip).reverse() : byKinds.slice(skip, skip + limit)
    const byStretches = stretchKindIds(p, lo, hi, sum)
    if (byStretches === 'none') return []
    if (byStretches) return dir === 'DESC' ? byStretches.slice(Math.max(0, byStretches.length - skip - limit), byStretches.length - skip).reverse() : byStretches.slice(skip, skip + limit)
    const byTimes = timeIndexWhere(p, lo, hi, sum)
    if (byTimes === 'none') return []
    if (byTimes)
      // plan: query-plans "events list" (tests/query-plans.test.ts)
      return cached(`SELECT t.id FROM events t ${byTime.events} WHERE ${byTimes.sql} ORDER BY t.id ${dir} LIMIT ? OFFSET ?`)
        .pluck()
        .all(...byTimes.params, limit, skip) as number[]
    const ids = matchIds(p, lo, hi)
    return dir === 'DESC' ? ids.slice(Math.max(0, ids.length - skip - limit), ids.length - skip).reverse() : ids.slice(skip, skip + limit)
  }
  /**
   * Whether the time index holds at most about `cap` indexed entries in [wLo, wHi]: a bound
   * from the level 0 cells whose times reach into it (the rows above the mark, few, aside).
   */
  function timeEntriesWithin(sum: Summary, wLo: number, wHi: number, cap: number): boolean {
    const ratio = 2 ** (LEVEL_SHIFT[1] - LEVEL_SHIFT[0])
    let n = 0
    for (const [block1, span1] of sum.spans[1]) {
      if (span1[1] < wLo || span1[0] > wHi) continue
      for (let block = block1 * ratio; block < (block1 + 1) * ratio; block++) {
        const span = sum.spans[0].get(block)
        if (!span || span[1] < wLo || span[0] > wHi) continue
        const cells = sum.blocks[0].get(block)!
        for (let i = 0; i < cells.length; i++) {
          const cell = cells[i]
          if (cell[3] < wLo || cell[2] > wHi) continue
          n += cell[1]
          if (n > cap) return false
        }
      }
    }
    return true
  }
  // ---- block counts ----
  /**
   * The indexed matches of a plan's kind and range conditions, as segments of ids in
   * ascending order with their exact counts: whole blocks from the counts in memory, and
   * the rows read where a block straddles an end of the id or time range. Descends to
   * level `floor` at least. `rough`: a level 0 block the time range cuts is taken whole, its
   * count a bound, and no row is read (where the matches can be, not how many).
   */
  function segments(p: Plan, sum: Summary, kinds: number[] | null, floor = 0, ids = p.ids, rough = false): Segment[] {
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
          // Where the matches may be (rough): a block the time range cuts may hold some.
          if (rough && straddles) {
            out.push({ lo: sLo, hi: sHi, n, level: -1 })
            continue
          }
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
   * block whose records reach into it (told by the blocks' times, no row read: what reads
   * the range tests the times), and every record above the mark.
   */
  function idsOfTimes(p: Plan, sum: Summary): Range {
    if (!p.times) return p.ids
    const segs = segments({ ...p, kindOk: null, kindSql: null, textSql: null }, sum, null, LEVEL_SHIFT.length - 1, p.ids, true)
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
  const lastSource = db.prepare('SELECT coalesce(max(id), 0) FROM event_sources').pluck()
  const lastDoc = db.prepare('SELECT coalesce(max(id), 0) FROM event_docs').pluck()
  const termDocs = termSearch(db)
  const names = sourceNames(db)
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
  function matchSources(m: TextMatch, columns: SourceColumn[]): number[] {
    if (!m.trigram) {
      const w = any(columns.map((c) => m.on(c)))
      return cached(`SELECT id FROM event_sources WHERE ${w.sql}`)
        .pluck()
        .all(...w.params) as number[]
    }
    const scanned = names.scan(m.folded, columns, m.test)
    if (scanned) return scanned
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
    if (m.trigram) return remembered(`d\u0001${m.phrase([column])}`, lastDoc.get() as number, (after, upTo) => termDocs.docs(m, column as DocColumn, after, upTo))
    const w = m.on(column)
    return cached(`SELECT id FROM event_doc_texts WHERE ${w.sql}`)
      .pluck()
      .all(...w.params) as number[]
  }

  /**
   * The phrase queries the plan's document terms would run over more than `minDocs`
   * documents not remembered yet (a term's first search, or many documents added since):
   * for another connection to run (db/term-thread.ts), their answers given to
   * `rememberPhrase`. The rest is read by the search itself.
   */
  function phraseTerms(p: Plan, minDocs: number): { key: string; query: string; after: number; upTo: number }[] {
    const t = p.text
    if (!t) return []
    const asked: [TextMatch, DocColumn][] = t.doc.map((x) => [x.match, x.column])
    if (t.global) asked.push([t.global, GLOBAL_DOC_COLUMN])
    const upTo = lastDoc.get() as number
    const out: { key: string; query: string; after: number; upTo: number }[] = []
    for (const [m, column] of asked) {
      if (!m.trigram) continue
      const key = `d\u0001${m.phrase([column])}`
      const after = terms.get(key)?.upTo ?? 0
      if (upTo - after <= minDocs) continue
      const query = termDocs.phraseQuery(m, column, upTo)
      if (query !== null && !out.some((o) => o.key === key)) out.push({ key, query, after, upTo })
    }
    return out
  }
  /** A term's documents in (after, upTo] as phraseTerms asked: kept unless the term's remembered ones have moved meanwhile. */
  function rememberPhrase(key: string, after: number, upTo: number, ids: ArrayLike<number>): void {
    if ((terms.get(key)?.upTo ?? 0) !== after) return
    remembered(key, upTo, () => Array.from(ids))
  }

  // The marks textCount sets, one set per repository (kept from query to query).
  const docSeen = new Marks(),
    docIn = new Marks(),
    docInGlobal = new Marks(),
    sourceSeen = new Marks(),
    sourceIn = new Marks(),
    sourceInGlobal = new Marks()

  // Text counts of recent questions, kept while the index has not moved: a dashboard asking
  // again (or paging) gets the count without the pass over the documents. Exact: the
  // count is of indexed events only, and the key holds the index's mark.
  const keptCounts = new Map<string, TextCount>()
  let keptFor: Summary | null = null
  function keptTextCount(p: Plan, sum: Summary, kinds: number[] | null): TextCount {
    // Counts read again (another process indexed, or the index started over) start afresh.
    if (sum !== keptFor) {
      keptCounts.clear()
      newestOf.clear()
      keptDocs = 0
      keptFor = sum
    }
    const term = JSON.stringify([p.kindSql, p.textSql])
    const key = JSON.stringify([sum.indexed, term])
    let t = keptCounts.get(key)
    if (t) {
      keptCounts.delete(key)
    } else {
      t = textCount(p, sum, kinds)
      // The blocks counted for the term before the index moved on hold the same matches
      // (the summary is the same: nothing pruned), but the last, which may have grown.
      const before = keptCounts.get(newestOf.get(term) ?? '')
      if (before?.blocks && before.indexed! < sum.indexed) countsOf(t, sum).set(before.blocks.subarray(0, Math.floor(before.indexed! / 2 ** LEVEL_SHIFT[0])))
      t.indexed = sum.indexed
      newestOf.delete(term)
      newestOf.set(term, key)
      while (newestOf.size > KEPT_COUNTS) newestOf.delete(newestOf.keys().next().value!)
      keptDocs += weight(t)
      while (keptCounts.size && (keptCounts.size >= KEPT_COUNTS || keptDocs > keptDocsMax)) {
        const [oldest, old] = keptCounts.entries().next().value!
        keptCounts.delete(oldest)
        keptDocs -= weight(old)
      }
    }
    keptCounts.set(key, t)
    return t
  }
  let keptDocs = 0
  /** The key of each term's newest text count kept (for one summary): the next count of the term, once more is indexed, starts from its block counts. */
  const newestOf = new Map<string, string>()
  // The block counts too, whether made yet or not (4 bytes a level 0 block).
  const weight = (t: TextCount) => (t.docs?.length ?? 0) + (t.sources?.length ?? 0) + Math.floor((t.indexed ?? 0) / 2 ** LEVEL_SHIFT[0]) + 1

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
    // Gathered whatever the matches' number: a seek reads only its share of them, so a term
    // of many matches (a site and department: some 50,000) still seeks inside a day.
    const noteSource = (source: number) => {
      if (matched.length <= SEEK_SOURCES && sourceSeen.at[source] !== sourceSeen.gen) {
        sourceSeen.at[source] = sourceSeen.gen
        matched.push(source)
      }
    }
    let globalCols: GlobalCols | null = null
    // The documents counted one by one (and the kinds counted whole): which events match.
    const listed: number[] = []
    let whole: Uint8Array | null = null
    const docsOut = () => ({ docs: listed.length <= DOC_LIST_MAX ? Int32Array.from(listed) : null, whole })
    const seekOf = (): TextCount => {
      if (matched.length > SEEK_SOURCES) return { n, keys: null, sources: null, seekRows: Infinity, kinds: hit, globalCols, ...docsOut() }
      let rows = matched.length * (Math.floor(sum.indexed / 2 ** SOURCE_BLOCK_SHIFT) + 1)
      for (const id of matched) rows += srcs.n.get(id)
      // The keys serve a GlobalSearch walk's first test only while the matches are few: gathered
      // when a walk asks (thousands of sources' keys took longer than the rest of the count).
      let keys: (string | null)[] | null | undefined
      const total = n
      return {
        n,
        get keys() {
          if (keys === undefined) keys = t.global && total <= SEEK_MAX ? [...new Set(matched.map((id) => srcs.key[id] ?? null))] : null
          return keys
        },
        sources: matched,
        seekRows: rows,
        kinds: hit,
        globalCols,
        ...docsOut(),
      }
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
      return { ...seekOf(), keys: null, kinds: null, docs: null, whole: null }
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
      const gSources = matchSources(g, GLOBAL_SOURCE_COLUMNS)
      globalCols = { kinds: hits.length > 0, sources: gSources.length > 0 }
      sourceInGlobal.clear(srcs.size).add(gSources)
      docInGlobal.clear(docs.size).add(matchDocs(g, GLOBAL_DOC_COLUMN))
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
      listed.push(id)
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
      const wholeKinds: number[] = []
      for (const k of indexer.kinds('events').keys()) if (global![k] && (!kindAllowed || kindAllowed[k])) wholeKinds.push(k)
      for (const k of wholeKinds) hit[k] = 1
      if (wholeKinds.length) {
        whole = mask(wholeKinds)
        n += segments({ ...p, ids: { lo: 1, hi: MAX_ID }, times: null }, sum, wholeKinds, LEVEL_SHIFT.length - 1).reduce((a, x) => a + x.n, 0)
      }
      const g = t.global!
      const gDocs = matchDocs(g, GLOBAL_DOC_COLUMN)
      const gSources = matchSources(g, GLOBAL_SOURCE_COLUMNS)
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
        listed.push(id)
      }
      // Then those of matching sources not counted already.
      if (gSources.length) {
        docSeen.add(gDocs)
        docsOf(gSources, global)
      }
      if (whole) return { n, keys: null, sources: null, seekRows: Infinity, kinds: hit, globalCols, ...docsOut() }
    }
    return seekOf()
  }

  // ---- counting ----
  function count(p: Plan): Counted {
    const sum = indexer.summary(p.table, p.text !== null)
    const kinds = kindSet(p)
    if (p.empty) return { filtered: 0, sum, kinds, ids: { lo: 1, hi: 0 }, segments: [], tail: 0 }
    const tailLo = Math.max(p.ids.lo, sum.indexed + 1)
    if (!p.textSql) {
      const segs = keptSegments(p, sum, kinds)
      const tail = countRows(p, tailLo, p.ids.hi)
      return { filtered: segs.reduce((a, s) => a + s.n, 0) + tail, sum, kinds, ids: p.ids, segments: segs, tail }
    }
    const ids = idsOfTimes(p, sum)
    if (!p.text || sum.indexed === 0) return { filtered: countRows(p, ids.lo, ids.hi, sum), sum, kinds, ids, tail: 0 }
    const t = keptTextCount(p, sum, kinds)
    const tail = countRows(p, tailLo, ids.hi)
    const top = topId(p.table)
    if (ids.lo <= 1 && ids.hi >= top && !p.times) return { filtered: t.n + tail, sum, kinds, ids, text: t, tail }
    const hi = Math.min(ids.hi, top)
    // The indexed part of the range from the events' documents, when they are all there
    // (migration 030: those indexed before it are added in the background).
    const last = Math.min(hi, sum.indexed)
    if ((t.docs || (walkable(t) && t.n >= SOURCE_WALK_MIN)) && ids.lo <= last && (p.times || last - ids.lo < DOC_PASS_MAX) && ids.lo >= indexer.docsFrom()) {
      const segs = docSegments(p, t, sum, ids.lo, last)
      return { filtered: segs.reduce((a, x) => a + x.n, 0) + tail, sum, kinds, ids, text: t, docSegments: segs, tail }
    }
    // A range of ids: count inside it, or count outside and subtract from the whole,
    // whichever reads fewer rows (a poller near the newest events reads few either way).
    if (!p.times) {
      const inside = rowsToRead(t, ids.lo, hi, top)
      const outside = rowsToRead(t, 1, ids.lo - 1, top) + rowsToRead(t, hi + 1, top, top)
      if (outside < inside) {
        const whole = t.n + countRows(p, sum.indexed + 1, top)
        const out = countIn(p, t, 1, ids.lo - 1, sum) + countIn(p, t, hi + 1, top, sum)
        return { filtered: whole - out, sum, kinds, ids, text: t, tail }
      }
    }
    return { filtered: countIn(p, t, ids.lo, hi, sum), sum, kinds, ids, text: t, tail }
  }

  /**
   * The top-level segments of a plan without text conditions, kept while the summary and
   * its mark are the same: a page in the order of a kind field counts every group before
   * it, and a default page its whole range, on every request.
   */
  function keptSegments(p: Plan, sum: Summary, kinds: number[] | null): Segment[] {
    keep(sum)
    const key = `${p.table}|${sum.indexed}|${p.ids.lo}:${p.ids.hi}|${p.times ? `${p.times.lo}:${p.times.hi}` : ''}|${kinds ? kinds.join(',') : '*'}`
    let segs = keptSegs.get(key)
    if (!segs) {
      segs = segments(p, sum, kinds, LEVEL_SHIFT.length - 1)
      if (keptSegs.size >= 256) keptSegs.delete(keptSegs.keys().next().value!)
      keptSegs.set(key, segs)
    }
    return segs
  }
  const keptSegs = new Map<string, Segment[]>()

  /** About how many rows counting in [lo, hi] reads: the ids, or the seek's share of them. */
  function rowsToRead(t: TextCount, lo: number, hi: number, top: number): number {
    if (lo > hi) return 0
    const span = hi - lo + 1
    return Math.min(span, t.sources ? (t.seekRows * span) / Math.max(1, top) : Infinity)
  }

  /**
   * Matches with ids in [lo, hi], through the asset index when that reads fewer rows; a
   * count read from the rows is kept while the summary is the same (see countRows), so a
   * text filter asked again over the same time range does not read that range again.
   */
  function countIn(p: Plan, t: TextCount, lo: number, hi: number, sum: Summary): number {
    const indexed = sum.indexed
    if (lo > hi) return 0
    const span = hi - lo + 1
    if (t.sources && (t.seekRows * span) / Math.max(1, topId(p.table)) < span / 4) {
      const w = all([rangeCond(p, lo, hi, 'both'), seekFrom(t.sources, lo, hi, indexed), pred(p)])!
      return keptCount(`SELECT count(*) FROM events e WHERE ${w.sql}`, w.params, hi, sum)
    }
    return countRows(p, lo, hi, sum)
  }

  // ---- text over a range, from the events' documents (event_doc_ids) ----
  // plan: rowid lookups (no override)
  const inTimes = db.prepare<[string, number, number], number>('SELECT id FROM events WHERE id IN (SELECT value FROM json_each(?)) AND created_ms BETWEEN ? AND ?').pluck()

  /**
   * Whether the matches of a text count are told by each event's document: it lists the
   * matching documents (and the kinds counted whole), or its matches are every event of
   * its sources (a Source or AssetName term alone).
   */
  const walkable = (t: TextCount): boolean => t.docs !== null || (t.kinds === null && t.sources !== null)

  /**
   * The documents of a walkable text count's matches, a bit each: the documents listed, those
   * of the kinds counted whole, or every document of its sources. A walk tests each id's
   * document here: a bit among a few hundred kilobytes (the cache holds them) where a mark
   * per document took a miss to memory per id. Kept for the few counts walked last.
   */
  function bitsOf(t: TextCount, sum: Summary): Uint8Array {
    let bits = keptBits.get(t)
    if (bits) {
      // Least recently walked first out.
      keptBits.delete(t)
      keptBits.set(t, bits)
      return bits
    }
    bits = new Uint8Array((sum.docs.size >> 3) + 1)
    const set = (d: number) => {
      bits![d >> 3] |= 1 << (d & 7)
    }
    if (t.docs) {
      for (let i = 0; i < t.docs.length; i++) set(t.docs[i])
      if (t.whole) {
        const kindOf = sum.docs.kind.data,
          whole = t.whole
        for (let d = 1; d < sum.docs.size; d++) if (whole[kindOf[d]] === 1) set(d)
      }
    } else for (const source of t.sources!) sum.docs.bySource.each(source, set)
    while (keptBits.size >= 16 && (keptBits.size + 1) * bits.length > KEPT_BITS_BYTES) keptBits.delete(keptBits.keys().next().value!)
    keptBits.set(t, bits)
    return bits
  }
  const keptBits = new Map<TextCount, Uint8Array>()

  /** The count's block counts (t.blocks), none counted at first. */
  function countsOf(t: TextCount, sum: Summary): Int32Array {
    const blocks = Math.floor(sum.indexed / 2 ** LEVEL_SHIFT[0]) + 1
    if (!t.blocks || t.blocks.length < blocks) {
      const counts = new Int32Array(blocks).fill(-1)
      if (t.blocks) counts.set(t.blocks)
      t.blocks = counts
    }
    return t.blocks
  }

  /**
   * The indexed matches of a walkable text count in each level 0 block of [from, to] (blocks
   * wholly at or above docsFrom): those not counted yet are walked once, in runs, and kept
   * on the count (t.blocks).
   */
  function blockCounts(t: TextCount, sum: Summary, from: number, to: number): Int32Array {
    const shift = LEVEL_SHIFT[0]
    const size = 2 ** shift
    const counts = countsOf(t, sum)
    for (let b = from; b <= to; b++) {
      if (counts[b] >= 0) continue
      let e = b
      while (e < to && counts[e + 1] < 0) e++
      counts.fill(0, b, e + 1)
      const bits = bitsOf(t, sum)
      const lo = Math.max(1, b * size),
        hi = Math.min(sum.indexed, e * size + size - 1)
      indexer.docIds.each(lo, hi, (sLo, docs) => {
        const to = Math.min(hi, sLo + docs.length - 1)
        for (let id = Math.max(lo, sLo); id <= to; id++) {
          const d = docs[id - sLo]
          if ((bits[d >> 3] >> (d & 7)) & 1) counts[id >> shift]++
        }
        return true
      })
      b = e
    }
    return counts
  }

  /**
   * The indexed matches of a walkable text plan in [lo, hi] (all of it at or above docsFrom
   * and up to the mark), per level 0 block holding any, ascending, with their ids when
   * `collect`. An event matches when its document is one the text count listed, or of a
   * kind it counted whole (or its source is one of the count's, for sources alone); its
   * time is told by its block's span, the cells of its kind there, or the span of its
   * stretch of 64 ids, and read from its row only where all of those straddle an end of
   * the time range.
   */
  function docMatches(p: Plan, t: TextCount, sum: Summary, lo: number, hi: number, collect: boolean): { lo: number; hi: number; n: number; ids: number[] | null }[] {
    const size = 2 ** LEVEL_SHIFT[0]
    const bits = bitsOf(t, sum)
    const kindOf = sum.docs.kind.data,
      times = p.times
    const fineMin = sum.fine.min,
      fineMax = sum.fine.max
    let kindTop = 0
    for (const k of indexer.kinds('events').keys()) kindTop = Math.max(kindTop, k)
    const kindState = new Uint8Array(kindTop + 1)
    const out: { lo: number; hi: number; n: number; ids: number[] | null }[] = []
    const byBlock = new Map<number, (typeof out)[number]>()
    const uncertain: number[] = []
    let block = -1
    // 0: no event of the block is in the time range, 1: all of them, 2: as the kind's cell says.
    let standing = 0
    let cur: (typeof out)[number] = { lo: 0, hi: -1, n: 0, ids: null }
    const enter = (b: number) => {
      block = b
      cur = { lo: Math.max(lo, b * size), hi: Math.min(hi, b * size + size - 1), n: 0, ids: collect ? [] : null }
      out.push(cur)
      byBlock.set(b, cur)
      const span = sum.spans[0].get(b)
      if (!span) standing = 0
      else if (!times || (span[0] >= times.lo && span[1] <= times.hi)) standing = 1
      else if (span[1] < times.lo || span[0] > times.hi) standing = 0
      else {
        standing = 2
        kindState.fill(0)
        for (const [kind, , min, max] of sum.blocks[0].get(b) ?? []) {
          if (kind <= kindTop) kindState[kind] = max < times.lo || min > times.hi ? 0 : min >= times.lo && max <= times.hi ? 1 : 2
        }
      }
    }
    indexer.docIds.each(lo, hi, (sLo, docs) => {
      const to = Math.min(hi, sLo + docs.length - 1)
      for (let id = Math.max(lo, sLo); id <= to; id++) {
        const d = docs[id - sLo]
        if (((bits[d >> 3] >> (d & 7)) & 1) === 0) continue
        const b = Math.floor(id / size)
        if (b !== block) enter(b)
        if (standing === 0) continue
        let state = standing === 1 ? 1 : kindState[kindOf[d]]
        if (state === 2) {
          // Unknown spans (NaN, or past the arrays) compare false: the row is read.
          const f = Math.floor(id / FINE)
          if (fineMax[f] < times!.lo || fineMin[f] > times!.hi) state = 0
          else if (fineMin[f] >= times!.lo && fineMax[f] <= times!.hi) state = 1
        }
        if (state === 1) {
          cur.n++
          cur.ids?.push(id)
        } else if (state === 2) uncertain.push(id)
      }
      return true
    })
    if (uncertain.length) {
      for (const id of inTimes.all(JSON.stringify(uncertain), times!.lo, times!.hi)) {
        const seg = byBlock.get(Math.floor(id / size))!
        seg.n++
        seg.ids?.push(id)
      }
      if (collect) for (const seg of out) seg.ids!.sort((a, b) => a - b)
    }
    return out.filter((seg) => seg.n > 0)
  }

  /**
   * The indexed matches of a walkable text plan in [lo, hi] per level 0 block (kept per
   * question: its pages ask again). A block wholly inside the id and time ranges is taken
   * from the count's block counts (walked and counted the first time the term's questions
   * meet it); only those the ranges cut (a day's two ends, blocks whose times mix) are
   * walked every time.
   */
  function docSegments(p: Plan, t: TextCount, sum: Summary, lo: number, hi: number): Segment[] {
    const key = `${lo}:${hi}:${p.times?.lo}:${p.times?.hi}`
    t.docSegs ??= new Map()
    let segs = t.docSegs.get(key)
    if (segs) return segs
    if (t.docSegs.size >= 16) t.docSegs.clear()
    segs = []
    const size = 2 ** LEVEL_SHIFT[0]
    const from = indexer.docsFrom()
    const times = p.times
    const whole = (b: number) => {
      const span = sum.spans[0].get(b)
      const bLo = Math.max(1, b * size)
      return span !== undefined && bLo >= lo && bLo >= from && b * size + size - 1 <= hi && (!times || (span[0] >= times.lo && span[1] <= times.hi))
    }
    const last = Math.floor(hi / size)
    for (let b = Math.floor(lo / size); b <= last; b++) {
      const span = sum.spans[0].get(b)
      if (!span || (times && (span[1] < times.lo || span[0] > times.hi))) continue
      if (whole(b)) {
        // A run of whole blocks counted (or walked once) together.
        let e = b
        while (e < last && whole(e + 1)) e++
        const counts = blockCounts(t, sum, b, e)
        for (let k = b; k <= e; k++) if (counts[k] > 0) segs.push({ lo: Math.max(1, k * size), hi: Math.min(k * size + size - 1, sum.indexed), n: counts[k], level: -3 })
        b = e
        continue
      }
      // A cut block's matches are collected as they are counted: the page, which starts in
      // one of them (a day's newest block), does not walk it again.
      for (const x of docMatches(p, t, sum, Math.max(lo, b * size), Math.min(hi, b * size + size - 1), true)) segs.push({ lo: x.lo, hi: x.hi, n: x.n, level: -3, ids: x.ids! })
    }
    t.docSegs.set(key, segs)
    return segs
  }

  // ---- a page by walking the events' documents (event_doc_ids) ----
  /**
   * The indexed matches of a walkable text count in [lo, hi] (all of it at or above
   * docsFrom and up to the mark; no time range), by id from each event's document, newest
   * first when `desc`: passes over the first `skip`, answers the next `want` ids in walk
   * order. A level 0 block whose matches are counted (blockCounts) and all passed over is
   * not walked; a block walked whole is counted on the way. Null when that would walk more
   * than `budget` ids of blocks not counted yet (the caller reads otherwise): a page of a
   * term of many matches costs its share of the ids, not a walk over the rows.
   */
  function docWalk(t: TextCount, sum: Summary, lo: number, hi: number, desc: boolean, skip: number, want: number, budget: number): number[] | null {
    const out: number[] = []
    if (want <= 0 || lo > hi) return out
    const shift = LEVEL_SHIFT[0]
    const size = 2 ** shift
    const from = indexer.docsFrom()
    const counts = countsOf(t, sum)
    const bits = bitsOf(t, sum)
    let left = budget
    const first = Math.floor((desc ? hi : lo) / size),
      last = Math.floor((desc ? lo : hi) / size),
      step = desc ? -1 : 1
    for (let b = first; b !== last + step; b += step) {
      const bLo = Math.max(lo, b * size),
        bHi = Math.min(hi, b * size + size - 1)
      const full = bLo === Math.max(1, b * size) && bLo >= from && bHi === Math.min(b * size + size - 1, sum.indexed)
      if (full && counts[b] >= 0 && counts[b] <= skip) {
        skip -= counts[b]
        continue
      }
      if (bHi - bLo + 1 > left && !(full && counts[b] >= 0)) return null
      if (!(full && counts[b] >= 0)) left -= bHi - bLo + 1
      // A block walked whole is counted as it goes (its ids past the page's end too).
      const counting = full && counts[b] < 0
      let n = 0
      indexer.docIds.each(
        bLo,
        bHi,
        (sLo, docs) => {
          const from = Math.max(bLo, sLo),
            to = Math.min(bHi, sLo + docs.length - 1)
          for (let id = desc ? to : from; desc ? id >= from : id <= to; id += step) {
            const d = docs[id - sLo]
            if (((bits[d >> 3] >> (d & 7)) & 1) === 0) continue
            n++
            if (out.length === want) {
              if (!counting) return false
              continue
            }
            if (skip > 0) skip--
            else out.push(id)
          }
          return true
        },
        desc,
      )
      if (counting) counts[b] = n
      if (out.length === want) break
    }
    return out
  }

  /** The ids of the indexed matches of a text plan in [lo, hi] (a segment of docSegments), ascending. */
  const docMatchIds = (p: Plan, t: TextCount, sum: Summary, lo: number, hi: number): number[] => docMatches(p, t, sum, lo, hi, true).flatMap((x) => x.ids!)

  /** The indexed events of these kinds with ids in [lo, hi], inside level 1 block `blk`, from their ids. */
  const kindIdCount = (blk: number, kinds: number[], lo: number, hi: number): number => (lo > hi ? 0 : (kindIdsBetween.get(blk, JSON.stringify(kinds), lo, hi) as number))
  /** The text counts kept now, and the documents and sources they list (tests, benchmarks). */
  const keptTexts = () => ({ counts: keptCounts.size, docs: keptDocs })
  return { count, countAll, segments, kindIdCount, matchIds, pageIds, blockKindIds, docMatchIds, walkable, docWalk, termDocs, names, phraseTerms, rememberPhrase, countsOf, keptTexts }
}
export type EventCounts = ReturnType<typeof eventCounts>
