// Report definitions, runs, files and e-mail.
import type { FastifyInstance } from 'fastify'
import { audit } from '../lib/audit.js'
import { invalidField, problem } from '../lib/errors.js'
import { PDF_MAX_ROWS, CSV_MAX_ROWS } from '../lib/reports/content.js'
import { createReport, DEFAULT_RETENTION, deleteReports, MAX_RECIPIENTS, MAX_REPORTS, reportView, reportWithRuns, requestRuns, setActive, updateReport } from '../lib/reports/definitions.js'
import { sendArchive, sendFile } from '../lib/reports/download.js'
import { sendTestMessage } from '../lib/reports/mail.js'
import { MAX_RUNS_LISTED } from '../lib/reports/runner.js'
import { DEFAULT_TIME_ZONE, daysOfWeek, frequencies, frequencyFields, frequencyTitles, timeZones } from '../lib/reports/schedule.js'
import { formats, reportTypes, typeInfo } from '../lib/reports/types.js'
import type { Handlers } from './types.js'

const TEST_MAILS_PER_MINUTE = 10
// By database: handlers run in child instances of the app, which share it.
const testMails = new WeakMap<object, Map<string, number[]>>()

/** sendtestreport sends real mail: at most 10 a minute per caller. */
function limitTestMail(app: FastifyInstance, caller: string, now: number) {
  let callers = testMails.get(app.db)
  if (!callers) testMails.set(app.db, (callers = new Map()))
  const recent = (callers.get(caller) ?? []).filter((t) => t > now - 60_000)
  if (recent.length >= TEST_MAILS_PER_MINUTE) {
    const retry = Math.max(1, Math.ceil((recent[0] + 60_000 - now) / 1000))
    throw problem('rate-limited', `At most ${TEST_MAILS_PER_MINUTE} test messages a minute per user; retry in ${retry} seconds.`, { headers: { 'retry-after': String(retry) } })
  }
  recent.push(now)
  callers.set(caller, recent)
}

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
    const { reports } = req.server.repos
    const last = reports.lastRuns()
    return reports.all().map((r) => reportView(r, last.get(r.id)))
  },

  async getReport(req) {
    const report = req.server.repos.reports.byId(req.params.reportId.toLowerCase())
    if (!report) throw problem('not-found', `No report with id ${req.params.reportId}.`)
    return reportWithRuns(req, report)
  },

  async getReportsArguments(req) {
    const { mailer } = req.server
    return {
      types: reportTypes.map((t) => typeInfo[t]),
      formats: (Object.keys(formats) as (keyof typeof formats)[]).map((f) => ({ format: f, ...formats[f] })),
      frequencies: frequencies.map((f) => ({
        frequency: f,
        title: frequencyTitles[f],
        fields: [...frequencyFields[f], 'timeOfDay', 'timeZone'] as ('date' | 'dayOfWeek' | 'dayOfMonth' | 'timeOfDay' | 'timeZone')[],
      })),
      daysOfWeek: [...daysOfWeek],
      timeZones: [...timeZones()],
      limits: {
        maxReports: MAX_REPORTS,
        maxRecipients: MAX_RECIPIENTS,
        maxRetentionFiles: 1000,
        minRetentionBytes: 1024 * 1024,
        maxRetentionBytes: 10 * 1024 ** 3,
        maxDownloadItems: 100,
        maxRunsListed: MAX_RUNS_LISTED,
        pdfMaxRows: PDF_MAX_ROWS,
        csvMaxRows: CSV_MAX_ROWS,
      },
      defaults: { timeZone: DEFAULT_TIME_ZONE, sender: mailer.configured() ? mailer.from() : null, retention: DEFAULT_RETENTION },
      smtpConfigured: mailer.configured(),
    }
  },

  async createReport(req) {
    return createReport(req, req.body as Parameters<typeof createReport>[1])
  },

  async updateReport(req) {
    return updateReport(req, req.body as Parameters<typeof updateReport>[1])
  },

  async deleteReports(req) {
    return deleteReports(req, items(req.body, 'report ids'))
  },

  async activateReports(req) {
    return setActive(req, items(req.body, 'report ids'), true)
  },

  async deactivateReports(req) {
    return setActive(req, items(req.body, 'report ids'), false)
  },

  async requestReportRun(req) {
    return requestRuns(req, items(req.body, 'report ids'))
  },

  async getReportFile(req, reply) {
    return sendFile(req, reply, req.body)
  },

  async getReportFileList(req, reply) {
    return sendArchive(req, reply, items(req.body, 'files to download'))
  },

  async sendTestReport(req) {
    const recipient = req.query.Recipient.trim()
    const sender = req.query.Sender?.trim() || undefined
    if (/[\r\n]/.test(recipient)) throw invalidField('query', 'Recipient', 'must be one e-mail address')
    // Not configured is a setting, not an SMTP answer: said before anything is attempted.
    if (!req.server.mailer.configured()) throw problem('mail-not-configured', 'Outgoing mail is not configured on this server (set PRIME_SMTP_URL): no test message was sent.')
    limitTestMail(req.server, req.principal!.name, Date.now())
    const result = await sendTestMessage(req.server, sender, recipient, req.principal!.name)
    audit(req, {
      description: `Sent a test report e-mail to ${recipient}: ${result.accepted ? 'accepted' : 'not accepted'}`,
      details: result,
      outcome: result.accepted ? 'Succeeded' : 'Failed',
    })
    // A failed send is an error answer, so that a script (curl -f) tells it from success.
    if (!result.accepted) {
      const said = result.smtpResponse && !result.error?.includes(result.smtpResponse) ? ` (${result.smtpResponse})` : ''
      throw problem('mail-not-sent', `The test message to ${recipient} was not sent through ${result.smtpServer}: ${result.error ?? 'not accepted'}${said}`.slice(0, 2000))
    }
    return result
  },
}
