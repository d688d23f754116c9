// Answers of list queries, kept while the database is unchanged. `total_changes()` moves with
// every row this connection writes and `data_version` with every commit of another
// connection, so a kept answer is exactly what the query would answer now. Consoles that
// refresh and integrations that page ask the same question again and again; its count over
// the whole table is then not run again until something changes.
import type { DB } from './index.js'

/** `maxEntries` 0 keeps nothing: every question is answered from the database. */
export function answerCache<T>(db: DB, maxEntries = 64) {
  const changes = db.prepare('SELECT total_changes()').pluck()
  const version = db.prepare('PRAGMA data_version').pluck()
  const entries = new Map<string, T>()
  let generation = ''
  return (key: string, compute: () => T): T => {
    if (maxEntries === 0) return compute()
    const now = `${changes.get()}:${version.get()}`
    if (now !== generation) {
      entries.clear()
      generation = now
    }
    const kept = entries.get(key)
    if (kept !== undefined) {
      // Least recently used last out.
      entries.delete(key)
      entries.set(key, kept)
      return kept
    }
    const answer = compute()
    if (entries.size >= maxEntries) entries.delete(entries.keys().next().value!)
    entries.set(key, answer)
    return answer
  }
}
