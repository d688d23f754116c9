// Counting the records a question matches, exactly: whole blocks from the index's counts in
// memory; where a block straddles an end of a time range, the time index and the kinds' ids
// (no row) when the question has no text, else the rows; the rows above the mark;
// "contains" filters through the counts of the matching sources and documents. The pages
// (db/event-engine/event-pages.ts) and the streams (db/event-engine/event-stream.ts) read where these counts say the
// matches are.
// The parts take the state made here (db/event-engine/event-counts-state.ts): the block counts
// (db/event-engine/event-counts-blocks.ts), the counts read from the rows (db/event-engine/event-counts-rows.ts) and
// the blocks a time range cuts (db/event-engine/event-counts-cut.ts), the terms' matches
// (db/event-engine/event-counts-terms.ts), the text counts (db/event-engine/event-counts-text.ts) and the walks over
// the events' documents (db/event-engine/event-counts-docs.ts). This module evaluates a plan with them.
import type { Summary } from './event-index.js'
import type { RecordTable } from '../../lib/events/ports.js'
import { all, type Plan, type Range } from './event-plans.js'
import { pred, rangeCond, seekFrom, type QueryState } from './event-query-state.js'
import { createCountsState, type Counted, type CountsState, type Segment, type TextCount } from './event-counts-state.js'
import { countAll, idsOfTimes, keptSegments, kindIdCount, segments } from './event-counts-blocks.js'
import { blockKindIds, kindSet } from './event-counts-cut.js'
import { countsOf, docMatchIds, docSegments, docWalk, walkable } from './event-counts-docs.js'
import { countRows, keptCount, matchIds, pageIds } from './event-counts-rows.js'
import { phraseTerms, rememberPhrase } from './event-counts-terms.js'
import type { CacheRegistry } from '../../lib/platform/cache.js'
import { KEPT_DOCS_MAX, keptTextCount, textCountKept } from './event-counts-text.js'

export type { Counted, Segment, TextCount } from './event-counts-state.js'
export { KEPT_DOCS_MAX } from './event-counts-text.js'

/**
 * A source term (Source, AssetName, AssetKey) with at least this many matches is counted over
 * a range from the events' documents; one with fewer (a host: about a hundred) is counted from
 * its sources' own entries, which reads far less than walking a day's documents.
 */
const SOURCE_WALK_MIN = 4096
/** An id range without a time range is counted from the events' documents up to this many ids (4 bytes each read). */
const DOC_PASS_MAX = 1_048_576

// ---- counting ----
function count(s: CountsState, p: Plan): Counted {
  const { indexer, topId } = s
  const sum = indexer.summary(p.table, p.text !== null)
  const kinds = kindSet(s, p)
  if (p.empty) return { filtered: 0, sum, kinds, ids: { lo: 1, hi: 0 }, segments: [], tail: 0 }
  const tailLo = Math.max(p.ids.lo, sum.indexed + 1)
  if (!p.textSql) {
    const segs = keptSegments(s, p, sum, kinds)
    const tail = countRows(s, p, tailLo, p.ids.hi)
    return { filtered: segs.reduce((a, x) => a + x.n, 0) + tail, sum, kinds, ids: p.ids, segments: segs, tail }
  }
  const ids = idsOfTimes(s, p, sum)
  if (!p.text || sum.indexed === 0) return { filtered: countRows(s, p, ids.lo, ids.hi, sum), sum, kinds, ids, tail: 0 }
  const t = keptTextCount(s, p, sum, kinds)
  const tail = countRows(s, p, tailLo, ids.hi)
  const top = topId(p.table)
  if (ids.lo <= 1 && ids.hi >= top && !p.times) return { filtered: t.n + tail, sum, kinds, ids, text: t, tail }
  const hi = Math.min(ids.hi, top)
  // The indexed part of the range from the events' documents, when they are all there
  // (migration 030: those indexed before it are added in the background).
  const last = Math.min(hi, sum.indexed)
  if ((t.docs || (walkable(t) && t.n >= SOURCE_WALK_MIN)) && ids.lo <= last && (p.times || last - ids.lo < DOC_PASS_MAX) && ids.lo >= indexer.docsFrom()) {
    const segs = docSegments(s, p, t, sum, ids.lo, last)
    return { filtered: segs.reduce((a, x) => a + x.n, 0) + tail, sum, kinds, ids, text: t, docSegments: segs, tail }
  }
  // A range of ids: count inside it, or count outside and subtract from the whole,
  // whichever reads fewer rows (a poller near the newest events reads few either way).
  if (!p.times) {
    const inside = rowsToRead(t, ids.lo, hi, top)
    const outside = rowsToRead(t, 1, ids.lo - 1, top) + rowsToRead(t, hi + 1, top, top)
    if (outside < inside) {
      const whole = t.n + countRows(s, p, sum.indexed + 1, top)
      const out = countIn(s, p, t, 1, ids.lo - 1, sum) + countIn(s, p, t, hi + 1, top, sum)
      return { filtered: whole - out, sum, kinds, ids, text: t, tail }
    }
  }
  return { filtered: countIn(s, p, t, ids.lo, hi, sum), sum, kinds, ids, text: t, tail }
}

/**
 * The plan's text count made (and kept) now, unless it is kept already or the plan has none
 * to make: true when there was one to make. A new term's count over millions of events
 * takes tens of ms: made in a turn of its own, before the turn that counts and pages.
 */
function prepareText(s: CountsState, p: Plan, make = true): boolean {
  if (p.empty || !p.textSql || !p.text) return false
  const sum = s.indexer.summary(p.table, true)
  if (sum.indexed === 0 || textCountKept(s, p, sum)) return false
  if (make) keptTextCount(s, p, sum, kindSet(s, p))
  return true
}

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
function countIn(s: CountsState, p: Plan, t: TextCount, lo: number, hi: number, sum: Summary): number {
  const indexed = sum.indexed
  if (lo > hi) return 0
  const span = hi - lo + 1
  if (t.sources && (t.seekRows * span) / Math.max(1, s.topId(p.table)) < span / 4) {
    const w = all([rangeCond(p, lo, hi, 'both'), seekFrom(t.sources, lo, hi, indexed), pred(p)])!
    return keptCount(s, `SELECT count(*) FROM events e WHERE ${w.sql}`, w.params, hi, sum)
  }
  return countRows(s, p, lo, hi, sum)
}

/** `keptDocsMax`: the listed documents and sources of the text counts kept (KEPT_DOCS_MAX; a benchmark compares). */
export function eventCounts(state: QueryState, { keptDocsMax = KEPT_DOCS_MAX, caches }: { keptDocsMax?: number; caches?: CacheRegistry } = {}) {
  const s = createCountsState(state, keptDocsMax, caches)
  return {
    count: (p: Plan): Counted => count(s, p),
    prepareText: (p: Plan): boolean => prepareText(s, p),
    /** Whether the plan has a text count to make (prepareText would make it). */
    textPending: (p: Plan): boolean => prepareText(s, p, false),
    countAll: (table: RecordTable, sum: Summary): number => countAll(s, table, sum),
    segments: (p: Plan, sum: Summary, kinds: number[] | null, floor?: number, ids?: Range, rough?: boolean): Segment[] => segments(s, p, sum, kinds, floor, ids, rough),
    kindIdCount: (blk: number, kinds: number[], lo: number, hi: number): number => kindIdCount(s, blk, kinds, lo, hi),
    matchIds: (p: Plan, lo: number, hi: number): number[] => matchIds(s, p, lo, hi),
    pageIds: (p: Plan, lo: number, hi: number, sum: Summary, dir: 'ASC' | 'DESC', limit: number, skip: number): number[] => pageIds(s, p, lo, hi, sum, dir, limit, skip),
    blockKindIds: (sum: Summary, kinds: number[], lo: number, hi: number, dir: 'ASC' | 'DESC', limit: number, skip: number): number[] | null => blockKindIds(s, sum, kinds, lo, hi, dir, limit, skip),
    docMatchIds: (p: Plan, t: TextCount, sum: Summary, lo: number, hi: number): number[] => docMatchIds(s, p, t, sum, lo, hi),
    walkable,
    docWalk: (t: TextCount, sum: Summary, lo: number, hi: number, desc: boolean, skip: number, want: number, budget: number): number[] | null => docWalk(s, t, sum, lo, hi, desc, skip, want, budget),
    termDocs: s.termDocs,
    names: s.names,
    phraseTerms: (p: Plan, minDocs: number) => phraseTerms(s, p, minDocs),
    rememberPhrase: (key: string, after: number, upTo: number, read: () => number[]): void => rememberPhrase(s, key, after, upTo, read),
    countsOf,
    /** The text counts kept now, and the documents and sources they list (tests, benchmarks). */
    keptTexts: () => ({ counts: s.keptCounts.size, docs: s.keptDocs }),
  }
}
export type EventCounts = ReturnType<typeof eventCounts>
