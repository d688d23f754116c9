// PostgreSQL's versioned migrations (db/postgres/migrations/NNN_name.sql), run once however
// many processes start together: the first takes a session advisory lock and applies what
// is missing, each file in one transaction; the others wait for the lock, then find
// nothing left to do.
import fs from 'node:fs'
import path from 'node:path'
import type pg from 'pg'
import { migrationsDir } from '../migrations-dir.js'

/** db/postgres/migrations, beside SQLite's db/migrations (found the same way from dist/). */
export const pgMigrationsDir = path.join(path.dirname(migrationsDir), 'postgres', 'migrations')

/** One key for every process of this product: pg_advisory_lock's 64-bit key ("prime-db"). */
export const MIGRATION_LOCK = 0x7072696d65_6462n

export function pgMigrationFiles(dir = pgMigrationsDir): { version: number; name: string; file: string }[] {
  return fs
    .readdirSync(dir)
    .filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ version: Number(f.slice(0, 3)), name: f.slice(4, -4), file: path.join(dir, f) }))
}

export interface MigrationRun {
  /** The schema version after the run. */
  version: number
  /** The versions this process applied (none when another process had applied them). */
  applied: number[]
}

/** Applies the missing migrations on `client` (one connection: the lock is the session's). */
export async function migratePostgres(client: pg.ClientBase, dir = pgMigrationsDir): Promise<MigrationRun> {
  const files = pgMigrationFiles(dir)
  files.forEach((f, i) => {
    if (f.version !== i + 1) throw new Error(`PostgreSQL migration ${path.basename(f.file)} is out of sequence (expected ${String(i + 1).padStart(3, '0')})`)
  })
  await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK.toString()])
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`)
    const { rows } = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM schema_migrations')
    const current = Number(rows[0]?.v ?? 0)
    const latest = files.length
    if (current > latest) throw new Error(`the database is at schema version ${current}, newer than this server knows (${latest}): refusing to start`)
    const applied: number[] = []
    for (const f of files) {
      if (f.version <= current) continue
      const sql = fs.readFileSync(f.file, 'utf8')
      await client.query('BEGIN')
      try {
        await client.query(sql)
        await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [f.version, f.name])
        await client.query('COMMIT')
      } catch (err) {
        await client.query('ROLLBACK')
        throw new Error(`PostgreSQL migration ${path.basename(f.file)} failed: ${(err as Error).message}`)
      }
      applied.push(f.version)
    }
    return { version: Math.max(current, latest), applied }
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK.toString()])
  }
}
