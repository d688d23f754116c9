// The database's own state on PostgreSQL, as db/system.ts answers it on SQLite.
import type { SystemRepo } from '../system.js'
import type { Async } from '../unit-of-work.js'
import type { Postgres } from './connection.js'

type AgentCounts = ReturnType<SystemRepo['agentCounts']>

export type PgSystemRepo = Async<SystemRepo>

export function pgSystemRepo(db: Postgres): PgSystemRepo {
  return {
    /** The database's size on disk (tables, indexes, TOAST and free space in them). */
    sizeBytes: async () => (await db.value<number>('SELECT pg_database_size(current_database())'))!,
    /** The latest PostgreSQL migration applied (db/postgres/migrations: not SQLite's numbering). */
    schemaVersion: async () => (await db.value<number>('SELECT coalesce(max(version), 0) FROM schema_migrations'))!,
    agentCounts: async () =>
      (await db.one<AgentCounts>(
        `SELECT count(*) AS total,
           count(*) FILTER (WHERE connection_status = 'Connected') AS connected,
           count(*) FILTER (WHERE connection_status <> 'Connected') AS disconnected,
           count(*) FILTER (WHERE operational_status = 'Armed') AS armed,
           count(*) FILTER (WHERE operational_status = 'Free') AS free
         FROM agents`,
      ))!,
    /**
     * A read and a write in a transaction that is rolled back, on a client of its own (never
     * the caller's unit of work): a server in recovery or read-only refuses the temporary table.
     */
    async probe(): Promise<void> {
      const client = await db.pool.connect()
      let broken: Error | undefined
      try {
        await client.query('BEGIN; CREATE TEMP TABLE health_probe (x integer) ON COMMIT DROP; INSERT INTO health_probe (x) VALUES (1); SELECT count(*) FROM users; ROLLBACK')
      } catch (err) {
        try {
          await client.query('ROLLBACK')
        } catch (rollbackErr) {
          // The connection is gone: it must not go back to the pool.
          broken = rollbackErr as Error
        }
        throw err
      } finally {
        client.release(broken)
      }
    },
  }
}
