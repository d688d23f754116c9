// Reports: definitions (create, update, delete, activate, deactivate, run now), their runs,
// the downloads of their files and the test message. Takes plain inputs (the caller's
// context and the parsed body), so it runs without Fastify.
import crypto from 'node:crypto'
import type { Readable } from 'node:stream'
import type { components } from '../../generated/openapi.js'
import { problem } from '../errors.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail, UnitOfWork } from '../platform/ports.js'
import { activation, MAX_REPORTS, type NewReport, readNewReport, readReportEdit, reportAsset, type ReportUpdate, snapshot } from './definitions.js'
import { type DownloadState, downloadArchive, downloadFile, type FileDownload, type FileItem, NOT_FOUND } from './downloads.js'
import { applyRetention, filesOf, type RunFiles } from './files.js'
import { type ReportMailDeps, sendTestMessage, type TestMailResult } from './mail.js'
import type { ReportRow, ReportStore, RunRow } from './ports.js'
import { MAX_RUNS_LISTED } from './runner.js'
import { nextDue } from './schedule.js'
import { type ReportView, reportView, withWarnings } from './views.js'

type ItemResult = components['schemas']['ItemResult']

export type { FileDownload, FileItem, OpenedFile } from './downloads.js'

/** sendtestreport sends real mail: at most this many a minute per caller. */
export const TEST_MAILS_PER_MINUTE = 10

export interface ReportServiceDeps {
  reports: ReportStore
  uow: UnitOfWork
  audit: AuditTrail
  /** Where the report files are. */
  dataDir: string
  /** Where the files are kept: the data directory's when not given. */
  files?: RunFiles
  /** The mailer and the settings report e-mail names. */
  mail: ReportMailDeps
  /** The scheduler's runs: started when queued, stopped when their report is deleted. */
  runs: { kick(): unknown; abortRunsOf(reportId: string): void }
}

type Outcome = Omit<ItemResult, 'id'> & { runId?: string | null }

const notFound: Outcome = { status: 'failed', reason: 'No report with this id.', code: 'not-found' }
const done: Outcome = { status: 'done', reason: null, code: null }
const counts = (results: ItemResult[]) => ({ succeeded: results.filter((r) => r.status === 'done').length, failed: results.filter((r) => r.status === 'failed').length })
const names = (rows: ReportRow[]) => rows.map((r) => `"${r.name}"`).join(', ')
const nameClash = (other: Pick<ReportRow, 'name'>) =>
  problem('conflict', `A report named "${other.name}" already exists (names are compared ignoring case).`, { errors: [{ location: 'body', name: 'name', reason: 'is already used' }] })

/** Taken by another request between the look-up and the write (PostgreSQL's unique index refused this one): the conflict the look-up would have found. */
const takenMeanwhile = (name: string | undefined) => (err: unknown) => {
  throw (err as { code?: string }).code === 'duplicate-key' && name !== undefined ? nameClash({ name }) : err
}

export function reportService(deps: ReportServiceDeps) {
  const { reports, uow, audit } = deps
  const files = filesOf(deps)
  const mailConfigured = () => deps.mail.mailer.configured()
  // Test messages sent per caller in the last minute (this server's).
  const testMails = new Map<string, number[]>()

  /**
   * Applies `act` to each distinct id (ids are uuids; case does not matter) in one unit of
   * work, and answers per item in the order given: an id given twice gets the answer of its
   * first occurrence. `record` writes the audit record in the same unit. With `hold`, each
   * definition is held before `act` decides on it.
   */
  function perItem(ids: string[], act: (row: ReportRow | undefined) => Promise<Outcome>, record: (results: (ItemResult & { runId?: string | null })[]) => Promise<void>, hold = false) {
    return uow.run(async () => {
      const outcomes = new Map<string, Outcome>()
      const results: (ItemResult & { runId?: string | null })[] = []
      for (const given of ids) {
        const id = given.toLowerCase()
        let o = outcomes.get(id)
        if (!o) outcomes.set(id, (o = await act(await reports.byId(id, hold))))
        results.push({ id: given, ...o })
      }
      await record(results)
      return results
    })
  }

  function auditItems(ctx: Context, verb: string, rows: ReportRow[], results: ItemResult[]) {
    const failed = results.filter((r) => r.status === 'failed')
    return audit.record(ctx, {
      description: rows.length ? `${verb} report(s) ${names(rows)}`.slice(0, 1000) : `${verb} no report`,
      details: { reports: rows.map((r) => ({ id: r.id, name: r.name })), failed: failed.map((f) => ({ id: f.id, reason: f.reason })) },
      outcome: rows.length || !failed.length ? 'Succeeded' : 'Failed',
      asset: rows.length === 1 ? reportAsset(rows[0]) : { type: 'Report', detail: 'ReportDefinition' },
    })
  }

  const downloads: DownloadState = { reports, audit, files }

  return {
    /** Every definition (by name) with its newest run. */
    async list(): Promise<{ report: ReportRow; last: RunRow | undefined }[]> {
      const last = await reports.lastRuns()
      return (await reports.all()).map((report) => ({ report, last: last.get(report.id) }))
    },

    /** A definition with its most recent runs, newest first. */
    async get(id: string): Promise<{ report: ReportRow; runs: RunRow[] }> {
      const report = await reports.byId(id.toLowerCase())
      if (!report) throw problem('not-found', NOT_FOUND(id))
      return { report, runs: await reports.runsOf(report.id, MAX_RUNS_LISTED) }
    },

    /** Whether outgoing mail is configured, and its default sender. */
    mailSettings: () => ({ configured: mailConfigured(), from: deps.mail.mailer.from() }),

    /** Creates a definition owned by `owner` (the caller's user name), with its audit record. */
    async create(ctx: Context, owner: string, body: NewReport): Promise<ReportView> {
      const now = Date.now()
      const fields = readNewReport(body, owner, now)
      return uow
        .run(async () => {
          if ((await reports.count(true)) >= MAX_REPORTS) throw problem('conflict', `There are already ${MAX_REPORTS} report definitions, the most this server keeps; delete one first.`)
          const other = await reports.byName(fields.name)
          if (other) throw nameClash(other)
          const id = crypto.randomUUID()
          await reports.insert({ id, ...fields })
          const view = reportView((await reports.byId(id))!, undefined)
          await audit.record(ctx, { description: `Created report "${fields.name}" (${body.type}, ${body.format})`, details: view, asset: reportAsset({ id, name: fields.name }) })
          return withWarnings(view, mailConfigured())
        })
        .catch(takenMeanwhile(fields.name))
    },

    /** Changes what the body sends, with an audit record of what differed; a lower retention applies at once. */
    async update(ctx: Context, body: ReportUpdate): Promise<ReportView> {
      const now = Date.now()
      const id = body.id.toLowerCase()
      const current = await reports.byId(id)
      if (!current) throw problem('not-found', NOT_FOUND(body.id))
      const { changes, schedule, rescheduled } = readReportEdit(body, current, now)
      const view = await uow
        .run(async () => {
          const row = await reports.byId(id)
          if (!row) throw problem('not-found', NOT_FOUND(body.id))
          if (changes.name !== undefined) {
            const other = await reports.byName(changes.name)
            if (other && other.id !== id) throw nameClash(other)
          }
          const active = (changes.is_active ?? row.is_active) === 1
          if (rescheduled) changes.next_run_ms = active && schedule ? nextDue(schedule, now) : null
          changes.updated_ms = now
          const before = reportView(row, undefined)
          await reports.update(id, changes)
          const after = reportView((await reports.byId(id))!, await reports.lastRunOf(id))
          const changed = Object.fromEntries(
            Object.keys(after)
              .filter((k) => !['updatedTime', 'lastRun'].includes(k) && JSON.stringify((before as any)[k]) !== JSON.stringify((after as any)[k]))
              .map((k) => [k, { from: (before as any)[k], to: (after as any)[k] }]),
          )
          await audit.record(ctx, {
            description: `Changed report "${after.name}"${Object.keys(changed).length ? `: ${Object.keys(changed).join(', ')}` : ' (nothing differed)'}`,
            details: changed,
            asset: reportAsset(row),
          })
          return after
        })
        .catch(takenMeanwhile(changes.name))
      // A lower retention applies at once (the newest file is always kept).
      if (changes.retention_files !== undefined && (changes.retention_files < current.retention_files || changes.retention_bytes! < current.retention_bytes)) {
        await applyRetention(deps, id, changes.retention_files, changes.retention_bytes!, now)
        return withWarnings(reportView((await reports.byId(id))!, await reports.lastRunOf(id)), mailConfigured())
      }
      return withWarnings(view, mailConfigured())
    },

    /** Activates or deactivates definitions; one result per id given. */
    async setActive(ctx: Context, ids: string[], active: boolean) {
      const now = Date.now()
      const changed: ReportRow[] = []
      const results = await perItem(
        ids,
        async (row) => {
          if (!row) return notFound
          if ((row.is_active === 1) === active) return done
          const a = activation(row, active, now)
          if ('refused' in a) return { status: 'failed', reason: a.refused, code: 'invalid' }
          await reports.update(row.id, a.changes)
          changed.push(row)
          return done
        },
        (results) => auditItems(ctx, active ? 'Activated' : 'Deactivated', changed, results),
      )
      return { ...counts(results), results }
    },

    /** Deletes definitions with their runs and files (their running runs are stopped); one result per id given. */
    async remove(ctx: Context, ids: string[]) {
      const deleted: ReportRow[] = []
      const results = await perItem(
        ids,
        async (row) => {
          if (!row) return notFound
          await reports.remove(row.id)
          deleted.push(row)
          return done
        },
        (results) => auditItems(ctx, 'Deleted', deleted, results),
      )
      for (const r of deleted) {
        deps.runs.abortRunsOf(r.id)
        await files.removeReport(r.id)
      }
      return { ...counts(results), results }
    },

    /** Queues a run of each report now, as `requestedBy` asked (one open run per report); one result per id given. */
    async requestRuns(ctx: Context, requestedBy: string, ids: string[]) {
      const now = Date.now()
      const queued: ReportRow[] = []
      const runIds: string[] = []
      const results = await perItem(
        ids,
        async (row) => {
          if (!row) return { ...notFound, runId: null }
          const open = await reports.openRunOf(row.id)
          if (open) return { status: 'failed', reason: `Run ${open.id} is already ${open.status}.`, code: 'conflict', runId: null }
          const runId = crypto.randomUUID()
          await reports.insertRun({
            id: runId,
            report_id: row.id,
            trigger: 'request',
            requested_by: requestedBy,
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
          return audit.record(ctx, {
            description: queued.length ? `Requested a run of report(s) ${names(queued)}`.slice(0, 1000) : 'Requested no report run',
            details: { runs: queued.map((r, i) => ({ reportId: r.id, name: r.name, runId: runIds[i] })), failed: failed.map((f) => ({ id: f.id, reason: f.reason })) },
            outcome: queued.length || !failed.length ? 'Succeeded' : 'Failed',
            asset: queued.length === 1 ? reportAsset(queued[0]) : { type: 'Report', detail: 'ReportDefinition' },
          })
        },
        // Held: of two requests at once, the second reads the first's open run and conflicts.
        true,
      )
      deps.runs.kick()
      return { ...counts(results), runIds, results: results.map((r) => ({ ...r, runId: r.runId ?? null })) }
    },

    /**
     * One stored file, opened, and its download recorded. `accepts` says whether the caller
     * takes the file's media type (asked before anything is recorded).
     */
    file: (ctx: Context, item: FileItem, accepts: (mediaType: string) => boolean): Promise<FileDownload> => downloadFile(downloads, ctx, item, accepts),

    /**
     * Several files as one ZIP archive, each once, names made unique. Every item is resolved
     * and its file opened before the archive starts: it is complete, or a problem names
     * every item that cannot be archived.
     */
    archive: (ctx: Context, items: FileItem[]): Promise<{ fileName: string; stream: Readable }> => downloadArchive(downloads, ctx, items),

    /**
     * Sends the test message from `sender` (else the configured one) to `recipient` as
     * `caller` asked, at most TEST_MAILS_PER_MINUTE a minute per caller, with its audit
     * record. A message the SMTP server did not take is a problem saying what it answered.
     */
    async testMail(ctx: Context, caller: string, recipient: string, sender: string | undefined, now = Date.now()): Promise<TestMailResult> {
      // Not configured is a setting, not an SMTP answer: said before anything is attempted.
      if (!mailConfigured()) throw problem('mail-not-configured', 'Outgoing mail is not configured on this server (set PRIME_SMTP_URL): no test message was sent.')
      limitTestMail(caller, now)
      const result = await sendTestMessage(deps.mail, sender, recipient, caller)
      await audit.record(ctx, {
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

  function limitTestMail(caller: string, now: number) {
    const recent = (testMails.get(caller) ?? []).filter((t) => t > now - 60_000)
    if (recent.length >= TEST_MAILS_PER_MINUTE) {
      const retry = Math.max(1, Math.ceil((recent[0] + 60_000 - now) / 1000))
      throw problem('rate-limited', `At most ${TEST_MAILS_PER_MINUTE} test messages a minute per user; retry in ${retry} seconds.`, { headers: { 'retry-after': String(retry) } })
    }
    recent.push(now)
    testMails.set(caller, recent)
  }
}

export type ReportService = ReturnType<typeof reportService>
