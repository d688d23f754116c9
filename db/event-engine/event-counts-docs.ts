// Text over a range from the events' documents (event_doc_ids): a text count's match bits
// (a bit per document), its matches per level 0 block counted once and kept with it, the
// blocks a range cuts walked every time, and a page found by walking the documents.
import { LEVEL_SHIFT, type Summary } from './event-index.js'
import type { Plan } from './event-plans.js'
import { FINE, type CountsState, type Segment, type TextCount } from './event-counts-state.js'

/**
 * The match bits of the text counts walked last (bitsOf), kept: a bit per document (340 KB
 * each at 2.7 million documents), this many bytes in all, and at least 16 of them: a
 * console's few dozen vendors or devices over random days each build theirs once.
 */
const KEPT_BITS_BYTES = 16 * 1024 * 1024

// ---- text over a range, from the events' documents (event_doc_ids) ----
/**
 * Whether the matches of a text count are told by each event's document: it lists the
 * matching documents (and the kinds counted whole), or its matches are every event of
 * its sources (a Source or AssetName term alone).
 */
export const walkable = (t: TextCount): boolean => t.docs !== null || (t.kinds === null && t.sources !== null)

/**
 * The documents of a walkable text count's matches, a bit each: the documents listed, those
 * of the kinds counted whole, or every document of its sources. A walk tests each id's
 * document here: a bit among a few hundred kilobytes (the cache holds them) where a mark
 * per document took a miss to memory per id. Kept for the few counts walked last.
 */
function bitsOf(s: CountsState, t: TextCount, sum: Summary): Uint8Array {
  const keptBits = s.keptBits
  let bits = keptBits.get(t)
  if (bits) {
    // Least recently walked first out.
    keptBits.delete(t)
    keptBits.set(t, bits)
    return bits
  }
  bits = new Uint8Array((sum.docs.size >> 3) + 1)
  const set = (d: number) => {
    bits![d >> 3] |= 1 << (d & 7)
  }
  if (t.docs) {
    for (let i = 0; i < t.docs.length; i++) set(t.docs[i])
    if (t.whole) {
      const kindOf = sum.docs.kind.data,
        whole = t.whole
      for (let d = 1; d < sum.docs.size; d++) if (whole[kindOf[d]] === 1) set(d)
    }
  } else for (const source of t.sources!) sum.docs.bySource.each(source, set)
  while (keptBits.size >= 16 && (keptBits.size + 1) * bits.length > KEPT_BITS_BYTES) keptBits.delete(keptBits.keys().next().value!)
  keptBits.set(t, bits)
  return bits
}

/** The count's block counts (t.blocks), none counted at first. */
export function countsOf(t: TextCount, sum: Summary): Int32Array {
  const blocks = Math.floor(sum.indexed / 2 ** LEVEL_SHIFT[0]) + 1
  if (!t.blocks || t.blocks.length < blocks) {
    const counts = new Int32Array(blocks).fill(-1)
    if (t.blocks) counts.set(t.blocks)
    t.blocks = counts
  }
  return t.blocks
}

/**
 * The indexed matches of a walkable text count in each level 0 block of [from, to] (blocks
 * wholly at or above docsFrom): those not counted yet are walked once, in runs, and kept
 * on the count (t.blocks).
 */
function blockCounts(s: CountsState, t: TextCount, sum: Summary, from: number, to: number): Int32Array {
  const indexer = s.indexer
  const shift = LEVEL_SHIFT[0]
  const size = 2 ** shift
  const counts = countsOf(t, sum)
  for (let b = from; b <= to; b++) {
    if (counts[b] >= 0) continue
    let e = b
    while (e < to && counts[e + 1] < 0) e++
    counts.fill(0, b, e + 1)
    const bits = bitsOf(s, t, sum)
    const lo = Math.max(1, b * size),
      hi = Math.min(sum.indexed, e * size + size - 1)
    indexer.docIds.each(lo, hi, (sLo, docs) => {
      const to = Math.min(hi, sLo + docs.length - 1)
      for (let id = Math.max(lo, sLo); id <= to; id++) {
        const d = docs[id - sLo]
        if ((bits[d >> 3] >> (d & 7)) & 1) counts[id >> shift]++
      }
      return true
    })
    b = e
  }
  return counts
}

/**
 * The indexed matches of a walkable text plan in [lo, hi] (all of it at or above docsFrom
 * and up to the mark), per level 0 block holding any, ascending, with their ids when
 * `collect`. An event matches when its document is one the text count listed, or of a
 * kind it counted whole (or its source is one of the count's, for sources alone); its
 * time is told by its block's span, the cells of its kind there, or the span of its
 * stretch of 64 ids, and read from its row only where all of those straddle an end of
 * the time range.
 */
function docMatches(s: CountsState, p: Plan, t: TextCount, sum: Summary, lo: number, hi: number, collect: boolean): { lo: number; hi: number; n: number; ids: number[] | null }[] {
  const { indexer, inTimes } = s
  const size = 2 ** LEVEL_SHIFT[0]
  const bits = bitsOf(s, t, sum)
  const kindOf = sum.docs.kind.data,
    times = p.times
  const fineMin = sum.fine.min,
    fineMax = sum.fine.max
  let kindTop = 0
  for (const k of indexer.kinds('events').keys()) kindTop = Math.max(kindTop, k)
  const kindState = new Uint8Array(kindTop + 1)
  const out: { lo: number; hi: number; n: number; ids: number[] | null }[] = []
  const byBlock = new Map<number, (typeof out)[number]>()
  const uncertain: number[] = []
  let block = -1
  // 0: no event of the block is in the time range, 1: all of them, 2: as the kind's cell says.
  let standing = 0
  let cur: (typeof out)[number] = { lo: 0, hi: -1, n: 0, ids: null }
  const enter = (b: number) => {
    block = b
    cur = { lo: Math.max(lo, b * size), hi: Math.min(hi, b * size + size - 1), n: 0, ids: collect ? [] : null }
    out.push(cur)
    byBlock.set(b, cur)
    const span = sum.spans[0].get(b)
    if (!span) standing = 0
    else if (!times || (span[0] >= times.lo && span[1] <= times.hi)) standing = 1
    else if (span[1] < times.lo || span[0] > times.hi) standing = 0
    else {
      standing = 2
      kindState.fill(0)
      for (const [kind, , min, max] of sum.blocks[0].get(b) ?? []) {
        if (kind <= kindTop) kindState[kind] = max < times.lo || min > times.hi ? 0 : min >= times.lo && max <= times.hi ? 1 : 2
      }
    }
  }
  indexer.docIds.each(lo, hi, (sLo, docs) => {
    const to = Math.min(hi, sLo + docs.length - 1)
    for (let id = Math.max(lo, sLo); id <= to; id++) {
      const d = docs[id - sLo]
      if (((bits[d >> 3] >> (d & 7)) & 1) === 0) continue
      const b = Math.floor(id / size)
      if (b !== block) enter(b)
      if (standing === 0) continue
      let state = standing === 1 ? 1 : kindState[kindOf[d]]
      if (state === 2) {
        // Unknown spans (NaN, or past the arrays) compare false: the row is read.
        const f = Math.floor(id / FINE)
        if (fineMax[f] < times!.lo || fineMin[f] > times!.hi) state = 0
        else if (fineMin[f] >= times!.lo && fineMax[f] <= times!.hi) state = 1
      }
      if (state === 1) {
        cur.n++
        cur.ids?.push(id)
      } else if (state === 2) uncertain.push(id)
    }
    return true
  })
  if (uncertain.length) {
    for (const id of inTimes.all(JSON.stringify(uncertain), times!.lo, times!.hi)) {
      const seg = byBlock.get(Math.floor(id / size))!
      seg.n++
      seg.ids?.push(id)
    }
    if (collect) for (const seg of out) seg.ids!.sort((a, b) => a - b)
  }
  return out.filter((seg) => seg.n > 0)
}

/**
 * The indexed matches of a walkable text plan in [lo, hi] per level 0 block (kept per
 * question: its pages ask again). A block wholly inside the id and time ranges is taken
 * from the count's block counts (walked and counted the first time the term's questions
 * meet it); only those the ranges cut (a day's two ends, blocks whose times mix) are
 * walked every time.
 */
export function docSegments(s: CountsState, p: Plan, t: TextCount, sum: Summary, lo: number, hi: number): Segment[] {
  const key = `${lo}:${hi}:${p.times?.lo}:${p.times?.hi}`
  t.docSegs ??= new Map()
  let segs = t.docSegs.get(key)
  if (segs) return segs
  if (t.docSegs.size >= 16) t.docSegs.clear()
  segs = []
  const size = 2 ** LEVEL_SHIFT[0]
  const from = s.indexer.docsFrom()
  const times = p.times
  const whole = (b: number) => {
    const span = sum.spans[0].get(b)
    const bLo = Math.max(1, b * size)
    return span !== undefined && bLo >= lo && bLo >= from && b * size + size - 1 <= hi && (!times || (span[0] >= times.lo && span[1] <= times.hi))
  }
  const last = Math.floor(hi / size)
  for (let b = Math.floor(lo / size); b <= last; b++) {
    const span = sum.spans[0].get(b)
    if (!span || (times && (span[1] < times.lo || span[0] > times.hi))) continue
    if (whole(b)) {
      // A run of whole blocks counted (or walked once) together.
      let e = b
      while (e < last && whole(e + 1)) e++
      const counts = blockCounts(s, t, sum, b, e)
      for (let k = b; k <= e; k++) if (counts[k] > 0) segs.push({ lo: Math.max(1, k * size), hi: Math.min(k * size + size - 1, sum.indexed), n: counts[k], level: -3 })
      b = e
      continue
    }
    // A cut block's matches are collected as they are counted: the page, which starts in
    // one of them (a day's newest block), does not walk it again.
    for (const x of docMatches(s, p, t, sum, Math.max(lo, b * size), Math.min(hi, b * size + size - 1), true)) segs.push({ lo: x.lo, hi: x.hi, n: x.n, level: -3, ids: x.ids! })
  }
  t.docSegs.set(key, segs)
  return segs
}

// ---- a page by walking the events' documents (event_doc_ids) ----
/**
 * The indexed matches of a walkable text count in [lo, hi] (all of it at or above
 * docsFrom and up to the mark; no time range), by id from each event's document, newest
 * first when `desc`: passes over the first `skip`, answers the next `want` ids in walk
 * order. A level 0 block whose matches are counted (blockCounts) and all passed over is
 * not walked; a block walked whole is counted on the way. Null when that would walk more
 * than `budget` ids of blocks not counted yet (the caller reads otherwise): a page of a
 * term of many matches costs its share of the ids, not a walk over the rows.
 */
export function docWalk(s: CountsState, t: TextCount, sum: Summary, lo: number, hi: number, desc: boolean, skip: number, want: number, budget: number): number[] | null {
  const indexer = s.indexer
  const out: number[] = []
  if (want <= 0 || lo > hi) return out
  const shift = LEVEL_SHIFT[0]
  const size = 2 ** shift
  const from = indexer.docsFrom()
  const counts = countsOf(t, sum)
  const bits = bitsOf(s, t, sum)
  let left = budget
  const first = Math.floor((desc ? hi : lo) / size),
    last = Math.floor((desc ? lo : hi) / size),
    step = desc ? -1 : 1
  for (let b = first; b !== last + step; b += step) {
    const bLo = Math.max(lo, b * size),
      bHi = Math.min(hi, b * size + size - 1)
    const full = bLo === Math.max(1, b * size) && bLo >= from && bHi === Math.min(b * size + size - 1, sum.indexed)
    if (full && counts[b] >= 0 && counts[b] <= skip) {
      skip -= counts[b]
      continue
    }
    if (bHi - bLo + 1 > left && !(full && counts[b] >= 0)) return null
    if (!(full && counts[b] >= 0)) left -= bHi - bLo + 1
    // A block walked whole is counted as it goes (its ids past the page's end too).
    const counting = full && counts[b] < 0
    let n = 0
    indexer.docIds.each(
      bLo,
      bHi,
      (sLo, docs) => {
        const from = Math.max(bLo, sLo),
          to = Math.min(bHi, sLo + docs.length - 1)
        for (let id = desc ? to : from; desc ? id >= from : id <= to; id += step) {
          const d = docs[id - sLo]
          if (((bits[d >> 3] >> (d & 7)) & 1) === 0) continue
          n++
          if (out.length === want) {
            if (!counting) return false
            continue
          }
          if (skip > 0) skip--
          else out.push(id)
        }
        return true
      },
      desc,
    )
    if (counting) counts[b] = n
    if (out.length === want) break
  }
  return out
}

/** The ids of the indexed matches of a text plan in [lo, hi] (a segment of docSegments), ascending. */
export const docMatchIds = (s: CountsState, p: Plan, t: TextCount, sum: Summary, lo: number, hi: number): number[] => docMatches(s, p, t, sum, lo, hi, true).flatMap((x) => x.ids!)
