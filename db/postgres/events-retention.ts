// Retention of events and audit records on PostgreSQL: whole days go by dropping their
// partition (after the caller has archived them); the records of days only partly past
// go row by row, as lib/retention/job.ts asks (due, then prune inside the open gate).
import type { PruneDelta } from '../event-engine/index.js'
import { AUDIT_FIELDS, type AuditTrailRow, EVENT_FIELDS, type EventRow } from '../../lib/events/ports.js'
import type { Postgres } from './connection.js'
import type { RecordTable } from './events-query.js'
import { recordPartitions, type RecordPartitions } from './events-write.js'

const FIELDS: Record<RecordTable, readonly string[]> = { events: EVENT_FIELDS, audit_trail: AUDIT_FIELDS }
const DAY_MS = 86_400_000

/** A day partition of a table. */
export interface DayPartition {
  name: string
  fromMs: number
  /** Exclusive. */
  toMs: number
}

export function pgRecordRetention(db: Postgres, partitions: RecordPartitions = recordPartitions(db)) {
  return {
    /**
     * Up to `limit` records created before `beforeMs`, oldest first, after the position
     * `after` ([created_ms, id]) and with ids up to `maxId` (by the (created_ms, id) index).
     */
    due: (table: RecordTable, beforeMs: number, after: readonly [number, number], maxId: number, limit: number): Promise<(EventRow | AuditTrailRow)[]> =>
      db.query(
        `SELECT ${FIELDS[table].join(', ')} FROM ${table}
         WHERE created_ms < $1 AND (created_ms, id) > ($2, $3) AND id <= $4 ORDER BY created_ms, id LIMIT $5`,
        [beforeMs, after[0], after[1], maxId, limit],
      ) as Promise<never>,
    /** Lets this transaction delete audit records older than `beforeMs` (the trigger of migration 004 reads it; gone at commit). */
    openGate: (beforeMs: number) => db.query(`SELECT set_config('prime.retention_before_ms', $1, true)`, [String(beforeMs)]),
    closeGate: () => db.query(`SELECT set_config('prime.retention_before_ms', '', true)`),
    /** Every record is counted as it is written (no index to catch up with): nothing bounds what may go. */
    indexed: async (_table: RecordTable): Promise<number> => Number.MAX_SAFE_INTEGER,
    /** Deletes the records (their counts follow by trigger); the delta is empty: no counts are kept in memory. */
    async prune(table: RecordTable, ids: number[]): Promise<{ deleted: number; delta: PruneDelta }> {
      const delta: PruneDelta = { from: 0, to: 0, cells: new Map(), docs: new Map(), sources: new Map() }
      if (!ids.length) return { deleted: 0, delta }
      return { deleted: await db.run(`DELETE FROM ${table} WHERE id = ANY($1::bigint[])`, [ids]), delta }
    },
    /** The day partitions whose whole day is before `beforeMs`, oldest first. */
    wholeDays: async (table: RecordTable, beforeMs: number): Promise<DayPartition[]> =>
      (
        await db.query<{ name: string; from_ms: number }>(
          `SELECT c.relname AS name, (extract(epoch FROM to_date(right(c.relname, 8), 'YYYYMMDD')) * 1000)::bigint AS from_ms
           FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = $1::regclass AND c.relname ~ ('^' || $1 || '_p[0-9]{8}$')
           ORDER BY c.relname`,
          [table],
        )
      )
        .map((r) => ({ name: r.name, fromMs: r.from_ms, toMs: r.from_ms + DAY_MS }))
        .filter((p) => p.toMs <= beforeMs),
    /** How many records the partition of the day starting at `fromMs` holds, and its highest id (null: none, or no such partition). */
    async dayHeld(table: RecordTable, fromMs: number): Promise<{ n: number; top: number | null }> {
      const name = await db.value<string>('SELECT record_partition_name($1, $2)', [table, fromMs])
      if ((await db.value(`SELECT to_regclass($1)`, [name])) === null) return { n: 0, top: null }
      try {
        return (await db.one<{ n: number; top: number | null }>(`SELECT count(*) AS n, max(id) AS top FROM "${name}"`))!
      } catch (err) {
        // Dropped since the look above (another node's run past its lease): nothing is held.
        if ((err as { code?: string }).code === '42P01') return { n: 0, top: null }
        throw err
      }
    },
    /**
     * Detaches and drops the partition of the day starting at `fromMs`, records and all
     * (audit records too: the immutability triggers guard rows, and this is retention's
     * own way), unless it holds an id above `maxId` (one an alarm destination still waits
     * for) or, given `expected`, a number of records other than that (the caller archived
     * that many: a record written into the day since would go unarchived). Answers how
     * many records went, or null when it was kept.
     */
    async dropDay(table: RecordTable, fromMs: number, maxId: number = Number.MAX_SAFE_INTEGER, expected?: number): Promise<number | null> {
      const dropped = await db.uow.run(async () => {
        // The partitions' lock (ensure_partitions): no day is made or moved meanwhile.
        await db.query(`SELECT pg_advisory_xact_lock(hashtext('prime partitions ' || $1))`, [table])
        const name = await db.value<string>('SELECT record_partition_name($1, $2)', [table, fromMs])
        if ((await db.value(`SELECT to_regclass($1)`, [name])) === null) return 0
        const held = (await db.one<{ n: number; top: number | null }>(`SELECT count(*) AS n, max(id) AS top FROM "${name}"`))!
        if (held.top !== null && held.top > maxId) return null
        if (expected !== undefined && held.n !== expected) return null
        await db.query(`ALTER TABLE ${table} DETACH PARTITION "${name}"`)
        await db.query(`DROP TABLE "${name}"`)
        // The day's span of ids (migration 016) goes with its records.
        await db.run('DELETE FROM record_days WHERE name = $1 AND day_ms = floor($2 / 86400000.0)::bigint * 86400000', [table, fromMs])
        if (held.n) await db.run('UPDATE record_counts SET n = n - $2, prunes = prunes + 1 WHERE name = $1', [table, held.n])
        return held.n
      })
      if (dropped !== null) partitions.forget(table, fromMs + DAY_MS)
      return dropped
    },
  }
}
export type PgRecordRetention = ReturnType<typeof pgRecordRetention>
