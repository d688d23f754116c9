// Counts and ids among indexed records read from the rows, kept for the summary they were
// read with (those rows do not change while it stands): a stretch counted by its rows, or
// through the time index and the kinds' ids where a time range cuts a block
// (db/event-engine/event-counts-cut.ts); the ids of a page of such a stretch.
import { LEVEL_SHIFT, type Summary } from './event-index.js'
import { all, type Plan } from './event-plans.js'
import { pred, rangeCond } from './event-query-state.js'
import type { CountsState } from './event-counts-state.js'
import { kindMatchCount, kindMatchIds, stretchKindIds, timeIndexWhere } from './event-counts-cut.js'

/** Matches with ids in [lo, hi], counted from the rows. */
export function countRows(s: CountsState, p: Plan, lo: number, hi: number, sum?: Summary): number {
  if (lo > hi) return 0
  const { tables, byTime } = s
  const w = all([rangeCond(p, lo, hi), pred(p)])!
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  const sql = `SELECT count(*) FROM ${tables[p.table].from} e NOT INDEXED WHERE ${w.sql}`
  if (sum && hi <= sum.indexed && hi - lo < 2 ** LEVEL_SHIFT[0]) {
    keep(s, sum)
    const byKinds = kindMatchCount(s, p, lo, hi, sum)
    if (byKinds !== null) return byKinds === 'none' ? 0 : byKinds
    const byStretches = stretchKindIds(s, p, lo, hi, sum)
    if (byStretches !== null) return byStretches === 'none' ? 0 : byStretches.length
    const byTimes = timeIndexWhere(s, p, lo, hi, sum)
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    if (byTimes) return byTimes === 'none' ? 0 : keptCount(s, `SELECT count(*) FROM events t ${byTime.events} WHERE ${byTimes.sql}`, byTimes.params, hi, sum)
    return matchIds(s, p, lo, hi).length
  }
  return keptCount(s, sql, w.params, hi, sum)
}
/**
 * A count among indexed records, kept: they never change (a change starts the index over,
 * with a new summary), so neither does a count among them. The blocks a time range cuts
 * are counted once, not on every page of the same question. Within a block, the matches'
 * ids are kept too (matchIds). Counts reaching above the mark are not kept.
 */
export function keptCount(s: CountsState, sql: string, params: unknown[], hi: number, sum?: Summary): number {
  const { cached, keptRowCounts } = s
  if (!sum || hi > sum.indexed)
    return cached(sql)
      .pluck()
      .get(...params) as number
  keep(s, sum)
  const key = `${sql}\u0001${JSON.stringify(params)}`
  let n = keptRowCounts.get(key)
  if (n === undefined) {
    n = cached(sql)
      .pluck()
      .get(...params) as number
    keptRowCounts.set(key, n)
  }
  return n
}
/** What is kept is kept for one summary. */
export function keep(s: CountsState, sum: Summary) {
  if (sum !== s.rowCountsFor) {
    s.keptRowCounts.clear()
    s.keptIds.clear()
    s.keptSegs.clear()
    s.rowCountsFor = sum
  }
}

/**
 * The ids of the matches in a stretch of indexed ids no longer than a block, ascending
 * (kept while the summary is countRows'): a page then reads its rows by id instead of
 * walking the block again. A time range that cuts blocks whose times mix (events stored
 * late, with the time they happened) finds a few matches among thousands of rows there.
 */
export function matchIds(s: CountsState, p: Plan, lo: number, hi: number): number[] {
  const { cached, tables, keptIds } = s
  const w = all([rangeCond(p, lo, hi), pred(p)])!
  const key = `${p.table}\u0001${w.sql}\u0001${JSON.stringify(w.params)}`
  let ids = keptIds.get(key)
  if (!ids) {
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    ids = cached(`SELECT e.id FROM ${tables[p.table].from} e NOT INDEXED WHERE ${w.sql} ORDER BY e.id`)
      .pluck()
      .all(...w.params) as number[]
    keptIds.set(key, ids)
  }
  return ids
}

/**
 * The ids of a page of the matches in [lo, hi] (a stretch counted by countRows, which a
 * time range cuts) in id order, after `skip` of them: through the time index when it
 * serves (timeIndexWhere), else from the matches' ids kept.
 */
export function pageIds(s: CountsState, p: Plan, lo: number, hi: number, sum: Summary, dir: 'ASC' | 'DESC', limit: number, skip: number): number[] {
  keep(s, sum)
  const byKinds = kindMatchIds(s, p, lo, hi, sum)
  if (byKinds === 'none') return []
  if (byKinds) return dir === 'DESC' ? byKinds.slice(Math.max(0, byKinds.length - skip - limit), byKinds.length - skip).reverse() : byKinds.slice(skip, skip + limit)
  const byStretches = stretchKindIds(s, p, lo, hi, sum)
  if (byStretches === 'none') return []
  if (byStretches) return dir === 'DESC' ? byStretches.slice(Math.max(0, byStretches.length - skip - limit), byStretches.length - skip).reverse() : byStretches.slice(skip, skip + limit)
  const byTimes = timeIndexWhere(s, p, lo, hi, sum)
  if (byTimes === 'none') return []
  const { cached, byTime } = s
  if (byTimes)
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    return cached(`SELECT t.id FROM events t ${byTime.events} WHERE ${byTimes.sql} ORDER BY t.id ${dir} LIMIT ? OFFSET ?`)
      .pluck()
      .all(...byTimes.params, limit, skip) as number[]
  const ids = matchIds(s, p, lo, hi)
  return dir === 'DESC' ? ids.slice(Math.max(0, ids.length - skip - limit), ids.length - skip).reverse() : ids.slice(skip, skip + limit)
}
