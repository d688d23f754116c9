// Answers of list queries, kept while the data they were read from is unchanged.
// `total_changes()` moves with every row this connection writes and `data_version` with every
// commit of another connection. The one change left out is the check-in time that unchanged
// check-ins write (thousands a second in a live fleet): a kept answer holds only the ids and
// counts, and its rows are read again when it is used, so they show the current times.
// Lists filtered or sorted by the check-in time are never kept.
import type { DB } from './index.js'

/** Rows whose only change was a check-in time (counted by the gateway as it writes them). */
export class CheckInTimeWrites {
  rows = 0
}

export interface KeptAnswer { total: number; filtered: number; ids: number[] }

/** `maxEntries` 0 keeps nothing: every question is answered from the database. */
export function answerCache(db: DB, checkInTimes: CheckInTimeWrites, maxEntries = 64) {
  const changes = db.prepare('SELECT total_changes()').pluck()
  const version = db.prepare('PRAGMA data_version').pluck()
  const entries = new Map<string, KeptAnswer>()
  let generation = ''
  const current = () => {
    const now = `${(changes.get() as number) - checkInTimes.rows}:${version.get()}`
    if (now !== generation) {
      entries.clear()
      generation = now
    }
  }
  return {
    get(key: string): KeptAnswer | undefined {
      if (maxEntries === 0) return undefined
      current()
      const kept = entries.get(key)
      if (kept) {
        // Least recently used first out.
        entries.delete(key)
        entries.set(key, kept)
      }
      return kept
    },
    set(key: string, answer: KeptAnswer): void {
      if (maxEntries === 0) return
      current()
      if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!)
      entries.set(key, answer)
    },
  }
}

/** Rows read by id, put back in the order of the ids. */
export function inOrder<T extends { id: number }>(ids: number[], rows: T[]): T[] {
  const byId = new Map(rows.map((r) => [r.id, r]))
  return ids.map((id) => byId.get(id)).filter((r): r is T => r !== undefined)
}
