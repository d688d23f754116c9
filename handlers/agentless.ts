// Agentless connections, worker pollers and the asset producer.
import path from 'node:path'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { MAX_FILE_BYTES } from '../lib/agentless/csv-import.js'
import { exportSelection, type ExportFile } from '../lib/agentless/exports.js'
import { agentlessFilter } from '../lib/agentless/filter.js'
import { statusView } from '../lib/agentless/views.js'
import { problem, ProblemError } from '../lib/errors.js'
import { visibleName } from '../lib/file-names.js'
import { jsonChunks, listAnswer, listAnswerStream, page, sort, streamedPages } from '../lib/listing.js'
import { contextOf } from '../lib/platform/context.js'
import type { Handlers } from './types.js'

// The media types the upload's file part may declare (the contract's `encoding`).
const CSV_PART_TYPES = ['text/csv', 'text/plain', 'application/vnd.ms-excel', 'application/octet-stream']

/**
 * The multipart parser's own errors (no boundary, a body that is not multipart or ends
 * early) carry no status: they are the client's, so 400. Errors with a status (limits) and
 * problems pass as they are.
 */
async function multipartRead<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch (err) {
    if (err instanceof ProblemError || typeof (err as { statusCode?: unknown }).statusCode === 'number') throw err
    const reason = String((err as Error).message ?? err).slice(0, 100)
    throw problem('validation', `The body is not valid multipart/form-data (${reason}): send the CSV file in a part named file.`, {
      errors: [{ location: 'body', name: 'file', reason: 'is not valid multipart/form-data' }],
    })
  }
}

/** Every export says how many records matched (`x-records-filtered`), as the events' do. */
function attach(reply: FastifyReply, file: ExportFile) {
  return reply.header('content-disposition', `attachment; filename="${file.fileName}"`).header('x-records-filtered', String(file.records)).type(file.type).send(file.body)
}

/** An export's filters and order, as the status list reads them. */
function selection(req: FastifyRequest) {
  return exportSelection((req.body ?? null) as Parameters<typeof exportSelection>[0], req.server.contract.operations.get('getAgentlessConnectionDetailsStatus')!)
}

export const agentlessHandlers: Handlers<
  | 'getAgentlessConnectionDetailsStatus'
  | 'createAgentlessConnection'
  | 'updateAgentlessConnection'
  | 'deleteAgentlessConnections'
  | 'registerAgentlessConnections'
  | 'unregisterAgentlessConnections'
  | 'uploadAgentlessConnectionsFile'
  | 'exportAgentlessStatusCsv'
  | 'exportAgentlessStatusPdf'
  | 'exportAgentlessConnectionsCsv'
  | 'getWorkerPollerDetails'
  | 'deleteWorkerPoller'
  | 'setWorkerPollerActivatedStatus'
  | 'pollerRegister'
  | 'pollerHeartbeat'
  | 'pollerGetConnections'
  | 'pollerReportRuns'
  | 'replayAllAssets'
  | 'sendMonitorOldLocation'
> = {
  async getAgentlessConnectionDetailsStatus(req, reply) {
    const filter = agentlessFilter(req.query as Record<string, unknown>, 'query')
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const { pageSize, offset } = page(req.query, req.routeOptions.config.op!)
    const answer = await req.server.services.agentless.statusPage(filter, order, pageSize, offset, streamedPages.above)
    const view = (r: Parameters<typeof statusView>[0]) => statusView(r, answer.defaults)
    if ('stream' in answer) return reply.type('application/json').send(listAnswerStream(answer.total, answer.filtered, jsonChunks(answer.stream, view)))
    return listAnswer(answer.total, answer.filtered, answer.rows.map(view))
  },

  async createAgentlessConnection(req) {
    return req.server.services.agentless.create(contextOf(req), req.body)
  },

  async updateAgentlessConnection(req) {
    return req.server.services.agentless.update(contextOf(req), req.body)
  },

  async deleteAgentlessConnections(req) {
    return req.server.services.agentless.remove(contextOf(req), req.body)
  },

  async registerAgentlessConnections(req) {
    if (!req.body.pollerId) throw problem('validation', 'body/pollerId is required to register connections.', { errors: [{ location: 'body', name: 'pollerId', reason: 'is required to register' }] })
    return req.server.services.agentless.register(contextOf(req), req.body.pollerId, req.body.connectionIds)
  },

  async unregisterAgentlessConnections(req) {
    return req.server.services.agentless.unregister(contextOf(req), req.body.pollerId, req.body.connectionIds)
  },

  async uploadAgentlessConnectionsFile(req) {
    if (!req.isMultipart()) throw problem('unsupported-media-type', 'Upload the CSV file as multipart/form-data, in a part named file.')
    const part = await multipartRead(() => req.file({ limits: { fileSize: MAX_FILE_BYTES, files: 1 } }))
    if (!part) throw problem('validation', 'The multipart body has no file part: send the CSV file in a part named file.', { errors: [{ location: 'body', name: 'file', reason: 'is required' }] })
    if (part.fieldname !== 'file') {
      part.file.resume()
      throw problem('validation', `The file part must be named file, not "${part.fieldname.slice(0, 64)}".`, { errors: [{ location: 'body', name: 'file', reason: 'is required' }] })
    }
    const type = part.mimetype.split(';')[0].trim().toLowerCase()
    if (!CSV_PART_TYPES.includes(type)) {
      part.file.resume()
      throw problem('unsupported-media-type', `The file must be CSV (${CSV_PART_TYPES.join(', ')}), not ${type.slice(0, 100)}.`)
    }
    const data = await multipartRead(() => part.toBuffer())
    const name = part.filename ? visibleName(path.basename(part.filename)) : ''
    return req.server.services.agentless.importCsv(contextOf(req), name || null, data)
  },

  async exportAgentlessStatusCsv(req, reply) {
    return attach(reply, await req.server.services.agentless.exportStatus(contextOf(req), 'csv', selection(req)))
  },

  async exportAgentlessStatusPdf(req, reply) {
    return attach(reply, await req.server.services.agentless.exportStatus(contextOf(req), 'pdf', selection(req)))
  },

  async exportAgentlessConnectionsCsv(req, reply) {
    return attach(reply, await req.server.services.agentless.exportConnections(contextOf(req), selection(req)))
  },

  async getWorkerPollerDetails(req) {
    return req.server.services.agentless.listPollers()
  },

  async deleteWorkerPoller(req) {
    return req.server.services.agentless.deletePoller(contextOf(req), req.query.PollerId)
  },

  async setWorkerPollerActivatedStatus(req) {
    return req.server.services.agentless.setPollerActivated(contextOf(req), req.principal?.name ?? null, req.body)
  },

  async pollerRegister(req) {
    return req.server.services.agentless.registerPoller(contextOf(req), req.body)
  },

  async pollerHeartbeat(req) {
    return req.server.services.agentless.heartbeat(contextOf(req), req.poller?.id, req.body)
  },

  async pollerGetConnections(req, reply) {
    const answer = await req.server.services.agentless.assignments(contextOf(req), req.poller?.id)
    reply.header('cache-control', 'no-store')
    return answer
  },

  async pollerReportRuns(req) {
    return req.server.services.agentless.reportRuns(contextOf(req), req.poller?.id, req.body)
  },

  async replayAllAssets(req) {
    return req.server.services.agentless.publishAssets(contextOf(req), 'ReplayAll')
  },

  async sendMonitorOldLocation(req) {
    return req.server.services.agentless.publishAssets(contextOf(req), 'SendMonitorOldLocation')
  },
}
