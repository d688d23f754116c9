import type { FastifyReply, FastifyRequest } from 'fastify'
import type { AgentRow } from '../db/agents.js'
import { agentView } from '../lib/agents/views.js'
import type { PeripheralModelRow } from '../db/exports.js'
import { agentFilterFromBody, agentFilterFromQuery, peripheralFilterFromBody, type AgentFilter } from '../lib/agents/filter.js'
import { audit } from '../lib/audit.js'
import { csvStream, CSV_TYPE } from '../lib/csv.js'
import { problem } from '../lib/errors.js'
import { severityNames, sort, type Sort } from '../lib/listing.js'
import { chooseResponseType } from '../lib/negotiate.js'
import { MAX_PDF_ROWS, pdfStream, PDF_TYPE, utcText, type PdfColumn } from '../lib/pdf.js'
import { fileStamp } from '../lib/reports/files.js'
import { iconName, productName, vendorName } from '../lib/usb.js'
import type { components } from '../generated/openapi.js'
import type { Handlers } from './types.js'

// The body is optional, so the contract's types leave it untyped.
type AgentsExportFilter = components['schemas']['AgentsExportFilter'] | null | undefined
type Format = 'csv' | 'pdf'
const mediaType = { csv: CSV_TYPE, pdf: PDF_TYPE } as const

/** `20250101T120000Z`: the UTC time in the one form of the service's file names (see lib/reports/files.ts). */
const stamp = fileStamp

// Paging is accepted from clients that send their list query as is, and means nothing here.
const IGNORED = new Set(['pagenumber', 'pagesize', 'format', 'sortby'])

/** The filters a caller gave, as label and value, for the report and the audit record. */
function givenFilters(src: unknown): [string, string][] {
  if (!src || typeof src !== 'object') return []
  return Object.entries(src)
    .filter(([k, v]) => v !== null && v !== undefined && v !== '' && !IGNORED.has(k.toLowerCase()))
    .map(([k, v]) => [k, String(v)])
}

const severityText = (n: number) => severityNames[n] ?? String(n)
const timeText = (value: string | null) => (value ? utcText(Date.parse(value)).replace(' UTC', '') : '')

const agentPdfColumns: PdfColumn<ReturnType<typeof agentView>>[] = [
  { header: 'Host', width: 15, value: (a) => a.hostIdentifier },
  { header: 'IP address', width: 10, value: (a) => a.localIpAddress },
  { header: 'Connection', width: 9, value: (a) => a.connectionStatus },
  { header: 'Status', width: 8, value: (a) => a.displayStatusCombined },
  { header: 'Mode', width: 6, value: (a) => a.operationalStatus },
  { header: 'License', width: 8, value: (a) => a.licenseStatus },
  { header: 'OS', width: 14, value: (a) => a.osVersion },
  { header: 'Service', width: 8, value: (a) => a.serviceVersion },
  { header: 'Driver', width: 8, value: (a) => a.kbDriverVersion },
  { header: 'Approved', width: 8, align: 'right', value: (a) => a.approvedAndPresent },
  { header: 'Unapproved', width: 9, align: 'right', value: (a) => a.notApproved },
  { header: 'Severity', width: 10, value: (a) => severityText(a.severity) },
  { header: 'Last check-in (UTC)', width: 13, value: (a) => timeText(a.lastUpdated) },
]

const modelView = (m: PeripheralModelRow) => ({
  vid: m.vid,
  pid: m.pid,
  guiVid: m.gui_vid ?? vendorName(m.vid) ?? null,
  guiPid: m.gui_pid ?? productName(m.vid, m.pid) ?? null,
  devIcon: m.dev_icon,
  devIconDescription: iconName(m.dev_icon),
  hosts: m.hosts,
  present: m.present,
  approved: m.approved,
  notApproved: m.not_approved,
  isKnownAttackTool: m.is_attack_tool === 1,
  isVulnerablePeripheral: m.is_vulnerable === 1,
  vulnerability: m.vulnerability,
  severity: m.severity,
})
const modelColumns = Object.keys(modelView({ vid: '', pid: '', dev_icon: 0 } as PeripheralModelRow))

const modelPdfColumns: PdfColumn<ReturnType<typeof modelView>>[] = [
  { header: 'VID', width: 5, value: (m) => m.vid },
  { header: 'PID', width: 5, value: (m) => m.pid },
  { header: 'Vendor', width: 15, value: (m) => m.guiVid },
  { header: 'Product', width: 18, value: (m) => m.guiPid },
  { header: 'Class', width: 10, value: (m) => m.devIconDescription },
  { header: 'Hosts', width: 5, align: 'right', value: (m) => m.hosts },
  { header: 'Present', width: 6, align: 'right', value: (m) => m.present },
  { header: 'Approved', width: 7, align: 'right', value: (m) => m.approved },
  { header: 'Unapproved', width: 8, align: 'right', value: (m) => m.notApproved },
  { header: 'Attack tool', width: 8, value: (m) => m.isKnownAttackTool },
  { header: 'Vulnerable', width: 8, value: (m) => m.isVulnerablePeripheral },
  { header: 'Severity', width: 9, value: (m) => severityText(m.severity) },
  { header: 'Vulnerability', width: 18, value: (m) => m.vulnerability },
]

async function* agentViews(rows: AsyncIterable<AgentRow>) {
  for await (const row of rows) yield agentView(row)
}

/** Every export says how many records matched (`x-records-filtered`), as the events' do. */
function attach(reply: FastifyReply, format: Format, fileName: string, records: number, body: NodeJS.ReadableStream) {
  return reply.header('content-disposition', `attachment; filename="${fileName}"`).header('x-records-filtered', String(records)).type(mediaType[format]).send(body)
}

/** The agents matching the filter as a file, audited with what was asked. */
function sendAgents(req: FastifyRequest, reply: FastifyReply, format: Format, filter: AgentFilter, order: Sort, given: unknown) {
  const { repos, contract } = req.server
  const now = Date.now()
  const ids = repos.exports.agentIds(filter, order)
  const fileName = `agents-${stamp(now)}.${format}`
  const filters = givenFilters(given)
  const sortBy = `${order.field}_${order.direction}`
  audit(req, {
    description: `Exported ${ids.length} agent(s) as ${format.toUpperCase()} (${fileName})`,
    details: { format, fileName, records: ids.length, filters: Object.fromEntries(filters), sortBy },
  })
  if (format === 'csv') {
    const columns = Object.keys(contract.spec.components.schemas.AgentViewResource.properties)
    return attach(reply, format, fileName, ids.length, csvStream(columns, agentViews(repos.exports.agents(ids))))
  }
  return attach(
    reply,
    format,
    fileName,
    ids.length,
    pdfStream({
      title: 'Agents',
      filters,
      sortedBy: sortBy,
      generatedMs: now,
      total: ids.length,
      noun: 'agents',
      columns: agentPdfColumns,
      rows: agentViews(repos.exports.agents(ids.slice(0, MAX_PDF_ROWS))),
    }),
  )
}

/** The peripherals matching the body aggregated by model, as a file, audited. */
async function sendModels(req: FastifyRequest, reply: FastifyReply, format: Format) {
  const now = Date.now()
  const models = (await req.server.repos.exports.peripheralModels(peripheralFilterFromBody(req.body as Record<string, unknown> | null))).map(modelView)
  const fileName = `peripherals-aggregated-${stamp(now)}.${format}`
  const filters = givenFilters(req.body)
  audit(req, {
    description: `Exported ${models.length} peripheral model(s) as ${format.toUpperCase()} (${fileName})`,
    details: { format, fileName, records: models.length, filters: Object.fromEntries(filters) },
  })
  if (format === 'csv') return attach(reply, format, fileName, models.length, csvStream(modelColumns, models))
  return attach(
    reply,
    format,
    fileName,
    models.length,
    pdfStream({
      title: 'Peripherals by model',
      filters,
      sortedBy: 'hosts, most first',
      generatedMs: now,
      total: models.length,
      noun: 'peripheral models',
      columns: modelPdfColumns,
      rows: models,
    }),
  )
}

/** The sort of GET agents, from an export body. */
function bodySort(req: FastifyRequest, value: string | null | undefined): Sort {
  return sort(req.server.contract.operations.get('getAgents')!, value ?? undefined, 'sortBy', 'body')
}

export const exportsHandlers: Handlers<'exportAgentCsv' | 'getAgentExportFile' | 'exportAgentPdf' | 'exportPeripheralsAgg' | 'exportPeripheralsAggPdf'> = {
  async exportAgentCsv(req, reply) {
    const body = req.body as AgentsExportFilter
    return sendAgents(req, reply, 'csv', agentFilterFromBody(body), bodySort(req, body?.sortBy), body)
  },

  async getAgentExportFile(req, reply) {
    const format = (req.query.Format ?? 'csv').toLowerCase() as Format
    // Accept must allow the type that Format asks for, not merely one of the two.
    if (!chooseResponseType(req, [mediaType[format].split(';')[0]])) {
      throw problem('not-acceptable', `Format=${format} answers ${mediaType[format].split(';')[0]}, which Accept does not allow.`)
    }
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    return sendAgents(req, reply, format, agentFilterFromQuery(req.query), order, req.query)
  },

  async exportAgentPdf(req, reply) {
    const body = req.body as AgentsExportFilter
    return sendAgents(req, reply, 'pdf', agentFilterFromBody(body), bodySort(req, body?.sortBy), body)
  },

  async exportPeripheralsAgg(req, reply) {
    return sendModels(req, reply, 'csv')
  },

  async exportPeripheralsAggPdf(req, reply) {
    return sendModels(req, reply, 'pdf')
  },
}
