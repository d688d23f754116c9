// The block counts: the indexed matches of a plan's kind and range conditions as segments
// of ids with their exact counts, from the counts in memory, reading rows (or the kinds'
// ids) only where a block straddles an end of a range; the ids a time range can reach; a
// table's whole count.
import { LEVEL_SHIFT, type Summary } from './event-index.js'
import type { RecordTable } from '../../lib/events/ports.js'
import type { Plan, Range } from './event-plans.js'
import type { CountsState, Segment } from './event-counts-state.js'
import { countRows, keep } from './event-counts-rows.js'

// ---- block counts ----
/**
 * The indexed matches of a plan's kind and range conditions, as segments of ids in
 * ascending order with their exact counts: whole blocks from the counts in memory, and
 * the rows read where a block straddles an end of the id or time range. Descends to
 * level `floor` at least. `rough`: a level 0 block the time range cuts is taken whole, its
 * count a bound, and no row is read (where the matches can be, not how many).
 */
export function segments(s: CountsState, p: Plan, sum: Summary, kinds: number[] | null, floor = 0, ids = p.ids, rough = false): Segment[] {
  const lo = Math.max(1, ids.lo)
  const hi = Math.min(ids.hi, sum.indexed)
  if (lo > hi || (kinds && kinds.length === 0)) return []
  const allowed = kinds ? new Set(kinds) : null
  const out: Segment[] = []
  const times = p.times
  const visit = (level: number, fromBlock: number, toBlock: number) => {
    const size = 2 ** LEVEL_SHIFT[level]
    const blocks = sum.blocks[level]
    const spans = sum.spans[level]
    for (let block = fromBlock; block <= toBlock; block++) {
      const cells = blocks.get(block)
      if (!cells) continue
      // A block whose records all fall outside the time range, or all inside it, is
      // told by its span; only a block that straddles an end is tested cell by cell.
      let cut = false
      if (times) {
        const span = spans.get(block)!
        if (span[1] < times.lo || span[0] > times.hi) continue
        cut = span[0] < times.lo || span[1] > times.hi
      }
      let n = 0
      let straddles = false
      const present: number[] = []
      for (let i = 0; i < cells.length; i++) {
        const cell = cells[i]
        const kind = cell[0]
        if (allowed && !allowed.has(kind)) continue
        if (cut) {
          const min = cell[2],
            max = cell[3]
          if (max < times!.lo || min > times!.hi) continue
          if (min < times!.lo || max > times!.hi) straddles = true
        }
        n += cell[1]
        present.push(kind)
      }
      // Ids start at 1: block 0 holds no id 0.
      const bLo = Math.max(1, block * size)
      const bHi = Math.min(block * size + size - 1, sum.indexed)
      const sLo = Math.max(bLo, lo)
      const sHi = Math.min(bHi, hi)
      const partial = sLo !== bLo || sHi !== bHi
      if (n === 0) continue
      if (!partial && !straddles && level <= floor) out.push({ lo: sLo, hi: sHi, n, level })
      else if (level > 0) visit(level - 1, Math.floor(sLo / 2 ** LEVEL_SHIFT[level - 1]), Math.floor(sHi / 2 ** LEVEL_SHIFT[level - 1]))
      else {
        // Where the matches may be (rough): a block the time range cuts may hold some.
        if (rough && straddles) {
          out.push({ lo: sLo, hi: sHi, n, level: -1 })
          continue
        }
        // Rows are read only where their times decide; otherwise the kinds' ids do.
        const fromRows = straddles || p.textSql || p.table !== 'events'
        // A block whose every id is a match (no gaps, every kind counted) holds as many
        // in a stretch as the stretch has ids: a poller's cut costs no read at all.
        const exact = fromRows ? countRows(s, p, sLo, sHi, sum) : n === bHi - bLo + 1 ? sHi - sLo + 1 : countKindIds(s, present, n, bLo, bHi, sLo, sHi)
        if (exact > 0) out.push({ lo: sLo, hi: sHi, n: exact, level: fromRows ? -1 : -2 })
      }
    }
  }
  const top = LEVEL_SHIFT.length - 1
  visit(top, Math.floor(lo / 2 ** LEVEL_SHIFT[top]), Math.floor(hi / 2 ** LEVEL_SHIFT[top]))
  return out
}

/**
 * The indexed events of these kinds in [sLo, sHi], part of the level 0 block [bLo, bHi]
 * that holds `n` of them: counted in event_kind_ids (a few bytes an entry, against a few
 * hundred for a row: a block cut by a poller's id reads tens of pages instead of hundreds),
 * inside the cut or, when that is the larger part, outside it.
 */
function countKindIds(s: CountsState, kinds: number[], n: number, bLo: number, bHi: number, sLo: number, sHi: number): number {
  const kindIdsBetween = s.kindIdsBetween
  const list = JSON.stringify(kinds)
  const blk = Math.floor(sLo / 2 ** LEVEL_SHIFT[1])
  const between = (lo: number, hi: number) => (lo > hi ? 0 : (kindIdsBetween.get(blk, list, lo, hi) as number))
  return 2 * (sHi - sLo + 1) <= bHi - bLo + 1 ? between(sLo, sHi) : n - between(bLo, sLo - 1) - between(sHi + 1, bHi)
}

/** The indexed events of these kinds with ids in [lo, hi], inside level 1 block `blk`, from their ids. */
export const kindIdCount = (s: CountsState, blk: number, kinds: number[], lo: number, hi: number): number => (lo > hi ? 0 : (s.kindIdsBetween.get(blk, JSON.stringify(kinds), lo, hi) as number))

/**
 * The ids that can hold records of the plan's time range: from the first to the last
 * block whose records reach into it (told by the blocks' times, no row read: what reads
 * the range tests the times), and every record above the mark.
 */
export function idsOfTimes(s: CountsState, p: Plan, sum: Summary): Range {
  if (!p.times) return p.ids
  const segs = segments(s, { ...p, kindOk: null, kindSql: null, textSql: null }, sum, null, LEVEL_SHIFT.length - 1, p.ids, true)
  const top = s.topId(p.table)
  const lo = segs.length ? segs[0].lo : sum.indexed + 1
  const hi = top > sum.indexed ? top : segs.length ? segs[segs.length - 1].hi : 0
  return { lo: Math.max(p.ids.lo, lo), hi: Math.min(p.ids.hi, hi) }
}

/** Every record of a table, from the block counts and the rows above the mark. */
export function countAll(s: CountsState, table: RecordTable, sum: Summary): number {
  let n = 0
  for (const cells of sum.blocks[LEVEL_SHIFT.length - 1].values()) for (const c of cells) n += c[1]
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  return n + (s.cached(`SELECT count(*) FROM ${table} NOT INDEXED WHERE id > ?`).pluck().get(sum.indexed) as number)
}

/**
 * The top-level segments of a plan without text conditions, kept while the summary and
 * its mark are the same: a page in the order of a kind field counts every group before
 * it, and a default page its whole range, on every request.
 */
export function keptSegments(s: CountsState, p: Plan, sum: Summary, kinds: number[] | null): Segment[] {
  keep(s, sum)
  const keptSegs = s.keptSegs
  const key = `${p.table}|${sum.indexed}|${p.ids.lo}:${p.ids.hi}|${p.times ? `${p.times.lo}:${p.times.hi}` : ''}|${kinds ? kinds.join(',') : '*'}`
  let segs = keptSegs.get(key)
  if (!segs) {
    segs = segments(s, p, sum, kinds, LEVEL_SHIFT.length - 1)
    keptSegs.set(key, segs)
  }
  return segs
}
