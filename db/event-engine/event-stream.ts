// Every match in order, a chunk at a time: the exports, the iterations and the pages too
// large to build whole. Reads where db/event-engine/event-counts.ts and db/event-engine/event-pages.ts say the
// matches are.
import { setImmediate as pause } from 'node:timers/promises'
import type { Sort } from '../../lib/ports.js'
import { all, isIdSort, isTimeSort, orderSql, type Cond, type Plan } from './event-plans.js'
import type { EventCounts } from './event-counts.js'
import type { EventPages } from './event-pages.js'
import { pred, rangeCond, type QueryState } from './event-query-state.js'
import type { ListAnswer } from '../../lib/events/ports.js'

const EXPORT_CHUNK = 1000

/** `ids`: reads a planned statement's first column elsewhere (a reader thread); null: on this connection. */
export interface StreamOffload {
  ids: ((sql: string, params: unknown[]) => Promise<number[]>) | null
}

export function eventStream(state: QueryState, counts: EventCounts, pages: EventPages, offload: StreamOffload = { ids: null }) {
  const { cached, tables, topId, byTime, startIndexing } = state
  const { count, countAll, segments } = counts
  const { pageOf, kindPage, textAccess, textWhere } = pages

  /**
   * Every match in order, up to `cap`, a chunk at a time (other requests run between
   * chunks; memory stays flat): an id order walks the blocks that hold matches; other
   * orders read the ordered ids once (8 bytes a record), then the rows by id. `raw`: rows
   * as arrays of the columns (faster to read; the CSV export writes them as they come).
   */
  async function* chunks(p: Plan, s: Sort, cap: number, raw: boolean, offset = 0): AsyncGenerator<unknown[]> {
    if (p.empty || cap <= 0) return
    const f = tables[p.table].sorts[s.field]
    const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
    const { from, columns } = tables[p.table]
    const idOf = raw ? (r: any) => r[0] as number : (r: any) => r.id as number
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const read = (where: Cond, order: string, limit: number): unknown[] =>
      cached(`SELECT ${columns} FROM ${from} e NOT INDEXED WHERE ${where.sql} ORDER BY ${order} LIMIT ?`)
        .raw(raw)
        .all(...where.params, limit)
    let c = count(p)
    if (offset > 0 && isIdSort(f)) {
      // An id order starts at the offset's record: the range narrowed to it, counted again.
      const at = pageOf(p, c, f, dir, 1, offset)[0]?.[0] as number | undefined
      if (at === undefined) return
      p = { ...p, ids: dir === 'ASC' ? { lo: at, hi: p.ids.hi } : { lo: p.ids.lo, hi: at } }
      c = count(p)
      offset = 0
    }
    let left = Math.min(cap, c.filtered - offset)
    if (left <= 0) return
    /** Walks [lo, hi] in id order, a chunk at a time. */
    async function* walk(lo: number, hi: number, where: Cond | null): AsyncGenerator<unknown[]> {
      while (left > 0 && lo <= hi) {
        const rows = read(all([rangeCond(p, lo, hi), where])!, `e.id ${dir}`, Math.min(EXPORT_CHUNK, left))
        if (rows.length) yield rows
        left -= rows.length
        if (rows.length < EXPORT_CHUNK) return
        if (dir === 'DESC') hi = idOf(rows[rows.length - 1]) - 1
        else lo = idOf(rows[rows.length - 1]) + 1
        await pause()
      }
    }
    if (isIdSort(f) && !p.textSql) {
      // Block by block, in order, skipping the blocks without matches.
      const segs = [...segments(p, c.sum, c.kinds, 0), { lo: Math.max(p.ids.lo, c.sum.indexed + 1), hi: p.ids.hi, n: c.tail, level: -1 }]
      if (dir === 'DESC') segs.reverse()
      for (const seg of segs) if (seg.n > 0 && left > 0) yield* walk(seg.lo, seg.hi, pred(p))
      return
    }
    if (isIdSort(f)) {
      const stretches = textAccess(p, c, c.filtered)
      if (dir === 'DESC') stretches.reverse()
      for (const s of stretches) yield* walk(s.lo, s.hi, s.where)
      return
    }
    const ids: number[] = []
    if (f.kind) {
      while (ids.length < left) {
        const rows = kindPage(p, c, f, dir, Math.min(10_000, left - ids.length), offset + ids.length)
        if (!rows.length) break
        for (const r of rows) ids.push(r[0] as number)
        await pause()
      }
    } else {
      const where = p.textSql ? textWhere(p, c) : all([rangeCond(p, p.ids.lo, p.ids.hi, isTimeSort(f) ? 'id' : 'none'), pred(p)])!
      // plan: query-plans "events list" (tests/query-plans.test.ts)
      const access = isTimeSort(f) && !p.textSql ? byTime[p.table] : 'NOT INDEXED'
      const sql = `SELECT e.id FROM ${from} e ${access} WHERE ${where.sql} ORDER BY ${orderSql(f, dir)} LIMIT ? OFFSET ?`
      // SQLite sorts every match before the first id: where a reader thread is given, there.
      if (offload.ids) for (const id of await offload.ids(sql, [...where.params, left, offset])) ids.push(id)
      else
        for (const id of cached(sql)
          .pluck()
          .iterate(...where.params, left, offset))
          ids.push(id as number)
    }
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const byIds = cached(`SELECT ${columns} FROM ${from} e NOT INDEXED WHERE e.id IN (SELECT value FROM json_each(?))`)
    for (let i = 0; i < ids.length; i += EXPORT_CHUNK) {
      if (i > 0) await pause()
      const chunk = ids.slice(i, i + EXPORT_CHUNK)
      const byId = new Map((byIds.raw(raw).all(JSON.stringify(chunk)) as unknown[]).map((r) => [idOf(r), r]))
      yield chunk.map((id) => byId.get(id)).filter((r) => r !== undefined)
    }
  }

  /**
   * A page too large to build whole, as chunks of rows (arrays of the columns), with the
   * counts: the records of the moment it is asked (those written meanwhile are left out,
   * as in the counts). `feed`: the page is the integration feed's (see `feed`), its records
   * then in the sort's order.
   */
  function pageChunks(p: Plan, s: Sort, limit: number, offset: number, feed: boolean): ListAnswer<never> & { chunks: AsyncIterable<unknown[]> } {
    startIndexing()
    const top = topId(p.table)
    p = { ...p, ids: { lo: p.ids.lo, hi: Math.min(p.ids.hi, top) } }
    p.empty ||= p.ids.lo > p.ids.hi
    const c = count(p)
    const answer = { total: countAll(p.table, c.sum), filtered: c.filtered, rows: [] as never[] }
    if (!feed) return { ...answer, chunks: chunks(p, s, limit, true, offset) }
    // The feed's page: the records from the offset's oldest to the one `limit` further, in any order.
    const byId = tables[p.table].sorts[tables[p.table].idSort]
    // Rows are arrays: the id is the first field.
    const first = c.filtered > offset ? (pageOf(p, c, byId, 'ASC', 1, offset)[0]?.[0] as number | undefined) : undefined
    if (first === undefined) return { ...answer, chunks: chunks({ ...p, empty: true }, s, 0, true) }
    const last = pageOf(p, c, byId, 'ASC', 1, offset + limit - 1)[0]?.[0] as number | undefined
    return { ...answer, chunks: chunks({ ...p, ids: { lo: first, hi: last ?? p.ids.hi } }, s, limit, true) }
  }

  async function* iterate<R>(p: Plan, s: Sort, cap: number): AsyncGenerator<R> {
    for await (const rows of chunks(p, s, cap, false)) yield* rows as R[]
  }

  return { chunks, pageChunks, iterate }
}
export type EventStream = ReturnType<typeof eventStream>
