// The retention job: deletes what is older than its setting, by time (whatever the id
// order), in slices of about 20 ms with other work served between them. Events and audit records are first appended to
// compressed archives in the data directory (archive/events-YYYY-MM-DD.jsonl.gz, one
// integration-feed item a line), and never before every alarm destination has had them.
// Each run that deletes anything writes one audit record saying what it deleted.
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import type { AuditTrailRow, EventRow } from '../../db/event-queries.js'
import { auditView, eventView } from '../events/views.js'
import type { RecordTable } from '../../db/event-index.js'
import { iso } from '../time.js'
import type { Loop } from '../platform/loops.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Runs the retention job now (as its timer does); resolves with what it deleted. */
    retention: { run(now?: number): Promise<RetentionRun> }
  }
}

const DAY = 86_400_000
export const ARCHIVE_DIR = 'archive'
/** A slice aims at this long; its row count follows what the last one took. */
const SLICE_MS = 20
const MIN_ROWS = 200
const MAX_ROWS = 20_000

/** What went of one kind: how many, the lowest and highest id (not a range: they go by time), the archive files. */
export interface RecordsPruned {
  deleted: number
  firstId: number | null
  lastId: number | null
  files: string[]
}
export interface RetentionRun {
  events: RecordsPruned
  audit: RecordsPruned
  /** Rows deleted of the other kinds, by kind. */
  other: Record<string, number>
  archivesDeleted: number
  ms: number
}

const archiveName = (table: RecordTable, ms: number) => `${table === 'events' ? 'events' : 'audit'}-${iso(ms).slice(0, 10)}.jsonl.gz`

/**
 * Appends records to their day's archive, one gzip member per append (a multi-member gzip
 * file reads as one: zcat, gunzip, Node's zlib), synced before the records are deleted.
 */
function archive(dataDir: string, table: RecordTable, rows: (EventRow | AuditTrailRow)[]): string[] {
  const dir = path.join(dataDir, ARCHIVE_DIR)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const byFile = new Map<string, string[]>()
  for (const r of rows) {
    const name = archiveName(table, r.created_ms)
    const line = JSON.stringify(table === 'events' ? eventView(r as EventRow) : auditView(r as AuditTrailRow))
    const lines = byFile.get(name)
    if (lines) lines.push(line)
    else byFile.set(name, [line])
  }
  for (const [name, lines] of byFile) {
    const fd = fs.openSync(path.join(dir, name), 'a', 0o600)
    try {
      fs.writeSync(fd, zlib.gzipSync(lines.join('\n') + '\n', { level: 6 }))
      fs.fsyncSync(fd)
    } finally {
      fs.closeSync(fd)
    }
  }
  return [...byFile.keys()]
}

/** A pacer of slices: how many rows the next one takes, from how long the last took. */
class Pace {
  rows = 2000
  after(ms: number, taken: number) {
    if (taken < this.rows) return
    const perRow = ms / Math.max(1, taken)
    this.rows = Math.max(MIN_ROWS, Math.min(MAX_ROWS, Math.round(SLICE_MS / Math.max(perRow, 1e-6))))
  }
}

/**
 * Archives and deletes the events or audit records created before `beforeMs`, oldest
 * first by their time (a bulk load may have stored old records after young ones), passing
 * over those from the first one an alarm destination still waits for on and those the
 * query index has not counted yet (both on a later run).
 */
async function pruneRecords(app: FastifyInstance, table: RecordTable, beforeMs: number, stop: () => boolean): Promise<RecordsPruned> {
  const { db, repos } = app
  const indexer = repos.eventQueries.indexer
  const feed = table === 'events' ? 'events' : 'audit'
  const out: RecordsPruned = { deleted: 0, firstId: null, lastId: null, files: [] }
  const pace = new Pace()
  const files = new Set<string>()
  /** The highest id that may go: below the first record pending in the outbox, counted by the index. */
  const bound = () => {
    const pending = repos.retention.firstPending(feed)
    return Math.min(indexer.indexed(table), pending === null ? Number.MAX_SAFE_INTEGER : pending - 1)
  }
  let after: [number, number] = [Number.MIN_SAFE_INTEGER, 0]
  while (!stop()) {
    const started = performance.now()
    const limit = pace.rows
    const rows = repos.retention.due(table, beforeMs, after, bound(), limit) as (EventRow | AuditTrailRow)[]
    if (rows.length === 0) break
    const last = rows[rows.length - 1]
    after = [last.created_ms, last.id]
    for (const f of archive(app.config.dataDir, table, rows)) files.add(f)
    const { deleted, delta, ids } = db
      .transaction(() => {
        // Read again inside the transaction: a destination may have been given one of them meanwhile.
        const max = bound()
        const ids = rows.filter((r) => r.id <= max).map((r) => r.id)
        repos.retention.openGate(beforeMs)
        const r = indexer.prune(table, ids)
        repos.retention.closeGate()
        return { ...r, ids }
      })
      .immediate()
    indexer.applyPrune(table, delta)
    out.deleted += deleted
    for (const id of ids) {
      if (out.firstId === null || id < out.firstId) out.firstId = id
      if (out.lastId === null || id > out.lastId) out.lastId = id
    }
    pace.after(performance.now() - started, rows.length)
    if (rows.length < limit) break
    await nextTurn()
  }
  out.files = [...files].sort()
  return out
}

/** Deletes in slices with `prune(beforeMs, limit)` until a slice comes back short. */
async function pruneSliced(prune: (beforeMs: number, limit: number) => number, beforeMs: number, stop: () => boolean): Promise<number> {
  let total = 0
  const pace = new Pace()
  while (!stop()) {
    const started = performance.now()
    const rows = pace.rows
    const n = prune(beforeMs, rows)
    total += n
    pace.after(performance.now() - started, n)
    if (n < rows) break
    await nextTurn()
  }
  return total
}

/** Archive files older than `days` (by the day in their name). */
function pruneArchives(dataDir: string, beforeMs: number): number {
  const dir = path.join(dataDir, ARCHIVE_DIR)
  if (!fs.existsSync(dir)) return 0
  const cutoff = iso(beforeMs).slice(0, 10)
  let n = 0
  for (const name of fs.readdirSync(dir)) {
    const day = /^(?:events|audit)-(\d{4}-\d{2}-\d{2})\.jsonl\.gz$/.exec(name)?.[1]
    // A file holds its whole day: it goes once the day's last instant is past the cutoff.
    if (day && day < cutoff) {
      fs.rmSync(path.join(dir, name), { force: true })
      n++
    }
  }
  return n
}

/** One run of the job: every kind with a retention, then the run's audit record. */
export async function runRetention(app: FastifyInstance, now = Date.now(), stop: () => boolean = () => false): Promise<RetentionRun> {
  const started = performance.now()
  const r = app.config.retention
  const { retention } = app.repos
  const before = (days: number) => now - days * DAY
  const none: RecordsPruned = { deleted: 0, firstId: null, lastId: null, files: [] }
  const events = r.eventsDays > 0 ? await pruneRecords(app, 'events', before(r.eventsDays), stop) : none
  const audit = r.auditDays > 0 ? await pruneRecords(app, 'audit_trail', before(r.auditDays), stop) : none
  const other: Record<string, number> = {}
  if (r.notificationsDays > 0) {
    other.riskNotifications = await pruneSliced(retention.pruneRiskNotifications, before(r.notificationsDays), stop)
    other.healthNotifications = await pruneSliced(retention.pruneHealthNotifications, before(r.notificationsDays), stop)
  }
  other.readMarks = await pruneSliced(retention.pruneReadMarks, now, stop)
  if (r.commandsDays > 0) {
    other.commands = await pruneSliced(retention.pruneCommands, before(r.commandsDays), stop)
    other.debugLogs = await pruneSliced(retention.pruneDebugLogs, before(r.commandsDays), stop)
    other.agentErrors = await pruneSliced(retention.pruneAgentErrors, before(r.commandsDays), stop)
  }
  if (r.agentlessRunsDays > 0) other.agentlessRuns = await pruneSliced(retention.pruneAgentlessRuns, before(r.agentlessRunsDays), stop)
  const archivesDeleted = r.archiveDays > 0 ? pruneArchives(app.config.dataDir, before(r.archiveDays)) : 0
  const run: RetentionRun = { events, audit, other, archivesDeleted, ms: performance.now() - started }
  const otherTotal = Object.values(other).reduce((a, b) => a + b, 0)
  if (events.deleted + audit.deleted + otherTotal + archivesDeleted > 0) {
    const said = (what: string, p: RecordsPruned, days: number) =>
      p.deleted ? [`${p.deleted} ${what} older than ${days} days (ids ${p.firstId} to ${p.lastId}, archived in ${p.files.length} file${p.files.length === 1 ? '' : 's'})`] : []
    const parts = [...said('events', events, r.eventsDays), ...said('audit records', audit, r.auditDays)]
    if (otherTotal) parts.push(`${otherTotal} other records`)
    if (archivesDeleted) parts.push(`${archivesDeleted} archive files older than ${r.archiveDays} days`)
    app.repos.audit.insert({
      createdMs: Date.now(),
      severity: 5,
      category: 'System',
      user: null,
      sourceIp: null,
      operationId: null,
      outcome: 'Succeeded',
      description: `Retention: deleted ${parts.join('; ')}`.slice(0, 1000),
      details: JSON.stringify({ events, audit, other, archivesDeleted, settings: r }),
    })
  }
  return run
}

/**
 * Runs the job a minute after the start, then every PRIME_RETENTION_INTERVAL_SECONDS (one
 * process at a time: it deletes shared history); closing waits for the slice in hand.
 */
export function retentionLoop(app: FastifyInstance, firstDelayMs = 60_000): Loop {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<unknown> | null = null
  let closed = false
  const run = (now = Date.now()) => {
    const p = runRetention(app, now, () => closed)
    running = p.finally(() => {
      running = null
    })
    return p
  }
  const tick = () => {
    if (closed || running) return
    run().then(
      (r) => {
        if (r.events.deleted + r.audit.deleted > 0) app.log.info({ retention: { events: r.events.deleted, audit: r.audit.deleted, other: r.other, ms: Math.round(r.ms) } }, 'retention run')
      },
      (err) => app.log.error({ err }, 'retention run failed'),
    )
  }
  app.decorate('retention', { run })
  return {
    name: 'retention',
    singleton: true,
    stopsFirst: true,
    start() {
      timer = setTimeout(function again() {
        tick()
        timer = setTimeout(again, app.config.retention.intervalSeconds * 1000).unref()
      }, firstDelayMs).unref()
    },
    async stop() {
      closed = true
      clearTimeout(timer)
      await running
    },
  }
}
