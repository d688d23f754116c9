// The unit of work and the asynchronous ports over one SQLite connection.
//
// Services see Promise-returning ports, so that a server database can stand behind them
// later. better-sqlite3 runs every statement synchronously on one connection, and an open
// transaction on it takes in whatever statement runs next, whoever runs it. So a unit of
// work here is one transaction at a time, known by its async context: while it is open, a
// port called from any other context waits for it to end before it touches the connection.
import { AsyncLocalStorage } from 'node:async_hooks'
import type { DB } from './index.js'

/** Every method of `T`, answering through a Promise. */
export type Async<T> = { [K in keyof T]: T[K] extends (...args: infer A) => infer R ? (...args: A) => Promise<Awaited<R>> : never }

export interface SqliteUnitOfWork {
  /**
   * Runs `work` in one transaction: committed when it resolves, rolled back when it
   * throws. A unit of work opened inside another joins it. `work` reaches the database only
   * through ports (no network or file waits inside: the connection is held meanwhile).
   */
  run<T>(work: () => Promise<T>): Promise<T>
  /** Resolves when the caller may use the connection: at once, unless another context's unit of work is open. */
  turn(): Promise<void> | undefined
  /**
   * Runs `fn` once the caller's unit of work has committed (never, if it rolls back), and
   * answers true; answers false when the caller is in no unit of work.
   */
  afterCommit(fn: () => void): boolean
}

interface Open {
  done: Promise<void>
  committed: (() => void)[]
}

export function sqliteUnitOfWork(db: DB): SqliteUnitOfWork {
  const context = new AsyncLocalStorage<Open>()
  let open: Open | null = null

  const turn = (): Promise<void> | undefined => {
    if (open === null || context.getStore() === open) return undefined
    return waitForTurn()
  }
  async function waitForTurn(): Promise<void> {
    while (open !== null && context.getStore() !== open) await open.done
  }

  return {
    turn,
    afterCommit(fn) {
      const unit = context.getStore()
      if (unit === undefined || unit !== open) return false
      unit.committed.push(fn)
      return true
    },
    async run<T>(work: () => Promise<T>): Promise<T> {
      if (open !== null && context.getStore() === open) return work()
      // Checked and taken with no await in between: two units started in the same turn
      // would otherwise both find none open and both begin.
      for (;;) {
        while (open !== null) await open.done
        if (!db.inTransaction) break
        // A transaction not of a unit (a bulk load holding the connection) is waited out:
        // beginning inside it fails, and even the attempt reads every attached file's
        // schema inside it, locking files another connection is writing.
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
      let finish!: () => void
      const unit: Open = { done: new Promise<void>((resolve) => (finish = resolve)), committed: [] }
      open = unit
      // Work that waits for the network or a file lets timers and other requests run while
      // the transaction is open, and their statements would join it: refused (rolled back).
      let waited = false
      const tick = setImmediate(() => (waited = true))
      try {
        db.exec('BEGIN IMMEDIATE')
        try {
          const result = await context.run(unit, work)
          if (waited) throw new Error('a unit of work waited for I/O while its transaction was open')
          db.exec('COMMIT')
          for (const fn of unit.committed) fn()
          return result
        } catch (err) {
          if (db.inTransaction) db.exec('ROLLBACK')
          throw err
        }
      } finally {
        clearImmediate(tick)
        open = null
        // Tracking the async context hooks every promise of the process while it is on:
        // it is on only while a unit is open (the next unit turns it on again).
        context.disable()
        finish()
      }
    },
  }
}

/**
 * The port over a synchronous repository: each method waits for its turn (see above), then
 * runs the SQLite work at once. Only functions are carried over.
 */
export function asyncPort<T extends object>(repo: T, uow: SqliteUnitOfWork): Async<T> {
  const port: Record<string, unknown> = {}
  for (const [name, fn] of Object.entries(repo)) {
    if (typeof fn !== 'function') continue
    port[name] = (...args: unknown[]) => {
      const wait = uow.turn()
      if (wait !== undefined) return wait.then(() => fn.apply(repo, args))
      // At once, in the caller's turn: the statement runs where the caller put it.
      try {
        return Promise.resolve(fn.apply(repo, args))
      } catch (err) {
        return Promise.reject(err)
      }
    }
  }
  return port as Async<T>
}
