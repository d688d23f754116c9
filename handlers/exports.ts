import type { FastifyReply, FastifyRequest } from 'fastify'
import { agentFilterFromBody, agentFilterFromQuery, peripheralFilterFromBody } from '../lib/agents/filter.js'
import type { ExportFormat } from '../lib/agents/service.js'
import { agentPdfColumns, agentViews, modelColumns, modelPdfColumns, modelView } from '../lib/agents/views.js'
import { csvStream, CSV_TYPE } from '../lib/csv.js'
import { problem } from '../lib/errors.js'
import { sort, type Sort } from '../lib/listing.js'
import { chooseResponseType } from '../lib/negotiate.js'
import { MAX_PDF_ROWS, pdfStream, PDF_TYPE } from '../lib/pdf.js'
import { contextOf } from '../lib/platform/context.js'
import type { components } from '../generated/openapi.js'
import type { Handlers } from './types.js'

// The body is optional, so the contract's types leave it untyped.
type AgentsExportFilter = components['schemas']['AgentsExportFilter'] | null | undefined
const mediaType = { csv: CSV_TYPE, pdf: PDF_TYPE } as const

/** Every export says how many records matched (`x-records-filtered`), as the events' do. */
function attach(reply: FastifyReply, format: ExportFormat, fileName: string, records: number, body: NodeJS.ReadableStream) {
  return reply.header('content-disposition', `attachment; filename="${fileName}"`).header('x-records-filtered', String(records)).type(mediaType[format]).send(body)
}

/** The agents matching the filter as a file, audited with what was asked. */
async function sendAgents(req: FastifyRequest, reply: FastifyReply, format: ExportFormat, body: { filter: ReturnType<typeof agentFilterFromQuery>; order: Sort; given: unknown }) {
  const file = await req.server.services.agents.exportAgents(contextOf(req), format, body.filter, body.order, body.given)
  if (format === 'csv') {
    const columns = Object.keys(req.server.contract.spec.components.schemas.AgentViewResource.properties)
    return attach(reply, format, file.fileName, file.records, csvStream(columns, agentViews(await file.rows())))
  }
  return attach(
    reply,
    format,
    file.fileName,
    file.records,
    pdfStream({
      title: 'Agents',
      filters: file.filters,
      sortedBy: file.sortBy,
      generatedMs: file.generatedMs,
      total: file.records,
      noun: 'agents',
      columns: agentPdfColumns,
      rows: agentViews(await file.rows(MAX_PDF_ROWS)),
    }),
  )
}

/** The peripherals matching the body aggregated by model, as a file, audited. */
async function sendModels(req: FastifyRequest, reply: FastifyReply, format: ExportFormat) {
  const filter = peripheralFilterFromBody(req.body as Record<string, unknown> | null)
  const file = await req.server.services.agents.exportModels(contextOf(req), format, filter, req.body)
  const models = file.rows.map(modelView)
  if (format === 'csv') return attach(reply, format, file.fileName, file.records, csvStream(modelColumns, models))
  return attach(
    reply,
    format,
    file.fileName,
    file.records,
    pdfStream({
      title: 'Peripherals by model',
      filters: file.filters,
      sortedBy: 'hosts, most first',
      generatedMs: file.generatedMs,
      total: file.records,
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
    return sendAgents(req, reply, 'csv', { filter: agentFilterFromBody(body), order: bodySort(req, body?.sortBy), given: body })
  },

  async getAgentExportFile(req, reply) {
    const format = (req.query.Format ?? 'csv').toLowerCase() as ExportFormat
    // Accept must allow the type that Format asks for, not merely one of the two.
    if (!chooseResponseType(req, [mediaType[format].split(';')[0]])) {
      throw problem('not-acceptable', `Format=${format} answers ${mediaType[format].split(';')[0]}, which Accept does not allow.`)
    }
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    return sendAgents(req, reply, format, { filter: agentFilterFromQuery(req.query), order, given: req.query })
  },

  async exportAgentPdf(req, reply) {
    const body = req.body as AgentsExportFilter
    return sendAgents(req, reply, 'pdf', { filter: agentFilterFromBody(body), order: bodySort(req, body?.sortBy), given: body })
  },

  async exportPeripheralsAgg(req, reply) {
    return sendModels(req, reply, 'csv')
  },

  async exportPeripheralsAggPdf(req, reply) {
    return sendModels(req, reply, 'pdf')
  },
}
