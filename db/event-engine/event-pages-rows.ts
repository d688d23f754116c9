// How the pages of the lists and feeds (db/event-engine/event-pages.ts) read their rows: raw, with the
// access chosen here.
import { cond, type Cond, type Plan } from './event-plans.js'
import type { QueryState } from './event-query-state.js'

/** A row as an array of its table's fields (EVENT_FIELDS, AUDIT_FIELDS): pages are read raw, objects are built only by who wants them. */
export type Raw = unknown[]

/** The readers of rows every kind of page uses. */
export function pageRows(state: QueryState) {
  const { cached, tables } = state

  // Access is chosen here, not left to the planner: with statistics (ANALYZE) it may pick a
  // skip-scan of an index for a range of ids, which reads every entry. NOT INDEXED still
  // lets it use the ids (rowid ranges and lookups); the time order names its index.
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  const rowsOf = (p: Plan, where: Cond, order: string, limit: number, offset: number, from = 'NOT INDEXED'): Raw[] =>
    cached(`SELECT ${p.columns ?? tables[p.table].columns} FROM ${tables[p.table].from} e ${from} WHERE ${where.sql} ORDER BY ${order} LIMIT ? OFFSET ?`)
      .raw(true)
      .all(...where.params, limit, offset) as Raw[]

  /** The rows of these ids, in id order. */
  const byIds = (p: Plan, ids: number[], dir: 'ASC' | 'DESC'): Raw[] =>
    ids.length ? rowsOf(p, cond('e.id IN (SELECT value FROM json_each(?))', JSON.stringify(ids)), `e.id ${dir}`, ids.length, 0) : []

  return { rowsOf, byIds }
}
export type PageRows = ReturnType<typeof pageRows>
