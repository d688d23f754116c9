// Report runs: the queue, the files they stored, their e-mail, and the reports' health.
import type { DB } from './index.js'
import type { RunRow } from '../lib/reports/ports.js'

export function runStore(db: DB) {
  // ---- runs ----
  const insertRun = db.prepare(
    `INSERT INTO report_runs (id, report_id, trigger, requested_by, due_ms, queued_ms, status, definition, format)
     VALUES (@id, @report_id, @trigger, @requested_by, @due_ms, @queued_ms, 'queued', @definition, @format)`,
  )
  const runById = db.prepare<[string], RunRow>('SELECT * FROM report_runs WHERE id = ?')
  const runsOf = db.prepare<[string, number], RunRow>('SELECT * FROM report_runs WHERE report_id = ? ORDER BY seq DESC LIMIT ?')
  const lastRuns = db.prepare<[], RunRow>('SELECT * FROM report_runs WHERE seq IN (SELECT max(seq) FROM report_runs GROUP BY report_id)')
  const lastRunOf = db.prepare<[string], RunRow>('SELECT * FROM report_runs WHERE report_id = ? ORDER BY seq DESC LIMIT 1')
  const openRunOf = db.prepare<[string], RunRow>("SELECT * FROM report_runs WHERE report_id = ? AND status IN ('queued', 'running') ORDER BY seq LIMIT 1")
  const queued = db.prepare<[number], RunRow>("SELECT * FROM report_runs WHERE status = 'queued' ORDER BY seq LIMIT ?")
  const start = db.prepare<[number, string]>("UPDATE report_runs SET status = 'running', started_ms = ? WHERE id = ? AND status = 'queued'")
  const requeue = db.prepare<[string]>("UPDATE report_runs SET status = 'queued', started_ms = NULL WHERE id = ? AND status = 'running'")
  const interrupted = db.prepare<[number, string]>("UPDATE report_runs SET status = 'failed', finished_ms = ?, reason = ? WHERE status = 'running'")
  const fail = db.prepare<[number, string, string]>("UPDATE report_runs SET status = 'failed', finished_ms = ?, reason = ? WHERE id = ? AND status = 'running'")
  const succeed = db.prepare(
    `UPDATE report_runs SET status = 'succeeded', finished_ms = @finished_ms, file_name = @file_name, file_path = @file_path,
       size_bytes = @size_bytes, row_count = @row_count, truncated = @truncated, email_status = @email_status,
       email_next_ms = @email_next_ms, email_detail = @email_detail
     WHERE id = @id AND status = 'running'`,
  )
  const storedFiles = db.prepare<[string], RunRow>('SELECT * FROM report_runs WHERE report_id = ? AND file_path IS NOT NULL AND file_deleted_ms IS NULL ORDER BY seq DESC')
  const fileDeleted = db.prepare<[number, string]>('UPDATE report_runs SET file_deleted_ms = ? WHERE id = ? AND file_deleted_ms IS NULL')
  const newestFile = db.prepare<[string], RunRow>(
    "SELECT * FROM report_runs WHERE report_id = ? AND status = 'succeeded' AND file_path IS NOT NULL AND file_deleted_ms IS NULL ORDER BY seq DESC LIMIT 1",
  )
  // Older records go, except those that still hold a file (it stays downloadable by its id).
  const pruneRuns = db.prepare<[string, string, number]>(
    `DELETE FROM report_runs WHERE report_id = ? AND status IN ('succeeded', 'failed') AND (file_path IS NULL OR file_deleted_ms IS NOT NULL)
       AND seq < (SELECT min(seq) FROM (SELECT seq FROM report_runs WHERE report_id = ? ORDER BY seq DESC LIMIT ?))`,
  )
  const pendingMail = db.prepare<[number, number], RunRow>("SELECT * FROM report_runs WHERE email_status = 'pending' AND email_next_ms <= ? ORDER BY email_next_ms LIMIT ?")
  const setMail = db.prepare(
    `UPDATE report_runs SET email_status = @email_status, email_detail = @email_detail, email_attempts = @email_attempts, email_next_ms = @email_next_ms
     WHERE id = @id`,
  )
  const health = db.prepare<[], { reports: number; active: number; runs_failed: number; mail_failed: number; mail_partial: number; mail_retrying: number; overdue_before: number | null }>(
    `WITH last AS (SELECT * FROM report_runs WHERE seq IN (SELECT max(seq) FROM report_runs WHERE status IN ('succeeded', 'failed') GROUP BY report_id)),
          mailed AS (SELECT * FROM report_runs WHERE seq IN (SELECT max(seq) FROM report_runs WHERE email_status IN ('sent', 'partial', 'failed') GROUP BY report_id))
     SELECT (SELECT count(*) FROM reports) AS reports,
            (SELECT count(*) FROM reports WHERE is_active = 1) AS active,
            (SELECT count(*) FROM last WHERE status = 'failed') AS runs_failed,
            (SELECT count(*) FROM mailed WHERE email_status = 'failed') AS mail_failed,
            (SELECT count(*) FROM mailed WHERE email_status = 'partial') AS mail_partial,
            (SELECT count(*) FROM report_runs WHERE email_status = 'pending' AND email_attempts > 0) AS mail_retrying,
            (SELECT min(next_run_ms) FROM reports WHERE is_active = 1) AS overdue_before`,
  )
  const failedNames = db.prepare<[], { name: string; reason: string | null; email_detail: string | null; email_status: string; status: string }>(
    `SELECT r.name, x.reason, x.email_detail, x.email_status, x.status FROM report_runs x JOIN reports r ON r.id = x.report_id
     WHERE x.seq IN (SELECT max(seq) FROM report_runs WHERE status IN ('succeeded', 'failed') GROUP BY report_id)
       AND (x.status = 'failed' OR x.email_status IN ('failed', 'partial'))
     ORDER BY x.seq DESC LIMIT 3`,
  )

  return {
    // ---- runs ----
    insertRun: (r: Pick<RunRow, 'id' | 'report_id' | 'trigger' | 'requested_by' | 'due_ms' | 'queued_ms' | 'definition' | 'format'>) => insertRun.run(r),
    runById: (id: string) => runById.get(id),
    runsOf: (reportId: string, limit: number) => runsOf.all(reportId, limit),
    lastRuns: () => new Map(lastRuns.all().map((r) => [r.report_id, r])),
    lastRunOf: (reportId: string) => lastRunOf.get(reportId),
    openRunOf: (reportId: string) => openRunOf.get(reportId),
    queued: (limit: number) => queued.all(limit),
    start: (id: string, now: number) => start.run(now, id).changes === 1,
    requeue: (id: string) => requeue.run(id).changes === 1,
    /** Runs left `running` by a server that stopped without finishing them. */
    failInterrupted: (now: number, reason: string) => interrupted.run(now, reason).changes,
    fail: (id: string, now: number, reason: string) => fail.run(now, reason.slice(0, 1000), id).changes === 1,
    succeed: (r: Pick<RunRow, 'id' | 'finished_ms' | 'file_name' | 'file_path' | 'size_bytes' | 'row_count' | 'truncated' | 'email_status' | 'email_next_ms' | 'email_detail'>) =>
      succeed.run(r).changes === 1,
    storedFiles: (reportId: string) => storedFiles.all(reportId),
    fileDeleted: (id: string, now: number) => fileDeleted.run(now, id).changes === 1,
    newestFile: (reportId: string) => newestFile.get(reportId),
    pruneRuns: (reportId: string, keep: number) => pruneRuns.run(reportId, reportId, keep).changes,
    pendingMail: (now: number, limit: number) => pendingMail.all(now, limit),
    setMail: (r: Pick<RunRow, 'id' | 'email_status' | 'email_detail' | 'email_attempts' | 'email_next_ms'>) => setMail.run(r),
    health: () => health.get()!,
    failures: () => failedNames.all(),
  }
}
