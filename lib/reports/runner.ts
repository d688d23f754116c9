// One run of a report: its data read in steps, written to a file (kept in the data
// directory or the database: files.ts) and recorded, retention applied.
import fs from 'node:fs'
import { pipeline } from 'node:stream/promises'
import { csvStream } from '../csv.js'
import type { Log } from '../platform/ports.js'
import { buildCsv, buildPdf, CSV_MAX_ROWS, type Definition, type RunContext } from './content.js'
import { applyRetention, type FileDraft, type FileStore, filesOf, fileNameFor } from './files.js'
import { NOT_MAILED } from './mail.js'
import { writePdf } from './pdf.js'
import type { ReportSources, RunRow } from './ports.js'
import { formats } from './types.js'

/** Why a run was stopped before it finished. */
export class RunStopped extends Error {
  constructor(readonly why: 'timeout' | 'shutdown' | 'deleted') {
    super(why === 'timeout' ? 'The run took longer than 10 minutes.' : why === 'shutdown' ? 'The server stopped.' : 'The report was deleted.')
  }
}

export const RUN_TIMEOUT_MS = 10 * 60_000
/** Run records kept per report (older ones go, unless they still hold a file). */
export const MAX_RUNS_LISTED = 100

async function* counted<T>(rows: AsyncIterable<T>, max: number, state: { rows: number; truncated: boolean }): AsyncGenerator<T> {
  for await (const row of rows) {
    if (state.rows === max) {
      state.truncated = true
      return
    }
    state.rows++
    yield row
  }
}

/** Where the server log is told what an operator should know (a run that failed, a scheduler fault). */
export interface ReportLog extends Log {
  error(details: object, message: string): void
}

/** What a run needs: the runs' records and files, where it reads its content, whether mail goes out, the log. */
export interface RunnerDeps extends FileStore {
  sources: ReportSources
  mailConfigured(): boolean
  log: ReportLog
}

/** Produces the run's file and records the outcome. Runs queued for a deleted report end quietly. */
export async function executeRun(deps: RunnerDeps, run: RunRow, signal: AbortSignal, onStored: (run: RunRow) => void): Promise<void> {
  const { reports } = deps
  const startedMs = Date.now()
  if (!(await reports.start(run.id, startedMs))) return
  const definition = JSON.parse(run.definition) as Definition
  const ext = formats[run.format].fileExtension
  const ctx: RunContext = { sources: deps.sources, definition, runId: run.id, trigger: run.trigger, requestedBy: run.requested_by, dueMs: run.due_ms, startedMs, signal }
  let draft: FileDraft | undefined
  let kept = false
  try {
    draft = await filesOf(deps).draft(run)
    const result = { rows: 0, truncated: false }
    if (run.format === 'PDF') {
      const report = await buildPdf(ctx)
      const r = await writePdf(report, fs.createWriteStream(draft.path, { mode: 0o600 }), startedMs, signal)
      result.rows = r.rows
      result.truncated = r.truncated
    } else {
      const content = await buildCsv(ctx)
      await pipeline(csvStream(content.columns, counted(content.rows, CSV_MAX_ROWS, result)), fs.createWriteStream(draft.path, { mode: 0o600 }), { signal })
    }
    signal.throwIfAborted()
    const size = (await fs.promises.stat(draft.path)).size
    await draft.complete()
    const now = Date.now()
    // Without outgoing mail the file is only stored, and the run says so (not a mail failure).
    const unmailed = definition.recipients.length > 0 && !deps.mailConfigured()
    const mail = definition.recipients.length > 0 && !unmailed
    const file = draft
    const stored = await deps.uow.run(async () => {
      const ok = await reports.succeed({
        id: run.id,
        finished_ms: now,
        file_name: fileNameFor(definition.name, run.due_ms, ext),
        file_path: file.recorded,
        size_bytes: size,
        row_count: result.rows,
        truncated: result.truncated ? 1 : 0,
        email_status: mail ? 'pending' : 'none',
        email_next_ms: mail ? now : null,
        email_detail: unmailed ? NOT_MAILED : null,
      })
      if (ok) {
        await file.keep()
        await reports.pruneRuns(run.report_id, MAX_RUNS_LISTED)
      }
      return ok
    })
    // Not stored: the report was deleted meanwhile, and nothing may stay behind.
    kept = stored
    if (!stored) return
    const report = await reports.byId(run.report_id)
    if (report) await applyRetention(deps, report.id, report.retention_files, report.retention_bytes, now)
    onStored((await reports.runById(run.id))!)
  } catch (err) {
    const stopped = signal.aborted && signal.reason instanceof RunStopped ? signal.reason : undefined
    if (stopped?.why === 'shutdown') {
      // Queued again: the next start runs it, for the same due time.
      await reports.requeue(run.id)
      return
    }
    if (stopped?.why === 'deleted') return
    const reason = stopped ? stopped.message : `The report could not be produced: ${(err as Error).message}`
    if (!stopped) deps.log.error({ err, reportId: run.report_id, runId: run.id }, 'report run failed')
    await reports.fail(run.id, Date.now(), reason)
    await reports.pruneRuns(run.report_id, MAX_RUNS_LISTED)
  } finally {
    await draft?.close(kept)
  }
}
