// What the event and audit-trail queries share (db/event-engine/event-queries.ts builds it once and hands
// it to the counts, the pages and the streams): the database, the tables' description, the
// statement cache, the newest ids, the time indexes and the index's catch-up; and the
// conditions every one of them reads rows with.
import type { DB } from '../index.js'
import { rowOf, type statementCache } from '../sql.js'
import { SOURCE_BLOCK_SHIFT, type RecordIndexer, type RecordTable } from './event-index.js'
import { AUDIT_COLUMNS, AUDIT_FIELDS, EVENT_COLUMNS, EVENT_FIELDS } from '../event-rows.js'
import { all, auditSorts, cond, eventSorts, type Cond, type Plan } from './event-plans.js'

/** Up to this many matches a page is read by finding them all and sorting them. */
export const SEEK_MAX = 50_000

export interface ListAnswer<R> {
  total: number
  filtered: number
  rows: R[]
  /** The sort orders every match (a free text) and the matches were more than the page's sortMax: no rows read. */
  tooManyToSort?: boolean
  /** False: `filtered` is an estimate (PostgreSQL, a text filter whose count ran past its budget); absent: exact. */
  filteredExact?: boolean
}

/** The two tables the queries read: their columns, how a row is built, their sorts. */
export function recordTables() {
  return {
    events: { from: 'events', columns: EVENT_COLUMNS, row: rowOf(EVENT_FIELDS), sorts: eventSorts, idSort: 'eventID' },
    audit_trail: { from: 'audit_trail', columns: AUDIT_COLUMNS, row: rowOf(AUDIT_FIELDS), sorts: auditSorts, idSort: 'auditTrailID' },
  } as const
}

export interface QueryState {
  db: DB
  indexer: RecordIndexer
  /** Statements by SQL text: one cache for every query (db/sql.ts). */
  cached: ReturnType<typeof statementCache>
  tables: ReturnType<typeof recordTables>
  /** The newest id of a table (0: none). */
  topId: (table: RecordTable) => number
  /** How a table's time order walks its time index (empty without the index). */
  byTime: Record<RecordTable, string>
  /** Wants indexing in the background (db/event-engine/event-catch-up.ts). */
  startIndexing: () => void
}

// ---- reading rows ----
/** The id and time range; `hint` keeps the planner off the id order (`'id'`) or off both (`'both'`). */
export function rangeCond(p: Plan, lo: number, hi: number, hint: 'none' | 'id' | 'both' = 'none'): Cond {
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  const c = [cond(`${hint === 'none' ? '' : '+'}e.id BETWEEN ? AND ?`, lo, hi)]
  if (p.times) c.push(cond(`${hint === 'both' ? '+' : ''}e.created_ms BETWEEN ? AND ?`, p.times.lo, p.times.hi))
  return all(c)!
}
export const pred = (p: Plan) => all([p.kindSql, p.textSql])

/**
 * Where a seek through the events-by-source index reads: the indexed events of these
 * sources in the id range (one probe per block of the range and source), and every event
 * above the mark.
 */
export function seekFrom(sources: number[], lo: number, hi: number, indexed: number): Cond {
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
