// Report definitions: the rules of what a definition may hold, read from a create or update
// body. Everything is checked before anything is written (lib/reports/service.ts writes).
import type { AuditAsset } from '../platform/ports.js'
import type { components } from '../../generated/openapi.js'
import { problem, type FieldError } from '../errors.js'
import type { Definition } from './content.js'
import type { ReportChanges, ReportInsert, ReportRow } from './ports.js'
import { nextDue, readSchedule, type Schedule } from './schedule.js'
import { readFilters, type Filters, type ReportType } from './types.js'

type ReportView = components['schemas']['ReportViewResource']

export const MAX_REPORTS = 1000
export const MAX_RECIPIENTS = 50
export const DEFAULT_RETENTION = { maxFiles: 30, maxTotalBytes: 512 * 1024 * 1024 }

export const reportAsset = (r: Pick<ReportRow, 'id' | 'name'>): AuditAsset => ({ key: r.id, name: r.name, type: 'Report', subType: 'None', detail: 'ReportDefinition' })

/** The problem document names at most this many fields (as for schema errors). */
export const MAX_FIELD_ERRORS = 20

export function fail(errors: FieldError[]): never {
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

export type NewReport = ReportView & { name: string; type: ReportType; format: 'PDF' | 'CSV' }
export type ReportUpdate = ReportView & { id: string }

/** The row of a new definition (without its id) as `owner` creates it at `now`; a problem naming every field that is wrong. */
export function readNewReport(body: NewReport, owner: string, now: number): Omit<ReportInsert, 'id'> {
  const errors: FieldError[] = []
  const name = readName(body.name, errors)
  const filters = readFilters(body.type, body.filters as Filters | null, errors)
  const schedule = readSchedule(body.schedule as Record<string, unknown> | null | undefined, now, errors)
  const recipients = readRecipients(body.recipients, errors)
  if (errors.length) fail(errors)
  const retention = retentionOf(body.retention)
  const active = body.isActive !== false
  return {
    name,
    description: body.description ?? null,
    type: body.type,
    format: body.format,
    filters: JSON.stringify(filters),
    schedule: schedule === null ? null : JSON.stringify(schedule),
    recipients: JSON.stringify(recipients),
    sender: body.sender ?? null,
    is_active: active ? 1 : 0,
    owner,
    created_ms: now,
    updated_ms: now,
    next_run_ms: active && schedule ? nextDue(schedule, now) : null,
    retention_files: retention.maxFiles,
    retention_bytes: retention.maxTotalBytes,
  }
}

const editable = ['name', 'description', 'type', 'format', 'filters', 'schedule', 'recipients', 'sender', 'isActive', 'retention'] as const

/** An update as the columns it changes, checked against the definition as it is. */
export interface ReportEdit {
  changes: ReportChanges
  /** The schedule after the update. */
  schedule: Schedule | null
  /** Whether the schedule or the active flag was sent (the next due time is then computed again). */
  rescheduled: boolean
}

/** What an update changes (only the properties sent); a problem naming every field that is wrong. */
export function readReportEdit(body: ReportUpdate, current: ReportRow, now: number): ReportEdit {
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
  return { changes, schedule, rescheduled: sent('schedule') || sent('isActive') }
}

/**
 * The columns that activate or deactivate a definition at `now`, or why it cannot be
 * activated (its once schedule has passed).
 */
export function activation(row: ReportRow, active: boolean, now: number): { changes: ReportChanges } | { refused: string } {
  const schedule = row.schedule === null ? null : (JSON.parse(row.schedule) as Schedule)
  const next = active && schedule ? nextDue(schedule, now) : null
  if (active && schedule?.frequency === 'once' && next === null) {
    return { refused: `Its once schedule (${schedule.date} ${schedule.timeOfDay} ${schedule.timeZone}) has passed; give it a new date with reports/update.` }
  }
  return { changes: { is_active: active ? 1 : 0, next_run_ms: next, updated_ms: now } }
}

/** The definition a run keeps: later changes to the report do not alter a queued run. */
export function snapshot(r: ReportRow): Definition {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    type: r.type as Definition['type'],
    format: r.format,
    filters: JSON.parse(r.filters),
    schedule: r.schedule === null ? null : (JSON.parse(r.schedule) as Schedule),
    recipients: JSON.parse(r.recipients),
    sender: r.sender,
  }
}
