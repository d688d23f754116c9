// A "contains" term's documents (event_doc_texts through the trigram index event_docs_fts),
// found without the index's phrase query where that is cheaper.
//
// The phrase query reads the position lists of every trigram of the term: 60-250 ms at 2.7
// million documents when a trigram is common ("usb", "pid", "log" are in most of them),
// however few documents match. Here the term's rarest trigrams alone are asked for (an AND
// of separate terms: a few thousand entries read instead of millions), and each document
// they leave is decided by the term's own test on its text. Which trigrams are rare is
// estimated from a sample of the documents (a few thousand, read once).
//
// Reading a document's text is a row read (10-20 µs on a busy core), too much for the
// thousands of documents of a popular device. So the peripheral ids' "device part" (the
// text before the last backslash, "USB\VID_046D&PID_C52B") is kept per document in memory,
// as a number into a dictionary of such parts (2 bytes a document: 5.4 MB at 2.7 million
// documents, a few thousand distinct parts): a document whose part holds the term
// matches without its row being read. Only the documents whose part does not hold it are
// read. The parts are read a slice at a time in the background (`prepare`); documents
// beyond them are read as above.
//
// A term whose rarest trigram is still common (a vendor's name: every trigram in hundreds
// of thousands of documents) has as many candidates as the phrase query reads entries: it
// runs the phrase query, as before.
import type { DB } from '../index.js'
import { hasNonAscii, type TextMatch } from './event-plans.js'

export type DocColumn = 'details' | 'peripheral_asset_id'

/** Documents read for the rarity estimate: this many stretches of STRETCH ids, evenly spread. */
const SAMPLE_STRETCHES = 16
const STRETCH = 256
/** The sample is read again once the documents are this many times as many as when it was read. */
const RESAMPLE_GROWTH = 2
// What the ways cost, measured at 2.7 million documents on a busy core (µs): a trigram of
// the phrase query (its seeks through segments), and a step of it (each trigram moved to
// the next document of the rarest); a trigram of an AND, and each of its entries; a
// candidate's row read. An AND's entries are cheap beside its candidates: the rarest one
// to four trigrams of a host's name took 1.3-4.1 ms for 18,000-110,000 entries, while each
// candidate left costs a row read.
const PHRASE_TERM_US = 300
const PHRASE_STEP_US = 0.4
const AND_TERM_US = 200
const AND_ENTRY_US = 0.03
const READ_US = 13
/** Trigrams in the AND at most. */
const AND_MAX = 4
/** Candidates' texts read per statement. */
const READ_CHUNK = 2048
/** Device parts above this many distinct ones are not kept (their documents are read when they are candidates). */
const PARTS_MAX = 65_535
/** Longest device part kept. */
const PART_LENGTH = 96
/** Documents added after the parts were read that a search reads the parts of itself. */
const PART_CATCH_UP = 4096
/** Documents whose device parts one `prepare` call reads at most. */
const PART_SLICE = 2048

/** The code-point trigrams of a text, case folded (as the index folds them, near enough for an estimate). */
function trigramsOf(text: string): string[] {
  const lower = text.toLowerCase()
  const cps = hasNonAscii(lower) ? [...lower] : null
  const out: string[] = []
  if (cps) for (let i = 0; i + 2 < cps.length; i++) out.push(cps[i] + cps[i + 1] + cps[i + 2])
  else for (let i = 0; i + 2 < lower.length; i++) out.push(lower.slice(i, i + 3))
  return out
}

/** The device part of a peripheral id: the text before its last backslash ('' when none, or too long). */
export function devicePart(id: string | null): string {
  if (id === null) return ''
  const cut = id.lastIndexOf('\\')
  return cut > 0 && cut <= PART_LENGTH ? id.slice(0, cut) : ''
}

export function termSearch(db: DB) {
  const lastDoc = db.prepare('SELECT coalesce(max(id), 0) FROM event_doc_texts').pluck()
  const stretch = db.prepare<[number, number]>('SELECT details, peripheral_asset_id FROM event_doc_texts WHERE id > ? ORDER BY id LIMIT ?').raw()
  const fts = db.prepare<[string, number, number], number>('SELECT rowid FROM event_docs_fts WHERE event_docs_fts MATCH ? AND rowid > ? AND rowid <= ? ORDER BY rowid').pluck()
  const texts = {
    details: db.prepare<[string]>('SELECT id, details FROM event_doc_texts WHERE id IN (SELECT value FROM json_each(?))').raw(),
    peripheral_asset_id: db.prepare<[string]>('SELECT id, peripheral_asset_id FROM event_doc_texts WHERE id IN (SELECT value FROM json_each(?))').raw(),
  }
  const partsFrom = db.prepare<[number, number]>('SELECT id, peripheral_asset_id FROM event_doc_texts WHERE id > ? ORDER BY id LIMIT ?').raw()

  // ---- rarity: which sample documents hold each trigram, per column ----
  // The sample's documents by trigram (their numbers in the sample, ascending): a trigram's
  // documents estimate its entries in the index, and the documents holding all of a few
  // trigrams estimate how many candidates their AND leaves.
  let sample: { at: number; scale: number; holders: Record<DocColumn, Map<string, Uint16Array>> } | null = null
  // Read a stretch at a time (`prepare`): a stretch's rows are scattered through the file.
  let building: { last: number; step: number; after: number; read: number; holders: Record<DocColumn, Map<string, number[]>> } | null = null
  const note = (map: Map<string, number[]>, text: string, doc: number) => {
    for (const g of trigramsOf(text)) {
      const list = map.get(g)
      if (!list) map.set(g, [doc])
      else if (list[list.length - 1] !== doc) list.push(doc)
    }
  }
  /** Reads a stretch of the sample (again, once the documents have grown); answers whether it did. */
  function readSample(): boolean {
    if (!building) {
      const last = lastDoc.get() as number
      if (sample && last <= sample.at * RESAMPLE_GROWTH) return false
      building = { last, step: Math.max(STRETCH, Math.floor(last / SAMPLE_STRETCHES)), after: 0, read: 0, holders: { details: new Map(), peripheral_asset_id: new Map() } }
    }
    const b = building
    if (b.after < b.last) {
      for (const [details, device] of stretch.all(b.after, STRETCH) as [string, string | null][]) {
        note(b.holders.details, details, b.read)
        if (device !== null) note(b.holders.peripheral_asset_id, device, b.read)
        b.read++
      }
      b.after += b.step
    }
    if (b.after >= b.last) {
      // Kept as 2 bytes an entry (a sample holds fewer than 65,536 documents).
      const packed = (map: Map<string, number[]>) => new Map([...map].map(([g, list]) => [g, Uint16Array.from(list)]))
      sample = { at: Math.max(b.last, 1), scale: b.read ? b.last / b.read : 1, holders: { details: packed(b.holders.details), peripheral_asset_id: packed(b.holders.peripheral_asset_id) } }
      building = null
    }
    return true
  }
  const EMPTY = new Uint16Array(0)
  /** The sample documents in both lists. */
  function both(a: ArrayLike<number>, b: ArrayLike<number>): number[] {
    const out: number[] = []
    for (let i = 0, j = 0; i < a.length && j < b.length; ) {
      if (a[i] < b[j]) i++
      else if (a[i] > b[j]) j++
      else {
        out.push(a[i])
        i++
        j++
      }
    }
    return out
  }

  // ---- device parts of the peripheral ids, by document ----
  let partOf = new Uint16Array(0)
  let partsUpTo = 0
  const partIds = new Map<string, number>([['', 0]])
  const parts: string[] = ['']
  function readParts(max: number): number {
    const rows = partsFrom.all(partsUpTo, max) as [number, string | null][]
    if (!rows.length) return 0
    const top = rows[rows.length - 1][0]
    if (top >= partOf.length) {
      const grown = new Uint16Array(Math.max(top + 1, Math.ceil(partOf.length * 1.5)))
      grown.set(partOf)
      partOf = grown
    }
    for (const [id, device] of rows) {
      const part = devicePart(device)
      let n = partIds.get(part)
      if (n === undefined) {
        n = parts.length < PARTS_MAX ? parts.length : 0
        if (n) {
          partIds.set(part, n)
          parts.push(part)
        }
      }
      partOf[id] = n
    }
    partsUpTo = top
    return rows.length
  }

  /** Which way the last search went (tests, benches). */
  let way: 'phrase' | 'and' = 'phrase'
  /** The trigrams of the last AND. */
  let anded: string[] = []
  const phrase = (m: TextMatch, column: DocColumn, after: number, upTo: number) => {
    way = 'phrase'
    return fts.all(m.phrase([column]), after, upTo)
  }

  /**
   * The trigrams whose AND finds the term's candidates in documents up to `upTo` at least
   * cost, or null when the phrase query costs less (or no estimate is read yet).
   */
  function andGrams(m: TextMatch, column: DocColumn, upTo: number): string[] | null {
    const grams = [...new Set(trigramsOf(m.folded))]
    // No sample yet (it is read in the background, `prepare`): the phrase query.
    const est = sample
    if (!est || !grams.length) return null
    const held = est.holders[column]
    const elsewhere = est.holders[column === 'details' ? 'peripheral_asset_id' : 'details']
    // A trigram's candidates are the documents holding it in the column; what its query reads
    // is its entries in the index, one per document holding it in either column: "id_" is in
    // no document's details but in every peripheral id, and asking for it in details read
    // 1.7 million entries (70-90 ms) to find none.
    const ranked = grams
      .map((g) => {
        const docs = held.get(g) ?? EMPTY
        const other = elsewhere.get(g) ?? EMPTY
        return { g, docs, listed: docs.length + other.length - both(docs, other).length }
      })
      .sort((x, y) => x.docs.length - y.docs.length || x.listed - y.listed)
    // Estimates from the sample, in documents (a trigram the sample lacks: a fifth of a
    // sample document's worth).
    const docsOf = (n: number) => Math.max(n, 0.2) * est.scale
    // The rows the candidates cost: where the device parts prove the documents that hold
    // the term, only the others (the sample's documents with every trigram of the term
    // stand for those that hold it); else every candidate.
    const proving = column === 'peripheral_asset_id' && !hasNonAscii(m.folded) && partsUpTo > 0 && upTo - partsUpTo <= PART_CATCH_UP
    const holding = proving ? ranked.reduce<ArrayLike<number>>((acc, r) => both(acc, r.docs), ranked[0].docs).length : 0
    const andCost = (k: number, entries: number, candidates: number) => k * AND_TERM_US + entries * AND_ENTRY_US + docsOf(candidates - holding) * READ_US
    // The trigram that alone costs least, then each of the others, rarest first, that makes
    // the AND cheaper (fewer candidates to read for its entries).
    let start = 0
    for (let i = 1; i < ranked.length; i++) {
      if (andCost(1, docsOf(ranked[i].listed), ranked[i].docs.length) < andCost(1, docsOf(ranked[start].listed), ranked[start].docs.length)) start = i
    }
    const chosen = [ranked[start].g]
    let sampled: ArrayLike<number> = ranked[start].docs
    let entries = docsOf(ranked[start].listed)
    let cost = andCost(1, entries, sampled.length)
    for (let i = 0; i < ranked.length && chosen.length < AND_MAX; i++) {
      if (i === start) continue
      const narrower = both(sampled, ranked[i].docs)
      const more = entries + docsOf(ranked[i].listed)
      const c = andCost(chosen.length + 1, more, narrower.length)
      if (c >= cost) continue
      chosen.push(ranked[i].g)
      sampled = narrower
      entries = more
      cost = c
    }
    // The phrase query moves every trigram of the term to each entry of the shortest list.
    const shortest = Math.min(...ranked.map((r) => r.listed))
    return cost > grams.length * (PHRASE_TERM_US + docsOf(shortest) * PHRASE_STEP_US) ? null : chosen
  }

  /** Separate terms, not a phrase: the index does not read their positions. */
  const andQuery = (chosen: string[], column: DocColumn) => chosen.map((g) => `{${column}} : "${g.replace(/"/g, '""')}"`).join(' AND ')

  /** The documents in (after, upTo] whose `column` holds the term, ascending. */
  function docs(m: TextMatch, column: DocColumn, after: number, upTo: number): number[] {
    const chosen = andGrams(m, column, upTo)
    if (!chosen) return phrase(m, column, after, upTo)
    way = 'and'
    anded = chosen
    return holding(m, column, upTo, fts.all(andQuery(chosen, column), after, upTo))
  }

  /**
   * Those of the candidates (ascending; documents up to `upTo` holding some of the term's
   * trigrams, from an AND of them) whose `column` holds the term: each decided by the term's
   * own test, on its device part where that proves it, else on its text.
   */
  function holding(m: TextMatch, column: DocColumn, upTo: number, candidates: number[]): number[] {
    if (!candidates.length) return candidates
    // A device part that holds the term proves its documents (ASCII terms: their test
    // folds letter by letter, so what a part holds, the whole id holds).
    let proved: Uint8Array | null = null
    if (column === 'peripheral_asset_id' && !hasNonAscii(m.folded)) {
      // Documents added since the parts were read (a few, once they all were).
      if (partsUpTo > 0 && upTo > partsUpTo && upTo - partsUpTo <= PART_CATCH_UP) readParts(upTo - partsUpTo)
      proved = new Uint8Array(parts.length)
      for (let i = 1; i < parts.length; i++) if (m.test(parts[i])) proved[i] = 1
    }
    const keep = new Uint8Array(candidates.length)
    const toRead: number[] = []
    const at = new Map<number, number>()
    for (let i = 0; i < candidates.length; i++) {
      const id = candidates[i]
      if (proved && id <= partsUpTo && proved[partOf[id]]) keep[i] = 1
      else {
        toRead.push(id)
        at.set(id, i)
      }
    }
    for (let i = 0; i < toRead.length; i += READ_CHUNK) {
      for (const [id, text] of texts[column].all(JSON.stringify(toRead.slice(i, i + READ_CHUNK))) as [number, string | null][]) if (m.test(text)) keep[at.get(id)!] = 1
    }
    return candidates.filter((_, i) => keep[i] === 1)
  }

  return {
    docs,
    /**
     * The query `docs` would run for the term over documents up to `upTo`, for another
     * connection to run ahead: its phrase query (the answer is the documents), or the AND of
     * rare trigrams (the answer is candidates, for `holding`).
     */
    aheadQuery(m: TextMatch, column: DocColumn, upTo: number): { query: string; and: boolean } {
      const chosen = andGrams(m, column, upTo)
      return chosen ? { query: andQuery(chosen, column), and: true } : { query: m.phrase([column]), and: false }
    },
    holding,
    lastWay: () => way,
    /** The trigrams the last AND asked for (tests). */
    lastGrams: () => anded,
    /**
     * Reads the rarity sample, or else the device parts of up to `max` more documents (the
     * background's slices); answers whether more are waiting.
     */
    prepare(max = PART_SLICE): boolean {
      if (readSample()) return true
      const n = readParts(max)
      return n === max
    },
    /** Bytes held, about (the parts by document and their dictionary, the sample's lists). */
    bytes(): number {
      let n = partOf.byteLength + parts.reduce((s, p) => s + 2 * p.length + 32, 0)
      if (sample) for (const map of Object.values(sample.holders)) for (const [g, list] of map) n += list.byteLength + 2 * g.length + 96
      return n
    },
    /** Forgets the estimate and the device parts (another connection rewrote the documents). */
    forget() {
      sample = null
      building = null
      partOf = new Uint16Array(0)
      partsUpTo = 0
      partIds.clear()
      partIds.set('', 0)
      parts.length = 1
    },
  }
}
export type TermSearch = ReturnType<typeof termSearch>
