// What the event counts keep from question to question, in one object made once per
// repository (createCountsState) and handed to the functions of each part: the counts among
// indexed records and their ids (db/event-engine/event-counts-rows.ts, db/event-engine/event-counts-cut.ts), the
// segments of plans without text (db/event-engine/event-counts-blocks.ts), the terms' matches
// (db/event-engine/event-counts-terms.ts), the text counts (db/event-engine/event-counts-text.ts) and their match
// bits (db/event-engine/event-counts-docs.ts). Each kept structure is described where it is declared.
import type { Statement } from 'better-sqlite3'
import { cacheIn, type Cache, type CacheRegistry } from '../../lib/platform/cache.js'
import { FINE_SHIFT, LEVEL_SHIFT, type Summary } from './event-index.js'
import type { GlobalCols, Range } from './event-plans.js'
import type { QueryState } from './event-query-state.js'
import { sourceNames, type SourceNames } from './source-names.js'
import { termSearch, type TermSearch } from './term-search.js'

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

/** Ids per fine time span (event_time_spans). */
export const FINE = 2 ** FINE_SHIFT

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
export class Marks {
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

type SourceText = { id: number; entity_id: string; asset_key: string | null; asset_name: string | null }

export interface CountsState extends Pick<QueryState, 'db' | 'indexer' | 'cached' | 'tables' | 'topId' | 'byTime'> {
  /** The listed documents and sources of the text counts kept (KEPT_DOCS_MAX; a benchmark compares). */
  keptDocsMax: number

  // ---- counts among indexed records (db/event-engine/event-counts-rows.ts, db/event-engine/event-counts-cut.ts) ----
  /** Counts read from the rows, by statement and parameters, for the summary rowCountsFor (keptCount). */
  keptRowCounts: Cache<string, number>
  rowCountsFor: Summary | null
  /** The ids of the matches in stretches of indexed ids (matchIds, stretchKindIds, kindMatchIds). */
  keptIds: Cache<string, number[]>
  /** The top-level segments of plans without text conditions (keptSegments). */
  keptSegs: Cache<string, Segment[]>
  /** A block's documents by id, reused from call to call. */
  docScratch: { at: Int32Array; of(size: number): Int32Array }
  kindIdsIn: Statement<[number, string, number, number], number>
  kindIdsBetween: Statement<unknown[], unknown>
  stretchInTimes: Statement<[number, number, number, number], number>

  // ---- terms (db/event-engine/event-counts-terms.ts) ----
  termDocs: TermSearch
  names: SourceNames
  /** Trigram results by term (remembered), least recently used first; termIds: the ids they hold. */
  terms: Map<string, { upTo: number; ids: number[] }>
  termIds: number
  sourcesFts: Statement<[string, number, number], number>
  lastSource: Statement<unknown[], unknown>
  lastDoc: Statement<unknown[], unknown>
  sourceTexts: Statement<[string], SourceText>

  // ---- text counts (db/event-engine/event-counts-text.ts) ----
  /** The marks textCount sets. */
  marks: { docSeen: Marks; docIn: Marks; docInGlobal: Marks; sourceSeen: Marks; sourceIn: Marks; sourceInGlobal: Marks }
  /** Text counts of recent questions (keptTextCount), for the summary keptFor; keptDocs: their weight. */
  keptCounts: Map<string, TextCount>
  keptFor: Summary | null
  keptDocs: number
  /** The key of each term's newest text count kept (for one summary): the next count of the term, once more is indexed, starts from its block counts. */
  newestOf: Map<string, string>

  // ---- walks over the events' documents (db/event-engine/event-counts-docs.ts) ----
  /** The match bits of the text counts walked last (bitsOf). */
  keptBits: Map<TextCount, Uint8Array>
  inTimes: Statement<[string, number, number], number>
}

/** The counts' state, empty, for the queries' shared state. */
export function createCountsState(state: QueryState, keptDocsMax: number, caches?: CacheRegistry): CountsState {
  const { db, indexer, cached, tables, topId, byTime } = state
  return {
    db,
    indexer,
    cached,
    tables,
    topId,
    byTime,
    keptDocsMax,

    // At most 4,096 counts, least recently used first out.
    keptRowCounts: cacheIn<string, number>(caches, {
      name: 'event-row-counts',
      signal: 'a new summary (a prune, a rebuild, a reload); counts reaching above the mark are never kept',
      max: 4096,
      maxBytes: 4 * 1024 * 1024,
      sizeOf: (_, key) => 24 + 2 * key.length,
    }),
    rowCountsFor: null,
    // At most about a million ids (8 MB), least recently used first out.
    keptIds: cacheIn<string, number[]>(caches, {
      name: 'event-match-ids',
      signal: 'a new summary (a prune, a rebuild, a reload)',
      maxBytes: 8 * 1024 * 1024,
      sizeOf: (ids, key) => 8 * (ids.length + 1) + 2 * key.length,
    }),
    // At most 256 plans' segments.
    keptSegs: cacheIn<string, Segment[]>(caches, {
      name: 'event-segments',
      signal: 'a new summary, or its mark moving (part of the key)',
      max: 256,
      maxBytes: 8 * 1024 * 1024,
      sizeOf: (segs, key) => 2 * key.length + segs.reduce((n, g) => n + 64 + 8 * (g.ids?.length ?? 0), 16),
    }),
    docScratch: {
      at: new Int32Array(2 ** LEVEL_SHIFT[0]),
      of(size: number): Int32Array {
        if (this.at.length < size) this.at = new Int32Array(size)
        return this.at
      },
    },
    kindIdsIn: db.prepare<[number, string, number, number], number>('SELECT id FROM event_kind_ids WHERE blk = ? AND kind IN (SELECT value FROM json_each(?)) AND id BETWEEN ? AND ?').pluck(),
    kindIdsBetween: db.prepare('SELECT count(*) FROM event_kind_ids WHERE blk = ? AND kind IN (SELECT value FROM json_each(?)) AND id BETWEEN ? AND ?').pluck(),
    // A range of rowids: left to the planner, it scans the time index over the window (a
    // block's span, thousands of entries) for the few dozen ids of a stretch.
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    stretchInTimes: db.prepare<[number, number, number, number], number>('SELECT id FROM events NOT INDEXED WHERE id BETWEEN ? AND ? AND created_ms BETWEEN ? AND ?').pluck(),

    termDocs: termSearch(db),
    names: sourceNames(db),
    terms: new Map<string, { upTo: number; ids: number[] }>(),
    termIds: 0,
    sourcesFts: db.prepare<[string, number, number], number>('SELECT rowid FROM event_sources_fts WHERE event_sources_fts MATCH ? AND rowid > ? AND rowid <= ? ORDER BY rowid').pluck(),
    lastSource: db.prepare('SELECT coalesce(max(id), 0) FROM event_sources').pluck(),
    lastDoc: db.prepare('SELECT coalesce(max(id), 0) FROM event_docs').pluck(),
    sourceTexts: db.prepare<[string], SourceText>('SELECT id, entity_id, asset_key, asset_name FROM event_sources WHERE id IN (SELECT value FROM json_each(?))'),

    // The marks textCount sets, one set per repository (kept from query to query).
    marks: { docSeen: new Marks(), docIn: new Marks(), docInGlobal: new Marks(), sourceSeen: new Marks(), sourceIn: new Marks(), sourceInGlobal: new Marks() },
    keptCounts: new Map<string, TextCount>(),
    keptFor: null,
    keptDocs: 0,
    newestOf: new Map<string, string>(),

    keptBits: new Map<TextCount, Uint8Array>(),
    // plan: rowid lookups (no override)
    inTimes: db.prepare<[string, number, number], number>('SELECT id FROM events WHERE id IN (SELECT value FROM json_each(?)) AND created_ms BETWEEN ? AND ?').pluck(),
  }
}
