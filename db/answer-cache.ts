// Answers of list queries, kept while the data they were read from is unchanged.
// `total_changes()` moves with every row this connection writes and `data_version` with every
// commit of another connection. The one change left out is the check-in time that unchanged
// check-ins write (thousands a second in a live fleet): after one, a kept answer's rows are
// read again by id, so that they show the current times; while nothing at all has changed,
// its rows are answered as kept. Lists filtered or sorted by the check-in time are never kept.
import type { DB } from './index.js'

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

/** `maxEntries` 0 keeps nothing: every question is answered from the database. */
export function answerCache<T>(db: DB, checkInTimes: CheckInTimeWrites, maxEntries = 64) {
  const changes = db.prepare('SELECT total_changes()').pluck()
  const version = db.prepare('PRAGMA data_version').pluck()
  const entries = new Map<string, KeptAnswer<T>>()
  let generation = ''
  const current = () => {
    const now = `${(changes.get() as number) - checkInTimes.rows}:${version.get()}`
    if (now !== generation) {
      entries.clear()
      generation = now
    }
  }
  return {
    /** The kept answer; `readRows` reads its rows again when check-in times were written since. */
    get(key: string, readRows: (ids: number[]) => T[]): { total: number; filtered: number; rows: T[] } | undefined {
      if (maxEntries === 0) return undefined
      current()
      const kept = entries.get(key)
      if (!kept) return undefined
      // Least recently used first out.
      entries.delete(key)
      entries.set(key, kept)
      if (kept.checkInRows !== checkInTimes.rows) {
        kept.rows = inOrder(kept.ids, readRows(kept.ids) as (T & { id: number })[])
        kept.checkInRows = checkInTimes.rows
      }
      return { total: kept.total, filtered: kept.filtered, rows: kept.rows }
    },
    set(key: string, answer: { total: number; filtered: number; rows: (T & { id: number })[] }): void {
      if (maxEntries === 0) return
      current()
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!)
      entries.set(key, { ...answer, ids: answer.rows.map((r) => r.id), checkInRows: checkInTimes.rows })
    },
  }
}

/** Rows read by id, put back in the order of the ids. */
export function inOrder<T extends { id: number }>(ids: number[], rows: T[]): T[] {
  const byId = new Map(rows.map((r) => [r.id, r]))
  return ids.map((id) => byId.get(id)).filter((r): r is T => r !== undefined)
}
