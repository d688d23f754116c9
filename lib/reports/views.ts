// Reports as the contract answers them: definitions, their runs, and the choices a client
// builds its form from.
import type { components } from '../../generated/openapi.js'
import { visibleName } from '../file-names.js'
import { iso } from '../time.js'
import { CSV_MAX_ROWS, PDF_MAX_ROWS } from './content.js'
import { DEFAULT_RETENTION, MAX_RECIPIENTS, MAX_REPORTS } from './definitions.js'
import type { ReportRow, RunRow } from './ports.js'
import { MAX_RUNS_LISTED } from './runner.js'
import { DEFAULT_TIME_ZONE, daysOfWeek, frequencies, frequencyFields, frequencyTitles, type Schedule, timeZones } from './schedule.js'
import { formats, type ReportType, reportTypes, typeInfo } from './types.js'

type S = components['schemas']
export type ReportView = S['ReportViewResource']
type RunView = S['ReportRunView']

const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms))
const hasFile = (r: RunRow) => r.status === 'succeeded' && r.file_path !== null && r.file_deleted_ms === null

export function runView(r: RunRow): RunView {
  return {
    runId: r.id,
    reportId: r.report_id,
    trigger: r.trigger,
    requestedBy: r.requested_by,
    dueTime: iso(r.due_ms),
    queuedTime: iso(r.queued_ms),
    creationTimeEpoch: r.queued_ms,
    startedTime: isoOrNull(r.started_ms),
    finishedTime: isoOrNull(r.finished_ms),
    status: r.status,
    reason: r.reason,
    fileId: hasFile(r) ? r.id : null,
    fileName: r.file_name === null ? null : visibleName(r.file_name),
    mediaType: r.file_name === null ? null : formats[r.format].mediaType,
    sizeBytes: r.size_bytes,
    rowCount: r.row_count,
    truncated: r.truncated === 1,
    fileDeletedTime: isoOrNull(r.file_deleted_ms),
    emailStatus: r.email_status,
    emailDetail: r.email_detail,
  }
}

export function reportView(r: ReportRow, last: RunRow | undefined): ReportView {
  const s = r.schedule === null ? null : (JSON.parse(r.schedule) as Schedule)
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    type: r.type as ReportType,
    format: r.format,
    filters: JSON.parse(r.filters),
    schedule: s,
    recipients: JSON.parse(r.recipients),
    sender: r.sender,
    isActive: r.is_active === 1,
    owner: r.owner,
    createdTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    updatedTime: iso(r.updated_ms),
    lastRun: last
      ? {
          runId: last.id,
          time: iso(last.finished_ms ?? last.started_ms ?? last.queued_ms),
          status: last.status,
          reason: last.reason,
          fileId: hasFile(last) ? last.id : null,
          sizeBytes: last.size_bytes,
        }
      : null,
    nextRunTime: isoOrNull(r.next_run_ms),
    retention: { maxFiles: r.retention_files, maxTotalBytes: r.retention_bytes },
  }
}

/** The report with its most recent runs (newest first). */
export function reportWithRuns(r: ReportRow, runs: RunRow[]): ReportView {
  return { ...reportView(r, runs[0]), runs: runs.map(runView) }
}

/** What the caller should know about a definition just saved (create and update answers only). */
export function withWarnings(view: ReportView, mailConfigured: boolean): ReportView {
  if ((view.recipients?.length ?? 0) > 0 && !mailConfigured) {
    return { ...view, warnings: ['E-mail is not configured on this server (PRIME_SMTP_URL): the files are stored, not mailed to the recipients.'] }
  }
  return view
}

/** The types, formats, schedules and limits a client builds its form from, and whether (and from whom) mail goes out. */
export function reportsArguments(mail: { configured: boolean; from: string }): S['ReportsArgumentsResource'] {
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
    defaults: { timeZone: DEFAULT_TIME_ZONE, sender: mail.configured ? mail.from : null, retention: DEFAULT_RETENTION },
    smtpConfigured: mail.configured,
  }
}
