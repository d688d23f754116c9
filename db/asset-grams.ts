// Asset discovery's global searches of one or two characters. A term that short has no
// trigram to read from the full-text indexes, and counting its matches row by row over a
// million peripherals takes seconds. So, for the agents and the peripherals (the agentless
// hosts are few and still counted row by row), migration 039 keeps:
//
// - asset_grams: for every gram of one or two characters of the searched texts (FIELDS'
//   name, key, ipAddress, model, vendor, and an agent's adapters), how many rows hold it.
//   Grams are folded as LIKE folds (ASCII letters only) and taken within each text, so a
//   row holds a gram exactly when `%gram%` matches one of its texts: an unfiltered search's
//   count is a lookup.
// - asset_gram_rows: the rows of the rare grams (`posted`: held by at most GRAM_CAPS rows
//   since it was last built), so that a page of a rare term reads its few rows instead of
//   walking an index for matches that are not there. A common term's page is found by
//   walking the order's index: its matches are dense.
//
// Triggers keep both exact with every write of agents and peripherals; they call
// asset_grams(), an app-defined function: a connection that writes the searched columns of
// agents or peripherals needs it registered (registerGramFunctions: openDatabase and
// migrate() do). Searches with filters still match row by row.
import type Database from 'better-sqlite3'
import { lowerAscii } from './match.js'

/** Source codes in the tables: SOURCES' indexes (agent 0, peripheral 2). */
export const GRAM_SOURCES = { agent: 0, peripheral: 2 } as const

/** A gram's rows are listed while it is held by at most this many rows of a source (the migration's triggers say the same). */
export const GRAM_CAPS = { agent: 2000, peripheral: 10000 } as const

/** The grams of one or two characters (code points) of each text, folded as LIKE folds. */
export function gramsOf(texts: readonly unknown[], into: Set<string> = new Set()): Set<string> {
  for (const v of texts) {
    if (v === null || v === undefined) continue
    const t = lowerAscii(typeof v === 'string' ? v : String(v))
    let prev = ''
    for (const ch of t) {
      into.add(ch)
      if (prev) into.add(prev + ch)
      prev = ch
    }
  }
  return into
}

/** A search term (the LIKE pattern `%term%`, escaped with `\`) of one or two characters, folded; else undefined. */
export function shortTerm(search: string | undefined): string | undefined {
  if (search === undefined || !/^%.*%$/s.test(search)) return undefined
  const term = search.slice(1, -1).replace(/\\(.)/gs, '$1')
  const n = [...term].length
  return n >= 1 && n <= 2 ? lowerAscii(term) : undefined
}

// A trigger reads a row's grams in several statements (counts, then lists; an agent's
// address change, each of its peripherals' in each): the last answers are kept by their
// texts, so each is computed once.
const KEPT_ANSWERS = 64
function remembered(compute: (...args: unknown[]) => string): (...args: unknown[]) => string {
  const kept = new Map<string, string>()
  return (...args) => {
    const key = JSON.stringify(args)
    let value = kept.get(key)
    if (value === undefined) {
      value = compute(...args)
      if (kept.size >= KEPT_ANSWERS) kept.delete(kept.keys().next().value!)
      kept.set(key, value)
    }
    return value
  }
}

const gramsJson = remembered((...texts) => JSON.stringify([...gramsOf(texts)]))

const gramDiffJson = remembered((oldId, newId, n, ...texts) => {
  const was = gramsOf(texts.slice(0, Number(n)))
  const is = gramsOf(texts.slice(Number(n)))
  // A row whose id changes is a delete and an insert.
  const moved = oldId !== newId
  return JSON.stringify({ del: [...was].filter((g) => moved || !is.has(g)), add: [...is].filter((g) => moved || !was.has(g)) })
})

/**
 * `asset_grams(text, ...)`: the texts' grams as a JSON array. `asset_gram_diff(old id, new
 * id, n, n old texts, n new texts)`: `{del, add}`, the grams the update takes away and
 * adds (all of them when the id changes). `asset_gram_index(cap, id,
 * text, ...)` (aggregate, for building): `{gram: [rows, ids or null]}`, the ids while the
 * gram is held by at most `cap` rows.
 */
export function registerGramFunctions(db: Database.Database): void {
  db.function('asset_grams', { deterministic: true, varargs: true }, gramsJson)
  db.function('asset_gram_diff', { deterministic: true, varargs: true }, gramDiffJson)
  type Tally = Map<string, [number, number[] | null]>
  db.aggregate('asset_gram_index', {
    varargs: true,
    start: () => new Map() as Tally,
    step: (acc: Tally, ...args: unknown[]) => {
      const [cap, id, ...texts] = args
      const limit = Number(cap)
      for (const g of gramsOf(texts)) {
        let e = acc.get(g)
        if (!e) acc.set(g, (e = [0, []]))
        e[0]++
        if (e[1] && e[0] > limit) e[1] = null
        else e[1]?.push(Number(id))
      }
    },
    result: (acc: Tally) => JSON.stringify(Object.fromEntries(acc)),
  })
}

// The texts each source is searched in, as the triggers of migration 039 read them (FIELDS
// of assets-fields.ts; a peripheral's model is its name or NULL, so it adds no gram).
const AGENT_TEXTS = 'a.host_identifier, a.uuid, a.local_ip_address, a.pc_model, a.manufacturer, a.nics_text'
const PERIPHERAL_TEXTS = "coalesce(p.gui_pid, p.caption, p.description, p.device_id), p.agent_uuid || '/' || p.device_id, a.local_ip_address, coalesce(p.gui_vid, p.manufacturer)"

/** The build of both tables from the rows, as migration 039 runs it (the bulk load of `npm run seed` too). */
export const BUILD_ASSET_GRAMS = `
DELETE FROM asset_grams;
DELETE FROM asset_gram_rows;
CREATE TEMP TABLE asset_grams_build (src INTEGER, j TEXT);
INSERT INTO temp.asset_grams_build SELECT 0, asset_gram_index(${GRAM_CAPS.agent}, a.id, ${AGENT_TEXTS}) FROM agents a;
INSERT INTO temp.asset_grams_build SELECT 2, asset_gram_index(${GRAM_CAPS.peripheral}, p.id, ${PERIPHERAL_TEXTS})
  FROM peripherals p JOIN agents a ON a.id = p.agent_id;
INSERT INTO asset_grams (src, gram, n, posted)
  SELECT b.src, g.key, g.value ->> 0, g.value -> 1 <> 'null' FROM temp.asset_grams_build b, json_each(b.j) g WHERE b.j IS NOT NULL;
INSERT INTO asset_gram_rows (src, gram, id)
  SELECT b.src, g.key, r.value FROM temp.asset_grams_build b, json_each(b.j) g, json_each(g.value, '$[1]') r
  WHERE b.j IS NOT NULL AND g.value -> 1 <> 'null';
DROP TABLE temp.asset_grams_build;
`

/** Rebuilds both tables from the rows (the bulk load's triggers are off while it writes). */
export function buildAssetGrams(db: Database.Database): void {
  registerGramFunctions(db)
  db.exec(BUILD_ASSET_GRAMS)
}

export interface GramInfo {
  /** Rows of the source holding the gram. */
  n: number
  /** Its rows are listed in asset_gram_rows. */
  posted: boolean
}

/** The lookup of a gram's count and whether its rows are listed, per source. */
export function gramLookup(db: Database.Database): (src: keyof typeof GRAM_SOURCES, gram: string) => GramInfo {
  const get = db.prepare<[number, string], { n: number; posted: number }>('SELECT n, posted FROM asset_grams WHERE src = ? AND gram = ?')
  return (src, gram) => {
    const r = get.get(GRAM_SOURCES[src], gram)
    // A gram no row ever held: nothing to read.
    return r ? { n: r.n, posted: r.posted === 1 } : { n: 0, posted: true }
  }
}
