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
   * The same as `run`, but units that arrive in the same turn of the event loop share one
   * transaction (a group commit): they wait for the loop's next check phase, then run one
   * after another, each in a savepoint of its own (one that throws is rolled back alone),
   * and the group commits; every caller is answered only after that COMMIT, so an answer
   * never precedes durability. The transaction is open only while the units run, as for a
   * unit of `run`, so no statement of another callback can land in it.
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

/** A unit waiting for its group (runGrouped). */
interface Queued {
  work: () => Promise<unknown>
  resolve: (value: unknown) => void
  reject: (err: unknown) => void
}

/** Units per group at most. */
const GROUP_UNITS = 64
/**
 * Units (and groups) of one turn of the event loop run this long at most, counted from BEGIN
 * to COMMIT (at least one runs, however long). Units that find the connection free each
 * begin at once, so requests read in one poll phase (ten enrollments, say) would otherwise
 * run all their units in that turn: the next unit waits for a later turn (its timers and
 * poll phases run first).
 * A group commits once its units have used what is left, and the rest make the next group.
 */
const TURN_BUDGET_MS = 20

export function sqliteUnitOfWork(db: DB): SqliteUnitOfWork {
  const context = new AsyncLocalStorage<Open>()
  let open: Open | null = null
  // The transaction of a group while its units run one after another: other contexts wait for it.
  let group: { done: Promise<void> } | null = null
  // Grouped units waiting for the next check phase.
  const queue: Queued[] = []
  let drainScheduled = false

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
  // Units waiting for the connection. Were they all woken when it frees, each would begin
  // in the microtask that ended the one before it, and a burst of them (enrollments arriving
  // together) would hold the loop for all of them in one turn. One is woken at a time, in a
  // turn of the loop of its own (an immediate scheduled while immediates run waits for the
  // next turn), and the unit it begins wakes the next when it ends.
  const waiting: (() => void)[] = []
  let waking = false
  // Unit work (ms) in this turn of the loop; set back to 0 by an immediate. A unit woken
  // then begins in an immediate of its own, in the next turn, so the loop's timers and
  // poll phases still come between the turn that spent its budget and the next unit. (A
  // timer here cost each waiting unit at least 1 ms: 11-17% of the gateway's writes.)
  let spent = 0
  let resetting = false
  function count(ms: number): void {
    spent += ms
    if (resetting) return
    resetting = true
    setImmediate(() => {
      resetting = false
      spent = 0
      wakeNext()
    })
  }
  const overBudget = () => spent >= TURN_BUDGET_MS
  /** Resolves in a later turn of the loop than the one that spent its budget. */
  const nextTurn = () => new Promise<void>((resolve) => waiting.unshift(resolve))
  function wakeNext(): void {
    if (waking || waiting.length === 0 || overBudget()) return
    waking = true
    setImmediate(() => {
      waking = false
      // The turn may have spent its budget since: then the reset that starts the next wakes it.
      if (!overBudget()) waiting.shift()?.()
    })
  }

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
      if (group === null) wakeNext()
    }
  }

  const undoUnit = () => {
    // An error that ended the whole transaction (SQLite rolls back by itself on some) leaves
    // no savepoint: the group is lost, which drain() finds below.
    if (db.inTransaction) db.exec('ROLLBACK TO grouped_unit; RELEASE grouped_unit')
  }

  /** Runs the queued units as one group (at most GROUP_UNITS; the rest in the next). */
  async function drain(): Promise<void> {
    for (;;) {
      if (open !== null) await open.done
      else if (group !== null) await group.done
      else if (db.inTransaction) await pause()
      else if (overBudget()) await nextTurn()
      else break
    }
    // Taken with no await since the connection was found free (see run).
    drainScheduled = false
    const units = queue.splice(0, GROUP_UNITS)
    if (queue.length) schedule()
    if (units.length === 0) return
    let finish!: () => void
    group = { done: new Promise<void>((resolve) => (finish = resolve)) }
    const outcomes: ({ ok: true; result: unknown; unit: Open } | { ok: false; err: unknown })[] = []
    let lost: unknown
    const began = performance.now()
    try {
      db.exec('BEGIN IMMEDIATE')
      for (const u of units) {
        // A group of heavy units (first check-ins, each with new peripherals and events)
        // would hold the loop for all of them: it commits what ran once the turn's time is
        // spent, and the rest make the next group (a turn of the loop later).
        if (outcomes.length > 0 && spent + performance.now() - began >= TURN_BUDGET_MS) break
        db.exec('SAVEPOINT grouped_unit')
        try {
          outcomes.push({ ok: true, ...(await runUnit(u.work, 'RELEASE grouped_unit', undoUnit)) })
        } catch (err) {
          outcomes.push({ ok: false, err })
          if (!db.inTransaction) {
            // The transaction is gone with the units before this one: the group fails.
            lost = err
            break
          }
        }
      }
      if (lost === undefined) db.exec('COMMIT')
    } catch (err) {
      lost ??= err
    } finally {
      try {
        if (lost !== undefined && db.inTransaction) db.exec('ROLLBACK')
      } catch {
        // Nothing left to undo: the callers are told of the first error.
      }
      count(performance.now() - began)
      group = null
      finish()
      wakeNext()
    }
    const notRun: Queued[] = []
    for (const [i, u] of units.entries()) {
      const o = outcomes[i]
      if (o === undefined && outcomes.length > 0) {
        // Never ran (the group's time was spent, or it failed after others had run): it
        // goes with the next group, ahead of those that came after it.
        notRun.push(u)
      } else if (o === undefined) u.reject(lost)
      else if (!o.ok) u.reject(o.err)
      else if (lost !== undefined) u.reject(lost)
      else {
        try {
          for (const fn of o.unit.committed) fn()
          u.resolve(o.result)
        } catch (err) {
          u.reject(err)
        }
      }
    }
    if (notRun.length) {
      queue.unshift(...notRun)
      schedule()
    }
  }
  function schedule(): void {
    if (drainScheduled) return
    drainScheduled = true
    setImmediate(() => void drain())
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
      let first = true
      for (;;) {
        if (open !== null || group !== null || overBudget()) {
          // In line (the one that waited longest first): woken one at a time, see wakeNext.
          await new Promise<void>((resolve) => (first ? waiting.push(resolve) : waiting.unshift(resolve)))
          first = false
        }
        // A transaction not of a unit (a bulk load holding the connection) is waited out:
        // beginning inside it fails, and even the attempt reads every attached file's
        // schema inside it, locking files another connection is writing.
        else if (db.inTransaction) await pause()
        else break
      }
      const began = performance.now()
      db.exec('BEGIN IMMEDIATE')
      let ran: { result: T; unit: Open }
      try {
        ran = await runUnit(work, 'COMMIT', () => {
          if (db.inTransaction) db.exec('ROLLBACK')
        })
      } finally {
        count(performance.now() - began)
      }
      for (const fn of ran.unit.committed) fn()
      return ran.result
    },
    runGrouped<T>(work: () => Promise<T>): Promise<T> {
      if (open !== null && context.getStore() === open) return work()
      return new Promise<T>((resolve, reject) => {
        queue.push({ work, resolve: resolve as (value: unknown) => void, reject })
        schedule()
      })
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
