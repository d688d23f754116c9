// The pages in id order of plans without a text condition (db/event-engine/event-pages.ts): from the
// counted segments, or through the kinds' index entries when the matches are few.
import { LEVEL_SHIFT } from './event-index.js'
import { all, cond, type Cond, type Plan } from './event-plans.js'
import type { Counted, EventCounts, Segment } from './event-counts.js'
import { SEEK_MAX, pred, rangeCond, type QueryState } from './event-query-state.js'
import type { PageRows, Raw } from './event-pages-rows.js'

/** A level 1 block's cells of the kinds a plan allows, and their events. */
export interface SeekBlock {
  block: number
  kinds: number[]
  n: number
  /** Whether the block is whole in the plan's id range (n is then its matches). */
  exact: boolean
  /** Whether the plan's time span cuts a kind's events in the block. */
  timed: boolean
}

/** The id pages, and the seek through the kinds' cells that the other orders use too. */
export function idPages(state: QueryState, counts: EventCounts, rows: PageRows) {
  const { topId } = state
  const { segments, kindIdCount, pageIds, blockKindIds } = counts
  const { rowsOf, byIds } = rows

  /**
   * The rollup's level 1 blocks that hold the plan's kinds in its id range and time span,
   * as (block, kind) cells, and how many events a seek through them reads (event_kind_ids,
   * migration 012), the rows above the mark included.
   */
  function kindSeek(p: Plan, c: Counted): { cells: [number, number][]; rows: number; blocks: SeekBlock[] } | null {
    if (p.table !== 'events' || !c.kinds) return null
    const allowed = new Set(c.kinds)
    const size = 2 ** LEVEL_SHIFT[1]
    const lo = Math.max(1, p.ids.lo)
    const hi = Math.min(p.ids.hi, c.sum.indexed)
    const cells: [number, number][] = []
    const blocks: SeekBlock[] = []
    let rows = c.tail
    const times = p.times
    const spans = c.sum.spans[1]
    for (let block = Math.floor(lo / size); lo <= hi && block <= Math.floor(hi / size); block++) {
      const blockCells = c.sum.blocks[1].get(block)
      if (!blockCells) continue
      const span = spans.get(block)!
      if (times && (span[1] < times.lo || span[0] > times.hi)) continue
      const b: SeekBlock = { block, kinds: [], n: 0, exact: block * size >= lo && (block + 1) * size - 1 <= hi, timed: false }
      for (let i = 0; i < blockCells.length; i++) {
        const [kind, count, min, max] = blockCells[i]
        if (!allowed.has(kind) || (times && (max < times.lo || min > times.hi))) continue
        cells.push([block, kind])
        rows += count
        b.kinds.push(kind)
        b.n += count
        if (times && (min < times.lo || max > times.hi)) b.timed = true
      }
      if (b.kinds.length) blocks.push(b)
    }
    return { cells, rows, blocks }
  }
  /**
   * A page's ids through the kinds' ids: whole level 1 blocks are passed over by their
   * counts, and only the blocks the page reads are asked for ids (reading the seek's rows
   * up to the offset took 4 ms a page 1,500 matches into a rare code). Null when a time
   * range cuts a kind's events in a block (its count is then not the block's matches).
   */
  function seekIds(p: Plan, c: Counted, blocks: SeekBlock[], dir: 'ASC' | 'DESC', limit: number, offset: number): number[] | null {
    if (blocks.some((b) => b.timed)) return null
    const lo = Math.max(1, p.ids.lo)
    const hi = Math.min(p.ids.hi, c.sum.indexed)
    const size = 2 ** LEVEL_SHIFT[1]
    const out: number[] = []
    let skip = offset
    // The matches above the mark (kinds not indexed yet): first in descending order, last in ascending.
    const tail = () => {
      if (c.tail === 0 || out.length === limit) return
      if (skip >= c.tail) {
        skip -= c.tail
        return
      }
      const rows = rowsOf({ ...p, columns: 'e.id' }, all([rangeCond(p, Math.max(p.ids.lo, c.sum.indexed + 1), p.ids.hi), pred(p)])!, `e.id ${dir}`, limit - out.length, skip)
      for (const r of rows) out.push(r[0] as number)
      skip = 0
    }
    if (dir === 'DESC') tail()
    for (const b of dir === 'DESC' ? [...blocks].reverse() : blocks) {
      if (out.length === limit) break
      const a = Math.max(lo, b.block * size)
      const z = Math.min(hi, (b.block + 1) * size - 1)
      // A block cut by the id range (a feed's first): its matches counted in the kinds' ids.
      const n = b.exact ? b.n : kindIdCount(b.block, b.kinds, a, z)
      if (skip >= n) {
        skip -= n
        continue
      }
      out.push(...(kindIdsOfBlock[dir].all(b.block, JSON.stringify(b.kinds), a, z, limit - out.length, skip) as number[]))
      skip = 0
    }
    if (dir === 'ASC') tail()
    return out
  }
  /** The matches through the kinds' cells (indexed events), and the rows above the mark. */
  const kindWhere = (p: Plan, cells: [number, number][], indexed: number): Cond => {
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    const seek: Cond = {
      sql: `e.id IN (SELECT x.id FROM json_each(?) j CROSS JOIN event_kind_ids x
        WHERE x.blk = j.value ->> 0 AND x.kind = j.value ->> 1 AND x.id BETWEEN ? AND ?
        UNION ALL SELECT id FROM events NOT INDEXED WHERE id > ?)`,
      params: [JSON.stringify(cells), p.ids.lo, Math.min(p.ids.hi, indexed), indexed],
    }
    return all([rangeCond(p, p.ids.lo, p.ids.hi, 'both'), seek, pred(p)])!
  }

  /** A page in id order, from the counted segments (and the rows above the mark). */
  function idPage(p: Plan, c: Counted, dir: 'ASC' | 'DESC', limit: number, offset: number): Raw[] {
    const tailSeg: Segment = { lo: Math.max(p.ids.lo, c.sum.indexed + 1), hi: Math.min(p.ids.hi, topId(p.table)), n: c.tail, level: -1 }
    const segs = [...(c.segments ?? []), ...(tailSeg.n > 0 ? [tailSeg] : [])]
    // Sparse matches (a rare kind): the kinds' cells find them with fewer rows read than
    // walking the blocks that hold them would (about as many rows as the matches' share of the range).
    const span = segs.length ? segs[segs.length - 1].hi - segs[0].lo + 1 : 0
    const walkRows = Math.min(span, ((offset + limit) / Math.max(1, c.filtered)) * span)
    // Events are walked by the blocks' counts and read by the kinds' ids within a block
    // (blockIds), whatever the offset: the seek is worth it only when a page's matches
    // spread over many blocks.
    const blocksRead = (limit * span) / Math.max(1, c.filtered) / 2 ** LEVEL_SHIFT[0]
    if (c.kinds && walkRows > 2 ** LEVEL_SHIFT[0] && (p.table !== 'events' || blocksRead > 16)) {
      const seek = kindSeek(p, c)
      if (seek && seek.rows <= SEEK_MAX && seek.rows * 4 < walkRows) {
        const ids = seekIds(p, c, seek.blocks, dir, limit, offset)
        if (ids) return byIds(p, ids, dir)
        return rowsOf(p, kindWhere(p, seek.cells, c.sum.indexed), `e.id ${dir}`, limit, offset)
      }
    }
    if (dir === 'DESC') segs.reverse()
    const out: Raw[] = []
    let skip = offset
    const where = pred(p)
    for (const s of segs) {
      if (out.length === limit) break
      if (skip >= s.n) {
        skip -= s.n
        continue
      }
      // Rows are read from the finest blocks that hold matches, not from the whole stretch.
      const fine = s.level > 0 ? segments(p, c.sum, c.kinds, 0, { lo: s.lo, hi: s.hi }) : [s]
      if (dir === 'DESC') fine.reverse()
      for (const f of fine) {
        if (out.length === limit) break
        if (skip >= f.n) {
          skip -= f.n
          continue
        }
        if (f.level === -1 && f.hi <= c.sum.indexed) {
          // A block cut by the range: its matches' ids from the time index (or as kept when it was counted).
          const wanted = pageIds(p, f.lo, f.hi, c.sum, dir, limit - out.length, skip)
          out.push(...byIds(p, wanted, dir))
        } else if (f.hi <= c.sum.indexed && f.n === f.hi - f.lo + 1) {
          // Every id of the stretch is a match (whole kinds, no gap): the page is a range of ids.
          const [a, b] = dir === 'DESC' ? [f.lo, f.hi - skip] : [f.lo + skip, f.hi]
          out.push(...rowsOf(p, cond('e.id BETWEEN ? AND ?', a, b), `e.id ${dir}`, limit - out.length, 0))
        } else if (p.table === 'events' && f.hi <= c.sum.indexed && (skip > 0 || 2 * f.n < f.hi - f.lo + 1)) {
          // Passing over matches, or few of them: their ids are found in the kinds' ids (a few
          // bytes an entry), then their rows by id, instead of stepping over the rows.
          const wanted = blockIds(p, c, f, dir, limit - out.length, skip)
          out.push(...byIds(p, wanted, dir))
        } else {
          out.push(...rowsOf(p, all([rangeCond(p, f.lo, f.hi), where])!, `e.id ${dir}`, limit - out.length, skip))
        }
        skip = 0
      }
    }
    return out
  }

  /**
   * The ids of a page of the matches in a stretch of one level 0 block counted whole (no
   * text condition, no time range cutting the block): from event_kind_ids, of the kinds the
   * plan allows that the block holds.
   */
  function blockIds(p: Plan, c: Counted, f: Segment, dir: 'ASC' | 'DESC', limit: number, skip: number): number[] {
    const cells = c.sum.blocks[0].get(Math.floor(f.lo / 2 ** LEVEL_SHIFT[0])) ?? []
    const allowed = c.kinds ? new Set(c.kinds) : null
    const times = p.times
    // The block is not cut by the time range: a kind's records there are all inside it or all outside.
    const kinds = cells.filter((cell) => (!allowed || allowed.has(cell[0])) && (!times || (cell[3] >= times.lo && cell[2] <= times.hi))).map((cell) => cell[0])
    // Told by the events' documents once the texts are read, else from the kinds' ids.
    const byDocs = blockKindIds(c.sum, kinds, f.lo, f.hi, dir, limit, skip)
    if (byDocs) return byDocs
    return kindIdsOfBlock[dir].all(Math.floor(f.lo / 2 ** LEVEL_SHIFT[1]), JSON.stringify(kinds), f.lo, f.hi, limit, skip) as number[]
  }
  const kindIdsOfBlock = {
    ASC: state.db.prepare('SELECT id FROM event_kind_ids WHERE blk = ? AND kind IN (SELECT value FROM json_each(?)) AND id BETWEEN ? AND ? ORDER BY id ASC LIMIT ? OFFSET ?').pluck(),
    DESC: state.db.prepare('SELECT id FROM event_kind_ids WHERE blk = ? AND kind IN (SELECT value FROM json_each(?)) AND id BETWEEN ? AND ? ORDER BY id DESC LIMIT ? OFFSET ?').pluck(),
  }

  return { kindSeek, kindWhere, idPage }
}
