// Report definitions: the views answered, and the rules of create, update, activate,
// deactivate, delete and run-now. Everything is checked before anything is written,
// and each change is one transaction with its audit record.
import crypto from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { ReportChanges, ReportRow, RunRow } from '../../db/reports.js'
import type { components } from '../../generated/openapi.js'
import type { AuditAsset } from '../../db/audit.js'
import { audit } from '../audit.js'
import { problem, type FieldError } from '../errors.js'
import { iso } from '../time.js'
import { visibleName } from '../file-names.js'
import { applyRetention, removeReportFiles } from './files.js'
import { reportScheduler, snapshot } from './index.js'
import { MAX_RUNS_LISTED } from './runner.js'
import { nextDue, readSchedule, type Schedule } from './schedule.js'
import { formats, readFilters, type Filters, type ReportType } from './types.js'

type S = components['schemas']
type ReportView = S['ReportViewResource']
type RunView = S['ReportRunView']
type ItemResult = S['ItemResult']

export const MAX_REPORTS = 1000
export const MAX_RECIPIENTS = 50
export const DEFAULT_RETENTION = { maxFiles: 30, maxTotalBytes: 512 * 1024 * 1024 }

const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms))
const hasFile = (r: RunRow) => r.status === 'succeeded' && r.file_path !== null && r.file_deleted_ms === null

export const reportAsset = (r: Pick<ReportRow, 'id' | 'name'>): AuditAsset => ({ key: r.id, name: r.name, type: 'Report', subType: 'None', detail: 'ReportDefinition' })

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

/** The report with its most recent runs. */
export function reportWithRuns(req: FastifyRequest, r: ReportRow): ReportView {
  const runs = req.server.repos.reports.runsOf(r.id, MAX_RUNS_LISTED)
  return { ...reportView(r, runs[0]), runs: runs.map(runView) }
}

/** The problem document names at most this many fields (as for schema errors). */
export const MAX_FIELD_ERRORS = 20

function fail(errors: FieldError[]): never {
  const named = errors.slice(0, MAX_FIELD_ERRORS)
  const more = errors.length > named.length ? ` (and ${errors.length - named.length} more)` : ''
  const detail = named.map((e) => `${e.location}/${e.name} ${e.reason}`.slice(0, 200)).join('; ') + more
  throw problem('validation', detail, { errors: named })
}

/** The recipients, each once (case-insensitive); repeats are errors named `recipients/<i>`. */
function readRecipients(list: string[] | undefined, errors: FieldError[]): string[] {
  const seen = new Map<string, number>()
  for (const [i, address] of (list ?? []).entries()) {
    const key = address.trim().toLowerCase()
    if (seen.has(key)) errors.push({ location: 'body', name: `recipients/${i}`, reason: `repeats recipients/${seen.get(key)} (${address}); each recipient once` })
    else seen.set(key, i)
  }
  return (list ?? []).map((a) => a.trim())
}

function readName(name: string, errors: FieldError[]): string {
  const trimmed = name.trim()
  if (!trimmed) errors.push({ location: 'body', name: 'name', reason: 'must not be blank' })
  return trimmed
}

const retentionOf = (r: ReportView['retention'] | undefined) => ({
  maxFiles: r?.maxFiles ?? DEFAULT_RETENTION.maxFiles,
  maxTotalBytes: r?.maxTotalBytes ?? DEFAULT_RETENTION.maxTotalBytes,
})

export function createReport(req: FastifyRequest, body: ReportView & { name: string; type: ReportType; format: 'PDF' | 'CSV' }): ReportView {
  const now = Date.now()
  const errors: FieldError[] = []
  const name = readName(body.name, errors)
  const filters = readFilters(body.type, body.filters as Filters | null, errors)
  const schedule = readSchedule(body.schedule as Record<string, unknown> | null | undefined, now, errors)
  const recipients = readRecipients(body.recipients, errors)
  if (errors.length) fail(errors)
  const retention = retentionOf(body.retention)
  const active = body.isActive !== false
  const { reports } = req.server.repos
  return req.server.db.transaction(() => {
    if (reports.count() >= MAX_REPORTS) throw problem('conflict', `There are already ${MAX_REPORTS} report definitions, the most this server keeps; delete one first.`)
    const other = reports.byName(name)
    if (other)
      throw problem('conflict', `A report named "${other.name}" already exists (names are compared ignoring case).`, { errors: [{ location: 'body', name: 'name', reason: 'is already used' }] })
    const id = crypto.randomUUID()
    reports.insert({
      id,
      name,
      description: body.description ?? null,
      type: body.type,
      format: body.format,
      filters: JSON.stringify(filters),
      schedule: schedule === null ? null : JSON.stringify(schedule),
      recipients: JSON.stringify(recipients),
      sender: body.sender ?? null,
      is_active: active ? 1 : 0,
      owner: req.principal!.name,
      created_ms: now,
      updated_ms: now,
      next_run_ms: active && schedule ? nextDue(schedule, now) : null,
      retention_files: retention.maxFiles,
      retention_bytes: retention.maxTotalBytes,
    })
    const view = reportView(reports.byId(id)!, undefined)
    audit(req, { description: `Created report "${name}" (${body.type}, ${body.format})`, details: view, asset: reportAsset({ id, name }) })
    return withWarnings(req, view)
  })()
}

const editable = ['name', 'description', 'type', 'format', 'filters', 'schedule', 'recipients', 'sender', 'isActive', 'retention'] as const

export async function updateReport(req: FastifyRequest, body: ReportView & { id: string }): Promise<ReportView> {
  const now = Date.now()
  const { reports } = req.server.repos
  const id = body.id.toLowerCase()
  const current = reports.byId(id)
  if (!current) throw problem('not-found', `No report with id ${body.id}.`)
  const errors: FieldError[] = []
  const changes: ReportChanges = {}
  const sent = (k: (typeof editable)[number]) => body[k] !== undefined
  if (sent('name')) changes.name = readName(body.name!, errors)
  if (sent('description')) changes.description = body.description ?? null
  if (sent('format')) changes.format = body.format!
  const type = (body.type ?? current.type) as ReportType
  if (sent('type')) changes.type = type
  if (sent('filters')) {
    changes.filters = JSON.stringify(readFilters(type, body.filters as Filters | null, errors))
  } else if (type !== current.type) {
    // The stored filters must fit the new type (each foreign one is named).
    const before = errors.length
    readFilters(type, JSON.parse(current.filters), errors)
    for (const e of errors.slice(before)) e.reason += ' (a stored filter: send filters for the new type)'
  }
  let schedule = current.schedule === null ? null : (JSON.parse(current.schedule) as Schedule)
  if (sent('schedule')) {
    schedule = readSchedule(body.schedule as Record<string, unknown> | null, now, errors)
    changes.schedule = schedule === null ? null : JSON.stringify(schedule)
  }
  if (sent('recipients')) changes.recipients = JSON.stringify(readRecipients(body.recipients, errors))
  if (sent('sender')) changes.sender = body.sender ?? null
  if (sent('isActive')) changes.is_active = body.isActive ? 1 : 0
  if (body.isActive === true && !sent('schedule') && current.is_active === 0 && schedule?.frequency === 'once' && nextDue(schedule, now) === null) {
    errors.push({ location: 'body', name: 'isActive', reason: `cannot be true: the once schedule (${schedule.date} ${schedule.timeOfDay} ${schedule.timeZone}) has passed; send a new schedule` })
  }
  if (sent('retention')) {
    const r = retentionOf(body.retention)
    changes.retention_files = r.maxFiles
    changes.retention_bytes = r.maxTotalBytes
  }
  if (errors.length) fail(errors)
  const view = req.server.db.transaction(() => {
    const row = reports.byId(id)
    if (!row) throw problem('not-found', `No report with id ${body.id}.`)
    if (changes.name !== undefined) {
      const other = reports.byName(changes.name)
      if (other && other.id !== id)
        throw problem('conflict', `A report named "${other.name}" already exists (names are compared ignoring case).`, { errors: [{ location: 'body', name: 'name', reason: 'is already used' }] })
    }
    const active = (changes.is_active ?? row.is_active) === 1
    if (sent('schedule') || sent('isActive')) changes.next_run_ms = active && schedule ? nextDue(schedule, now) : null
    changes.updated_ms = now
    const before = reportView(row, undefined)
    reports.update(id, changes)
    const after = reportView(reports.byId(id)!, reports.lastRunOf(id))
    const changed = Object.fromEntries(
      Object.keys(after)
        .filter((k) => !['updatedTime', 'lastRun'].includes(k) && JSON.stringify((before as any)[k]) !== JSON.stringify((after as any)[k]))
        .map((k) => [k, { from: (before as any)[k], to: (after as any)[k] }]),
    )
    audit(req, {
      description: `Changed report "${after.name}"${Object.keys(changed).length ? `: ${Object.keys(changed).join(', ')}` : ' (nothing differed)'}`,
      details: changed,
      asset: reportAsset(row),
    })
    return after
  })()
  // A lower retention applies at once (the newest file is always kept).
  if (changes.retention_files !== undefined && (changes.retention_files < current.retention_files || changes.retention_bytes! < current.retention_bytes)) {
    await applyRetention(req.server, id, changes.retention_files, changes.retention_bytes!, now)
    return withWarnings(req, reportView(reports.byId(id)!, reports.lastRunOf(id)))
  }
  return withWarnings(req, view)
}

/** What the caller should know about a definition just saved (create and update answers only). */
function withWarnings(req: FastifyRequest, view: ReportView): ReportView {
  if ((view.recipients?.length ?? 0) > 0 && !req.server.mailer.configured()) {
    return { ...view, warnings: ['E-mail is not configured on this server (PRIME_SMTP_URL): the files are stored, not mailed to the recipients.'] }
  }
  return view
}

type Outcome = Omit<ItemResult, 'id'> & { runId?: string | null }

/**
 * Applies `act` to each distinct id (ids are uuids; case does not matter) in one
 * transaction, and answers per item in the order given: an id given twice gets the
 * answer of its first occurrence.
 */
function perItem(req: FastifyRequest, ids: string[], act: (row: ReportRow | undefined, id: string) => Outcome, record: (results: (ItemResult & { runId?: string | null })[]) => void) {
  return req.server.db.transaction(() => {
    const outcomes = new Map<string, Outcome>()
    const results = ids.map((given) => {
      const id = given.toLowerCase()
      let o = outcomes.get(id)
      if (!o) outcomes.set(id, (o = act(req.server.repos.reports.byId(id), id)))
      return { id: given, ...o }
    })
    record(results)
    return results
  })()
}

const notFound: Outcome = { status: 'failed', reason: 'No report with this id.', code: 'not-found' }
const done: Outcome = { status: 'done', reason: null, code: null }
const counts = (results: ItemResult[]) => ({ succeeded: results.filter((r) => r.status === 'done').length, failed: results.filter((r) => r.status === 'failed').length })
const names = (rows: ReportRow[]) => rows.map((r) => `"${r.name}"`).join(', ')

function auditItems(req: FastifyRequest, verb: string, rows: ReportRow[], results: ItemResult[]) {
  const failed = results.filter((r) => r.status === 'failed')
  audit(req, {
    description: rows.length ? `${verb} report(s) ${names(rows)}`.slice(0, 1000) : `${verb} no report`,
    details: { reports: rows.map((r) => ({ id: r.id, name: r.name })), failed: failed.map((f) => ({ id: f.id, reason: f.reason })) },
    outcome: rows.length || !failed.length ? 'Succeeded' : 'Failed',
    asset: rows.length === 1 ? reportAsset(rows[0]) : { type: 'Report', detail: 'ReportDefinition' },
  })
}

export function setActive(req: FastifyRequest, ids: string[], active: boolean) {
  const now = Date.now()
  const { reports } = req.server.repos
  const changed: ReportRow[] = []
  const results = perItem(
    req,
    ids,
    (row) => {
      if (!row) return notFound
      if ((row.is_active === 1) === active) return done
      const schedule = row.schedule === null ? null : (JSON.parse(row.schedule) as Schedule)
      const next = active && schedule ? nextDue(schedule, now) : null
      if (active && schedule?.frequency === 'once' && next === null) {
        return { status: 'failed', reason: `Its once schedule (${schedule.date} ${schedule.timeOfDay} ${schedule.timeZone}) has passed; give it a new date with reports/update.`, code: 'invalid' }
      }
      reports.update(row.id, { is_active: active ? 1 : 0, next_run_ms: next, updated_ms: now })
      changed.push(row)
      return done
    },
    (results) => auditItems(req, active ? 'Activated' : 'Deactivated', changed, results),
  )
  return { ...counts(results), results }
}

export async function deleteReports(req: FastifyRequest, ids: string[]) {
  const { reports } = req.server.repos
  const deleted: ReportRow[] = []
  const results = perItem(
    req,
    ids,
    (row) => {
      if (!row) return notFound
      reports.remove(row.id)
      deleted.push(row)
      return done
    },
    (results) => auditItems(req, 'Deleted', deleted, results),
  )
  const scheduler = reportScheduler(req.server)
  for (const r of deleted) {
    scheduler.abortRunsOf(r.id)
    await removeReportFiles(req.server, r.id)
  }
  return { ...counts(results), results }
}

export function requestRuns(req: FastifyRequest, ids: string[]) {
  const now = Date.now()
  const { reports } = req.server.repos
  const queued: ReportRow[] = []
  const runIds: string[] = []
  const results = perItem(
    req,
    ids,
    (row) => {
      if (!row) return { ...notFound, runId: null }
      const open = reports.openRunOf(row.id)
      if (open) return { status: 'failed', reason: `Run ${open.id} is already ${open.status}.`, code: 'conflict', runId: null }
      const runId = crypto.randomUUID()
      reports.insertRun({
        id: runId,
        report_id: row.id,
        trigger: 'request',
        requested_by: req.principal!.name,
        due_ms: now,
        queued_ms: now,
        definition: JSON.stringify(snapshot(row)),
        format: row.format,
      })
      queued.push(row)
      runIds.push(runId)
      return { ...done, runId }
    },
    (results) => {
      const failed = results.filter((r) => r.status === 'failed')
      audit(req, {
        description: queued.length ? `Requested a run of report(s) ${names(queued)}`.slice(0, 1000) : 'Requested no report run',
        details: { runs: queued.map((r, i) => ({ reportId: r.id, name: r.name, runId: runIds[i] })), failed: failed.map((f) => ({ id: f.id, reason: f.reason })) },
        outcome: queued.length || !failed.length ? 'Succeeded' : 'Failed',
        asset: queued.length === 1 ? reportAsset(queued[0]) : { type: 'Report', detail: 'ReportDefinition' },
      })
    },
  )
  reportScheduler(req.server).kick()
  return { ...counts(results), runIds, results: results.map((r) => ({ ...r, runId: r.runId ?? null })) }
}
