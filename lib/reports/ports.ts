// The storage the report services need; db/reports.ts implements it on SQLite.
import type { AgentFilter, AgentRow, ExportStore, PeripheralFilter, PeripheralListRow } from '../agents/ports.js'
import type { InsightStore } from '../insights/ports.js'
import type { Maybe } from '../platform/maybe.js'
import type { EventRow } from '../events/ports.js'

export interface ReportRow {
  id: string
  name: string
  name_key: string
  description: string | null
  type: string
  format: 'PDF' | 'CSV'
  filters: string
  schedule: string | null
  recipients: string
  sender: string | null
  is_active: number
  owner: string
  created_ms: number
  updated_ms: number
  next_run_ms: number | null
  retention_files: number
  retention_bytes: number
}

export type ReportInsert = Omit<ReportRow, 'name_key'>

export type ReportChanges = Partial<Omit<ReportRow, 'id' | 'name_key' | 'owner' | 'created_ms'>>

// ---- data of the reports ----

/** Counters of the agents a report covers. */
export interface AgentTotals {
  agents: number
  connected: number
  armed: number
  withUnapproved: number
  withVulnerable: number
  withAttackTools: number
  licenseActivated: number
  unapprovedPeripherals: number
}

/** Counters of the peripherals a report covers. */
export interface PeripheralTotals {
  peripherals: number
  hosts: number
  present: number
  approved: number
  unapproved: number
  vulnerable: number
  attackTools: number
}

/** Extra peripheral conditions of the reports (the lists have no such filters). */
export interface PeripheralExtra {
  approved?: boolean
  icons?: number[]
}

export interface EventFilter {
  from: number
  to: number
  /** Severity number at or below this (Warning: 0-4). */
  maxSeverity?: number
  categories?: string[]
  source?: string
  globalSearch?: string
}

export interface AuditFilter {
  from: number
  to: number
  maxSeverity?: number
  categories?: string[]
  user?: string
  outcomes?: string[]
}

export interface AuditDigestRow {
  id: number
  created_ms: number
  severity: number
  category: string
  user_name: string | null
  source_ip: string | null
  description: string
  details: string
  operation_id: string | null
  outcome: string
  asset_key: string | null
  asset_name: string | null
  asset_type: string
}

/** Counts of a digest: by severity, by a category and by a third key (source, user). */
export interface DigestTotals {
  total: number
  bySeverity: Map<number, number>
  byCategory: Map<string, number>
  byOutcome: Map<string, number>
  byKey: Map<string, number>
}

export type RunStatus = 'queued' | 'running' | 'succeeded' | 'failed'

export type RunTrigger = 'schedule' | 'request' | 'catchUp'

export type EmailStatus = 'none' | 'pending' | 'sent' | 'partial' | 'failed'

export interface RunRow {
  seq: number
  id: string
  report_id: string
  trigger: RunTrigger
  requested_by: string | null
  due_ms: number
  queued_ms: number
  started_ms: number | null
  finished_ms: number | null
  status: RunStatus
  reason: string | null
  definition: string
  format: 'PDF' | 'CSV'
  file_name: string | null
  file_path: string | null
  size_bytes: number | null
  row_count: number | null
  truncated: number
  file_deleted_ms: number | null
  email_status: EmailStatus
  email_detail: string | null
  email_attempts: number
  email_next_ms: number | null
}

export type { EventRow }

type RunInsert = Pick<RunRow, 'id' | 'report_id' | 'trigger' | 'requested_by' | 'due_ms' | 'queued_ms' | 'definition' | 'format'>
type RunSuccess = Pick<RunRow, 'id' | 'finished_ms' | 'file_name' | 'file_path' | 'size_bytes' | 'row_count' | 'truncated' | 'email_status' | 'email_next_ms' | 'email_detail'>
type RunMail = Pick<RunRow, 'id' | 'email_status' | 'email_detail' | 'email_attempts' | 'email_next_ms'>

/** The reports' figures the health check reads. */
export interface ReportHealth {
  reports: number
  active: number
  runs_failed: number
  mail_failed: number
  mail_partial: number
  mail_retrying: number
  overdue_before: number | null
}

/** A latest failure of a report (its run or its e-mail), with the report's name. */
export interface ReportFailure {
  name: string
  reason: string | null
  email_detail: string | null
  email_status: string
  status: string
}

/**
 * The reads of a run's content: the long ones stream (a page at a time inside the
 * implementation, `signal` stopping them), the totals answer at once.
 */
export interface ReportReads {
  /** The agents of `ids` in that order, with the columns the list's view reads, a page at a time (rows deleted meanwhile are left out). */
  agents(ids: readonly number[], signal?: AbortSignal): AsyncGenerator<AgentRow>
  /** Counters of the agents matching the filter. */
  agentTotals(f: AgentFilter, signal?: AbortSignal): Promise<AgentTotals>
  /**
   * The peripherals matching the filter, agent by agent in the order of `agentIds`
   * (each agent's by deviceID), read for a few hundred agents at a time.
   */
  peripherals(agentIds: readonly number[], f: PeripheralFilter, extra: PeripheralExtra, signal?: AbortSignal): AsyncGenerator<PeripheralListRow>
  /** Counters of the peripherals matching the filter. */
  peripheralTotals(f: PeripheralFilter, extra: PeripheralExtra, signal?: AbortSignal): Promise<PeripheralTotals>
  /** The events of the filter, newest first, a page at a time. */
  events(f: EventFilter, signal?: AbortSignal): AsyncGenerator<EventRow>
  /** Counts of the events of the filter: by severity, category and source. */
  eventTotals(f: EventFilter, signal?: AbortSignal): Promise<DigestTotals>
  /** The audit records of the filter, newest first, a page at a time. */
  auditRecords(f: AuditFilter, signal?: AbortSignal): AsyncGenerator<AuditDigestRow>
  /** Counts of the audit records of the filter: by severity, category, outcome and user. */
  auditTotals(f: AuditFilter, signal?: AbortSignal): Promise<DigestTotals>
}

/** Report definitions and their runs. */
export interface ReportStore {
  // ---- definitions ----
  /** Rejects with an error of code `duplicate-key` when another definition took the name meanwhile (another unit of work); `update` too. */
  insert(r: ReportInsert): Promise<unknown>
  /** With `hold`, the definition is held against other changes (and run requests) to the end of the unit of work. */
  byId(id: string, hold?: boolean): Promise<ReportRow | undefined>
  /** By name, case-insensitively. */
  byName(name: string): Promise<ReportRow | undefined>
  /** Every definition, by name. */
  all(): Promise<ReportRow[]>
  /** With `hold`, inside a unit of work: counted to add one, other units counting with `hold` wait for this one to end (PostgreSQL; SQLite's units run one at a time). */
  count(hold?: boolean): Promise<number>
  /** Changes the given columns. */
  update(id: string, changes: ReportChanges): Promise<void>
  /** Deletes the definition with its runs; answers whether it was there. */
  remove(id: string): Promise<boolean>

  // ---- scheduling ----
  /** Active reports whose next due time has come. */
  due(now: number): Promise<ReportRow[]>
  /** Moves the next due time on, if it is still `from` (answers whether it did). */
  advance(id: string, from: number, to: number | null): Promise<boolean>
  earliestDue(): Promise<number | null>

  // ---- runs ----
  insertRun(r: RunInsert): Promise<unknown>
  runById(id: string): Promise<RunRow | undefined>
  /** A report's runs, newest first. */
  runsOf(reportId: string, limit: number): Promise<RunRow[]>
  /** The newest run of each report, by report id. */
  lastRuns(): Promise<Map<string, RunRow>>
  lastRunOf(reportId: string): Promise<RunRow | undefined>
  /** The report's oldest queued or running run. */
  openRunOf(reportId: string): Promise<RunRow | undefined>
  queued(limit: number): Promise<RunRow[]>
  /** Marks a queued run running (answers whether it was still queued). */
  start(id: string, now: number): Promise<boolean>
  requeue(id: string): Promise<boolean>
  /** Fails the runs a stopped server left running; answers how many. */
  failInterrupted(now: number, reason: string): Promise<number>
  fail(id: string, now: number, reason: string): Promise<boolean>
  succeed(r: RunSuccess): Promise<boolean>
  /** The runs whose files are stored, newest first. */
  storedFiles(reportId: string): Promise<RunRow[]>
  fileDeleted(id: string, now: number): Promise<boolean>
  /** The newest run of the report with a stored file. */
  newestFile(reportId: string): Promise<RunRow | undefined>
  /** Keeps the newest `keep` run records of a report (and every one that still holds a file). */
  pruneRuns(reportId: string, keep: number): Promise<number>
  /** Runs whose e-mail is due by `now`. */
  pendingMail(now: number, limit: number): Promise<RunRow[]>
  setMail(r: RunMail): Promise<unknown>
  health(): Promise<ReportHealth>
  /** The latest failures (run or e-mail) of at most three reports, with the report's name. */
  failures(): Promise<ReportFailure[]>
}

/**
 * What a run reads its content from. The long reads stream: a run reads up to a million
 * rows, a page at a time inside the implementation (async iterators that pause between
 * pages), not a Promise per row.
 */
export interface ReportSources {
  reports: ReportReads
  exports: Pick<ExportStore, 'agentIds'>
  insights: Pick<InsightStore, 'classification' | 'vulnerablePeripherals' | 'uncommonPeripherals' | 'whitelistViolations' | 'errorTotals'>
  /** The columns of an agents CSV: the properties of the contract's AgentViewResource. */
  agentColumns: string[]
  /** The contract's PeripheralViewResource properties. */
  peripheralColumns: string[]
}

/**
 * The runs' files kept in the database (PostgreSQL), so that any node serves them and no
 * node keeps them on its disk.
 */
export interface ReportFileStore {
  /** Stores a run's file whole, in the caller's unit of work; false (nothing stored) when the run is gone. */
  storeFile(runId: string, mediaType: string, content: AsyncIterable<Uint8Array> | Iterable<Uint8Array>): Promise<boolean>
  /** The stored file's size; undefined when the run has none (or it was removed). */
  fileOf(runId: string): Promise<{ media_type: string; size_bytes: number } | undefined>
  /** The stored file, a part at a time; a file removed while it is read ends in an error. */
  fileContent(runId: string, signal?: AbortSignal): AsyncIterable<Buffer>
  /** The whole file in memory (a mail attachment); undefined without one. */
  fileBytes(runId: string): Promise<{ media_type: string; content: Buffer } | undefined>
}

/**
 * Runs shared by several processes (PostgreSQL): `start` takes a lease on the run for the
 * process that starts it, which renews it while the run runs.
 */
export interface RunLeases {
  /** Renews this process's leases on its running runs. */
  hold(runIds: string[]): Promise<void>
  /** Fails the running runs whose lease lapsed (their process is gone); answers how many. */
  failOrphaned(now: number, reason: string): Promise<number>
  /**
   * Takes a run's due e-mail for this process until `untilMs`, if its next attempt is
   * still `nextMs` (answers whether it did): one process sends it; if that process stops
   * before it records the outcome, another sends it once the claim lapses.
   */
  claimMail(runId: string, nextMs: number, untilMs: number): Promise<boolean>
}

/** What report runs read besides the services' ports, per backend (lib/platform/storage.ts). */
export interface ReportRunStorage {
  /** The reads of a run's content. */
  reads: ReportSources['reports']
  /** The runs' files, where the database keeps them (PostgreSQL); else they are in the data directory. */
  files?: ReportFileStore
  /** Leases on runs, where several processes may share them (PostgreSQL). */
  leases?: RunLeases
  /** The health check's reads. */
  health: ReportHealthSource
}

/** What the reports' health check reads: at once on SQLite, through Promises on PostgreSQL. */
export interface ReportHealthSource {
  health(): Maybe<ReportHealth>
  failures(): Maybe<ReportFailure[]>
  all(): Maybe<ReportRow[]>
}
