// Answers of list queries, kept while the data they were read from is unchanged.
// `total_changes()` moves with every row this connection writes and `data_version` with every
// commit of another connection. The one change left out is the check-in time that unchanged
// check-ins write (thousands a second in a live fleet): after one, a kept answer's rows are
// read again by id, so that they show the current times; while nothing at all has changed,
// its rows are answered as kept. Lists filtered or sorted by the check-in time are never kept.
import type { DB } from './index.js'
import { cacheIn, estimateBytes, type CacheRegistry } from '../lib/platform/cache.js'

/** Rows whose only change was a check-in time (counted by the gateway as it writes them). */
export class CheckInTimeWrites {
  rows = 0
}

export interface KeptAnswer<T> {
  total: number
  filtered: number
  ids: number[]
  rows: T[]
  /** `CheckInTimeWrites.rows` when the rows were read. */
  checkInRows: number
}

/**
 * `maxEntries` 0 keeps nothing: every question is answered from the database. `name`: the
 * cache's name in `caches` (a page of 200 rows is about 200 KB: 64 pages, 16 MB at most).
 */
export function answerCache<T extends { id: number }>(db: DB, checkInTimes: CheckInTimeWrites, maxEntries = 64, caches?: CacheRegistry, name = 'list-answers') {
  const changes = db.prepare('SELECT total_changes()').pluck()
  const version = db.prepare('PRAGMA data_version').pluck()
  const entries = cacheIn<string, KeptAnswer<T>>(caches, {
    name,
    signal: 'any write to the database (total_changes, data_version), check-in times aside',
    max: maxEntries,
    maxBytes: 16 * 1024 * 1024,
    sizeOf: (a, key) => 2 * key.length + 8 * a.ids.length + (a.rows.length > 0 ? a.rows.length * estimateBytes(a.rows[0]) : 0),
  })
  const current = () => entries.validFor(`${(changes.get() as number) - checkInTimes.rows}:${version.get()}`)
  type Answer = { total: number; filtered: number; rows: T[] }
  function kept(key: string, readRows: (ids: number[]) => T[]): Answer | undefined {
    // Least recently used first out.
    const entry = entries.get(key)
    if (!entry) return undefined
    if (entry.checkInRows !== checkInTimes.rows) {
      entry.rows = inOrder(entry.ids, readRows(entry.ids))
      entry.checkInRows = checkInTimes.rows
    }
    return { total: entry.total, filtered: entry.filtered, rows: entry.rows }
  }
  return {
    /**
     * The kept answer to `key`, or `read()`'s, then kept. `readRows` reads a kept answer's
     * rows again by id when check-in times were written since.
     */
    answer(key: string, read: () => Answer, readRows: (ids: number[]) => T[]): Answer {
      if (!entries.keeps) return read()
      current()
      const found = kept(key, readRows)
      if (found) return found
      const answer = read()
      entries.set(key, { ...answer, ids: answer.rows.map((r) => r.id), checkInRows: checkInTimes.rows })
      return answer
    },
  }
}

/** Rows read by id, put back in the order of the ids. */
export function inOrder<T extends { id: number }>(ids: number[], rows: T[]): T[] {
  const byId = new Map(rows.map((r) => [r.id, r]))
  return ids.map((id) => byId.get(id)).filter((r): r is T => r !== undefined)
}
