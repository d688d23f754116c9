// PostgreSQL storage: the pool, its unit of work and the migrations, opened together.
import { connectPostgres, type Postgres, type PostgresOptions } from './connection.js'
import { migratePostgres, type MigrationRun } from './migrate.js'

export { connectPostgres, type Postgres, type PgUnitOfWork, type Row } from './connection.js'
export { migratePostgres, pgMigrationFiles, pgMigrationsDir, MIGRATION_LOCK } from './migrate.js'

/** Whether a database setting names PostgreSQL (postgres:// or postgresql://). */
export const isPostgresUrl = (url: string | undefined): url is string => url !== undefined && /^postgres(ql)?:\/\//i.test(url)

/** Connects and brings the schema up to date (once across processes starting together). */
export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<Postgres & { migrated: MigrationRun }> {
  const pg = connectPostgres(url, options)
  try {
    const client = await pg.pool.connect()
    try {
      const migrated = await migratePostgres(client)
      return Object.assign(pg, { migrated })
    } finally {
      client.release()
    }
  } catch (err) {
    await pg.close()
    throw err
  }
}
