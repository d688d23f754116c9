// The pages of the lists and feeds: in id order from the counted segments (or through the
// kinds' and sources' index entries when the matches are few), in the order of a kind field
// a value at a time, in time order along the time index. Reads where db/event-engine/event-counts.ts
// says the matches are.
//
// The pages share what eventPages is given (the queries' state and counts) explicitly:
// the readers of rows (event-pages-rows.ts), the pages in id order (event-pages-ids.ts),
// those of text plans (event-pages-text.ts); the other orders and the feeds are here.
import { LEVEL_SHIFT } from './event-index.js'
import type { Sort } from '../../lib/ports.js'
import { all, cond, inList, isIdSort, isTimeSort, orderSql, sortsEveryMatch, type Plan, type Range, type SortField } from './event-plans.js'
import type { Counted, EventCounts } from './event-counts.js'
import { SEEK_MAX, pred, rangeCond, type QueryState } from './event-query-state.js'
import type { ListAnswer } from '../../lib/events/ports.js'
import { pageRows, type Raw } from './event-pages-rows.js'
import { idPages } from './event-pages-ids.js'
import { textPages } from './event-pages-text.js'

export type { Raw } from './event-pages-rows.js'
export type { Stretch } from './event-pages-text.js'

export function eventPages(state: QueryState, counts: EventCounts) {
  const { indexer, cached, tables, topId, byTime, startIndexing } = state
  const { count, countAll } = counts
  const rows = pageRows(state)
  const { rowsOf } = rows
  const { kindSeek, kindWhere, idPage } = idPages(state, counts, rows)
  const { textAccess, textWhere, textIdPage } = textPages(state, counts, rows)

  /** A page in the order of a kind field: the field's values in order, each value's records by id. */
  function kindPage(p: Plan, c: Counted, f: SortField, dir: 'ASC' | 'DESC', limit: number, offset: number): Raw[] {
    const column = f.kind!
    const kinds = indexer.kinds(p.table) as unknown as Map<number, Record<string, unknown>>
    const rank = (v: unknown) => (v === null || v === undefined ? null : f.rank!(v))
    // The values of the kinds, and of records above the mark (kinds not indexed yet).
    const values: unknown[] = [...kinds.values()].map((k) => k[column] ?? null)
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    values.push(...(cached(`SELECT DISTINCT ${column} FROM ${tables[p.table].from} NOT INDEXED WHERE id > ?`).pluck().all(c.sum.indexed) as unknown[]))
    // Values equal under the rank (text differing in case only) are one group.
    const groups = new Map<string, { rank: string | number | null; values: Set<unknown> }>()
    for (const v of values) {
      const r = rank(v)
      const key = `${typeof r}:${r}`
      const g = groups.get(key)
      if (g) g.values.add(v)
      else groups.set(key, { rank: r, values: new Set([v]) })
    }
    const ordered = [...groups.values()].sort((a, b) => {
      if (a.rank === null || b.rank === null) return a.rank === b.rank ? 0 : a.rank === null ? 1 : -1
      const cmp = a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : 0
      return dir === 'ASC' ? cmp : -cmp
    })
    const out: Raw[] = []
    let skip = offset
    const idField = tables[p.table].sorts[tables[p.table].idSort]
    for (const g of ordered) {
      if (out.length === limit) break
      const isNull = g.rank === null
      const list = [...g.values].filter((v) => v !== null)
      const gp: Plan = {
        ...p,
        kindOk: (k: Record<string, unknown>) => g.values.has(k[column] ?? null) && (!p.kindOk || p.kindOk(k)),
        kindSql: all([p.kindSql, isNull ? cond(`e.${column} IS NULL`) : inList(`e.${column}`, list)]),
      }
      const gc = count(gp)
      if (skip >= gc.filtered) {
        skip -= gc.filtered
        continue
      }
      out.push(...pageOf(gp, gc, idField, dir, limit - out.length, skip))
      skip = 0
    }
    return out
  }

  /**
   * A deep page in time order without walking the time index over every match before it
   * (a page of the first thousand walked up to 100,000 entries): a moment is chosen from
   * the blocks' times, about as many matches before it (in the sort's direction) as the
   * page passes over; how many there are exactly is counted as a time range is (whole
   * blocks in memory, the blocks it cuts through the time index, the rows above the mark),
   * and the walk starts there, passing over the rest. Null when the page is within the
   * first block's matches, or the moment would pass over more matches than the page does
   * (times that mix across blocks): the walk from the start then.
   */
  function timeSeek(p: Plan, c: Counted, dir: 'ASC' | 'DESC', offset: number): { p: Plan; offset: number } | null {
    const sum = c.sum
    const size = 2 ** LEVEL_SHIFT[0]
    const lo = Math.floor(Math.max(1, p.ids.lo) / size)
    const hi = Math.floor(Math.min(p.ids.hi, sum.indexed) / size)
    if (lo > hi) return null
    const allowed = c.kinds ? new Set(c.kinds) : null
    const times = p.times
    // The blocks in the sort's direction (ids follow time, mostly), until they hold the
    // matches the page passes over; the moment is where the last one whole ends.
    let passed = dir === 'DESC' ? c.tail : 0
    let moment: number | null = null
    for (let i = 0; i <= hi - lo; i++) {
      const block = dir === 'DESC' ? hi - i : lo + i
      const cells = sum.blocks[0].get(block)
      if (!cells) continue
      let n = 0
      for (let j = 0; j < cells.length; j++) {
        const cell = cells[j]
        if ((!allowed || allowed.has(cell[0])) && (!times || (cell[3] >= times.lo && cell[2] <= times.hi))) n += cell[1]
      }
      if (passed + n > offset) break
      passed += n
      const span = sum.spans[0].get(block)!
      moment = dir === 'DESC' ? span[0] : span[1]
    }
    if (moment === null) return null
    const tLo = times?.lo ?? Number.MIN_SAFE_INTEGER
    const tHi = times?.hi ?? Number.MAX_SAFE_INTEGER
    // The matches before the moment in the sort's order, and the plan of those from it on.
    const [before, after]: [Range, Range] =
      dir === 'DESC'
        ? [
            { lo: Math.max(tLo, moment), hi: tHi },
            { lo: tLo, hi: Math.min(tHi, moment - 1) },
          ]
        : [
            { lo: tLo, hi: Math.min(tHi, moment) },
            { lo: Math.max(tLo, moment + 1), hi: tHi },
          ]
    const n = before.lo > before.hi ? 0 : count({ ...p, times: before }).filtered
    if (n > offset) return null
    return { p: { ...p, times: after }, offset: offset - n }
  }

  function pageOf(p: Plan, c: Counted, f: SortField, dir: 'ASC' | 'DESC', limit: number, offset: number): Raw[] {
    if (c.filtered <= offset || limit === 0) return []
    if (isIdSort(f)) {
      if (!p.textSql) return idPage(p, c, dir, limit, offset)
      return textIdPage(p, c, dir, limit, offset)
    }
    if (f.kind) return kindPage(p, c, f, dir, limit, offset)
    const order = orderSql(f, dir)
    if (p.textSql) return rowsOf(p, textWhere(p, c), order, limit, offset)
    if (c.filtered <= SEEK_MAX) {
      // Few matches: find them all through the kinds' cells and sort them, unless walking
      // the time index in order reaches the page sooner (rows in order are cheaper to read
      // than rows sought one by one and sorted).
      const seek = kindSeek(p, c)
      const span = Math.max(1, Math.min(p.ids.hi, topId(p.table)) - p.ids.lo + 1)
      const walk = isTimeSort(f) ? ((offset + limit) * span) / Math.max(1, c.filtered) : Infinity
      if (seek && seek.rows <= 4 * SEEK_MAX && seek.rows * 3 < walk) return rowsOf(p, kindWhere(p, seek.cells, c.sum.indexed), order, limit, offset)
    }
    if (isTimeSort(f) && byTime[p.table] && offset > 2 ** LEVEL_SHIFT[0]) {
      const seek = timeSeek(p, c, dir, offset)
      // plan: query-plans "events list" (tests/query-plans.test.ts)
      if (seek) return rowsOf(seek.p, all([rangeCond(seek.p, p.ids.lo, p.ids.hi, 'id'), pred(p)])!, order, limit, seek.offset, byTime[p.table])
    }
    // A time order walks the time index (no sort); other fields have no index and are sorted.
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    return rowsOf(p, all([rangeCond(p, p.ids.lo, p.ids.hi, isTimeSort(f) ? 'id' : 'none'), pred(p)])!, order, limit, offset, isTimeSort(f) ? byTime[p.table] : 'NOT INDEXED')
  }

  /**
   * A page of the list, rows as arrays of the table's fields. A sort that orders every match
   * (a free text) of more than `sortMax` matches reads no row: the answer says so, counted
   * once.
   */
  function list(p: Plan, s: Sort, limit: number, offset: number, sortMax = Number.POSITIVE_INFINITY): ListAnswer<Raw> {
    startIndexing()
    const c = count(p)
    const f = tables[p.table].sorts[s.field]
    const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
    const total = countAll(p.table, c.sum)
    if (c.filtered > sortMax && sortsEveryMatch(f)) return { total, filtered: c.filtered, rows: [], tooManyToSort: true }
    return { total, filtered: c.filtered, rows: pageOf(p, c, f, dir, limit, offset) }
  }

  /**
   * The integration feed: the oldest `limit` matches (after `offset` of them), then ordered
   * by the sort (newest first by default), rows as arrays of the table's fields.
   */
  function feed(p: Plan, s: Sort, limit: number, offset: number): ListAnswer<Raw> {
    const answer = list(p, { field: tables[p.table].idSort, direction: 'asc' }, limit, offset)
    const f = tables[p.table].sorts[s.field]
    const sign = s.direction === 'asc' ? 1 : -1
    // The page is read oldest first: newest first (the pollers' order) is that reversed, no sort.
    if (isIdSort(f)) {
      if (sign < 0) answer.rows.reverse()
      return answer
    }
    // The id is each row's first field.
    answer.rows = answer.rows
      .map((r) => ({ r, k: f.key(r) }))
      .sort((a, b) => {
        // Nulls last in either direction, as in the lists.
        if (a.k === null || b.k === null) return a.k === b.k ? sign * ((a.r[0] as number) - (b.r[0] as number)) : a.k === null ? 1 : -1
        const cmp = a.k < b.k ? -1 : a.k > b.k ? 1 : 0
        return sign * (cmp || (a.r[0] as number) - (b.r[0] as number))
      })
      .map((x) => x.r)
    return answer
  }

  return { pageOf, kindPage, textAccess, textWhere, list, feed }
}
export type EventPages = ReturnType<typeof eventPages>
