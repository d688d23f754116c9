// The SQL helpers every repository shares: LIKE patterns, ORDER BY for a sort, a cache
// of prepared statements, rows built from raw arrays. Kept in db/ so that db/ imports
// nothing from lib/ (lib/listing.ts re-exports what its callers use).
import type Database from 'better-sqlite3'
import type { DB } from './index.js'

export interface Sort {
  field: string
  direction: 'asc' | 'desc'
}

/** A LIKE pattern for a case-insensitive "contains" (use with ESCAPE '\'). */
export const contains = (text: string) => `%${text.replace(/[\\%_]/g, (c) => '\\' + c)}%`

export const severityNames = ['Emergency', 'Alert', 'Critical', 'Error', 'Warning', 'Notice', 'Informational', 'Debug'] as const

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

/**
 * A row read as an array, as an object of these fields. Rows are read raw: better-sqlite3
 * builds an object row through the engine's API, about 2.5 µs for an event's 13 columns
 * and 6 µs for an agent's 46, most of the cost of reading a page; this costs a tenth of it.
 * The object is one literal of the fields (generated once per column list; the names are
 * our columns, quoted as JSON): adding 38 fields one by one through a computed key cost
 * 1.4 µs a row, the literal a tenth of that.
 */
export function rowOf<F extends readonly string[]>(fields: F): (r: unknown[]) => Record<string, unknown> {
  return new Function('r', `return { ${fields.map((f, i) => `${JSON.stringify(f)}: r[${i}]`).join(', ')} }`) as (r: unknown[]) => Record<string, unknown>
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
 * Characters of JSON text in a chunk of a streamed page (a row more at most). V8 puts a
 * string of more than 128 KB straight into the old generation, where it stays until a full
 * collection: chunks of a thousand agents (1.3 MB each) piled up there, about 100 MB of
 * them during a page of 100,000 agents. Chunks this size die young, within milliseconds.
 */
export const STREAM_CHUNK_CHARS = 64 * 1024

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
