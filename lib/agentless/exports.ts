// Files of agentless connections: the status list as CSV or PDF, and the connections in
// the import's own CSV format (credential columns present and empty).
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { components } from '../../generated/openapi.js'
import type { ConnectionRow } from '../../db/agentless.js'
import { inPages } from '../../db/exports.js'
import { audit } from '../audit.js'
import { csvStream, CSV_TYPE } from '../csv.js'
import { sort } from '../listing.js'
import { MAX_PDF_ROWS, pdfStream, PDF_TYPE, utcText, type PdfColumn } from '../pdf.js'
import { fileStamp } from '../reports/files.js'
import { defaultsOf, statusView } from './connections.js'
import { CSV_COLUMNS } from './csv-import.js'
import { agentlessFilter, givenFilters } from './filter.js'

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

/** Every export says how many records matched (`x-records-filtered`), as the events' do. */
function attach(reply: FastifyReply, type: string, fileName: string, records: number, body: NodeJS.ReadableStream) {
  return reply.header('content-disposition', `attachment; filename="${fileName}"`).header('x-records-filtered', String(records)).type(type).send(body)
}

/** The ids to export, in order, with what the caller asked for. */
function select(req: FastifyRequest) {
  const body = (req.body ?? undefined) as Filter
  const src = (body ?? {}) as Record<string, unknown>
  const filter = agentlessFilter(src, 'body')
  const op = req.server.contract.operations.get('getAgentlessConnectionDetailsStatus')!
  const order = sort(op, (src.SortBy as string | null | undefined) ?? undefined, 'SortBy', 'body')
  const defaults = defaultsOf(req.server)
  const ids = req.server.repos.agentless.ids(filter, order, defaults)
  return { ids, defaults, filters: givenFilters(src), sortBy: `${order.field}_${order.direction}` }
}

function rows(req: FastifyRequest, ids: readonly number[]) {
  return inPages<ConnectionRow>(ids, (page) => req.server.repos.agentless.connectionsByIds(page))
}

async function* statusRows(req: FastifyRequest, ids: readonly number[], defaults: ReturnType<typeof defaultsOf>, csv: boolean) {
  for await (const row of rows(req, ids)) {
    const v = statusView(row, defaults)
    yield csv ? { ...v, prevRunningErrors: v.prevRunningErrors.map((e) => `${e.startTime} ${e.statusString}: ${e.errorDescription}`).join(' | ') } : v
  }
}

export function exportStatus(req: FastifyRequest, reply: FastifyReply, format: 'csv' | 'pdf') {
  const now = Date.now()
  const { ids, defaults, filters, sortBy } = select(req)
  const fileName = `agentless-status-${stamp(now)}.${format}`
  audit(req, {
    description: `Exported the status of ${ids.length} agentless connection(s) as ${format.toUpperCase()} (${fileName})`,
    details: { format, fileName, records: ids.length, filters: Object.fromEntries(filters), sortBy },
  })
  if (format === 'csv') return attach(reply, CSV_TYPE, fileName, ids.length, csvStream(STATUS_COLUMNS, statusRows(req, ids, defaults, true)))
  return attach(
    reply,
    PDF_TYPE,
    fileName,
    ids.length,
    pdfStream({
      title: 'Agentless connections status',
      filters,
      sortedBy: sortBy,
      generatedMs: now,
      total: ids.length,
      noun: 'connections',
      columns: statusPdfColumns,
      rows: statusRows(req, ids.slice(0, MAX_PDF_ROWS), defaults, false) as AsyncIterable<StatusView>,
    }),
  )
}

async function* importRows(req: FastifyRequest, ids: readonly number[]) {
  for await (const r of rows(req, ids)) {
    const own = r.is_override_defaults === 1
    yield {
      name: r.name,
      address: r.address,
      protocol: r.protocol,
      port: r.port,
      useTls: r.use_tls === 1,
      userName: r.user_name,
      password: null,
      privateKey: null,
      privateKeyPassphrase: null,
      isOverrideDefaults: own,
      pollingIntervalSeconds: own ? r.polling_interval_s : null,
      timeoutSeconds: own ? r.timeout_s : null,
      pollerId: r.poller_id,
    }
  }
}

export function exportConnections(req: FastifyRequest, reply: FastifyReply) {
  const now = Date.now()
  const body = (req.body ?? {}) as Record<string, unknown>
  // Ordered by name unless SortBy says otherwise (the status list's default is the name too).
  const { ids, filters, sortBy } = select(req)
  const fileName = `agentless-connections-${stamp(now)}.csv`
  audit(req, {
    description: `Exported ${ids.length} agentless connection(s) in the import format (${fileName}); no credentials`,
    details: { fileName, records: ids.length, filters: Object.fromEntries(filters), sortBy: body.SortBy ? sortBy : 'computerName_asc' },
  })
  return attach(reply, CSV_TYPE, fileName, ids.length, csvStream(CSV_COLUMNS, importRows(req, ids)))
}
