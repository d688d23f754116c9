// The retention job: deletes what is older than its setting, by time (whatever the id
// order), in slices of about 4 ms with other work served between them. Events and audit records are first appended to
// compressed archives in the data directory (archive/events-YYYY-MM-DD.jsonl.gz, one
// integration-feed item a line), and never before every alarm destination has had them.
// Each run that deletes anything writes one audit record saying what it deleted.
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Config } from '../config.js'
import { auditView, eventView } from '../events/views.js'
import type { AuditTrailRow, EventRow } from '../events/ports.js'
import type { Loop } from '../platform/loops.js'
import { iso } from '../time.js'
import type { CommittingUnitOfWork, PruneDelta, RecordDays, RecordIndexStore, RecordTable, RetentionStore, SystemAuditStore } from './ports.js'

export interface RetentionDeps {
  retention: RetentionStore
  index: RecordIndexStore
  /** Applies a committed prune to the index's counts in memory (called right after the commit, before any other statement). */
  applyPrune(table: RecordTable, delta: PruneDelta): void
  audit: SystemAuditStore
  uow: CommittingUnitOfWork
  settings: Config['retention']
  /** Where the archives are written (their folder, ARCHIVE_DIR, in it). */
  dataDir: string
  log: { info(details: object, message: string): void; error(details: object, message: string): void }
}

const DAY = 86_400_000
export const ARCHIVE_DIR = 'archive'
/** A slice aims at this long (every request that arrives meanwhile waits for it); its row count follows what the last one took. */
const SLICE_MS = 4
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
async function pruneRecords(deps: RetentionDeps, table: RecordTable, beforeMs: number, stop: () => boolean): Promise<RecordsPruned> {
  const { retention, index, uow } = deps
  const feed = table === 'events' ? 'events' : 'audit'
  const out: RecordsPruned = { deleted: 0, firstId: null, lastId: null, files: [] }
  const pace = new Pace()
  const files = new Set<string>()
  /** The highest id that may go: below the first record pending in the outbox, counted by the index. */
  const bound = async () => {
    const pending = await retention.firstPending(feed)
    return Math.min(await index.indexed(table), pending === null ? Number.MAX_SAFE_INTEGER : pending - 1)
  }
  const note = (id: number) => {
    if (out.firstId === null || id < out.firstId) out.firstId = id
    if (out.lastId === null || id > out.lastId) out.lastId = id
  }
  if (retention.days) out.deleted += await dropWholeDays(deps, retention.days, table, beforeMs, bound, files, note, stop)
  let after: [number, number] = [Number.MIN_SAFE_INTEGER, 0]
  while (!stop()) {
    const started = performance.now()
    const limit = pace.rows
    const rows = await retention.due(table, beforeMs, after, await bound(), limit)
    if (rows.length === 0) break
    const last = rows[rows.length - 1]
    after = [last.created_ms, last.id]
    for (const f of archive(deps.dataDir, table, rows)) files.add(f)
    const { deleted, ids } = await uow.run(async () => {
      // Read again inside the transaction: a destination may have been given one of them meanwhile.
      const max = await bound()
      const ids = rows.filter((r) => r.id <= max).map((r) => r.id)
      await retention.openGate(beforeMs)
      const r = await index.prune(table, ids)
      await retention.closeGate()
      // The counts in memory follow the commit at once: no query reads the rows without them.
      uow.afterCommit(() => deps.applyPrune(table, r.delta))
      return { deleted: r.deleted, ids }
    })
    out.deleted += deleted
    for (const id of ids) note(id)
    pace.after(performance.now() - started, rows.length)
    if (rows.length < limit) break
    await nextTurn()
  }
  out.files = [...files].sort()
  return out
}

/** Records read at once while a whole day is archived. */
const DAY_PAGE = 5000

/**
 * Where records are kept by day: each whole day past `beforeMs`, oldest first, is archived
 * and then dropped at once, as long as every record of it may go (below `bound`); from the
 * first day a destination still waits for, the rows go one by one (pruneRecords). A day that
 * changed between its archive and its drop (a record written into it since) is kept: the
 * rows then go one by one too, and that day's archive may hold some records twice (as it may when the job is stopped while archiving a day).
 */
async function dropWholeDays(
  deps: RetentionDeps,
  days: RecordDays,
  table: RecordTable,
  beforeMs: number,
  bound: () => Promise<number>,
  files: Set<string>,
  note: (id: number) => void,
  stop: () => boolean,
): Promise<number> {
  let deleted = 0
  for (const day of await days.wholeDays(table, beforeMs)) {
    if (stop()) break
    const max = await bound()
    const held = await days.dayHeld(table, day.fromMs)
    if (held.top !== null && held.top > max) break
    let archived = 0
    let lo = Number.MAX_SAFE_INTEGER
    let hi = 0
    // (created_ms, id) after (fromMs - 1, any id): the day's first record on.
    let after: [number, number] = [day.fromMs - 1, Number.MAX_SAFE_INTEGER]
    while (!stop()) {
      const rows = await deps.retention.due(table, day.toMs, after, max, DAY_PAGE)
      if (rows.length === 0) break
      for (const f of archive(deps.dataDir, table, rows)) files.add(f)
      for (const r of rows) {
        if (r.id < lo) lo = r.id
        if (r.id > hi) hi = r.id
      }
      archived += rows.length
      const last = rows[rows.length - 1]
      after = [last.created_ms, last.id]
      if (rows.length < DAY_PAGE) break
      await nextTurn()
    }
    if (stop()) break
    const dropped = await days.dropDay(table, day.fromMs, max, archived)
    if (dropped === null) break
    deleted += dropped
    if (dropped > 0) {
      note(lo)
      note(hi)
    }
  }
  return deleted
}

/** Deletes in slices with `prune(beforeMs, limit)` until a slice comes back short. */
async function pruneSliced(prune: (beforeMs: number, limit: number) => Promise<number>, beforeMs: number, stop: () => boolean): Promise<number> {
  let total = 0
  const pace = new Pace()
  while (!stop()) {
    const started = performance.now()
    const rows = pace.rows
    const n = await prune(beforeMs, rows)
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
export async function runRetention(deps: RetentionDeps, now = Date.now(), stop: () => boolean = () => false): Promise<RetentionRun> {
  const started = performance.now()
  const r = deps.settings
  const { retention } = deps
  const before = (days: number) => now - days * DAY
  const none: RecordsPruned = { deleted: 0, firstId: null, lastId: null, files: [] }
  const events = r.eventsDays > 0 ? await pruneRecords(deps, 'events', before(r.eventsDays), stop) : none
  const audit = r.auditDays > 0 ? await pruneRecords(deps, 'audit_trail', before(r.auditDays), stop) : none
  const other: Record<string, number> = {}
  if (r.notificationsDays > 0) {
    other.riskNotifications = await pruneSliced((b, n) => retention.pruneRiskNotifications(b, n), before(r.notificationsDays), stop)
    other.healthNotifications = await pruneSliced((b, n) => retention.pruneHealthNotifications(b, n), before(r.notificationsDays), stop)
  }
  other.readMarks = await pruneSliced((b, n) => retention.pruneReadMarks(b, n), now, stop)
  if (r.commandsDays > 0) {
    other.commands = await pruneSliced((b, n) => retention.pruneCommands(b, n), before(r.commandsDays), stop)
    other.debugLogs = await pruneSliced((b, n) => retention.pruneDebugLogs(b, n), before(r.commandsDays), stop)
    other.agentErrors = await pruneSliced((b, n) => retention.pruneAgentErrors(b, n), before(r.commandsDays), stop)
  }
  if (r.agentlessRunsDays > 0) other.agentlessRuns = await pruneSliced((b, n) => retention.pruneAgentlessRuns(b, n), before(r.agentlessRunsDays), stop)
  const archivesDeleted = r.archiveDays > 0 ? pruneArchives(deps.dataDir, before(r.archiveDays)) : 0
  const run: RetentionRun = { events, audit, other, archivesDeleted, ms: performance.now() - started }
  const otherTotal = Object.values(other).reduce((a, b) => a + b, 0)
  if (events.deleted + audit.deleted + otherTotal + archivesDeleted > 0) {
    const said = (what: string, p: RecordsPruned, days: number) =>
      p.deleted ? [`${p.deleted} ${what} older than ${days} days (ids ${p.firstId} to ${p.lastId}, archived in ${p.files.length} file${p.files.length === 1 ? '' : 's'})`] : []
    const parts = [...said('events', events, r.eventsDays), ...said('audit records', audit, r.auditDays)]
    if (otherTotal) parts.push(`${otherTotal} other records`)
    if (archivesDeleted) parts.push(`${archivesDeleted} archive files older than ${r.archiveDays} days`)
    await deps.audit.insert({
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
 * process at a time: it deletes shared history; never on its own when that is 0); closing
 * waits for the slice in hand.
 */
export function retentionJob(deps: RetentionDeps, firstDelayMs = 60_000): { run(now?: number): Promise<RetentionRun>; loop: Loop } {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<unknown> | null = null
  let closed = false
  // Runs of this process go one after another (a direct run waits for the loop's): two at
  // once would archive the same records twice and read days the other has dropped. The
  // lease keeps other nodes' runs apart.
  let queue: Promise<unknown> = Promise.resolve()
  const run = (now = Date.now()) => {
    const p = queue.then(() => runRetention(deps, now, () => closed))
    // Only says when the run is over: a failure is the caller's to report (tick logs it), and
    // must not also reach the process as an unhandled rejection, which stops the server.
    const settled = p.then(
      () => {},
      () => {},
    )
    queue = settled
    running = settled.finally(() => {
      if (queue === settled) running = null
    })
    return p
  }
  const tick = () => {
    if (closed || running) return
    run().then(
      (r) => {
        if (r.events.deleted + r.audit.deleted > 0) deps.log.info({ retention: { events: r.events.deleted, audit: r.audit.deleted, other: r.other, ms: Math.round(r.ms) } }, 'retention run')
      },
      (err) => deps.log.error({ err }, 'retention run failed'),
    )
  }
  const loop: Loop = {
    name: 'retention',
    singleton: true,
    stopsFirst: true,
    start() {
      closed = false
      // 0: no runs on a timer (the operator's scheduler runs scripts/retention.ts).
      if (deps.settings.intervalSeconds === 0) return
      timer = setTimeout(function again() {
        tick()
        timer = setTimeout(again, deps.settings.intervalSeconds * 1000).unref()
      }, firstDelayMs).unref()
    },
    async stop() {
      closed = true
      clearTimeout(timer)
      await running
    },
  }
  return { run, loop }
}
