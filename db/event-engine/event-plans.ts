// How a filter and a sort of the event and audit-trail lists become a question in the
// query engine's terms (db/event-engine/event-queries.ts): the conditions over a row's columns, what the
// kinds and the texts must hold, and the order of each sort field.
import type { AuditKind, EventKind } from './event-index.js'
import { AUDIT_FIELDS, type AuditFilter, type Bounds, EVENT_FIELDS, type EventFilter, type RecordTable } from '../../lib/events/ports.js'
import { contains as likePattern } from '../sql.js'
import { severityNames } from '../../lib/ports.js'

// ---------------------------------------------------------------------------------------
// Conditions

/** A condition over a row (alias `e`), with its parameters. */
export interface Cond {
  sql: string
  params: unknown[]
}

export function all(conds: (Cond | null | undefined)[]): Cond | null {
  const cs = conds.filter((c): c is Cond => !!c)
  if (!cs.length) return null
  return { sql: cs.map((c) => c.sql).join(' AND '), params: cs.flatMap((c) => c.params) }
}
export function any(conds: Cond[]): Cond {
  return { sql: `(${conds.map((c) => c.sql).join(' OR ')})`, params: conds.flatMap((c) => c.params) }
}
export const cond = (sql: string, ...params: unknown[]): Cond => ({ sql, params })

export const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase())
export const hasNonAscii = (s: string) => /[^\u0000-\u007f]/.test(s)

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
    /** The term as tests compare it (case folded). */
    folded,
    on: (column: string): Cond => (unicode ? cond(`event_contains(${column}, ?)`, folded) : cond(`${column} LIKE ? ESCAPE '\\'`, like)),
    test: (value: string | null | undefined): boolean => value !== null && value !== undefined && (unicode ? value.toLowerCase() : asciiLower(value)).includes(folded),
    /** An FTS5 query: the exact substring in any of the columns. */
    phrase: (columns: string[]) => `{${columns.join(' ')}} : "${term.replace(/"/g, '""')}"`,
  }
}
export type TextMatch = ReturnType<typeof textMatch>

export const SEVERITY_NAME_SQL = `CASE e.severity ${severityNames.map((n, i) => `WHEN ${i} THEN '${n}'`).join(' ')} END`

export interface Range {
  lo: number
  hi: number
}

/** A question in the engine's terms. */
export interface Plan {
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
  /** The columns a page reads (default: every field of the table); `e.id` for a page of ids. */
  columns?: string
}

/** The text conditions of an event filter, by what they look at. */
export interface EventText {
  source: { match: TextMatch; columns: ('entity_id' | 'asset_key' | 'asset_name')[] }[]
  doc: { match: TextMatch; column: 'details' | 'peripheral_asset_id' }[]
  global: TextMatch | null
  /**
   * The text conditions with GlobalSearch tested only where it can match: in the details,
   * and in the kinds' columns or the sources' only where some kind or source has it.
   */
  narrowed: ((cols: GlobalCols) => Cond) | null
}

/** Whether GlobalSearch matches any kind's columns, any source's columns (indexed records). */
export interface GlobalCols {
  kinds: boolean
  sources: boolean
}

export function boundsPlan(b: Bounds): Pick<Plan, 'ids' | 'times' | 'empty'> {
  return {
    ids: { lo: b.idFrom, hi: b.idTo },
    times: b.timeFrom === null && b.timeTo === null ? null : { lo: b.timeFrom ?? Number.MIN_SAFE_INTEGER, hi: b.timeTo ?? Number.MAX_SAFE_INTEGER },
    empty: b.empty,
  }
}

export const inList = (column: string, values: readonly unknown[]) => cond(`${column} IN (${values.map(() => '?').join(', ')})`, ...values)

export function eventPlan(f: EventFilter): Plan {
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
  const text: EventText = { source: [], doc: [], global: null, narrowed: null }
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
    const others = [...textConds]
    const kindCols = [m.on('e.description'), m.on('e.event_code'), m.on('e.category'), m.on(SEVERITY_NAME_SQL), m.on('e.hashtags')]
    const sourceCols = [m.on('e.entity_id'), m.on('e.asset_name')]
    text.narrowed = (cols) => all([...others, any([m.on('e.details'), ...(cols.kinds ? kindCols : []), ...(cols.sources ? sourceCols : [])])])!
    textConds.push(any([m.on('e.description'), m.on('e.details'), m.on('e.entity_id'), m.on('e.event_code'), m.on('e.category'), m.on(SEVERITY_NAME_SQL), m.on('e.hashtags'), m.on('e.asset_name')]))
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

export function auditPlan(f: AuditFilter): Plan {
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
export interface SortField {
  column: string
  /** Sorts by a kind field: pages go through the kinds in order, each one by id. */
  kind?: string
  /** Order of kind values (numbers, text compared as SQLite's NOCASE does, or a fixed rank). */
  rank?: (value: unknown) => number | string
  nullable?: boolean
  nocase?: boolean
  /** The value compared when a page is re-sorted in memory (the feeds), from a row as an array of the table's fields. */
  key: (r: unknown[]) => string | number | null
}

export const nocaseKey = (v: unknown) => (v === null || v === undefined ? '' : asciiLower(String(v)))
export const nocaseOrNull = (v: unknown) => (v === null ? null : asciiLower(v as string))
export const severityNameRank = (v: unknown) => severityNames[Number(v)] ?? ''

/** Where each field sits in a row read as an array. */
const at = <F extends readonly string[]>(fields: F) => Object.fromEntries(fields.map((f, i) => [f, i])) as Record<F[number], number>
const E = at(EVENT_FIELDS)
const A = at(AUDIT_FIELDS)
const cell =
  (i: number) =>
  (r: unknown[]): string | number | null =>
    r[i] as string | number | null
const nocaseCell = (i: number) => (r: unknown[]) => nocaseOrNull(r[i])

export const eventSorts: Record<string, SortField> = {
  eventID: { column: 'e.id', key: cell(E.id) },
  date: { column: 'e.created_ms', key: cell(E.created_ms) },
  creationTime: { column: 'e.created_ms', key: cell(E.created_ms) },
  creationTimeEpoch: { column: 'e.created_ms', key: cell(E.created_ms) },
  eventCode: { column: 'e.event_code', kind: 'event_code', rank: (v) => String(v), key: cell(E.event_code) },
  severity: { column: 'e.severity', kind: 'severity', rank: (v) => Number(v), key: cell(E.severity) },
  severityString: { column: SEVERITY_NAME_SQL, kind: 'severity', rank: severityNameRank, key: (r) => severityNames[r[E.severity] as number] },
  category: { column: 'e.category', kind: 'category', rank: (v) => String(v), key: cell(E.category) },
  eventEntityID: { column: 'e.entity_id', nocase: true, key: nocaseCell(E.entity_id) },
  description: { column: 'e.description', kind: 'description', rank: nocaseKey, nocase: true, key: nocaseCell(E.description) },
  details: { column: 'e.details', nocase: true, key: nocaseCell(E.details) },
  hashtags: { column: 'e.hashtags', kind: 'hashtags', rank: nocaseKey, nullable: true, nocase: true, key: nocaseCell(E.hashtags) },
  peripheralIcon: { column: 'e.peripheral_icon', kind: 'peripheral_icon', rank: (v) => Number(v), key: cell(E.peripheral_icon) },
  assetKey: { column: 'e.asset_key', nullable: true, key: cell(E.asset_key) },
  assetName: { column: 'e.asset_name', nullable: true, nocase: true, key: nocaseCell(E.asset_name) },
  peripheralAssetId: { column: 'e.peripheral_asset_id', nullable: true, nocase: true, key: nocaseCell(E.peripheral_asset_id) },
}

export const auditSorts: Record<string, SortField> = {
  auditTrailID: { column: 'e.id', key: cell(A.id) },
  date: { column: 'e.created_ms', key: cell(A.created_ms) },
  creationTime: { column: 'e.created_ms', key: cell(A.created_ms) },
  creationTimeEpoch: { column: 'e.created_ms', key: cell(A.created_ms) },
  severity: { column: 'e.severity', kind: 'severity', rank: (v) => Number(v), key: cell(A.severity) },
  severityString: { column: SEVERITY_NAME_SQL, kind: 'severity', rank: severityNameRank, key: (r) => severityNames[r[A.severity] as number] },
  category: { column: 'e.category', kind: 'category', rank: (v) => String(v), key: cell(A.category) },
  user: { column: 'e.user_name', nullable: true, nocase: true, key: nocaseCell(A.user_name) },
  sourceIp: { column: 'e.source_ip', nullable: true, key: cell(A.source_ip) },
  description: { column: 'e.description', nocase: true, key: nocaseCell(A.description) },
  details: { column: 'e.details', nocase: true, key: nocaseCell(A.details) },
  operationId: { column: 'e.operation_id', kind: 'operation_id', rank: (v) => String(v), nullable: true, key: cell(A.operation_id) },
  outcome: { column: 'e.outcome', kind: 'outcome', rank: (v) => String(v), key: cell(A.outcome) },
  'assetReference.key': { column: 'e.asset_key', nullable: true, key: cell(A.asset_key) },
  'assetReference.name': { column: 'e.asset_name', nullable: true, nocase: true, key: nocaseCell(A.asset_name) },
  'assetReference.ipAddress': { column: 'e.asset_ip', nullable: true, key: cell(A.asset_ip) },
  'assetReference.type': { column: 'e.asset_type', kind: 'asset_type', rank: (v) => String(v), key: cell(A.asset_type) },
}

export const isIdSort = (f: SortField) => f.column === 'e.id'
export const isTimeSort = (f: SortField) => f.column === 'e.created_ms'

/**
 * The sort fields that order every match before a page can be cut: free texts, which no
 * index or kind order holds (the cost grows with the matches, seconds at millions).
 */
export const sortsEveryMatch = (f: SortField) => !isIdSort(f) && !isTimeSort(f) && !f.kind
export const sortedByRows = (sorts: Record<string, SortField>) => Object.keys(sorts).filter((k) => sortsEveryMatch(sorts[k]))

/** ORDER BY for a sort over rows (nulls last in either direction, id as the tie-breaker). */
export function orderSql(f: SortField, dir: 'ASC' | 'DESC'): string {
  if (isIdSort(f)) return `e.id ${dir}`
  const nulls = f.nullable ? `${f.column} IS NULL, ` : ''
  return `${nulls}${f.column}${f.nocase ? ' COLLATE NOCASE' : ''} ${dir}, e.id ${dir}`
}
