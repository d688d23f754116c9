// npm run retention -- [--data-dir ./data] [--events-days 365] [--audit-days 365] [--now <ISO time>]
// Runs the retention job once on a data directory (stop the server first, or run it beside
// it: the job is the same one the server runs hourly; PRIME_DATABASE_URL: on PostgreSQL), with the PRIME_RETENTION_* settings
// or the days given, and reports what it archived and deleted and how fast (rows/s).
import path from 'node:path'
import { parseArgs } from 'node:util'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { dirBytes } from '../lib/health.js'
import { connectPostgres } from '../db/postgres/index.js'

const { values } = parseArgs({
  options: { 'data-dir': { type: 'string' }, 'events-days': { type: 'string' }, 'audit-days': { type: 'string' }, now: { type: 'string' } },
})
const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn' }
if (values['data-dir']) env.PRIME_DATA_DIR = path.resolve(values['data-dir'])
if (values['events-days']) env.PRIME_RETENTION_EVENTS_DAYS = values['events-days']
if (values['audit-days']) env.PRIME_RETENTION_AUDIT_DAYS = values['audit-days']
const now = values.now ? Date.parse(values.now) : Date.now()
if (Number.isNaN(now)) throw new Error(`--now must be a date, got "${values.now}"`)

const config = loadConfig(env)
const app = await buildApp({ config })
// The counts and oldest day read beside the app: SQLite's file, or the PostgreSQL database.
const pg = app.storage.backend === 'postgres' ? connectPostgres(config.databaseUrl!, { max: 1, applicationName: 'prime-retention' }) : undefined
const count = async (table: 'events' | 'audit_trail') => (pg ? Number(await pg.value(`SELECT count(*) FROM ${table}`)) : (app.db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number))
const oldestEvent = async () =>
  pg ? ((await pg.value<number | null>('SELECT min(created_ms) FROM events')) ?? null) : (app.db.prepare('SELECT min(created_ms) FROM events').pluck().get() as number | null)
try {
  if (!pg) {
    const indexer = app.repos.eventQueries.indexer
    // The job prunes only what the query index has counted: bring it up to date first.
    indexer.catchUp('events')
    indexer.catchUp('audit_trail')
  }
  const before = { events: await count('events'), audit: await count('audit_trail'), bytes: dirBytes(config.dataDir) }
  const oldest = await oldestEvent()
  const run = await app.retention.run(now)
  const rows = run.events.deleted + run.audit.deleted + Object.values(run.other).reduce((a, b) => a + b, 0)
  const after = { events: await count('events'), audit: await count('audit_trail') }
  const newOldest = await oldestEvent()
  const day = (ms: number | null) => (ms === null ? 'none' : new Date(ms).toISOString().slice(0, 10))
  console.log(`retention (events ${config.retention.eventsDays} days, audit ${config.retention.auditDays} days) as of ${new Date(now).toISOString()}`)
  console.log(`events: ${before.events} -> ${after.events} (deleted ${run.events.deleted}, archived in ${run.events.files.length} files); oldest ${day(oldest)} -> ${day(newOldest)}`)
  console.log(`audit records: ${before.audit} -> ${after.audit} (deleted ${run.audit.deleted}); other records deleted: ${JSON.stringify(run.other)}`)
  console.log(
    `${rows} rows in ${(run.ms / 1000).toFixed(1)} s: ${Math.round(rows / (run.ms / 1000))} rows/s (archive written and synced included); data dir ${(before.bytes / 1024 ** 3).toFixed(2)} GiB before`,
  )
} finally {
  await pg?.close()
  await app.close()
}
