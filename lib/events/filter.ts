// The filters of the event and audit-trail lists, read once from a query (GetEvents,
// GetEventsIntegration, GetAuditTrails, GetAuditsIntegration) or from an export body that
// mirrors it, into one normalized shape. Bad values answer 400 naming the filter.
import { date, oneOrMore, severity, filterText as text, filterTerm as term, type Where } from '../listing.js'
import { invalidField } from '../errors.js'
import { auditCategories, eventCategories, MAX_ID, type AuditFilter, type Bounds, type EventFilter } from './ports.js'

// The shapes are the ports' (lib/events/ports.ts: the repositories take them); here with the reading of them.
export { auditCategories, eventCategories, MAX_ID, type AuditFilter, type Bounds, type EventFilter } from './ports.js'

const DAY_MS = 86_400_000

type Source = Record<string, unknown>

function integer(src: Source, name: string, where: Where, min: number, max: number): number | undefined {
  const v = src[name]
  if (v === undefined || v === null || v === '') return undefined
  const n = typeof v === 'number' ? v : Number(v)
  if (!Number.isInteger(n) || n < min || n > max) throw invalidField(where, name, `must be an integer from ${min} to ${max}`)
  return n
}

/** A time filter's instant, rounded up (a "from" bound) when the value is finer than milliseconds. */
function instant(value: string | undefined, name: string, where: Where, roundUp: boolean): number | undefined {
  const ms = date(value, name, where)
  if (ms === undefined) return undefined
  const beyondMs = /\.\d{3}(\d+)/.exec(value!)?.[1]
  return roundUp && beyondMs && /[1-9]/.test(beyondMs) ? ms + 1 : ms
}

const dateOnly = (value: string) => /^\d{4}-\d{2}-\d{2}$/.test(value.trim())

/** The id, time and severity filters, by the names each list gives them. */
function readBounds(src: Source, where: Where, names: { idFrom: string; idTo: string; epochFrom?: string; epochTo?: string }): Bounds {
  const b: Bounds = { idFrom: 1, idTo: MAX_ID, timeFrom: null, timeTo: null, empty: false }
  const from = (ms: number | undefined) => {
    if (ms !== undefined) b.timeFrom = b.timeFrom === null ? ms : Math.max(b.timeFrom, ms)
  }
  const to = (ms: number | undefined) => {
    if (ms !== undefined) b.timeTo = b.timeTo === null ? ms : Math.min(b.timeTo, ms)
  }
  const day = text(src, 'Date')
  if (date(day, 'Date', where) !== undefined) {
    // The calendar day written, as a UTC day: the time and zone that came with it are ignored.
    const [, y, m, d] = /^(\d{4})-(\d{2})-(\d{2})/.exec(day!.trim())!
    const start = Date.UTC(+y, +m - 1, +d)
    from(start)
    to(start + DAY_MS - 1)
  }
  const fromDate = text(src, 'FromDate')
  from(instant(fromDate, 'FromDate', where, true))
  const toDate = text(src, 'ToDate')
  const toMs = instant(toDate, 'ToDate', where, false)
  // A date without a time means the end of that day.
  if (toMs !== undefined) to(dateOnly(toDate!) ? toMs + DAY_MS - 1 : toMs)
  if (names.epochFrom) from(integer(src, names.epochFrom, where, 0, MAX_ID))
  if (names.epochTo) to(integer(src, names.epochTo, where, 0, MAX_ID))
  const idFrom = integer(src, names.idFrom, where, 0, MAX_ID)
  const idTo = integer(src, names.idTo, where, 0, MAX_ID)
  if (idFrom !== undefined) b.idFrom = Math.max(1, idFrom)
  if (idTo !== undefined) b.idTo = idTo
  const exact = severity(text(src, 'Severity'), 'Severity', where)
  const min = severity(text(src, 'MinimumSeverity'), 'MinimumSeverity', where)
  if (exact !== undefined) b.severity = exact
  if (min !== undefined) b.minSeverity = min
  b.empty = b.idFrom > b.idTo || (b.timeFrom !== null && b.timeTo !== null && b.timeFrom > b.timeTo) || (exact !== undefined && min !== undefined && exact > min)
  return b
}

function icons(src: Source, name: string, where: Where): number[] | undefined {
  const v = text(src, name)
  if (v === undefined) return undefined
  const out: number[] = []
  for (const raw of v.split(',')) {
    const n = Number(raw.trim())
    if (raw.trim() === '' || !Number.isInteger(n) || n < -1 || n > 255) {
      throw invalidField(where, name, `has "${raw.trim().slice(0, 20)}": use icon codes from -1 to 255, comma-separated (e.g. 1,2,3)`)
    }
    if (!out.includes(n)) out.push(n)
  }
  return out
}

/** The filters of GetEvents (and its integration feed and exports); export bodies use the same names. */
export function eventFilter(src: Source | null | undefined, where: Where = 'query'): EventFilter {
  const s = src ?? {}
  const f: EventFilter = readBounds(s, where, { idFrom: 'FromEventId', idTo: 'ToEventId', epochFrom: 'FromCreationTimeEpoch', epochTo: 'ToCreationTimeEpoch' })
  const set = <K extends keyof EventFilter>(key: K, value: EventFilter[K] | undefined) => {
    if (value !== undefined) f[key] = value
  }
  set('categories', oneOrMore(text(s, 'Category'), 'Category', eventCategories, where))
  set('icons', icons(s, 'PeripheralIcon', where))
  set('source', term(s, 'Source', where))
  set('description', term(s, 'Description', where))
  set('details', term(s, 'Details', where))
  set('assetKey', term(s, 'AssetKey', where))
  set('assetName', term(s, 'AssetName', where))
  set('peripheralAssetId', term(s, 'PeripheralAssetId', where))
  set('globalSearch', term(s, 'GlobalSearch', where))
  return f
}

/**
 * The filters of GetAuditTrails (and its feed and exports). The `AssetReference.*` query
 * parameters are the properties of the `AssetReference` object in export bodies.
 */
export function auditFilter(src: Source | null | undefined, where: Where = 'query'): AuditFilter {
  const s = src ?? {}
  const f: AuditFilter = readBounds(s, where, { idFrom: 'FromAuditTrailId', idTo: 'ToAuditTrailId' })
  const set = <K extends keyof AuditFilter>(key: K, value: AuditFilter[K] | undefined) => {
    if (value !== undefined) f[key] = value
  }
  // In a body the asset filters are one object; in a query, dotted names.
  const nested = where === 'body' && s.AssetReference && typeof s.AssetReference === 'object' ? (s.AssetReference as Source) : null
  const ref = (name: string): [Source, string] => (nested ? [nested, name] : [s, `AssetReference.${name}`])
  const refTerm = (name: string) => {
    const [o, n] = ref(name)
    return term(o, n, where)
  }
  set('categories', oneOrMore(text(s, 'Category'), 'Category', auditCategories, where))
  set('user', term(s, 'User', where))
  set('description', term(s, 'Description', where))
  set('details', term(s, 'Details', where))
  set('asset', term(s, 'Asset', where))
  set('assetKey', refTerm('Key'))
  set('assetName', refTerm('Name'))
  set('assetParentId', refTerm('ParentID'))
  set('assetIp', refTerm('IpAddress'))
  set('assetType', text(...ref('Type')))
  set('assetSubType', text(...ref('SubType')))
  set('assetDetail', text(...ref('AllAssetTypeDetail')))
  const [io, iname] = ref('Icon')
  set('assetIcon', integer(io, iname, where, -1, 255))
  set('globalSearch', term(s, 'GlobalSearch', where))
  return f
}

/**
 * Whether a GetEvents query is the incident fetch of the SOAR integration: `date_asc` with a
 * lower bound (`FromEventId`, `FromDate` or `FromCreationTimeEpoch`), whatever else it
 * bounds. That client keeps `data[0].eventID + 1` as its next `FromEventId`, from its first
 * call (by `FromDate` and `ToDate`) on, so it is answered as the integration feed is: the
 * oldest matching events, newest first. A console asks for a time order by the field it
 * shows (`creationTime`), or without a lower bound, and gets that order.
 */
export function isIncidentFetch(src: Source | null | undefined, order: { field: string; direction: 'asc' | 'desc' }): boolean {
  if (order.field !== 'date' || order.direction !== 'asc' || !src) return false
  return ['FromEventId', 'FromDate', 'FromCreationTimeEpoch'].some((name) => text(src, name) !== undefined)
}

/** The filters a caller gave, as label and value (for the PDF's header and the audit record). */
export function givenFilters(src: unknown, ignored: readonly string[] = ['pagenumber', 'pagesize', 'sortby']): [string, string][] {
  if (!src || typeof src !== 'object') return []
  const out: [string, string][] = []
  for (const [k, v] of Object.entries(src)) {
    if (v === null || v === undefined || v === '' || ignored.includes(k.toLowerCase())) continue
    if (typeof v === 'object') {
      for (const [k2, v2] of Object.entries(v as Source)) if (v2 !== null && v2 !== undefined && v2 !== '') out.push([`${k}.${k2}`, String(v2)])
    } else out.push([k, String(v)])
  }
  return out
}
