// The pages of text plans (db/event-engine/event-pages.ts): where their matches are read from (a seek
// through their sources, or the stretches that can hold them walked row by row), and the
// pages in id order, from the events' documents where they tell the matches.
import { LEVEL_SHIFT, type Cell, type Summary } from './event-index.js'
import { all, cond, type Cond, type Plan, type Range } from './event-plans.js'
import type { Counted, EventCounts, Segment, TextCount } from './event-counts.js'
import { pred, rangeCond, seekFrom, type QueryState } from './event-query-state.js'
import type { PageRows, Raw } from './event-pages-rows.js'

/**
 * Ids of blocks not counted yet that a page of a text plan may test by their documents
 * before reading otherwise (4 bytes each read, a few ms in all); blocks counted are passed
 * over by their counts, so the term's later pages reach further.
 */
const DOC_WALK_MAX = 1_048_576

/** A stretch of ids and the condition its matches are read with (the stretch's range included). */
export interface Stretch extends Range {
  where: Cond
}

/** The text plans' access and pages in id order. */
export function textPages(state: QueryState, counts: EventCounts, rows: PageRows) {
  const { indexer, cached, tables, topId } = state
  const { docMatchIds, walkable, docWalk, countsOf } = counts
  const { rowsOf, byIds } = rows

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

  return { textAccess, textWhere, textIdPage }
}
