// A reader thread of the pool in lib/platform/readers.ts (run by piscina): the reads of
// db/read-tasks.ts on a read-only connection, each under a time budget (db/reader-runner.ts),
// and what is made of their rows there rather than on the event loop: an asset page's views
// as JSON text (10,000 views took about half a second to make, and their copy across threads
// as objects as long again; text crosses as one copy).
import { workerData } from 'node:worker_threads'
import type { DB } from '../db/index.js'
import type { AssetQuery, AssetSort, DataAt } from './assets/ports.js'
import { readTasks } from '../db/read-tasks.js'
import { readerRunner, type ReaderSetup } from '../db/reader-runner.js'
import { assetView } from './assets/views.js'

export function threadTasks(db: DB, made: Parameters<typeof readTasks>[1] = {}) {
  const reads = readTasks(db, made)
  return {
    ...reads,
    /** An asset page with its views (lib/assets/views.ts) as a JSON array. */
    assetsPageJson(q: AssetQuery, sort: AssetSort, limit: number, offset: number, maxHosts: number, at?: DataAt): { filtered: number; json: string } {
      const { filtered, rows } = reads.assetsPage(q, sort, limit, offset, at)
      return { filtered, json: JSON.stringify(rows.map((r) => assetView(r, maxHosts))) }
    },
  }
}
export type ThreadTasks = ReturnType<typeof threadTasks>

export default workerData ? readerRunner(workerData as ReaderSetup, threadTasks) : undefined
