// The storage the alarm destination service needs; db/alarms.ts implements it on SQLite.
import type { AlarmsRepo, DeliveryCounts, DestinationBacklog, DestinationInput, DestinationRow } from '../../db/alarms.js'
import type { EventInput } from '../../db/events.js'
import type { Async } from '../../db/unit-of-work.js'
import type { Maybe } from '../platform/maybe.js'

export interface AlarmDestinationStore {
  all(): Promise<DestinationRow[]>
  byId(id: string): Promise<DestinationRow | undefined>
  /** By name, case-insensitively. */
  byName(name: string): Promise<DestinationRow | undefined>
  count(): Promise<number>
  insert(d: DestinationInput, ms: number, user: string | null): Promise<unknown>
  update(d: DestinationInput, ms: number, user: string | null): Promise<number>
  /** Deletes a destination and cancels its pending deliveries; answers how many were cancelled (-1: none was there). */
  remove(id: string, ms: number): Promise<number>
  counts(id: string, now: number): Promise<DeliveryCounts>
}

/**
 * The alarm outbox the delivery worker drains: one lane per destination, in outbox order. The
 * worker also queues the deliveries of the events stored since (queueEvents), behind the writes.
 */
export type AlarmOutbox = Async<
  Pick<AlarmsRepo, 'prune' | 'outboxSeq' | 'heads' | 'byId' | 'pendingAfter' | 'events' | 'auditRecords' | 'assetMessages' | 'recordAttempts' | 'queueEvents' | 'eventsWaiting'>
> & {
  /**
   * Lets go of this process's claim on a destination's deliveries, so that another process
   * takes them over at once (PostgreSQL's leases); absent where one process drains the outbox.
   */
  release?(destinationId: string): Promise<void>
}

/** The outbox's figures the health check reads (`unqueued`: events stored, not queued for delivery yet). */
export interface AlarmHealthFigures {
  destinations: number
  enabled: number
  pending: number
  oldest: number | null
  failed: number
  retrying: number
  unqueued: number
}

/** What the alarm delivery loop reads and writes through, on either backend. */
export interface AlarmDeliveryStore {
  outbox: AlarmOutbox
  events: FailureEvents
  /** At once on SQLite (its health checks are synchronous), through a Promise on PostgreSQL. */
  health(now: number): Maybe<AlarmHealthFigures>
  /** Each destination's pending deliveries and the age of its oldest. */
  backlog(): Maybe<DestinationBacklog[]>
}

/** Where the worker records the "Alarm delivery failure" events it raises. */
export interface FailureEvents {
  record(createdMs: number, events: EventInput[]): Promise<unknown>
}
