// The indexer of events and audit records (migration 008): brings kinds, block counts,
// sources and documents up to date after the rows are written, a batch at a time, so
// that writing an event stays a single row insert. Queries (db/event-queries.ts) read
// these up to the high-water mark and the rows above it.
import { LRUCache } from 'lru-cache'
import type { DB } from './index.js'
import { eventDocIds } from './event-doc-ids.js'

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

export type RecordTable = 'events' | 'audit_trail'

/** 53-bit string hash (cyrb53): finds a document by its whole key in one index probe. */
export function hash53(text: string): number {
  let h1 = 0xdeadbeef
  let h2 = 0x41c6ce57
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i)
    h1 = Math.imul(h1 ^ ch, 2654435761)
    h2 = Math.imul(h2 ^ ch, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  return 4294967296 * (2097151 & h2) + (h1 >>> 0)
}

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

const SEP = '\u0001'
const NULL = '\u0002'
const keyOf = (values: readonly unknown[]) => values.map((v) => (v === null || v === undefined ? NULL : String(v))).join(SEP)

/** One kind's count in a block: kind, n, min_ms, max_ms. */
export type Cell = [number, number, number, number]

/** A growable column of 32-bit integers indexed by id. */
class Column {
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
const TEXT_SLICE = 16_384

export interface IndexerOptions {
  /** Sources and documents remembered between batches (bounded memory; a miss is one index probe). */
  sourceCache?: number
  docCache?: number
  /**
   * Each step's commit synced on its own (synchronous = FULL), as before: by default a step
   * commits with synchronous = NORMAL. The index is derived from the rows, and its counts
   * and high-water mark commit together: a power loss may take the last steps back (they
   * are done again), never a record, and the next synced commit syncs them too. A sync was
   * most of a small step's time.
   */
  syncedSteps?: boolean
}

const SYNCHRONOUS_FULL = 2

/** Block counts of one batch, by level, block and kind: [n, min_ms, max_ms]. */
type Rollup = Map<string, [number, number, number, number, number, number]>

function addRollup(r: Rollup, id: number, kind: number, ms: number) {
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

export function recordIndexer(db: DB, opts: IndexerOptions = {}) {
  const state = db.prepare<[string], { indexed: number; stale: number; prunes: number }>('SELECT indexed, stale, prunes FROM record_index_state WHERE name = ?')
  const summaries: Partial<Record<RecordTable, Summary>> = {}
  const emptySummary = (indexed: number, pruned = 0): Summary => ({
    indexed,
    pruned,
    blocks: LEVEL_SHIFT.map(() => new Map()),
    spans: LEVEL_SHIFT.map(() => new Map()),
    docs: { kind: new Column(), source: new Column(), n: new Column(), size: 0, bySource: new BySource() },
    sources: { n: new Column(), key: [], size: 0 },
    texts: false,
    fine: new FineSpans(),
  })
  const addCell = (sum: Summary, level: number, block: number, kind: number, n: number, min: number, max: number) => {
    const blocks = sum.blocks[level]
    let cells = blocks.get(block)
    if (!cells) blocks.set(block, (cells = []))
    const span = sum.spans[level].get(block)
    if (!span) sum.spans[level].set(block, [min, max])
    else {
      if (min < span[0]) span[0] = min
      if (max > span[1]) span[1] = max
    }
    const cell = cells.find((c) => c[0] === kind)
    if (cell) {
      cell[1] += n
      cell[2] = Math.min(cell[2], min)
      cell[3] = Math.max(cell[3], max)
    } else cells.push([kind, n, min, max])
  }
  /** Reads the counts from their tables (first use, or after another process indexed). */
  function load(table: RecordTable, indexed: number, pruned: number): Summary {
    const sum = emptySummary(indexed, pruned)
    for (const [level, block, kind, n, min, max] of db.prepare(`SELECT level, block, kind, n, min_ms, max_ms FROM ${rollupTable[table]}`).raw().iterate() as IterableIterator<number[]>) {
      addCell(sum, level, block, kind, n, min, max)
    }
    if (table === 'events') for (const [sub, min, max] of fineSpans.iterate() as IterableIterator<number[]>) sum.fine.merge(sub, min, max)
    return sum
  }
  const fineSpans = db.prepare('SELECT sub, min_ms, max_ms FROM event_time_spans').raw()
  const fineUpsert = db.prepare<[number, number, number]>(
    'INSERT INTO event_time_spans (sub, min_ms, max_ms) VALUES (?, ?, ?) ON CONFLICT (sub) DO UPDATE SET min_ms = min(min_ms, excluded.min_ms), max_ms = max(max_ms, excluded.max_ms)',
  )
  const docsFrom = db.prepare<[number, number]>('SELECT id, kind, source, n FROM event_docs WHERE id > ? ORDER BY id LIMIT ?').raw()
  const sourcesFrom = db.prepare<[number, number]>('SELECT id, n, asset_key FROM event_sources WHERE id > ? ORDER BY id LIMIT ?').raw()
  /**
   * Reads the documents' and sources' counts into `sum` (they match its mark: the tables
   * are at the same one), `chunk` rows at a time, yielding after each chunk. Nothing of
   * it is visible before the end: `sum.texts` is set then.
   */
  function* readTexts(sum: Summary, chunk: number): Generator<void> {
    const docs = { kind: new Column(), source: new Column(), n: new Column(), size: 0, bySource: new BySource() }
    const sources = { n: new Column(), key: [] as (string | null)[], size: 0 }
    for (let after = 0; ; yield) {
      const rows = docsFrom.all(after, chunk) as number[][]
      for (const [id, kind, source, n] of rows) {
        docs.kind.set(id, kind)
        docs.source.set(id, source)
        docs.n.set(id, n)
        docs.size = Math.max(docs.size, id + 1)
      }
      if (rows.length < chunk) break
      after = rows[rows.length - 1][0]
    }
    for (let after = 0; ; yield) {
      const rows = sourcesFrom.all(after, chunk) as [number, number, string | null][]
      for (const [id, n, key] of rows) {
        sources.n.set(id, n)
        sources.key[id] = key
        sources.size = Math.max(sources.size, id + 1)
      }
      if (rows.length < chunk) break
      after = rows[rows.length - 1][0]
    }
    docs.bySource.build(docs.source.data, docs.size, sources.size)
    Object.assign(sum, { docs, sources, texts: true })
  }
  /** At once (the summary of a caller that cannot wait); slices as small as the gradual read's keep the garbage collector out of it. */
  function loadTexts(sum: Summary) {
    for (const _ of readTexts(sum, TEXT_SLICE));
  }
  const setIndexed = db.prepare<[number, string]>('UPDATE record_index_state SET indexed = ?, stale = 0 WHERE name = ?')

  // ---- kinds (few: all of them are kept in memory) ----
  const kindIds = { events: new Map<string, number>(), audit_trail: new Map<string, number>() }
  const kindRows = { events: new Map<number, EventKind>(), audit_trail: new Map<number, AuditKind>() }
  const kindsMax = { events: 0, audit_trail: 0 }
  const loadKinds = (table: RecordTable) => {
    const rows = db.prepare(`SELECT * FROM ${kindsTable[table]} WHERE id > ? ORDER BY id`).all(kindsMax[table]) as (EventKind & AuditKind)[]
    for (const r of rows) {
      kindIds[table].set(keyOf(kindColumns[table].map((c) => r[c as keyof typeof r])), r.id)
      ;(kindRows[table] as Map<number, EventKind | AuditKind>).set(r.id, r)
      kindsMax[table] = r.id
    }
  }
  const insertKind = {
    events: db.prepare(`INSERT INTO event_kinds (${kindColumns.events.join(', ')}) VALUES (${kindColumns.events.map(() => '?').join(', ')})`),
    audit_trail: db.prepare(`INSERT INTO audit_kinds (${kindColumns.audit_trail.join(', ')}) VALUES (${kindColumns.audit_trail.map(() => '?').join(', ')})`),
  }
  const latestKind = { events: db.prepare('SELECT max(id) FROM event_kinds').pluck(), audit_trail: db.prepare('SELECT max(id) FROM audit_kinds').pluck() }
  /** The id of a kind, inserted when new (another process may have added it: read first). */
  const kindId = (table: RecordTable, values: unknown[]): number => {
    const key = keyOf(values)
    let id = kindIds[table].get(key)
    if (id !== undefined) return id
    loadKinds(table)
    id = kindIds[table].get(key)
    if (id !== undefined) return id
    id = Number(insertKind[table].run(...values).lastInsertRowid)
    loadKinds(table)
    return id
  }
  /** Every kind of a table (read again when another connection added some). */
  const kinds = <T extends RecordTable>(table: T): Map<number, T extends 'events' ? EventKind : AuditKind> => {
    if (((latestKind[table].get() as number | null) ?? 0) > kindsMax[table]) loadKinds(table)
    return kindRows[table] as any
  }

  // ---- rollups ----
  const rollupUpsert = {
    events: db.prepare(`INSERT INTO event_rollup (level, block, kind, n, min_ms, max_ms) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (level, block, kind) DO UPDATE SET n = n + excluded.n, min_ms = min(min_ms, excluded.min_ms), max_ms = max(max_ms, excluded.max_ms)`),
    audit_trail: db.prepare(`INSERT INTO audit_rollup (level, block, kind, n, min_ms, max_ms) VALUES (?, ?, ?, ?, ?, ?)
      ON CONFLICT (level, block, kind) DO UPDATE SET n = n + excluded.n, min_ms = min(min_ms, excluded.min_ms), max_ms = max(max_ms, excluded.max_ms)`),
  }

  // ---- sources and documents (events only) ----
  const sourceCache = new LRUCache<string, number>({ max: opts.sourceCache ?? 50_000 })
  const docCache = new LRUCache<string, number>({ max: opts.docCache ?? 20_000 })
  const findSource = db.prepare<[string, string | null, string | null], number>('SELECT id FROM event_sources WHERE entity_id = ? AND asset_key IS ? AND asset_name IS ?').pluck()
  const insertSource = db.prepare<[string, string | null, string | null]>('INSERT INTO event_sources (entity_id, asset_key, asset_name) VALUES (?, ?, ?)')
  const insertSourceFts = db.prepare<[number, string, string | null, string | null]>('INSERT INTO event_sources_fts (rowid, entity_id, asset_key, asset_name) VALUES (?, ?, ?, ?)')
  const addSourceN = db.prepare<[number, number]>('UPDATE event_sources SET n = n + ? WHERE id = ?')
  const insertSourceId = db.prepare<[number, number, number]>('INSERT INTO event_source_ids (blk, source, id) VALUES (?, ?, ?)')
  const insertKindId = db.prepare<[number, number, number]>('INSERT INTO event_kind_ids (blk, kind, id) VALUES (?, ?, ?)')
  const findDocs = db.prepare<[number], { id: number; kind: number; source: number; details: string; peripheral_asset_id: string | null }>(
    'SELECT d.id, d.kind, d.source, t.details, t.peripheral_asset_id FROM event_docs d JOIN event_doc_texts t ON t.id = d.id WHERE d.hash = ?',
  )
  const insertDoc = db.prepare<[number, number, number]>('INSERT INTO event_docs (hash, kind, source) VALUES (?, ?, ?)')
  const insertDocText = db.prepare<[number, string, string | null]>('INSERT INTO event_doc_texts (id, details, peripheral_asset_id) VALUES (?, ?, ?)')
  const insertDocFts = db.prepare<[number, string, string | null]>('INSERT INTO event_docs_fts (rowid, details, peripheral_asset_id) VALUES (?, ?, ?)')
  const addDocN = db.prepare<[number, number]>('UPDATE event_docs SET n = n + ? WHERE id = ?')
  const docIds = eventDocIds(db)

  const sourceId = (entity: string, assetKey: string | null, assetName: string | null, delta: { newSources: [number, string | null][] }): number => {
    const key = keyOf([entity, assetKey, assetName])
    let id = sourceCache.get(key)
    if (id !== undefined) return id
    id = findSource.get(entity, assetKey, assetName)
    if (id === undefined) {
      id = Number(insertSource.run(entity, assetKey, assetName).lastInsertRowid)
      insertSourceFts.run(id, entity, assetKey, assetName)
      delta.newSources.push([id, assetKey])
    }
    sourceCache.set(key, id)
    return id
  }
  const docId = (kind: number, source: number, device: string | null, details: string, delta: { newDocs: [number, number, number][] }): number => {
    const key = keyOf([kind, source, device, details])
    let id = docCache.get(key)
    if (id !== undefined) return id
    const h = hash53(key)
    id = findDocs.all(h).find((d) => d.kind === kind && d.source === source && d.peripheral_asset_id === device && d.details === details)?.id
    if (id === undefined) {
      id = Number(insertDoc.run(h, kind, source).lastInsertRowid)
      insertDocText.run(id, details, device)
      insertDocFts.run(id, details, device)
      delta.newDocs.push([id, kind, source])
    }
    docCache.set(key, id)
    return id
  }

  const latestRecord = { events: db.prepare('SELECT max(id) FROM events').pluck(), audit_trail: db.prepare('SELECT max(id) FROM audit_trail').pluck() }
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const eventBatch = db
    .prepare<[number, number], unknown[]>(
      `SELECT id, created_ms, event_code, severity, category, peripheral_icon, description, hashtags, entity_id, asset_key, asset_name,
       peripheral_asset_id, details FROM events NOT INDEXED WHERE id > ? ORDER BY id LIMIT ?`,
    )
    .raw()
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const auditBatch = db.prepare<[number, number], unknown[]>(`SELECT id, created_ms, ${kindColumns.audit_trail.join(', ')} FROM audit_trail NOT INDEXED WHERE id > ? ORDER BY id LIMIT ?`).raw()

  /** Starts over after indexed records changed: counts are zeroed; the dictionaries stay valid. */
  function reset(table: RecordTable) {
    db.exec(`DELETE FROM ${rollupTable[table]}`)
    if (table === 'events') {
      db.exec('DELETE FROM event_time_spans; DELETE FROM event_source_ids; DELETE FROM event_kind_ids; UPDATE event_sources SET n = 0 WHERE n <> 0; UPDATE event_docs SET n = 0 WHERE n <> 0')
      docIds.reset()
    }
    setIndexed.run(0, table)
  }

  /** What a step changed, applied to the summary in memory once it committed. */
  interface Delta {
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
  let pending: Delta | null = null

  /** Indexes up to `max` more records of `table`, in one transaction; answers how many. */
  const step = (table: RecordTable, max: number): number => {
    pending = null
    // Nothing new (the usual case between bursts): no write transaction at all.
    const s0 = state.get(table)!
    if (!s0.stale && ((latestRecord[table].get() as number | null) ?? 0) <= s0.indexed) return 0
    // Only a transaction of its own: inside another one the setting would be the other's.
    const unsynced = !opts.syncedSteps && !db.inTransaction && db.pragma('synchronous', { simple: true }) === SYNCHRONOUS_FULL
    if (unsynced) db.pragma('synchronous = NORMAL')
    try {
      return stepIn(table, max)
    } finally {
      if (unsynced) db.pragma('synchronous = FULL')
    }
  }
  // Times this indexer started over (a record changed or deleted outside a prune): part of
  // the version list answers are kept under (db/event-queries.ts).
  let restarts = 0
  const stepIn = (table: RecordTable, max: number): number => {
    const n = db
      .transaction(() => {
        // Read inside the write transaction: two indexers (say, the server and a script)
        // take turns and never count a record twice.
        let s = state.get(table)!
        const delta: Delta = { from: s.indexed, to: s.indexed, cells: new Map(), docs: new Map(), sources: new Map(), newDocs: [], newSources: [], fine: new Map(), reset: false }
        if (s.stale) {
          reset(table)
          restarts++
          s = { indexed: 0, stale: 0, prunes: s.prunes }
          delta.reset = true
          delta.from = 0
        }
        pending = delta
        const rows = (table === 'events' ? eventBatch : auditBatch).all(s.indexed, max)
        if (!rows.length) return 0
        const rollup = delta.cells
        if (table === 'events') {
          const sourceN = delta.sources
          const docN = delta.docs
          const fine = delta.fine
          // (block, source, id) and (block, kind, id) of each event, inserted in key order: one
          // pass over the pages they land on.
          const bySource = new Float64Array(rows.length * 3)
          const byKind = new Float64Array(rows.length * 3)
          const ids = new Float64Array(rows.length)
          const docsOf = new Int32Array(rows.length)
          let at = 0
          let i = 0
          for (const r of rows) {
            const [id, ms, code, severity, category, icon, description, hashtags, entity, assetKey, assetName, device, details] = r as [
              number,
              number,
              string,
              number,
              string,
              number,
              string,
              string | null,
              string,
              string | null,
              string | null,
              string | null,
              string,
            ]
            const kind = kindId('events', [code, severity, category, icon, description, hashtags])
            addRollup(rollup, id, kind, ms)
            const sub = Math.floor(id / 2 ** FINE_SHIFT)
            const span = fine.get(sub)
            if (!span) fine.set(sub, [ms, ms])
            else if (ms < span[0]) span[0] = ms
            else if (ms > span[1]) span[1] = ms
            const source = sourceId(entity, assetKey, assetName, delta)
            const doc = docId(kind, source, device, details, delta)
            sourceN.set(source, (sourceN.get(source) ?? 0) + 1)
            docN.set(doc, (docN.get(doc) ?? 0) + 1)
            ids[i] = id
            docsOf[i++] = doc
            byKind[at] = Math.floor(id / 2 ** LEVEL_SHIFT[1])
            bySource[at++] = Math.floor(id / 2 ** SOURCE_BLOCK_SHIFT)
            byKind[at] = kind
            bySource[at++] = source
            byKind[at] = id
            bySource[at++] = id
          }
          for (const [table, insert] of [
            [bySource, insertSourceId],
            [byKind, insertKindId],
          ] as const) {
            const order = Array.from({ length: rows.length }, (_, i) => i * 3)
            order.sort((a, b) => table[a] - table[b] || table[a + 1] - table[b + 1] || table[a + 2] - table[b + 2])
            for (const i of order) insert.run(table[i], table[i + 1], table[i + 2])
          }
          for (const [sub, [min, max]] of fine) fineUpsert.run(sub, min, max)
          for (const [id, n] of sourceN) addSourceN.run(n, id)
          for (const [id, n] of docN) addDocN.run(n, id)
          docIds.append(ids, docsOf, rows.length)
        } else {
          for (const r of rows) {
            const [id, ms, ...values] = r as [number, number, ...unknown[]]
            addRollup(rollup, id, kindId('audit_trail', values), ms)
          }
        }
        for (const cell of rollup.values()) rollupUpsert[table].run(...cell)
        delta.to = (rows[rows.length - 1] as number[])[0]
        setIndexed.run(delta.to, table)
        return rows.length
      })
      .immediate()
    apply(table, pending)
    pending = null
    return n
  }

  // plan: a range of rowids, newest first (no override: the planner has nothing else to use)
  const eventsBelow = db
    .prepare<[number, number], unknown[]>(
      `SELECT id, event_code, severity, category, peripheral_icon, description, hashtags, entity_id, asset_key, asset_name, peripheral_asset_id, details
       FROM events WHERE id < ? ORDER BY id DESC LIMIT ?`,
    )
    .raw()
  /**
   * Writes the documents of up to `max` events indexed before event_doc_ids existed (migration
   * 030), the newest first, in one transaction; answers how many. Nothing is counted again:
   * the counts have these events already.
   */
  const fillDocs = (max: number): number => {
    const s0 = state.get('events')!
    if (s0.stale || docIds.from() <= 1) return 0
    const unsynced = !opts.syncedSteps && !db.inTransaction && db.pragma('synchronous', { simple: true }) === SYNCHRONOUS_FULL
    if (unsynced) db.pragma('synchronous = NORMAL')
    try {
      return db
        .transaction(() => {
          const s = state.get('events')!
          const below = docIds.from()
          if (s.stale || below <= 1) return 0
          const rows = eventsBelow.all(below, max) as [number, string, number, string, number, string, string | null, string, string | null, string | null, string | null, string][]
          const ids = new Float64Array(rows.length)
          const docs = new Int32Array(rows.length)
          const scratch = { newSources: [] as [number, string | null][], newDocs: [] as [number, number, number][] }
          // Ascending, as stretches are written.
          for (let i = rows.length - 1, at = 0; i >= 0; i--, at++) {
            const [id, code, severity, category, icon, description, hashtags, entity, assetKey, assetName, device, details] = rows[i]
            const kind = kindId('events', [code, severity, category, icon, description, hashtags])
            ids[at] = id
            docs[at] = docId(kind, sourceId(entity, assetKey, assetName, scratch), device, details, scratch)
          }
          docIds.prepend(ids, docs, rows.length, rows.length < max)
          return rows.length
        })
        .immediate()
    } finally {
      if (unsynced) db.pragma('synchronous = FULL')
    }
  }

  /** Brings the summary in memory along with a committed step (or drops it when it cannot follow). */
  function apply(table: RecordTable, d: Delta | null) {
    const sum = summaries[table]
    if (!sum || !d) return
    if (d.reset || sum.indexed !== d.from) {
      delete summaries[table]
      return
    }
    for (const [level, block, kind, n, min, max] of d.cells.values()) addCell(sum, level, block, kind, n, min, max)
    for (const [sub, [min, max]] of d.fine) sum.fine.merge(sub, min, max)
    sum.indexed = d.to
    // Documents and sources not read yet are read from their tables when first needed.
    if (!sum.texts) return
    for (const [id, kind, source] of d.newDocs) {
      sum.docs.kind.set(id, kind)
      sum.docs.source.set(id, source)
      sum.docs.bySource.add(source, id)
      sum.docs.size = Math.max(sum.docs.size, id + 1)
    }
    for (const [id, key] of d.newSources) {
      sum.sources.key[id] = key
      sum.sources.size = Math.max(sum.sources.size, id + 1)
    }
    for (const [id, n] of d.docs) sum.docs.n.set(id, sum.docs.n.get(id) + n)
    for (const [id, n] of d.sources) sum.sources.n.set(id, sum.sources.n.get(id) + n)
  }

  // ---- pruning (the retention job, lib/retention/job.ts) ----
  // The records to delete come as a list of ids (json_each): the job picks them by time,
  // in whatever id order they were written.
  const pruneBatch = {
    events: db
      .prepare<[string], unknown[]>(
        `SELECT id, created_ms, event_code, severity, category, peripheral_icon, description, hashtags, entity_id, asset_key, asset_name,
         peripheral_asset_id, details FROM events WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id`,
      )
      .raw(),
    audit_trail: db.prepare<[string], unknown[]>(`SELECT id, created_ms, ${kindColumns.audit_trail.join(', ')} FROM audit_trail WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id`).raw(),
  }
  const rollupSub = {
    events: db.prepare('UPDATE event_rollup SET n = n - ? WHERE level = ? AND block = ? AND kind = ?'),
    audit_trail: db.prepare('UPDATE audit_rollup SET n = n - ? WHERE level = ? AND block = ? AND kind = ?'),
  }
  const rollupDrop = {
    events: db.prepare('DELETE FROM event_rollup WHERE level = ? AND block = ? AND kind = ? AND n <= 0'),
    audit_trail: db.prepare('DELETE FROM audit_rollup WHERE level = ? AND block = ? AND kind = ? AND n <= 0'),
  }
  const deleteSourceId = db.prepare<[number, number, number]>('DELETE FROM event_source_ids WHERE blk = ? AND source = ? AND id = ?')
  const deleteKindId = db.prepare<[number, number, number]>('DELETE FROM event_kind_ids WHERE blk = ? AND kind = ? AND id = ?')
  const subSourceN = db.prepare<[number, number]>('UPDATE event_sources SET n = n - ? WHERE id = ?')
  const subDocN = db.prepare<[number, number]>('UPDATE event_docs SET n = n - ? WHERE id = ?')
  const deleteRecords = {
    events: db.prepare<[string]>('DELETE FROM events WHERE id IN (SELECT value FROM json_each(?))'),
    audit_trail: db.prepare<[string]>('DELETE FROM audit_trail WHERE id IN (SELECT value FROM json_each(?))'),
  }
  const setPruned = db.prepare<[number, number, string]>('UPDATE record_index_state SET prunes = ?, pruned_through = max(pruned_through, ?) WHERE name = ?')

  /**
   * Deletes the records of `table` with the given ids (all indexed; ids no longer there
   * are passed over), inside the caller's transaction, taking them out of every count:
   * block counts, the events' ids by source and by kind, the documents' and sources'
   * counts. Documents and sources left at 0 stay (a later event may use them again). The
   * time spans of the counts stay as they were: still bounds of what is left, and a query
   * reads rows where a bound decides. Answers how many records were deleted.
   */
  function prune(table: RecordTable, ids: readonly number[]): { deleted: number; delta: PruneDelta } {
    const s = state.get(table)!
    if (s.stale) throw new Error(`the ${table} index is starting over: prune after it has caught up`)
    const delta: PruneDelta = { from: s.prunes, to: s.prunes, cells: new Map(), docs: new Map(), sources: new Map() }
    if (ids.length === 0) return { deleted: 0, delta }
    let top = 0
    for (const id of ids) if (id > top) top = id
    if (top > s.indexed) throw new Error(`${table} ${top} is not indexed yet (indexed up to ${s.indexed})`)
    const list = JSON.stringify(ids)
    const rows = pruneBatch[table].all(list)
    const cells = delta.cells
    const scratch = { newSources: [] as [number, string | null][], newDocs: [] as [number, number, number][] }
    if (table === 'events') {
      for (const r of rows) {
        const [id, ms, code, severity, category, icon, description, hashtags, entity, assetKey, assetName, device, details] = r as [
          number,
          number,
          string,
          number,
          string,
          number,
          string,
          string | null,
          string,
          string | null,
          string | null,
          string | null,
          string,
        ]
        const kind = kindId('events', [code, severity, category, icon, description, hashtags])
        addRollup(cells, id, kind, ms)
        const source = sourceId(entity, assetKey, assetName, scratch)
        const doc = docId(kind, source, device, details, scratch)
        delta.sources.set(source, (delta.sources.get(source) ?? 0) + 1)
        delta.docs.set(doc, (delta.docs.get(doc) ?? 0) + 1)
        deleteSourceId.run(Math.floor(id / 2 ** SOURCE_BLOCK_SHIFT), source, id)
        deleteKindId.run(Math.floor(id / 2 ** LEVEL_SHIFT[1]), kind, id)
      }
      for (const [id, n] of delta.sources) subSourceN.run(n, id)
      for (const [id, n] of delta.docs) subDocN.run(n, id)
      docIds.clear(rows.map((r) => r[0] as number))
    } else {
      for (const r of rows) {
        const [id, ms, ...values] = r as [number, number, ...unknown[]]
        addRollup(cells, id, kindId('audit_trail', values), ms)
      }
    }
    for (const [level, block, kind, n] of cells.values()) {
      rollupSub[table].run(n, level, block, kind)
      rollupDrop[table].run(level, block, kind)
    }
    const deleted = deleteRecords[table].run(list).changes
    if (deleted !== rows.length) throw new Error(`${table}: ${rows.length} records counted out, ${deleted} deleted`)
    delta.to = s.prunes + 1
    setPruned.run(delta.to, top, table)
    return { deleted, delta }
  }

  /** Brings the summary in memory along with a committed prune (or drops it when it cannot follow). */
  function applyPrune(table: RecordTable, d: PruneDelta) {
    const sum = summaries[table]
    if (!sum) return
    if (sum.pruned !== d.from) {
      delete summaries[table]
      return
    }
    for (const [level, block, kind, n] of d.cells.values()) {
      const cells = sum.blocks[level].get(block)
      const cell = cells?.find((c) => c[0] === kind)
      if (!cells || !cell) continue
      cell[1] -= n
      if (cell[1] <= 0) {
        cells.splice(cells.indexOf(cell), 1)
        if (cells.length === 0) {
          sum.blocks[level].delete(block)
          sum.spans[level].delete(block)
        }
      }
    }
    if (sum.texts) {
      for (const [id, n] of d.docs) sum.docs.n.set(id, sum.docs.n.get(id) - n)
      for (const [id, n] of d.sources) sum.sources.n.set(id, sum.sources.n.get(id) - n)
    }
    sum.pruned = d.to
    // A new identity: what queries kept of the old one (counts among rows, ids) is not reused.
    summaries[table] = { ...sum }
  }

  return {
    kinds,
    prune,
    applyPrune,
    /** How many times this indexer started over. */
    restarts: () => restarts,
    /**
     * The counts in memory, exact up to their `indexed` mark (loaded on first use; loaded
     * again when the mark moved without this process, or the index started over).
     */
    summary(table: RecordTable, texts = false): Summary {
      const s = state.get(table)!
      const indexed = s.stale ? 0 : s.indexed
      let sum = summaries[table]
      // Read again when another process indexed or pruned meanwhile.
      if (!sum || sum.indexed !== indexed || sum.pruned !== s.prunes) {
        // The documents' stretches kept may have been rewritten too (pruned, started over).
        if (sum && table === 'events') docIds.forget()
        sum = summaries[table] = indexed === 0 ? emptySummary(0, s.prunes) : load(table, indexed, s.prunes)
      }
      if (texts && !sum.texts && table === 'events') {
        if (indexed === 0) sum.texts = true
        else loadTexts(sum)
      }
      return sum
    },
    /**
     * Reads the events' documents and sources into the summary a slice at a time (at 5
     * million events, 2.7 million rows: seconds in one go, which no other request should
     * wait for), awaiting `pause` between slices. The caller keeps this process's indexer
     * from running meanwhile; a summary that had to be read again since (another process
     * indexed) is left as it is, and reads its texts when first needed.
     */
    async loadTextsGradually(pause: () => Promise<unknown>, slice = TEXT_SLICE): Promise<void> {
      const sum = this.summary('events')
      if (sum.texts) return
      if (sum.indexed === 0) {
        sum.texts = true
        return
      }
      const scratch = emptySummary(sum.indexed, sum.pruned)
      for (const _ of readTexts(scratch, slice)) {
        await pause()
        if (summaries.events !== sum || sum.texts) return
      }
      // Another process may have indexed meanwhile (this one's indexer waits): the tables
      // must still be at the mark the counts were read at.
      const now = state.get('events')!
      const mark = now.stale ? 0 : now.indexed
      if (summaries.events === sum && !sum.texts && sum.indexed === scratch.indexed && mark === scratch.indexed && now.prunes === sum.pruned) {
        Object.assign(sum, { docs: scratch.docs, sources: scratch.sources, texts: true })
      }
    },
    /** Whether the events' documents and sources are in memory (text filters need them). */
    hasTexts: (): boolean => summaries.events?.texts === true,
    /** The high-water mark: records with ids up to it are counted in the index (0 while it starts over). */
    indexed(table: RecordTable): number {
      const s = state.get(table)!
      return s.stale ? 0 : s.indexed
    },
    step,
    fillDocs,
    /** The lowest id from which every indexed event has its document in event_doc_ids (1: all of them). */
    docsFrom: (): number => docIds.from(),
    /** The documents of indexed events by id (event_doc_ids). */
    docIds,
    /**
     * Indexes everything written so far (tests, scripts), and writes the documents of the
     * events indexed before event_doc_ids existed; answers how many records it indexed.
     */
    catchUp(table: RecordTable, batch = 4096): number {
      let total = 0
      for (let n = step(table, batch); n > 0; n = step(table, batch)) total += n
      if (table === 'events') while (fillDocs(batch) > 0);
      return total
    },
    /** Forgets remembered sources and documents (after another connection rewrote them). */
    forget() {
      sourceCache.clear()
      docCache.clear()
    },
  }
}
export type RecordIndexer = ReturnType<typeof recordIndexer>
