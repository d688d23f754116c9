// The PostgreSQL connection pool and its unit of work (PRIME_DATABASE_URL=postgres://…).
//
// A unit of work holds one client from the pool in a transaction for as long as its work
// runs; every query made in its async context goes to that client, and every other query
// to the pool. Nothing here is held by one process only: several nodes share the database.
import { AsyncLocalStorage } from 'node:async_hooks'
import { createHash } from 'node:crypto'
import pg from 'pg'
import type { UnitOfWork } from '../../lib/platform/ports.js'

/** A row as node-postgres answers it. */
export type Row = Record<string, unknown>

/**
 * A statement each connection prepares once (a named statement): the server keeps its parse
 * and, after a few runs, its plan. For hot statements whose planning costs as much as their
 * work (the risk raise of every event batch: 3.4 ms planned, 2.8 ms run).
 */
export interface Prepared {
  readonly name: string
  readonly text: string
}
/** `text` as a prepared statement, named by its hash (a name stands for one text only). */
export function prepared(text: string): Prepared {
  return { name: `prime_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`, text }
}
/** A statement's text, or a prepared statement. */
export type Sql = string | Prepared

/**
 * int8 (counts, ids, millisecond times) and numeric (sums of int8) as numbers, not
 * strings: every such value of this schema stays below 2^53. Set per pool, not globally,
 * so that no other user of `pg` in the process is changed.
 */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 || oid === 1700) return (v: string) => (v === null ? null : Number(v))
    return pg.types.getTypeParser(oid, format as 'text')
  },
}

interface Unit {
  client: pg.PoolClient
  committed: (() => unknown)[]
}

/**
 * A request's text PostgreSQL cannot hold: a NUL character (U+0000), which its text type
 * refuses (SQLSTATE 22021) and jsonb refuses as the escape \u0000 (22P05). SQLite stores
 * it; here the caller is told, with a 400.
 */
export class UnstorableText extends Error {
  readonly code = 'unstorable-text'
  constructor(cause: unknown) {
    super('Text with a NUL character (U+0000) cannot be stored or searched on this server: remove it.', { cause })
    this.name = 'UnstorableText'
  }
}

const NUL_REFUSED = new Set(['22021', '22P05'])

/** The error of a statement, with PostgreSQL's refusal of a NUL character made an UnstorableText. */
/**
 * A statement of an expensive read stopped by its budget (statement_timeout, SQLSTATE 57014
 * on the budgeted pool): the caller is answered 422 query-too-costly, as on SQLite.
 */
export class StatementPastBudget extends Error {
  readonly code = 'statement-past-budget'
  constructor(readonly budgetMs: number) {
    super(`the query ran past its time budget of ${Math.round(budgetMs / 1000)} s and was stopped: narrow it (a filter, a longer search text, a smaller page) or ask for an export`)
  }
}

/** Every client of the expensive reads' pool stayed busy for a whole budget: answered 503 readers-busy. */
export class ExpensiveReadsBusy extends Error {
  readonly code = 'expensive-reads-busy'
  constructor(budgetMs: number) {
    super(`every connection for expensive reads was busy for ${Math.round(budgetMs / 1000)} s`)
  }
}

/**
 * The connection to PostgreSQL was lost (the server restarted, or ended this connection) or
 * cannot be made: answered 503 not-ready; the node connects again at its next statement.
 */
export class DatabaseUnavailable extends Error {
  readonly code = 'database-unavailable'
  constructor(cause: unknown) {
    super(`the database connection was lost: ${(cause as Error).message}`, { cause })
  }
}

/** SQLSTATEs of a connection ended by the server (admin_shutdown, crash_shutdown, cannot_connect_now) and class 08. */
const CONNECTION_LOST = /^(57P0[123]|08...)$/
/** node-postgres' and the socket's words for a connection gone or refused. */
const CONNECTION_LOST_MESSAGE = /^(Connection terminated|Client has encountered a connection error|Client was closed)/
/** node-postgres' refusal of a statement it did not send: the connection was known to be gone. */
const NOT_SENT = /is not queryable$/
const SOCKET_LOST = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND'])

/** Whether `err` says that the connection is gone (rather than that a statement failed). */
export function connectionLost(err: unknown): boolean {
  if (err instanceof DatabaseUnavailable) return true
  const { code, message } = (err ?? {}) as { code?: string; message?: string }
  return (code !== undefined && (CONNECTION_LOST.test(code) || SOCKET_LOST.has(code))) || CONNECTION_LOST_MESSAGE.test(message ?? '')
}

function statementError(err: unknown, budgetMs?: number): unknown {
  const code = (err as { code?: string }).code
  if (NUL_REFUSED.has(code ?? '')) return new UnstorableText(err)
  if (err instanceof DatabaseUnavailable) return err
  if (connectionLost(err)) return new DatabaseUnavailable(err)
  if (budgetMs !== undefined) {
    if (code === '57014') return new StatementPastBudget(budgetMs)
    // node-postgres' pool gives up waiting for a client with this message (connectionTimeoutMillis).
    if (err instanceof Error && err.message.startsWith('timeout exceeded when trying to connect')) return new ExpensiveReadsBusy(budgetMs)
  }
  return err
}

/** SQLSTATEs after which a whole unit of work may run again: serialization failure, deadlock. */
const RETRYABLE = new Set(['40001', '40P01'])
const ATTEMPTS = 3

export interface PgUnitOfWork extends UnitOfWork {
  /** The same as `run`: PostgreSQL commits concurrent transactions itself (no group commit to make). */
  runGrouped<T>(work: () => Promise<T>): Promise<T>
  /**
   * Runs `fn` once the caller's unit of work has committed; false when the caller is in none.
   * A Promise `fn` answers is waited for (settled) before the unit's `run` resolves.
   */
  afterCommit(fn: () => unknown): boolean
  /** Always undefined: a pool has no turn to wait for (kept for the ports' common shape). */
  turn(): undefined
  /** Whether the caller is inside a unit of work. */
  inUnit(): boolean
}

export interface Postgres {
  readonly pool: pg.Pool
  readonly uow: PgUnitOfWork
  /**
   * Runs `work` (and everything it starts) as an expensive read: its statements and units of
   * work go to a small pool of their own whose connections carry the read budget as
   * statement_timeout, so that they can neither run past it nor take the pool the cheap
   * requests use. Without a budget in the options it just runs `work`.
   */
  budgeted(work: () => void): void
  /** The pools' clients now (the metrics). */
  poolStats(): { pool: string; total: number; idle: number; waiting: number }[]
  /** The rows of `sql`, on the caller's unit of work's client when in one, else on the pool. */
  query<T extends Row = Row>(sql: Sql, params?: unknown[]): Promise<T[]>
  /** The first row, or undefined. */
  one<T extends Row = Row>(sql: Sql, params?: unknown[]): Promise<T | undefined>
  /** The first column of the first row, or undefined. */
  value<T = unknown>(sql: Sql, params?: unknown[]): Promise<T | undefined>
  /** The number of rows the statement changed. */
  run(sql: Sql, params?: unknown[]): Promise<number>
  close(): Promise<void>
}

export interface PostgresOptions {
  /** The expensive reads' pool: at most this many clients, each statement stopped past `budgetMs`. */
  budget?: { clients: number; budgetMs: number }
  /** Clients at most in the pool. */
  max?: number
  /** Name the server shows in pg_stat_activity. */
  applicationName?: string
  /**
   * Fault injection for tests (PRIME_FAULT_COMMIT_DELAY_MS): each unit of work waits a random
   * time up to this many ms before its COMMIT, its locks held, so that the transactions of
   * several nodes commit in a shuffled order. 0: none.
   */
  commitDelayMs?: number
}

export function connectPostgres(url: string, { max = 10, applicationName = 'prime-webui', budget, commitDelayMs = 0 }: PostgresOptions = {}): Postgres {
  // JIT compilation off: it pays for itself on long analytical queries, and added hundreds
  // of ms to counts and pages that run in tens.
  const pool = new pg.Pool({ connectionString: url, max, application_name: applicationName, types, options: '-c jit=off' })
  // The expensive reads' own clients: the server stops each of their statements at the
  // budget (the connection's statement_timeout), and the cheap requests keep theirs.
  const budgetPool = budget
    ? new pg.Pool({
        connectionString: url,
        max: budget.clients,
        // A read waits for a client at most a budget (then 503, as SQLite's queue answers).
        connectionTimeoutMillis: budget.budgetMs,
        application_name: `${applicationName} expensive`,
        types,
        options: `-c jit=off -c statement_timeout=${budget.budgetMs}`,
      })
    : undefined
  // An idle client whose connection broke (the server restarted) is dropped by the pool;
  // without a listener the error would end the process.
  pool.on('error', () => {})
  budgetPool?.on('error', () => {})
  // A checked-out client (in a unit of work between its statements, a cursor between its
  // fetches) has no listener of the pool's: its connection breaking would end the process.
  // Its statements fail by themselves, and the pool drops it when it is released.
  for (const p of [pool, budgetPool]) p?.on('connect', (client) => client.on('error', () => {}))
  const context = new AsyncLocalStorage<Unit>()
  const expensive = new AsyncLocalStorage<true>()
  /** The pool of the caller: the budgeted one inside an expensive read. */
  const poolNow = (): pg.Pool => (budgetPool && expensive.getStore() ? budgetPool : pool)

  const executor = (): pg.Pool | pg.PoolClient => context.getStore()?.client ?? poolNow()
  const budgetNow = () => (budgetPool && expensive.getStore() ? budget!.budgetMs : undefined)

  /** One try of a unit of work: its result and what is to run once it committed (the client is back in the pool by then). */
  async function attempt<T>(work: () => Promise<T>): Promise<{ result: T; committed: Unit['committed'] }> {
    const client = await poolNow()
      .connect()
      .catch((err) => {
        throw statementError(err, budgetNow())
      })
    const unit: Unit = { client, committed: [] }
    let broken: Error | undefined
    let committing = false
    try {
      await client.query('BEGIN')
      const result = await context.run(unit, work)
      if (commitDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.random() * commitDelayMs))
      // A statement that failed inside the work (its error caught there) has aborted the
      // transaction: COMMIT then answers ROLLBACK, and nothing of the unit was written.
      committing = true
      const end = await client.query('COMMIT')
      if (end.command === 'ROLLBACK') throw new Error('the unit of work was rolled back: a statement in it failed')
      return { result, committed: unit.committed }
    } catch (err) {
      try {
        await client.query('ROLLBACK')
      } catch (rollbackErr) {
        // The connection is gone: it must not go back to the pool.
        broken = rollbackErr as Error
      }
      // Lost before COMMIT was sent (node-postgres refuses a statement on a connection it
      // knows is gone), nothing of the unit was written: it may run again on another
      // connection. Lost during COMMIT, whether it was written is unknown: not again.
      if (connectionLost(err)) {
        const unsent = !committing || NOT_SENT.test((err as Error).message) || NOT_SENT.test(((err as Error).cause as Error | undefined)?.message ?? '')
        throw Object.assign(err instanceof DatabaseUnavailable ? err : new DatabaseUnavailable(err), { rerun: unsent })
      }
      throw err
    } finally {
      client.release(broken)
    }
  }

  const uow: PgUnitOfWork = {
    async run<T>(work: () => Promise<T>): Promise<T> {
      if (context.getStore() !== undefined) return work()
      for (let i = 1; ; i++) {
        let done: Awaited<ReturnType<typeof attempt<T>>>
        try {
          done = await attempt(work)
        } catch (err) {
          const again = RETRYABLE.has((err as { code?: string }).code ?? '') || (err as { rerun?: boolean }).rerun === true
          if (i >= ATTEMPTS || !again) throw err
          continue
        }
        // Run after the unit's client went back to the pool: a callback that reads (a
        // stream's revalidation) must not wait for a client held by the unit waiting for it.
        const acting = done.committed.map((fn) => fn()).filter((v): v is Promise<unknown> => typeof (v as Promise<unknown> | undefined)?.then === 'function')
        if (acting.length) await Promise.allSettled(acting)
        return done.result
      }
    },
    runGrouped(work) {
      return uow.run(work)
    },
    afterCommit(fn) {
      const unit = context.getStore()
      if (unit === undefined) return false
      unit.committed.push(fn)
      return true
    },
    turn: () => undefined,
    inUnit: () => context.getStore() !== undefined,
  }

  const send = async <T extends Row>(sql: Sql, params: unknown[]): Promise<pg.QueryResult<T>> => {
    try {
      return await (typeof sql === 'string' ? executor().query<T>(sql, params) : executor().query<T>({ name: sql.name, text: sql.text, values: params }))
    } catch (err) {
      throw statementError(err, budgetNow())
    }
  }
  const query = async <T extends Row>(sql: Sql, params: unknown[] = []): Promise<T[]> => (await send<T>(sql, params)).rows
  return {
    pool,
    uow,
    budgeted: (work) => (budgetPool ? expensive.run(true, work) : work()),
    poolStats: () =>
      [
        ['requests', pool],
        ['expensive', budgetPool],
      ]
        .filter((p): p is [string, pg.Pool] => p[1] !== undefined)
        .map(([name, p]) => ({ pool: name, total: p.totalCount, idle: p.idleCount, waiting: p.waitingCount })),
    query,
    async one<T extends Row>(sql: Sql, params: unknown[] = []): Promise<T | undefined> {
      return (await query<T>(sql, params))[0]
    },
    async value<T>(sql: Sql, params: unknown[] = []) {
      try {
        const r = await executor().query(typeof sql === 'string' ? { text: sql, values: params, rowMode: 'array' } : { name: sql.name, text: sql.text, values: params, rowMode: 'array' })
        return r.rows[0]?.[0] as T | undefined
      } catch (err) {
        throw statementError(err, budgetNow())
      }
    },
    async run(sql: Sql, params: unknown[] = []) {
      return (await send(sql, params)).rowCount ?? 0
    },
    close: async () => {
      await Promise.all([pool.end(), budgetPool?.end()])
    },
  }
}
