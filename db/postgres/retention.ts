// What the retention job (lib/retention/job.ts) reads and deletes on PostgreSQL, as
// db/retention.ts does on SQLite. Events and audit records: whole past days by dropping their
// partition once archived, the rest row by row (db/postgres/events-retention.ts); every
// other kind in slices of rows, with SQLite's conditions.
import type { Postgres } from './connection.js'
import type { PgEventQueue } from './alarm-queue.js'
import type { PgRecordRetention } from './events-retention.js'

export function pgRetentionRepo(db: Postgres, records: PgRecordRetention, queue: PgEventQueue) {
  /** Deletes up to `limit` rows of a simple kind older than the cutoff; answers how many. */
  const sliced = (sql: string) => (beforeMs: number, limit: number) => db.run(sql, [beforeMs, limit])
  return {
    due: records.due,
    openGate: records.openGate,
    closeGate: records.closeGate,
    days: {
      wholeDays: records.wholeDays,
      dayHeld: records.dayHeld,
      dropDay: (table: 'events' | 'audit_trail', fromMs: number, maxId: number, expected: number) => records.dropDay(table, fromMs, maxId, expected),
    },
    /** The first record id of `feed` an alarm destination has not had yet, or may be owed (null: none). */
    async firstPending(feed: 'events' | 'audit'): Promise<number | null> {
      const pending = (await db.value<number | null>(`SELECT min(record_id) FROM alarm_outbox WHERE status = 'pending' AND feed = $1`, [feed])) ?? null
      const unqueued = feed === 'events' ? await queue.firstOwed() : null
      return pending === null ? unqueued : unqueued === null ? pending : Math.min(pending, unqueued)
    },
    // Risk notifications dismissed, and health notifications resolved, before the cutoff
    // (with the links to their events); open ones are kept whatever their age.
    pruneRiskNotifications: sliced(
      `WITH gone AS (DELETE FROM risk_notifications WHERE id IN (SELECT id FROM risk_notifications WHERE dismissed_ms < $1 ORDER BY id LIMIT $2) RETURNING id),
         links AS (DELETE FROM risk_notification_events WHERE notification_id IN (SELECT id FROM gone))
       SELECT 1 FROM gone`,
    ),
    pruneHealthNotifications: sliced('DELETE FROM health_notifications WHERE id IN (SELECT id FROM health_notifications WHERE resolved_ms < $1 ORDER BY id LIMIT $2)'),
    /** Read marks of accounts deleted and of integration tokens revoked or expired (the argument is now). */
    pruneReadMarks: sliced(
      `DELETE FROM notification_read_marks WHERE user_key IN (SELECT user_key FROM notification_read_marks m WHERE
         (m.user_key LIKE 'user:%' AND NOT EXISTS (SELECT 1 FROM users u WHERE 'user:' || u.id = m.user_key))
         OR (m.user_key LIKE 'token:%' AND NOT EXISTS (SELECT 1 FROM integration_tokens i WHERE 'token:' || i.id = m.user_key
           AND i.revoked_ms IS NULL AND (i.expires_ms IS NULL OR i.expires_ms > $1)))
         LIMIT $2)`,
    ),
    pruneCommands: sliced(
      `DELETE FROM agent_commands WHERE id IN (SELECT id FROM agent_commands WHERE completed_ms < $1
         AND status IN ('Succeeded', 'Failed', 'Cancelled') ORDER BY completed_ms LIMIT $2)`,
    ),
    pruneDebugLogs: sliced('DELETE FROM agent_debug_logs WHERE id IN (SELECT id FROM agent_debug_logs WHERE created_ms < $1 ORDER BY created_ms LIMIT $2)'),
    pruneAgentErrors: sliced('DELETE FROM agent_errors WHERE id IN (SELECT id FROM agent_errors WHERE time_ms < $1 ORDER BY time_ms LIMIT $2)'),
    pruneAgentlessRuns: sliced(
      `DELETE FROM agentless_runs WHERE run_id IN (SELECT run_id FROM agentless_runs WHERE recorded_ms < $1 AND status <> 'Running'
         ORDER BY recorded_ms LIMIT $2)`,
    ),
  }
}
export type PgRetentionRepo = ReturnType<typeof pgRetentionRepo>
