// Seeding and checking an app's data whichever backend it runs on (tests/helpers.ts `build`:
// SQLite, or PostgreSQL under PRIME_TEST_BACKEND=postgres). Writes go through the ports both
// backends give (`app.storage.ports`); checks read the tables both schemas share with plain
// SQL. What only SQLite has (its event index, its connection's pragmas) stays in the files
// marked `// backend: sqlite-only`.
import type { FastifyInstance } from 'fastify'
import Database from 'better-sqlite3'
import pg from 'pg'
import type { AlarmsRepo } from '../db/alarms.js'
import { auditColumns } from '../db/audit.js'
import type { AuditRecord, AuditRow } from '../lib/platform/ports.js'
import { AUDIT_FIELDS, type EventInput } from '../lib/events/ports.js'
import type { ServicePorts } from '../lib/services.js'
import type { Async } from '../db/unit-of-work.js'

type App = FastifyInstance

/** The app's backend. */
export const backendOf = (app: App) => app.storage.backend

/** The services' ports: the same interface on both backends. */
export function portsOf(app: App): ServicePorts {
  const ports = app.storage.ports
  if (!ports) throw new Error('the app has no ports yet')
  return ports
}

// bigint and numeric read as numbers, as SQLite answers them (test data stays far below 2^53).
const pgTypes = {
  getTypeParser(oid: number, format?: string) {
    if (oid === 20 || oid === 1700) return (v: string) => (v === null ? null : Number(v))
    return pg.types.getTypeParser(oid, format as 'text')
  },
}

const pools = new WeakMap<App, pg.Pool>()

/** Closes what `query` opened for `app` (tests/helpers.ts `build` calls it at teardown). */
export async function closeQueries(app: App): Promise<void> {
  const pool = pools.get(app)
  pools.delete(app)
  await pool?.end()
}

/** `?` placeholders made PostgreSQL's `$n` (none are written inside quoted text here). */
const numbered = (sql: string) => {
  let n = 0
  return sql.replace(/\?/g, () => `$${++n}`)
}

/**
 * The rows of a read of the tables both schemas share, written with `?` placeholders:
 * SQLite's connection, or a small pool of the test's own on PostgreSQL (bigints as numbers).
 */
export async function query<T = Record<string, any>>(app: App, sql: string, ...params: unknown[]): Promise<T[]> {
  if (app.storage.backend === 'sqlite') {
    const statement = app.db.prepare(sql)
    // A write answers no rows (as PostgreSQL's without RETURNING).
    if (!statement.reader) {
      statement.run(...params)
      return []
    }
    return statement.all(...params) as T[]
  }
  let pool = pools.get(app)
  if (!pool) {
    pool = new pg.Pool({ connectionString: app.config.databaseUrl, max: 2, types: pgTypes })
    pool.on('error', () => {})
    pools.set(app, pool)
  }
  return (await pool.query({ text: numbered(sql), values: params })).rows as T[]
}

/** The first row of `query`, or undefined. */
export async function queryOne<T = Record<string, any>>(app: App, sql: string, ...params: unknown[]): Promise<T | undefined> {
  return (await query<T>(app, sql, ...params))[0]
}

/** Rows written with multi-row INSERTs (a few hundred a statement), on either backend. */
export async function insertRows(app: App, table: string, rows: Record<string, unknown>[]): Promise<void> {
  if (!rows.length) return
  const columns = Object.keys(rows[0])
  for (let i = 0; i < rows.length; i += 500) {
    const slice = rows.slice(i, i + 500)
    const tuples = slice.map(() => `(${columns.map(() => '?').join(', ')})`).join(', ')
    await query(app, `INSERT INTO ${table} (${columns.join(', ')}) VALUES ${tuples}`, ...slice.flatMap((r) => columns.map((c) => r[c])))
  }
}

/** The first column of every row. */
export async function queryColumn<T = any>(app: App, sql: string, ...params: unknown[]): Promise<T[]> {
  return (await query(app, sql, ...params)).map((row) => Object.values(row)[0] as T)
}

/** The first column of the first row (a count, a max). */
export async function queryValue<T = any>(app: App, sql: string, ...params: unknown[]): Promise<T> {
  const row = await queryOne(app, sql, ...params)
  return (row ? Object.values(row)[0] : undefined) as T
}

/**
 * The alarm repository whole (queueAllEvents, publishAssets, ...), Promise-returning on both
 * backends: the delivery loop's outbox is the repository itself on PostgreSQL, and SQLite's
 * made asynchronous method by method.
 */
export const alarmsOf = (app: App) => app.storage.alarmDelivery.outbox as unknown as Async<AlarmsRepo>

// The columns auditColumns() gives values for, in its order: the record's fields but its id, then the refusal key.
const AUDIT_COLUMNS = [...AUDIT_FIELDS.slice(1), 'refusal_key']

/**
 * Many audit records at once, with the columns the audit store writes (auditColumns), as
 * multi-row INSERTs: thousands in a moment on either backend. PostgreSQL's days' partitions
 * are made first, as its audit store makes them.
 */
export async function addAuditRecords(app: App, records: AuditRecord[]): Promise<void> {
  if (!records.length) return
  if (app.storage.backend === 'postgres') {
    const from = records.reduce((m, r) => Math.min(m, r.createdMs), Infinity)
    const to = records.reduce((m, r) => Math.max(m, r.createdMs), -Infinity)
    await query(app, "SELECT ensure_partitions('audit_trail', ?::bigint, ?::bigint)", from, to)
  }
  await insertRows(
    app,
    'audit_trail',
    records.map((r) => {
      const values = auditColumns(r)
      return Object.fromEntries(AUDIT_COLUMNS.map((c, i) => [c, values[i]]))
    }),
  )
}

/** The latest `n` audit records, newest first. */
export const latestAudit = (app: App, n = 1) => query<AuditRow>(app, 'SELECT * FROM audit_trail ORDER BY id DESC LIMIT ?', n)

/** The audit records after id `after`, oldest first. */
export const auditSince = (app: App, after: number) => query<AuditRow>(app, 'SELECT * FROM audit_trail WHERE id > ? ORDER BY id', after)

/** The id of the latest audit record, 0 when there is none. */
export const lastAuditId = async (app: App) => (await latestAudit(app, 1))[0]?.id ?? 0

/** Events written as the gateway writes them (with their outbox rows, counters and notifications). */
export const recordEvents = (app: App, createdMs: number, events: EventInput[], agentId?: number) => portsOf(app).eventRecorder.record(createdMs, events, agentId)

/** recordEvents, answering the new events' ids (both backends' recorders answer them). */
export const recordEventIds = async (app: App, createdMs: number, events: EventInput[], agentId?: number) => (await recordEvents(app, createdMs, events, agentId)) as number[]

/**
 * SQLite's event index brought up to date (answers are exact either way; some tests pin the
 * indexed path). PostgreSQL reads its own indexes: nothing to do.
 */
export function indexEvents(app: App): void {
  if (app.storage.backend === 'sqlite') app.repos.eventQueries.catchUp()
}

/** SQLite's event index moved on by up to `n` records of `table` (a part indexed); nothing on PostgreSQL. */
export function stepIndex(app: App, table: 'events' | 'audit_trail', n: number): void {
  if (app.storage.backend === 'sqlite') app.repos.eventQueries.indexer.step(table, n)
}

/** SQLite's background indexing held (or let go), so that a test reads the unindexed path; nothing on PostgreSQL. */
export function holdIndexing(app: App, hold: boolean): void {
  if (app.storage.backend === 'sqlite') app.repos.eventQueries.holdIndexing(hold)
}

/**
 * Writes through a connection other than the app's own (an operator's tool, another node):
 * a second SQLite connection on the data dir's file, or `query`'s pool on PostgreSQL.
 */
export function otherConnection(app: App, t: { teardown: (fn: () => unknown) => void }): (sql: string, ...params: unknown[]) => Promise<unknown> {
  if (app.storage.backend === 'postgres') return (sql, ...params) => query(app, sql, ...params)
  const other = new Database(app.config.dbFile)
  t.teardown(() => other.close())
  return async (sql, ...params) => other.prepare(sql).run(...params)
}
