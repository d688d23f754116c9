// The SQL helpers every repository shares: LIKE patterns, ORDER BY for a sort, a cache
// of prepared statements, rows built from raw arrays (the sort they take, and the severity
// names, are lib/ports.ts's; lib/listing.ts re-exports the LIKE pattern its callers use).
import type Database from 'better-sqlite3'
import type { DB } from './index.js'
import type { Sort } from '../lib/ports.js'
import { rowOf } from '../lib/events/ports.js'

/** A LIKE pattern for a case-insensitive "contains" (use with ESCAPE '\'). */
export const contains = (text: string) => `%${text.replace(/[\\%_]/g, (c) => '\\' + c)}%`

/**
 * ORDER BY for a sort, with the id (or several tie-breakers, in order) so that paging is
 * stable. Columns in `nullable` sort their nulls last in both directions (SQLite puts
 * them first when ascending; descending already has them last, so an index still serves
 * that order).
 */
export function orderBy(s: Sort, columns: Record<string, string>, idColumn: string | string[], nullable: readonly string[] = []): string {
  const column = columns[s.field]
  if (!column) throw new Error(`no column for sort field ${s.field}`)
  const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
  const nullsLast = dir === 'ASC' && nullable.includes(s.field) ? `${column.replace(/ COLLATE \w+$/i, '')} IS NULL, ` : ''
  const ties = [idColumn].flat()
  const after = ties.slice(ties.indexOf(column) + 1)
  return [`${nullsLast}${column} ${dir}`, ...after.map((c) => `${c} ${dir}`)].join(', ')
}

/**
 * Prepared statements of the filtered lists, by SQL text. The text depends only on which
 * filters are given, so few exist; the cap bounds memory whatever callers combine.
 */
export function statementCache(db: DB, cap = 256) {
  const statements = new Map<string, Database.Statement>()
  return (sql: string): Database.Statement => {
    let s = statements.get(sql)
    if (s) {
      statements.delete(sql)
    } else {
      s = db.prepare(sql)
      if (statements.size >= cap) statements.delete(statements.keys().next().value!)
    }
    statements.set(sql, s)
    return s
  }
}

const rowBuilders = new WeakMap<Database.Statement, (r: unknown[]) => Record<string, unknown>>()
/** The rows of a statement as objects, read raw and built by rowOf; the statement is left as it was. */
export function objectRows<R>(statement: Database.Statement, ...params: unknown[]): R[] {
  let build = rowBuilders.get(statement)
  if (!build) rowBuilders.set(statement, (build = rowOf(statement.columns().map((c) => c.name))))
  let rows: unknown[][]
  try {
    rows = statement.raw(true).all(...params) as unknown[][]
  } finally {
    statement.raw(false)
  }
  return rows.map(build) as R[]
}

/** How a page's rows are read from its statement (objectRows or firstColumn). */
export type RowReader<R> = (statement: Database.Statement, ...params: unknown[]) => R[]

/**
 * The first column of a statement's rows as plain values (a large page's ids: 8 bytes a row,
 * where a row object of one field is about ten times that, and 100,000 of them outlived the
 * young generation); the statement is left as it was.
 */
export function firstColumn<V>(statement: Database.Statement, ...params: unknown[]): V[] {
  try {
    return statement.pluck(true).all(...params) as V[]
  } finally {
    statement.pluck(false)
  }
}

/** A read's statement as its text and parameters, to be run on another connection (a reader thread's). */
export interface PlannedRead {
  sql: string
  params: unknown[]
}

/**
 * A row reader that reads nothing: it keeps the statement's text and parameters (`read()`),
 * so that a page planned on the server's connection (its counts, the in-memory searches'
 * matches) is read by a reader thread. Its rows are none.
 */
export function plannedRead(): { rows: RowReader<never>; read: () => PlannedRead | null } {
  let planned: PlannedRead | null = null
  return {
    rows: (statement, ...params) => {
      planned = { sql: statement.source, params }
      return []
    },
    read: () => planned,
  }
}

/**
 * One condition of a list filter. `plus` is '+' where the query must not drive from an
 * index for it (SQLite's unary-plus hint), '' where it may.
 */
export interface Condition {
  sql: (plus: string) => string
  params: unknown[]
}

/**
 * Whether a term can be a trigram phrase: it needs 3 characters, and no NUL (which ends
 * an FTS5 query string early).
 */
export const trigramTerm = (term: string) => [...term].length >= 3 && !term.includes('\u0000')

/**
 * How a page is read. `seek`: the most selective condition's index finds the rows, which
 * are then sorted (few matches). `walk`: the sort order's index is walked and each row
 * tested, stopping at the page's end (many matches; no sort). The searches' matches, when
 * there are any, always find the rows in `seek`.
 */
export type Plan = 'seek' | 'walk'

/**
 * Walking costs an index step per row passed over, about (offset + limit) / selectivity;
 * seeking costs a row read and a sort step per match. The counts are exact (the page's
 * recordsFiltered), so the choice is made on facts, not on estimates.
 */
export function choosePlan(filtered: number, total: number, offset: number, limit: number, sortIndexed: boolean): Plan {
  if (!sortIndexed || filtered === 0) return 'seek'
  const needed = Math.min(offset + limit, filtered)
  return needed * (total / filtered) + 3 * needed < 4 * filtered ? 'walk' : 'seek'
}
