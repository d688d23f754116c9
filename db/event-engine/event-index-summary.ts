// The counts of the event index kept in memory (db/event-engine/event-index.ts): read from their tables
// when the index loop starts (before the server listens; else on first use), brought along with each committed step and prune of this process, read
// again when another process indexed or pruned; the events' documents and sources read
// only when a text filter needs them.
import { BySource, Column, FineSpans, LEVEL_SHIFT, TEXT_SLICE, rollupTable, type Delta, type IndexerState, type PruneDelta, type Summary } from './event-index-structures.js'
import type { RecordTable } from '../../lib/events/ports.js'

/** How long the gradual read of the texts holds the event loop between pauses (ms). */
const TEXT_PAUSE_MS = 10

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

/** The summaries of an indexer (`ix.summaries`): reading them, and keeping them along with its steps and prunes. */
export function indexSummaries(ix: IndexerState) {
  const { db, state, summaries, docIds } = ix
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

  /**
   * The counts in memory, exact up to their `indexed` mark (loaded on first use; loaded
   * again when the mark moved without this process, or the index started over).
   */
  function summary(table: RecordTable, texts = false): Summary {
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
  }
  /**
   * Reads the events' documents and sources into the summary a slice at a time (at 5
   * million events, 2.7 million rows: seconds in one go, which no other request should
   * wait for), awaiting `pause` between slices. The caller keeps this process's indexer
   * from running meanwhile; a summary that had to be read again since (another process
   * indexed) is left as it is, and reads its texts when first needed.
   */
  async function loadTextsGradually(pause: () => Promise<unknown>, slice = TEXT_SLICE / 8, pauseMs = TEXT_PAUSE_MS): Promise<void> {
    const sum = summary('events')
    if (sum.texts) return
    if (sum.indexed === 0) {
      sum.texts = true
      return
    }
    const scratch = emptySummary(sum.indexed, sum.pruned)
    // Small chunks, and a pause once a slice's time is spent: a chunk of TEXT_SLICE rows held
    // the event loop 40-170 ms on a shared core.
    let since = performance.now()
    for (const _ of readTexts(scratch, slice)) {
      if (performance.now() - since < pauseMs) continue
      await pause()
      since = performance.now()
      if (summaries.events !== sum || sum.texts) return
    }
    // Another process may have indexed meanwhile (this one's indexer waits): the tables
    // must still be at the mark the counts were read at.
    const now = state.get('events')!
    const mark = now.stale ? 0 : now.indexed
    if (summaries.events === sum && !sum.texts && sum.indexed === scratch.indexed && mark === scratch.indexed && now.prunes === sum.pruned) {
      Object.assign(sum, { docs: scratch.docs, sources: scratch.sources, texts: true })
    }
  }
  /** Whether the events' documents and sources are in memory (text filters need them). */
  const hasTexts = (): boolean => summaries.events?.texts === true
  /** The high-water mark: records with ids up to it are counted in the index (0 while it starts over). */
  function indexed(table: RecordTable): number {
    const s = state.get(table)!
    return s.stale ? 0 : s.indexed
  }

  return { apply, applyPrune, summary, loadTextsGradually, hasTexts, indexed }
}
