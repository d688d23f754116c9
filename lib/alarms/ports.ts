// The storage the alarm destination service needs; db/alarms.ts implements it on SQLite.
import type { AuditTrailRow, EventInput } from '../events/ports.js'
import type { Maybe } from '../platform/maybe.js'

/** A destination's deliveries waiting (the metrics' outbox backlog and lag). */
export type DestinationBacklog = {
  destination: string
  name: string
  type: string
  /** At most BACKLOG_COUNT_MAX (db/alarms.ts). */
  pending: number
  /** When its oldest pending delivery was queued (ms), null when none waits. */
  oldest: number | null
}

/** Times from `fromMs` to `toMs`, both included. */
export interface TimeRange {
  fromMs: number
  toMs: number
}

export interface OutboxItem {
  id: number
  destination_id: string
  feed: AlarmFeed
  record_id: number
  /**
   * An event's or audit record's creation time, where the storage keeps it (PostgreSQL, whose
   * records are partitioned by day: the read of a page is bounded to its days).
   */
  record_ms?: number | null
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

export interface DeliveryCounts {
  pending: number
  failedLast24h: number
}

export const parseList = (stored: string) => stored.split(',').filter(Boolean)

/** Seals the secrets of stored settings and opens them again (lib/alarms/sealed-settings.ts). */
export interface SettingsSealer {
  seal(settings: object, id: string): string
  /** The settings as JSON with their secrets open (stored ones not sealed pass as they are). */
  open(stored: string, id: string): string
  /** Whether stored settings hold secrets in the clear. */
  isPlain(stored: string): boolean
}

export interface AlarmDestinationStore {
  all(): Promise<DestinationRow[]>
  /**
   * With `hold`, the destination is held against other changes and its removal to the end of
   * the unit of work (PostgreSQL; SQLite's units run one at a time).
   */
  byId(id: string, hold?: boolean): Promise<DestinationRow | undefined>
  /** By name, case-insensitively. */
  byName(name: string): Promise<DestinationRow | undefined>
  /** With `hold`, inside a unit of work: counted to add one, other units counting with `hold` wait for this one to end (PostgreSQL; SQLite's units run one at a time). */
  count(hold?: boolean): Promise<number>
  /** Both reject with an error of code `duplicate-key` when another destination took the name meanwhile (another unit of work). */
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
export interface AlarmOutbox {
  /** Drops finished deliveries, attempts and delivered asset messages older than `before`. */
  prune(before: number): Promise<{ outbox: number; attempts: number; deliveredAttempts: number; assets: number }>
  /** The highest outbox id ever given: unchanged means nothing was queued since. */
  outboxSeq(): Promise<number>
  heads(): Promise<{ destination_id: string; id: number; next_attempt_ms: number }[]>
  byId(id: string): Promise<DestinationRow | undefined>
  pendingAfter(destinationId: string, afterId: number, limit: number): Promise<OutboxItem[]>
  /**
   * The events of these ids that still exist (any order), as arrays of EVENT_FIELDS.
   * `created`, when given, holds every one's creation time (it narrows the read).
   */
  events(ids: number[], created?: TimeRange): Promise<unknown[][]>
  auditRecords(ids: number[], created?: TimeRange): Promise<AuditTrailRow[]>
  assetMessages(ids: number[]): Promise<{ id: number; created_ms: number; kind: string; body: string }[]>
  /**
   * Records attempts and their outcomes in order, with one statement per kind of outcome
   * and one update per destination (its state after the last of them); call it inside a
   * transaction. A delivered attempt is kept on its outbox row (no row of alarm_attempts)
   * unless the delivery was no longer pending. Answers the outbox ids that failed for good
   * and were still pending (a delivery cancelled meanwhile stays cancelled and raises nothing).
   */
  recordAttempts(list: AttemptRecord[]): Promise<Set<number>>
  /** Queues the deliveries of events stored since the last call, a slice: answers the rows queued. */
  queueEvents(): Promise<number>
  /** Whether events are stored that are not queued for delivery yet. */
  eventsWaiting(): Promise<boolean>
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
