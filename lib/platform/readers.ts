// Reads that can be expensive run off the event loop: a small pool of reader threads (piscina),
// each with a read-only connection of its own (lib/reader-thread.ts), while the event loop
// keeps answering probes, check-ins, feeds and small reads. Each read has:
// - a time budget (PRIME_READ_DEADLINE_SECONDS): the statement is interrupted inside SQLite
//   when it passes (db/native/deadline.c) and the caller gets a 422 naming the budget;
// - a place in a bounded queue (PRIME_READER_QUEUE): when it is full, or a read waited a whole
//   budget for a thread, a 503 with Retry-After;
// - a share per credential (PRIME_EXPENSIVE_PER_CREDENTIAL reads running or waiting): one
//   client cannot take every thread; beyond it, a 429 with Retry-After.
// The credential is the request's, carried by `readerScope` (set by the request pipeline for
// the operations the contract marks `x-expensive`), so the ports stay free of requests.
import { AsyncLocalStorage } from 'node:async_hooks'
import { randomInt } from 'node:crypto'
import fs from 'node:fs'
import Database from 'better-sqlite3'
import { fileURLToPath } from 'node:url'
import { Piscina } from 'piscina'
import type { ReadTask, ReadOutcome, ReaderSetup } from '../../db/reader-runner.js'
import { problem } from '../errors.js'

export interface ReaderSettings {
  /** Reader threads; 0 runs the reads on the event loop (no budget can stop them there). */
  threads: number
  /** Reads that may wait for a thread. */
  queue: number
  /** A read's budget once it runs, and the longest it may wait for a thread. */
  deadlineMs: number
  /** Reads one credential may have running or waiting. */
  perCredential: number
}

/** The credential a read is counted against (set around a request's handler). */
export const readerScope = new AsyncLocalStorage<string>()

export interface ReaderStats {
  threads: number
  running: number
  waiting: number
  done: number
  interrupted: number
  refusedBusy: number
  refusedCredential: number
  /** The longest a read ran in a thread, and waited for one (ms). */
  longestRunMs: number
  longestWaitMs: number
}

type Tasks = Record<string, (...args: any[]) => unknown>

export interface Readers<T extends Tasks = Tasks> {
  run<K extends keyof T & string>(name: K, args: Parameters<T[K]>): Promise<ReturnType<T[K]>>
  stats(): ReaderStats
  close(): Promise<void>
}

// Compiled by scripts/build-if-stale.mjs from db/native/deadline.c (beside dist/ in a source tree).
const EXTENSION = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../../dist/native/deadline.so' : '../../native/deadline.so', import.meta.url))
// A read whose thread does not answer this long after its budget (no extension, or a step
// outside SQLite) is answered 422 while the thread goes on; its slot is freed only when the
// thread answers. A thread is never terminated in a statement: better-sqlite3 then throwing
// into the ending thread aborts the process. The budget itself is kept in the thread, from
// the read's start; this wait also covers a thread's own start.
const graceMs = (budgetMs: number) => budgetMs + 30_000
const RETRY_AFTER = { 'retry-after': '1' }

/** Interrupts the running reads of a pool's threads, and makes its later ones stop at once. */
function interruptGroup(extension: string, group: number): void {
  const db = new Database(':memory:')
  try {
    db.loadExtension(extension)
    db.prepare('SELECT prime_interrupt_group(?)').get(group)
  } finally {
    db.close()
  }
}

/** Whether reads can be stopped inside SQLite here. */
export const deadlineExtension = (): string | null => (fs.existsSync(EXTENSION) ? EXTENSION : null)

export function readerPool<T extends Tasks>(opts: {
  file: string
  cacheMb: number
  settings: ReaderSettings
  /** The threads' module: its default export runs a task (db/reader-runner.ts). */
  thread: string
  /** The same tasks on the server's connection, for PRIME_READER_THREADS=0. */
  local: T
  onWarn?: (msg: string) => void
}): Readers<T> {
  const { settings, local } = opts
  const extension = deadlineExtension()
  // This pool's connections, for interrupting them all at once when it closes (db/native/deadline.c).
  const group = randomInt(1, 2 ** 47)
  if (settings.threads > 0 && !extension)
    opts.onWarn?.('the read deadline extension is not built (dist/native/deadline.so): a read past its budget is answered, but its thread runs on until SQLite finishes')
  const pool =
    settings.threads > 0
      ? new Piscina({
          filename: opts.thread,
          minThreads: 0,
          maxThreads: settings.threads,
          // The queue is ours (below): piscina is handed a read only when one of our slots is
          // free; its own few places cover the moment between a thread's answer and its being
          // counted idle again.
          maxQueue: settings.threads,
          idleTimeout: 60_000,
          // Below the event loop's thread: while readers are busy, requests still get a core first.
          niceIncrement: 10,
          workerData: { file: opts.file, cacheMb: opts.cacheMb, extension, group } satisfies ReaderSetup,
          // A compiled module needs none of the process's loaders (a test runner's TypeScript
          // loader took seconds of CPU at every thread's start).
          ...(opts.thread.endsWith('.js') ? { execArgv: [] } : {}),
        })
      : null
  const capacity = Math.max(1, settings.threads)
  const perKey = new Map<string, number>()
  const waiting: { start: () => void; fail: (err: Error) => void; since: number }[] = []
  let running = 0
  const stats = { done: 0, interrupted: 0, refusedBusy: 0, refusedCredential: 0, longestRunMs: 0, longestWaitMs: 0 }
  const budgetS = Math.round(settings.deadlineMs / 1000)
  let closing = false

  const costly = () =>
    problem('query-too-costly', `the query ran past its time budget of ${budgetS} s and was stopped: narrow it (a filter, a longer search text, a smaller page) or ask for an export`)
  const busy = (why: string) => problem('readers-busy', `${why}: try again in a moment`, { headers: RETRY_AFTER })

  /** Waits for a thread (FIFO), or refuses when the queue is full or the wait outlasts a budget. */
  function slot(): Promise<number> {
    if (running < capacity) {
      running++
      return Promise.resolve(0)
    }
    if (waiting.length >= settings.queue) {
      stats.refusedBusy++
      return Promise.reject(busy(`every reader thread is busy and ${settings.queue} expensive reads wait`))
    }
    return new Promise((resolve, reject) => {
      const entry = {
        since: performance.now(),
        start: () => {
          clearTimeout(timer)
          running++
          resolve(performance.now() - entry.since)
        },
        fail: (err: Error) => {
          clearTimeout(timer)
          reject(err)
        },
      }
      const timer = setTimeout(() => {
        const i = waiting.indexOf(entry)
        if (i >= 0) waiting.splice(i, 1)
        stats.refusedBusy++
        reject(busy(`no reader thread was free within ${budgetS} s`))
      }, settings.deadlineMs)
      waiting.push(entry)
    })
  }
  const release = () => {
    running--
    waiting.shift()?.start()
  }

  /** Reads handed to a thread and not answered yet: closing waits for them. */
  const inFlight = new Set<Promise<unknown>>()

  /** Runs a task in a thread; `done` is called once the thread has answered (the slot is then free). */
  async function inThread(task: ReadTask, done: () => void): Promise<unknown> {
    const run = pool!.run(task) as Promise<ReadOutcome>
    const settled = run.then(
      () => undefined,
      () => undefined,
    )
    inFlight.add(settled)
    void settled.then(() => {
      inFlight.delete(settled)
      done()
    })
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), graceMs(task.budgetMs))
    })
    try {
      const out = await Promise.race([run, late])
      if (out === 'late') {
        stats.interrupted++
        throw costly()
      }
      stats.longestRunMs = Math.max(stats.longestRunMs, out.ms)
      if (!out.ok) {
        stats.interrupted++
        // Stopped by the shutdown rather than by its budget: another node can answer it.
        throw closing ? problem('not-ready', 'the server is shutting down') : costly()
      }
      return out.value
    } catch (err) {
      if (closing && !(err instanceof Error && 'code' in err && err.code === 'query-too-costly')) throw problem('not-ready', 'the server is shutting down')
      throw err
    } finally {
      clearTimeout(timer)
    }
  }

  /** Counts an expensive read of `key` (a credential) until the returned release is called, or refuses it (429) past the credential's share. */
  function claim(key: string): () => void {
    const mine = perKey.get(key) ?? 0
    if (mine >= settings.perCredential) {
      stats.refusedCredential++
      throw problem(
        'expensive-in-flight',
        `this credential already has ${mine} expensive read${mine === 1 ? '' : 's'} running or waiting (at most ${settings.perCredential}): wait for it to be answered`,
        {
          headers: RETRY_AFTER,
        },
      )
    }
    perKey.set(key, mine + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = (perKey.get(key) ?? 1) - 1
      if (left > 0) perKey.set(key, left)
      else perKey.delete(key)
    }
  }

  return {
    async run(name, args) {
      if (closing) throw problem('not-ready', 'the server is shutting down')
      // Reads asked outside a request (a report's run) have no share: the queue bounds them.
      const key = readerScope.getStore()
      const unclaim = key === undefined ? undefined : claim(key)
      try {
        const waited = await slot()
        stats.longestWaitMs = Math.max(stats.longestWaitMs, waited)
        if (!pool) {
          try {
            return local[name](...args) as never
          } finally {
            stats.done++
            release()
          }
        }
        return (await inThread({ name, args, budgetMs: settings.deadlineMs }, () => {
          stats.done++
          release()
        })) as never
      } finally {
        unclaim?.()
      }
    },
    stats: () => ({ threads: settings.threads, running, waiting: waiting.length, ...stats }),
    async close() {
      closing = true
      for (const w of waiting.splice(0)) w.fail(problem('not-ready', 'the server is shutting down'))
      // A shutdown does not wait out the reads' budgets: their statements are interrupted
      // inside SQLite now (their callers get 503 not-ready), and the reads are waited for, so
      // that no thread is terminated in a statement. Without the extension they end within
      // their budget at worst.
      if (pool && extension) interruptGroup(extension, group)
      await Promise.all(inFlight)
      await pool?.destroy()
    },
  }
}
