import type { FastifyInstance } from 'fastify'
import { registerHealthCheck, type HealthVerdict } from '../platform/health.js'
import { then, type Maybe } from '../platform/maybe.js'
import { iso } from '../time.js'
import { DeliveryWorker } from './worker.js'
import type { Loop } from '../platform/loops.js'
import type { AlarmHealthFigures } from './ports.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The outbox worker that delivers alarms (lib/alarms/worker.ts). */
    alarmWorker: DeliveryWorker
  }
}

/**
 * The outbox worker that delivers alarms, as the app's loop, and its health check; stopping
 * lets deliveries in flight finish and lets go of the destinations this process held.
 * Several processes may run it over one PostgreSQL: each destination's deliveries are
 * taken under a lease (db/postgres/alarms.ts), outcomes are written only to deliveries
 * still pending, and events are queued under the outbox lock.
 */
export function alarmDeliveryLoop(app: FastifyInstance): Loop {
  const { config } = app
  const store = app.storage.alarmDelivery
  const worker = new DeliveryWorker({
    outbox: store.outbox,
    events: store.events,
    uow: app.storage.uow,
    log: app.log,
    mail: { mailer: app.mailer, publicUrl: config.publicUrl },
    settings: { ...config.alarms, deliveryDays: config.retention.deliveryDays },
    caches: app.caches,
  })
  app.decorate('alarmWorker', worker)
  registerHealthCheck(app, { name: 'AlarmDelivery', check: alarmDeliveryHealth })
  // With leases on destinations (PostgreSQL) any number of processes deliver at once, each destination by one.
  return { name: 'alarm-delivery', singleton: !store.outbox.release, start: () => worker.start(), stop: () => worker.stop() }
}

/** The app's delivery worker (tests drive it through turn(), drain() and its clock). */
export function alarmWorker(app: FastifyInstance): DeliveryWorker {
  if (!app.hasDecorator('alarmWorker')) throw new Error('alarm delivery is not started for this app')
  return app.alarmWorker
}

/** A pending delivery older than this makes the check Warning; older than FAILED_AGE_MS, Failed. */
export const WARNING_AGE_MS = 5 * 60_000
export const FAILED_AGE_MS = 3600_000
/** More pending deliveries than this make the check Warning. */
export const WARNING_BACKLOG = 1000

/**
 * The alarm-delivery subsystem's health: backlog and failures.
 * - Failed: a delivery failed for good in the last 24 h, or one has waited more than 1 h.
 * - Warning: a delivery has waited more than 5 minutes, more than 1,000 are waiting (events
 *   not queued yet counted in), or a
 *   destination's last attempt failed and it is retrying.
 * - Healthy otherwise.
 */
export function alarmDeliveryHealth(app: FastifyInstance): Maybe<HealthVerdict> {
  const now = app.hasDecorator('alarmWorker') ? app.alarmWorker.clock() : Date.now()
  // At once on SQLite, through a Promise on PostgreSQL.
  return then(app.storage.alarmDelivery.health(now), (h) => verdict(h, now))
}

function verdict(h: AlarmHealthFigures, now: number): HealthVerdict {
  if (h.destinations === 0) return { status: 'Healthy', detail: 'No alarm destinations' }
  const age = h.oldest === null ? 0 : Math.max(0, now - h.oldest)
  const parts = [
    `${h.destinations} destination${h.destinations === 1 ? '' : 's'} (${h.enabled} enabled)`,
    `${h.pending} deliver${h.pending === 1 ? 'y' : 'ies'} pending${h.oldest === null ? '' : `, oldest queued ${iso(h.oldest)}`}`,
    `${h.failed} failed for good in the last 24 h`,
  ]
  // Events stored and not queued yet: the worker queues them behind the writes, in slices.
  if (h.unqueued > 0) parts.splice(2, 0, `${h.unqueued} event${h.unqueued === 1 ? '' : 's'} not queued yet`)
  if (h.retrying > 0) parts.push(`${h.retrying} destination${h.retrying === 1 ? '' : 's'} retrying after a failed attempt`)
  const detail = parts.join('; ')
  if (h.failed > 0 || age > FAILED_AGE_MS) return { status: 'Failed', detail }
  if (age > WARNING_AGE_MS || h.pending + h.unqueued > WARNING_BACKLOG || h.retrying > 0) return { status: 'Warning', detail }
  return { status: 'Healthy', detail }
}
