// Files of agentless connections: the status list as CSV or PDF, and the connections in
// the import's own CSV format (credential columns present and empty).
import type { Readable } from 'node:stream'
import type { components } from '../../generated/openapi.js'
import type { Operation } from '../contract.js'
import { csvStream, CSV_TYPE } from '../csv.js'
import { sort } from '../listing.js'
import { MAX_PDF_ROWS, pdfStream, PDF_TYPE, utcText, type PdfColumn } from '../pdf.js'
import type { Context } from '../platform/context.js'
import { fileStamp } from '../reports/files.js'
import { CSV_COLUMNS } from './csv-import.js'
import { defaultsOf, type AgentlessDeps } from './deps.js'
import { agentlessFilter, givenFilters } from './filter.js'
import type { AgentlessFilter, PollingDefaults, Sort } from './ports.js'
import { importRowView, statusView } from './views.js'

type Filter = components['schemas']['AgentlessStatusFilter'] | undefined
type StatusView = ReturnType<typeof statusView>

/** `20250101T120000Z`: the UTC time in export file names. */
// The one form of the service's file names (see lib/reports/files.ts).
const stamp = fileStamp
const timeText = (value: string | null) => (value ? utcText(Date.parse(value)).replace(' UTC', '') : '')

export const STATUS_COLUMNS = [
  'id',
  'computerName',
  'address',
  'protocol',
  'port',
  'userName',
  'isOverrideDefaults',
  'pollingIntervalSeconds',
  'timeoutSeconds',
  'pollerName',
  'statusString',
  'statusDescription',
  'statusErrorDescription',
  'startTime',
  'endTime',
  'durationMs',
  'lastReachableTime',
  'prevRunningErrors',
] as const

const statusPdfColumns: PdfColumn<StatusView>[] = [
  { header: 'Name', width: 13, value: (r) => r.computerName },
  { header: 'Address', width: 12, value: (r) => r.address },
  { header: 'Protocol / port', width: 8, value: (r) => `${r.protocol} ${r.port}` },
  { header: 'Poller', width: 8, value: (r) => r.pollerName ?? '(none)' },
  { header: 'Status', width: 8, value: (r) => r.statusString },
  { header: 'Description', width: 20, value: (r) => r.statusDescription },
  { header: 'Error', width: 16, value: (r) => r.statusErrorDescription },
  { header: 'Start (UTC)', width: 11, value: (r) => timeText(r.startTime) },
  { header: 'End (UTC)', width: 11, value: (r) => timeText(r.endTime) },
]

/** A file to send: its media type, name, how many records matched, and its body (streamed). */
export interface ExportFile {
  type: string
  fileName: string
  records: number
  body: NodeJS.ReadableStream | Readable
}

/** What an export asks for: the status list's filters and order, read from the export's body. */
export interface ExportSelection {
  filter: AgentlessFilter
  order: Sort
  /** The filters given, as label and value (PDF header, audit details). */
  filters: [string, string][]
  /** Whether the body named an order (SortBy). */
  sortGiven: boolean
}

/** Reads an export's body: the status list's filters and order (`listOp`: the status list's operation). */
export function exportSelection(body: Filter | null, listOp: Pick<Operation, 'operationId' | 'sortFields' | 'defaultSort'>): ExportSelection {
  const src = (body ?? {}) as Record<string, unknown>
  const filter = agentlessFilter(src, 'body')
  const order = sort(listOp, (src.SortBy as string | null | undefined) ?? undefined, 'SortBy', 'body')
  return { filter, order, filters: givenFilters(src), sortGiven: Boolean(src.SortBy) }
}

async function* statusRows(deps: AgentlessDeps, ids: readonly number[], defaults: PollingDefaults, csv: boolean) {
  for await (const row of deps.store.connectionsInPages(ids)) {
    const v = statusView(row, defaults)
    yield csv ? { ...v, prevRunningErrors: v.prevRunningErrors.map((e) => `${e.startTime} ${e.statusString}: ${e.errorDescription}`).join(' | ') } : v
  }
}

export async function exportStatus(deps: AgentlessDeps, ctx: Context, format: 'csv' | 'pdf', sel: ExportSelection): Promise<ExportFile> {
  const now = Date.now()
  const defaults = defaultsOf(deps.settings)
  const ids = await deps.store.ids(sel.filter, sel.order, defaults)
  const sortBy = `${sel.order.field}_${sel.order.direction}`
  const fileName = `agentless-status-${stamp(now)}.${format}`
  await deps.audit.record(ctx, {
    description: `Exported the status of ${ids.length} agentless connection(s) as ${format.toUpperCase()} (${fileName})`,
    details: { format, fileName, records: ids.length, filters: Object.fromEntries(sel.filters), sortBy },
  })
  if (format === 'csv') return { type: CSV_TYPE, fileName, records: ids.length, body: csvStream(STATUS_COLUMNS, statusRows(deps, ids, defaults, true)) }
  return {
    type: PDF_TYPE,
    fileName,
    records: ids.length,
    body: pdfStream({
      title: 'Agentless connections status',
      filters: sel.filters,
      sortedBy: sortBy,
      generatedMs: now,
      total: ids.length,
      noun: 'connections',
      columns: statusPdfColumns,
      rows: statusRows(deps, ids.slice(0, MAX_PDF_ROWS), defaults, false) as AsyncIterable<StatusView>,
    }),
  }
}

async function* importRows(deps: AgentlessDeps, ids: readonly number[]) {
  for await (const r of deps.store.connectionsInPages(ids)) yield importRowView(r)
}

export async function exportConnections(deps: AgentlessDeps, ctx: Context, sel: ExportSelection): Promise<ExportFile> {
  const now = Date.now()
  // Ordered by name unless SortBy says otherwise (the status list's default is the name too).
  const ids = await deps.store.ids(sel.filter, sel.order, defaultsOf(deps.settings))
  const fileName = `agentless-connections-${stamp(now)}.csv`
  await deps.audit.record(ctx, {
    description: `Exported ${ids.length} agentless connection(s) in the import format (${fileName}); no credentials`,
    details: { fileName, records: ids.length, filters: Object.fromEntries(sel.filters), sortBy: sel.sortGiven ? `${sel.order.field}_${sel.order.direction}` : 'computerName_asc' },
  })
  return { type: CSV_TYPE, fileName, records: ids.length, body: csvStream(CSV_COLUMNS, importRows(deps, ids)) }
}
