// The storage the report services need; db/reports.ts implements it on SQLite.
import type { ExportStore } from '../agents/ports.js'
import type { InsightStore } from '../insights/ports.js'
import type { Maybe } from '../platform/maybe.js'
import type { AuditDigestRow, DigestTotals, EmailStatus, EventRow, ReportChanges, ReportInsert, ReportRow, ReportsRepo, RunRow } from '../../db/reports.js'

export type { AuditDigestRow, DigestTotals, EmailStatus, EventRow, ReportChanges, ReportInsert, ReportRow, RunRow }

type RunInsert = Pick<RunRow, 'id' | 'report_id' | 'trigger' | 'requested_by' | 'due_ms' | 'queued_ms' | 'definition' | 'format'>
type RunSuccess = Pick<RunRow, 'id' | 'finished_ms' | 'file_name' | 'file_path' | 'size_bytes' | 'row_count' | 'truncated' | 'email_status' | 'email_next_ms' | 'email_detail'>
type RunMail = Pick<RunRow, 'id' | 'email_status' | 'email_detail' | 'email_attempts' | 'email_next_ms'>

/** Report definitions and their runs. */
export interface ReportStore {
  // ---- definitions ----
  insert(r: ReportInsert): Promise<unknown>
  byId(id: string): Promise<ReportRow | undefined>
  /** By name, case-insensitively. */
  byName(name: string): Promise<ReportRow | undefined>
  /** Every definition, by name. */
  all(): Promise<ReportRow[]>
  count(): Promise<number>
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
  health(): Promise<ReturnType<ReportsRepo['health']>>
  /** The latest failures (run or e-mail) of at most three reports, with the report's name. */
  failures(): Promise<ReturnType<ReportsRepo['failures']>>
}

/**
 * What a run reads its content from. The long reads stream: a run reads up to a million
 * rows, a page at a time inside the implementation (async iterators that pause between
 * pages), not a Promise per row.
 */
export interface ReportSources {
  reports: Pick<ReportsRepo, 'agents' | 'agentTotals' | 'peripherals' | 'peripheralTotals' | 'events' | 'eventTotals' | 'auditRecords' | 'auditTotals'>
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
  health(): Maybe<ReturnType<ReportsRepo['health']>>
  failures(): Maybe<ReturnType<ReportsRepo['failures']>>
  all(): Maybe<ReportRow[]>
}
