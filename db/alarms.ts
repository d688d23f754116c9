// Alarms: destinations (alarms-destinations.ts), the outbox and its attempts
// (alarms-deliveries.ts), and here the asset feed, the event queue's passes, health and pruning.
import type { DB } from './index.js'
import { eventQueue } from './alarm-queue.js'
import { destinationStore } from './alarms-destinations.js'
import type { DestinationBacklog, SettingsSealer } from '../lib/alarms/ports.js'
import { deliveryStore } from './alarms-deliveries.js'

/** Longer than any attempt can take (PRIME_ALARM_TIMEOUT_SECONDS is at most 60). */
const PRUNE_DELIVERED_WINDOW_MS = 10 * 60_000

/** A destination's pending deliveries are counted up to this many: a scrape's cost stays bounded through an outage's backlog. */
export const BACKLOG_COUNT_MAX = 100_000

/** Without a sealer (scripts, tests of other things) settings are stored and read as they are. */
export function alarmsRepo(db: DB, sealer?: SettingsSealer) {
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

  return {
    ...destinationStore(db, queue, sealer),
    ...deliveryStore(db),

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
