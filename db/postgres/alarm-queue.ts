// The deliveries of events to alarm destinations, queued behind the writes, on PostgreSQL
// (db/alarm-queue.ts on SQLite). The slicing runs in SQL (migration 005's alarm_queue_events):
// one round trip reads the events after the mark, inserts their outbox rows and moves the mark,
// under the outbox lock, so that several processes queueing at once neither queue an event
// twice nor let outbox ids become visible out of order.
//
// This relies on event ids becoming visible in id order (004's feed lock): the mark moves up
// to the highest id committed, never past an event still being written.
import type { Postgres } from './connection.js'

/** The last event id committed: a new destination takes the events after it. */
/** The newest event id written (kept by the insert trigger, migration 012: max(id) visits every partition). */
export const PG_LAST_EVENT = "(SELECT top FROM record_counts WHERE name = 'events')"

/** Outbox rows a slice writes at most (as db/alarm-queue.ts QUEUE_ROWS). */
export const PG_QUEUE_ROWS = 1000
/** Events read at most to count a destination's deliveries not queued yet. */
const COUNT_AT_MOST = 10_000

/**
 * Events written by a bulk loader (from `first` to `last`) queue no deliveries: the mark
 * passes over them, when nothing before them was waiting.
 */
export async function pgPassOverEvents(db: Postgres, first: number, last: number): Promise<void> {
  await db.run('UPDATE alarm_events_queued SET up_to = $1 WHERE id = 1 AND up_to = $2', [last, first - 1])
}

/** The days holding event ids after `after` (migration 016), as [from, to) ms, with the newest id written when they were read (null: no day holds one). */
export async function pgEventDaysAfter(db: Postgres, after: number): Promise<{ fromMs: number; toMs: number; top: number } | null> {
  const r = await db.one<{ from_ms: number | null; to_ms: number; top: number }>(
    `SELECT min(day_ms) AS from_ms, max(day_ms) + 86400000 AS to_ms, (SELECT top FROM record_counts WHERE name = 'events') AS top
     FROM record_days WHERE name = 'events' AND high > $1`,
    [after],
  )
  return r && r.from_ms !== null ? { fromMs: r.from_ms, toMs: r.to_ms, top: r.top } : null
}

/**
 * The events destination `$id` takes and that are not queued yet, at most COUNT_AT_MOST read
 * after its start (the mark, or its own first event when later), as SQL over the days
 * [`$from`, `$to`) that pgEventDaysAfter found for a start no later than this statement's
 * (the mark only moves up), up to their newest id `$top` (events written since are left to
 * the next count).
 */
export const pgEventsOwed = (id: string, top: string, from: string, to: string) => `(SELECT count(*) FROM alarm_destinations d, alarm_events_queued q,
    LATERAL (SELECT severity, category, alarm_destination_id FROM events
      WHERE id > greatest(q.up_to, d.events_from) AND id <= ${top} AND created_ms >= ${from} AND created_ms < ${to} ORDER BY id LIMIT ${COUNT_AT_MOST}) e
  WHERE d.id = ${id} AND d.enabled = 1 AND d.feed_events = 1 AND q.id = 1 AND e.severity <= d.min_severity
    AND (d.categories = '' OR position(',' || e.category || ',' IN d.categories) > 0) AND e.alarm_destination_id IS DISTINCT FROM d.id)`

export function pgEventQueue(db: Postgres) {
  const waiting = async (): Promise<boolean> => (await db.value<boolean>(`SELECT ${PG_LAST_EVENT} > up_to FROM alarm_events_queued WHERE id = 1`)) ?? false
  return {
    waiting,
    /** Queues the deliveries of the events after the mark, at most PG_QUEUE_ROWS rows; answers how many. */
    slice: async (): Promise<number> => (await db.value<number>('SELECT alarm_queue_events($1, $2)', [PG_QUEUE_ROWS, Date.now()])) ?? 0,
    /** Queues every event stored so far (in one transaction); answers the rows queued. */
    all: async (): Promise<number> => (await db.value<number>('SELECT alarm_queue_all_events($1)', [Date.now()])) ?? 0,
    /** Before a record of `feed` is queued: the events before it first, if a destination takes both. */
    before: async (feed: 'audit' | 'assets'): Promise<void> => {
      await db.query('SELECT alarm_queue_before($1, $2)', [feed, Date.now()])
    },
    /** The first event not queued yet that a destination may take (null: none is owed). */
    async firstOwed(): Promise<number | null> {
      const r = await db.one<{ first: number | null }>(
        `SELECT CASE WHEN s.start < s.last THEN s.start + 1 END AS first FROM (
           SELECT greatest(q.up_to, least(l.last, coalesce(d.events_from, l.last))) AS start, l.last
           FROM alarm_events_queued q, (SELECT ${PG_LAST_EVENT} AS last) l,
             (SELECT min(events_from) AS events_from FROM alarm_destinations WHERE enabled = 1 AND feed_events = 1) d
           WHERE q.id = 1) s`,
      )
      return r?.first ?? null
    },
    /** Events stored and not queued yet: the ids after the mark (only retention leaves gaps, in old ones). */
    unqueued: async (): Promise<number> => (await db.value<number>(`SELECT greatest(0, ${PG_LAST_EVENT} - up_to) FROM alarm_events_queued WHERE id = 1`)) ?? 0,
  }
}
export type PgEventQueue = ReturnType<typeof pgEventQueue>
