// Writing events on PostgreSQL: the day partitions a batch needs, the feed lock that makes
// ids visible in id order, one INSERT per batch.
import type { EventBatch, EventCategory, EventInput } from '../../lib/events/ports.js'
import { type Postgres, prepared } from './connection.js'
import type { RecordTable } from './events-query.js'

const DAY_MS = 86_400_000

/**
 * The feeds' locks (pg_advisory_xact_lock's 64-bit keys, "prime-ev" and "prime-au"). A
 * writer takes its table's lock right before it takes ids, and holds it until it commits:
 * ids then become visible in id order across every process, so that a SIEM poller
 * following FromEventId / FromAuditTrailId never passes over a record committed late (a
 * sequence alone hands out ids that commit out of order).
 */
export const FEED_LOCKS: Record<RecordTable, string> = {
  events: 0x7072696d65_6576n.toString(),
  audit_trail: 0x7072696d65_6175n.toString(),
}

/**
 * The day partitions of events and audit records (ensure_partitions, migration 004), made
 * when a record falls in a day without one. The days known to be made are remembered per
 * process, a hint only: a day dropped by another node's retention is made again by nobody
 * here, and its late records land in the default partition, where every query still finds
 * them (the next ensure_partitions of that day moves them out).
 */
export function recordPartitions(db: Postgres) {
  const made: Record<RecordTable, Set<number>> = { events: new Set(), audit_trail: new Set() }
  const dayOf = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS
  return {
    /**
     * Makes the partitions of the days of these times. In the caller's unit of work when
     * there is one (the partition is then made, or not, with its records); remembered once
     * committed.
     */
    async ensure(table: RecordTable, times: Iterable<number>): Promise<void> {
      const days = [...new Set([...times].map(dayOf))].filter((d) => !made[table].has(d))
      if (!days.length) return
      await db.query('SELECT ensure_partitions($1, d, d) FROM unnest($2::bigint[]) d', [table, days])
      const remember = () => {
        for (const d of days) made[table].add(d)
      }
      if (!db.uow.afterCommit(remember)) remember()
    },
    /** Makes today's partitions and those of the next `days` days ahead of their records (a daily background task). */
    async ahead(now: number, days = 2): Promise<number> {
      let n = 0
      for (const table of ['events', 'audit_trail'] as const) {
        n += (await db.value<number>('SELECT ensure_partitions($1, $2, $3)', [table, now, now + days * DAY_MS])) ?? 0
        for (let d = dayOf(now); d <= now + days * DAY_MS; d += DAY_MS) made[table].add(d)
      }
      return n
    },
    /** Forgets the days before `ms` (their partitions were dropped). */
    forget(table: RecordTable, beforeMs: number): void {
      for (const d of made[table]) if (d + DAY_MS <= beforeMs) made[table].delete(d)
    },
  }
}
export type RecordPartitions = ReturnType<typeof recordPartitions>

const CATEGORIES: ReadonlySet<string> = new Set<EventCategory>(['USB', 'Network', 'System', 'Host', 'General'])

/** The events table's constraints, checked before anything is written (as db/events.ts does). */
function checkEvent(e: EventInput) {
  const bad = (what: string) => {
    throw new Error(`event ${JSON.stringify(e.code)}: ${what}`)
  }
  if (!Number.isInteger(e.severity) || e.severity < 0 || e.severity > 7) bad(`severity ${e.severity} is not 0-7`)
  if (!CATEGORIES.has(e.category)) bad(`category ${JSON.stringify(e.category)} is not one of ${[...CATEGORIES].join(', ')}`)
  for (const k of ['code', 'entityId', 'description', 'details'] as const) if (typeof e[k] !== 'string') bad(`${k} is not text`)
}

/** One event of a call as it was written: its batch's time and agent. */
export interface RecordedEvent {
  createdMs: number
  event: EventInput
  agentId?: number
}

export interface EventsHooks {
  /**
   * Called in the unit of work that wrote the events, right after the insert, with their
   * ids in the order given (the risk notifications are raised here, by their owner).
   */
  recorded?: (ids: number[], rows: RecordedEvent[]) => Promise<void>
  /**
   * Each agent's new latest event texts (up to three, oldest first), in the same unit of
   * work: the agents' owner moves them into latest_event_text and the two before it.
   */
  agentTexts?: (texts: Map<number, string[]>) => Promise<void>
}

/** Each agent's last three event texts of a call, oldest first (db/events.ts does the same). */
export function latestTexts(items: EventBatch[]): Map<number, string[]> {
  const texts = new Map<number, string[]>()
  for (const it of items) {
    if (it.agentId === undefined || it.events.length === 0) continue
    const list = texts.get(it.agentId) ?? []
    for (const e of it.events.slice(-3)) list.push(e.description)
    texts.set(it.agentId, list.slice(-3))
  }
  return texts
}

// Prepared: every event batch of every check-in runs it.
const INSERT_EVENTS = prepared(`WITH feed AS (SELECT pg_advisory_xact_lock($1::bigint))
  INSERT INTO events (created_ms, event_code, severity, category, entity_id, description, details, hashtags,
    peripheral_icon, asset_key, asset_name, peripheral_asset_id, peripheral_vid, peripheral_pid, alarm_destination_id)
  SELECT u.created_ms, u.event_code, u.severity, u.category, u.entity_id, u.description, u.details, u.hashtags,
    u.peripheral_icon, u.asset_key, u.asset_name, u.peripheral_asset_id, u.peripheral_vid, u.peripheral_pid, u.alarm_destination_id
  FROM feed, unnest($2::bigint[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
    $10::int[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[])
    WITH ORDINALITY AS u(created_ms, event_code, severity, category, entity_id, description, details, hashtags,
      peripheral_icon, asset_key, asset_name, peripheral_asset_id, peripheral_vid, peripheral_pid, alarm_destination_id, n)
  ORDER BY u.n
  RETURNING id`)

/**
 * The events repository (db/events.ts) on PostgreSQL: `record` and `recordMany`. The risk
 * notifications and the agents' latest texts are written by their owners through `hooks`,
 * in the same unit of work.
 */
export function pgEventsRepo(db: Postgres, hooks: EventsHooks = {}, partitions: RecordPartitions = recordPartitions(db)) {
  /**
   * Stores batches of events in order, all or none, and answers each batch's ids
   * (increasing, in the order given): one INSERT for the call, its ids taken under the
   * events' feed lock (held until the caller's unit of work commits).
   */
  async function recordMany(items: EventBatch[]): Promise<number[][]> {
    for (const it of items) for (const e of it.events) checkEvent(e)
    const rows: RecordedEvent[] = []
    for (const it of items) for (const event of it.events) rows.push({ createdMs: it.createdMs, event, agentId: it.agentId })
    if (!rows.length) return items.map(() => [])
    // Outside a unit of work, a new day's partition is made (and committed) before the unit
    // that writes: its lock on the table is then not held while the records are written.
    if (!db.uow.inUnit())
      await partitions.ensure(
        'events',
        rows.map((r) => r.createdMs),
      )
    return db.uow.run(async () => {
      await partitions.ensure(
        'events',
        rows.map((r) => r.createdMs),
      )
      const col = <T>(fn: (r: RecordedEvent) => T) => rows.map(fn)
      const inserted = await db.query<{ id: number }>(INSERT_EVENTS, [
        FEED_LOCKS.events,
        col((r) => r.createdMs),
        col((r) => r.event.code),
        col((r) => r.event.severity),
        col((r) => r.event.category),
        col((r) => r.event.entityId),
        col((r) => r.event.description),
        col((r) => r.event.details),
        col((r) => r.event.hashtags ?? null),
        col((r) => r.event.peripheralIcon ?? -1),
        col((r) => r.event.assetKey ?? null),
        col((r) => r.event.assetName ?? null),
        col((r) => r.event.peripheralAssetId ?? null),
        col((r) => r.event.peripheralVid ?? null),
        col((r) => r.event.peripheralPid ?? null),
        col((r) => r.event.alarmDestinationId ?? null),
      ])
      // Rows are inserted in the order given (ORDER BY the ordinality), each taking the next
      // id: the ids in increasing order are theirs, in that order.
      const ids = inserted.map((r) => r.id).sort((a, b) => a - b)
      await hooks.recorded?.(ids, rows)
      const texts = latestTexts(items)
      if (texts.size) await hooks.agentTexts?.(texts)
      const out: number[][] = []
      let at = 0
      for (const it of items) {
        out.push(ids.slice(at, at + it.events.length))
        at += it.events.length
      }
      return out
    })
  }

  return {
    recordMany,
    /** One batch (recordMany). */
    record: async (createdMs: number, events: EventInput[], agentId?: number): Promise<number[]> => (await recordMany([{ createdMs, events, agentId }]))[0],
  }
}
export type PgEventsRepo = ReturnType<typeof pgEventsRepo>
