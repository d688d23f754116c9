// The report scheduler: queues each due time of each active report once (also across
// restarts, and across processes sharing the database: queuing a due time and moving the
// report's next due time past it are one transaction, the move conditional on the due time
// read), runs queued runs (at most two at a time per process, one per report; a run is
// started by one process only), and sends their e-mail, retrying failed deliveries with
// backoff.
import crypto from 'node:crypto'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import type { Loop } from '../platform/loops.js'
import { registerHealthCheck, type HealthVerdict } from '../platform/health.js'
import { then, type Maybe } from '../platform/maybe.js'
import { iso } from '../time.js'
import { snapshot } from './definitions.js'
import { filesOf, runFiles } from './files.js'
import { mailRun, type ReportMailDeps } from './mail.js'
import type { ReportHealthSource, ReportRow, RunLeases, RunRow } from './ports.js'
import { executeRun, RUN_TIMEOUT_MS, RunStopped, type RunnerDeps } from './runner.js'
import { latestDue, nextDue, type Schedule } from './schedule.js'

export const MAX_CONCURRENT_RUNS = 2
const TICK_MS = 10_000
/** A due time queued later than this after it passed (the server was down or stalled) is a catch-up. */
const CATCH_UP_AFTER_MS = 5 * 60_000
const MAIL_BATCH = 20
/** How long a process that took a due e-mail has to record its outcome before another sends it. */
const MAIL_CLAIM_MS = 10 * 60_000
const CLOSE_WAIT_MS = 10_000

interface Active {
  reportId: string
  controller: AbortController
  done: Promise<void>
}

/** What the scheduler needs: what a run needs, and what its e-mail needs. */
export interface SchedulerDeps extends RunnerDeps {
  mail: ReportMailDeps
  /**
   * Given when several processes may share the runs (PostgreSQL): each holds a lease on
   * the runs it runs, and runs whose process is gone are failed by whichever process
   * notices. Without it one process owns the runs, and those left running at its start failed.
   */
  leases?: RunLeases
}

/** How often a process renews its leases on its runs (they last RUN_LEASE_MS: db/postgres/reports.ts). */
const HOLD_EVERY_MS = 10_000
const INTERRUPTED = 'The server stopped while this run was in progress.'

export class ReportScheduler {
  private readonly active = new Map<string, Active>()
  private mailing: Promise<void> | null = null
  private timer: NodeJS.Timeout | undefined
  private holder: NodeJS.Timeout | undefined
  private closed = false
  /** When this scheduler started: due times before it were missed while the server was down. */
  readonly startedMs: number

  constructor(private readonly deps: SchedulerDeps) {
    this.startedMs = Date.now()
  }

  /** Fails what a stopped server left running, then starts the timer; the first tick catches up at once. */
  async start(): Promise<void> {
    // Runs a stopped server left "running" cannot be resumed: they failed. With leases,
    // only those no live process holds (the others run elsewhere), now and at every tick.
    const { leases } = this.deps
    if (leases) await leases.failOrphaned(this.startedMs, INTERRUPTED)
    else await this.deps.reports.failInterrupted(this.startedMs, INTERRUPTED)
    filesOf(this.deps).tidy()
    if (leases) {
      this.holder = setInterval(() => {
        const ids = [...this.active.keys()]
        if (ids.length) leases.hold(ids).catch((err) => this.deps.log.error({ err }, 'report run leases could not be renewed'))
      }, HOLD_EVERY_MS).unref()
    }
    const loop = () => {
      if (this.closed) return
      void this.tick()
        .catch((err) => this.deps.log.error({ err }, 'report scheduler tick failed'))
        .finally(async () => {
          if (this.closed) return
          const earliest = await this.deps.reports.earliestDue().catch(() => null)
          if (this.closed) return
          const wait = earliest === null ? TICK_MS : Math.max(50, Math.min(TICK_MS, earliest - Date.now()))
          this.timer = setTimeout(loop, wait).unref()
        })
    }
    loop()
  }

  /**
   * Queues every due time that has come by `now` (one run per report: the latest due
   * time, a catch-up when the earlier ones were missed), starts queued runs, and sends
   * the e-mail that is due. Answers the runs it queued.
   */
  async tick(now = Date.now()): Promise<string[]> {
    if (this.closed) return []
    const { reports, leases } = this.deps
    const queued: string[] = []
    if (leases) await leases.failOrphaned(Date.now(), INTERRUPTED)
    for (const r of await reports.due(now)) {
      let id: string | null
      try {
        id = await this.queueDue(r, now)
      } catch (err) {
        // A schedule that cannot be computed (a time zone this runtime no longer knows):
        // taken off the schedule rather than retried in a loop; the log says why.
        this.deps.log.error({ err, reportId: r.id }, 'report schedule could not be computed; the report is off its schedule until it is updated')
        await reports.advance(r.id, r.next_run_ms!, null)
        id = null
      }
      if (id) queued.push(id)
    }
    await this.kick()
    this.sendMail(now)
    return queued
  }

  /** Queues the latest due time of a due report and moves its next due time on, in one transaction. */
  private queueDue(r: ReportRow, now: number): Promise<string | null> {
    const { reports } = this.deps
    const schedule = r.schedule === null ? null : (JSON.parse(r.schedule) as Schedule)
    return this.deps.uow.run(async () => {
      if (!schedule) {
        await reports.advance(r.id, r.next_run_ms!, null)
        return null
      }
      const { due, missed } = latestDue(schedule, r.next_run_ms!, now)
      // Only the scheduler moves next_run_ms forward: if it changed meanwhile, someone else did the work.
      if (!(await reports.advance(r.id, r.next_run_ms!, nextDue(schedule, now)))) return null
      const late = missed > 0 || due < this.startedMs || now - due > CATCH_UP_AFTER_MS
      const runId = crypto.randomUUID()
      await reports.insertRun({
        id: runId,
        report_id: r.id,
        trigger: late ? 'catchUp' : 'schedule',
        requested_by: null,
        due_ms: due,
        queued_ms: now,
        definition: JSON.stringify(snapshot(r)),
        format: r.format,
      })
      if (missed > 0) this.deps.log.warn({ reportId: r.id, missed, due: iso(due) }, 'report due times missed while the server was down: one catch-up run')
      return runId
    })
  }

  /** Starts queued runs while fewer than two run (never two of one report). */
  async kick(): Promise<void> {
    if (this.closed || this.active.size >= MAX_CONCURRENT_RUNS) return
    const queued = await this.deps.reports.queued(MAX_CONCURRENT_RUNS * 10)
    // Read again after the wait: another kick may have started runs meanwhile.
    if (this.closed) return
    const busy = new Set([...this.active.values()].map((a) => a.reportId))
    for (const run of queued) {
      if (this.active.size >= MAX_CONCURRENT_RUNS) break
      if (busy.has(run.report_id) || this.active.has(run.id)) continue
      busy.add(run.report_id)
      this.launch(run)
    }
  }

  private launch(run: RunRow) {
    const controller = new AbortController()
    const timeout = setTimeout(() => controller.abort(new RunStopped('timeout')), RUN_TIMEOUT_MS).unref()
    const done = executeRun(this.deps, run, controller.signal, () => this.sendMail(Date.now()))
      .catch((err) => this.deps.log.error({ err, runId: run.id }, 'report run failed unexpectedly'))
      .finally(() => {
        clearTimeout(timeout)
        this.active.delete(run.id)
        // The next queued run starts after the current turn, not inside this one.
        setImmediate(() => void this.kick().catch((err) => this.deps.log.error({ err }, 'report runs could not be started')))
      })
    this.active.set(run.id, { reportId: run.report_id, controller, done })
  }

  /** Stops the runs of a report that is being deleted. */
  abortRunsOf(reportId: string): void {
    for (const a of this.active.values()) if (a.reportId === reportId) a.controller.abort(new RunStopped('deleted'))
  }

  /** Sends the e-mail that is due, one message at a time, in the background. */
  sendMail(now: number): void {
    if (this.closed || this.mailing) return
    this.mailing = (async () => {
      const { reports, leases } = this.deps
      for (;;) {
        const due = await reports.pendingMail(now, MAIL_BATCH)
        if (!due.length) break
        for (const run of due) {
          if (this.closed) return
          // Another process may be sending it: one of them takes it.
          if (leases && !(await leases.claimMail(run.id, run.email_next_ms!, Date.now() + MAIL_CLAIM_MS))) continue
          const outcome = await mailRun(this.deps.mail, run, now)
          await reports.setMail({ id: run.id, email_status: outcome.status, email_detail: outcome.detail, email_attempts: outcome.attempts, email_next_ms: outcome.nextMs })
          if (outcome.status !== 'sent') this.deps.log.warn({ runId: run.id, reportId: run.report_id, status: outcome.status, detail: outcome.detail }, 'report e-mail not delivered')
        }
      }
    })()
      .catch((err) => this.deps.log.error({ err }, 'report e-mail failed unexpectedly'))
      .finally(() => {
        this.mailing = null
      })
  }

  /** Resolves when no run is queued or running and no e-mail is being sent (tests, benchmarks). */
  async idle(): Promise<void> {
    for (;;) {
      await this.kick()
      const pending = [...[...this.active.values()].map((a) => a.done), ...(this.mailing ? [this.mailing] : [])]
      if (!pending.length) {
        if (!(await this.deps.reports.queued(1)).length || this.closed) return
        await nextTurn()
        continue
      }
      await Promise.all(pending)
    }
  }

  /** Stops: running runs are queued again (the next start runs them); e-mail in flight may finish. */
  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    clearInterval(this.holder)
    for (const a of this.active.values()) a.controller.abort(new RunStopped('shutdown'))
    const waiting = [...[...this.active.values()].map((a) => a.done), ...(this.mailing ? [this.mailing] : [])]
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.all(waiting), new Promise((resolve) => (timer = setTimeout(resolve, CLOSE_WAIT_MS)))])
    clearTimeout(timer)
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Runs due and requested reports (see lib/reports/index.ts). */
    reportScheduler: ReportScheduler
  }
}

/** The app's scheduler (to queue runs, and for tests to drive it). */
export function reportScheduler(app: FastifyInstance): ReportScheduler {
  return app.reportScheduler
}

/** What the scheduler is made of in this app: its storage, settings, mailer and log. */
export function schedulerDeps(app: FastifyInstance): SchedulerDeps {
  const { storage, config, mailer } = app
  const ports = storage.ports!
  const dataDir = config.dataDir
  const files = runFiles(storage.reportRuns, dataDir)
  const schemas = app.contract.spec.components.schemas
  return {
    reports: ports.reports,
    uow: storage.uow,
    dataDir,
    files,
    sources: {
      reports: storage.reportRuns.reads,
      exports: ports.exports,
      insights: ports.insights,
      agentColumns: Object.keys(schemas.AgentViewResource.properties),
      peripheralColumns: Object.keys(schemas.PeripheralViewResource.properties),
    },
    mailConfigured: () => mailer.configured(),
    log: app.log,
    leases: storage.reportRuns.leases,
    mail: { mailer, smtpUrl: config.smtp.url, publicUrl: config.publicUrl, dataDir, files },
  }
}

/**
 * The scheduler that runs due reports, as the app's loop (it queues and runs the shared
 * schedule: one process at a time, or several where the storage gives leases on runs),
 * and the reports' health check; stopping queues running runs again.
 */
export function reportSchedulerLoop(app: FastifyInstance): Loop {
  const deps = schedulerDeps(app)
  const scheduler = new ReportScheduler(deps)
  // A decoration of the root instance: handlers see it through their own (child) instance.
  app.decorate('reportScheduler', scheduler)
  const health = { reports: app.storage.reportRuns.health, mailConfigured: () => app.mailer.configured() }
  registerHealthCheck(app, { name: 'Reports', check: () => reportsHealth(health) })
  // With leases any number of processes may run it at once (each due time queued once, each run started once, each e-mail sent once).
  return { name: 'report-scheduler', singleton: !deps.leases, start: () => scheduler.start(), stop: () => scheduler.close() }
}

/**
 * The reports subsystem's health, from each report's latest finished run: Failed when a
 * run failed or its e-mail could not be delivered in the end, Warning while deliveries
 * wait for a retry, some recipients were refused, or due reports are overdue.
 */
export function reportsHealth(deps: { reports: ReportHealthSource; mailConfigured(): boolean }, now = Date.now()): Maybe<HealthVerdict> {
  const { reports } = deps
  const mailConfigured = deps.mailConfigured()
  // Each read at once on SQLite, after the previous answer on PostgreSQL.
  return then(reports.health(), (h) => {
    if (h.reports === 0) return { status: 'Healthy', detail: `No reports${mailConfigured ? '' : '; e-mail not configured (PRIME_SMTP_URL)'}` }
    return then(reports.failures(), (failures) => {
      const verdict = (addressed: number): HealthVerdict => {
        const parts: string[] = []
        const named = failures.length ? `: ${failures.map((f) => `"${f.name}" (${f.status === 'failed' ? f.reason : `e-mail ${f.email_status}: ${f.email_detail}`})`.slice(0, 200)).join('; ')}` : ''
        if (h.runs_failed) parts.push(`the latest run of ${h.runs_failed} report(s) failed`)
        if (h.mail_failed) parts.push(`the latest e-mail of ${h.mail_failed} report(s) could not be delivered`)
        if (h.mail_partial) parts.push(`the latest e-mail of ${h.mail_partial} report(s) was refused for some recipients`)
        if (h.mail_retrying) parts.push(`${h.mail_retrying} e-mail(s) waiting for a retry`)
        const overdue = h.overdue_before !== null && h.overdue_before < now - CATCH_UP_AFTER_MS
        if (overdue) parts.push(`a report due at ${iso(h.overdue_before!)} has not been queued yet`)
        let summary = `${h.reports} report(s), ${h.active} active`
        // A choice, not a fault: said, at Healthy, so nobody is alerted for it.
        if (!mailConfigured) summary += `; e-mail not configured (PRIME_SMTP_URL)${addressed ? `: the files of ${addressed} report(s) with recipients are stored, not mailed` : ''}`
        if (!parts.length) return { status: 'Healthy', detail: `${summary}; latest runs${mailConfigured ? ' and e-mails' : ''} succeeded` }
        const status: HealthVerdict['status'] = h.runs_failed || h.mail_failed ? 'Failed' : 'Warning'
        return { status, detail: `${summary}; ${parts.join('; ')}${named}`.slice(0, 1000) }
      }
      if (mailConfigured) return verdict(0)
      return then(reports.all(), (all) => verdict(all.filter((r) => JSON.parse(r.recipients).length > 0).length))
    })
  })
}
