// Reports: definitions, runs (the queue, the files they stored, their e-mail), and the
// reads a report makes that no other repository offers: aggregates over agents and
// peripherals, and the events and audit records of a period. Every read that could cover
// a large table goes in steps (id ranges, days, keyset pages), so that a report never
// holds the connection for long and other requests run in between.
// Runs are in reports-runs.ts and a report's reads in reports-data.ts; the definitions and
// their scheduling are here.
import type { DB } from './index.js'
import type { AgentSearch } from './filters.js'
import { statementCache } from './sql.js'
import { runStore } from './reports-runs.js'
import { dataStore } from './reports-data.js'
import type { ReportChanges, ReportInsert, ReportRow } from '../lib/reports/ports.js'

export const nameKey = (name: string) => name.trim().toLowerCase()

export function reportsRepo(db: DB, search: AgentSearch) {
  const cached = statementCache(db, 64)

  // ---- definitions ----
  const insert = db.prepare(
    `INSERT INTO reports (id, name, name_key, description, type, format, filters, schedule, recipients, sender, is_active, owner,
       created_ms, updated_ms, next_run_ms, retention_files, retention_bytes)
     VALUES (@id, @name, @name_key, @description, @type, @format, @filters, @schedule, @recipients, @sender, @is_active, @owner,
       @created_ms, @updated_ms, @next_run_ms, @retention_files, @retention_bytes)`,
  )
  const byId = db.prepare<[string], ReportRow>('SELECT * FROM reports WHERE id = ?')
  const byKey = db.prepare<[string], ReportRow>('SELECT * FROM reports WHERE name_key = ?')
  const all = db.prepare<[], ReportRow>('SELECT * FROM reports ORDER BY name_key, id')
  const count = db.prepare<[], number>('SELECT count(*) FROM reports').pluck()
  const remove = db.prepare<[string]>('DELETE FROM reports WHERE id = ?')
  const due = db.prepare<[number], ReportRow>('SELECT * FROM reports WHERE next_run_ms <= ? AND is_active = 1 ORDER BY next_run_ms, id')
  const advance = db.prepare<[number | null, string, number]>('UPDATE reports SET next_run_ms = ? WHERE id = ? AND next_run_ms = ?')
  const earliest = db.prepare<[], number | null>('SELECT min(next_run_ms) FROM reports WHERE is_active = 1').pluck()

  return {
    // ---- definitions ----
    insert: (r: ReportInsert) => insert.run({ ...r, name_key: nameKey(r.name) }),
    byId: (id: string) => byId.get(id),
    byName: (name: string) => byKey.get(nameKey(name)),
    all: () => all.all(),
    count: () => count.get() as number,
    /** Changes the given columns (a name keeps its key in step). */
    update(id: string, changes: ReportChanges): void {
      const set = { ...changes } as Record<string, unknown>
      if (changes.name !== undefined) set.name_key = nameKey(changes.name)
      const columns = Object.keys(set)
      if (!columns.length) return
      cached(`UPDATE reports SET ${columns.map((c) => `${c} = @${c}`).join(', ')} WHERE id = @id`).run({ ...set, id })
    },
    /** Deletes the definition; its runs go with it (foreign key). */
    remove: (id: string) => remove.run(id).changes > 0,

    // ---- scheduling ----
    /** Active reports whose next due time has come. */
    due: (now: number) => due.all(now),
    /** Moves the next due time on, if it is still the one read (answers whether it did). */
    advance: (id: string, from: number, to: number | null) => advance.run(to, id, from).changes === 1,
    earliestDue: () => earliest.get() as number | null,

    ...runStore(db),

    ...dataStore(db, search, cached),
  }
}
export type ReportsRepo = ReturnType<typeof reportsRepo>
