// Alarm deliveries: the outbox as the worker reads it (heads, pending items, the records
// they carry) and the attempts it records, one by one or many at once.
import type { DB } from './index.js'
import { EVENT_FIELDS, type AuditTrailRow, type EventRow } from '../lib/events/ports.js'
import type { AttemptRecord, OutboxItem } from '../lib/alarms/ports.js'

export function deliveryStore(db: DB) {
  // The oldest pending delivery of each destination (the one it must receive next).
  const heads = db.prepare<[], { destination_id: string; id: number; next_attempt_ms: number }>(
    `SELECT d.id AS destination_id, o.id, o.next_attempt_ms FROM alarm_destinations d
     JOIN alarm_outbox o ON o.id = (SELECT id FROM alarm_outbox WHERE destination_id = d.id AND status = 'pending' ORDER BY id LIMIT 1)`,
  )
  const pendingAfter = db.prepare<[string, number, number], OutboxItem>(
    `SELECT id, destination_id, feed, record_id, delivery_id, queued_ms, attempts, next_attempt_ms FROM alarm_outbox
     WHERE destination_id = ? AND status = 'pending' AND id > ? ORDER BY id LIMIT ?`,
  )
  const outboxSeq = db.prepare<[], { seq: number }>(`SELECT seq FROM sqlite_sequence WHERE name = 'alarm_outbox'`)
  const outboxItem = db.prepare<[number], OutboxItem & { status: string; last_error: string | null; done_ms: number | null }>('SELECT * FROM alarm_outbox WHERE id = ?')
  const event = db.prepare<[number], EventRow>('SELECT * FROM events WHERE id = ?')
  const auditRecord = db.prepare<[number], AuditTrailRow>('SELECT * FROM audit_trail WHERE id = ?')
  const assetMessage = db.prepare<[number], { id: number; created_ms: number; kind: string; body: string }>('SELECT id, created_ms, kind, body FROM asset_messages WHERE id = ?')
  // The records of a batch of deliveries, one query each (ids as a JSON array); events as
  // arrays of the columns their view reads (EVENT_FIELDS), without an object per row.
  const eventsIn = db.prepare<[string], unknown[]>(`SELECT ${EVENT_FIELDS.join(', ')} FROM events WHERE id IN (SELECT value FROM json_each(?))`).raw(true)
  const auditRecordsIn = db.prepare<[string], AuditTrailRow>('SELECT * FROM audit_trail WHERE id IN (SELECT value FROM json_each(?))')
  const assetMessagesIn = db.prepare<[string], { id: number; created_ms: number; kind: string; body: string }>(
    'SELECT id, created_ms, kind, body FROM asset_messages WHERE id IN (SELECT value FROM json_each(?))',
  )

  const insertAttempt = db.prepare(
    `INSERT INTO alarm_attempts (outbox_id, destination_id, attempt, started_ms, duration_ms, outcome, error)
     VALUES (@outboxId, @destinationId, @attempt, @startedMs, @durationMs, @outcome, @error)`,
  )
  // A cancelled delivery (its destination was removed meanwhile) stays cancelled.
  const delivered = db.prepare<[number, number, number, number, number]>(
    `UPDATE alarm_outbox SET status = 'delivered', attempts = ?, last_error = NULL, done_ms = ?, started_ms = ?, duration_ms = ? WHERE id = ? AND status = 'pending'`,
  )
  const failed = db.prepare<[number, string | null, number, number]>(`UPDATE alarm_outbox SET status = 'failed', attempts = ?, last_error = ?, done_ms = ? WHERE id = ? AND status = 'pending'`)
  const retry = db.prepare<[number, string | null, number, number]>(`UPDATE alarm_outbox SET attempts = ?, last_error = ?, next_attempt_ms = ? WHERE id = ? AND status = 'pending'`)
  const destinationDelivered = db.prepare<[number, number, string]>(
    `UPDATE alarm_destinations SET last_attempt_ms = ?, last_status = 'delivered', last_error = NULL, last_delivered_ms = ? WHERE id = ?`,
  )
  const destinationFailed = db.prepare<[number, string | null, string]>(`UPDATE alarm_destinations SET last_attempt_ms = ?, last_status = 'failed', last_error = ? WHERE id = ?`)
  // Many outcomes at once, one statement each (attempts as a JSON array, in order):
  // o outbox id, d destination, a attempt, s started, u duration, c outcome, e error, n next attempt.
  const insertAttempts = db.prepare<[string]>(
    `INSERT INTO alarm_attempts (outbox_id, destination_id, attempt, started_ms, duration_ms, outcome, error)
     SELECT value->>'o', value->>'d', value->>'a', value->>'s', value->>'u', value->>'c', value->>'e' FROM json_each(?) ORDER BY key`,
  )
  // A delivered attempt is kept on its outbox row, not as a row of alarm_attempts (migration
  // 031): deliveries as a JSON array of [outbox id, attempt, started, duration, done].
  const deliveredMany = db.prepare<[string]>(
    `UPDATE alarm_outbox SET status = 'delivered', attempts = j.value->>1, last_error = NULL, done_ms = j.value->>4,
       started_ms = j.value->>2, duration_ms = j.value->>3
     FROM json_each(?) AS j WHERE alarm_outbox.id = j.value->>0 AND alarm_outbox.status = 'pending'`,
  )
  // Of those, the ones whose outbox row now holds the attempt (the others were no longer pending).
  const deliveredHeld = db
    .prepare<[string], number>(
      `SELECT o.id FROM json_each(?) AS j JOIN alarm_outbox o ON o.id = j.value->>0
       WHERE o.status = 'delivered' AND o.attempts = j.value->>1 AND o.started_ms = j.value->>2`,
    )
    .pluck()
  const retryMany = db.prepare<[string]>(
    `UPDATE alarm_outbox SET attempts = j.value->>'a', last_error = j.value->>'e', next_attempt_ms = j.value->>'n'
     FROM json_each(?) AS j WHERE alarm_outbox.id = j.value->>'o' AND alarm_outbox.status = 'pending'`,
  )
  const failedMany = db.prepare<[string], { id: number }>(
    `UPDATE alarm_outbox SET status = 'failed', attempts = j.value->>'a', last_error = j.value->>'e', done_ms = j.value->>'t'
     FROM json_each(?) AS j WHERE alarm_outbox.id = j.value->>'o' AND alarm_outbox.status = 'pending' RETURNING alarm_outbox.id AS id`,
  )
  const destinationState = db.prepare<[number, string, string | null, number | null, string]>(
    `UPDATE alarm_destinations SET last_attempt_ms = ?, last_status = ?, last_error = ?, last_delivered_ms = coalesce(?, last_delivered_ms) WHERE id = ?`,
  )
  // A delivery's attempts are numbered 1, 2, ... as they were made.
  const attempts = db.prepare<[number], { attempt: number; started_ms: number; duration_ms: number; outcome: string; error: string | null }>(
    'SELECT attempt, started_ms, duration_ms, outcome, error FROM alarm_attempt_history WHERE outbox_id = ? ORDER BY attempt',
  )

  return {
    /** The highest outbox id ever given: unchanged means nothing was queued since. */
    outboxSeq: () => outboxSeq.get()?.seq ?? 0,
    heads: () => heads.all(),
    pendingAfter: (destinationId: string, afterId: number, limit: number) => pendingAfter.all(destinationId, afterId, limit),
    outboxItem: (id: number) => outboxItem.get(id),
    attempts: (outboxId: number) => attempts.all(outboxId),
    event: (id: number) => event.get(id),
    auditRecord: (id: number) => auditRecord.get(id),
    assetMessage: (id: number) => assetMessage.get(id),
    /** The events of these ids that still exist (any order), as arrays of EVENT_FIELDS. */
    events: (ids: number[]): unknown[][] => (ids.length ? eventsIn.all(JSON.stringify(ids)) : []),
    auditRecords: (ids: number[]) => (ids.length ? auditRecordsIn.all(JSON.stringify(ids)) : []),
    assetMessages: (ids: number[]) => (ids.length ? assetMessagesIn.all(JSON.stringify(ids)) : []),

    /**
     * Records attempts and their outcomes in order, with one statement per kind of outcome
     * and one update per destination (its state after the last of them); call it inside a
     * transaction. A delivered attempt is kept on its outbox row (no row of alarm_attempts)
     * unless the delivery was no longer pending. Answers the outbox ids that failed for good
     * and were still pending (a delivery cancelled meanwhile stays cancelled and raises nothing).
     */
    recordAttempts(list: AttemptRecord[]): Set<number> {
      if (list.length === 0) return new Set()
      const done = (a: AttemptRecord) => a.startedMs + Math.round(a.durationMs)
      const row = (a: AttemptRecord) => ({ o: a.outboxId, d: a.destinationId, a: a.attempt, s: a.startedMs, u: a.durationMs, c: a.outcome, e: a.error, t: done(a), n: a.nextAttemptMs ?? null })
      const ok: AttemptRecord[] = []
      const later: ReturnType<typeof row>[] = []
      const failedRows: ReturnType<typeof row>[] = []
      for (const a of list) {
        if (a.outcome === 'delivered') ok.push(a)
        else (a.outcome === 'retry' ? later : failedRows).push(row(a))
      }
      // Attempts that get a row of alarm_attempts, in order: all but the delivered ones their outbox row holds.
      let rows = later.length + failedRows.length ? list : []
      if (ok.length) {
        const json = JSON.stringify(ok.map((a) => [a.outboxId, a.attempt, a.startedMs, a.durationMs, done(a)]))
        if (deliveredMany.run(json).changes < ok.length) {
          const held = new Set(deliveredHeld.all(json))
          rows = list.filter((a) => a.outcome !== 'delivered' || !held.has(a.outboxId))
        } else if (rows.length) rows = list.filter((a) => a.outcome !== 'delivered')
      }
      if (rows.length) insertAttempts.run(JSON.stringify(rows.map(row)))
      if (later.length) retryMany.run(JSON.stringify(later))
      const failedIds = new Set(failedRows.length ? failedMany.all(JSON.stringify(failedRows)).map((r) => r.id) : [])
      const state = new Map<string, { last: AttemptRecord; delivered: number | null }>()
      for (const a of list) {
        const s = state.get(a.destinationId) ?? { last: a, delivered: null }
        s.last = a
        if (a.outcome === 'delivered') s.delivered = done(a)
        state.set(a.destinationId, s)
      }
      for (const [id, { last, delivered }] of state) {
        const ok = last.outcome === 'delivered'
        destinationState.run(last.startedMs, ok ? 'delivered' : 'failed', ok ? null : last.error, delivered, id)
      }
      return failedIds
    },

    /** Records one attempt and its outcome; call it inside a transaction. Answers whether the delivery was still pending. */
    recordAttempt(a: AttemptRecord): boolean {
      const done = a.startedMs + Math.round(a.durationMs)
      let changed: number
      if (a.outcome === 'delivered') {
        // Kept on its outbox row, as recordAttempts does; a row of its own when no longer pending.
        changed = delivered.run(a.attempt, done, a.startedMs, a.durationMs, a.outboxId).changes
        if (changed === 0) insertAttempt.run({ ...a, nextAttemptMs: undefined })
        destinationDelivered.run(a.startedMs, done, a.destinationId)
      } else {
        insertAttempt.run({ ...a, nextAttemptMs: undefined })
        changed = a.outcome === 'failed' ? failed.run(a.attempt, a.error, done, a.outboxId).changes : retry.run(a.attempt, a.error, a.nextAttemptMs!, a.outboxId).changes
        destinationFailed.run(a.startedMs, a.error, a.destinationId)
      }
      return changed > 0
    },
  }
}
