// WAL checkpoints in a worker thread on a connection of its own, instead of inside whichever
// commit crosses SQLite's automatic checkpoint: that commit copied up to 40 MB of WAL back
// into the database and synced it on the main thread, holding up every request meanwhile.
// A PASSIVE checkpoint takes no lock that writers or readers wait for, so requests go on
// while it copies; RESTART (and TRUNCATE) hold the writer's lock, so they run only right
// after a PASSIVE one that left little to copy, and never wait for anyone (busy_timeout 0).
// In a burst the server's connection writes nearly all the time and the thread seldom gets
// the writer's lock: then that connection, between two of its transactions, copies the
// little the thread left (checkpointHere), and its next transaction writes the WAL again
// from its start (SQLite restarts a WAL that is all copied), which keeps the WAL bounded.
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import { AUTO_CHECKPOINT_PAGES, type DB } from './index.js'

const driver = createRequire(import.meta.url).resolve('better-sqlite3')

/**
 * Gives this connection its own checkpoints in its commits again (true), or leaves them to
 * the thread (false) but for a WAL past `restartBytes`: then the commit that crosses it copies
 * what the thread has not copied yet (little: the thread keeps up, see THREAD), and the next
 * write starts the WAL again from its start. A writer that never lets go of the writer's lock
 * between two transactions (a long synchronous run of them) keeps the thread from restarting
 * the WAL and gives it no turn of the event loop to help in; without this the WAL grew
 * without end under a sustained burst (1.7 GB).
 */
export function checkpointsOnCommit(db: DB, on: boolean, restartBytes = 0): void {
  if (!db.open) return
  const pageSize = db.pragma('page_size', { simple: true }) as number
  db.pragma(`wal_autocheckpoint = ${on ? AUTO_CHECKPOINT_PAGES : Math.ceil(restartBytes / pageSize)}`)
}

/**
 * A PASSIVE checkpoint on this connection, between its transactions (never inside one):
 * what the thread left to copy when a write kept it from restarting the WAL. Answers
 * whether all of the WAL is copied now (then the next write starts it again from its start).
 */
export function checkpointHere(db: DB): boolean {
  if (!db.open || db.inTransaction) return false
  const [r] = db.pragma('wal_checkpoint(PASSIVE)') as { busy: number; log: number; checkpointed: number }[]
  return r.busy === 0 && r.log === r.checkpointed
}

export interface CheckpointOptions {
  /** Milliseconds between checkpoints. */
  intervalMs: number
  /** A WAL holding more than this is restarted (written again from its start) once it is checkpointed. */
  restartBytes: number
  /** A WAL file larger than this is truncated to nothing once it is checkpointed (the connection's journal_size_limit). */
  truncateBytes: number
}

/** One checkpoint's outcome, as the thread reports it. */
export interface CheckpointDone {
  /** The last mode run: PASSIVE, or RESTART/TRUNCATE after it. */
  mode: 'PASSIVE' | 'RESTART' | 'TRUNCATE'
  /** How long the thread took for it (all modes run in this turn). */
  ms: number
  /** Frames in the WAL, and how many of them are in the database now (SQLite's answer). */
  log: number
  checkpointed: number
  /** Whether the last mode was kept from finishing (a reader, or a write, in the way). */
  busy: boolean
  /** The WAL is to be restarted and a write kept the thread from it: the writing connection is to copy the rest (checkpointHere). */
  help: boolean
  /** The WAL file's size before the turn. */
  walBytes: number
}

// CommonJS run by the worker (as db/integrity.ts): the driver is required by its path.
const THREAD = `
const fs = require('node:fs')
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const { file, intervalMs, restartBytes, truncateBytes } = workerData
const db = new Database(file, { fileMustExist: true })
db.pragma('busy_timeout = 0')
// FULL: the WAL is synced before its frames are copied, the database after.
db.pragma('synchronous = FULL')
// Reads what it copies once: a small page cache does.
db.pragma('cache_size = -1024')
const pageSize = db.pragma('page_size', { simple: true })
const walSize = () => { try { return fs.statSync(file + '-wal').size } catch { return 0 } }
const run = (mode) => {
  const r = db.pragma('wal_checkpoint(' + mode + ')')[0]
  return { busy: r.busy === 1, log: r.log, checkpointed: r.checkpointed }
}
let timer
let stopping = false
// The WAL's frames at the last turn: a WAL that grew since is being written now. Then the next
// turn follows at once rather than after intervalMs, so that what is left to copy when the
// writer's commit restarts the WAL past restartBytes (checkpointsOnCommit) stays about one
// turn's writes; past restartBytes the turns leave the checkpoint lock free for that commit
// (a checkpoint that finds it taken does nothing) a few milliseconds at a time.
let lastLog = 0
const turn = () => {
  timer = undefined
  if (stopping) return
  try {
    const t0 = performance.now()
    const walBytes = walSize()
    let mode = 'PASSIVE'
    let r = run(mode)
    let help = false
    // Restarted once everything is copied (no reader held a frame back): a second PASSIVE
    // one copies what was written during the first, so that the writer's lock is held for
    // little more than a sync.
    if (!r.busy && r.log > 0 && r.checkpointed === r.log && r.log * pageSize >= restartBytes) {
      r = run(mode)
      mode = walBytes > truncateBytes ? 'TRUNCATE' : 'RESTART'
      r = run(mode)
      help = r.busy
    }
    if (r.log > 0) parentPort.postMessage({ mode, ms: performance.now() - t0, walBytes, help, ...r })
    const growing = r.log !== lastLog
    lastLog = r.log
    if (help) {
      // No checkpoint of this thread may hold the lock while the other connection copies the
      // rest: the next turn waits for its answer ('helped'), or 50 ms at most (a writer that
      // gives the event loop no turn restarts the WAL in its own commit instead).
      timer = setTimeout(turn, Math.min(intervalMs, 50))
      return
    }
    if (growing && r.log * pageSize >= restartBytes) {
      timer = setTimeout(turn, Math.min(intervalMs, 10))
      return
    }
    if (growing && r.log * pageSize >= restartBytes / 4) {
      timer = setTimeout(turn, 1)
      return
    }
  } catch (err) {
    // SQLITE_BUSY (another process checkpoints) or a locked file: the next turn tries again.
    parentPort.postMessage({ error: String(err && err.message || err) })
  }
  timer = setTimeout(turn, intervalMs)
}
parentPort.on('message', (m) => {
  if (m === 'helped' && !stopping) {
    clearTimeout(timer)
    timer = setTimeout(turn, intervalMs)
    return
  }
  if (m !== 'stop') return
  stopping = true
  clearTimeout(timer)
  db.close()
  parentPort.close()
})
turn()
`

export interface CheckpointThread {
  /** Says that the rest the thread asked for (`help`) is copied: its next turn follows. */
  helped(): void
  /** Stops after the checkpoint in hand (if any) and closes the thread's connection. */
  stop(): Promise<void>
}

/**
 * Starts the checkpointing thread on the database `file` (in WAL mode, migrated). `done` is
 * called with each checkpoint that found frames in the WAL, `failed` with a checkpoint's
 * error (the next one is tried as planned), `exited` when the thread ends without being stopped.
 */
export function startCheckpointThread(file: string, opts: CheckpointOptions, on: { done(c: CheckpointDone): void; failed(message: string): void; exited(reason: string): void }): CheckpointThread {
  // A small heap: the thread runs pragmas and holds no data.
  const worker = new Worker(THREAD, {
    eval: true,
    workerData: { file, driver, ...opts },
    resourceLimits: { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 16 },
  })
  worker.unref()
  let stopping = false
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
  worker.on('message', (m: CheckpointDone | { error: string }) => {
    if ('error' in m) on.failed(m.error)
    else on.done(m)
  })
  worker.on('error', (err) => {
    if (!stopping) on.exited(err.message)
  })
  worker.once('exit', (code) => {
    if (!stopping) on.exited(`exit code ${code}`)
  })
  return {
    helped() {
      if (!stopping) worker.postMessage('helped')
    },
    async stop() {
      if (stopping) return exited
      stopping = true
      worker.postMessage('stop')
      // A checkpoint in hand ends first; one that hangs (a stuck file system) is not waited for.
      const bound = setTimeout(() => void worker.terminate(), 5000)
      await exited
      clearTimeout(bound)
    },
  }
}
