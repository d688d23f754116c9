import fs from 'node:fs'
import type { FastifyInstance } from 'fastify'
import { iso } from './time.js'
import { registerHealthCheck, type HealthStatus, type HealthVerdict } from './platform/health.js'
import { isPromise, then, type Maybe } from './platform/maybe.js'

export type { HealthStatus } from './platform/health.js'
export interface HealthItem {
  name: string
  status: HealthStatus
  detail: string
  checkedTime: string
  durationMs: number
}

/** What admin/SubsystemHealth answers and the health recorder records. */
export interface HealthResult {
  status: HealthStatus
  checkedTime: string
  subsystems: HealthItem[]
}

const GiB = 1024 ** 3,
  MiB = 1024 ** 2
const rank: Record<HealthStatus, number> = { Healthy: 0, Warning: 1, Failed: 2 }

/**
 * The storage the platform's checks read (`app.storage.health`): the database's own facts and
 * the accounts, at once on SQLite and through Promises on PostgreSQL; the data directory's
 * growth samples on SQLite only (they are its DiskSpace check's, below).
 */
export interface CoreHealthStore {
  system: { probe(): Maybe<void>; sizeBytes(): Maybe<number>; schemaVersion(): Maybe<number> }
  users: { counts(): Maybe<{ total: number; active: number }>; activeAdministrators(): Maybe<number> }
  samples?: SizeSamples
  /** The database file's integrity check (SQLite's quick check, in a worker thread): 'ok' or what it found. */
  quickCheck?(file: string, signal: AbortSignal): Promise<string>
}

/** A sample of the data directory's size and the free space beside it. */
export interface SizeSample {
  sampled_ms: number
  bytes: number
  free_bytes: number
}

/** The data directory's growth samples (db/retention.ts keeps them in the SQLite file). */
export interface SizeSamples {
  /** The oldest and the latest sample. */
  samples(): SizeSample[]
  /** Samples of the data directory's size (for its growth); older ones are dropped. */
  addSample(ms: number, bytes: number, free: number, keepAfterMs: number): void
}

/**
 * What the platform's checks read: the storage above, the database file (SQLite's: its quick
 * check; none on PostgreSQL), the data directory, and what the checks keep between runs (the
 * latest quick check, the latest size measured).
 */
export interface CoreHealthDeps extends CoreHealthStore {
  dbFile?: string
  dataDir: string
  kept: { integrity: Integrity; measured?: { ms: number; bytes: number } }
}

type Check = (deps: CoreHealthDeps) => Maybe<HealthVerdict>

// SQLite's quick check reads the whole file (tens of seconds on a large database): it runs in
// a worker thread (db/integrity.ts, given as the store's quickCheck), at most hourly while it passes and again at the next
// check after a failure, and each check reports the latest finished result.
const INTEGRITY_EVERY_MS = 3600_000
interface Integrity {
  running: boolean
  /** The check in hand, ended when the app closes. */
  inHand?: { stop: AbortController; done: Promise<unknown> }
  result?: string
  finishedMs?: number
}

/** The latest finished quick check; starts another one when it is due. */
function integrityOf(deps: CoreHealthDeps, dbFile: string): Integrity {
  const state = deps.kept.integrity
  const due = state.finishedMs === undefined || state.result !== 'ok' || Date.now() - state.finishedMs >= INTEGRITY_EVERY_MS
  if (due && !state.running) {
    state.running = true
    const stop = new AbortController()
    const done = deps.quickCheck!(dbFile, stop.signal).then((result) => {
      state.inHand = undefined
      if (!stop.signal.aborted) Object.assign(state, { running: false, result, finishedMs: Date.now() })
    })
    state.inHand = { stop, done }
  }
  return state
}

const DAY = 86_400_000
/** Fewer days than this until the disk is full, at the data directory's growth, is a warning. */
const DAYS_LEFT_WARNING = 7
/** The growth is measured over this many days (samples at most hourly). */
const GROWTH_DAYS = 7
const SAMPLE_EVERY_MS = 3600_000
/** The data directory's size is measured again after this long (a walk over its files). */
const SIZE_EVERY_MS = 60_000

const size = (bytes: number) => (bytes >= GiB ? `${(bytes / GiB).toFixed(2)} GiB` : `${(bytes / MiB).toFixed(1)} MiB`)

/** Bytes of every file under `dir` (the database, its WAL, report files, archives, keys). */
export function dirBytes(dir: string): number {
  let n = 0
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = `${dir}/${entry.name}`
    try {
      if (entry.isDirectory()) n += dirBytes(p)
      else if (entry.isFile()) n += fs.statSync(p).size
    } catch {
      // removed meanwhile
    }
  }
  return n
}

/**
 * The data directory's size now, and its growth a day from the oldest sample of the last
 * GROWTH_DAYS (null until there is one an hour old). A sample is kept at most hourly.
 */
export function dataDirGrowth(deps: CoreHealthDeps, free: number, now = Date.now()): { bytes: number; perDay: number | null; overDays: number } {
  let m = deps.kept.measured
  if (!m || now - m.ms >= SIZE_EVERY_MS) deps.kept.measured = m = { ms: now, bytes: dirBytes(deps.dataDir) }
  // DiskSpace is registered only where the samples are kept (SQLite).
  const repo = deps.samples!
  const samples = repo.samples()
  const latest = samples.at(-1)
  if (!latest || now - latest.sampled_ms >= SAMPLE_EVERY_MS) repo.addSample(now, m.bytes, free, now - GROWTH_DAYS * DAY)
  const from = samples[0]
  if (!from || now - from.sampled_ms < SAMPLE_EVERY_MS) return { bytes: m.bytes, perDay: null, overDays: 0 }
  const days = (now - from.sampled_ms) / DAY
  return { bytes: m.bytes, perDay: (m.bytes - from.bytes) / days, overDays: days }
}

/** The checks of the platform itself; features register theirs (lib/platform/health.ts). */
export const checks: Record<'Database' | 'DiskSpace' | 'Authentication', Check> = {
  Database(deps) {
    // Each step at once on SQLite, after the previous answer on PostgreSQL.
    return then(deps.system.probe(), () => {
      // SQLite's quick check of its file; PostgreSQL checks its own pages (data checksums).
      const integrity = deps.dbFile === undefined ? undefined : integrityOf(deps, deps.dbFile)
      if (integrity?.result !== undefined && integrity.result !== 'ok') return { status: 'Failed', detail: `Integrity check: ${integrity.result}` }
      const quick = integrity === undefined ? [] : [integrity.finishedMs === undefined ? 'integrity check running' : `integrity ok at ${iso(integrity.finishedMs)}`]
      return then(deps.system.sizeBytes(), (bytes) =>
        then(
          deps.system.schemaVersion(),
          (version): HealthVerdict => ({
            status: 'Healthy',
            detail: ['Read and write succeeded', ...quick, `${(bytes / MiB).toFixed(1)} MiB`, `schema version ${version}`].join('; '),
          }),
        ),
      )
    })
  },
  DiskSpace(deps) {
    const s = fs.statfsSync(deps.dataDir)
    const free = s.bavail * s.bsize
    const total = s.blocks * s.bsize
    const pct = total > 0 ? (free / total) * 100 : 0
    const growth = dataDirGrowth(deps, free)
    const parts = [`${(free / GiB).toFixed(2)} GiB free of ${(total / GiB).toFixed(2)} GiB (${pct.toFixed(1)} %) in the data directory's file system`, `the data directory holds ${size(growth.bytes)}`]
    if (growth.perDay === null) parts.push('growth not known yet (measured over an hour at least)')
    else parts.push(`growing ${size(Math.max(0, growth.perDay))} a day over the last ${growth.overDays.toFixed(1)} days`)
    const daysLeft = growth.perDay !== null && growth.perDay > 0 ? free / growth.perDay : null
    if (daysLeft !== null) parts.push(`full in about ${daysLeft < 10 ? daysLeft.toFixed(1) : Math.round(daysLeft)} days at that rate`)
    const detail = parts.join('; ')
    if (free < 100 * MiB) return { status: 'Failed', detail }
    if (free < GiB || pct < 10 || (daysLeft !== null && daysLeft < DAYS_LEFT_WARNING)) return { status: 'Warning', detail }
    return { status: 'Healthy', detail }
  },
  Authentication(deps) {
    return then(deps.users.counts(), ({ total, active }) =>
      then(deps.users.activeAdministrators(), (admins): HealthVerdict => {
        if (admins === 0) return { status: 'Failed', detail: 'No active Administrator account' }
        return { status: 'Healthy', detail: `${active} of ${total} accounts active; ${admins} active Administrator(s); token signing ready` }
      }),
    )
  },
}

/**
 * Registers the platform's checks, first of all (answered before the features'). On
 * PostgreSQL, Database and Authentication read the server through the storage's ports;
 * DiskSpace is SQLite's only: it watches the file system that holds SQLite's file, its WAL
 * and archives, with growth samples kept in that file, while PostgreSQL's data is on the
 * database server's disks, which a node cannot see (the Database check gives its size).
 */
export function registerCoreHealthChecks(app: FastifyInstance): void {
  const { storage, config } = app
  const sqlite = storage.backend === 'sqlite'
  const deps: CoreHealthDeps = {
    ...storage.health,
    dbFile: sqlite ? config.dbFile : undefined,
    dataDir: config.dataDir,
    kept: { integrity: { running: false } },
  }
  const names: (keyof typeof checks)[] = sqlite ? ['Database', 'DiskSpace', 'Authentication'] : ['Database', 'Authentication']
  for (const name of names) registerHealthCheck(app, { name, check: () => checks[name](deps) })
  // A quick check in hand holds a connection to the file: ended before the app is closed,
  // so that nothing reads (or reopens the WAL of) a database that is being closed or moved.
  app.addHook('onClose', async () => {
    const inHand = deps.kept.integrity.inHand
    inHand?.stop.abort()
    await inHand?.done
  })
}

const failed = (err: unknown): HealthVerdict => ({ status: 'Failed', detail: `Check failed: ${(err as Error).message}` })

/**
 * Runs every registered check, in registration order, one after another: the answer comes
 * at once when every check answers at once (SQLite), else through a Promise.
 */
export function runHealthChecks(app: FastifyInstance): Maybe<HealthResult> {
  const checks = app.healthChecks
  const subsystems: HealthItem[] = []
  const item = (name: string, verdict: HealthVerdict, start: number): HealthItem => ({
    name,
    ...verdict,
    checkedTime: iso(Date.now()),
    durationMs: Math.round((performance.now() - start) * 1000) / 1000,
  })
  const from = (i: number): Maybe<HealthResult> => {
    for (; i < checks.length; i++) {
      const { name, check } = checks[i]
      const start = performance.now()
      let verdict: Maybe<HealthVerdict>
      try {
        verdict = check(app)
      } catch (err) {
        verdict = failed(err)
      }
      if (isPromise(verdict)) {
        const next = i + 1
        return verdict.catch(failed).then((v) => {
          subsystems.push(item(name, v, start))
          return from(next)
        })
      }
      subsystems.push(item(name, verdict, start))
    }
    const status = subsystems.reduce<HealthStatus>((worst, s) => (rank[s.status] > rank[worst] ? s.status : worst), 'Healthy')
    return { status, checkedTime: iso(Date.now()), subsystems }
  }
  return from(0)
}
