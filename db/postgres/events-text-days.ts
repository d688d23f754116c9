// The events' trigram index, built for each day partition once its day has ended (migration
// 020): the writes of the day pay none of it. A day without its index is still read, by a
// scan of its partition (the planner's choice per partition), so building late or never
// changes how fast a text filter answers, never what it answers.
import type { TextIndexUpkeep } from '../../lib/events/ports.js'
import type { Postgres } from './connection.js'

const DAY_MS = 86_400_000

/** The columns of "contains" and GlobalSearch (db/postgres/events-query.ts), one multicolumn GIN index: a condition on any of them, or an OR of them, is answered from it. */
const TEXT_COLUMNS = ['entity_id', 'description', 'details', 'event_code', 'hashtags', 'asset_key', 'asset_name', 'peripheral_asset_id']

/** A day partition of events without a valid text index. */
export interface Unindexed {
  partition: string
  dayMs: number
  /** An index left invalid by a build that did not finish (its process died): dropped first. */
  invalid: string | null
}

/**
 * `graceMs`: how long after its day's end a partition is left unindexed, for the records that
 * arrive late with times of the day before (they would pay the index's upkeep).
 */
export function pgEventTextDays(
  db: Postgres,
  { graceMs = 5 * 60_000 }: { graceMs?: number } = {},
): TextIndexUpkeep & { unindexed(now: number): Promise<Unindexed[]>; build(u: Unindexed): Promise<void> } {
  /** The day partitions of events that ended `graceMs` before `now` and have no valid text index, newest first. */
  const unindexed = async (now: number): Promise<Unindexed[]> =>
    (
      await db.query<{ partition: string; day_ms: number; invalid: string | null }>(
        `SELECT c.relname AS partition, (extract(epoch FROM to_date(right(c.relname, 8), 'YYYYMMDD')) * 1000)::bigint AS day_ms,
           (SELECT x.relname FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid WHERE i.indrelid = c.oid AND x.relname = c.relname || '_text' AND NOT i.indisvalid) AS invalid
         FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
         WHERE h.inhparent = 'events'::regclass AND c.relname ~ '^events_p[0-9]{8}$'
           AND NOT EXISTS (SELECT 1 FROM pg_index i JOIN pg_class x ON x.oid = i.indexrelid WHERE i.indrelid = c.oid AND x.relname = c.relname || '_text' AND i.indisvalid)
         ORDER BY c.relname DESC`,
      )
    )
      .map((r) => ({ partition: r.partition, dayMs: r.day_ms, invalid: r.invalid }))
      .filter((u) => u.dayMs + DAY_MS + graceMs <= now)

  /** The backend building an index now (its process id), for `cancel`. */
  let building: number | null = null

  /**
   * Builds one day's index without blocking its writers (CONCURRENTLY: late records of the
   * day go on being written meanwhile), on a connection of its own outside any transaction,
   * as CONCURRENTLY must be.
   */
  async function build(u: Unindexed): Promise<void> {
    const client = await db.pool.connect()
    let broken: Error | undefined
    try {
      building = (client as unknown as { processID: number }).processID
      if (u.invalid) await client.query(`DROP INDEX CONCURRENTLY IF EXISTS "${u.invalid}"`)
      await client.query(`CREATE INDEX CONCURRENTLY IF NOT EXISTS "${u.partition}_text" ON "${u.partition}" USING gin (${TEXT_COLUMNS.map((c) => `${c} gin_trgm_ops`).join(', ')})`)
    } catch (err) {
      broken = err as Error
      throw err
    } finally {
      building = null
      client.release(broken)
    }
  }

  return {
    unindexed,
    build,
    async buildNext(now: number) {
      const [next] = await unindexed(now)
      if (!next) return null
      const t0 = performance.now()
      try {
        await build(next)
      } catch (err) {
        // Dropped meanwhile (retention), or built meanwhile by another process: nothing left to build.
        if (['42P01', '42P07', '23505'].includes((err as { code?: string }).code ?? '')) return { partition: next.partition, ms: performance.now() - t0 }
        throw err
      }
      return { partition: next.partition, ms: performance.now() - t0 }
    },
    async cancel() {
      // The build stops with its statement; its index, left invalid, is dropped and made again by the next build.
      if (building !== null) await db.run('SELECT pg_cancel_backend($1)', [building])
    },
  }
}
