// Report definitions, runs, files and e-mail.
import { invalidField } from '../lib/errors.js'
import { chooseResponseType } from '../lib/negotiate.js'
import { contextOf } from '../lib/platform/context.js'
import { contentDisposition } from '../lib/reports/files.js'
import { reportsArguments, reportView, reportWithRuns } from '../lib/reports/views.js'
import type { Handlers } from './types.js'

/** A nullable array body: null or empty answers 400 (the schema lets null through). */
function items<T>(body: T[] | null | undefined, what: string): T[] {
  if (!body || body.length === 0) throw invalidField('body', '(root)', `must be a non-empty array of ${what}`)
  return body
}

export const reportsHandlers: Handlers<
  | 'getAllReports'
  | 'getReport'
  | 'getReportsArguments'
  | 'createReport'
  | 'updateReport'
  | 'deleteReports'
  | 'activateReports'
  | 'deactivateReports'
  | 'requestReportRun'
  | 'getReportFile'
  | 'getReportFileList'
  | 'sendTestReport'
> = {
  async getAllReports(req) {
    return (await req.server.services.reports.list()).map(({ report, last }) => reportView(report, last))
  },

  async getReport(req) {
    const { report, runs } = await req.server.services.reports.get(req.params.reportId)
    return reportWithRuns(report, runs)
  },

  async getReportsArguments(req) {
    return reportsArguments(req.server.services.reports.mailSettings())
  },

  async createReport(req) {
    return req.server.services.reports.create(contextOf(req), req.principal!.name, req.body as Parameters<typeof req.server.services.reports.create>[2])
  },

  async updateReport(req) {
    return req.server.services.reports.update(contextOf(req), req.body as Parameters<typeof req.server.services.reports.update>[1])
  },

  async deleteReports(req) {
    return req.server.services.reports.remove(contextOf(req), items(req.body, 'report ids'))
  },

  async activateReports(req) {
    return req.server.services.reports.setActive(contextOf(req), items(req.body, 'report ids'), true)
  },

  async deactivateReports(req) {
    return req.server.services.reports.setActive(contextOf(req), items(req.body, 'report ids'), false)
  },

  async requestReportRun(req) {
    return req.server.services.reports.requestRuns(contextOf(req), req.principal!.name, items(req.body, 'report ids'))
  },

  async getReportFile(req, reply) {
    const f = await req.server.services.reports.file(contextOf(req), req.body, (mediaType) => Boolean(chooseResponseType(req, [mediaType])))
    // An export like the others: how many records it holds, and whether the format's row limit cut it.
    return reply
      .header('content-disposition', contentDisposition(f.fileName))
      .header('x-records-filtered', String(f.rowCount))
      .header('x-export-truncated', f.truncated ? 'true' : 'false')
      .header('content-length', f.size)
      .type(f.mediaType === 'text/csv' ? 'text/csv; charset=utf-8' : f.mediaType)
      .send(f.stream)
  },

  async getReportFileList(req, reply) {
    const zip = await req.server.services.reports.archive(contextOf(req), items(req.body, 'files to download'))
    return reply.header('content-disposition', `attachment; filename="${zip.fileName}"`).type('application/zip').send(zip.stream)
  },

  async sendTestReport(req) {
    const recipient = req.query.Recipient.trim()
    const sender = req.query.Sender?.trim() || undefined
    if (/[\r\n]/.test(recipient)) throw invalidField('query', 'Recipient', 'must be one e-mail address')
    return req.server.services.reports.testMail(contextOf(req), req.principal!.name, recipient, sender)
  },
}
