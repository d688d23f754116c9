// PostgreSQL for tests: each test file gets a database of its own, copied from a template
// that holds the migrated schema, and dropped at teardown. PRIME_TEST_DATABASE_URL names
// the server (a role that may create databases); without it, tests about PostgreSQL skip.
import crypto from 'node:crypto'
import fs from 'node:fs'
import pg from 'pg'
import { connectPostgres, migratePostgres, pgMigrationFiles, type Postgres } from '../db/postgres/index.js'

export const testDatabaseUrl = process.env.PRIME_TEST_DATABASE_URL || undefined

/** The reason to skip PostgreSQL tests, or false. */
export const noPostgres: string | false = testDatabaseUrl ? false : 'PRIME_TEST_DATABASE_URL is not set (PostgreSQL tests skipped)'

const withDatabase = (url: string, name: string) => {
  const u = new URL(url)
  u.pathname = `/${name}`
  return u.toString()
}

/** The template's name: one per set of migrations, so that a changed migration makes a new one. */
function templateName(): string {
  const h = crypto.createHash('sha256')
  for (const f of pgMigrationFiles()) h.update(f.file).update(fs.readFileSync(f.file))
  return `prime_template_${h.digest('hex').slice(0, 12)}`
}

/** A lock key of its own for making templates (not the migrations' key). */
const TEMPLATE_LOCK = '7022100201'

async function adminQuery<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: testDatabaseUrl })
  client.on('error', () => {})
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

async function ensureTemplate(): Promise<string> {
  const name = templateName()
  await adminQuery(async (admin) => {
    await admin.query('SELECT pg_advisory_lock($1)', [TEMPLATE_LOCK])
    try {
      const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])
      if (found.rowCount) return
      // Made under a working name and renamed once migrated: a template half made by a
      // test run that was killed is never used.
      const building = `${name}_building`
      await admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`)
      await admin.query(`CREATE DATABASE ${building}`)
      const client = new pg.Client({ connectionString: withDatabase(testDatabaseUrl!, building) })
      await client.connect()
      try {
        await migratePostgres(client)
      } finally {
        await client.end()
      }
      await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`)
    } finally {
      await admin.query('SELECT pg_advisory_unlock($1)', [TEMPLATE_LOCK])
    }
  })
  return name
}

/** A fresh migrated database: its URL, dropped at teardown. */
export async function pgTestDatabaseUrl(t: { teardown: (fn: () => unknown) => void }): Promise<string> {
  if (!testDatabaseUrl) throw new Error(noPostgres as string)
  const template = await ensureTemplate()
  const name = `prime_test_${process.pid}_${crypto.randomBytes(4).toString('hex')}`
  await adminQuery((admin) => admin.query(`CREATE DATABASE ${name} TEMPLATE ${template}`))
  t.teardown(() => adminQuery((admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  return withDatabase(testDatabaseUrl, name)
}

/** A fresh migrated database, connected; closed and dropped at teardown. */
export async function pgTestDatabase(t: { teardown: (fn: () => unknown) => void }, max = 5): Promise<Postgres & { url: string }> {
  const url = await pgTestDatabaseUrl(t)
  const db = connectPostgres(url, { max })
  // Teardowns run last-registered first: the pool closes before the database is dropped.
  t.teardown(() => db.close())
  return Object.assign(db, { url })
}

/** A fresh EMPTY database (no schema), dropped at teardown: its URL. */
export async function pgEmptyDatabaseUrl(t: { teardown: (fn: () => unknown) => void }): Promise<string> {
  if (!testDatabaseUrl) throw new Error(noPostgres as string)
  const name = `prime_test_${process.pid}_${crypto.randomBytes(4).toString('hex')}`
  await adminQuery((admin) => admin.query(`CREATE DATABASE ${name}`))
  t.teardown(() => adminQuery((admin) => admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  return withDatabase(testDatabaseUrl, name)
}
