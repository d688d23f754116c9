// The storage the event and audit-trail queries need; db/event-engine/event-queries.ts implements it on
// SQLite (made Promise-returning by asyncPort in lib/services.ts).
import type { AuditTrailRow, EventRow, ListAnswer } from '../../db/event-engine/index.js'
import type { Sort } from '../listing.js'
import type { AuditFilter, EventFilter } from './filter.js'

export type { AuditTrailRow, EventRow, ListAnswer } from '../../db/event-engine/index.js'

/** A page too large to build whole: the counts, and the rows as arrays of the fields, a chunk at a time. */
export type PageChunks = ListAnswer<never> & { chunks: AsyncIterable<unknown[]> }

/**
 * The events or the audit records. A streamed page or an export is one call: its chunks are
 * read synchronously inside the implementation (a statement per chunk, no Promise per row),
 * with other work served between chunks.
 */
export interface RecordStore<F, R> {
  /**
   * A page of the list, rows as arrays of the fields (EVENT_FIELDS, AUDIT_FIELDS: the answer
   * is written from them, no object per row). `feed`: the integration feed's page, the
   * oldest `limit` matches after `offset`, in the sort's order. `sortMax`: a list sorted by
   * a free text (every match read and sorted) of more matches reads no row and answers
   * `tooManyToSort`, with the count.
   */
  pageRows(f: F, s: Sort, limit: number, offset: number, feed?: boolean, sortMax?: number): Promise<ListAnswer<unknown[]>>
  /** A large page of the list (or of the feed), rows as arrays of the fields, in chunks. */
  pageChunks(f: F, s: Sort, limit: number, offset: number, feed?: boolean): Promise<PageChunks>
  count(f: F): Promise<number>
  /** Every match in order, up to `cap`, as rows (the PDF export). */
  iterate(f: F, s: Sort, cap: number): Promise<AsyncIterable<R>>
  /** The same as arrays of the fields, in chunks (the CSV export). */
  rawChunks(f: F, s: Sort, cap: number): Promise<AsyncIterable<unknown[]>>
  /** The newest record's id (0: none). */
  lastId(): Promise<number>
  /** Moves whenever a list answer could change: a record added or pruned, a commit by another process. */
  version(): Promise<string>
  /** A page of the feed sorted by its id field, as the ids of its rows, with the counts. */
  feedIds(f: F, s: Sort, limit: number, offset: number): Promise<ListAnswer<number>>
  /** The rows of these ids that exist, as arrays of the fields, in any order. */
  rowsByIds(ids: number[]): Promise<unknown[][]>
}

export interface EventStore extends RecordStore<EventFilter, EventRow> {
  /**
   * Resolves once what the filter needs is in memory: the index's texts, read on the first
   * text query after a start a slice at a time, so that no other request is held up.
   */
  ready(f: EventFilter): Promise<void>
}

export type AuditRecordStore = RecordStore<AuditFilter, AuditTrailRow>

/**
 * The index catch-up the background loop drives (lib/events/indexing.ts). Synchronous: a
 * slice is measured in milliseconds of work done in one turn, and a timer's turn never
 * falls inside a unit of work (those that wait for I/O are refused).
 */
export interface IndexCatchUp {
  /** One slice of about `budgetMs`; answers whether more is waiting. */
  indexSlice(budgetMs?: number): boolean
  /** `fn` is called when indexing becomes wanted (the first list wants it). */
  onIndexWanted(fn: (() => void) | undefined): void
}
