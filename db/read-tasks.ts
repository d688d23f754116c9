// The reads a reader thread runs (lib/reader-thread.ts) on its read-only connection: the ones
// whose cost grows with the data or with what the caller asks (a global search over every
// asset, a sort by a computed risk), so that they never hold up the event loop. Each task is
// a repository method; its arguments and answer cross the thread boundary by structured clone.
import type { DB } from './index.js'
import { assetsRepo } from './assets.js'
import type { AssetQuery, AssetSort, DataAt } from '../lib/assets/ports.js'
import { statementCache } from './sql.js'

/** `made`: repositories the connection already has (the server's own, when reads stay on the event loop). */
export function readTasks(db: DB, made: { assets?: ReturnType<typeof assetsRepo> } = {}) {
  // Made on the first task that needs it: a thread prepares only what it is asked for.
  let assets = made.assets
  const cached = statementCache(db, 32)
  return {
    /** The first column of a statement planned on the server's connection (a large page's ids in order: db/sql.ts plannedRead). */
    column: (sql: string, params: unknown[]) =>
      cached(sql)
        .pluck()
        .all(...params) as number[],
    /** How this connection's asset pages were read (db/assets.ts `reads`: from where the last ended, or by offset), for tests. */
    assetReads: () => (assets ??= assetsRepo(db)).reads,
    /** An asset discovery page (db/assets.ts `page`). */
    assetsPage: (q: AssetQuery, sort: AssetSort, limit: number, offset: number, at?: DataAt) => (assets ??= assetsRepo(db)).page(q, sort, limit, offset, at),
  }
}
