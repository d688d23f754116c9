// The indexer of events and audit records (migration 008): brings kinds, block counts,
// sources and documents up to date after the rows are written, a batch at a time, so
// that writing an event stays a single row insert. Queries (db/event-engine/event-queries.ts) read
// these up to the high-water mark and the rows above it.
//
// Its parts take the state they share (IndexerState) explicitly: the structures and block
// sizes (event-index-structures.ts), the dictionaries of kinds, sources and documents
// (event-index-dictionaries.ts), the counts kept in memory (event-index-summary.ts), the
// catch-up (event-index-steps.ts) and the prunes (event-index-prune.ts).
import type { DB } from '../index.js'
import { eventDocIds } from './event-doc-ids.js'
import type { IndexerOptions, IndexerState } from './event-index-structures.js'
import { indexDictionaries } from './event-index-dictionaries.js'
import { indexSummaries } from './event-index-summary.js'
import { indexSteps } from './event-index-steps.js'
import { indexPrunes } from './event-index-prune.js'

export {
  BySource,
  FINE_SHIFT,
  FineSpans,
  LEVEL_SHIFT,
  SOURCE_BLOCK_SHIFT,
  kindColumns,
  kindsTable,
  rollupTable,
  type AuditKind,
  type Cell,
  type EventKind,
  type IndexerOptions,
  type PruneDelta,
  type Summary,
} from './event-index-structures.js'

export { hash53 } from './event-index-dictionaries.js'

export function recordIndexer(db: DB, opts: IndexerOptions = {}) {
  const ix: IndexerState = {
    db,
    opts,
    state: db.prepare<[string], { indexed: number; stale: number; prunes: number }>('SELECT indexed, stale, prunes FROM record_index_state WHERE name = ?'),
    summaries: {},
    docIds: eventDocIds(db, opts.caches),
    restarts: 0,
  }
  const dicts = indexDictionaries(db, opts)
  const sums = indexSummaries(ix)
  const { step, fillDocs, catchUp } = indexSteps(ix, dicts, sums.apply)
  const { prune } = indexPrunes(ix, dicts)

  return {
    kinds: dicts.kinds,
    prune,
    applyPrune: sums.applyPrune,
    /** How many times this indexer started over. */
    restarts: () => ix.restarts,
    summary: sums.summary,
    loadTextsGradually: sums.loadTextsGradually,
    hasTexts: sums.hasTexts,
    indexed: sums.indexed,
    step,
    fillDocs,
    /** The lowest id from which every indexed event has its document in event_doc_ids (1: all of them). */
    docsFrom: (): number => ix.docIds.from(),
    /** The documents of indexed events by id (event_doc_ids). */
    docIds: ix.docIds,
    catchUp,
    forget: dicts.forget,
  }
}
export type RecordIndexer = ReturnType<typeof recordIndexer>
