// The sources and documents a text term matches: a scan of the sources' names in memory,
// the trigram indexes narrowing and the texts deciding, remembered per term; and the
// phrase queries a thread of its own may run ahead (db/event-engine/term-thread.ts).
import { any, type Plan, type TextMatch } from './event-plans.js'
import type { SourceColumn } from './source-names.js'
import type { DocColumn } from './term-search.js'
import type { CountsState } from './event-counts-state.js'

/** Trigram results kept per term (ids in all), so that a repeated search only looks at what is new. */
const TERM_CACHE_IDS = 4_000_000
/** The documents' column GlobalSearch searches (the counts and the phrase queries asked ahead must agree). */
export const GLOBAL_DOC_COLUMN: DocColumn = 'details'

// ---- text (events) ----
// Trigram results by term, least recently used first; dictionaries only grow (and their
// texts never change), so an entry stays right and only needs the ids added since.
function remembered(s: CountsState, key: string, last: number, read: (after: number, upTo: number) => number[]): number[] {
  const terms = s.terms
  let entry = terms.get(key)
  if (entry) terms.delete(key)
  else entry = { upTo: 0, ids: [] }
  if (last > entry.upTo) {
    const more = read(entry.upTo, last)
    if (more.length) entry.ids = entry.ids.concat(more)
    entry.upTo = last
    s.termIds += more.length
  }
  terms.set(key, entry)
  while (s.termIds > TERM_CACHE_IDS && terms.size > 1) {
    const [oldest, e] = terms.entries().next().value!
    terms.delete(oldest)
    s.termIds -= e.ids.length
  }
  return entry.ids
}

/** Sources any of whose `columns` contains the term. */
export function matchSources(s: CountsState, m: TextMatch, columns: SourceColumn[]): number[] {
  const { cached, names, lastSource, sourcesFts, sourceTexts } = s
  if (!m.trigram) {
    const w = any(columns.map((c) => m.on(c)))
    return cached(`SELECT id FROM event_sources WHERE ${w.sql}`)
      .pluck()
      .all(...w.params) as number[]
  }
  const scanned = names.scan(m.folded, columns, m.test)
  if (scanned) return scanned
  // The trigram index narrows, the texts decide (the same test as on the rows).
  return remembered(s, `s\u0001${m.phrase(columns)}`, lastSource.get() as number, (after, upTo) => {
    const found = sourcesFts.all(m.phrase(columns), after, upTo)
    if (!found.length) return []
    return sourceTexts
      .all(JSON.stringify(found))
      .filter((r) => columns.some((c) => m.test(r[c as 'entity_id'])))
      .map((r) => r.id)
  })
}
/** Documents whose `column` contains the term. */
export function matchDocs(s: CountsState, m: TextMatch, column: string): number[] {
  if (m.trigram) return remembered(s, `d\u0001${m.phrase([column])}`, s.lastDoc.get() as number, (after, upTo) => s.termDocs.docs(m, column as DocColumn, after, upTo))
  const w = m.on(column)
  const cached = s.cached
  return cached(`SELECT id FROM event_doc_texts WHERE ${w.sql}`)
    .pluck()
    .all(...w.params) as number[]
}

/** A term's query for another connection, and what makes its answer the term's documents. */
export interface AheadQuery {
  key: string
  query: string
  after: number
  upTo: number
  /** The term's documents from the query's answer: itself (a phrase query), or those of the candidates that hold the term (an AND of rare trigrams). */
  decide: (ids: ArrayLike<number>) => number[]
}

/**
 * The queries the plan's document terms would run over more than `minDocs` documents not
 * remembered yet (a term's first search, or many documents added since): for another
 * connection to run (db/event-engine/term-thread.ts), their answers given to
 * `rememberPhrase`. Both ways: a phrase query, or an AND of the term's rarest trigrams,
 * which read 60-110 ms of index entries on the request's own turn for a device's id at
 * 5,000,000 events. The rest is read by the search itself.
 */
export function phraseTerms(s: CountsState, p: Plan, minDocs: number): AheadQuery[] {
  const t = p.text
  if (!t) return []
  const asked: [TextMatch, DocColumn][] = t.doc.map((x) => [x.match, x.column])
  if (t.global) asked.push([t.global, GLOBAL_DOC_COLUMN])
  const { terms, termDocs } = s
  const upTo = s.lastDoc.get() as number
  const out: AheadQuery[] = []
  for (const [m, column] of asked) {
    if (!m.trigram) continue
    const key = `d\u0001${m.phrase([column])}`
    const after = terms.get(key)?.upTo ?? 0
    if (upTo - after <= minDocs || out.some((o) => o.key === key)) continue
    const { query, and } = termDocs.aheadQuery(m, column, upTo)
    out.push({ key, query, after, upTo, decide: and ? (ids) => termDocs.holding(m, column, upTo, Array.from(ids)) : (ids) => Array.from(ids) })
  }
  return out
}
/** A term's documents in (after, upTo] as phraseTerms asked (`read`: from the answer): kept unless the term's remembered ones have moved meanwhile. */
export function rememberPhrase(s: CountsState, key: string, after: number, upTo: number, read: () => number[]): void {
  if ((s.terms.get(key)?.upTo ?? 0) !== after) return
  remembered(s, key, upTo, read)
}
