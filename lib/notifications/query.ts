// The risk list's query (`riskNotificationViewQuery`): every value arrives as a string.
// The contract's schema has already refused unknown parameters and malformed values;
// this reads the values and refuses the ones a pattern cannot (ranges, real dates).
import type { Operation } from '../contract.js'
import { invalidField } from '../errors.js'
import { bool, date, MAX_NOTIFICATION_PAGE_SIZE, DEFAULT_PAGE_SIZE, oneOrMore, severity, sort, type Sort } from '../listing.js'
import type { RiskFilter } from './ports.js'
import { riskKinds } from './views.js'

const DAY_MS = 86_400_000
const INT32_MAX = 2_147_483_647

export interface RiskQuery {
  filter: RiskFilter
  sort: Sort
  pageSize: number
  offset: number
}

function integer(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback
  const n = /^[0-9]{1,10}$/.test(value) ? Number(value) : NaN
  if (!(n >= min && n <= max)) throw invalidField('query', name, `must be an integer from ${min} to ${max}`)
  return n
}

function term(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined
  if (value.includes('\u0000')) throw invalidField('query', name, 'must not contain the NUL character')
  return value
}

function hex4(value: string | undefined, name: string): string | undefined {
  if (value === undefined) return undefined
  if (!/^[0-9A-Fa-f]{4}$/.test(value)) throw invalidField('query', name, 'must be 4 hexadecimal digits')
  return value.toUpperCase()
}

export function riskQuery(op: Operation, q: Record<string, string | undefined>): RiskQuery {
  const filter: RiskFilter = {}
  const set = <K extends keyof RiskFilter>(key: K, value: RiskFilter[K] | undefined) => {
    if (value !== undefined) filter[key] = value
  }
  set('kinds', oneOrMore(q.kind, 'kind', riskKinds))
  set('severity', severity(q.severity, 'severity'))
  set('minimumSeverity', severity(q.minimumSeverity, 'minimumSeverity'))
  set('agentUuid', term(q.agentUuid, 'agentUuid'))
  set('hostIdentifier', term(q.hostIdentifier, 'hostIdentifier'))
  set('globalSearch', term(q.globalSearch, 'globalSearch'))
  set('vid', hex4(q.vid, 'vid'))
  set('pid', hex4(q.pid, 'pid'))
  set('isRead', bool(q.isRead, 'isRead'))
  set('isPinned', bool(q.isPinned, 'isPinned'))
  set('isDismissed', bool(q.isDismissed, 'isDismissed'))
  set('from', date(q.fromDate, 'fromDate'))
  const to = date(q.toDate, 'toDate')
  // A date alone means the end of that day; a time, that instant included.
  if (to !== undefined) filter.toExclusive = /^\d{4}-\d{2}-\d{2}$/.test(q.toDate!.trim()) ? to + DAY_MS : to + 1
  if (filter.from !== undefined && filter.toExclusive !== undefined && filter.from >= filter.toExclusive) {
    throw invalidField('query', 'toDate', 'must not be before fromDate')
  }
  const pageSize = integer(q.pageSize, 'pageSize', DEFAULT_PAGE_SIZE, 1, MAX_NOTIFICATION_PAGE_SIZE)
  const pageNumber = integer(q.pageNumber, 'pageNumber', 1, 1, INT32_MAX)
  return { filter, sort: sort(op, q.sortBy, 'sortBy'), pageSize, offset: (pageNumber - 1) * pageSize }
}
