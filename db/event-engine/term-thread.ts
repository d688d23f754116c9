// A text term's documents through the trigram index's phrase query (or its candidates
// through the AND of its rarest trigrams), in a worker thread on a
// read-only connection of its own. A term whose trigrams are all common (a vendor's name:
// every trigram in hundreds of thousands of documents) reads millions of index entries: 30
// to 300 ms at 2.7 million documents, which on the server's connection held every request up
// for as long; the AND for a device's id read 60-110 ms of entries at 5 million events. The answer is the same on any connection: documents are only added, and the
// thread is asked for those up to the last the asker saw.
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

const driver = createRequire(import.meta.url).resolve('better-sqlite3')

// CommonJS run by the worker (as db/integrity.ts): the driver is required by its path.
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const db = new Database(workerData.file, { readonly: true, fileMustExist: true })
// The index's pages of the terms asked: a few MB (the server's connection keeps its own).
db.pragma('cache_size = -8192')
const fts = db.prepare('SELECT rowid FROM event_docs_fts WHERE event_docs_fts MATCH ? AND rowid > ? AND rowid <= ? ORDER BY rowid').pluck()
parentPort.on('message', (m) => {
  if (m === 'stop') {
    db.close()
    parentPort.close()
    return
  }
  try {
    const ids = Int32Array.from(fts.all(m.query, m.after, m.upTo))
    parentPort.postMessage({ id: m.id, ids }, [ids.buffer])
  } catch (err) {
    parentPort.postMessage({ id: m.id, error: String((err && err.message) || err) })
  }
})
`

export interface TermThread {
  /** The documents in (after, upTo] the phrase query `query` finds, ascending. Rejects when the thread cannot answer. */
  phrase(query: string, after: number, upTo: number): Promise<Int32Array>
  /** Stops the thread (if it ever started) and closes its connection. */
  stop(): Promise<void>
}

/** The thread for the database `file` (migrated, in WAL mode), started on the first question. */
export function termThread(file: string): TermThread {
  let worker: Worker | null = null
  let exited: Promise<void> = Promise.resolve()
  let next = 0
  let stopped = false
  const pending = new Map<number, { resolve(ids: Int32Array): void; reject(err: Error): void }>()
  const failAll = (why: string) => {
    for (const p of pending.values()) p.reject(new Error(why))
    pending.clear()
    worker = null
  }
  const start = (): Worker => {
    // A small heap: the thread holds one answer at a time.
    const w = new Worker(THREAD, { eval: true, workerData: { file, driver }, resourceLimits: { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 64 } })
    w.unref()
    exited = new Promise<void>((resolve) => w.once('exit', () => resolve()))
    w.on('message', (m: { id: number; ids?: Int32Array; error?: string }) => {
      const p = pending.get(m.id)
      if (!p) return
      pending.delete(m.id)
      if (m.ids) p.resolve(m.ids)
      else p.reject(new Error(m.error ?? 'no answer'))
    })
    // A thread that failed is started again by the next question.
    w.on('error', (err) => failAll(err.message))
    w.once('exit', (code) => failAll(`the term thread stopped (exit code ${code})`))
    return w
  }
  return {
    phrase(query, after, upTo) {
      if (stopped) return Promise.reject(new Error('the term thread is stopped'))
      worker ??= start()
      const id = next++
      const w = worker
      return new Promise<Int32Array>((resolve, reject) => {
        pending.set(id, { resolve, reject })
        w.postMessage({ id, query, after, upTo })
      })
    },
    async stop() {
      stopped = true
      if (!worker) return
      worker.postMessage('stop')
      // A query in hand ends first; one that hangs is not waited for.
      const w = worker
      const bound = setTimeout(() => void w.terminate(), 5000)
      await exited
      clearTimeout(bound)
    },
  }
}
