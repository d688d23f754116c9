// The counts of a filtered list on PostgreSQL when the filter has a text condition ("contains",
// GlobalSearch): exact within a time budget, else the planner's estimate, said so. The rows of
// a page are always exact; only `recordsFiltered` may be estimated (recordsFilteredExact:
// false). Used by the event and audit lists and by the agents and peripherals lists.
import { cacheIn, type Cache, type CacheRegistry } from '../../lib/platform/cache.js'
import type { Postgres } from './connection.js'

/** The counts of a list answer; `filteredExact` false: `filtered` is an estimate. */
export type Counts = { total: number; filtered: number; filteredExact?: false }

/** A statement cancelled by statement_timeout (SQLSTATE 57014; on the expensive reads' pool named StatementPastBudget). */
export const cancelled = (err: unknown) => ['57014', 'statement-past-budget'].includes((err as { code?: string }).code ?? '')

/**
 * An estimate's bounds from the page read with it: at least the matches before and on the
 * page; exact when the page is not full and holds a row (or is the first), as the matches
 * then end on it.
 */
export function pageBounded(c: Counts, offset: number, limit: number, read: number): Counts {
  if (c.filteredExact !== false) return c
  if (read < limit && (read > 0 || offset === 0)) return { total: Math.max(c.total, offset + read), filtered: offset + read }
  if (read === 0) return { ...c, filtered: Math.min(c.filtered, offset) }
  return { ...c, filtered: Math.max(c.filtered, offset + read) }
}

/**
 * The value of a counting statement run within `budgetMs`, in a transaction of its own whose
 * SET LOCAL ends with it (the pooled connection keeps its own timeout); null past it, or
 * with no budget (0). Inside a caller's unit of work a cancelled statement would abort its
 * transaction: counted without a budget there.
 */
export async function countWithin(db: Postgres, sql: string, values: unknown[], budgetMs: number): Promise<number | null> {
  if (db.uow.inUnit()) return (await db.value<number>(sql, values)) ?? 0
  if (budgetMs <= 0) return null
  try {
    return await db.uow.run(async () => {
      await db.run(`SET LOCAL statement_timeout = ${Math.ceil(budgetMs)}`)
      return (await db.value<number>(sql, values)) ?? 0
    })
  } catch (err) {
    if (!cancelled(err)) throw err
    return null
  }
}

/**
 * The planner's estimate of the rows `FROM ... WHERE ...` gives (EXPLAIN, no row read: a
 * sample would read a share of the table again, for a budget already spent).
 */
export async function plannedRows(db: Postgres, fromWhere: string, values: unknown[]): Promise<number> {
  const plan = await db.value<{ Plan: { 'Plan Rows': number } }[]>(`EXPLAIN (FORMAT JSON) SELECT 1 FROM ${fromWhere}`, values)
  return Math.max(0, Math.round(plan?.[0]?.Plan['Plan Rows'] ?? 0))
}

/** How long a count refused by its budget is not tried again. */
export const REFUSED_COUNT_MS = 60_000

/**
 * The counts their budget refused lately, by statement and values: the same filter asked again
 * within REFUSED_COUNT_MS (a console paging through a search, another operator asking it)
 * goes straight to the planner's estimate instead of spending the budget again on the
 * database's CPU for a count that was over it a moment ago. Per node, of `name`.
 */
export const refusedCounts = (name: string, caches?: CacheRegistry): Cache<string, true> =>
  cacheIn<string, true>(caches, { name, signal: `time: a refusal is kept ${REFUSED_COUNT_MS / 1000} s`, max: 1024, ttlMs: REFUSED_COUNT_MS })
