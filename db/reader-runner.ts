// A reader thread's runner (lib/reader-thread.ts): a read-only connection of its own (WAL lets
// it read while the server's connection writes) and its tasks, each run under a time budget:
// the deadline extension (db/native/deadline.c) interrupts the statement when it passes, and
// the thread stays usable.
import Database from 'better-sqlite3'
import { registerMatchFunctions } from './match.js'

export interface ReaderSetup {
  file: string
  cacheMb: number
  /** The compiled deadline extension, or null when it could not be built (a read past its budget then runs to its end). */
  extension: string | null
  /** The pool's group of connections, interrupted together when it closes (db/native/deadline.c). */
  group?: number
}

export interface ReadTask {
  name: string
  args: unknown[]
  budgetMs: number
}

export type ReadOutcome = { ok: true; value: unknown; ms: number } | { ok: false; interrupted: true; ms: number }

/** A thread's runner over `tasks` made on its read-only connection (exported for tests' own tasks). */
export function readerRunner(setup: ReaderSetup, makeTasks: (db: Database.Database) => object): (task: ReadTask) => ReadOutcome {
  const db = new Database(setup.file, { readonly: true, fileMustExist: true })
  db.pragma(`cache_size = ${-Math.round(setup.cacheMb * 1024)}`)
  // The SQL functions the server's connection has (openDatabase, db/event-engine/event-queries.ts), which its statements use.
  registerMatchFunctions(db)
  let arm: ((ms: number) => void) | null = null
  if (setup.extension) {
    db.loadExtension(setup.extension) // entry point from the name: sqlite3_deadline_init
    if (setup.group) db.prepare('SELECT prime_deadline_group(?)').get(setup.group)
    const deadline = db.prepare<[number], number>('SELECT prime_deadline(?)').pluck()
    arm = (ms) => void deadline.get(ms)
  }
  const tasks = makeTasks(db) as Record<string, (...args: unknown[]) => unknown>
  return (task) => {
    const t0 = performance.now()
    arm?.(task.budgetMs)
    try {
      const value = tasks[task.name](...task.args)
      return { ok: true, value, ms: performance.now() - t0 }
    } catch (err) {
      if ((err as { code?: string }).code === 'SQLITE_INTERRUPT') return { ok: false, interrupted: true, ms: performance.now() - t0 }
      throw err
    } finally {
      arm?.(0)
    }
  }
}
