// The events' sources' names in memory, a column at a time, for "contains" terms (Source,
// AssetName, AssetKey, GlobalSearch).
//
// Each column is one lower-cased text, each name ended by a NUL: a term is searched in it
// with indexOf. Over the whole text that is a millisecond or more a column at 100,000
// sources (3 MB), and a GlobalSearch searches three columns: most of a host's first search.
// So the names are also kept in chunks of CHUNK names, each with a bitset of the trigrams its
// names hold (hashed to 8,192 bits: 16 bytes a name), and only the chunks holding every trigram of the
// term are searched: a host's name reads one or two chunks. A term's match lies within one
// name (the term holds no NUL), so every trigram of it is one of that name's: no chunk
// holding a match is passed over. Sources are only added, never changed: names above the
// last read are appended.
import type { DB } from '../index.js'

/** Names per chunk. */
const CHUNK = 64
/** Bits of a chunk's trigram set: 2 ** GRAM_BITS (in 32-bit words: WORDS per chunk). */
const GRAM_BITS = 13
const WORDS = 2 ** GRAM_BITS / 32
/** Names read per slice in the background (about 2 µs each). */
const SLICE = 2048

export type SourceColumn = 'entity_id' | 'asset_key' | 'asset_name'
/** The sources' columns GlobalSearch searches. */
export const GLOBAL_SOURCE_COLUMNS: SourceColumn[] = ['entity_id', 'asset_name']

/** A trigram of UTF-16 code units as a bit of a chunk's set. */
const gram = (a: number, b: number, c: number) => Math.imul(a ^ (b << 7) ^ (c << 14), 0x9e3779b1) >>> (32 - GRAM_BITS)

interface Names {
  upTo: number
  /** The names as stored (null: none), their ids, and where each starts in `text`. */
  names: (string | null)[]
  ids: number[]
  starts: number[]
  text: string
  /** The trigram set of each chunk, WORDS words each. */
  bits: Uint32Array
}

export function sourceNames(db: DB) {
  const lastSource = db.prepare('SELECT coalesce(max(id), 0) FROM event_sources').pluck()
  const after = {
    entity_id: db.prepare('SELECT id, entity_id FROM event_sources WHERE id > ? AND id <= ? ORDER BY id').raw(),
    asset_key: db.prepare('SELECT id, asset_key FROM event_sources WHERE id > ? AND id <= ? ORDER BY id').raw(),
    asset_name: db.prepare('SELECT id, asset_name FROM event_sources WHERE id > ? AND id <= ? ORDER BY id').raw(),
  }
  const byColumn = new Map<SourceColumn, Names>()

  function namesOf(column: SourceColumn, last: number): Names {
    let n = byColumn.get(column)
    if (!n) byColumn.set(column, (n = { upTo: 0, names: [], ids: [], starts: [], text: '', bits: new Uint32Array(0) }))
    if (last <= n.upTo) return n
    const parts: string[] = []
    let at = n.text.length
    // plan: rowid range (no override)
    for (const [id, name] of after[column].iterate(n.upTo, last) as IterableIterator<[number, string | null]>) {
      const lower = name === null ? '' : name.toLowerCase()
      const i = n.ids.length
      const chunk = Math.floor(i / CHUNK)
      if ((chunk + 1) * WORDS > n.bits.length) {
        const grown = new Uint32Array(Math.max((chunk + 1) * WORDS, n.bits.length * 2))
        grown.set(n.bits)
        n.bits = grown
      }
      const base = chunk * WORDS
      for (let k = 0; k + 2 < lower.length; k++) {
        const g = gram(lower.charCodeAt(k), lower.charCodeAt(k + 1), lower.charCodeAt(k + 2))
        n.bits[base + (g >>> 5)] |= 1 << (g & 31)
      }
      n.ids.push(id)
      n.names.push(name)
      n.starts.push(at)
      parts.push(lower, '\u0000')
      at += lower.length + 1
    }
    n.text += parts.join('')
    n.upTo = last
    return n
  }

  /** The name holding text offset `at`: the last start at or before it, among names [lo, hi]. */
  function nameAt(n: Names, at: number, lo: number, hi: number): number {
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1
      if (n.starts[mid] <= at) lo = mid
      else hi = mid - 1
    }
    return lo
  }

  /** The sources of `n` whose name holds `lower` (the term lower-cased, its trigrams `grams`) and that `test` accepts, ascending. */
  function scanColumn(n: Names, lower: string, grams: number[], test: (name: string | null) => boolean): number[] {
    const count = n.ids.length
    const out: number[] = []
    const chunks = Math.ceil(count / CHUNK)
    // Runs of chunks holding every trigram, searched as one stretch of the text.
    for (let c = 0; c < chunks; ) {
      if (!holds(n.bits, c * WORDS, grams)) {
        c++
        continue
      }
      let end = c + 1
      while (end < chunks && holds(n.bits, end * WORDS, grams)) end++
      const first = c * CHUNK
      const last = Math.min(end * CHUNK, count) - 1
      const from = n.starts[first]
      const to = last + 1 < count ? n.starts[last + 1] : n.text.length
      // A slice of the text (no copy) bounds the search to the run.
      const stretch = n.text.slice(from, to)
      for (let at = stretch.indexOf(lower); at !== -1; ) {
        const i = nameAt(n, from + at, first, last)
        // Lower-casing all of Unicode finds every name the term's own test accepts (and a
        // few more, which that test takes out).
        if (test(n.names[i])) out.push(n.ids[i])
        at = i < last ? stretch.indexOf(lower, n.starts[i + 1] - from) : -1
      }
      c = end
    }
    return out
  }

  /**
   * The sources any of whose `columns` contains the term, ascending: those whose lower-cased
   * name holds the lower-cased term and that `test` (the term's own case rules) accepts; null
   * when the names cannot tell (a NUL in the term, or an empty term).
   */
  function scan(term: string, columns: SourceColumn[], test: (name: string | null) => boolean): number[] | null {
    const lower = term.toLowerCase()
    if (lower.includes('\u0000') || lower === '') return null
    const grams: number[] = []
    for (let k = 0; k + 2 < lower.length; k++) grams.push(gram(lower.charCodeAt(k), lower.charCodeAt(k + 1), lower.charCodeAt(k + 2)))
    const last = lastSource.get() as number
    const found = columns.map((c) => scanColumn(namesOf(c, last), lower, grams, test))
    return found.length === 1 ? found[0] : [...new Set(found.flat())].sort((a, b) => a - b)
  }

  /** Whether any of `columns` lags more than `lag` names behind the sources. */
  function behind(columns: SourceColumn[], lag = 0): boolean {
    const last = lastSource.get() as number
    return columns.some((c) => last - (byColumn.get(c)?.upTo ?? 0) > lag)
  }

  return {
    scan,
    /**
     * Whether a search of `columns` would first read more than a slice of names: those are
     * read by `prepare`, a slice at a time, between other requests.
     */
    lagging: (columns: SourceColumn[]) => behind(columns, SLICE),
    /** Reads up to `max` more names of the first of `columns` not read up to the last source; answers whether more are waiting. */
    prepare(columns: SourceColumn[], max = SLICE): boolean {
      const last = lastSource.get() as number
      const c = columns.find((c) => (byColumn.get(c)?.upTo ?? 0) < last)
      if (!c) return false
      namesOf(c, Math.min(last, (byColumn.get(c)?.upTo ?? 0) + max))
      return behind(columns)
    },
  }
}

/** Whether the chunk's set at `base` holds every one of the trigrams. */
function holds(bits: Uint32Array, base: number, grams: number[]): boolean {
  for (let k = 0; k < grams.length; k++) {
    const g = grams[k]
    if ((bits[base + (g >>> 5)] & (1 << (g & 31))) === 0) return false
  }
  return true
}

export type SourceNames = ReturnType<typeof sourceNames>
