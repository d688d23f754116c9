// What each report type contains: its cover figures and tables (PDF) or its rows (CSV),
// read from the repositories the lists and insights use, in steps.
import { DateTime } from 'luxon'
import { agentView } from '../agents/views.js'
import type { PeripheralListRow } from '../../db/peripherals.js'
import { peripheralView } from '../peripherals/views.js'
import { classificationView, errorTotalsView, uncommonView, violationsView, vulnerableView } from '../insights/views.js'
import type { AuditDigestRow, DigestTotals, EventRow, ReportSources } from './ports.js'
import type { AgentFilter, PeripheralFilter } from '../agents/filter.js'
import { severityNames } from '../listing.js'
import { iso } from '../time.js'
import type { PdfColumn, PdfFigure, PdfReport, PdfTable } from './pdf.js'
import { frequencyTitles, type Schedule } from './schedule.js'
import { filterLines, insightSections, periodOf, periods, periodTitle, typeInfo, type Filters, type InsightSection, type ReportFormat, type ReportType } from './types.js'
import { setImmediate as turn } from 'node:timers/promises'

export const PDF_MAX_ROWS = 5000
export const CSV_MAX_ROWS = 1_000_000
const DAY = 86_400_000
const TOP = 20
const CSV_NOTE = 'a CSV report holds every one'

/** A definition as a run uses it (the snapshot taken when the run was queued). */
export interface Definition {
  id: string
  name: string
  description: string | null
  type: ReportType
  format: ReportFormat
  filters: Filters
  schedule: Schedule | null
  recipients: string[]
  sender: string | null
}

export interface RunContext {
  /** Where the content is read from. */
  sources: ReportSources
  definition: Definition
  runId: string
  trigger: 'schedule' | 'request' | 'catchUp'
  requestedBy: string | null
  dueMs: number
  startedMs: number
  signal: AbortSignal
}

export interface CsvContent {
  columns: string[]
  rows: AsyncIterable<object>
}

const n = (x: number) => x.toLocaleString('en-US')
const pct = (part: number, whole: number) => (whole > 0 ? `${((part / whole) * 100).toFixed(1)} %` : '')

/** A time in the report's zone: `2025-01-13 07:30:00` (the zone is named in the header or next to it). */
export function localTime(ms: number, zone: string, seconds = true): string {
  return DateTime.fromMillis(ms, { zone }).toFormat(seconds ? 'yyyy-MM-dd HH:mm:ss' : 'yyyy-MM-dd HH:mm')
}

/** `2025-01-13 07:30 Europe/Paris (06:30 UTC)`, or `2025-01-13 06:30 UTC`. */
export function timeText(ms: number, zone: string): string {
  const utc = `${localTime(ms, 'UTC', false)} UTC`
  return zone === 'UTC' ? utc : `${localTime(ms, zone, false)} ${zone} (${utc.slice(11)})`
}

const ordinal = (d: number) => `${d}${d % 10 === 1 && d !== 11 ? 'st' : d % 10 === 2 && d !== 12 ? 'nd' : d % 10 === 3 && d !== 13 ? 'rd' : 'th'}`

/** The schedule as a sentence. */
export function scheduleText(s: Schedule | null): string {
  if (!s) return 'On request only'
  const at = `at ${s.timeOfDay} (${s.timeZone})`
  switch (s.frequency) {
    case 'once':
      return `Once, on ${s.date} ${at}`
    case 'daily':
      return `${frequencyTitles.daily} ${at}`
    case 'weekly':
      return `Every ${s.dayOfWeek} ${at}`
    case 'monthly':
      return `On the ${ordinal(s.dayOfMonth!)} of every month ${at}${s.dayOfMonth! > 28 ? ', or its last day when shorter' : ''}`
  }
}

const zoneOf = (d: Definition) => d.schedule?.timeZone ?? 'UTC'

/** The period a digest covers, ending when the run started. */
export function periodRange(ctx: RunContext): { from: number; to: number; title: string } {
  const p = periodOf(ctx.definition.filters, ctx.definition.schedule?.frequency ?? null)
  return { from: ctx.startedMs - periods[p] * DAY, to: ctx.startedMs, title: periodTitle(p) }
}

const triggerText = (ctx: RunContext) =>
  ctx.trigger === 'request' ? `Requested by ${ctx.requestedBy ?? 'a user'}` : ctx.trigger === 'catchUp' ? `Catch-up of the run due ${timeText(ctx.dueMs, zoneOf(ctx.definition))}` : 'Scheduled'

/** The cover lines every report has. */
function cover(ctx: RunContext, period?: { from: number; to: number; title: string }): [string, string][] {
  const d = ctx.definition
  const zone = zoneOf(d)
  const lines: [string, string][] = []
  if (period) lines.push(['Period', `${period.title}: ${timeText(period.from, zone)} to ${timeText(period.to, zone)}`])
  const filters = filterLines(d.type, d.filters)
  if (filters.length === 0) lines.push(['Filters', 'None'])
  filters.forEach(([label, value], i) => lines.push([i === 0 ? 'Filters' : '', `${label}: ${value}`]))
  lines.push(['Schedule', scheduleText(d.schedule)])
  lines.push(['Generated', `${timeText(ctx.startedMs, zone)} - ${triggerText(ctx)}`])
  lines.push(['Times shown in', zone === 'UTC' ? 'UTC' : `${zone} (the schedule's time zone)`])
  return lines
}

function pdfShell(ctx: RunContext, figures: PdfFigure[], tables: PdfTable[], period?: { from: number; to: number; title: string }): PdfReport {
  const d = ctx.definition
  return {
    title: d.name,
    subtitle: `${typeInfo[d.type].title} report`,
    description: d.description ?? typeInfo[d.type].description,
    info: cover(ctx, period),
    figures,
    tables,
    footer: `${d.name} - ${typeInfo[d.type].title} - generated ${timeText(ctx.startedMs, zoneOf(d))}`,
  }
}

/** Lets other requests run (after a read of every matching id, say). */

const fig = (label: string, value: number | string): PdfFigure => ({ label, value: typeof value === 'number' ? n(value) : value })

async function* take<T>(rows: AsyncIterable<T>, max: number): AsyncGenerator<T> {
  let i = 0
  for await (const row of rows) {
    if (i++ >= max) return
    yield row
  }
}

// ---------------------------------------------------------------------------------------
// Agents inventory

function agentFilter(f: Filters): AgentFilter {
  const out: AgentFilter = {}
  if (typeof f.hostIdentifier === 'string') out.hostIdentifier = f.hostIdentifier
  if (typeof f.ipAddress === 'string') out.ipAddress = f.ipAddress
  if (typeof f.hashtags === 'string') out.hashtags = f.hashtags
  if (f.operationalStatus === 'Armed' || f.operationalStatus === 'Free') out.operationalStatus = [f.operationalStatus]
  if (f.connectionStatus === 'Connected' || f.connectionStatus === 'Disconnected') out.connectionStatus = [f.connectionStatus]
  if (Array.isArray(f.licenseStatus)) out.licenseStatus = f.licenseStatus as AgentFilter['licenseStatus']
  if (typeof f.hasUnapprovedPeripherals === 'boolean') out.hasUnapprovedPeripherals = f.hasUnapprovedPeripherals
  if (typeof f.hasVulnerablePeripherals === 'boolean') out.hasVulnerablePeripherals = f.hasVulnerablePeripherals
  if (typeof f.hasKnownAttackTools === 'boolean') out.hasKnownAttackTools = f.hasKnownAttackTools
  return out
}

const risks = (flags: [boolean, string][]) =>
  flags
    .filter(([on]) => on)
    .map(([, name]) => name)
    .join(', ')
const BY_HOST = { field: 'hostIdentifier', direction: 'asc' } as const

type AgentView = ReturnType<typeof agentView>
function agentColumns(zone: string): PdfColumn<AgentView>[] {
  return [
    { header: 'Host', width: 15, value: (a) => a.hostIdentifier },
    { header: 'IP address', width: 9, value: (a) => a.localIpAddress },
    { header: 'Connection', width: 8.5, value: (a) => a.connectionStatus },
    { header: 'Mode', width: 5.5, value: (a) => a.operationalStatus },
    { header: 'License', width: 7, value: (a) => a.licenseStatus },
    { header: 'OS', width: 18, value: (a) => a.osVersion },
    { header: 'Service', width: 7, value: (a) => a.serviceVersion },
    { header: 'Approved', width: 7, align: 'right', value: (a) => a.approvedAndPresent },
    { header: 'Unapproved', width: 8.5, align: 'right', value: (a) => a.notApproved },
    {
      header: 'Risks',
      width: 13,
      value: (a) =>
        risks([
          [a.hasKnownAttackTools, 'Attack tool'],
          [a.hasVulnerablePeripherals, 'Vulnerable'],
          [a.hasUnapprovedPeripherals, 'Unapproved'],
        ]),
    },
    { header: 'Last check-in', width: 13, value: (a) => (a.lastUpdated ? localTime(Date.parse(a.lastUpdated), zone, false) : '') },
  ]
}

async function* agentViews(rows: AsyncIterable<import('../../db/agents.js').AgentRow>) {
  for await (const row of rows) yield agentView(row)
}

async function agentsPdf(ctx: RunContext): Promise<PdfReport> {
  const repos = ctx.sources
  const filter = agentFilter(ctx.definition.filters)
  const t = await repos.reports.agentTotals(filter, ctx.signal)
  const ids = await repos.exports.agentIds(filter, BY_HOST)
  await turn()
  const figures = [
    fig('Agents', t.agents),
    fig('Connected', t.connected),
    fig('Armed', t.armed),
    fig('With unapproved peripherals', t.withUnapproved),
    fig('With vulnerable peripherals', t.withVulnerable),
    fig('With known attack tools', t.withAttackTools),
  ]
  const table: PdfTable<AgentView> = {
    title: 'Agents, by host name',
    noun: 'agents',
    columns: agentColumns(zoneOf(ctx.definition)),
    total: ids.length,
    rows: agentViews(repos.reports.agents(ids.slice(0, PDF_MAX_ROWS + 1), ctx.signal)),
    maxRows: PDF_MAX_ROWS,
    cutNote: CSV_NOTE,
    empty: 'No agent matches the filters.',
  }
  return pdfShell(ctx, figures, [table])
}

async function agentsCsv(ctx: RunContext): Promise<CsvContent> {
  const repos = ctx.sources
  const ids = await repos.exports.agentIds(agentFilter(ctx.definition.filters), BY_HOST)
  return {
    columns: repos.agentColumns,
    rows: agentViews(repos.reports.agents(ids.slice(0, CSV_MAX_ROWS + 1), ctx.signal)),
  }
}

// ---------------------------------------------------------------------------------------
// Peripherals inventory

function peripheralFilters(f: Filters): { agents: AgentFilter; peripherals: PeripheralFilter; extra: { approved?: boolean; icons?: number[] } } {
  const agents: AgentFilter = typeof f.hostIdentifier === 'string' ? { hostIdentifier: f.hostIdentifier } : {}
  const peripherals: PeripheralFilter = {}
  if (typeof f.vendor === 'string') peripherals.vendor = f.vendor
  if (typeof f.productInfo === 'string') peripherals.productInfo = f.productInfo
  if (typeof f.present === 'boolean') peripherals.present = f.present
  if (typeof f.isVulnerablePeripheral === 'boolean') peripherals.isVulnerable = f.isVulnerablePeripheral
  if (typeof f.isKnownAttackTool === 'boolean') peripherals.isAttackTool = f.isKnownAttackTool
  const extra: { approved?: boolean; icons?: number[] } = {}
  if (typeof f.approved === 'boolean') extra.approved = f.approved
  if (Array.isArray(f.peripheralIcons)) extra.icons = f.peripheralIcons as number[]
  return { agents, peripherals, extra }
}

type PeripheralRowView = ReturnType<typeof peripheralView> & { firstSeen: string; lastSeen: string }
const peripheralRowView = (r: PeripheralListRow): PeripheralRowView => ({ ...peripheralView(r), firstSeen: iso(r.first_seen_ms), lastSeen: iso(r.last_seen_ms) })

async function* peripheralViews(rows: AsyncIterable<PeripheralListRow>) {
  for await (const row of rows) yield peripheralRowView(row)
}

function peripheralColumns(zone: string): PdfColumn<PeripheralRowView>[] {
  return [
    { header: 'Host', width: 11, value: (p) => p.hostIdentifier },
    { header: 'IP address', width: 8, value: (p) => p.hostIp },
    { header: 'VID', width: 4, value: (p) => p.vid },
    { header: 'PID', width: 4, value: (p) => p.pid },
    { header: 'Vendor', width: 11, value: (p) => p.guiVid ?? p.manufacturer },
    { header: 'Product', width: 14, value: (p) => p.guiPid ?? p.caption },
    { header: 'Class', width: 7.5, value: (p) => p.devIconDescription },
    { header: 'Serial', width: 12, value: (p) => p.guiSerial ?? p.serialNumber },
    { header: 'Present', width: 5.5, value: (p) => p.present },
    { header: 'Approved', width: 7, value: (p) => p.approved },
    {
      header: 'Risks',
      width: 9,
      value: (p) =>
        risks([
          [p.isKnownAttackTool, 'Attack tool'],
          [p.isVulnerablePeripheral, 'Vulnerable'],
          [p.isUnapprovedPeripherals, 'Unapproved'],
        ]),
    },
    { header: 'Last seen', width: 11, value: (p) => localTime(Date.parse(p.lastSeen), zone, false) },
  ]
}

async function peripheralsPdf(ctx: RunContext): Promise<PdfReport> {
  const repos = ctx.sources
  const f = peripheralFilters(ctx.definition.filters)
  const t = await repos.reports.peripheralTotals({ ...f.peripherals, ...f.agents }, f.extra, ctx.signal)
  const ids = await repos.exports.agentIds(f.agents, BY_HOST)
  await turn()
  const figures = [
    fig('Peripherals', t.peripherals),
    fig('Hosts', t.hosts),
    fig('Plugged in', t.present),
    fig('Not approved, plugged in', t.unapproved),
    fig('Vulnerable', t.vulnerable),
    fig('Known attack tools', t.attackTools),
  ]
  const table: PdfTable<PeripheralRowView> = {
    title: 'Peripherals, by host name',
    noun: 'peripherals',
    columns: peripheralColumns(zoneOf(ctx.definition)),
    total: t.peripherals,
    rows: peripheralViews(take(repos.reports.peripherals(ids, f.peripherals, f.extra, ctx.signal), PDF_MAX_ROWS + 1)),
    maxRows: PDF_MAX_ROWS,
    cutNote: CSV_NOTE,
    empty: 'No peripheral matches the filters.',
  }
  return pdfShell(ctx, figures, [table])
}

async function peripheralsCsv(ctx: RunContext): Promise<CsvContent> {
  const repos = ctx.sources
  const f = peripheralFilters(ctx.definition.filters)
  const ids = await repos.exports.agentIds(f.agents, BY_HOST)
  return {
    columns: [...repos.peripheralColumns, 'firstSeen', 'lastSeen'],
    rows: peripheralViews(repos.reports.peripherals(ids, f.peripherals, f.extra, ctx.signal)),
  }
}

// ---------------------------------------------------------------------------------------
// Events and audit digests

const severityText = (s: number) => severityNames[s] ?? String(s)
const minimumSeverity = (f: Filters) => (typeof f.minimumSeverity === 'string' ? severityNames.indexOf(f.minimumSeverity as (typeof severityNames)[number]) : -1)

function eventFilter(ctx: RunContext) {
  const f = ctx.definition.filters
  const period = periodRange(ctx)
  const min = minimumSeverity(f)
  return {
    period,
    filter: {
      from: period.from,
      to: period.to,
      maxSeverity: min >= 0 ? min : undefined,
      categories: Array.isArray(f.categories) ? (f.categories as string[]) : undefined,
      source: typeof f.source === 'string' ? f.source : undefined,
      globalSearch: typeof f.globalSearch === 'string' ? f.globalSearch : undefined,
    },
  }
}

interface Count {
  name: string
  count: number
}
const ranked = (m: Map<string, number>): Count[] => [...m].map(([name, count]) => ({ name, count })).sort((a, b) => b.count - a.count || a.name.localeCompare(b.name))
const countColumns = (header: string, unit: string, total: number): PdfColumn<Count>[] => [
  { header, width: 40, value: (c) => c.name },
  { header: unit, width: 10, align: 'right', value: (c) => c.count },
  { header: 'Share', width: 10, align: 'right', value: (c) => pct(c.count, total) },
]
/** A narrow table of counts (by severity, by category, top sources). */
function countTable(title: string, header: string, noun: string, unit: string, counts: Count[], total: number, max = TOP): PdfTable<Count> {
  return { title, noun, columns: countColumns(header, unit, total), total: counts.length, rows: counts, maxRows: max, counted: false, width: 0.6, empty: 'None in this period.' }
}
const bySeverity = (t: DigestTotals): Count[] => [...t.bySeverity].sort(([a], [b]) => a - b).map(([s, count]) => ({ name: `${s} ${severityText(s)}`, count }))

async function eventsPdf(ctx: RunContext): Promise<PdfReport> {
  const repos = ctx.sources
  const { period, filter } = eventFilter(ctx)
  const t = await repos.reports.eventTotals(filter, ctx.signal)
  const zone = zoneOf(ctx.definition)
  const sum = (pred: (s: number) => boolean) => [...t.bySeverity].filter(([s]) => pred(s)).reduce((x, [, c]) => x + c, 0)
  const figures = [
    fig('Events', t.total),
    fig(
      'Emergency, Alert, Critical',
      sum((s) => s <= 2),
    ),
    fig(
      'Errors',
      sum((s) => s === 3),
    ),
    fig(
      'Warnings',
      sum((s) => s === 4),
    ),
    fig('Sources', t.byKey.size),
    fig('Categories', t.byCategory.size),
  ]
  const columns: PdfColumn<EventRow>[] = [
    { header: 'Time', width: 12, value: (e) => localTime(e.created_ms, zone) },
    { header: 'Severity', width: 8, value: (e) => severityText(e.severity) },
    { header: 'Category', width: 6, value: (e) => e.category },
    { header: 'Code', width: 6, value: (e) => e.event_code },
    { header: 'Source', width: 18, value: (e) => e.entity_id },
    { header: 'Description', width: 20, value: (e) => e.description },
    { header: 'Details', width: 30, value: (e) => e.details },
  ]
  const tables: PdfTable[] = [
    countTable('By severity', 'Severity', 'severities', 'Events', bySeverity(t), t.total),
    countTable('By category', 'Category', 'categories', 'Events', ranked(t.byCategory), t.total),
    countTable('Top sources', 'Source', 'sources', 'Events', ranked(t.byKey), t.total),
    {
      title: 'Events, newest first',
      noun: 'events',
      columns,
      total: t.total,
      rows: take(repos.reports.events(filter, ctx.signal), PDF_MAX_ROWS + 1),
      maxRows: PDF_MAX_ROWS,
      cutNote: CSV_NOTE,
      empty: 'No event of the period matches the filters.',
    },
  ]
  return pdfShell(ctx, figures, tables, period)
}

async function* eventViews(rows: AsyncIterable<EventRow>) {
  for await (const e of rows) {
    yield {
      eventID: e.id,
      creationTime: iso(e.created_ms),
      creationTimeEpoch: e.created_ms,
      eventCode: e.event_code,
      severity: e.severity,
      severityString: severityText(e.severity),
      category: e.category,
      eventEntityID: e.entity_id,
      description: e.description,
      details: e.details,
      hashtags: e.hashtags,
      peripheralIcon: String(e.peripheral_icon),
      assetKey: e.asset_key,
      assetName: e.asset_name,
      peripheralAssetId: e.peripheral_asset_id,
    }
  }
}
const eventCsvColumns = [
  'eventID',
  'creationTime',
  'creationTimeEpoch',
  'eventCode',
  'severity',
  'severityString',
  'category',
  'eventEntityID',
  'description',
  'details',
  'hashtags',
  'peripheralIcon',
  'assetKey',
  'assetName',
  'peripheralAssetId',
]

function eventsCsv(ctx: RunContext): CsvContent {
  return { columns: eventCsvColumns, rows: eventViews(ctx.sources.reports.events(eventFilter(ctx).filter, ctx.signal)) }
}

function auditFilter(ctx: RunContext) {
  const f = ctx.definition.filters
  const period = periodRange(ctx)
  const min = minimumSeverity(f)
  return {
    period,
    filter: {
      from: period.from,
      to: period.to,
      maxSeverity: min >= 0 ? min : undefined,
      categories: Array.isArray(f.auditCategories) ? (f.auditCategories as string[]) : undefined,
      user: typeof f.user === 'string' ? f.user : undefined,
      outcomes: Array.isArray(f.outcomes) ? (f.outcomes as string[]) : undefined,
    },
  }
}

async function auditPdf(ctx: RunContext): Promise<PdfReport> {
  const repos = ctx.sources
  const { period, filter } = auditFilter(ctx)
  const t = await repos.reports.auditTotals(filter, ctx.signal)
  const zone = zoneOf(ctx.definition)
  const figures = [
    fig('Audit records', t.total),
    fig('Succeeded', t.byOutcome.get('Succeeded') ?? 0),
    fig('Failed', t.byOutcome.get('Failed') ?? 0),
    fig('Refused (401/403)', t.byOutcome.get('Refused') ?? 0),
    fig('Users', t.byKey.size),
    fig('Categories', t.byCategory.size),
  ]
  const columns: PdfColumn<AuditDigestRow>[] = [
    { header: 'Time', width: 12, value: (a) => localTime(a.created_ms, zone) },
    { header: 'Category', width: 9, value: (a) => a.category },
    { header: 'User', width: 10, value: (a) => a.user_name },
    { header: 'Source IP', width: 9, value: (a) => a.source_ip },
    { header: 'Outcome', width: 7, value: (a) => a.outcome },
    { header: 'Description', width: 38, value: (a) => a.description },
    { header: 'Asset', width: 14, value: (a) => a.asset_name ?? a.asset_key },
  ]
  const tables: PdfTable[] = [
    countTable('By outcome', 'Outcome', 'outcomes', 'Records', ranked(t.byOutcome), t.total),
    countTable('By category', 'Category', 'categories', 'Records', ranked(t.byCategory), t.total),
    countTable('Top users', 'User', 'users', 'Records', ranked(t.byKey), t.total),
    {
      title: 'Audit records, newest first',
      noun: 'audit records',
      columns,
      total: t.total,
      rows: take(repos.reports.auditRecords(filter, ctx.signal), PDF_MAX_ROWS + 1),
      maxRows: PDF_MAX_ROWS,
      cutNote: CSV_NOTE,
      empty: 'No audit record of the period matches the filters.',
    },
  ]
  return pdfShell(ctx, figures, tables, period)
}

async function* auditViews(rows: AsyncIterable<AuditDigestRow>) {
  for await (const a of rows) {
    yield {
      auditTrailID: a.id,
      creationTime: iso(a.created_ms),
      creationTimeEpoch: a.created_ms,
      severity: a.severity,
      severityString: severityText(a.severity),
      category: a.category,
      user: a.user_name,
      sourceIp: a.source_ip,
      operationId: a.operation_id,
      outcome: a.outcome,
      description: a.description,
      details: a.details,
      assetKey: a.asset_key,
      assetName: a.asset_name,
      assetType: a.asset_type,
    }
  }
}
const auditCsvColumns = [
  'auditTrailID',
  'creationTime',
  'creationTimeEpoch',
  'severity',
  'severityString',
  'category',
  'user',
  'sourceIp',
  'operationId',
  'outcome',
  'description',
  'details',
  'assetKey',
  'assetName',
  'assetType',
]

function auditCsv(ctx: RunContext): CsvContent {
  return { columns: auditCsvColumns, rows: auditViews(ctx.sources.reports.auditRecords(auditFilter(ctx).filter, ctx.signal)) }
}

// ---------------------------------------------------------------------------------------
// Risk insights summary

/** One line of the risk insights CSV: every section in one table, told apart by `section`. */
interface InsightLine {
  section: InsightSection
  item: string | null
  vid: string | null
  pid: string | null
  vendor: string | null
  product: string | null
  deviceClass: string | null
  hosts: number | null
  count: number | null
  firstSeen: string | null
  lastSeen: string | null
  detail: string | null
}
const insightCsvColumns: (keyof InsightLine)[] = ['section', 'item', 'vid', 'pid', 'vendor', 'product', 'deviceClass', 'hosts', 'count', 'firstSeen', 'lastSeen', 'detail']
const line = (section: InsightSection, l: Partial<InsightLine>): InsightLine => ({
  section,
  item: null,
  vid: null,
  pid: null,
  vendor: null,
  product: null,
  deviceClass: null,
  hosts: null,
  count: null,
  firstSeen: null,
  lastSeen: null,
  detail: null,
  ...l,
})
const hostNames = (hosts: { hostIdentifier: string }[], total: number) => hosts.map((h) => h.hostIdentifier).join(', ') + (total > hosts.length ? ` and ${total - hosts.length} more` : '')

const sectionTitles: Record<InsightSection, string> = {
  classificationSummary: 'Classification of the agents',
  vulnerablePeripherals: 'Vulnerable peripherals and known attack tools',
  uncommonPeripherals: 'Uncommon peripherals',
  whitelistViolations: 'Whitelist violations',
  errorTotals: 'Errors by agent',
}

/** Every section's lines, computed one after the other with other work between them. */
async function insightLines(ctx: RunContext): Promise<{ sections: InsightSection[]; lines: Map<InsightSection, InsightLine[]>; figures: PdfFigure[]; period: ReturnType<typeof periodRange> }> {
  const { insights } = ctx.sources
  const f = ctx.definition.filters
  const sections = insightSections.filter((s) => !Array.isArray(f.sections) || (f.sections as string[]).includes(s))
  const maxHosts = typeof f.uncommonMaxHosts === 'number' ? f.uncommonMaxHosts : 3
  const period = periodRange(ctx)
  const lines = new Map<InsightSection, InsightLine[]>()
  const figures: PdfFigure[] = []
  for (const section of sections) {
    await turn()
    ctx.signal.throwIfAborted()
    if (section === 'classificationSummary') {
      const c = classificationView(await insights.classification())
      const groups: [string, { name: string | null; count: number }[]][] = [
        ['Connection', c.byConnectionStatus],
        ['Mode', c.byOperationalStatus],
        ['Status', c.byDisplayStatus],
        ['License', c.byLicenseStatus],
        ['Running mode', c.byRunningMode],
        ['OS version', c.byOsVersion.slice(0, 10)],
        ['Service version', c.byServiceVersion.slice(0, 10)],
      ]
      const out: InsightLine[] = []
      for (const [group, values] of groups) for (const v of values) out.push(line(section, { item: `${group}: ${v.name ?? '(none)'}`, count: v.count, detail: pct(v.count, c.totalAgents) }))
      for (const s of c.bySeverity) out.push(line(section, { item: `Severity: ${s.severityString}`, count: s.count, detail: pct(s.count, c.totalAgents) }))
      for (const p of c.peripheralsByClass)
        out.push(
          line(section, {
            item: `Plugged-in peripherals: ${p.devIconDescription}`,
            deviceClass: p.devIconDescription,
            count: p.present,
            detail: `${n(p.approved)} approved, ${n(p.notApproved)} not approved`,
          }),
        )
      lines.set(section, out)
      const connected = c.byConnectionStatus.find((x) => x.name === 'Connected')?.count ?? 0
      figures.push(fig('Agents', c.totalAgents), fig('Connected', connected), fig('With known attack tools', c.risk.withKnownAttackTools))
    } else if (section === 'vulnerablePeripherals') {
      const v = vulnerableView(await insights.vulnerablePeripherals())
      lines.set(
        section,
        v.data.map((m) =>
          line(section, {
            item: m.name,
            vid: m.vid,
            pid: m.pid,
            vendor: m.guiVid,
            product: m.guiPid,
            deviceClass: m.devIconDescription,
            hosts: m.hostsCount,
            count: m.presentCount,
            detail: `${m.kind === 'KnownAttackTool' ? 'Known attack tool' : 'Vulnerable device'}${m.vulnerability ? `: ${m.vulnerability}` : ''}; ${severityText(m.severity)}; ${n(m.approvedCount)} approved; hosts: ${hostNames(m.hosts, m.hostsCount)}`,
          }),
        ),
      )
      figures.push(fig('Risky models present', v.recordsTotal))
    } else if (section === 'uncommonPeripherals') {
      const u = uncommonView(await insights.uncommonPeripherals(maxHosts))
      lines.set(
        section,
        u.data.map((m) =>
          line(section, {
            item: `${m.guiVid ?? m.vid} ${m.guiPid ?? m.pid}`,
            vid: m.vid,
            pid: m.pid,
            vendor: m.guiVid,
            product: m.guiPid,
            deviceClass: m.devIconDescription,
            hosts: m.hostsCount,
            count: m.peripheralsCount,
            firstSeen: m.firstSeen,
            lastSeen: m.lastSeen,
            detail: hostNames(m.hosts, m.hostsCount),
          }),
        ),
      )
      figures.push(fig('Uncommon models', u.recordsTotal))
    } else if (section === 'whitelistViolations') {
      const w = violationsView(period.from, period.to, await insights.whitelistViolations(period.from, period.to))
      lines.set(
        section,
        w.data.map((m) =>
          line(section, {
            item: `${m.guiVid ?? m.vid} ${m.guiPid ?? m.pid}`,
            vid: m.vid,
            pid: m.pid,
            vendor: m.guiVid,
            product: m.guiPid,
            deviceClass: m.devIconDescription,
            hosts: m.hostsCount,
            count: m.violationsCount,
            firstSeen: m.firstSeen,
            lastSeen: m.lastSeen,
            detail: hostNames(m.hosts, m.hostsCount),
          }),
        ),
      )
      figures.push(
        fig(
          'Whitelist violations',
          w.data.reduce((x, m) => x + m.violationsCount, 0),
        ),
      )
    } else {
      const e = errorTotalsView(period.from, period.to, await insights.errorTotals(period.from, period.to))
      lines.set(
        section,
        e.data.map((a) =>
          line(section, {
            item: a.hostIdentifier,
            hosts: 1,
            count: a.total,
            lastSeen: a.lastErrorTime,
            detail: `${n(a.reportedErrors)} reported, ${n(a.failedCommands)} failed commands; last: ${a.lastErrorText}`,
          }),
        ),
      )
      figures.push(fig('Errors', e.totalErrors))
    }
  }
  return { sections, lines, figures: figures.slice(0, 6), period }
}

async function insightsPdf(ctx: RunContext): Promise<PdfReport> {
  const { sections, lines, figures, period } = await insightLines(ctx)
  const zone = zoneOf(ctx.definition)
  const when = (t: string | null) => (t ? localTime(Date.parse(t), zone, false) : '')
  const model: PdfColumn<InsightLine>[] = [
    { header: 'VID', width: 5, value: (l) => l.vid },
    { header: 'PID', width: 5, value: (l) => l.pid },
    { header: 'Vendor', width: 14, value: (l) => l.vendor },
    { header: 'Product', width: 16, value: (l) => l.product },
    { header: 'Class', width: 9, value: (l) => l.deviceClass },
    { header: 'Hosts', width: 5, align: 'right', value: (l) => l.hosts },
  ]
  const columns: Record<InsightSection, PdfColumn<InsightLine>[]> = {
    classificationSummary: [
      { header: 'Group and value', width: 50, value: (l) => l.item },
      { header: 'Count', width: 10, align: 'right', value: (l) => l.count },
      { header: 'Share or detail', width: 30, value: (l) => l.detail },
    ],
    vulnerablePeripherals: [
      { header: 'Name', width: 14, value: (l) => l.item },
      ...model,
      { header: 'Present', width: 6, align: 'right', value: (l) => l.count },
      { header: 'Detail', width: 40, value: (l) => l.detail },
    ],
    uncommonPeripherals: [
      ...model,
      { header: 'Devices', width: 7, align: 'right', value: (l) => l.count },
      { header: 'First seen', width: 11, value: (l) => when(l.firstSeen) },
      { header: 'Last seen', width: 10, value: (l) => when(l.lastSeen) },
      { header: 'Hosts', width: 24, value: (l) => l.detail },
    ],
    whitelistViolations: [
      ...model,
      { header: 'Violations', width: 7, align: 'right', value: (l) => l.count },
      { header: 'First', width: 11, value: (l) => when(l.firstSeen) },
      { header: 'Last', width: 10, value: (l) => when(l.lastSeen) },
      { header: 'Hosts', width: 24, value: (l) => l.detail },
    ],
    errorTotals: [
      { header: 'Host', width: 16, value: (l) => l.item },
      { header: 'Errors', width: 6, align: 'right', value: (l) => l.count },
      { header: 'Last error', width: 11, value: (l) => when(l.lastSeen) },
      { header: 'Detail', width: 60, value: (l) => l.detail },
    ],
  }
  const nouns: Record<InsightSection, string> = { classificationSummary: 'lines', vulnerablePeripherals: 'models', uncommonPeripherals: 'models', whitelistViolations: 'models', errorTotals: 'agents' }
  const maxHosts = typeof ctx.definition.filters.uncommonMaxHosts === 'number' ? ctx.definition.filters.uncommonMaxHosts : 3
  const empty: Record<InsightSection, string> = {
    classificationSummary: 'No agent is enrolled.',
    vulnerablePeripherals: 'No peripheral of the catalogue of vulnerable devices and attack tools was reported.',
    uncommonPeripherals: `No peripheral model is plugged in on ${maxHosts} host(s) or fewer.`,
    whitelistViolations: 'No whitelist violation in the period.',
    errorTotals: 'No agent error or failed command in the period.',
  }
  const titles = { ...sectionTitles, uncommonPeripherals: `Uncommon peripherals (plugged in on ${maxHosts} host(s) or fewer)` }
  const tables: PdfTable<InsightLine>[] = sections.map((s) => ({
    title: titles[s],
    noun: nouns[s],
    columns: columns[s],
    total: lines.get(s)!.length,
    rows: lines.get(s)!,
    maxRows: PDF_MAX_ROWS,
    cutNote: CSV_NOTE,
    empty: empty[s],
    width: s === 'classificationSummary' ? 0.75 : 1,
  }))
  const usesPeriod = sections.includes('whitelistViolations') || sections.includes('errorTotals')
  return pdfShell(ctx, figures, tables, usesPeriod ? period : undefined)
}

async function insightsCsv(ctx: RunContext): Promise<CsvContent> {
  const { sections, lines } = await insightLines(ctx)
  return {
    columns: insightCsvColumns,
    rows: (async function* () {
      for (const s of sections) yield* lines.get(s)!
    })(),
  }
}

// ---------------------------------------------------------------------------------------

const builders: Record<ReportType, { pdf: (ctx: RunContext) => Promise<PdfReport>; csv: (ctx: RunContext) => CsvContent | Promise<CsvContent> }> = {
  agentsInventory: { pdf: agentsPdf, csv: agentsCsv },
  peripheralsInventory: { pdf: peripheralsPdf, csv: peripheralsCsv },
  riskInsightsSummary: { pdf: insightsPdf, csv: insightsCsv },
  eventsDigest: { pdf: eventsPdf, csv: eventsCsv },
  auditTrailDigest: { pdf: auditPdf, csv: auditCsv },
}

export const buildPdf = (ctx: RunContext) => builders[ctx.definition.type].pdf(ctx)
export const buildCsv = async (ctx: RunContext) => builders[ctx.definition.type].csv(ctx)
