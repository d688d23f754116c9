// The level 0 blocks a time range cuts: their matches counted and listed without reading
// the rows where the time index, the kinds' ids (event_kind_ids), the stretches' time spans
// (event_time_spans) or the events' documents tell them; and the kinds a plan allows.
import { LEVEL_SHIFT, type Summary } from './event-index.js'
import { all, cond, type Cond, type Plan } from './event-plans.js'
import { pred, rangeCond } from './event-query-state.js'
import { FINE, type CountsState } from './event-counts-state.js'

/** Stretches straddling a time range's end, at most, for a cut block to be read by its stretches rather than the time index. */
const STRADDLING_MAX = 4

// ---- kinds ----
/** The ids of the kinds a plan allows (null: any). */
export function kindSet(s: CountsState, p: Plan): number[] | null {
  if (!p.kindOk) return null
  const out: number[] = []
  for (const [id, k] of s.indexer.kinds(p.table) as Map<number, unknown>) if (p.kindOk(k)) out.push(id)
  return out
}

/**
 * Where the matches of an event plan without text conditions in [lo, hi] (indexed, within
 * one level 0 block that the time range cuts) can be in the time index: the window of
 * times of the block's allowed kinds in the time range, and the kinds of the block in
 * the time range, allowed (`inKinds`, `nIn` events) or not. 'none' when the block holds
 * no allowed kind in the time range; null when the time index would read more than a few
 * times the block's ids (a block whose times mix, events stored late with the time they
 * happened): the rows are read then.
 */
function cutWindow(s: CountsState, p: Plan, lo: number, hi: number, sum: Summary): { wLo: number; wHi: number; inKinds: number[]; outKinds: number[]; nIn: number; nOut: number } | 'none' | null {
  const times = p.times
  if (p.table !== 'events' || p.textSql || !times || !s.byTime.events) return null
  const size = 2 ** LEVEL_SHIFT[0]
  const block = Math.floor(lo / size)
  if (Math.floor(hi / size) !== block || hi > sum.indexed) return null
  const cells = sum.blocks[0].get(block)
  if (!cells) return 'none'
  const allowed = p.kindOk ? new Set(kindSet(s, p)) : null
  // The kinds of the block with a record in the time range, allowed or not, and the
  // times where the allowed ones can be.
  const inKinds: number[] = []
  const outKinds: number[] = []
  let nIn = 0
  let nOut = 0
  let wLo = Number.POSITIVE_INFINITY
  let wHi = Number.NEGATIVE_INFINITY
  for (let i = 0; i < cells.length; i++) {
    const [kind, n, min, max] = cells[i]
    if (max < times.lo || min > times.hi) continue
    if (allowed && !allowed.has(kind)) {
      outKinds.push(kind)
      nOut += n
      continue
    }
    inKinds.push(kind)
    nIn += n
    wLo = Math.min(wLo, Math.max(min, times.lo))
    wHi = Math.max(wHi, Math.min(max, times.hi))
  }
  if (!inKinds.length) return 'none'
  if (!timeEntriesWithin(sum, wLo, wHi, 4 * (hi - lo + 1) + 1024)) return null
  return { wLo, wHi, inKinds, outKinds, nIn, nOut }
}

/**
 * The matches of an event plan without text conditions in [lo, hi] (indexed, within one
 * level 0 block that the time range cuts) as a condition over the time index (alias `t`)
 * and the kinds' ids, which read no row: an entry there is a few bytes, a row a few
 * hundred, and a random day's two cut blocks cost 5 ms read row by row. 'none' and null
 * as cutWindow.
 */
export function timeIndexWhere(s: CountsState, p: Plan, lo: number, hi: number, sum: Summary): Cond | 'none' | null {
  const win = cutWindow(s, p, lo, hi, sum)
  if (!win || win === 'none') return win
  const { wLo, wHi, inKinds, outKinds, nIn, nOut } = win
  const w = cond('t.created_ms BETWEEN ? AND ? AND t.id BETWEEN ? AND ?', wLo, wHi, lo, hi)
  if (!outKinds.length) return w
  // The kinds' ids tell the allowed from the others in the window: those of whichever side has fewer.
  const [not, kinds] = nIn <= nOut ? ['', inKinds] : ['NOT ', outKinds]
  return all([
    w,
    cond(
      `t.id ${not}IN (SELECT x.id FROM event_kind_ids x WHERE x.blk = ? AND x.kind IN (SELECT value FROM json_each(?)) AND x.id BETWEEN ? AND ?)`,
      Math.floor(lo / 2 ** LEVEL_SHIFT[1]),
      JSON.stringify(kinds),
      lo,
      hi,
    ),
  ])!
}

/**
 * The stretches of 64 ids (event_time_spans) of [lo, hi] whose events' times may lie in
 * [tLo, tHi], in id order, as [first id, last id, wholly inside]: neighbours wholly inside
 * joined in one run; those straddling an end (or of unknown span) one each. Null when more
 * than STRADDLING_MAX straddle (a block whose times mix: events stored late).
 */
function stretchesIn(sum: Summary, lo: number, hi: number, tLo: number, tHi: number): [number, number, boolean][] | null {
  const fineMin = sum.fine.min,
    fineMax = sum.fine.max
  const out: [number, number, boolean][] = []
  let straddling = 0
  for (let f = Math.floor(lo / FINE); f <= Math.floor(hi / FINE); f++) {
    if (fineMax[f] < tLo || fineMin[f] > tHi) continue
    const a = Math.max(lo, f * FINE),
      b = Math.min(hi, f * FINE + FINE - 1)
    // Unknown spans (NaN) straddle too.
    const inside = fineMin[f] >= tLo && fineMax[f] <= tHi
    const last = out[out.length - 1]
    if (inside && last?.[2] && last[1] === a - 1) last[1] = b
    else out.push([a, b, inside])
    if (!inside && ++straddling > STRADDLING_MAX) return null
  }
  return out
}

/** Ids in ascending order: a typed array's sort (the kinds' runs of a cut block, thousands of ids, took a third of its count with a comparator). */
const ascending = (ids: number[]): number[] => Array.from(Float64Array.from(ids).sort())

/**
 * The ids of the matches of an event plan with kind conditions in [lo, hi] (indexed,
 * within one level 0 block that the time range cuts), ascending, kept as matchIds' are,
 * without the documents: the stretches of 64 ids wholly inside the times give theirs from
 * the kinds' ids (event_kind_ids: a range of entries per allowed kind, where the time
 * index read half a block's entries and joined the kinds' ids to them), and those that
 * straddle an end of the times are read from their rows. Null when more than a few
 * stretches straddle (a block whose times mix) or as cutWindow: the time index serves.
 */
export function stretchKindIds(s: CountsState, p: Plan, lo: number, hi: number, sum: Summary): number[] | 'none' | null {
  if (!p.kindOk || p.table !== 'events') return null
  const { keptIds, kindIdsIn, cached, tables } = s
  const win = cutWindow(s, p, lo, hi, sum)
  if (!win || win === 'none') return win
  if (!win.outKinds.length) return null
  const times = p.times!
  const key = `s\u0001${p.kindSql?.sql}\u0001${JSON.stringify(p.kindSql?.params)}\u0001${lo}:${hi}:${times.lo}:${times.hi}`
  let ids = keptIds.get(key)
  if (ids) return ids
  const stretches = stretchesIn(sum, lo, hi, times.lo, times.hi)
  if (!stretches) return null
  const found: number[] = []
  const kinds = JSON.stringify(win.inKinds)
  const blk = Math.floor(lo / 2 ** LEVEL_SHIFT[1])
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  for (const [a, b, inside] of stretches) if (inside) for (const id of kindIdsIn.all(blk, kinds, a, b)) found.push(id)
  for (const [a, b, inside] of stretches) {
    if (inside) continue
    const w = all([rangeCond(p, a, b), pred(p)])!
    // plan: query-plans "events list" (tests/query-plans.test.ts)
    for (const id of cached(`SELECT e.id FROM ${tables[p.table].from} e NOT INDEXED WHERE ${w.sql}`)
      .pluck()
      .all(...w.params) as number[])
      found.push(id)
  }
  ids = ascending(found)
  keptIds.set(key, ids)
  return ids
}

/**
 * The ids of the matches of an event plan with kind conditions in [lo, hi] (indexed,
 * within one level 0 block that the time range cuts and where kinds allowed and not mix),
 * ascending, kept as matchIds' are: the time index's entries in the window, each one's
 * kind told by its document (event_doc_ids, and the documents' kinds in memory once the
 * texts are read). The kinds' ids of a block spread over a page or two per kind, some
 * sixty pages a block read cold: several ms a cut block, where this reads the window and
 * one stretch of documents. Null when the kinds' ids serve instead (the texts not read
 * yet, documents not all there, every kind of the window allowed) or as cutWindow.
 */
export function kindMatchIds(s: CountsState, p: Plan, lo: number, hi: number, sum: Summary): number[] | 'none' | null {
  if (!p.kindOk || !sum.texts || lo < s.indexer.docsFrom()) return null
  const keptIds = s.keptIds
  const win = cutWindow(s, p, lo, hi, sum)
  if (!win || win === 'none') return win
  if (!win.outKinds.length) return null
  const key = `k\u0001${p.kindSql?.sql}\u0001${JSON.stringify(p.kindSql?.params)}\u0001${lo}:${hi}:${win.wLo}:${win.wHi}`
  let ids = keptIds.get(key)
  if (ids) return ids
  const found = docKindIds(s, sum, win.inKinds, lo, hi, win.wLo, win.wHi)
  if (!found) return null
  ids = found.sort((a, b) => a - b)
  keptIds.set(key, ids)
  return ids
}

/**
 * How many matches kindMatchIds finds, counted on whichever side of the time range's
 * end reads fewer entries of the time index: inside, or outside and taken from the
 * block's count of the allowed kinds (a whole block only). The ids of a cut block are
 * needed only where a page starts; the other end of a day is only counted.
 */
export function kindMatchCount(s: CountsState, p: Plan, lo: number, hi: number, sum: Summary): number | 'none' | null {
  if (!p.kindOk || !sum.texts || lo < s.indexer.docsFrom()) return null
  const { keptIds, keptRowCounts } = s
  const win = cutWindow(s, p, lo, hi, sum)
  if (!win || win === 'none') return win
  if (!win.outKinds.length) return null
  const size = 2 ** LEVEL_SHIFT[0]
  const block = Math.floor(lo / size)
  const span = sum.spans[0].get(block)!
  const times = p.times!
  const whole = lo === Math.max(1, block * size) && hi === Math.min(block * size + size - 1, sum.indexed)
  // The share of the block's times inside the window, as if its records were spread evenly over them.
  const inside = (win.wHi - win.wLo + 1) / Math.max(1, span[1] - span[0] + 1)
  if (!whole || inside <= 0.5 || keptIds.has(`k\u0001${p.kindSql?.sql}\u0001${JSON.stringify(p.kindSql?.params)}\u0001${lo}:${hi}:${win.wLo}:${win.wHi}`)) {
    const ids = kindMatchIds(s, p, lo, hi, sum)
    return ids === null || ids === 'none' ? ids : ids.length
  }
  const key = `o\u0001${p.kindSql?.sql}\u0001${JSON.stringify(p.kindSql?.params)}\u0001${lo}:${hi}:${times.lo}:${times.hi}`
  let n = keptRowCounts.get(key)
  if (n !== undefined) return n
  const allowed = kindSet(s, p)!
  const ok = new Set(allowed)
  let all = 0
  for (const [kind, count] of sum.blocks[0].get(block)!) if (ok.has(kind)) all += count
  const outside = [
    [span[0], Math.min(span[1], times.lo - 1)],
    [Math.max(span[0], times.hi + 1), span[1]],
  ].filter(([a, b]) => a <= b)
  // A block whose times mix (events stored late) may share those times with many others: the inside then.
  if (!outside.every(([a, b]) => timeEntriesWithin(sum, a, b, 2 * size))) {
    const ids = kindMatchIds(s, p, lo, hi, sum)
    return ids === null || ids === 'none' ? ids : ids.length
  }
  let out = 0
  for (const [a, b] of outside) {
    const ids = docKindIds(s, sum, allowed, lo, hi, a, b)
    if (!ids) return null
    out += ids.length
  }
  n = all - out
  keptRowCounts.set(key, n)
  return n
}

/**
 * The indexed events of these kinds in [lo, hi] (one level 0 block, all of it at or above
 * docsFrom) with times in [tLo, tHi], ascending: each one's kind told by its document, its
 * time by the span of its stretch of 64 ids (event_time_spans), and read from the rows
 * only for the stretches that straddle an end of the times (events arrive nearly in time
 * order: one or two a block). Null when an event has no document (not expected among
 * indexed ones): the kinds' ids decide then.
 */
function docKindIds(s: CountsState, sum: Summary, kinds: number[], lo: number, hi: number, tLo: number, tHi: number): number[] | null {
  const stretches = stretchesIn(sum, lo, hi, tLo, tHi)
  if (!stretches) return docKindIdsByTime(s, sum, kinds, lo, hi, tLo, tHi)
  const { indexer, stretchInTimes, docScratch } = s
  let kindTop = 0
  for (const k of kinds) kindTop = Math.max(kindTop, k)
  const allowed = new Uint8Array(kindTop + 1)
  for (const k of kinds) allowed[k] = 1
  const kindOf = sum.docs.kind.data
  // The straddling stretches' events in the times, from their rows (a few dozen each).
  const timed = new Set<number>()
  for (const [a, b, inside] of stretches) if (!inside) for (const id of stretchInTimes.all(a, b, tLo, tHi)) timed.add(id)
  const docOf = docScratch.of(hi - lo + 1)
  docOf.fill(0, 0, hi - lo + 1)
  indexer.docIds.each(lo, hi, (sLo, docs) => {
    const from = Math.max(lo, sLo)
    const to = Math.min(hi, sLo + docs.length - 1)
    if (from <= to) docOf.set(docs.subarray(from - sLo, to - sLo + 1), from - lo)
    return true
  })
  const out: number[] = []
  for (const [a, b, inside] of stretches) {
    for (let id = a; id <= b; id++) {
      if (!inside && !timed.has(id)) continue
      const d = docOf[id - lo]
      // No event here (a gap, or pruned: from docsFrom up every indexed event has its
      // document), or one read from its row without one.
      if (d === 0) {
        if (timed.has(id)) return null
        continue
      }
      const kind = d < kindOf.length ? kindOf[d] : 0
      if (kind <= kindTop && allowed[kind] === 1) out.push(id)
    }
  }
  return out
}

/** docKindIds through the time index's entries in the window (a block whose times mix: many stretches straddle). */
function docKindIdsByTime(s: CountsState, sum: Summary, kinds: number[], lo: number, hi: number, tLo: number, tHi: number): number[] | null {
  const { indexer, cached, byTime } = s
  let kindTop = 0
  for (const k of kinds) kindTop = Math.max(kindTop, k)
  const allowed = new Uint8Array(kindTop + 1)
  for (const k of kinds) allowed[k] = 1
  const docOf = new Int32Array(hi - lo + 1)
  indexer.docIds.each(lo, hi, (sLo, docs) => {
    const from = Math.max(lo, sLo)
    const to = Math.min(hi, sLo + docs.length - 1)
    if (from <= to) docOf.set(docs.subarray(from - sLo, to - sLo + 1), from - lo)
    return true
  })
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  const inWindow = cached(`SELECT t.id FROM events t ${byTime.events} WHERE t.created_ms BETWEEN ? AND ? AND t.id BETWEEN ? AND ?`).pluck().all(tLo, tHi, lo, hi) as number[]
  const kindOf = sum.docs.kind
  const out: number[] = []
  for (let i = 0; i < inWindow.length; i++) {
    const id = inWindow[i]
    const d = docOf[id - lo]
    if (d === 0) return null
    const kind = kindOf.get(d)
    if (kind <= kindTop && allowed[kind] === 1) out.push(id)
  }
  return out
}
/**
 * A page of the indexed events of these kinds in [lo, hi] (all of it at or above
 * docsFrom) in id order, after `skip` of them, told by each event's document (the texts
 * read): a block's kinds' ids spread over a page or two per kind, and a page of a block
 * through them read and sorted every entry of its kinds. Null when the texts are not read.
 */
export function blockKindIds(s: CountsState, sum: Summary, kinds: number[], lo: number, hi: number, dir: 'ASC' | 'DESC', limit: number, skip: number): number[] | null {
  const indexer = s.indexer
  if (!sum.texts || lo < indexer.docsFrom()) return null
  let kindTop = 0
  for (const k of kinds) kindTop = Math.max(kindTop, k)
  const allowed = new Uint8Array(kindTop + 1)
  for (const k of kinds) allowed[k] = 1
  const kindOf = sum.docs.kind
  const out: number[] = []
  if (limit <= 0) return out
  const desc = dir === 'DESC'
  indexer.docIds.each(
    lo,
    hi,
    (sLo, docs) => {
      const from = Math.max(lo, sLo) - sLo
      const to = Math.min(hi, sLo + docs.length - 1) - sLo
      for (let i = desc ? to : from; desc ? i >= from : i <= to; i += desc ? -1 : 1) {
        const d = docs[i]
        if (d === 0) continue
        const kind = kindOf.get(d)
        if (kind > kindTop || allowed[kind] !== 1) continue
        if (skip > 0) {
          skip--
          continue
        }
        out.push(sLo + i)
        if (out.length === limit) return false
      }
      return true
    },
    desc,
  )
  return out
}

/**
 * Whether the time index holds at most about `cap` indexed entries in [wLo, wHi]: a bound
 * from the level 0 cells whose times reach into it (the rows above the mark, few, aside).
 */
function timeEntriesWithin(sum: Summary, wLo: number, wHi: number, cap: number): boolean {
  const ratio = 2 ** (LEVEL_SHIFT[1] - LEVEL_SHIFT[0])
  let n = 0
  for (const [block1, span1] of sum.spans[1]) {
    if (span1[1] < wLo || span1[0] > wHi) continue
    for (let block = block1 * ratio; block < (block1 + 1) * ratio; block++) {
      const span = sum.spans[0].get(block)
      if (!span || span[1] < wLo || span[0] > wHi) continue
      const cells = sum.blocks[0].get(block)!
      for (let i = 0; i < cells.length; i++) {
        const cell = cells[i]
        if (cell[3] < wLo || cell[2] > wHi) continue
        n += cell[1]
        if (n > cap) return false
      }
    }
  }
  return true
}
