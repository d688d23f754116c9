// A query as SQL over one source of assets: its conditions (those a source decides alone
// folded away), the global search with the conditions indexes serve, the named values, and
// the parts a source is read in for an indexed order.
import { patternList } from './match.js'
import { AGENT_RISK, FIELDS, PERIPHERAL_RISK, RARE, RARE_BY_MODEL, ROWID, SEARCHED, SOURCES } from './assets-fields.js'
import { type AssetField, type AssetQuery, type Condition, INDICATOR_RISK, type Source, TEXT_FIELDS } from '../lib/assets/ports.js'
import { shortTerm } from './asset-grams.js'

const R = INDICATOR_RISK

export interface Rendered {
  sql: string
  params: unknown[]
}

/** Orders each source reads from an index of its own, merged (indexedKeys). */
export const INDEXED_SORTS: ReadonlySet<AssetField> = new Set(['firstSeen', 'riskLevel'])

/**
 * The parts a source is read in, in an indexed order: each its sort value and the condition
 * that picks its rows. A peripheral's risk is its index's unless its model is rare (then at
 * least the rare risk): the peripherals of no rare model are read by that index, those of
 * the rare models by model.
 */
export function orderedParts(src: Source, field: AssetField, anyRare: boolean): [value: string, only?: string][] {
  if (field !== 'riskLevel' || src !== 'peripheral') return [[FIELDS[field][src]]]
  if (!anyRare) return [[PERIPHERAL_RISK]]
  return [
    [PERIPHERAL_RISK, `NOT ${RARE}`],
    [`max(${PERIPHERAL_RISK}, ${R.rare})`, `${RARE_BY_MODEL} AND ${RARE}`],
  ]
}

function renderCondition(c: Condition, src: Source): Rendered {
  const e = FIELDS[c.field][src]
  const text = TEXT_FIELDS.has(c.field)
  switch (c.op) {
    case 'in':
    case 'notIn': {
      const values = text ? c.values.map((v) => String(v).toLowerCase()) : c.values
      // Several values: one set, one bound JSON array (one statement text whatever their number).
      const set = values.length > 1 ? 'SELECT value FROM json_each(?)' : '?'
      const match = text ? `lower(${e}) IN (${set})` : `(${e}) IN (${set})`
      return { sql: c.op === 'in' ? `coalesce(${match}, 0)` : `coalesce(NOT ${match}, 1)`, params: values.length > 1 ? [JSON.stringify(values)] : values }
    }
    case 'like':
    case 'notLike': {
      // Several patterns: the field computed once per row and tested against all of them (db/match.ts).
      const any = c.values.length > 1 ? `like_any(${e}, ?)` : `(${e}) LIKE ? ESCAPE '\\'`
      return { sql: c.op === 'like' ? `coalesce(${any}, 0)` : `coalesce(NOT (${any}), 1)`, params: c.values.length > 1 ? [patternList(c.values)] : c.values }
    }
    case 'gt':
      return { sql: `coalesce((${e}) > ?, 0)`, params: c.values }
    case 'ge':
      return { sql: `coalesce((${e}) >= ?, 0)`, params: c.values }
    case 'lt':
      return { sql: `coalesce((${e}) < ?, 0)`, params: c.values }
    case 'le':
      return { sql: `coalesce((${e}) <= ?, 0)`, params: c.values }
    case 'range':
      return { sql: `coalesce((${e}) >= ? AND (${e}) < ?, 0)`, params: c.values }
    case 'notRange':
      return { sql: `coalesce(NOT ((${e}) >= ? AND (${e}) < ?), 1)`, params: c.values }
  }
}

/** A field that is one constant for every asset of a source (a type, a host's icon): its value, else undefined. */
function constant(field: AssetField, src: Source): number | undefined {
  const e = FIELDS[field][src]
  return /^-?\d+$/.test(e) ? Number(e) : undefined
}

/** A condition on a constant, decided here: true or false; undefined when SQL must decide. */
function decide(c: Condition, src: Source): boolean | undefined {
  const v = TEXT_FIELDS.has(c.field) ? undefined : constant(c.field, src)
  if (v === undefined) return undefined
  const [a, b] = c.values as number[]
  switch (c.op) {
    case 'in':
      return (c.values as number[]).includes(v)
    case 'notIn':
      return !(c.values as number[]).includes(v)
    case 'gt':
      return v > a
    case 'ge':
      return v >= a
    case 'lt':
      return v < a
    case 'le':
      return v <= a
    case 'range':
      return v >= a && v < b
    case 'notRange':
      return !(v >= a && v < b)
    default:
      return undefined
  }
}

/**
 * The groups with the conditions a source decides by itself taken out: [] when they always
 * hold, null when they never do (the source is then not read at all: the connector asking
 * for hosts reads no peripheral).
 */
function fold(groups: Condition[][], src: Source): Condition[][] | null {
  if (groups.length === 0) return []
  const out: Condition[][] = []
  for (const and of groups) {
    const left: Condition[] = []
    let holds = true
    for (const c of and) {
      const d = decide(c, src)
      if (d === false) {
        holds = false
        break
      }
      if (d === undefined) left.push(c)
    }
    if (!holds) continue
    if (left.length === 0) return []
    out.push(left)
  }
  return out.length ? out : null
}

/** The query as one source sees it, or null when none of its assets can match. */
export function foldQuery(q: AssetQuery, src: Source): AssetQuery | null {
  const filters = fold(q.filters, src)
  const system = fold(q.system, src)
  return filters && system ? { ...q, filters, system } : null
}

function renderGroups(groups: Condition[][], src: Source): Rendered {
  if (groups.length === 0) return { sql: '1', params: [] }
  const params: unknown[] = []
  const ors = groups.map((and) => {
    const parts = and.map((c) => {
      const r = renderCondition(c, src)
      params.push(...r.params)
      return r.sql
    })
    return `(${parts.join(' AND ')})`
  })
  return { sql: `(${ors.join(' OR ')})`, params }
}

/** A source's part of a query; `gramRows`: its rows are those asset_gram_rows lists for the search's gram (db/asset-grams.ts). */
export type SourceQuery = AssetQuery & { gramRows?: boolean }

export function renderWhere(q: SourceQuery, src: Source): Rendered {
  const f = renderGroups(q.filters, src)
  const s = renderGroups(q.system, src)
  const parts = [f.sql, s.sql]
  const params = [...f.params, ...s.params]
  // A rare gram's listed rows are exactly those holding it (the triggers of migration 039
  // keep them so): no text is matched again, and a peripheral's agent is not joined.
  if (q.search !== undefined && !q.gramRows) {
    const fields = SEARCHED.map((name) => `(${FIELDS[name][src]}) LIKE @search ESCAPE '\\'`)
    if (src === 'agent') fields.push("a.nics_text LIKE @search ESCAPE '\\'")
    parts.push(`coalesce(${fields.join(' OR ')}, 0)`)
  }
  const served = indexed(q, src)
  // The rare gram's few rows, listed.
  if (q.gramRows) served.push({ sql: `${ROWID[src]} IN (SELECT id FROM asset_gram_rows WHERE src = ${SOURCES.indexOf(src)} AND gram = @gram)`, params: [] })
  parts.push(...served.map((r) => r.sql))
  for (const r of served) params.push(...r.params)
  const sql = parts.filter((p) => p !== '1').join(' AND ')
  return { sql: sql || '1', params }
}

/** A global search's term when its candidates can be read from the trigram indexes: three characters or more, printable ASCII, no '/'. */
function indexedTerm(search: string | undefined): string | undefined {
  if (search === undefined || !/^%.*%$/s.test(search)) return undefined
  const term = search.slice(1, -1).replace(/\\(.)/gs, '$1')
  return term.length >= 3 && /^[\x20-\x7e]+$/.test(term) && !term.includes('/') ? term : undefined
}

/**
 * Conditions an index serves, implied by the query and added to it, so they change no
 * answer. A riskLevel list that the filters (or the system filters) hold as one group:
 * the agents' risk index reads those levels alone (the connector's query). A global search
 * of an indexed term: the assets whose texts may hold it, each text read from an index (the
 * trigram indexes fold case, and the peripherals' interned texts are their vendor and
 * product texts in lower case: each finds at least the texts LIKE matches). A '/' could
 * match across a peripheral key's two parts, and a non-ASCII letter's case is folded
 * differently: such terms, and terms too short for a trigram, are matched row by row.
 */
function indexed(q: AssetQuery, src: Source): Rendered[] {
  const out: Rendered[] = []
  if (src === 'agent') {
    for (const groups of [q.filters, q.system]) {
      if (groups.length !== 1) continue
      for (const c of groups[0]) {
        if (c.field !== 'riskLevel' || c.op !== 'in') continue
        out.push({ sql: `(${AGENT_RISK}) IN (${c.values.map(() => '?').join(', ')})`, params: c.values })
      }
    }
  }
  if (indexedTerm(q.search) === undefined) return out
  const like = "LIKE @search ESCAPE '\\'"
  if (src === 'agent') {
    out.push({
      sql: `a.id IN (SELECT rowid FROM agents_fts WHERE agents_fts MATCH @fts
        UNION ALL SELECT id FROM agents WHERE host_identifier ${like}
        UNION ALL SELECT id FROM agents WHERE local_ip_address ${like}
        UNION ALL SELECT id FROM agents WHERE pc_model ${like} OR manufacturer ${like})`,
      params: [],
    })
  } else if (src === 'peripheral') {
    out.push({
      sql: `p.id IN (SELECT rowid FROM peripherals_fts WHERE peripherals_fts MATCH @fts
        UNION ALL SELECT id FROM peripherals WHERE vendor_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'vendor' AND text ${like})
        UNION ALL SELECT id FROM peripherals WHERE product_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'product' AND text ${like})
        UNION ALL SELECT id FROM peripherals WHERE agent_id IN (SELECT rowid FROM agents_fts WHERE agents_fts MATCH @ftsUuid
          UNION ALL SELECT id FROM agents WHERE local_ip_address ${like}))`,
      params: [],
    })
  }
  return out
}

/** The named values a statement uses (@rare, @search, @end), as one object after the positional ones; none when it uses none. */
export function named(sql: string, q: AssetQuery, more: Record<string, unknown> = {}): [Record<string, unknown>] | [] {
  const term = indexedTerm(q.search) ?? ''
  const phrase = `"${term.replace(/"/g, '""')}"`
  const all: Record<string, unknown> = { rare: JSON.stringify(q.rare), search: q.search ?? '', fts: phrase, ftsUuid: `uuid : ${phrase}`, gram: shortTerm(q.search) ?? '', ...more }
  const used = Object.fromEntries(Object.entries(all).filter(([k]) => new RegExp(`@${k}\\b`).test(sql)))
  return Object.keys(used).length > 0 ? [used] : []
}
