// The report types and the filters each takes: one table that ReportsArguments answers
// and that create/update enforce, so that the form a client builds and the rules the
// server applies cannot differ.
import type { FieldError } from '../errors.js'
import { severityNames } from '../listing.js'
import type { Frequency } from './schedule.js'

export const reportTypes = ['agentsInventory', 'peripheralsInventory', 'riskInsightsSummary', 'eventsDigest', 'auditTrailDigest'] as const
export type ReportType = (typeof reportTypes)[number]

export const formats = {
  PDF: { mediaType: 'application/pdf', fileExtension: 'pdf' },
  CSV: { mediaType: 'text/csv', fileExtension: 'csv' },
} as const
export type ReportFormat = keyof typeof formats

export const periods = { last24Hours: 1, last7Days: 7, last30Days: 30, last90Days: 90 } as const
export type Period = keyof typeof periods
const periodTitles: Record<Period, string> = { last24Hours: 'Last 24 hours', last7Days: 'Last 7 days', last30Days: 'Last 30 days', last90Days: 'Last 90 days' }
export const periodTitle = (p: Period) => periodTitles[p]

export const insightSections = ['classificationSummary', 'vulnerablePeripherals', 'uncommonPeripherals', 'whitelistViolations', 'errorTotals'] as const
export type InsightSection = (typeof insightSections)[number]
export const auditCategories = ['Authentication', 'Users', 'Agents', 'Peripherals', 'Agentless', 'Reports', 'Notifications', 'AlarmDestinations', 'System'] as const

type ValueType = 'text' | 'boolean' | 'integer' | 'choice' | 'multiChoice' | 'integerList'

export interface FilterArgument {
  name: string
  title: string
  valueType: ValueType
  allowedValues: string[] | null
  minimum: number | null
  maximum: number | null
  maxLength: number | null
  maxItems: number | null
}

const f = (name: string, title: string, valueType: ValueType, more: Partial<FilterArgument> = {}): FilterArgument => ({
  name,
  title,
  valueType,
  allowedValues: null,
  minimum: null,
  maximum: null,
  maxLength: null,
  maxItems: null,
  ...more,
})
const text = (name: string, title: string, maxLength = 256) => f(name, title, 'text', { maxLength })
const flag = (name: string, title: string) => f(name, title, 'boolean')
const choice = (name: string, title: string, values: readonly string[]) => f(name, title, 'choice', { allowedValues: [...values] })
const multi = (name: string, title: string, values: readonly string[]) => f(name, title, 'multiChoice', { allowedValues: [...values], maxItems: values.length })
const period = choice('period', 'Period', Object.keys(periods))
const minimumSeverity = choice('minimumSeverity', 'Minimum severity', severityNames)

export interface TypeInfo {
  type: ReportType
  title: string
  description: string
  filters: FilterArgument[]
}

export const typeInfo: Record<ReportType, TypeInfo> = {
  agentsInventory: {
    type: 'agentsInventory',
    title: 'Agents inventory',
    description: 'Every agent matching the filters, with its state, license and peripheral counters.',
    filters: [
      text('hostIdentifier', 'Host name contains'),
      text('ipAddress', 'IP address contains', 64),
      choice('operationalStatus', 'Mode', ['Armed', 'Free']),
      choice('connectionStatus', 'Connection', ['Connected', 'Disconnected']),
      multi('licenseStatus', 'License status', ['Activated', 'Pending', 'Expired', 'Invalid']),
      flag('hasUnapprovedPeripherals', 'Has unapproved peripherals'),
      flag('hasVulnerablePeripherals', 'Has vulnerable peripherals'),
      flag('hasKnownAttackTools', 'Has known attack tools'),
      text('hashtags', 'Hashtags contain'),
    ],
  },
  peripheralsInventory: {
    type: 'peripheralsInventory',
    title: 'Peripherals inventory',
    description: 'Peripherals across all agents matching the filters, host by host.',
    filters: [
      text('hostIdentifier', 'Host name contains'),
      text('vendor', 'Vendor contains'),
      text('productInfo', 'Product contains'),
      f('peripheralIcons', 'Device classes (icon codes)', 'integerList', { minimum: 0, maximum: 255, maxItems: 64 }),
      flag('approved', 'Approved'),
      flag('present', 'Currently plugged in'),
      flag('isVulnerablePeripheral', 'Vulnerable'),
      flag('isKnownAttackTool', 'Known attack tool'),
    ],
  },
  riskInsightsSummary: {
    type: 'riskInsightsSummary',
    title: 'Risk insights summary',
    description: 'Classification of the fleet, vulnerable and uncommon peripherals, whitelist violations and error totals of the period.',
    filters: [period, multi('sections', 'Sections', insightSections), f('uncommonMaxHosts', 'Uncommon: seen on at most this many hosts', 'integer', { minimum: 1, maximum: 1000 })],
  },
  eventsDigest: {
    type: 'eventsDigest',
    title: 'Events digest',
    description: 'Events of the period at or above a severity, counted by severity, category and source, then listed newest first.',
    filters: [
      period,
      minimumSeverity,
      multi('categories', 'Categories', ['USB', 'Network', 'System', 'Host', 'General']),
      text('source', 'Source contains'),
      text('globalSearch', 'Any field contains'),
    ],
  },
  auditTrailDigest: {
    type: 'auditTrailDigest',
    title: 'Audit trail digest',
    description: 'Audit records of the period, counted by outcome, category and user, then listed newest first.',
    filters: [
      period,
      minimumSeverity,
      multi('auditCategories', 'Audit categories', auditCategories),
      text('user', 'User contains', 100),
      multi('outcomes', 'Outcomes', ['Succeeded', 'Failed', 'Refused']),
    ],
  },
}

export type Filters = Record<string, unknown>

/**
 * The filters as stored: keys of the type only (others are added to `errors` as
 * `filters/<key>`), absent and null keys dropped. The contract's schema has checked
 * each value's type and range already.
 */
export function readFilters(type: ReportType, input: Filters | null | undefined, errors: FieldError[]): Filters {
  const out: Filters = {}
  if (!input) return out
  const allowed = new Map(typeInfo[type].filters.map((a) => [a.name, a]))
  for (const [key, value] of Object.entries(input)) {
    const arg = allowed.get(key)
    if (!arg) {
      const owners = reportTypes.filter((t) => typeInfo[t].filters.some((a) => a.name === key))
      const where = owners.length ? ` (it belongs to ${owners.join(', ')})` : ''
      errors.push({ location: 'body', name: `filters/${key}`, reason: `is not a filter of ${type} reports${where}; allowed: ${[...allowed.keys()].join(', ')}` })
      continue
    }
    if (value === null || value === undefined) continue
    // A NUL would end a SQLite LIKE pattern early (matching everything); no stored text holds one.
    if (arg.valueType === 'text' && String(value).includes('\u0000')) {
      errors.push({ location: 'body', name: `filters/${key}`, reason: 'must not contain the NUL character' })
      continue
    }
    out[key] = value
  }
  return out
}

/** The period a digest covers: its filter, or the schedule's frequency. */
export function periodOf(filters: Filters, frequency: Frequency | null): Period {
  if (typeof filters.period === 'string' && filters.period in periods) return filters.period as Period
  if (frequency === 'daily') return 'last24Hours'
  if (frequency === 'monthly') return 'last30Days'
  return 'last7Days'
}

/** The filters as label and value, for a report's cover and its e-mail. */
export function filterLines(type: ReportType, filters: Filters): [string, string][] {
  return typeInfo[type].filters
    .filter((a) => filters[a.name] !== undefined && a.name !== 'period')
    .map((a) => {
      const v = filters[a.name]
      const value = Array.isArray(v) ? v.join(', ') : typeof v === 'boolean' ? (v ? 'yes' : 'no') : a.valueType === 'text' ? `"${String(v)}"` : String(v)
      return [a.title, value]
    })
}
