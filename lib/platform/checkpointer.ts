// The WAL checkpoints of the server's database, off the request path: the server's
// connection checkpoints in its commits only once the WAL passes the restart size
// (checkpointsOnCommit), a worker thread on a connection of its own does the rest on a timer
// (db/checkpoints.ts). The thread starts once
// the WAL has grown past what SQLite would have let it grow to by itself (4 MB), so a
// server that hardly writes never starts it; on a database of a fleet's size it starts at
// once: there, the first minute's writes (a license change activating thousands of agents,
// say) can pass the restart size between two looks at the WAL, and the commit that passes
// it would then copy all of it on the event loop (370 ms at 100,000 agents).
import fs from 'node:fs'
import { checkpointHere, checkpointsOnCommit, startCheckpointThread, type CheckpointDone, type CheckpointThread } from '../../db/checkpoints.js'
import type { DB } from '../../db/index.js'
import type { Loop } from './loops.js'

/** SQLite's own automatic checkpoint size (1,000 pages of 4 KiB): below it, nothing is worth a thread. */
const START_BYTES = 4 * 1024 * 1024
/** A database file at least this large at start has its thread at once. */
const START_AT_ONCE_BYTES = 64 * 1024 * 1024
/** How often the WAL's size is looked at until the thread starts (ms, at most). */
const WATCH_MS = 100
/** The server connection's journal_size_limit (db/index.ts): a WAL file larger than this is truncated. */
const TRUNCATE_BYTES = 64 * 1024 * 1024

export interface CheckpointerSettings {
  /** Checkpoints in a worker thread (false: in the commits of the server's connection, as SQLite does by itself). */
  thread: boolean
  intervalMs: number
  restartBytes: number
  /** A database file at least this large when the loop starts has its thread at once (64 MB). */
  startAtOnceBytes?: number
}

interface CheckpointLog {
  info(details: object, message: string): void
  warn(details: object, message: string): void
  error(details: object, message: string): void
}

/** What the loop reports in the loop statistics (lib/log.ts), since the last report. */
type Totals = {
  /** Checkpoints of the thread, those that restarted the WAL, the longest (ms, off the event loop). */
  checkpoints: number
  restarts: number
  maxMs: number
  /** The rest copied on the event loop after a write kept the thread from restarting, and the longest (ms). */
  helped: number
  helpMaxMs: number
  walMaxMb: number
}

/**
 * The checkpointing loop of the connection `db` on `file`. Each process that writes the
 * file with checkpoints left to a thread must run one, so it is not a singleton; closing
 * stops the thread after the checkpoint in hand and gives the connection its own
 * checkpoints back (the last connection to close checkpoints the whole WAL).
 */
export function checkpointerLoop(deps: { db: DB; file: string; settings: CheckpointerSettings; log: CheckpointLog }): Loop {
  const { db, file, settings, log } = deps
  let timer: NodeJS.Timeout | undefined
  let thread: CheckpointThread | undefined
  let failed = false
  const fresh = (): Totals => ({ checkpoints: 0, restarts: 0, maxMs: 0, helped: 0, helpMaxMs: 0, walMaxMb: 0 })
  let totals = fresh()
  const sizeOf = (f: string) => {
    try {
      return fs.statSync(f).size
    } catch {
      return 0
    }
  }
  const walBytes = () => sizeOf(`${file}-wal`)
  const fileBytes = () => sizeOf(file)
  const done = (c: CheckpointDone) => {
    totals.checkpoints++
    if (c.mode !== 'PASSIVE' && !c.busy) totals.restarts++
    totals.maxMs = Math.max(totals.maxMs, Math.round(c.ms * 10) / 10)
    totals.walMaxMb = Math.max(totals.walMaxMb, Math.round(c.walBytes / 104857.6) / 10)
    if (c.help && thread) {
      // A message is handled between two transactions: what the thread left is copied here
      // (it copied the rest a moment ago), and the next write restarts the WAL.
      const t0 = performance.now()
      checkpointHere(db)
      thread.helped()
      totals.helped++
      totals.helpMaxMs = Math.max(totals.helpMaxMs, Math.round((performance.now() - t0) * 10) / 10)
    }
  }
  const start = () => {
    log.info({ walMb: Math.round(walBytes() / 1048576) }, 'WAL checkpoints: started the checkpointing thread')
    thread = startCheckpointThread(
      file,
      { intervalMs: settings.intervalMs, restartBytes: settings.restartBytes, truncateBytes: TRUNCATE_BYTES },
      {
        done,
        failed: (message) => log.warn({ error: message }, 'a WAL checkpoint failed'),
        exited: (reason) => {
          // Not stopped by the loop: the connection checkpoints in its commits again, as
          // before, rather than letting the WAL grow without end.
          failed = true
          thread = undefined
          checkpointsOnCommit(db, true)
          log.error({ reason }, 'the WAL checkpointing thread ended: checkpoints are made in commits again')
        },
      },
    )
  }
  return {
    name: 'wal-checkpoint',
    singleton: false,
    start() {
      if (!settings.thread || !db.open) return
      checkpointsOnCommit(db, false, settings.restartBytes)
      if (fileBytes() >= (settings.startAtOnceBytes ?? START_AT_ONCE_BYTES)) return start()
      timer = setInterval(
        () => {
          if (thread || failed) return clearInterval(timer)
          if (walBytes() >= START_BYTES) start()
        },
        Math.min(settings.intervalMs, WATCH_MS),
      ).unref()
    },
    async stop() {
      clearInterval(timer)
      timer = undefined
      const t = thread
      thread = undefined
      await t?.stop()
      checkpointsOnCommit(db, true)
    },
    stats() {
      if (!thread && totals.checkpoints === 0) return undefined
      const t = totals
      totals = fresh()
      return { ...t }
    },
  }
}
