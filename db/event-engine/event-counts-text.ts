// The text counts: the indexed events a text question matches, from the documents' counts
// in memory (one pass over the matching documents or sources), and the counts of recent
// questions kept while the index has not moved, their memory bounded (KEPT_DOCS_MAX).
import { LEVEL_SHIFT, SOURCE_BLOCK_SHIFT, type Summary } from './event-index.js'
import { MAX_ID } from '../../lib/events/ports.js'
import { severityNames } from '../../lib/ports.js'
import type { GlobalCols, Plan } from './event-plans.js'
import { SEEK_MAX } from './event-query-state.js'
import { GLOBAL_SOURCE_COLUMNS } from './source-names.js'
import type { CountsState, TextCount } from './event-counts-state.js'
import { segments } from './event-counts-blocks.js'
import { countsOf } from './event-counts-docs.js'
import { GLOBAL_DOC_COLUMN, matchDocs, matchSources } from './event-counts-terms.js'

/** More sources than this and a seek through the events' asset index is not worth it. */
const SEEK_SOURCES = 20_000
/** More matching documents than this are not listed (a text count keeps its list: 4 bytes each). */
const DOC_LIST_MAX = 2_000_000
/**
 * Text counts kept (a console's few terms over many ranges, a dashboard's tiles, the hosts
 * a team looks up): the range is what varies, the term's count is made again only when
 * evicted. Their memory is bounded by KEPT_DOCS_MAX.
 */
const KEPT_COUNTS = 4096
/**
 * The listed documents and sources of the text counts kept, in all (about 4 to 8 bytes each;
 * a count's block counts weigh in too). A console's working set at 5,000,000 events (31
 * vendors in Details and GlobalSearch, 50 devices, 2,000 hosts, 50 sites) kept 1,229 counts
 * weighing 7.4 million here. At 4 million, 134 counts fitted: the broad ones were evicted in
 * turn and made again (20-30 ms each), and 1.4% of the questions took over 15 ms instead of
 * 0.2% (`npm run bench -- working-set`), for about 30 MB less.
 */
export const KEPT_DOCS_MAX = 8_000_000

/** Whether the text count of this plan's text (and kind) conditions is kept for this summary. */
export function textCountKept(s: CountsState, p: Plan, sum: Summary): boolean {
  return sum === s.keptFor && s.keptCounts.has(JSON.stringify([sum.indexed, JSON.stringify([p.kindSql, p.textSql])]))
}

// Text counts of recent questions, kept while the index has not moved: a dashboard asking
// again (or paging) gets the count without the pass over the documents. Exact: the
// count is of indexed events only, and the key holds the index's mark.
export function keptTextCount(s: CountsState, p: Plan, sum: Summary, kinds: number[] | null): TextCount {
  const { keptCounts, newestOf } = s
  // Counts read again (another process indexed, or the index started over) start afresh.
  if (sum !== s.keptFor) {
    keptCounts.clear()
    newestOf.clear()
    s.keptDocs = 0
    s.keptFor = sum
  }
  const term = JSON.stringify([p.kindSql, p.textSql])
  const key = JSON.stringify([sum.indexed, term])
  let t = keptCounts.get(key)
  if (t) {
    keptCounts.delete(key)
  } else {
    t = textCount(s, p, sum, kinds)
    // The blocks counted for the term before the index moved on hold the same matches
    // (the summary is the same: nothing pruned), but the last, which may have grown.
    const before = keptCounts.get(newestOf.get(term) ?? '')
    if (before?.blocks && before.indexed! < sum.indexed) countsOf(t, sum).set(before.blocks.subarray(0, Math.floor(before.indexed! / 2 ** LEVEL_SHIFT[0])))
    t.indexed = sum.indexed
    newestOf.delete(term)
    newestOf.set(term, key)
    while (newestOf.size > KEPT_COUNTS) newestOf.delete(newestOf.keys().next().value!)
    s.keptDocs += weight(t)
    while (keptCounts.size && (keptCounts.size >= KEPT_COUNTS || s.keptDocs > s.keptDocsMax)) {
      const [oldest, old] = keptCounts.entries().next().value!
      keptCounts.delete(oldest)
      s.keptDocs -= weight(old)
    }
  }
  keptCounts.set(key, t)
  return t
}

// The block counts too, whether made yet or not (4 bytes a level 0 block).
const weight = (t: TextCount) => (t.docs?.length ?? 0) + (t.sources?.length ?? 0) + Math.floor((t.indexed ?? 0) / 2 ** LEVEL_SHIFT[0]) + 1

/**
 * The indexed events matching the text (and kind) conditions, from the documents'
 * counts in memory: one pass over the matching documents' ids, typed arrays only (a
 * broad term matches hundreds of thousands of documents).
 */
function textCount(s: CountsState, p: Plan, sum: Summary, kinds: number[] | null): TextCount {
  const t = p.text!
  const indexer = s.indexer
  const { docSeen, docIn, docInGlobal, sourceSeen, sourceIn, sourceInGlobal } = s.marks
  const { docs, sources: srcs } = sum
  const nOf = docs.n.data,
    kindOf = docs.kind.data,
    sourceOf = docs.source.data
  let kindTop = 0
  for (const k of indexer.kinds('events').keys()) kindTop = Math.max(kindTop, k)
  const mask = (ids: Iterable<number>) => {
    const m = new Uint8Array(kindTop + 1)
    for (const k of ids) if (k <= kindTop) m[k] = 1
    return m
  }
  const kindAllowed = kinds ? mask(kinds) : null
  const hit = new Uint8Array(kindTop + 1)
  // Each condition's matches; several on one dictionary must all hold (counted per id).
  const both = (lists: number[][]): number[] | null => {
    if (!lists.length) return null
    if (lists.length === 1) return lists[0]
    const count = new Map<number, number>()
    for (const l of lists) for (const id of l) count.set(id, (count.get(id) ?? 0) + 1)
    return [...count].filter(([, c]) => c === lists.length).map(([id]) => id)
  }
  const S = both(t.source.map((x) => matchSources(s, x.match, x.columns)))
  const D = both(t.doc.map((x) => matchDocs(s, x.match, x.column)))
  let n = 0
  // Sources with matches, gathered while a seek through them may still pay.
  const matched: number[] = []
  sourceSeen.clear(srcs.size)
  // Gathered whatever the matches' number: a seek reads only its share of them, so a term
  // of many matches (a site and department: some 50,000) still seeks inside a day.
  const noteSource = (source: number) => {
    if (matched.length <= SEEK_SOURCES && sourceSeen.at[source] !== sourceSeen.gen) {
      sourceSeen.at[source] = sourceSeen.gen
      matched.push(source)
    }
  }
  let globalCols: GlobalCols | null = null
  // The documents counted one by one (and the kinds counted whole): which events match.
  const listed: number[] = []
  let whole: Uint8Array | null = null
  const docsOut = () => ({ docs: listed.length <= DOC_LIST_MAX ? Int32Array.from(listed) : null, whole })
  const seekOf = (): TextCount => {
    if (matched.length > SEEK_SOURCES) return { n, keys: null, sources: null, seekRows: Infinity, kinds: hit, globalCols, ...docsOut() }
    let rows = matched.length * (Math.floor(sum.indexed / 2 ** SOURCE_BLOCK_SHIFT) + 1)
    for (const id of matched) rows += srcs.n.get(id)
    // The keys serve a GlobalSearch walk's first test only while the matches are few: gathered
    // when a walk asks (thousands of sources' keys took longer than the rest of the count).
    let keys: (string | null)[] | null | undefined
    const total = n
    return {
      n,
      get keys() {
        if (keys === undefined) keys = t.global && total <= SEEK_MAX ? [...new Set(matched.map((id) => srcs.key[id] ?? null))] : null
        return keys
      },
      sources: matched,
      seekRows: rows,
      kinds: hit,
      globalCols,
      ...docsOut(),
    }
  }
  if (!t.global && !D && !kindAllowed) {
    // Sources alone: their own counts (their documents' kinds are not looked at).
    for (const id of S!) {
      const c = srcs.n.get(id)
      if (c > 0) {
        n += c
        noteSource(id)
      }
    }
    return { ...seekOf(), keys: null, kinds: null, docs: null, whole: null }
  }
  sourceIn.clear(srcs.size)
  if (S) sourceIn.add(S)
  docIn.clear(docs.size)
  if (D) docIn.add(D)
  let global: Uint8Array | null = null
  if (t.global) {
    const g = t.global
    const hits: number[] = []
    for (const [id, k] of indexer.kinds('events')) {
      if ([k.description, k.event_code, k.category, severityNames[k.severity], k.hashtags].some((v) => g.test(v))) hits.push(id)
    }
    global = mask(hits)
    const gSources = matchSources(s, g, GLOBAL_SOURCE_COLUMNS)
    globalCols = { kinds: hits.length > 0, sources: gSources.length > 0 }
    sourceInGlobal.clear(srcs.size).add(gSources)
    docInGlobal.clear(docs.size).add(matchDocs(s, g, GLOBAL_DOC_COLUMN))
  }
  docSeen.clear(docs.size)
  const seen = docSeen.at,
    seenGen = docSeen.gen
  /** Adds a candidate document's events when it meets every condition (`skip`: kinds counted already). */
  const consider = (id: number, skip: Uint8Array | null) => {
    if (seen[id] === seenGen) return
    seen[id] = seenGen
    const c = nOf[id]
    if (!c) return
    const kind = kindOf[id]
    if (kindAllowed && !kindAllowed[kind]) return
    if (skip?.[kind]) return
    const source = sourceOf[id]
    if (S && sourceIn.at[source] !== sourceIn.gen) return
    if (D && docIn.at[id] !== docIn.gen) return
    if (global && !(global[kind] || sourceInGlobal.at[source] === sourceInGlobal.gen || docInGlobal.at[id] === docInGlobal.gen)) return
    n += c
    hit[kind] = 1
    noteSource(source)
    listed.push(id)
  }
  /** Every document of these sources (from the list of each source's documents). */
  const docsOf = (sourceIds: number[], skip: Uint8Array | null) => {
    for (const source of sourceIds) docs.bySource.each(source, (id) => consider(id, skip))
  }
  if (D) for (const id of D) consider(id, null)
  else if (S) docsOf(S, null)
  else {
    // GlobalSearch alone: kinds that match count whole (from the blocks); the documents
    // found through their sources or details add the events of other kinds.
    const wholeKinds: number[] = []
    for (const k of indexer.kinds('events').keys()) if (global![k] && (!kindAllowed || kindAllowed[k])) wholeKinds.push(k)
    for (const k of wholeKinds) hit[k] = 1
    if (wholeKinds.length) {
      whole = mask(wholeKinds)
      n += segments(s, { ...p, ids: { lo: 1, hi: MAX_ID }, times: null }, sum, wholeKinds, LEVEL_SHIFT.length - 1).reduce((a, x) => a + x.n, 0)
    }
    const g = t.global!
    const gDocs = matchDocs(s, g, GLOBAL_DOC_COLUMN)
    const gSources = matchSources(s, g, GLOBAL_SOURCE_COLUMNS)
    // The documents whose details match, in one tight pass (the common, broad case).
    for (let i = 0; i < gDocs.length; i++) {
      const id = gDocs[i]
      const c = nOf[id]
      if (!c) continue
      const kind = kindOf[id]
      if (global![kind] || (kindAllowed && !kindAllowed[kind])) continue
      n += c
      hit[kind] = 1
      noteSource(sourceOf[id])
      listed.push(id)
    }
    // Then those of matching sources not counted already.
    if (gSources.length) {
      docSeen.add(gDocs)
      docsOf(gSources, global)
    }
    if (whole) return { n, keys: null, sources: null, seekRows: Infinity, kinds: hit, globalCols, ...docsOut() }
  }
  return seekOf()
}
