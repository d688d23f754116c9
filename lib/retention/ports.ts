// The storage the retention job needs; db/retention.ts, db/event-engine/event-index.ts and db/audit.ts
// implement it on SQLite (made Promise-returning by asyncPort in lib/retention/index.ts).
import type { AuditRecord, UnitOfWork } from '../platform/ports.js'
import type { AuditTrailRow, EventRow, RecordTable } from '../events/ports.js'

export type { RecordTable } from '../events/ports.js'

/**
 * What a prune took out of the query index's stored counts, applied to the index's summary
 * once the prune commits. The records' ids it spans; the rest is the index's own.
 */
export interface PruneDelta {
  from: number
  to: number
}

export interface RetentionStore {
  /** Up to `limit` records created before `beforeMs`, oldest first, after the position `after` ([created_ms, id]) and with ids up to `maxId`. */
  due(table: RecordTable, beforeMs: number, after: readonly [number, number], maxId: number, limit: number): Promise<(EventRow | AuditTrailRow)[]>
  /** The first record id of `feed` an alarm destination has not had yet (null: none pending). */
  firstPending(feed: 'events' | 'audit'): Promise<number | null>
  /** Lets this transaction delete audit records older than `beforeMs` (closed again before it commits). */
  openGate(beforeMs: number): Promise<unknown>
  closeGate(): Promise<unknown>
  // Each deletes up to `limit` rows older than the cutoff and answers how many.
  pruneRiskNotifications(beforeMs: number, limit: number): Promise<number>
  pruneHealthNotifications(beforeMs: number, limit: number): Promise<number>
  /** Read marks of accounts deleted and of tokens revoked or expired (the cutoff is now). */
  pruneReadMarks(now: number, limit: number): Promise<number>
  pruneCommands(beforeMs: number, limit: number): Promise<number>
  pruneDebugLogs(beforeMs: number, limit: number): Promise<number>
  pruneAgentErrors(beforeMs: number, limit: number): Promise<number>
  pruneAgentlessRuns(beforeMs: number, limit: number): Promise<number>
  /** Where each day's records are kept apart (PostgreSQL's day partitions): a whole past day goes at once, once archived. */
  days?: RecordDays
}

/** Records kept by day, a day dropped as a whole. */
export interface RecordDays {
  /** The days kept apart that end before `beforeMs` (whole days past), oldest first; `fromMs` inclusive, `toMs` exclusive. */
  wholeDays(table: RecordTable, beforeMs: number): Promise<{ fromMs: number; toMs: number }[]>
  /** How many records the day starting at `fromMs` holds, and its highest id (null: none). */
  dayHeld(table: RecordTable, fromMs: number): Promise<{ n: number; top: number | null }>
  /**
   * Deletes the day's records at once, unless one has an id above `maxId` or the day no
   * longer holds `expected` records; answers how many went, or null when it kept them.
   */
  dropDay(table: RecordTable, fromMs: number, maxId: number, expected: number): Promise<number | null>
}

/** The query index of events and audit records, which keeps its counts exact as records go. */
export interface RecordIndexStore {
  /** The high-water mark: records up to it are counted in the index. */
  indexed(table: RecordTable): Promise<number>
  /** Deletes the records and takes them out of the stored counts (in the caller's unit of work). */
  prune(table: RecordTable, ids: number[]): Promise<{ deleted: number; delta: PruneDelta }>
}

/** The audit trail's own records of the service (no request, no actor). */
export interface SystemAuditStore {
  insert(r: AuditRecord): Promise<number>
}

/** A unit of work that also runs work once it has committed (in the same turn, before any other caller's statement). */
export interface CommittingUnitOfWork extends UnitOfWork {
  afterCommit(fn: () => void): boolean
}
