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
   * The same as `run`, but units started close together share one transaction (a group
   * commit): each runs alone in a savepoint (one that throws is rolled back alone), and
   * each caller's promise settles only after the shared COMMIT, so an answer never
   * precedes durability. The group commits once nothing more is ready to join (the event
   * loop's next check phase), or at GROUP_UNITS units, or GROUP_MS after it began.
   */
  runGrouped<T>(work: () => Promise<T>): Promise<T>
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

/** Units sharing one transaction (runGrouped). */
interface Group {
  /** Resolves when the group's transaction has ended, committed or not: others wait for it. */
  done: Promise<void>
  finish: () => void
  /** Settles with the COMMIT: its units' callers are answered then. */
  committed: Promise<void>
  settle: (err?: unknown) => void
  units: number
  startedMs: number
  closing: boolean
}

/** Units per group at most, and how long a group may gather units (ms). */
const GROUP_UNITS = 64
const GROUP_MS = 2

export function sqliteUnitOfWork(db: DB): SqliteUnitOfWork {
  const context = new AsyncLocalStorage<Open>()
  let open: Open | null = null
  // A group's transaction stays open between its units: other contexts wait for its end.
  let group: Group | null = null

  const turn = (): Promise<void> | undefined => {
    if (open !== null ? context.getStore() === open : group === null) return undefined
    return waitForTurn()
  }
  async function waitForTurn(): Promise<void> {
    for (;;) {
      if (open !== null) {
        if (context.getStore() === open) return
        await open.done
      } else if (group !== null) await group.done
      else return
    }
  }
  const pause = () => new Promise((resolve) => setTimeout(resolve, 5))

  /**
   * Runs `work` as the open unit in the transaction the caller began, then `end` (COMMIT,
   * or RELEASE of a group's savepoint); a unit that waited for I/O is refused, and `undo`
   * runs on any error.
   */
  async function runUnit<T>(work: () => Promise<T>, end: string, undo: () => void): Promise<{ result: T; unit: Open }> {
    let finish!: () => void
    const unit: Open = { done: new Promise<void>((resolve) => (finish = resolve)), committed: [] }
    open = unit
    // Work that waits for the network or a file lets timers and other requests run while
    // the transaction is open, and their statements would join it: refused (rolled back).
    let waited = false
    const tick = setImmediate(() => (waited = true))
    try {
      try {
        const result = await context.run(unit, work)
        if (waited) throw new Error('a unit of work waited for I/O while its transaction was open')
        db.exec(end)
        return { result, unit }
      } catch (err) {
        undo()
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
  }

  function newGroup(): Group {
    let finish!: () => void
    let settle!: (err?: unknown) => void
    const committed = new Promise<void>((resolve, reject) => (settle = (err) => (err === undefined ? resolve() : reject(err))))
    // Every unit of the group may have failed alone: nobody waits for the outcome then.
    committed.catch(() => {})
    const g: Group = { done: new Promise<void>((resolve) => (finish = resolve)), finish, committed, settle, units: 0, startedMs: performance.now(), closing: false }
    return g
  }

  function closeGroup(g: Group): void {
    if (g.closing) return
    // A unit of it still running (one waiting for I/O, about to be refused): after it.
    if (open !== null) {
      void open.done.then(() => closeGroup(g))
      return
    }
    g.closing = true
    try {
      db.exec('COMMIT')
      g.settle()
    } catch (err) {
      if (db.inTransaction) db.exec('ROLLBACK')
      g.settle(err)
    } finally {
      group = null
      g.finish()
    }
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
        if (open !== null) await open.done
        else if (group !== null) await group.done
        // A transaction not of a unit (a bulk load holding the connection) is waited out:
        // beginning inside it fails, and even the attempt reads every attached file's
        // schema inside it, locking files another connection is writing.
        else if (db.inTransaction) await pause()
        else break
      }
      db.exec('BEGIN IMMEDIATE')
      const { result, unit } = await runUnit(work, 'COMMIT', () => {
        if (db.inTransaction) db.exec('ROLLBACK')
      })
      for (const fn of unit.committed) fn()
      return result
    },
    async runGrouped<T>(work: () => Promise<T>): Promise<T> {
      if (open !== null && context.getStore() === open) return work()
      for (;;) {
        if (open !== null) await open.done
        else if (group !== null && group.closing) await group.done
        else if (group === null && db.inTransaction) await pause()
        else break
      }
      if (group === null) {
        db.exec('BEGIN IMMEDIATE')
        const g = newGroup()
        group = g
        // Units that are ready join until the event loop's check phase.
        setImmediate(() => closeGroup(g))
      }
      const g = group
      g.units++
      db.exec('SAVEPOINT grouped_unit')
      let outcome: { result: T; unit: Open }
      try {
        outcome = await runUnit(work, 'RELEASE grouped_unit', () => {
          // An error that ended the whole transaction leaves nothing to roll back to: the
          // group's COMMIT then fails and its other units' callers are told.
          if (db.inTransaction) db.exec('ROLLBACK TO grouped_unit; RELEASE grouped_unit')
        })
      } finally {
        if (g.units >= GROUP_UNITS || performance.now() - g.startedMs >= GROUP_MS) closeGroup(g)
      }
      await g.committed
      for (const fn of outcome.unit.committed) fn()
      return outcome.result
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
