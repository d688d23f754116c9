// Events and the audit trail on PostgreSQL (migration 004): the recorder, the audit
// repository, the lists and feeds, and retention, sharing one record of the day partitions
// made. The parts: db/postgres/events-write.ts, audit.ts, events-query.ts, events-retention.ts.
import { pgAuditRepo } from './audit.js'
import type { Postgres } from './connection.js'
import { pgRecordStores, type RecordStoreOptions } from './events-query.js'
import { pgRecordRetention } from './events-retention.js'
import { pgEventsRepo, recordPartitions, type EventsHooks } from './events-write.js'

export { pgAuditRepo, type PgAuditRepo, type PgAuditStore } from './audit.js'
export { pgRecordStores, type PgRecordStores, type RecordStoreOptions, type RecordTable } from './events-query.js'
export { pgRecordRetention, type DayPartition, type PgRecordRetention } from './events-retention.js'
export { FEED_LOCKS, latestTexts, pgEventsRepo, recordPartitions, type EventsHooks, type PgEventsRepo, type RecordedEvent, type RecordPartitions } from './events-write.js'

/** Every part over one database, the day partitions made remembered once for all of them. */
export function pgEventParts(db: Postgres, hooks: EventsHooks = {}, lists: RecordStoreOptions = {}) {
  const partitions = recordPartitions(db)
  return {
    partitions,
    events: pgEventsRepo(db, hooks, partitions),
    audit: pgAuditRepo(db, partitions),
    queries: pgRecordStores(db, lists),
    retention: pgRecordRetention(db, partitions),
  }
}
