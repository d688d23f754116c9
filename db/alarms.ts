import type { DB } from './index.js'
import { eventQueue, LAST_EVENT } from './alarm-queue.js'
import { EVENT_FIELDS, type AuditTrailRow, type EventRow } from './event-queries.js'

export type AlarmType = 'syslog' | 'webhook' | 'email'
export type AlarmFeed = 'events' | 'audit' | 'assets'

export interface DestinationRow {
  id: string
  name: string
  name_key: string
  type: AlarmType
  enabled: number
  min_severity: number
  categories: string
  audit_categories: string
  feed_events: number
  feed_audit: number
  feed_assets: number
  settings: string
  created_ms: number
  created_by: string | null
  updated_ms: number
  updated_by: string | null
  last_attempt_ms: number | null
  last_status: 'delivered' | 'failed' | null
  last_error: string | null
  last_delivered_ms: number | null
  /** It takes the events after this id (db/alarm-queue.ts). */
  events_from: number
}

export interface DestinationInput {
  id: string
  name: string
  type: AlarmType
  enabled: boolean
  minSeverity: number
  categories: string[]
  auditCategories: string[]
  feeds: AlarmFeed[]
  /** The type's settings, secrets included. */
  settings: object
}

export interface OutboxItem {
  id: number
  destination_id: string
  feed: AlarmFeed
  record_id: number
  delivery_id: string
  queued_ms: number
  attempts: number
  next_attempt_ms: number
}

export interface AttemptRecord {
  outboxId: number
  destinationId: string
  /** 1 for the first attempt. */
  attempt: number
  startedMs: number
  durationMs: number
  outcome: 'delivered' | 'retry' | 'failed'
  error: string | null
  /** For `retry`: when to try again. */
  nextAttemptMs?: number
}

export interface DeliveryCounts {
  pending: number
  failedLast24h: number
}

/** Longer than any attempt can take (PRIME_ALARM_TIMEOUT_SECONDS is at most 60). */
const PRUNE_DELIVERED_WINDOW_MS = 10 * 60_000

/** A category list as the triggers match it: `,USB,Host,`, or '' for all. */
const list = (names: string[]) => (names.length ? `,${names.join(',')},` : '')
export const parseList = (stored: string) => stored.split(',').filter(Boolean)

/** Seals the secrets of stored settings and opens them again (lib/alarms/sealed-settings.ts). */
export interface SettingsSealer {
  seal(settings: object, id: string): string
  /** The settings as JSON with their secrets open (stored ones not sealed pass as they are). */
  open(stored: string, id: string): string
  /** Whether stored settings hold secrets in the clear. */
  isPlain(stored: string): boolean
}

/** A destination's pending deliveries are counted up to this many: a scrape's cost stays bounded through an outage's backlog. */
export const BACKLOG_COUNT_MAX = 100_000

/** A destination's deliveries waiting (the metrics' outbox backlog and lag). */
export type DestinationBacklog = {
  destination: string
  name: string
  type: string
  /** At most BACKLOG_COUNT_MAX. */
  pending: number
  /** When its oldest pending delivery was queued (ms), null when none waits. */
  oldest: number | null
}

/** Without a sealer (scripts, tests of other things) settings are stored and read as they are. */
export function alarmsRepo(db: DB, sealer?: SettingsSealer) {
  const all = db.prepare<[], DestinationRow>('SELECT * FROM alarm_destinations ORDER BY name_key, id')
  const byId = db.prepare<[string], DestinationRow>('SELECT * FROM alarm_destinations WHERE id = ?')
  const byNameKey = db.prepare<[string], DestinationRow>('SELECT * FROM alarm_destinations WHERE name_key = ?')
  const count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM alarm_destinations')
  const insert = db.prepare(
    `INSERT INTO alarm_destinations (id, name, name_key, type, enabled, min_severity, categories, audit_categories,
       feed_events, feed_audit, feed_assets, settings, created_ms, created_by, updated_ms, updated_by, events_from)
     VALUES (@id, @name, @nameKey, @type, @enabled, @minSeverity, @categories, @auditCategories,
       @feedEvents, @feedAudit, @feedAssets, @settings, @ms, @user, @ms, @user, ${LAST_EVENT})`,
  )
  const update = db.prepare(
    `UPDATE alarm_destinations SET name = @name, name_key = @nameKey, type = @type, enabled = @enabled,
       min_severity = @minSeverity, categories = @categories, audit_categories = @auditCategories,
       feed_events = @feedEvents, feed_audit = @feedAudit, feed_assets = @feedAssets, settings = @settings,
       updated_ms = @ms, updated_by = @user,
       events_from = CASE WHEN (enabled = 0 OR feed_events = 0) AND @enabled = 1 AND @feedEvents = 1 THEN ${LAST_EVENT} ELSE events_from END
     WHERE id = @id`,
  )
  const remove = db.prepare<[string]>('DELETE FROM alarm_destinations WHERE id = ?')
  const setSettings = db.prepare<[string, string]>('UPDATE alarm_destinations SET settings = ? WHERE id = ?')
  function opened<R extends DestinationRow | undefined>(row: R): R {
    return row && sealer ? { ...row, settings: sealer.open(row.settings, row.id) } : row
  }
  const cancelPending = db.prepare<[number, string]>(`UPDATE alarm_outbox SET status = 'cancelled', done_ms = ? WHERE destination_id = ? AND status = 'pending'`)
  const pendingCount = db.prepare<[string], { n: number }>(`SELECT count(*) AS n FROM alarm_outbox WHERE destination_id = ? AND status = 'pending'`)
  const failedSince = db.prepare<[string, number], { n: number }>(`SELECT count(*) AS n FROM alarm_outbox WHERE destination_id = ? AND status = 'failed' AND done_ms >= ?`)
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

  const subscribedToAssets = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM alarm_destinations WHERE enabled = 1 AND feed_assets = 1')
  const insertAsset = db.prepare<[number, string, string | null, string]>('INSERT INTO asset_messages (created_ms, kind, asset_key, body) VALUES (?, ?, ?, ?)')

  const queue = eventQueue(db)

  const backlog = db.prepare<[], DestinationBacklog>(
    `SELECT d.id AS destination, d.name, d.type,
       (SELECT count(*) FROM (SELECT 1 FROM alarm_outbox WHERE destination_id = d.id AND status = 'pending' LIMIT ${BACKLOG_COUNT_MAX}) w) AS pending,
       (SELECT queued_ms FROM alarm_outbox WHERE destination_id = d.id AND status = 'pending' ORDER BY id LIMIT 1) AS oldest
     FROM alarm_destinations d ORDER BY d.name`,
  )
  const health = db.prepare<[number], { destinations: number; enabled: number; pending: number; oldest: number | null; failed: number; retrying: number }>(
    `SELECT (SELECT count(*) FROM alarm_destinations) AS destinations,
       (SELECT count(*) FROM alarm_destinations WHERE enabled = 1) AS enabled,
       (SELECT count(*) FROM alarm_outbox WHERE status = 'pending') AS pending,
       (SELECT min(queued_ms) FROM alarm_outbox WHERE status = 'pending') AS oldest,
       (SELECT count(*) FROM alarm_outbox WHERE status = 'failed' AND done_ms >= ?) AS failed,
       (SELECT count(*) FROM alarm_destinations d WHERE d.last_status = 'failed'
          AND EXISTS (SELECT 1 FROM alarm_outbox WHERE destination_id = d.id AND status = 'pending')) AS retrying`,
  )
  const pruneOutbox = db.prepare<[number]>(`DELETE FROM alarm_outbox WHERE status <> 'pending' AND done_ms < ?`)
  const pruneAttempts = db.prepare<[number]>('DELETE FROM alarm_attempts WHERE started_ms < ?')
  // A delivered attempt kept on its outbox row goes when it started before the mark, as its
  // row of alarm_attempts did, though the delivery (done at most a send's duration later,
  // bounded by PRIME_ALARM_TIMEOUT_SECONDS <= 60 s) stays until it ended before the mark.
  const pruneDeliveredAttempts = db.prepare<[number, number, number]>(
    `UPDATE alarm_outbox SET started_ms = NULL, duration_ms = NULL
     WHERE status <> 'pending' AND done_ms >= ? AND done_ms < ? AND started_ms < ?`,
  )
  const pruneAssets = db.prepare<[number]>(
    `DELETE FROM asset_messages WHERE created_ms < ?
       AND NOT EXISTS (SELECT 1 FROM alarm_outbox WHERE feed = 'assets' AND record_id = asset_messages.id AND status = 'pending')`,
  )
  // A delivery's attempts are numbered 1, 2, ... as they were made.
  const attempts = db.prepare<[number], { attempt: number; started_ms: number; duration_ms: number; outcome: string; error: string | null }>(
    'SELECT attempt, started_ms, duration_ms, outcome, error FROM alarm_attempt_history WHERE outbox_id = ? ORDER BY attempt',
  )

  const params = (d: DestinationInput, ms: number, user: string | null) => ({
    id: d.id,
    name: d.name,
    nameKey: d.name.toLowerCase(),
    type: d.type,
    enabled: d.enabled ? 1 : 0,
    minSeverity: d.minSeverity,
    categories: list(d.categories),
    auditCategories: list(d.auditCategories),
    feedEvents: d.feeds.includes('events') ? 1 : 0,
    feedAudit: d.feeds.includes('audit') ? 1 : 0,
    feedAssets: d.feeds.includes('assets') ? 1 : 0,
    settings: sealer ? sealer.seal(d.settings, d.id) : JSON.stringify(d.settings),
    ms,
    user,
  })

  return {
    all: () => all.all().map(opened),
    byId: (id: string) => opened(byId.get(id)),
    byName: (name: string) => opened(byNameKey.get(name.toLowerCase())),
    /** Seals the settings stored in the clear (before sealing existed); answers how many. */
    sealStored(): number {
      if (!sealer) return 0
      let n = 0
      db.transaction(() => {
        for (const row of all.all()) {
          if (!sealer.isPlain(row.settings)) continue
          setSettings.run(sealer.seal(JSON.parse(row.settings), row.id), row.id)
          n++
        }
      })()
      return n
    },
    count: () => count.get()!.n,
    insert: (d: DestinationInput, ms: number, user: string | null) => insert.run(params(d, ms, user)),
    /**
     * A change applies to the events stored after it: those stored before are queued first,
     * with the destinations as they were (all of them: an admin's change waits for a burst's).
     */
    update: (d: DestinationInput, ms: number, user: string | null) =>
      db.transaction(() => {
        queue.all()
        return update.run(params(d, ms, user)).changes
      })(),
    /** Deletes a destination and cancels its pending deliveries (their attempts stay). Answers how many were cancelled. */
    remove(id: string, ms: number): number {
      if (remove.run(id).changes === 0) return -1
      return cancelPending.run(ms, id).changes
    },
    /** Pending deliveries, those of the events stored and not queued yet included (up to 10,000 of these read). */
    counts(id: string, now: number): DeliveryCounts {
      const d = byId.get(id)
      let waiting = 0
      if (d?.enabled && d.feed_events) waiting = queue.unqueuedFor(d)
      return { pending: pendingCount.get(id)!.n + waiting, failedLast24h: failedSince.get(id, now - 24 * 3600_000)!.n }
    },

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

    /**
     * Publishes asset-feed messages: stores them in one transaction, which queues each for
     * every enabled destination subscribed to assets. Answers the deliveries queued
     * (messages times destinations); with no destination subscribed, nothing is stored.
     */
    publishAssets(createdMs: number, messages: object[]): number {
      return db.transaction(() => {
        const destinations = subscribedToAssets.get()!.n
        if (destinations === 0 || messages.length === 0) return 0
        queue.before('assets')
        for (const m of messages) {
          const body = m as { kind?: unknown; assetId?: unknown }
          insertAsset.run(createdMs, String(body.kind ?? 'message'), body.assetId == null ? null : String(body.assetId), JSON.stringify(m))
        }
        return destinations * messages.length
      })()
    },
    /** How many enabled destinations receive the asset feed. */
    assetSubscribers: () => subscribedToAssets.get()!.n,

    /**
     * Destinations, pending deliveries and failures. `unqueued`: events stored and not queued
     * for delivery yet.
     */
    health(now: number) {
      const h = health.get(now - 24 * 3600_000)!
      return { ...h, unqueued: h.enabled === 0 ? 0 : queue.unqueued() }
    },
    /** Each destination's pending deliveries and when its oldest was queued (the metrics' outbox lag). */
    backlog: (): DestinationBacklog[] => backlog.all(),
    /** Queues the deliveries of events stored since the last call, a slice: answers the rows queued. */
    queueEvents: (): number => db.transaction(queue.slice).immediate(),
    /** Queues the deliveries of every event stored so far; answers the rows queued. */
    queueAllEvents: (): number => db.transaction(queue.all).immediate(),
    /** Whether events are stored that are not queued for delivery yet. */
    eventsWaiting: (): boolean => queue.waiting(),
    /** Drops finished deliveries, attempts and delivered asset messages older than `before`. */
    prune(before: number) {
      return db.transaction(() => ({
        outbox: pruneOutbox.run(before).changes,
        attempts: pruneAttempts.run(before).changes,
        /** Delivered attempts dropped from outbox rows that stay a little longer. */
        deliveredAttempts: pruneDeliveredAttempts.run(before, before + PRUNE_DELIVERED_WINDOW_MS, before).changes,
        assets: pruneAssets.run(before).changes,
      }))()
    },
  }
}
export type AlarmsRepo = ReturnType<typeof alarmsRepo>
