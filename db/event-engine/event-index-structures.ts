// The structures of the event index (db/event-engine/event-index.ts): its block sizes, the counts it
// keeps in memory (the summary), what a step or a prune changed in them, and the state the
// indexer's parts share (db/event-engine/event-index-summary.ts, -dictionaries.ts, -steps.ts, -prune.ts).
import type { Statement } from 'better-sqlite3'
import type { DB } from '../index.js'
import type { EventDocIds } from './event-doc-ids.js'
import type { CacheRegistry } from '../../lib/platform/cache.js'
import type { RecordTable } from '../../lib/events/ports.js'

/** Ids per block: level 0 blocks hold 2^12 ids, level 1 blocks 2^16. */
export const LEVEL_SHIFT = [12, 16] as const
/** What a prune took out of the counts (`from` and `to`: the prune count before and after), applied to the summary in memory once it committed. */
export interface PruneDelta {
  from: number
  to: number
  cells: Rollup
  docs: Map<number, number>
  sources: Map<number, number>
}

/** Ids per fine time span of events: 2^6 (event_time_spans, migration 034). */
export const FINE_SHIFT = 6

/**
 * The time span [min, max] of each stretch of 2^FINE_SHIFT event ids (NaN where none is
 * known): a time range tells the events of a block it cuts by these, reading only the rows
 * of stretches that straddle one of its ends.
 */
export class FineSpans {
  min = new Float64Array(1024).fill(Number.NaN)
  max = new Float64Array(1024).fill(Number.NaN)
  merge(sub: number, lo: number, hi: number) {
    if (sub >= this.min.length) {
      const size = Math.max(sub + 1, this.min.length * 2)
      const min = new Float64Array(size).fill(Number.NaN)
      const max = new Float64Array(size).fill(Number.NaN)
      min.set(this.min)
      max.set(this.max)
      this.min = min
      this.max = max
    }
    // NaN (none yet) compares false: the first span is taken whole.
    if (!(this.min[sub] <= lo)) this.min[sub] = lo
    if (!(this.max[sub] >= hi)) this.max[sub] = hi
  }
}

/** Ids per block of the events-by-source index (event_source_ids, migration 012). */
export const SOURCE_BLOCK_SHIFT = 18

export interface EventKind {
  id: number
  event_code: string
  severity: number
  category: string
  peripheral_icon: number
  description: string
  hashtags: string | null
}

export interface AuditKind {
  id: number
  severity: number
  category: string
  operation_id: string | null
  outcome: string
  asset_type: string
  asset_sub_type: string
  asset_detail: string
  asset_icon: number
}

/** The kind columns of each table, in the order of its kinds table. */
export const kindColumns = {
  events: ['event_code', 'severity', 'category', 'peripheral_icon', 'description', 'hashtags'],
  audit_trail: ['severity', 'category', 'operation_id', 'outcome', 'asset_type', 'asset_sub_type', 'asset_detail', 'asset_icon'],
} as const

export const kindsTable = { events: 'event_kinds', audit_trail: 'audit_kinds' } as const
export const rollupTable = { events: 'event_rollup', audit_trail: 'audit_rollup' } as const

/** One kind's count in a block: kind, n, min_ms, max_ms. */
export type Cell = [number, number, number, number]

/** A growable column of 32-bit integers indexed by id. */
export class Column {
  data = new Int32Array(1024)
  get(i: number) {
    return i < this.data.length ? this.data[i] : 0
  }
  set(i: number, v: number) {
    if (i >= this.data.length) {
      const grown = new Int32Array(Math.max(i + 1, this.data.length * 2))
      grown.set(this.data)
      this.data = grown
    }
    this.data[i] = v
  }
}

/**
 * The counts of the index held in memory (what every query reads): block counts by
 * level, block and kind; for events also each document's kind, source and count, and
 * each source's count and asset key. Loaded on first use, then kept up to date by this
 * process's indexer; loaded again when another process indexed meanwhile.
 */
export interface Summary {
  /** The high-water mark these counts are exact up to. */
  indexed: number
  /** How many prunes of the retention job these counts include (migration 029): another one means read them again. */
  pruned: number
  /** By level: block -> cells. */
  blocks: Map<number, Cell[]>[]
  /** By level: block -> [min_ms, max_ms] of its cells: a time range passes over a block without reading its cells. */
  spans: Map<number, [number, number]>[]
  docs: { kind: Column; source: Column; n: Column; size: number; bySource: BySource }
  sources: { n: Column; key: (string | null)[]; size: number }
  /** Whether `docs` and `sources` are read yet: only text filters need them (millions of rows take seconds). */
  texts: boolean
  /** Events: the time spans of stretches of ids (empty for audit records). */
  fine: FineSpans
}

/**
 * The documents of each source: a compact list built when the documents are read
 * (offsets per source into one array of document ids), and the documents added since.
 */
export class BySource {
  offsets = new Int32Array(1)
  ids = new Int32Array(0)
  extra = new Map<number, number[]>()
  build(sourceOf: Int32Array, docs: number, sources: number) {
    const counts = new Int32Array(sources + 1)
    for (let id = 1; id < docs; id++) counts[sourceOf[id]]++
    this.offsets = new Int32Array(sources + 2)
    for (let s = 0; s <= sources; s++) this.offsets[s + 1] = this.offsets[s] + counts[s]
    const fill = this.offsets.slice(0, sources + 1)
    this.ids = new Int32Array(this.offsets[sources + 1])
    for (let id = 1; id < docs; id++) this.ids[fill[sourceOf[id]]++] = id
    this.extra.clear()
  }
  add(source: number, doc: number) {
    const list = this.extra.get(source)
    if (list) list.push(doc)
    else this.extra.set(source, [doc])
  }
  /** Calls `visit` with each document of the source. */
  each(source: number, visit: (doc: number) => void) {
    if (source + 1 < this.offsets.length) for (let i = this.offsets[source]; i < this.offsets[source + 1]; i++) visit(this.ids[i])
    const more = this.extra.get(source)
    if (more) for (const doc of more) visit(doc)
  }
}

/** Rows of the documents' and sources' counts read at a time. */
export const TEXT_SLICE = 16_384

export interface IndexerOptions {
  /** Sources and documents remembered between batches (bounded memory; a miss is one index probe). */
  sourceCache?: number
  docCache?: number
  /** The app's caches, where the engine's are made (lib/platform/cache.ts; absent: caches of its own). */
  caches?: CacheRegistry
  /**
   * Each step's commit synced on its own (synchronous = FULL), as before: by default a step
   * commits with synchronous = NORMAL. The index is derived from the rows, and its counts
   * and high-water mark commit together: a power loss may take the last steps back (they
   * are done again), never a record, and the next synced commit syncs them too. A sync was
   * most of a small step's time.
   */
  syncedSteps?: boolean
}

export const SYNCHRONOUS_FULL = 2

/** Block counts of one batch, by level, block and kind: [n, min_ms, max_ms]. */
export type Rollup = Map<string, [number, number, number, number, number, number]>

export function addRollup(r: Rollup, id: number, kind: number, ms: number) {
  for (let level = 0; level < LEVEL_SHIFT.length; level++) {
    const block = Math.floor(id / 2 ** LEVEL_SHIFT[level])
    const key = `${level}:${block}:${kind}`
    const cell = r.get(key)
    if (cell) {
      cell[3]++
      if (ms < cell[4]) cell[4] = ms
      if (ms > cell[5]) cell[5] = ms
    } else r.set(key, [level, block, kind, 1, ms, ms])
  }
}

/** What a step changed, applied to the summary in memory once it committed. */
export interface Delta {
  from: number
  to: number
  cells: Rollup
  docs: Map<number, number>
  sources: Map<number, number>
  newDocs: [number, number, number][]
  newSources: [number, string | null][]
  /** Events: the time span of each stretch of ids the step met, as [min, max] by stretch. */
  fine: Map<number, [number, number]>
  reset: boolean
}

/** What the indexer's parts share: its connection and options, the index's state by table, the summaries kept, the documents by id. */
export interface IndexerState {
  db: DB
  opts: IndexerOptions
  /** The row of record_index_state of a table: its high-water mark, whether it starts over, its prune count. */
  state: Statement<[string], { indexed: number; stale: number; prunes: number }>
  summaries: Partial<Record<RecordTable, Summary>>
  docIds: EventDocIds
  // Times this indexer started over (a record changed or deleted outside a prune): part of
  // the version list answers are kept under (db/event-engine/event-queries.ts).
  restarts: number
}
