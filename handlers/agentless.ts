// Agentless connections, worker pollers and the asset producer.
import path from 'node:path'
import { jsonChunks, listAnswer, listAnswerStream, page, sort, streamedPages } from '../lib/listing.js'
import { inPages } from '../db/exports.js'
import { problem, ProblemError } from '../lib/errors.js'
import { visibleName } from '../lib/file-names.js'
import { publishAssets } from '../lib/agentless/assets.js'
import { createConnection, defaultsOf, deleteConnections, registerConnections, statusView, unregisterConnections, updateConnection } from '../lib/agentless/connections.js'
import { importConnections, MAX_FILE_BYTES } from '../lib/agentless/csv-import.js'
import { exportConnections, exportStatus } from '../lib/agentless/exports.js'
import { agentlessFilter } from '../lib/agentless/filter.js'
import { deletePoller, listPollers, pollerAssignments, pollerHeartbeat, pollerReportRuns, registerPoller, setPollerActivated } from '../lib/agentless/pollers.js'
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
    const { pageSize, offset } = page(req.query)
    const defaults = defaultsOf(req.server)
    const { agentless } = req.server.repos
    if (pageSize > streamedPages.above) {
      // The ids in order (8 bytes a connection), then the rows a thousand at a time.
      const { total, filtered } = agentless.counts(filter)
      const rows = inPages(agentless.ids(filter, order, defaults, pageSize, offset), (ids) => agentless.connectionsByIds(ids))
      return reply.type('application/json').send(
        listAnswerStream(
          total,
          filtered,
          jsonChunks(rows, (r) => statusView(r, defaults)),
        ),
      )
    }
    const { total, filtered, rows } = agentless.list(filter, order, defaults, pageSize, offset)
    return listAnswer(
      total,
      filtered,
      rows.map((r) => statusView(r, defaults)),
    )
  },

  async createAgentlessConnection(req) {
    return createConnection(req, req.body)
  },

  async updateAgentlessConnection(req) {
    return updateConnection(req, req.body)
  },

  async deleteAgentlessConnections(req) {
    return deleteConnections(req, req.body)
  },

  async registerAgentlessConnections(req) {
    if (!req.body.pollerId) throw problem('validation', 'body/pollerId is required to register connections.', { errors: [{ location: 'body', name: 'pollerId', reason: 'is required to register' }] })
    return registerConnections(req, req.body.pollerId, req.body.connectionIds)
  },

  async unregisterAgentlessConnections(req) {
    return unregisterConnections(req, req.body.pollerId, req.body.connectionIds)
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
    return importConnections(req, name || null, data)
  },

  async exportAgentlessStatusCsv(req, reply) {
    return exportStatus(req, reply, 'csv')
  },

  async exportAgentlessStatusPdf(req, reply) {
    return exportStatus(req, reply, 'pdf')
  },

  async exportAgentlessConnectionsCsv(req, reply) {
    return exportConnections(req, reply)
  },

  async getWorkerPollerDetails(req) {
    return listPollers(req)
  },

  async deleteWorkerPoller(req) {
    return deletePoller(req, req.query.PollerId)
  },

  async setWorkerPollerActivatedStatus(req) {
    return setPollerActivated(req, req.body)
  },

  async pollerRegister(req) {
    return registerPoller(req, req.body)
  },

  async pollerHeartbeat(req) {
    return pollerHeartbeat(req, req.body)
  },

  async pollerGetConnections(req, reply) {
    return pollerAssignments(req, reply)
  },

  async pollerReportRuns(req) {
    return pollerReportRuns(req, req.body)
  },

  async replayAllAssets(req) {
    return publishAssets(req, 'ReplayAll')
  },

  async sendMonitorOldLocation(req) {
    return publishAssets(req, 'SendMonitorOldLocation')
  },
}
