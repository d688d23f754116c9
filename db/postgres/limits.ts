// The count limits (alarm destinations, catalogue entries, report definitions, connections
// per poller) are checked by a count and then an insert: on PostgreSQL concurrent units of
// work could all count below the limit and all insert. A unit that counts in order to add
// takes the limit's transaction lock first (held to its end, on every node, as the
// enrollment lock of db/postgres/gateway.ts), so the units that add under one limit go one
// at a time from their count to their commit; those that only read or remove never wait.
import type { Postgres } from './connection.js'

/** Takes the transaction lock of the limit named `limit` (pg_advisory_xact_lock's 64-bit key of its name). */
export async function holdLimit(db: Postgres, limit: string): Promise<void> {
  await db.query(`SELECT pg_advisory_xact_lock(hashtextextended('prime limit ' || $1, 0))`, [limit])
}
