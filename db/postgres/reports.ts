// Reports on PostgreSQL: definitions, runs (the queue, their e-mail), the runs' files (in
// the database, so that any node serves them), and the reads a report makes: aggregates
// over agents and peripherals, the events and audit records of a period. The same answers
// as db/reports.ts; the aggregates are one statement each (PostgreSQL runs them on a
// connection of their own, so no request waits behind them), the long reads are pages.
// Several processes may run reports at once: a run is started by one (a conditional
// update), which holds a lease on it (table `leases`, name `report-run:<id>`) while it runs;
// a run whose lease lapsed is one whose process is gone, and any process fails it.
import crypto from 'node:crypto'
import type { ReportChanges, ReportFileStore, ReportInsert, ReportRow, ReportSources, ReportStore, RunLeases } from '../../lib/reports/ports.js'
import { nameKey } from '../reports.js'
import type { Postgres } from './connection.js'
import { refusedAsDuplicate } from './duplicates.js'
import { holdLimit } from './limits.js'
import { Params, type PgFilterSql, pgReportData, plainFilterSql } from './reports-data.js'
import { pgReportRuns } from './reports-runs.js'

export { Params, type PgFilterSql, plainFilterSql } from './reports-data.js'
export { FILE_PART_BYTES, RUN_LEASE_MS, type StoredFileHead } from './reports-runs.js'

/** The columns `update` may change (the names of a change are put into the statement). */
const CHANGEABLE = new Set<string>([
  'name',
  'description',
  'type',
  'format',
  'filters',
  'schedule',
  'recipients',
  'sender',
  'is_active',
  'updated_ms',
  'next_run_ms',
  'retention_files',
  'retention_bytes',
])

/**
 * `filters`: the agent and peripheral filters as SQL (the agents' part may give its own);
 * `holder`: who holds this process's leases on runs (a fresh id by default).
 */
/** Names are unique ignoring case (migration 007). */
const NAME_TAKEN = 'reports_name_key_key'

export function pgReportsRepo(db: Postgres, filters: PgFilterSql = plainFilterSql, holder: string = crypto.randomUUID()) {
  // Rows typed as the SQLite repository's (the same columns): the definitions here, the runs
  // and files in reports-runs.ts, the reads in reports-data.ts.
  const all = <T>(sql: string, params?: unknown[]) => db.query(sql, params) as Promise<unknown> as Promise<T[]>
  const get = <T>(sql: string, params?: unknown[]) => db.one(sql, params) as Promise<unknown> as Promise<T | undefined>
  const repo = {
    // ---- definitions ----
    async insert(r: ReportInsert) {
      // A name taken meanwhile by another unit of work: refused by the unique name_key.
      const changes = await refusedAsDuplicate(NAME_TAKEN, () =>
        db.run(
          `INSERT INTO reports (id, name, name_key, description, type, format, filters, schedule, recipients, sender, is_active, owner,
           created_ms, updated_ms, next_run_ms, retention_files, retention_bytes)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
          [
            r.id,
            r.name,
            nameKey(r.name),
            r.description,
            r.type,
            r.format,
            r.filters,
            r.schedule,
            r.recipients,
            r.sender,
            r.is_active,
            r.owner,
            r.created_ms,
            r.updated_ms,
            r.next_run_ms,
            r.retention_files,
            r.retention_bytes,
          ],
        ),
      )
      return { changes }
    },
    byId: (id: string, hold?: boolean) => get<ReportRow>(`SELECT * FROM reports WHERE id = $1${hold ? ' FOR UPDATE' : ''}`, [id]),
    byName: (name: string) => get<ReportRow>('SELECT * FROM reports WHERE name_key = $1', [nameKey(name)]),
    all: () => all<ReportRow>('SELECT * FROM reports ORDER BY name_key COLLATE "C", id COLLATE "C"'),
    async count(hold?: boolean) {
      if (hold) await holdLimit(db, 'reports')
      return (await db.value<number>('SELECT count(*) FROM reports')) ?? 0
    },
    /** Changes the given columns (a name keeps its key in step). */
    async update(id: string, changes: ReportChanges): Promise<void> {
      const set = { ...changes } as Record<string, unknown>
      const p = new Params([id])
      const assignments = Object.entries(set)
        .filter(([, v]) => v !== undefined)
        .map(([column, value]) => {
          if (!CHANGEABLE.has(column)) throw new Error(`reports has no changeable column ${column}`)
          return `${column} = ${p.add(value)}`
        })
      if (changes.name !== undefined) assignments.push(`name_key = ${p.add(nameKey(changes.name))}`)
      if (!assignments.length) return
      await refusedAsDuplicate(NAME_TAKEN, () => db.run(`UPDATE reports SET ${assignments.join(', ')} WHERE id = $1`, p.values))
    },
    /** Deletes the definition; its runs and their files go with it (foreign keys). */
    remove: async (id: string) => (await db.run('DELETE FROM reports WHERE id = $1', [id])) > 0,

    // ---- scheduling ----
    /** Active reports whose next due time has come. */
    due: (now: number) => all<ReportRow>('SELECT * FROM reports WHERE next_run_ms <= $1 AND is_active = 1 ORDER BY next_run_ms, id COLLATE "C"', [now]),
    /**
     * Moves the next due time on, if it is still the one read (answers whether it did).
     * With several nodes this is the claim of a due time: the UPDATE of a second node waits
     * for the first one's transaction, then finds the value moved and changes nothing.
     */
    advance: async (id: string, from: number, to: number | null) => (await db.run('UPDATE reports SET next_run_ms = $1 WHERE id = $2 AND next_run_ms = $3', [to, id, from])) === 1,
    earliestDue: async () => (await db.value<number | null>('SELECT min(next_run_ms) FROM reports WHERE is_active = 1')) ?? null,
  }
  return { ...repo, ...pgReportRuns(db, holder), ...pgReportData(db, filters) } satisfies ReportStore & ReportSources['reports'] & ReportFileStore & RunLeases
}
export type PgReportsRepo = ReturnType<typeof pgReportsRepo>
