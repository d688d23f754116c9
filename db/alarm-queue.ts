// The deliveries of events to alarm destinations, queued behind the writes (migration 035).
//
// An event is stored by its write alone; the delivery worker then queues its outbox rows
// (one per destination that takes it) in id order, a slice at a time, and moves the mark
// `alarm_events_queued.up_to` past it in the same transaction. So a burst is stored at the
// speed of the events, whatever the number of destinations, and none is lost: the events
// after the mark are queued by whichever transaction comes next.
//
// Record order per destination holds across feeds: an audit record or asset message is
// queued by the transaction that stores it, so the events stored before it are queued first
// when a destination takes both feeds (`before`). A destination's change applies to the
// events stored after it: db/alarms.ts queues the waiting ones before it writes the change.
//
// This relies on event ids being given in commit order, as SQLite's one writer does. A
// database with concurrent writers must give the same (e.g. take the ids under a lock).
import { randomUUID } from 'node:crypto'
import type { Statement } from 'better-sqlite3'
import type { DB } from './index.js'

/** The last event id given (events are AUTOINCREMENT): a new destination takes the events after it. */
export const LAST_EVENT = "coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)"

/** Outbox rows (4 parameters each) per INSERT statement. */
const OUTBOX_ROWS_PER_INSERT = 128
/**
 * Outbox rows a slice writes at most (its events times the destinations that take them):
 * the worker's slices stay short beside the server's requests. 3,000 took 13 ms on average
 * and up to 35 ms (npm run bench -- events, the write path); 1,000 about a third of that.
 */
export const QUEUE_ROWS = 1000
/** Events read at most to count a destination's deliveries not queued yet. */
const COUNT_AT_MOST = 10_000

/**
 * Events written by a bulk loader (scripts/seed*.ts, from `first` to `last`) queue no
 * deliveries: the mark passes over them, when nothing before them was waiting.
 */
export function passOverEvents(db: DB, first: number, last: number): void {
  db.prepare('UPDATE alarm_events_queued SET up_to = ? WHERE up_to = ?').run(last, first - 1)
}

interface EventDestination {
  id: string
  min_severity: number
  categories: string
  events_from: number
}

/** Call `slice` and `all` inside a write transaction (each slice moves the mark with its rows). */
export function eventQueue(db: DB) {
  const upTo = db.prepare<[], number>('SELECT up_to FROM alarm_events_queued WHERE id = 1').pluck()
  const lastEvent = db.prepare<[], number>(`SELECT ${LAST_EVENT}`).pluck()
  const setUpTo = db.prepare<[number]>('UPDATE alarm_events_queued SET up_to = ? WHERE id = 1')
  const destinations = db.prepare<[], EventDestination>('SELECT id, min_severity, categories, events_from FROM alarm_destinations WHERE enabled = 1 AND feed_events = 1 ORDER BY id')
  const takesBoth = {
    audit: db.prepare<[], number>('SELECT 1 FROM alarm_destinations WHERE enabled = 1 AND feed_events = 1 AND feed_audit = 1 LIMIT 1').pluck(),
    assets: db.prepare<[], number>('SELECT 1 FROM alarm_destinations WHERE enabled = 1 AND feed_events = 1 AND feed_assets = 1 LIMIT 1').pluck(),
  }
  const eventsAfter = db
    .prepare<[number, number], [number, number, string, string | null]>('SELECT id, severity, category, alarm_destination_id FROM events WHERE id > ? ORDER BY id LIMIT ?')
    .raw(true)
  const inserts: Statement<unknown[]>[] = []
  const insertOf = (rows: number) =>
    (inserts[rows] ??= db.prepare<unknown[]>(
      `INSERT OR FAIL INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms)
       VALUES ${Array(rows).fill("(?, 'events', ?, ?, ?)").join(', ')}`,
    ))
  const unqueuedFor = db
    .prepare<[{ after: number; severity: number; categories: string; id: string }], number>(
      `SELECT count(*) FROM (SELECT severity, category, alarm_destination_id FROM events WHERE id > @after ORDER BY id LIMIT ${COUNT_AT_MOST})
       WHERE severity <= @severity AND (@categories = '' OR instr(@categories, ',' || category || ',') > 0) AND alarm_destination_id IS NOT @id`,
    )
    .pluck()

  const waiting = () => (lastEvent.get() ?? 0) > (upTo.get() ?? 0)

  /**
   * Where queueing starts: after the mark and after the earliest `events_from` of `takers`
   * (events before it no destination takes). At `last` or beyond, nothing is owed.
   */
  const startOf = (takers: EventDestination[], last: number) => Math.max(upTo.get() ?? 0, Math.min(last, ...takers.map((d) => d.events_from)))

  /** Queues the deliveries of the events after the mark, at most QUEUE_ROWS rows; answers how many. */
  const slice = (): number => {
    const last = lastEvent.get() ?? 0
    if (!waiting()) return 0
    const takers = destinations.all()
    // None takes them, or none takes events this old: passed over without reading them.
    const start = startOf(takers, last)
    if (start >= last) {
      setUpTo.run(last)
      return 0
    }
    const limit = Math.max(1, Math.floor(QUEUE_ROWS / takers.length))
    const events = eventsAfter.all(start, limit)
    const queuedMs = Date.now()
    const args: unknown[] = []
    let n = 0
    let total = 0
    const flush = () => {
      if (n) insertOf(n).run(args)
      total += n
      args.length = 0
      n = 0
    }
    // By event, then destination id: each destination's deliveries keep the events' order.
    for (const [id, severity, category, about] of events) {
      for (const d of takers) {
        if (id <= d.events_from || severity > d.min_severity) continue
        if (d.categories !== '' && !d.categories.includes(`,${category},`)) continue
        // An alarm delivery failure is never delivered to the destination it is about.
        if (d.id === about) continue
        args.push(d.id, id, randomUUID(), queuedMs)
        if (++n === OUTBOX_ROWS_PER_INSERT) flush()
      }
    }
    flush()
    // Fewer than asked: the rest up to the last id were removed (retention) meanwhile.
    setUpTo.run(events.length < limit ? last : events[events.length - 1][0])
    return total
  }

  const all = (): number => {
    let rows = 0
    while (waiting()) rows += slice()
    return rows
  }

  return {
    waiting,
    slice,
    /** Queues every event stored so far; answers the rows queued. */
    all,
    /** Before a record of `feed` is queued: the events before it first, if a destination takes both. */
    before(feed: 'audit' | 'assets'): void {
      if (waiting() && takesBoth[feed].get() !== undefined) db.transaction(all)()
    },
    /** The first event not queued yet that a destination may take (null: none is owed). */
    firstOwed(): number | null {
      const last = lastEvent.get() ?? 0
      const start = startOf(destinations.all(), last)
      return start < last ? start + 1 : null
    },
    /** Events stored and not queued yet: the ids after the mark (only retention leaves gaps, in old ones). */
    unqueued: (): number => Math.max(0, (lastEvent.get() ?? 0) - (upTo.get() ?? 0)),
    /** Of those, the ones destination `d` takes (at most COUNT_AT_MOST read: more may wait). */
    unqueuedFor: (d: EventDestination): number => unqueuedFor.get({ after: Math.max(upTo.get() ?? 0, d.events_from), severity: d.min_severity, categories: d.categories, id: d.id }) ?? 0,
  }
}
