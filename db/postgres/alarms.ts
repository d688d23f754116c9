// Alarm destinations, their outbox and attempts on PostgreSQL (db/alarms.ts on SQLite).
//
// Several processes may drain the outbox: a destination's deliveries are taken by one
// process at a time, under a lease on the destination (table `leases`, name
// `alarm-destination:<id>`). `pendingAfter` takes or renews the lease before it answers a
// page (nothing when another process holds it), `recordAttempts` renews it, and a lane that
// finds nothing left lets it go; a process that stops renewing loses it after its lease
// (alarmLeaseMs: longer than one delivery may take, so set by PRIME_ALARM_TIMEOUT_SECONDS) and
// another takes the destination over from its oldest pending delivery. So the deliveries of
// a destination go out in outbox order while nodes compete, at least once (a delivery sent
// by a process that lost its lease before writing the outcome is sent again, with the same
// delivery id).
import { randomUUID } from 'node:crypto'
import { type AlarmsRepo, BACKLOG_COUNT_MAX } from '../alarms.js'
import type { AttemptRecord, DeliveryCounts, DestinationBacklog, DestinationInput, DestinationRow, OutboxItem, SettingsSealer, TimeRange } from '../../lib/alarms/ports.js'
import { type AuditTrailRow, EVENT_FIELDS, type EventRow } from '../../lib/events/ports.js'
import type { Async } from '../unit-of-work.js'
import { PG_LAST_EVENT, pgEventDaysAfter, pgEventQueue, pgEventsOwed } from './alarm-queue.js'
import type { Postgres } from './connection.js'
import { refusedAsDuplicate } from './duplicates.js'
import { holdLimit } from './limits.js'

/** Names are unique case-insensitively (migration 005): a name taken meanwhile by another unit of work. */
const NAME_TAKEN = 'alarm_destinations_name_key_key'

/**
 * How long a process's lease on a destination lasts, renewed with every page and every batch
 * of outcomes: longer than the longest stretch between two renewals, one delivery (the
 * address resolved, a connection made, the message written or answered: each within the
 * send timeout, PRIME_ALARM_TIMEOUT_SECONDS, so three of them at most) and the outcomes'
 * flush, with room. A node that dies holding it delays its destinations by that much.
 */
export const alarmLeaseMs = (timeoutMs: number) => 3 * timeoutMs + 10_000
const LEASE = 'alarm-destination:'
/** Migration 005's outbox lock: outbox ids are drawn, and the destinations the event queue reads are changed, under it. */
export const OUTBOX_LOCK = 7022100501
/** As db/alarms.ts: longer than any attempt can take. */
const PRUNE_DELIVERED_WINDOW_MS = 10 * 60_000

/** Records by id ($1), within their creation times ($2, $3) when known: the partitions of those days only. */
const byIds = (created?: TimeRange) => (created ? 'id = ANY($1::bigint[]) AND created_ms BETWEEN $2 AND $3' : 'id = ANY($1::bigint[])')
const withRange = (params: unknown[], created?: TimeRange) => (created ? [...params, created.fromMs, created.toMs] : params)

const list = (names: string[]) => (names.length ? `,${names.join(',')},` : '')

type AssetMessage = { id: number; created_ms: number; kind: string; body: string }

export interface PgAlarmsOptions {
  /** Who holds this process's leases on destinations (a fresh id by default). */
  holder?: string
  /** alarmLeaseMs of the send timeout (of its default, 10 s, when not given). */
  leaseMs?: number
}

export type PgAlarmsRepo = Async<Omit<AlarmsRepo, 'insert' | 'recordAttempts' | 'recordAttempt'>> & {
  insert(d: DestinationInput, ms: number, user: string | null): Promise<{ changes: number }>
  /** As SQLite's; it also renews this process's leases on the destinations named. */
  recordAttempts(list: AttemptRecord[]): Promise<Set<number>>
  recordAttempt(a: AttemptRecord): Promise<boolean>
  /** Lets go of this process's lease on a destination (a lane that ends early). */
  release(destinationId: string): Promise<void>
}

/** Without a sealer (scripts, tests of other things) settings are stored and read as they are. */
export function pgAlarmsRepo(db: Postgres, sealer?: SettingsSealer, options: PgAlarmsOptions = {}): PgAlarmsRepo {
  // Rows typed as the SQLite repository's interfaces (which have no index signature).
  const select = <T>(sql: string, params?: unknown[]) => db.query(sql, params) as Promise<T[]>
  const first = <T>(sql: string, params?: unknown[]) => db.one(sql, params) as Promise<T | undefined>
  const holder = options.holder ?? randomUUID()
  const leaseMs = options.leaseMs ?? alarmLeaseMs(10_000)
  const queue = pgEventQueue(db)

  const opened = <R extends DestinationRow | undefined>(row: R): R => (row && sealer ? { ...row, settings: sealer.open(row.settings, row.id) } : row)

  const params = (d: DestinationInput, ms: number, user: string | null) => [
    d.id,
    d.name,
    d.name.toLowerCase(),
    d.type,
    d.enabled ? 1 : 0,
    d.minSeverity,
    list(d.categories),
    list(d.auditCategories),
    d.feeds.includes('events') ? 1 : 0,
    d.feeds.includes('audit') ? 1 : 0,
    d.feeds.includes('assets') ? 1 : 0,
    sealer ? sealer.seal(d.settings, d.id) : JSON.stringify(d.settings),
    ms,
    user,
  ]

  /** Migration 005's outbox lock, held to the end of the caller's unit of work. */
  const outboxLock = () => db.query('SELECT pg_advisory_xact_lock($1)', [OUTBOX_LOCK])

  const release = async (destinationId: string) => {
    // Expired rather than deleted: the fence keeps growing with every change of holder.
    await db.run(`UPDATE leases SET expires_at = '-infinity' WHERE name = $1 AND holder = $2`, [LEASE + destinationId, holder])
  }

  const record = (attempts: AttemptRecord[]) => recordOutcomes(db, attempts, holder, leaseMs)

  return {
    all: async () => (await select<DestinationRow>('SELECT * FROM alarm_destinations ORDER BY name_key, id')).map(opened),
    async byId(id: string, hold?: boolean) {
      // The outbox lock first, as the change (queue.all) and the removal take it before the
      // row: held in the other order, a removal waiting for the row would deadlock with it.
      if (hold) await outboxLock()
      return opened(await first<DestinationRow>(`SELECT * FROM alarm_destinations WHERE id = $1${hold ? ' FOR UPDATE' : ''}`, [id]))
    },
    byName: async (name: string) => opened(await first<DestinationRow>('SELECT * FROM alarm_destinations WHERE name_key = $1', [name.toLowerCase()])),
    /** Seals the settings stored in the clear (before sealing existed); answers how many. */
    async sealStored(): Promise<number> {
      if (!sealer) return 0
      return db.uow.run(async () => {
        const rows = await select<{ id: string; settings: string }>('SELECT id, settings FROM alarm_destinations ORDER BY name_key, id FOR UPDATE')
        const plain = rows.filter((r) => sealer.isPlain(r.settings))
        if (plain.length === 0) return 0
        await db.run('UPDATE alarm_destinations d SET settings = x.settings FROM unnest($1::text[], $2::text[]) AS x(id, settings) WHERE d.id = x.id', [
          plain.map((r) => r.id),
          plain.map((r) => sealer.seal(JSON.parse(r.settings), r.id)),
        ])
        return plain.length
      })
    },
    async count(hold?: boolean) {
      if (hold) await holdLimit(db, 'alarm destinations')
      return (await db.value<number>('SELECT count(*) FROM alarm_destinations'))!
    },
    /** Under the outbox lock: a slice of the event queue queueing meanwhile sees the new destination or ends before it is written. */
    insert: (d: DestinationInput, ms: number, user: string | null) =>
      db.uow.run(async () => {
        await outboxLock()
        const changes = await refusedAsDuplicate(NAME_TAKEN, () =>
          db.run(
            `INSERT INTO alarm_destinations (id, name, name_key, type, enabled, min_severity, categories, audit_categories,
             feed_events, feed_audit, feed_assets, settings, created_ms, created_by, updated_ms, updated_by, events_from)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $13, $14, ${PG_LAST_EVENT})`,
            params(d, ms, user),
          ),
        )
        return { changes }
      }),
    /**
     * A change applies to the events stored after it: those stored before are queued first,
     * with the destinations as they were.
     */
    update: (d: DestinationInput, ms: number, user: string | null) =>
      db.uow.run(async () => {
        await queue.all()
        return refusedAsDuplicate(NAME_TAKEN, () =>
          db.run(
            `UPDATE alarm_destinations SET name = $2, name_key = $3, type = $4, enabled = $5::int, min_severity = $6, categories = $7,
             audit_categories = $8, feed_events = $9::int, feed_audit = $10, feed_assets = $11, settings = $12, updated_ms = $13, updated_by = $14,
             events_from = CASE WHEN (enabled = 0 OR feed_events = 0) AND $5::int = 1 AND $9::int = 1 THEN ${PG_LAST_EVENT} ELSE events_from END
           WHERE id = $1`,
            params(d, ms, user),
          ),
        )
      }),
    /** Deletes a destination and cancels its pending deliveries (their attempts stay). Answers how many were cancelled (-1: none was there). */
    remove: (id: string, ms: number) =>
      db.uow.run(async () => {
        // Under the outbox lock: no slice queues deliveries for it after its pending ones are cancelled.
        await outboxLock()
        return (await db.value<number>(
          `WITH d AS (DELETE FROM alarm_destinations WHERE id = $1 RETURNING id),
           c AS (UPDATE alarm_outbox SET status = 'cancelled', done_ms = $2 WHERE destination_id IN (SELECT id FROM d) AND status = 'pending' RETURNING 1),
           l AS (DELETE FROM leases WHERE name = $3 || $1 AND EXISTS (SELECT 1 FROM d))
           SELECT CASE WHEN EXISTS (SELECT 1 FROM d) THEN (SELECT count(*) FROM c) ELSE -1 END`,
          [id, ms, LEASE],
        ))!
      }),
    /** Pending deliveries, those of the events stored and not queued yet included (up to 10,000 of these read). */
    async counts(id: string, now: number): Promise<DeliveryCounts> {
      // The days that hold its events not queued yet first (migration 016): an id range alone probes every day's partition.
      const start = await db.value<number>(
        'SELECT greatest(q.up_to, d.events_from) FROM alarm_destinations d, alarm_events_queued q WHERE d.id = $1 AND d.enabled = 1 AND d.feed_events = 1 AND q.id = 1',
        [id],
      )
      const days = start === undefined || start === null ? null : await pgEventDaysAfter(db, start)
      const r = await first<DeliveryCounts>(
        `SELECT (SELECT count(*) FROM alarm_outbox WHERE destination_id = $1 AND status = 'pending')
             + ${days ? `coalesce(${pgEventsOwed('$1', '$3', '$4', '$5')}, 0)` : '0'} AS pending,
           (SELECT count(*) FROM alarm_outbox WHERE destination_id = $1 AND status = 'failed' AND done_ms >= $2) AS "failedLast24h"`,
        days ? [id, now - 24 * 3600_000, days.top, days.fromMs, days.toMs] : [id, now - 24 * 3600_000],
      )
      return r!
    },

    /**
     * The highest outbox id committed: unchanged means nothing was queued since (outbox ids
     * become visible in id order, migration 005).
     */
    outboxSeq: async () => (await db.value<number>('SELECT coalesce(max(id), 0) FROM alarm_outbox'))!,
    /** The oldest pending delivery of each destination no other process holds a lease on. */
    heads: () =>
      select<{ destination_id: string; id: number; next_attempt_ms: number }>(
        `SELECT d.id AS destination_id, o.id, o.next_attempt_ms FROM alarm_destinations d
         CROSS JOIN LATERAL (SELECT id, next_attempt_ms FROM alarm_outbox WHERE destination_id = d.id AND status = 'pending' ORDER BY id LIMIT 1) o
         WHERE NOT EXISTS (SELECT 1 FROM leases l WHERE l.name = $2 || d.id AND l.holder <> $1 AND l.expires_at > now())
         ORDER BY d.id`,
        [holder, LEASE],
      ),
    /**
     * A destination's pending deliveries after `afterId`, in order, once this process holds
     * the destination's lease (taken or renewed here); none while another process holds it.
     * Finding none, it lets the lease go. Two statements: the deliveries are read in a
     * snapshot taken once the lease is held, so that they include the outcomes the previous
     * holder wrote before it let the lease go.
     */
    async pendingAfter(destinationId: string, afterId: number, limit: number): Promise<OutboxItem[]> {
      const held = await db.run(
        `INSERT INTO leases AS l (name, holder, fence, expires_at) VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
           fence = l.fence + CASE WHEN l.holder = excluded.holder THEN 0 ELSE 1 END
         WHERE l.holder = excluded.holder OR l.expires_at <= now()`,
        [LEASE + destinationId, holder, leaseMs],
      )
      if (held === 0) return []
      const rows = await select<OutboxItem>(
        `SELECT id, destination_id, feed, record_id, record_ms, delivery_id, queued_ms, attempts, next_attempt_ms FROM alarm_outbox
         WHERE destination_id = $1 AND status = 'pending' AND id > $2 ORDER BY id LIMIT $3`,
        [destinationId, afterId, limit],
      )
      if (rows.length === 0) await release(destinationId)
      return rows
    },
    release,
    outboxItem: (id: number) => first<OutboxItem & { status: string; last_error: string | null; done_ms: number | null }>('SELECT * FROM alarm_outbox WHERE id = $1', [id]),
    /** A delivery's attempts, numbered 1, 2, ... as they were made. */
    attempts: (outboxId: number) =>
      select<{ attempt: number; started_ms: number; duration_ms: number; outcome: string; error: string | null }>(
        'SELECT attempt, started_ms, duration_ms, outcome, error FROM alarm_attempt_history WHERE outbox_id = $1 ORDER BY attempt',
        [outboxId],
      ),
    event: (id: number) => first<EventRow & Record<string, unknown>>('SELECT * FROM events WHERE id = $1', [id]) as Promise<EventRow | undefined>,
    auditRecord: (id: number) => first<AuditTrailRow & Record<string, unknown>>('SELECT * FROM audit_trail WHERE id = $1', [id]) as Promise<AuditTrailRow | undefined>,
    assetMessage: (id: number) => first<AssetMessage>('SELECT id, created_ms, kind, body FROM asset_messages WHERE id = $1', [id]),
    /**
     * The events of these ids that still exist (any order), as arrays of EVENT_FIELDS. With
     * their creation times only those days' partitions are read; an id alone names no day.
     */
    events: async (ids: number[], created?: TimeRange): Promise<unknown[][]> =>
      ids.length ? (await select<{ r: unknown[] }>(`SELECT json_build_array(${EVENT_FIELDS.join(', ')}) AS r FROM events WHERE ${byIds(created)}`, withRange([ids], created))).map((x) => x.r) : [],
    auditRecords: async (ids: number[], created?: TimeRange) =>
      ids.length ? ((await db.query(`SELECT * FROM audit_trail WHERE ${byIds(created)}`, withRange([ids], created))) as unknown as AuditTrailRow[]) : [],
    assetMessages: async (ids: number[]) => (ids.length ? select<AssetMessage>('SELECT id, created_ms, kind, body FROM asset_messages WHERE id = ANY($1::bigint[])', [ids]) : []),

    /**
     * Records attempts and their outcomes in order, in one statement; call it inside a unit
     * of work. A delivered attempt is kept on its outbox row (no row of alarm_attempts)
     * unless the delivery was no longer pending. Answers the outbox ids that failed for good
     * and were still pending (a delivery cancelled meanwhile stays cancelled and raises nothing).
     */
    async recordAttempts(attempts: AttemptRecord[]): Promise<Set<number>> {
      if (attempts.length === 0) return new Set()
      return new Set((await record(attempts)).failed)
    },
    /** Records one attempt and its outcome. Answers whether the delivery was still pending. */
    recordAttempt: async (a: AttemptRecord) => (await record([a])).changed > 0,

    /**
     * Publishes asset-feed messages: stores them in one unit of work, which queues each for
     * every enabled destination subscribed to assets (008's trigger). Answers the deliveries
     * queued (messages times destinations); with no destination subscribed, nothing is stored.
     */
    publishAssets: (createdMs: number, messages: object[]) =>
      db.uow.run(async () => {
        const destinations = (await db.value<number>('SELECT count(*) FROM alarm_destinations WHERE enabled = 1 AND feed_assets = 1'))!
        if (destinations === 0 || messages.length === 0) return 0
        await queue.before('assets')
        const bodies = messages as { kind?: unknown; assetId?: unknown }[]
        await db.run(
          `INSERT INTO asset_messages (created_ms, kind, asset_key, body)
           SELECT $1, m.kind, m.asset_key, m.body FROM unnest($2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS m(kind, asset_key, body, n) ORDER BY m.n`,
          [createdMs, bodies.map((b) => String(b.kind ?? 'message')), bodies.map((b) => (b.assetId == null ? null : String(b.assetId))), messages.map((m) => JSON.stringify(m))],
        )
        return destinations * messages.length
      }),
    /** How many enabled destinations receive the asset feed. */
    assetSubscribers: async () => (await db.value<number>('SELECT count(*) FROM alarm_destinations WHERE enabled = 1 AND feed_assets = 1'))!,

    /** Destinations, pending deliveries and failures. `unqueued`: events stored and not queued for delivery yet. */
    async health(now: number) {
      const r = await first<{ destinations: number; enabled: number; pending: number; oldest: number | null; failed: number; retrying: number; unqueued: number }>(
        `SELECT (SELECT count(*) FROM alarm_destinations) AS destinations,
           (SELECT count(*) FROM alarm_destinations WHERE enabled = 1) AS enabled,
           (SELECT count(*) FROM alarm_outbox WHERE status = 'pending') AS pending,
           (SELECT min(queued_ms) FROM alarm_outbox WHERE status = 'pending') AS oldest,
           (SELECT count(*) FROM alarm_outbox WHERE status = 'failed' AND done_ms >= $1) AS failed,
           (SELECT count(*) FROM alarm_destinations d WHERE d.last_status = 'failed'
              AND EXISTS (SELECT 1 FROM alarm_outbox WHERE destination_id = d.id AND status = 'pending')) AS retrying,
           CASE WHEN EXISTS (SELECT 1 FROM alarm_destinations WHERE enabled = 1)
             THEN (SELECT greatest(0, ${PG_LAST_EVENT} - up_to) FROM alarm_events_queued WHERE id = 1) ELSE 0 END AS unqueued`,
        [now - 24 * 3600_000],
      )
      return r!
    },
    /** Each destination's pending deliveries and when its oldest was queued (the metrics' outbox lag). */
    backlog: () =>
      db.query<DestinationBacklog>(
        `SELECT d.id AS destination, d.name, d.type,
       (SELECT count(*) FROM (SELECT 1 FROM alarm_outbox WHERE destination_id = d.id AND status = 'pending' LIMIT ${BACKLOG_COUNT_MAX}) w) AS pending,
       (SELECT queued_ms FROM alarm_outbox WHERE destination_id = d.id AND status = 'pending' ORDER BY id LIMIT 1) AS oldest
     FROM alarm_destinations d ORDER BY d.name`,
      ),
    /** Queues the deliveries of events stored since the last call, a slice: answers the rows queued. */
    queueEvents: () => queue.slice(),
    /** Queues the deliveries of every event stored so far; answers the rows queued. */
    queueAllEvents: () => queue.all(),
    /** Whether events are stored that are not queued for delivery yet. */
    eventsWaiting: () => queue.waiting(),
    /** Drops finished deliveries, attempts and delivered asset messages older than `before`. */
    async prune(before: number) {
      const r = await first<{ outbox: number; attempts: number; deliveredAttempts: number; assets: number }>(
        `WITH o AS (DELETE FROM alarm_outbox WHERE status <> 'pending' AND done_ms < $1 RETURNING 1),
         a AS (DELETE FROM alarm_attempts WHERE started_ms < $1 RETURNING 1),
         -- A delivered attempt kept on its outbox row goes when it started before the mark, though
         -- the delivery stays until it ended before the mark.
         da AS (UPDATE alarm_outbox SET started_ms = NULL, duration_ms = NULL
                WHERE status <> 'pending' AND done_ms >= $1 AND done_ms < $2 AND started_ms < $1 RETURNING 1),
         s AS (DELETE FROM asset_messages m WHERE created_ms < $1
                AND NOT EXISTS (SELECT 1 FROM alarm_outbox WHERE feed = 'assets' AND record_id = m.id AND status = 'pending') RETURNING 1)
         SELECT (SELECT count(*) FROM o) AS outbox, (SELECT count(*) FROM a) AS attempts,
           (SELECT count(*) FROM da) AS "deliveredAttempts", (SELECT count(*) FROM s) AS assets`,
        [before, before + PRUNE_DELIVERED_WINDOW_MS],
      )
      return r!
    },
  }
}

/** One statement for a batch of outcomes (see recordAttempts); answers the failed ids and how many deliveries changed. */
async function recordOutcomes(db: Postgres, attempts: AttemptRecord[], holder: string, leaseMs: number): Promise<{ failed: number[]; changed: number }> {
  const rows = attempts.map((a, k) => ({
    k,
    o: a.outboxId,
    d: a.destinationId,
    a: a.attempt,
    s: a.startedMs,
    u: a.durationMs,
    c: a.outcome,
    e: a.error,
    t: a.startedMs + Math.round(a.durationMs),
    n: a.nextAttemptMs ?? null,
  }))
  const r = (await db.one(
    `WITH a AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(k int, o bigint, d text, a int, s bigint, u float8, c text, e text, t bigint, n bigint)
     ), ok AS (
       UPDATE alarm_outbox ob SET status = 'delivered', attempts = a.a, last_error = NULL, done_ms = a.t, started_ms = a.s, duration_ms = a.u
       FROM a WHERE a.c = 'delivered' AND ob.id = a.o AND ob.status = 'pending' RETURNING ob.id
     ), re AS (
       UPDATE alarm_outbox ob SET attempts = a.a, last_error = a.e, next_attempt_ms = a.n
       FROM a WHERE a.c = 'retry' AND ob.id = a.o AND ob.status = 'pending' RETURNING ob.id
     ), fa AS (
       UPDATE alarm_outbox ob SET status = 'failed', attempts = a.a, last_error = a.e, done_ms = a.t
       FROM a WHERE a.c = 'failed' AND ob.id = a.o AND ob.status = 'pending' RETURNING ob.id
     ), ins AS (
       -- A delivered attempt is kept on its outbox row; a row of its own when the delivery was no longer pending.
       INSERT INTO alarm_attempts (outbox_id, destination_id, attempt, started_ms, duration_ms, outcome, error)
       SELECT a.o, a.d, a.a, a.s, a.u, a.c, a.e FROM a WHERE a.c <> 'delivered' OR a.o NOT IN (SELECT id FROM ok) ORDER BY a.k
     ), st AS (
       -- Each destination's state after the last of its attempts.
       UPDATE alarm_destinations dd SET last_attempt_ms = l.s, last_status = CASE WHEN l.c = 'delivered' THEN 'delivered' ELSE 'failed' END,
         last_error = CASE WHEN l.c = 'delivered' THEN NULL ELSE l.e END, last_delivered_ms = coalesce(l.done, dd.last_delivered_ms)
       FROM (SELECT DISTINCT ON (a.d) a.d, a.s, a.c, a.e,
               (SELECT a2.t FROM a a2 WHERE a2.d = a.d AND a2.c = 'delivered' ORDER BY a2.k DESC LIMIT 1) AS done
             FROM a ORDER BY a.d, a.k DESC) l
       WHERE dd.id = l.d
     ), renewed AS (
       UPDATE leases SET expires_at = now() + $3 * interval '1 millisecond'
       WHERE holder = $2 AND name IN (SELECT $4 || a.d FROM a)
     )
     SELECT coalesce((SELECT array_agg(id) FROM fa), '{}') AS failed,
       (SELECT count(*) FROM ok) + (SELECT count(*) FROM re) + (SELECT count(*) FROM fa) AS changed`,
    [JSON.stringify(rows), holder, leaseMs, LEASE],
  )) as { failed: string[]; changed: number } | undefined
  return { failed: r!.failed.map(Number), changed: r!.changed }
}
