// The events and audit trail digests: their figures and tables (PDF) or rows (CSV).
import type { AuditDigestRow, DigestTotals, EventRow } from './ports.js'
import { severityNames } from '../listing.js'
import { iso } from '../time.js'
import type { PdfColumn, PdfReport, PdfTable } from './pdf.js'
import type { Filters } from './types.js'
import { PDF_MAX_ROWS, TOP, CSV_NOTE, type RunContext, type CsvContent, pct, localTime, zoneOf, periodRange, pdfShell, fig, take, severityText } from './content-common.js'

// Events and audit digests

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

export async function eventsPdf(ctx: RunContext): Promise<PdfReport> {
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

export function eventsCsv(ctx: RunContext): CsvContent {
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

export async function auditPdf(ctx: RunContext): Promise<PdfReport> {
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

export function auditCsv(ctx: RunContext): CsvContent {
  return { columns: auditCsvColumns, rows: auditViews(ctx.sources.reports.auditRecords(auditFilter(ctx).filter, ctx.signal)) }
}
