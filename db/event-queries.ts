// Events and audit records: the lists with every filter and sort, the integration feeds
// and the streamed exports, at millions of rows.
//
// How a question is answered (the index is db/event-index.ts, maintained off the write path):
// - Filters on the low-cardinality fields (severity, category, icon, description; for
//   audit records also outcome, operation and asset type) select kinds; time and id
//   ranges select blocks of ids. Counts add up whole blocks and read rows only at the
//   ends of a range; a page skips the blocks without matches.
// - "Contains" filters and GlobalSearch on events look through the distinct sources and
//   documents (trigram indexes) and add up their counts; a page is read through the
//   events' asset index when the matches are few, or by walking the newest rows when
//   they are many (whichever reads fewer rows, from the exact count).
// - Records above the index's high-water mark are read directly, so every answer is exact.
import type { DB } from './index.js'
import { statementCache } from './agents.js'
import { recordIndexer, LEVEL_SHIFT, rollupTable, type RecordTable, type EventKind, type AuditKind, type IndexerOptions } from './event-index.js'
import type { AuditFilter, Bounds, EventFilter } from '../lib/event-filter.js'
import { MAX_ID } from '../lib/event-filter.js'
import { contains as likePattern, severityNames, type Sort } from '../lib/listing.js'
import { iso } from '../lib/time.js'
import type { components } from '../generated/openapi.js'

type EventView = components['schemas']['PrimeEventView']
type AuditView = components['schemas']['AuditTrailView']

export interface EventRow {
  id: number
  created_ms: number
  event_code: string
  severity: number
  category: EventView['category']
  entity_id: string
  description: string
  details: string
  hashtags: string | null
  peripheral_icon: number
  asset_key: string | null
  asset_name: string | null
  peripheral_asset_id: string | null
}

export interface AuditTrailRow {
  id: number
  created_ms: number
  severity: number
  category: AuditView['category']
  user_name: string | null
  source_ip: string | null
  description: string
  details: string
  operation_id: string | null
  outcome: AuditView['outcome']
  asset_key: string | null
  asset_name: string | null
  asset_parent_id: string | null
  asset_ip: string | null
  asset_type: AuditView['assetReference']['type']
  asset_sub_type: AuditView['assetReference']['subType']
  asset_detail: AuditView['assetReference']['allAssetTypeDetail']
  asset_icon: number
}

const EVENT_COLUMNS = 'e.id, e.created_ms, e.event_code, e.severity, e.category, e.entity_id, e.description, e.details, e.hashtags, e.peripheral_icon, e.asset_key, e.asset_name, e.peripheral_asset_id'
const AUDIT_COLUMNS = 'e.id, e.created_ms, e.severity, e.category, e.user_name, e.source_ip, e.description, e.details, e.operation_id, e.outcome, e.asset_key, e.asset_name, e.asset_parent_id, e.asset_ip, e.asset_type, e.asset_sub_type, e.asset_detail, e.asset_icon'

/** An event as the lists show it (PrimeEventView). */
export function eventView(r: EventRow): EventView {
  return {
    eventID: r.id,
    creationTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    eventCode: r.event_code,
    severity: r.severity,
    severityString: severityNames[r.severity],
    category: r.category,
    eventEntityID: r.entity_id,
    description: r.description,
    details: r.details,
    hashtags: r.hashtags,
    peripheralIcon: String(r.peripheral_icon),
    assetKey: r.asset_key,
    assetName: r.asset_name,
    peripheralAssetId: r.peripheral_asset_id,
  }
}

/** An audit record as the lists show it (AuditTrailView). */
export function auditView(r: AuditTrailRow): AuditView {
  return {
    auditTrailID: r.id,
    creationTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    severity: r.severity,
    severityString: severityNames[r.severity],
    category: r.category,
    user: r.user_name,
    sourceIp: r.source_ip,
    description: r.description,
    details: r.details,
    operationId: r.operation_id,
    outcome: r.outcome,
    assetReference: {
      key: r.asset_key,
      name: r.asset_name,
      parentID: r.asset_parent_id,
      ipAddress: r.asset_ip,
      type: r.asset_type,
      subType: r.asset_sub_type,
      allAssetTypeDetail: r.asset_detail,
      icon: r.asset_icon,
    },
  }
}

// ---------------------------------------------------------------------------------------
// Conditions

/** A condition over a row (alias `e`), with its parameters. */
interface Cond { sql: string; params: unknown[] }

function all(conds: (Cond | null | undefined)[]): Cond | null {
  const cs = conds.filter((c): c is Cond => !!c)
  if (!cs.length) return null
  return { sql: cs.map((c) => c.sql).join(' AND '), params: cs.flatMap((c) => c.params) }
}
function any(conds: Cond[]): Cond {
  return { sql: `(${conds.map((c) => c.sql).join(' OR ')})`, params: conds.flatMap((c) => c.params) }
}
const cond = (sql: string, ...params: unknown[]): Cond => ({ sql, params })

const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase())
const hasNonAscii = (s: string) => /[^\u0000-\u007f]/.test(s)

/**
 * A case-insensitive "contains" (the contract's TextFilter): as a condition on a column,
 * as a test on a text, and as a phrase of the trigram indexes. Terms of 3 characters or
 * more fold case over all of Unicode (as the trigram indexes do); shorter terms fold ASCII
 * only (LIKE). An ASCII term folds the same either way, so it runs as LIKE (SQLite's own
 * code, faster than a call into JavaScript).
 */
export function textMatch(term: string) {
  const trigram = [...term].length >= 3
  const unicode = trigram && hasNonAscii(term)
  const folded = unicode ? term.toLowerCase() : asciiLower(term)
  const like = likePattern(term)
  return {
    trigram,
    on: (column: string): Cond => (unicode ? cond(`event_contains(${column}, ?)`, folded) : cond(`${column} LIKE ? ESCAPE '\\'`, like)),
    test: (value: string | null | undefined): boolean => value !== null && value !== undefined && (unicode ? value.toLowerCase() : asciiLower(value)).includes(folded),
    /** An FTS5 query: the exact substring in any of the columns. */
    phrase: (columns: string[]) => `{${columns.join(' ')}} : "${term.replace(/"/g, '""')}"`,
  }
}
type TextMatch = ReturnType<typeof textMatch>

const SEVERITY_NAME_SQL = `CASE e.severity ${severityNames.map((n, i) => `WHEN ${i} THEN '${n}'`).join(' ')} END`

interface Range { lo: number; hi: number }

/** A question in the engine's terms. */
interface Plan {
  table: RecordTable
  ids: Range
  times: Range | null
  empty: boolean
  /** Which kinds can match (null: any), and the same condition over a row's columns. */
  kindOk: ((k: any) => boolean) | null
  kindSql: Cond | null
  /** The other conditions over a row's columns (text). */
  textSql: Cond | null
  /** Events: how the text conditions resolve against sources and documents. */
  text: EventText | null
}

/** The text conditions of an event filter, by what they look at. */
interface EventText {
  source: { match: TextMatch; columns: ('entity_id' | 'asset_key' | 'asset_name')[] }[]
  doc: { match: TextMatch; column: 'details' | 'peripheral_asset_id' }[]
  global: TextMatch | null
}

function boundsPlan(b: Bounds): Pick<Plan, 'ids' | 'times' | 'empty'> {
  return {
    ids: { lo: b.idFrom, hi: b.idTo },
    times: b.timeFrom === null && b.timeTo === null ? null : { lo: b.timeFrom ?? Number.MIN_SAFE_INTEGER, hi: b.timeTo ?? Number.MAX_SAFE_INTEGER },
    empty: b.empty,
  }
}

const inList = (column: string, values: readonly unknown[]) => cond(`${column} IN (${values.map(() => '?').join(', ')})`, ...values)

function eventPlan(f: EventFilter): Plan {
  const kindTests: ((k: EventKind) => boolean)[] = []
  const kindConds: Cond[] = []
  if (f.severity !== undefined) {
    const s = f.severity
    kindTests.push((k) => k.severity === s)
    kindConds.push(cond('e.severity = ?', s))
  }
  if (f.minSeverity !== undefined) {
    const s = f.minSeverity
    kindTests.push((k) => k.severity <= s)
    kindConds.push(cond('e.severity <= ?', s))
  }
  if (f.categories) {
    const cs: readonly string[] = f.categories
    kindTests.push((k) => cs.includes(k.category))
    kindConds.push(inList('e.category', cs))
  }
  if (f.icons) {
    const is = f.icons
    kindTests.push((k) => is.includes(k.peripheral_icon))
    kindConds.push(inList('e.peripheral_icon', is))
  }
  if (f.description !== undefined) {
    const m = textMatch(f.description)
    kindTests.push((k) => m.test(k.description))
    kindConds.push(m.on('e.description'))
  }
  const text: EventText = { source: [], doc: [], global: null }
  const textConds: Cond[] = []
  const sourceTerm = (value: string | undefined, column: 'entity_id' | 'asset_key' | 'asset_name') => {
    if (value === undefined) return
    const m = textMatch(value)
    text.source.push({ match: m, columns: [column] })
    textConds.push(m.on(`e.${column}`))
  }
  sourceTerm(f.source, 'entity_id')
  sourceTerm(f.assetKey, 'asset_key')
  sourceTerm(f.assetName, 'asset_name')
  const docTerm = (value: string | undefined, column: 'details' | 'peripheral_asset_id') => {
    if (value === undefined) return
    const m = textMatch(value)
    text.doc.push({ match: m, column })
    textConds.push(m.on(`e.${column}`))
  }
  docTerm(f.details, 'details')
  docTerm(f.peripheralAssetId, 'peripheral_asset_id')
  if (f.globalSearch !== undefined) {
    const m = textMatch(f.globalSearch)
    text.global = m
    textConds.push(any([
      m.on('e.description'), m.on('e.details'), m.on('e.entity_id'), m.on('e.event_code'), m.on('e.category'),
      m.on(SEVERITY_NAME_SQL), m.on('e.hashtags'), m.on('e.asset_name'),
    ]))
  }
  return {
    table: 'events',
    ...boundsPlan(f),
    kindOk: kindTests.length ? (k) => kindTests.every((t) => t(k)) : null,
    kindSql: all(kindConds),
    textSql: all(textConds),
    text: textConds.length ? text : null,
  }
}

function auditPlan(f: AuditFilter): Plan {
  const kindTests: ((k: AuditKind) => boolean)[] = []
  const kindConds: Cond[] = []
  const exact = <C extends keyof AuditKind>(column: C, value: AuditKind[C] | undefined) => {
    if (value === undefined) return
    kindTests.push((k) => k[column] === value)
    kindConds.push(cond(`e.${column} = ?`, value))
  }
  exact('severity', f.severity)
  if (f.minSeverity !== undefined) {
    const s = f.minSeverity
    kindTests.push((k) => k.severity <= s)
    kindConds.push(cond('e.severity <= ?', s))
  }
  if (f.categories) {
    const cs: readonly string[] = f.categories
    kindTests.push((k) => cs.includes(k.category))
    kindConds.push(inList('e.category', cs))
  }
  exact('asset_type', f.assetType)
  exact('asset_sub_type', f.assetSubType)
  exact('asset_detail', f.assetDetail)
  exact('asset_icon', f.assetIcon)
  const textConds: Cond[] = []
  const term = (value: string | undefined, columns: string[]) => {
    if (value === undefined) return
    const m = textMatch(value)
    textConds.push(columns.length === 1 ? m.on(columns[0]) : any(columns.map((c) => m.on(c))))
  }
  term(f.user, ['e.user_name'])
  term(f.description, ['e.description'])
  term(f.details, ['e.details'])
  term(f.asset, ['e.asset_key', 'e.asset_name', 'e.asset_ip'])
  term(f.assetKey, ['e.asset_key'])
  term(f.assetName, ['e.asset_name'])
  term(f.assetParentId, ['e.asset_parent_id'])
  term(f.assetIp, ['e.asset_ip'])
  term(f.globalSearch, ['e.description', 'e.details', 'e.user_name', 'e.source_ip', 'e.category', 'e.operation_id', 'e.asset_key', 'e.asset_name', 'e.asset_ip'])
  return {
    table: 'audit_trail',
    ...boundsPlan(f),
    kindOk: kindTests.length ? (k) => kindTests.every((t) => t(k)) : null,
    kindSql: all(kindConds),
    textSql: all(textConds),
    text: null,
  }
}

// ---------------------------------------------------------------------------------------
// Sorting

/** How a sort field is read: a column, a field of the kinds (grouped), or the id itself. */
interface SortField {
  column: string
  /** Sorts by a kind field: pages go through the kinds in order, each one by id. */
  kind?: string
  /** Order of kind values (numbers, text compared as SQLite's NOCASE does, or a fixed rank). */
  rank?: (value: unknown) => number | string
  nullable?: boolean
  nocase?: boolean
  /** The value compared when a page is re-sorted in memory (the feeds). */
  key: (r: any) => string | number | null
}

const nocaseKey = (v: unknown) => (v === null || v === undefined ? '' : asciiLower(String(v)))
const nocaseOrNull = (v: string | null) => (v === null ? null : asciiLower(v))
const severityNameRank = (v: unknown) => severityNames[Number(v)] ?? ''

const eventSorts: Record<string, SortField> = {
  eventID: { column: 'e.id', key: (r: EventRow) => r.id },
  date: { column: 'e.created_ms', key: (r: EventRow) => r.created_ms },
  creationTime: { column: 'e.created_ms', key: (r: EventRow) => r.created_ms },
  creationTimeEpoch: { column: 'e.created_ms', key: (r: EventRow) => r.created_ms },
  eventCode: { column: 'e.event_code', kind: 'event_code', rank: (v) => String(v), key: (r: EventRow) => r.event_code },
  severity: { column: 'e.severity', kind: 'severity', rank: (v) => Number(v), key: (r: EventRow) => r.severity },
  severityString: { column: SEVERITY_NAME_SQL, kind: 'severity', rank: severityNameRank, key: (r: EventRow) => severityNames[r.severity] },
  category: { column: 'e.category', kind: 'category', rank: (v) => String(v), key: (r: EventRow) => r.category },
  eventEntityID: { column: 'e.entity_id', nocase: true, key: (r: EventRow) => asciiLower(r.entity_id) },
  description: { column: 'e.description', kind: 'description', rank: nocaseKey, nocase: true, key: (r: EventRow) => asciiLower(r.description) },
  details: { column: 'e.details', nocase: true, key: (r: EventRow) => asciiLower(r.details) },
  hashtags: { column: 'e.hashtags', kind: 'hashtags', rank: nocaseKey, nullable: true, nocase: true, key: (r: EventRow) => nocaseOrNull(r.hashtags) },
  peripheralIcon: { column: 'e.peripheral_icon', kind: 'peripheral_icon', rank: (v) => Number(v), key: (r: EventRow) => r.peripheral_icon },
  assetKey: { column: 'e.asset_key', nullable: true, key: (r: EventRow) => r.asset_key },
  assetName: { column: 'e.asset_name', nullable: true, nocase: true, key: (r: EventRow) => nocaseOrNull(r.asset_name) },
  peripheralAssetId: { column: 'e.peripheral_asset_id', nullable: true, nocase: true, key: (r: EventRow) => nocaseOrNull(r.peripheral_asset_id) },
}

const auditSorts: Record<string, SortField> = {
  auditTrailID: { column: 'e.id', key: (r: AuditTrailRow) => r.id },
  date: { column: 'e.created_ms', key: (r: AuditTrailRow) => r.created_ms },
  creationTime: { column: 'e.created_ms', key: (r: AuditTrailRow) => r.created_ms },
  creationTimeEpoch: { column: 'e.created_ms', key: (r: AuditTrailRow) => r.created_ms },
  severity: { column: 'e.severity', kind: 'severity', rank: (v) => Number(v), key: (r: AuditTrailRow) => r.severity },
  severityString: { column: SEVERITY_NAME_SQL, kind: 'severity', rank: severityNameRank, key: (r: AuditTrailRow) => severityNames[r.severity] },
  category: { column: 'e.category', kind: 'category', rank: (v) => String(v), key: (r: AuditTrailRow) => r.category },
  user: { column: 'e.user_name', nullable: true, nocase: true, key: (r: AuditTrailRow) => nocaseOrNull(r.user_name) },
  sourceIp: { column: 'e.source_ip', nullable: true, key: (r: AuditTrailRow) => r.source_ip },
  description: { column: 'e.description', nocase: true, key: (r: AuditTrailRow) => asciiLower(r.description) },
  details: { column: 'e.details', nocase: true, key: (r: AuditTrailRow) => asciiLower(r.details) },
  operationId: { column: 'e.operation_id', kind: 'operation_id', rank: (v) => String(v), nullable: true, key: (r: AuditTrailRow) => r.operation_id },
  outcome: { column: 'e.outcome', kind: 'outcome', rank: (v) => String(v), key: (r: AuditTrailRow) => r.outcome },
  'assetReference.key': { column: 'e.asset_key', nullable: true, key: (r: AuditTrailRow) => r.asset_key },
  'assetReference.name': { column: 'e.asset_name', nullable: true, nocase: true, key: (r: AuditTrailRow) => nocaseOrNull(r.asset_name) },
  'assetReference.ipAddress': { column: 'e.asset_ip', nullable: true, key: (r: AuditTrailRow) => r.asset_ip },
  'assetReference.type': { column: 'e.asset_type', kind: 'asset_type', rank: (v) => String(v), key: (r: AuditTrailRow) => r.asset_type },
}

const isIdSort = (f: SortField) => f.column === 'e.id'
const isTimeSort = (f: SortField) => f.column === 'e.created_ms'

/** ORDER BY for a sort over rows (nulls last in either direction, id as the tie-breaker). */
function orderSql(f: SortField, dir: 'ASC' | 'DESC'): string {
  if (isIdSort(f)) return `e.id ${dir}`
  const nulls = f.nullable ? `${f.column} IS NULL, ` : ''
  return `${nulls}${f.column}${f.nocase ? ' COLLATE NOCASE' : ''} ${dir}, e.id ${dir}`
}

// ---------------------------------------------------------------------------------------
// The engine

/** A stretch of ids holding `n` matches (exactly). */
interface Segment { lo: number; hi: number; n: number; level: number }

const EXPORT_CHUNK = 1000
/** Up to this many matches a page is read by seeking them and sorting. */
const SEEK_MAX = 50_000

export interface ListAnswer<R> { total: number; filtered: number; rows: R[] }

export function eventQueriesRepo(db: DB, opts: IndexerOptions = {}) {
  const indexer = recordIndexer(db, opts)
  const cached = statementCache(db, 256)
  // Unicode case folding for "contains" terms beyond ASCII (see textMatch).
  db.function('event_contains', { deterministic: true }, (text: unknown, term: unknown) =>
    typeof text === 'string' && typeof term === 'string' && text.toLowerCase().includes(term) ? 1 : 0,
  )

  const tables = {
    events: { from: 'events', columns: EVENT_COLUMNS, sorts: eventSorts },
    audit_trail: { from: 'audit_trail', columns: AUDIT_COLUMNS, sorts: auditSorts },
  } as const
  const maxId = { events: db.prepare('SELECT max(id) FROM events').pluck(), audit_trail: db.prepare('SELECT max(id) FROM audit_trail').pluck() }
  const topId = (table: RecordTable) => (maxId[table].get() as number | null) ?? 0

  // ---- background indexing ----
  let running = false
  /** Indexes in slices of about 20 ms, one after another while behind, then every half second. */
  const tick = () => {
    if (!db.open) return
    let more = false
    try {
      const until = performance.now() + 20
      do {
        more = indexer.step('events', 2048) + indexer.step('audit_trail', 2048) > 0
      } while (more && performance.now() < until)
    } catch {
      // Busy (another process writes) or closing: try again on the next turn.
      more = false
    }
    if (db.open) {
      if (more) setImmediate(tick).unref()
      else setTimeout(tick, 500).unref()
    }
  }
  const startIndexing = () => {
    if (running) return
    running = true
    setImmediate(tick).unref()
  }

  // ---- kinds ----
  /** The ids of the kinds a plan allows (null: any). */
  function kindSet(p: Plan): number[] | null {
    if (!p.kindOk) return null
    const out: number[] = []
    for (const [id, k] of indexer.kinds(p.table) as Map<number, unknown>) if (p.kindOk(k)) out.push(id)
    return out
  }

  // ---- direct reads ----
  /** The id and time range; `hint` keeps the planner off the id order (`'id'`) or off both (`'both'`). */
  function rangeCond(p: Plan, lo: number, hi: number, hint: 'none' | 'id' | 'both' = 'none'): Cond {
    const c = [cond(`${hint === 'none' ? '' : '+'}e.id BETWEEN ? AND ?`, lo, hi)]
    if (p.times) c.push(cond(`${hint === 'both' ? '+' : ''}e.created_ms BETWEEN ? AND ?`, p.times.lo, p.times.hi))
    return all(c)!
  }
  const pred = (p: Plan) => all([p.kindSql, p.textSql])
  /** Matches with ids in [lo, hi], counted from the rows. */
  function countRows(p: Plan, lo: number, hi: number): number {
    if (lo > hi) return 0
    const w = all([rangeCond(p, lo, hi), pred(p)])!
    return cached(`SELECT count(*) FROM ${tables[p.table].from} e WHERE ${w.sql}`).pluck().get(...w.params) as number
  }

  // ---- block counts ----
  /**
   * The indexed matches of a plan without text conditions, as segments of ids in
   * ascending order, each with its exact count: whole blocks from the block counts, and
   * the rows read where a block straddles an end of the id or time range.
   */
  function segments(p: Plan, indexed: number, kinds: number[] | null): Segment[] {
    const lo = Math.max(1, p.ids.lo)
    const hi = Math.min(p.ids.hi, indexed)
    if (lo > hi || (kinds && kinds.length === 0)) return []
    const rollup = rollupTable[p.table]
    const kindFilter = kinds ? 'AND kind IN (SELECT value FROM json_each(?))' : ''
    const kindParam = kinds ? [JSON.stringify(kinds)] : []
    const blockRows = (level: number, from: number, to: number) =>
      cached(`SELECT block, n, min_ms, max_ms FROM ${rollup} WHERE level = ? AND block BETWEEN ? AND ? ${kindFilter} ORDER BY block`)
        .all(level, from, to, ...kindParam) as { block: number; n: number; min_ms: number; max_ms: number }[]
    const out: Segment[] = []
    const visit = (level: number, from: number, to: number) => {
      const shift = LEVEL_SHIFT[level]
      const rows = blockRows(level, from, to)
      for (let i = 0; i < rows.length;) {
        const block = rows[i].block
        let n = 0
        let straddles = false
        for (; i < rows.length && rows[i].block === block; i++) {
          const r = rows[i]
          if (p.times && (r.max_ms < p.times.lo || r.min_ms > p.times.hi)) continue
          if (p.times && (r.min_ms < p.times.lo || r.max_ms > p.times.hi)) straddles = true
          n += r.n
        }
        const bLo = block * 2 ** shift
        const bHi = Math.min(bLo + 2 ** shift - 1, indexed)
        const sLo = Math.max(bLo, lo)
        const sHi = Math.min(bHi, hi)
        const partial = sLo !== bLo || sHi !== bHi
        if (n === 0 && !partial) continue
        if (!partial && !straddles) out.push({ lo: sLo, hi: sHi, n, level })
        else if (level > 0) visit(level - 1, Math.floor(sLo / 2 ** LEVEL_SHIFT[level - 1]), Math.floor(sHi / 2 ** LEVEL_SHIFT[level - 1]))
        else {
          const exact = countRows(p, sLo, sHi)
          if (exact > 0) out.push({ lo: sLo, hi: sHi, n: exact, level: -1 })
        }
      }
    }
    const top = LEVEL_SHIFT.length - 1
    visit(top, Math.floor(lo / 2 ** LEVEL_SHIFT[top]), Math.floor(hi / 2 ** LEVEL_SHIFT[top]))
    return out
  }

  /** A segment of a higher level as the segments of the level below (to read rows from fewer ids). */
  function refine(p: Plan, s: Segment, kinds: number[] | null): Segment[] {
    if (s.level <= 0) return [s]
    return segments({ ...p, ids: { lo: s.lo, hi: s.hi } }, s.hi, kinds)
  }

  // ---- text (events) ----
  const sourcesFts = db.prepare<[string], number>('SELECT rowid FROM event_sources_fts WHERE event_sources_fts MATCH ?').pluck()
  const docsFts = db.prepare<[string], number>('SELECT rowid FROM event_docs_fts WHERE event_docs_fts MATCH ?').pluck()
  const sourceRows = db.prepare<[string], { id: number; entity_id: string; asset_key: string | null; asset_name: string | null; n: number }>(
    'SELECT id, entity_id, asset_key, asset_name, n FROM event_sources WHERE id IN (SELECT value FROM json_each(?))',
  )
  const docsByIds = db.prepare<[string], [number, number, number, number]>('SELECT id, kind, source, n FROM event_docs WHERE id IN (SELECT value FROM json_each(?))').raw()
  const docsBySources = db.prepare<[string], [number, number, number, number]>('SELECT id, kind, source, n FROM event_docs WHERE source IN (SELECT value FROM json_each(?))').raw()

  /** Sources any of whose `columns` contains the term. */
  function matchSources(m: TextMatch, columns: string[]): Set<number> {
    let ids: number[]
    if (m.trigram) ids = sourcesFts.all(m.phrase(columns))
    else {
      const w = any(columns.map((c) => m.on(c)))
      ids = cached(`SELECT id FROM event_sources WHERE ${w.sql}`).pluck().all(...w.params) as number[]
    }
    // The index narrows, the texts decide (the same test as on the rows).
    if (m.trigram) {
      const rows = sourceRows.all(JSON.stringify(ids))
      return new Set(rows.filter((r) => columns.some((c) => m.test(r[c as 'entity_id']))).map((r) => r.id))
    }
    return new Set(ids)
  }
  /** Documents whose `column` contains the term. */
  function matchDocs(m: TextMatch, column: string): Set<number> {
    if (m.trigram) return new Set(docsFts.all(m.phrase([column])))
    const w = m.on(column)
    return new Set(cached(`SELECT id FROM event_doc_texts WHERE ${w.sql}`).pluck().all(...w.params) as number[])
  }

  interface TextCount {
    /** Indexed matches. */
    n: number
    /** The asset keys of every source with a match (reading these finds every indexed match); null when too many or unknown. */
    keys: (string | null)[] | null
    /** Indexed events of those sources (what a seek reads). */
    seekRows: number
  }

  /** The indexed events matching the text (and kind) conditions, from the documents' counts. */
  function textCount(p: Plan, kinds: number[] | null): TextCount {
    const t = p.text!
    const kindAllowed = kinds ? new Set(kinds) : null
    const intersect = (a: Set<number> | null, b: Set<number>) => (a ? new Set([...a].filter((x) => b.has(x))) : b)
    let sources: Set<number> | null = null
    for (const s of t.source) sources = intersect(sources, matchSources(s.match, s.columns))
    let docs: Set<number> | null = null
    for (const d of t.doc) docs = intersect(docs, matchDocs(d.match, d.column))
    let n = 0
    const matchedSources = new Set<number>()
    const add = (rows: [number, number, number, number][], test: (id: number, kind: number, source: number) => boolean) => {
      for (const [id, kind, source, count] of rows) {
        if (kindAllowed && !kindAllowed.has(kind)) continue
        if (sources && !sources.has(source)) continue
        if (docs && !docs.has(id)) continue
        if (!test(id, kind, source)) continue
        n += count
        if (count > 0) matchedSources.add(source)
      }
    }
    const read = (stmt: typeof docsByIds, ids: Iterable<number>) => stmt.all(JSON.stringify([...ids]))
    if (!t.global && !docs && !kindAllowed) {
      // Sources alone: their own counts.
      const rows = sourceRows.all(JSON.stringify([...sources!]))
      const n = rows.reduce((a, r) => a + r.n, 0)
      if (rows.length > 20_000) return { n, keys: null, seekRows: Infinity }
      return { n, keys: [...new Set(rows.filter((r) => r.n > 0).map((r) => r.asset_key))], seekRows: n }
    }
    if (!t.global) {
      add(docs ? read(docsByIds, docs) : read(docsBySources, sources!), () => true)
    } else {
      const g = t.global
      // GlobalSearch: the kind's fields, the source's fields or the details.
      const globalKinds = new Set<number>()
      for (const [id, k] of indexer.kinds('events')) {
        if ([k.description, k.event_code, k.category, severityNames[k.severity], k.hashtags].some((v) => g.test(v))) globalKinds.add(id)
      }
      const gSources = matchSources(g, ['entity_id', 'asset_name'])
      const gDocs = matchDocs(g, 'details')
      const hit = (id: number, kind: number, source: number) => globalKinds.has(kind) || gSources.has(source) || gDocs.has(id)
      if (docs || sources) add(docs ? read(docsByIds, docs) : read(docsBySources, sources!), hit)
      else {
        // Kinds that match count whole (from the blocks); the documents add the others.
        const whole = kinds ? kinds.filter((k) => globalKinds.has(k)) : [...globalKinds]
        if (whole.length) {
          n += segments({ ...p, ids: { lo: 1, hi: MAX_ID }, times: null }, indexer.indexed('events'), whole).reduce((a, s) => a + s.n, 0)
        }
        const seen = new Set<number>()
        const rest = (id: number, kind: number) => !globalKinds.has(kind) && !seen.has(id) && (seen.add(id), true)
        add(read(docsByIds, gDocs), rest)
        add(read(docsBySources, gSources), rest)
        if (whole.length) return { n, keys: null, seekRows: Infinity }
      }
    }
    if (matchedSources.size > 20_000) return { n, keys: null, seekRows: Infinity }
    const rows = sourceRows.all(JSON.stringify([...matchedSources]))
    return { n, keys: [...new Set(rows.map((r) => r.asset_key))], seekRows: rows.reduce((a, r) => a + r.n, 0) }
  }

  /** Rows that a seek through the events' asset index reads: every event of these keys in the range, and every one above the mark. */
  function seekSource(keys: (string | null)[], indexed: number): Cond {
    const named = keys.filter((k): k is string => k !== null)
    const parts: Cond[] = []
    if (named.length) parts.push(cond('e.asset_key IN (SELECT value FROM json_each(?))', JSON.stringify(named)))
    if (named.length !== keys.length) parts.push(cond('e.asset_key IS NULL'))
    parts.push(cond('e.id > ?', indexed))
    return any(parts)
  }

  // ---- counting ----
  interface Counted {
    filtered: number
    indexed: number
    kinds: number[] | null
    /** Plans without text conditions: where the indexed matches are. */
    segments?: Segment[]
    /** Text plans: the cheaper way to find the matches. */
    text?: TextCount
    tail: number
  }

  function count(p: Plan): Counted {
    const indexed = indexer.indexed(p.table)
    const kinds = kindSet(p)
    if (p.empty) return { filtered: 0, indexed, kinds, segments: [], tail: 0 }
    const tailLo = Math.max(p.ids.lo, indexed + 1)
    if (!p.textSql) {
      const segs = segments(p, indexed, kinds)
      const tail = countRows(p, tailLo, p.ids.hi)
      return { filtered: segs.reduce((a, s) => a + s.n, 0) + tail, indexed, kinds, segments: segs, tail }
    }
    if (!p.text || indexed === 0) return { filtered: countRows(p, p.ids.lo, p.ids.hi), indexed, kinds, tail: 0 }
    const t = textCount(p as Plan, kinds)
    const tail = countRows(p, tailLo, p.ids.hi)
    const top = topId(p.table)
    if (p.ids.lo <= 1 && p.ids.hi >= top && !p.times) return { filtered: t.n + tail, indexed, kinds, text: t, tail }
    // A range of ids: count inside it, or count outside and subtract from the whole,
    // whichever reads fewer rows (a poller near the newest events reads few either way).
    const hi = Math.min(p.ids.hi, top)
    if (!p.times) {
      const inside = rowsToRead(p, t, p.ids.lo, hi)
      const outside = rowsToRead(p, t, 1, p.ids.lo - 1) + rowsToRead(p, t, hi + 1, top)
      if (outside < inside) {
        const whole = t.n + countRows(p, indexed + 1, top)
        const out = countIn(p as Plan, t, 1, p.ids.lo - 1, indexed) + countIn(p as Plan, t, hi + 1, top, indexed)
        return { filtered: whole - out, indexed, kinds, text: t, tail }
      }
    }
    return { filtered: countIn(p as Plan, t, p.ids.lo, hi, indexed), indexed, kinds, text: t, tail }
  }

  /** About how many rows counting matches in [lo, hi] reads: the ids, or the seek's share of them. */
  function rowsToRead(p: Plan, t: TextCount, lo: number, hi: number): number {
    if (lo > hi) return 0
    const span = hi - lo + 1
    const top = Math.max(1, topId(p.table))
    return Math.min(span, t.keys ? (t.seekRows * span) / top : Infinity)
  }

  /** Matches with ids in [lo, hi], through the asset index when that reads fewer rows. */
  function countIn(p: Plan, t: TextCount, lo: number, hi: number, indexed: number): number {
    if (lo > hi) return 0
    const span = hi - lo + 1
    const top = Math.max(1, topId(p.table))
    if (t.keys && (t.seekRows * span) / top < span / 2) {
      const w = all([rangeCond(p, lo, hi, 'both'), seekSource(t.keys, indexed), pred(p)])!
      return cached(`SELECT count(*) FROM events e WHERE ${w.sql}`).pluck().get(...w.params) as number
    }
    return countRows(p, lo, hi)
  }

  // ---- pages ----
  const rowsOf = <R>(p: Plan, where: Cond, order: string, limit: number, offset: number): R[] =>
    cached(`SELECT ${tables[p.table].columns} FROM ${tables[p.table].from} e WHERE ${where.sql} ORDER BY ${order} LIMIT ? OFFSET ?`)
      .all(...where.params, limit, offset) as R[]

  /** A page in id order, from the counted segments (and the rows above the mark). */
  function idPage<R>(p: Plan, c: Counted, dir: 'ASC' | 'DESC', limit: number, offset: number): R[] {
    const tailSeg: Segment = { lo: Math.max(p.ids.lo, c.indexed + 1), hi: p.ids.hi, n: c.tail, level: -1 }
    const segs = [...(c.segments ?? []), ...(tailSeg.n > 0 ? [tailSeg] : [])]
    if (dir === 'DESC') segs.reverse()
    const out: R[] = []
    let skip = offset
    const where = pred(p)
    const take = (s: Segment) => {
      if (skip >= s.n) {
        skip -= s.n
        return
      }
      for (const fine of s.level > 0 ? (dir === 'DESC' ? refine(p, s, c.kinds).reverse() : refine(p, s, c.kinds)) : [s]) {
        if (out.length === limit) return
        if (skip >= fine.n) {
          skip -= fine.n
          continue
        }
        const rows = rowsOf<R>(p, all([rangeCond(p, fine.lo, fine.hi), where])!, `e.id ${dir}`, limit - out.length, skip)
        skip = 0
        out.push(...rows)
      }
    }
    for (const s of segs) {
      if (out.length === limit) break
      take(s)
    }
    return out
  }

  /** Where the matches of a text plan are read from: its seek (few matches) or the range itself. */
  function textWhere(p: Plan, c: Counted, needed: number): Cond {
    const t = c.text
    const lo = p.ids.lo
    const hi = Math.min(p.ids.hi, topId(p.table))
    const span = Math.max(0, hi - lo + 1)
    const walk = c.filtered === 0 ? 0 : Math.min(span, (needed * span) / c.filtered)
    const seek = t?.keys ? (t.seekRows * span) / Math.max(1, topId(p.table)) + c.tail : Infinity
    if (seek * 3 < walk) return all([rangeCond(p, lo, p.ids.hi, 'both'), seekSource(t!.keys!, c.indexed), pred(p)])!
    return all([rangeCond(p, lo, p.ids.hi), pred(p)])!
  }

  /** A page in the order of a kind field: the kinds' values in order, each read by id. */
  function kindPage<R>(p: Plan, c: Counted, f: SortField, dir: 'ASC' | 'DESC', limit: number, offset: number): R[] {
    const column = f.kind!
    const kinds = indexer.kinds(p.table) as unknown as Map<number, Record<string, unknown>>
    // Values of kinds not indexed yet come from the rows above the mark.
    const values = new Map<string, unknown>()
    for (const k of kinds.values()) values.set(String(f.rank!(k[column])) + '\u0001' + String(k[column] ?? '\u0002'), k[column] ?? null)
    const tailValues = cached(`SELECT DISTINCT ${column} FROM ${tables[p.table].from} WHERE id > ?`).pluck().all(c.indexed) as unknown[]
    for (const v of tailValues) values.set(String(f.rank!(v)) + '\u0001' + String(v ?? '\u0002'), v ?? null)
    const groups = [...values.values()]
    const rank = (v: unknown) => f.rank!(v)
    groups.sort((a, b) => {
      if (f.nullable && (a === null) !== (b === null)) return a === null ? 1 : -1
      const ra = rank(a), rb = rank(b)
      const cmp = ra < rb ? -1 : ra > rb ? 1 : 0
      return dir === 'ASC' ? cmp : -cmp
    })
    // Values equal under the rank (text differing in case only) form one group.
    const merged: unknown[][] = []
    for (const g of groups) {
      const last = merged[merged.length - 1]
      if (last && g !== null && last[0] !== null && rank(last[0]) === rank(g)) last.push(g)
      else merged.push([g])
    }
    const out: R[] = []
    let skip = offset
    for (const group of merged) {
      if (out.length === limit) break
      const nullGroup = group[0] === null
      const gSet = new Set(group)
      const gp: Plan = {
        ...p,
        kindOk: (k: Record<string, unknown>) => gSet.has(k[column] ?? null) && (!p.kindOk || p.kindOk(k)),
        kindSql: all([p.kindSql, nullGroup ? cond(`e.${column} IS NULL`) : inList(`e.${column}`, group)]),
      }
      const gc = count(gp)
      if (skip >= gc.filtered) {
        skip -= gc.filtered
        continue
      }
      const rows = pageOf<R>(gp, gc, eventOrAudit(p).sorts[isAudit(p) ? 'auditTrailID' : 'eventID'], dir, limit - out.length, skip)
      skip = 0
      out.push(...rows)
    }
    return out
  }
  const isAudit = (p: Plan) => p.table === 'audit_trail'
  const eventOrAudit = (p: Plan) => tables[p.table]

  function pageOf<R>(p: Plan, c: Counted, f: SortField, dir: 'ASC' | 'DESC', limit: number, offset: number): R[] {
    if (c.filtered <= offset || limit === 0) return []
    if (isIdSort(f)) {
      if (!p.textSql) return idPage<R>(p, c, dir, limit, offset)
      return rowsOf<R>(p, textWhere(p, c, offset + limit), `e.id ${dir}`, limit, offset)
    }
    if (f.kind) return kindPage<R>(p, c, f, dir, limit, offset)
    const order = orderSql(f, dir)
    // Few matches: find them (the seek or the range) and sort them. Many: walk the time
    // index in order (for a time sort), or sort them all (other fields have no index).
    if (c.filtered <= SEEK_MAX || !isTimeSort(f)) {
      const where = p.textSql ? textWhere(p, c, c.filtered) : all([rangeCond(p, p.ids.lo, p.ids.hi), pred(p)])!
      return rowsOf<R>(p, where, order, limit, offset)
    }
    return rowsOf<R>(p, all([rangeCond(p, p.ids.lo, p.ids.hi, 'id'), pred(p)])!, order, limit, offset)
  }

  function list<R>(p: Plan, s: Sort, limit: number, offset: number): ListAnswer<R> {
    startIndexing()
    const total = countAll(p.table)
    const c = count(p)
    const f = tables[p.table].sorts[s.field]
    const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
    return { total, filtered: c.filtered, rows: pageOf<R>(p, c, f, dir, limit, offset) }
  }

  /** Every record of a table, from the block counts and the rows above the mark. */
  function countAll(table: RecordTable): number {
    const indexed = indexer.indexed(table)
    const blocks = cached(`SELECT coalesce(sum(n), 0) FROM ${rollupTable[table]} WHERE level = ${LEVEL_SHIFT.length - 1}`).pluck().get() as number
    return blocks + (cached(`SELECT count(*) FROM ${table} WHERE id > ?`).pluck().get(indexed) as number)
  }

  /**
   * The integration feed: the oldest `limit` matches (after `offset` of them), then ordered
   * by the sort (newest first by default).
   */
  function feed<R extends { id: number }>(p: Plan, s: Sort, limit: number, offset: number): ListAnswer<R> {
    const idSort: Sort = { field: isAudit(p) ? 'auditTrailID' : 'eventID', direction: 'asc' }
    const answer = list<R>(p, idSort, limit, offset)
    const f = tables[p.table].sorts[s.field]
    const sign = s.direction === 'asc' ? 1 : -1
    answer.rows = answer.rows
      .map((r) => ({ r, k: f.key(r) }))
      .sort((a, b) => {
        // Nulls last in either direction, as in the lists.
        if (a.k === null || b.k === null) return a.k === b.k ? sign * (a.r.id - b.r.id) : a.k === null ? 1 : -1
        const cmp = a.k < b.k ? -1 : a.k > b.k ? 1 : 0
        return sign * (cmp || a.r.id - b.r.id)
      })
      .map((x) => x.r)
    return answer
  }

  /**
   * Every match in order, up to `cap`, read a chunk at a time (other requests run between
   * chunks; memory stays flat): id orders walk the ids; other orders read the ordered ids
   * once (8 bytes a record), then the rows by id.
   */
  async function* iterate<R extends { id: number }>(p: Plan, s: Sort, cap: number): AsyncGenerator<R> {
    const f = tables[p.table].sorts[s.field]
    const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
    const from = tables[p.table].from
    const pause = () => new Promise((resolve) => setImmediate(resolve))
    let left = cap
    if (isIdSort(f)) {
      let lo = p.ids.lo
      let hi = Math.min(p.ids.hi, topId(p.table))
      const where = pred(p)
      while (left > 0 && lo <= hi) {
        const w = all([rangeCond(p, lo, hi), where])!
        const rows = rowsOf<R>(p, w, `e.id ${dir}`, Math.min(EXPORT_CHUNK, left), 0)
        for (const r of rows) yield r
        left -= rows.length
        if (rows.length < Math.min(EXPORT_CHUNK, left + rows.length)) break
        if (dir === 'DESC') hi = rows[rows.length - 1].id - 1
        else lo = rows[rows.length - 1].id + 1
        await pause()
      }
      return
    }
    const c = count(p)
    const where = p.textSql ? textWhere(p, c, c.filtered) : all([rangeCond(p, p.ids.lo, p.ids.hi), pred(p)])!
    const ids = cached(`SELECT e.id FROM ${from} e WHERE ${where.sql} ORDER BY ${orderSql(f, dir)} LIMIT ?`).pluck().all(...where.params, cap) as number[]
    const byIds = cached(`SELECT ${tables[p.table].columns} FROM ${from} e WHERE e.id IN (SELECT value FROM json_each(?))`)
    for (let i = 0; i < ids.length; i += EXPORT_CHUNK) {
      if (i > 0) await pause()
      const chunk = ids.slice(i, i + EXPORT_CHUNK)
      const byId = new Map((byIds.all(JSON.stringify(chunk)) as R[]).map((r) => [r.id, r]))
      for (const id of chunk) {
        const r = byId.get(id)
        if (r) yield r
      }
    }
  }

  return {
    indexer,
    /** Starts indexing in the background (the first list does it too). */
    startIndexing,
    /** Indexes everything written so far, now (tests, scripts). */
    catchUp(): number {
      return indexer.catchUp('events') + indexer.catchUp('audit_trail')
    },
    events: {
      list: (f: EventFilter, s: Sort, limit: number, offset: number) => list<EventRow>(eventPlan(f), s, limit, offset),
      feed: (f: EventFilter, s: Sort, limit: number, offset: number) => feed<EventRow>(eventPlan(f), s, limit, offset),
      count: (f: EventFilter) => (startIndexing(), count(eventPlan(f)).filtered),
      iterate: (f: EventFilter, s: Sort, cap: number) => iterate<EventRow>(eventPlan(f), s, cap),
    },
    audit: {
      list: (f: AuditFilter, s: Sort, limit: number, offset: number) => list<AuditTrailRow>(auditPlan(f), s, limit, offset),
      feed: (f: AuditFilter, s: Sort, limit: number, offset: number) => feed<AuditTrailRow>(auditPlan(f), s, limit, offset),
      count: (f: AuditFilter) => (startIndexing(), count(auditPlan(f)).filtered),
      iterate: (f: AuditFilter, s: Sort, cap: number) => iterate<AuditTrailRow>(auditPlan(f), s, cap),
    },
  }
}
export type EventQueriesRepo = ReturnType<typeof eventQueriesRepo>
