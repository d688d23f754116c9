// The pages of the lists and feeds: in id order from the counted segments (or through the
// kinds' and sources' index entries when the matches are few), in the order of a kind field
// a value at a time, in time order along the time index. Reads where db/event-counts.ts
// says the matches are.
import { LEVEL_SHIFT, type Cell, type Summary } from './event-index.js'
import type { Sort } from './sql.js'
import { all, cond, inList, isIdSort, isTimeSort, orderSql, sortsEveryMatch, type Cond, type Plan, type Range, type SortField } from './event-plans.js'
import type { Counted, EventCounts, Segment, TextCount } from './event-counts.js'
import { SEEK_MAX, pred, rangeCond, seekFrom, type ListAnswer, type QueryState } from './event-query-state.js'

/**
 * Ids of blocks not counted yet that a page of a text plan may test by their documents
 * before reading otherwise (4 bytes each read, a few ms in all); blocks counted are passed
 * over by their counts, so the term's later pages reach further.
 */
const DOC_WALK_MAX = 1_048_576

/** A level 1 block's cells of the kinds a plan allows, and their events. */
interface SeekBlock {
  block: number
  kinds: number[]
  n: number
  /** Whether the block is whole in the plan's id range (n is then its matches). */
  exact: boolean
  /** Whether the plan's time span cuts a kind's events in the block. */
  timed: boolean
}

/** A row as an array of its table's fields (EVENT_FIELDS, AUDIT_FIELDS): pages are read raw, objects are built only by who wants them. */
export type Raw = unknown[]

/** A stretch of ids and the condition its matches are read with (the stretch's range included). */
export interface Stretch extends Range {
  where: Cond
}

export function eventPages(state: QueryState, counts: EventCounts) {
  const { indexer, cached, tables, topId, byTime, startIndexing } = state
  const { count, countAll, segments, kindIdCount, pageIds, blockKindIds, docMatchIds, walkable, docWalk, countsOf } = counts

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

  // ---- pages ----
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

  /**
   * Where the matches of a text plan are read from, as stretches in ascending id order:
   * its seek through their sources (few matches), or the range walked row by row (many).
   * A walk passes over the blocks that hold no event of a kind with a match (the
   * documents' counts tell which kinds have one): the newest hundred thousand events after
   * a mass disconnect, say, hold none of a vendor's, and testing them one by one cost 50 ms.
   */
  function textAccess(p: Plan, c: Counted, needed: number): Stretch[] {
    const t = c.text
    const top = topId(p.table)
    const { lo } = c.ids
    const hi = Math.min(c.ids.hi, top)
    const span = Math.max(0, hi - lo + 1)
    const walked = t?.kinds ? keptStretches(t, p, c.sum, t.kinds, lo, hi) : [{ lo, hi: c.ids.hi }]
    const walkSpan = walked.reduce((a, r) => a + Math.max(0, Math.min(r.hi, top) - r.lo + 1), 0)
    const walk = c.filtered === 0 ? 0 : Math.min(walkSpan, (needed * walkSpan) / c.filtered)
    const seek = t?.sources ? (t.seekRows * span) / Math.max(1, top) + c.tail : Infinity
    if (seek * 3 < walk) return [{ lo, hi, where: all([rangeCond(p, lo, hi, 'both'), seekFrom(t!.sources!, lo, hi, c.sum.indexed), pred(p)])! }]
    // A GlobalSearch walk tests the asset key first when the matches' keys are known: one
    // lookup instead of eight text conditions on most rows.
    const first = t?.keys && p.text?.global ? keysFirst(t.keys, c.sum.indexed) : null
    const codes = t?.kinds ? codesFirst(t.kinds, c.sum.indexed) : null
    // Indexed stretches test GlobalSearch only on the columns where it can match (one LIKE
    // instead of eight on most rows when only details have the term); the rows above the
    // mark may bring new kinds and sources, so they are tested on every column.
    const narrowed = t?.globalCols && p.text?.narrowed ? all([p.kindSql, p.text.narrowed(t.globalCols)]) : null
    return walked.map((r) => ({ ...r, where: all([rangeCond(p, r.lo, r.hi), codes, first, narrowed && r.hi <= c.sum.indexed ? narrowed : pred(p)])! }))
  }

  /**
   * The stretches of [lo, hi] that can hold events of these kinds in the plan's time span:
   * runs of level 0 blocks whose counts have such a kind, and everything above the mark.
   */
  function keptStretches(t: TextCount, p: Plan, sum: Summary, kinds: Uint8Array, lo: number, hi: number): Range[] {
    const key = `${lo}:${hi}:${p.times?.lo}:${p.times?.hi}`
    t.stretches ??= new Map()
    let out = t.stretches.get(key)
    if (!out) {
      if (t.stretches.size >= 16) t.stretches.clear()
      t.stretches.set(key, (out = kindStretches(p, sum, kinds, lo, hi)))
    }
    return out
  }
  function kindStretches(p: Plan, sum: Summary, kinds: Uint8Array, lo: number, hi: number): Range[] {
    const out: Range[] = []
    const times = p.times
    /** Whether the block has a record of these kinds in the time span. */
    const holds = (cells: Cell[]) => {
      for (let i = 0; i < cells.length; i++) {
        const cell = cells[i]
        if (kinds[cell[0]] === 1 && (!times || (cell[3] >= times.lo && cell[2] <= times.hi))) return true
      }
      return false
    }
    const visit = (level: number, fromBlock: number, toBlock: number) => {
      const size = 2 ** LEVEL_SHIFT[level]
      for (let block = fromBlock; block <= toBlock; block++) {
        const cells = sum.blocks[level].get(block)
        if (!cells) continue
        const span = sum.spans[level].get(block)!
        if (times && (span[1] < times.lo || span[0] > times.hi)) continue
        if (!holds(cells)) continue
        const sLo = Math.max(lo, block * size)
        const sHi = Math.min(hi, sum.indexed, block * size + size - 1)
        if (level > 0) visit(level - 1, Math.floor(sLo / 2 ** LEVEL_SHIFT[level - 1]), Math.floor(sHi / 2 ** LEVEL_SHIFT[level - 1]))
        else if (out.length && out[out.length - 1].hi + 1 === sLo) out[out.length - 1].hi = sHi
        else out.push({ lo: sLo, hi: sHi })
      }
    }
    const top = LEVEL_SHIFT.length - 1
    const last = Math.min(hi, sum.indexed)
    if (lo <= last) visit(top, Math.floor(lo / 2 ** LEVEL_SHIFT[top]), Math.floor(last / 2 ** LEVEL_SHIFT[top]))
    if (hi > sum.indexed) out.push({ lo: Math.max(lo, sum.indexed + 1), hi })
    return out
  }

  /** The matches of a text plan as one condition, over the whole range (orders other than the id's). */
  const textWhere = (p: Plan, c: Counted): Cond => textAccess(p, { ...c, text: c.text && { ...c.text, kinds: null } }, c.filtered)[0].where

  /**
   * A page in id order of a text plan counted from the events' documents: the blocks holding
   * matches in turn (passed over by their counts), each one's matches read by id; then the
   * rows above the mark.
   */
  function docIdPage(p: Plan, c: Counted, dir: 'ASC' | 'DESC', limit: number, offset: number): Raw[] {
    const tail: Segment = { lo: Math.max(p.ids.lo, c.sum.indexed + 1), hi: Math.min(c.ids.hi, topId(p.table)), n: c.tail, level: -1 }
    const segs = [...c.docSegments!, ...(tail.n > 0 ? [tail] : [])]
    if (dir === 'DESC') segs.reverse()
    const out: Raw[] = []
    let skip = offset
    for (const s of segs) {
      if (out.length === limit) break
      if (skip >= s.n) {
        skip -= s.n
        continue
      }
      if (s.level === -3) {
        const ids = s.ids ?? docMatchIds(p, c.text!, c.sum, s.lo, s.hi)
        const wanted = dir === 'DESC' ? ids.slice(Math.max(0, ids.length - skip - (limit - out.length)), ids.length - skip) : ids.slice(skip, skip + limit - out.length)
        out.push(...byIds(p, wanted, dir))
      } else out.push(...rowsOf(p, all([rangeCond(p, s.lo, s.hi), pred(p)])!, `e.id ${dir}`, limit - out.length, skip))
      skip = 0
    }
    return out
  }

  /**
   * A page in id order of a text plan without a time range, its indexed matches told by
   * each event's document (docWalk) and read by id; the rows above the mark read from the
   * rows; blocks whose matches are counted are passed over by their counts. Null when the
   * walk would test more than DOC_WALK_MAX ids of blocks not counted yet (the matches are
   * sparse: a seek or a walk over the rows finds them).
   */
  function walkPage(p: Plan, c: Counted, dir: 'ASC' | 'DESC', limit: number, offset: number): Raw[] | null {
    const t = c.text
    if (!t || p.times || !c.sum.texts || !walkable(t) || c.ids.lo < indexer.docsFrom()) return null
    const hi = Math.min(c.ids.hi, topId(p.table))
    const last = Math.min(hi, c.sum.indexed)
    // Matches spread evenly: a walk tests about this many ids (clustered ones end it early or
    // late; the budget bounds it), of which those of blocks not counted yet are read. Walked
    // up to the whole budget: the other way, a seek through the sources' entries, probed
    // each source in each block (a site's 233 hosts: 4,660 probes, 18 ms) and read every
    // row passed over, where a walk of a million documents by id takes a few ms.
    // Estimated in the walk's order: the blocks counted are passed over by their counts, the
    // others taken to hold the indexed matches at their mean density. (From the share of
    // blocks not counted, a deep page of a sparse term never walked: the rows it read instead
    // count no block, so the share never fell, and each asking read some 6,000 pages of rows.)
    const size = 2 ** LEVEL_SHIFT[0]
    const counts = countsOf(t, c.sum)
    const bFrom = Math.floor(c.ids.lo / size),
      bTo = Math.floor(last / size)
    const indexed = c.filtered - c.tail
    const density = Math.max(1, indexed) / Math.max(1, last - c.ids.lo + 1)
    // The indexed matches the walk must pass: none for an ascending page wholly above the mark.
    let need = dir === 'DESC' ? Math.min(indexed, offset + limit - c.tail) : offset < indexed ? Math.min(indexed, offset + limit) : 0
    let walked = 0
    for (let i = 0; i <= bTo - bFrom && need > 0; i++) {
      const b = dir === 'DESC' ? bTo - i : bFrom + i
      if (counts[b] >= 0) need -= counts[b]
      else {
        walked += size
        need -= density * size
      }
    }
    if (walked > DOC_WALK_MAX) return null
    const tailLo = Math.max(c.ids.lo, c.sum.indexed + 1)
    const tail = (skip: number, want: number): Raw[] => (want > 0 && tailLo <= hi && skip < c.tail ? rowsOf(p, all([rangeCond(p, tailLo, hi), pred(p)])!, `e.id ${dir}`, want, skip) : [])
    if (dir === 'DESC') {
      const top = tail(offset, limit)
      const ids = docWalk(t, c.sum, c.ids.lo, last, true, Math.max(0, offset - c.tail), limit - top.length, DOC_WALK_MAX)
      return ids && [...top, ...byIds(p, ids, dir)]
    }
    const ids = offset < indexed ? docWalk(t, c.sum, c.ids.lo, last, false, offset, limit, DOC_WALK_MAX) : []
    return ids && [...byIds(p, ids, dir), ...tail(Math.max(0, offset - indexed), limit - ids.length)]
  }

  /** A page in id order of a text plan: the stretches in turn, until the page is full. */
  function textIdPage(p: Plan, c: Counted, dir: 'ASC' | 'DESC', limit: number, offset: number): Raw[] {
    if (c.docSegments) return docIdPage(p, c, dir, limit, offset)
    const walked = walkPage(p, c, dir, limit, offset)
    if (walked) return walked
    const stretches = textAccess(p, c, offset + limit)
    if (dir === 'DESC') stretches.reverse()
    const out: Raw[] = []
    let skip = offset
    for (const s of stretches) {
      if (out.length === limit) break
      if (skip > 0 && stretches.length > 1) {
        // How many of the matches to pass over this stretch holds (at most `skip`).
        // plan: query-plans "events list" (tests/query-plans.test.ts)
        const held = cached(`SELECT count(*) FROM (SELECT 1 FROM ${tables[p.table].from} e NOT INDEXED WHERE ${s.where.sql} LIMIT ?)`)
          .pluck()
          .get(...s.where.params, skip) as number
        if (held < skip) {
          skip -= held
          continue
        }
      }
      out.push(...rowsOf(p, s.where, `e.id ${dir}`, limit - out.length, skip))
      skip = 0
    }
    return out
  }

  /**
   * The rows whose event code is one of these kinds', or above the mark (not indexed yet);
   * null when every code is. In blocks where kinds with and without matches mix, one
   * lookup passes over most rows that the text conditions would test one by one.
   */
  function codesFirst(kinds: Uint8Array, indexed: number): Cond | null {
    const hit = new Set<string>()
    const every = new Set<string>()
    for (const [id, k] of indexer.kinds('events')) {
      every.add(k.event_code)
      if (kinds[id] === 1) hit.add(k.event_code)
    }
    return hit.size === every.size ? null : cond('(e.id > ? OR e.event_code IN (SELECT value FROM json_each(?)))', indexed, JSON.stringify([...hit]))
  }

  /** The rows of these asset keys, or above the mark (their sources may not be known yet). */
  function keysFirst(keys: (string | null)[], indexed: number): Cond {
    const named = keys.filter((k): k is string => k !== null)
    return cond(`(e.id > ? OR e.asset_key IN (SELECT value FROM json_each(?))${named.length !== keys.length ? ' OR e.asset_key IS NULL' : ''})`, indexed, JSON.stringify(named))
  }

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
