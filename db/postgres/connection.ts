// The PostgreSQL connection pool and its unit of work (PRIME_DATABASE_URL=postgres://…).
//
// A unit of work holds one client from the pool in a transaction for as long as its work
// runs; every query made in its async context goes to that client, and every other query
// to the pool. Nothing here is held by one process only: several nodes share the database.
import { AsyncLocalStorage } from 'node:async_hooks'
import pg from 'pg'
import type { UnitOfWork } from '../../lib/platform/ports.js'

/** A row as node-postgres answers it. */
export type Row = Record<string, unknown>

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
  committed: (() => void)[]
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
function statementError(err: unknown): unknown {
  return NUL_REFUSED.has((err as { code?: string }).code ?? '') ? new UnstorableText(err) : err
}

/** SQLSTATEs after which a whole unit of work may run again: serialization failure, deadlock. */
const RETRYABLE = new Set(['40001', '40P01'])
const ATTEMPTS = 3

export interface PgUnitOfWork extends UnitOfWork {
  /** The same as `run`: PostgreSQL commits concurrent transactions itself (no group commit to make). */
  runGrouped<T>(work: () => Promise<T>): Promise<T>
  /** Runs `fn` once the caller's unit of work has committed; false when the caller is in none. */
  afterCommit(fn: () => void): boolean
  /** Always undefined: a pool has no turn to wait for (kept for the ports' common shape). */
  turn(): undefined
  /** Whether the caller is inside a unit of work. */
  inUnit(): boolean
}

export interface Postgres {
  readonly pool: pg.Pool
  readonly uow: PgUnitOfWork
  /** The rows of `sql`, on the caller's unit of work's client when in one, else on the pool. */
  query<T extends Row = Row>(sql: string, params?: unknown[]): Promise<T[]>
  /** The first row, or undefined. */
  one<T extends Row = Row>(sql: string, params?: unknown[]): Promise<T | undefined>
  /** The first column of the first row, or undefined. */
  value<T = unknown>(sql: string, params?: unknown[]): Promise<T | undefined>
  /** The number of rows the statement changed. */
  run(sql: string, params?: unknown[]): Promise<number>
  close(): Promise<void>
}

export interface PostgresOptions {
  /** Clients at most in the pool. */
  max?: number
  /** Name the server shows in pg_stat_activity. */
  applicationName?: string
}

export function connectPostgres(url: string, { max = 10, applicationName = 'prime-webui' }: PostgresOptions = {}): Postgres {
  // JIT compilation off: it pays for itself on long analytical queries, and added hundreds
  // of ms to counts and pages that run in tens.
  const pool = new pg.Pool({ connectionString: url, max, application_name: applicationName, types, options: '-c jit=off' })
  // An idle client whose connection broke (the server restarted) is dropped by the pool;
  // without a listener the error would end the process.
  pool.on('error', () => {})
  const context = new AsyncLocalStorage<Unit>()

  const executor = (): pg.Pool | pg.PoolClient => context.getStore()?.client ?? pool

  async function attempt<T>(work: () => Promise<T>): Promise<T> {
    const client = await pool.connect()
    const unit: Unit = { client, committed: [] }
    let broken: Error | undefined
    try {
      await client.query('BEGIN')
      const result = await context.run(unit, work)
      // A statement that failed inside the work (its error caught there) has aborted the
      // transaction: COMMIT then answers ROLLBACK, and nothing of the unit was written.
      const end = await client.query('COMMIT')
      if (end.command === 'ROLLBACK') throw new Error('the unit of work was rolled back: a statement in it failed')
      for (const fn of unit.committed) fn()
      return result
    } catch (err) {
      try {
        await client.query('ROLLBACK')
      } catch (rollbackErr) {
        // The connection is gone: it must not go back to the pool.
        broken = rollbackErr as Error
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
        try {
          return await attempt(work)
        } catch (err) {
          if (i >= ATTEMPTS || !RETRYABLE.has((err as { code?: string }).code ?? '')) throw err
        }
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

  const send = async <T extends Row>(sql: string, params: unknown[]): Promise<pg.QueryResult<T>> => {
    try {
      return await executor().query<T>(sql, params)
    } catch (err) {
      throw statementError(err)
    }
  }
  const query = async <T extends Row>(sql: string, params: unknown[] = []): Promise<T[]> => (await send<T>(sql, params)).rows
  return {
    pool,
    uow,
    query,
    async one<T extends Row>(sql: string, params: unknown[] = []): Promise<T | undefined> {
      return (await query<T>(sql, params))[0]
    },
    async value<T>(sql: string, params: unknown[] = []) {
      try {
        const r = await executor().query({ text: sql, values: params, rowMode: 'array' })
        return r.rows[0]?.[0] as T | undefined
      } catch (err) {
        throw statementError(err)
      }
    },
    async run(sql: string, params: unknown[] = []) {
      return (await send(sql, params)).rowCount ?? 0
    },
    close: () => pool.end(),
  }
}
