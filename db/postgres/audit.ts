// The audit trail's writes and reads on PostgreSQL (db/audit.ts): records taken under the
// audit feed's lock, the refusals' repeat counts.
import { auditColumns, type AuditRepo } from '../audit.js'
import type { AuditRecord, AuditRow, RefusalCount } from '../../lib/platform/ports.js'
import type { Async } from '../unit-of-work.js'
import type { Postgres } from './connection.js'
import { FEED_LOCKS, recordPartitions, type RecordPartitions } from './events-write.js'

const INSERT = `WITH feed AS (SELECT pg_advisory_xact_lock($1::bigint))
  INSERT INTO audit_trail (created_ms, severity, category, user_name, source_ip, description, details, operation_id, outcome,
    asset_key, asset_name, asset_parent_id, asset_ip, asset_type, asset_sub_type, asset_detail, asset_icon, request_id, refusal_key)
  SELECT ${Array.from({ length: 19 }, (_, i) => `$${i + 2}`).join(', ')} FROM feed
  RETURNING id`

/** The SQLite repository's methods, Promise-returning; dropping a count answers nothing (its caller reads nothing). */
export type PgAuditStore = Async<Omit<AuditRepo, 'dropRefusalCount'>> & { dropRefusalCount(key: string): Promise<void> }

/**
 * The audit repository. The deliveries of new records to alarm destinations are queued by
 * the alarms' part (migration 005), not here.
 */
export function pgAuditRepo(db: Postgres, partitions: RecordPartitions = recordPartitions(db)) {
  return {
    /** Stores a record; its id is taken under the audit feed's lock, held until the caller's unit of work commits. */
    async insert(r: AuditRecord): Promise<number> {
      return db.uow.run(async () => {
        await partitions.ensure('audit_trail', [r.createdMs])
        return (await db.value<number>(INSERT, [FEED_LOCKS.audit_trail, ...auditColumns(r)]))!
      })
    },
    latest: (n: number) => db.query<AuditRow & Record<string, unknown>>('SELECT * FROM audit_trail ORDER BY id DESC LIMIT $1', [n]) as Promise<AuditRow[]>,
    byId: (id: number) => db.one<AuditRow & Record<string, unknown>>('SELECT * FROM audit_trail WHERE id = $1', [id]) as Promise<AuditRow | undefined>,
    /** The record of the latest first refusal of this kind written after `sinceMs`. */
    firstRefusal: (key: string, sinceMs: number) =>
      db.one<AuditRow & Record<string, unknown>>('SELECT * FROM audit_trail WHERE refusal_key = $1 AND created_ms > $2 ORDER BY created_ms DESC, id DESC LIMIT 1', [key, sinceMs]) as Promise<
        AuditRow | undefined
      >,
    refusalCount: (key: string) => db.one<RefusalCount & Record<string, unknown>>('SELECT * FROM audit_refusal_counts WHERE refusal_key = $1', [key]) as Promise<RefusalCount | undefined>,
    /** How many reasons of a refusal group (the part of keys before `:`) opened a window after `sinceMs`. */
    refusalReasons: async (group: string, sinceMs: number): Promise<number> =>
      (await db.value<number>('SELECT count(DISTINCT refusal_key) FROM audit_trail WHERE refusal_key > $1 AND refusal_key < $2 AND created_ms > $3', [`${group}:`, `${group};`, sinceMs])) ?? 0,
    /** Counts one repeat of a refusal whose first record is `firstId` (its window ends at `windowEndMs`). */
    async countRepeat(key: string, firstId: number, windowEndMs: number, now: number, sourceIps: string): Promise<void> {
      await db.run(
        `INSERT INTO audit_refusal_counts (refusal_key, first_id, window_end_ms, repeats, last_ms, source_ips) VALUES ($1, $2, $3, 1, $4, $5)
         ON CONFLICT (refusal_key) DO UPDATE SET repeats = audit_refusal_counts.repeats + 1,
           last_ms = greatest(audit_refusal_counts.last_ms, excluded.last_ms), source_ips = excluded.source_ips`,
        [key, firstId, windowEndMs, now, sourceIps],
      )
    },
    /** Counters whose window has closed, oldest first. */
    dueRefusals: (now: number, limit: number) =>
      db.query<RefusalCount & Record<string, unknown>>('SELECT * FROM audit_refusal_counts WHERE window_end_ms <= $1 ORDER BY window_end_ms, refusal_key LIMIT $2', [now, limit]) as Promise<
        RefusalCount[]
      >,
    async dropRefusalCount(key: string): Promise<void> {
      await db.run('DELETE FROM audit_refusal_counts WHERE refusal_key = $1', [key])
    },
    /** False for a record whose transaction rolled back. */
    exists: async (id: number, createdMs: number, description: string): Promise<boolean> =>
      (await db.value('SELECT 1 FROM audit_trail WHERE id = $1 AND created_ms = $2 AND description = $3', [id, createdMs, description])) !== undefined,
  } satisfies PgAuditStore
}
export type PgAuditRepo = ReturnType<typeof pgAuditRepo>
