// What the retention job (lib/retention/job.ts) reads and deletes. Events and audit records go
// through the query index's prune (db/event-engine/event-index.ts), which keeps its counts exact.
import type { DB } from './index.js'
import { AUDIT_FIELDS, type AuditTrailRow, EVENT_FIELDS, type EventRow, type RecordTable } from '../lib/events/ports.js'
import { eventQueue } from './alarm-queue.js'

export function retentionRepo(db: DB) {
  // By the time index (its entries hold the id too): records past their retention in time
  // order, whatever their id order, after a (time, id) position, up to an id bound. Named
  // when it is there (a bulk load drops and rebuilds it); prepared on first use.
  // plan: query-plans "retention"
  const dueSql = (table: RecordTable, fields: readonly string[], index: string) => {
    const has = !!db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?`).get(index)
    return db.prepare<[number, number, number, number, number]>(`SELECT ${fields.join(', ')} FROM ${table} ${has ? `INDEXED BY ${index}` : ''}
      WHERE created_ms < ? AND (created_ms, id) > (?, ?) AND id <= ? ORDER BY created_ms, id LIMIT ?`)
  }
  const due: Partial<Record<RecordTable, ReturnType<typeof dueSql>>> = {}
  // The oldest record a destination still waits for: nothing from it on is pruned.
  const pendingOutbox = db.prepare<[string], number | null>(`SELECT min(record_id) FROM alarm_outbox WHERE status = 'pending' AND feed = ?`).pluck()
  // The events not queued yet that a destination may take are owed too (db/alarm-queue.ts).
  const queue = eventQueue(db)
  const gate = db.prepare<[number, number]>('UPDATE retention_gate SET open = ?, before_ms = ? WHERE id = 1')
  /** Deletes up to `limit` rows of a simple kind older than the cutoff; answers how many. */
  const sliced = (sql: string) => {
    const stmt = db.prepare<[number, number]>(sql)
    return (beforeMs: number, limit: number) => stmt.run(beforeMs, limit).changes
  }
  return {
    /**
     * Up to `limit` records created before `beforeMs`, oldest first, after the position
     * `after` ([created_ms, id]) and with ids up to `maxId`.
     */
    due<T extends RecordTable>(table: T, beforeMs: number, after: readonly [number, number], maxId: number, limit: number): T extends 'events' ? EventRow[] : AuditTrailRow[] {
      due[table] ??= table === 'events' ? dueSql(table, EVENT_FIELDS, 'events_created') : dueSql(table, AUDIT_FIELDS, 'audit_trail_created')
      return due[table].all(beforeMs, after[0], after[1], maxId, limit) as never
    },
    /** The first record id of `feed` an alarm destination has not had yet, or may be owed (null: none). */
    firstPending(feed: 'events' | 'audit'): number | null {
      const pending = pendingOutbox.get(feed) ?? null
      const unqueued = feed === 'events' ? queue.firstOwed() : null
      return pending === null ? unqueued : unqueued === null ? pending : Math.min(pending, unqueued)
    },
    /** Lets this transaction delete audit records older than `beforeMs` (closed again before it commits). */
    openGate: (beforeMs: number) => gate.run(1, beforeMs),
    closeGate: () => gate.run(0, 0),
    // Risk notifications dismissed, and health notifications resolved, before the cutoff
    // (with the links to their events); open ones are kept whatever their age.
    pruneRiskNotifications: (() => {
      const links = db.prepare<[number, number]>(
        `DELETE FROM risk_notification_events WHERE notification_id IN
           (SELECT id FROM risk_notifications WHERE dismissed_ms < ? ORDER BY id LIMIT ?)`,
      )
      const rows = sliced('DELETE FROM risk_notifications WHERE id IN (SELECT id FROM risk_notifications WHERE dismissed_ms < ? ORDER BY id LIMIT ?)')
      return (beforeMs: number, limit: number) => {
        links.run(beforeMs, limit)
        return rows(beforeMs, limit)
      }
    })(),
    pruneHealthNotifications: sliced('DELETE FROM health_notifications WHERE id IN (SELECT id FROM health_notifications WHERE resolved_ms < ? ORDER BY id LIMIT ?)'),
    /** Read marks of accounts deleted and of integration tokens revoked or expired (the argument is now). */
    pruneReadMarks: sliced(
      `DELETE FROM notification_read_marks WHERE user_key IN (SELECT user_key FROM notification_read_marks m WHERE
         (m.user_key LIKE 'user:%' AND NOT EXISTS (SELECT 1 FROM users u WHERE 'user:' || u.id = m.user_key))
         OR (m.user_key LIKE 'token:%' AND NOT EXISTS (SELECT 1 FROM integration_tokens i WHERE 'token:' || i.id = m.user_key
           AND i.revoked_ms IS NULL AND (i.expires_ms IS NULL OR i.expires_ms > ?)))
         LIMIT ?)`,
    ),
    pruneCommands: sliced(
      `DELETE FROM agent_commands WHERE id IN (SELECT id FROM agent_commands WHERE completed_ms < ?
         AND status IN ('Succeeded', 'Failed', 'Cancelled') ORDER BY completed_ms LIMIT ?)`,
    ),
    pruneDebugLogs: sliced('DELETE FROM agent_debug_logs WHERE id IN (SELECT id FROM agent_debug_logs WHERE created_ms < ? ORDER BY created_ms LIMIT ?)'),
    pruneAgentErrors: sliced('DELETE FROM agent_errors WHERE id IN (SELECT id FROM agent_errors WHERE time_ms < ? ORDER BY time_ms LIMIT ?)'),
    pruneAgentlessRuns: sliced(
      `DELETE FROM agentless_runs WHERE run_id IN (SELECT run_id FROM agentless_runs WHERE recorded_ms < ? AND status <> 'Running'
         ORDER BY recorded_ms LIMIT ?)`,
    ),
    /** Samples of the data directory's size (for its growth); older ones are dropped. */
    addSample(ms: number, bytes: number, free: number, keepAfterMs: number) {
      db.prepare('INSERT OR REPLACE INTO data_dir_samples (sampled_ms, bytes, free_bytes) VALUES (?, ?, ?)').run(ms, bytes, free)
      db.prepare('DELETE FROM data_dir_samples WHERE sampled_ms < ?').run(keepAfterMs)
    },
    /** The oldest and the latest sample. */
    samples: () =>
      db
        .prepare<[], { sampled_ms: number; bytes: number; free_bytes: number }>(
          'SELECT * FROM data_dir_samples WHERE sampled_ms IN ((SELECT min(sampled_ms) FROM data_dir_samples), (SELECT max(sampled_ms) FROM data_dir_samples)) ORDER BY sampled_ms',
        )
        .all(),
  }
}
export type RetentionRepo = ReturnType<typeof retentionRepo>
