// SQLite's quick check reads the whole file: 36 s for a database of 5 million events. On
// the server's own connection that held every request up for as long, so it runs in a
// worker thread on a read-only connection of its own (in WAL mode a reader blocks no one).
import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

const driver = createRequire(import.meta.url).resolve('better-sqlite3')

// At the server's own priority: its read transaction keeps the WAL from being checkpointed
// until it ends, so it must not starve. A lowest-priority worker on a busy single core
// crawled, and the WAL grew past 6 GB behind it.
const CHECK = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const db = new Database(workerData.file, { readonly: true, fileMustExist: true })
// The check reads each page about once: a small page cache does it as fast, and the
// default (16 MB) stayed resident in the server after the thread ended.
db.pragma('cache_size = -1024')
try {
  // At most ten findings, each a row: enough to say what is wrong, short enough to show.
  parentPort.postMessage(db.pragma('quick_check(10)').map((row) => row.quick_check).join('; ').slice(0, 2000))
} finally {
  db.close()
}
`

let threads = 0
/** Quick checks' threads not yet ended (a closed app leaves none). */
export const quickChecksRunning = () => threads

/**
 * SQLite's quick check of the database file, in a worker thread: 'ok', or what it found,
 * or why it could not run. Never rejects. It answers once the thread (and its connection) is
 * gone, so the thread keeps the process alive until then; an aborted check ends its thread.
 */
export function quickCheck(file: string, signal?: AbortSignal): Promise<string> {
  return new Promise((resolve) => {
    // A small heap: the thread runs one pragma, and the server's memory holds what it takes.
    const worker = new Worker(CHECK, { eval: true, workerData: { file, driver }, resourceLimits: { maxYoungGenerationSizeMb: 2, maxOldGenerationSizeMb: 32 } })
    threads++
    let result: string | undefined
    const stop = () => void worker.terminate()
    signal?.addEventListener('abort', stop, { once: true })
    worker.once('message', (r) => (result = String(r)))
    worker.once('error', (err) => (result ??= `the quick check could not run: ${err.message}`))
    // Answered on exit: the thread's connection is closed by then, so the data directory
    // holds no file of its any more (a caller may remove it).
    worker.once('exit', (code) => {
      threads--
      signal?.removeEventListener('abort', stop)
      resolve(result ?? (signal?.aborted ? 'the quick check was stopped' : `the quick check stopped (exit code ${code})`))
    })
  })
}
