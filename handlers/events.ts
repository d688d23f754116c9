// Event and audit-trail queries, the integration feeds and their exports: parse, call the
// event service (lib/events/service.ts), answer with its views.
import type { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { auditFilter, eventFilter, givenFilters, isIncidentFetch } from '../lib/events/filter.js'
import type { ExportFile } from '../lib/events/service.js'
import { AnswerParts, page, sort } from '../lib/listing.js'
import { contextOf } from '../lib/platform/context.js'
import type { Handlers } from './types.js'

export { exportLimits } from '../lib/events/exports.js'

/** A list's answer is JSON text already: one string, or a stream of it for a large page. */
const send = (reply: FastifyReply, answer: Readable | string): FastifyReply => {
  // A page built whole but sent in parts keeps its length (a streamed page is chunked).
  if (answer instanceof AnswerParts) reply.header('content-length', answer.bytes)
  return reply.type('application/json').send(answer)
}

type Body = Record<string, unknown> | null

/** What every export reads from its body: the order (by the list's sort fields), the filters given, who exports. */
function exportInput(req: FastifyRequest, listOp: 'getEvents' | 'getAuditTrails', body: Body) {
  return {
    order: sort(req.server.contract.operations.get(listOp)!, (body?.SortBy as string | null | undefined) ?? undefined, 'SortBy', 'body'),
    filters: givenFilters(body),
    exportedBy: req.principal?.name ?? 'unknown',
  }
}

const sendFile = (reply: FastifyReply, file: ExportFile) =>
  reply
    .header('content-disposition', `attachment; filename="${file.fileName}"`)
    .header('x-records-filtered', String(file.matched))
    .header('x-export-truncated', String(file.truncated))
    .type(file.type)
    .send(file.body)

async function exportEvents(req: FastifyRequest, reply: FastifyReply, format: 'csv' | 'pdf') {
  const body = (req.body ?? null) as Body
  const filter = eventFilter(body, 'body')
  return sendFile(reply, await req.server.services.events.exportEvents(contextOf(req), { filter, format, ...exportInput(req, 'getEvents', body) }))
}

async function exportAudit(req: FastifyRequest, reply: FastifyReply, format: 'csv' | 'pdf') {
  const body = (req.body ?? null) as Body
  const filter = auditFilter(body, 'body')
  return sendFile(reply, await req.server.services.events.exportAudit(contextOf(req), { filter, format, ...exportInput(req, 'getAuditTrails', body) }))
}

export const eventsHandlers: Handlers<
  'getEvents' | 'getEventsIntegration' | 'getAuditTrails' | 'getAuditsIntegration' | 'exportGetEvents' | 'exportGetEventsPdf' | 'exportGetAudit' | 'exportGetAuditPdf'
> = {
  async getEvents(req, reply) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const pg = page(req.query, req.routeOptions.config.op!)
    const filter = eventFilter(req.query)
    return send(reply, await req.server.services.events.eventsAnswer(filter, order, pg, isIncidentFetch(req.query, order)))
  },

  async getEventsIntegration(req, reply) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const pg = page(req.query, req.routeOptions.config.op!)
    return send(reply, await req.server.services.events.eventFeedAnswer(eventFilter(req.query), order, pg))
  },

  async getAuditTrails(req, reply) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const pg = page(req.query, req.routeOptions.config.op!)
    return send(reply, await req.server.services.events.auditTrailAnswer(auditFilter(req.query), order, pg))
  },

  async getAuditsIntegration(req, reply) {
    const pg = page(req.query, req.routeOptions.config.op!)
    return send(reply, await req.server.services.events.auditFeedAnswer(auditFilter(req.query), pg))
  },

  async exportGetEvents(req, reply) {
    return exportEvents(req, reply, 'csv')
  },

  async exportGetEventsPdf(req, reply) {
    return exportEvents(req, reply, 'pdf')
  },

  async exportGetAudit(req, reply) {
    return exportAudit(req, reply, 'csv')
  },

  async exportGetAuditPdf(req, reply) {
    return exportAudit(req, reply, 'pdf')
  },
}
