import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { buildApp } from '../lib/app.js'
import { loadConfig, type Config } from '../lib/config.js'
import { openDatabase, type DB } from '../db/index.js'
import { pgTestDatabaseUrl } from './pg.js'
import { closeQueries } from './seed.js'

export const ADMIN_PASSWORD = 'Correct-horse-42'
export const USER_PASSWORD = 'Battery-staple-97'

/**
 * The backend `build` runs the app on: SQLite, or PostgreSQL when PRIME_TEST_BACKEND is
 * `postgres` (`npm test` runs the PostgreSQL part of the suite so; a database of the
 * app's own each time, from tests/pg.ts).
 */
export const testBackend = process.env.PRIME_TEST_BACKEND === 'postgres' ? 'postgres' : 'sqlite'

/**
 * The settings that put an app a test builds itself (buildApp with its own config) on the
 * test backend: a database of its own on PostgreSQL, nothing on SQLite (the data dir's file).
 */
export async function testDatabaseEnv(t: { teardown: (fn: () => unknown) => void }): Promise<Record<string, string>> {
  return testBackend === 'postgres' ? { PRIME_DATABASE_URL: await pgTestDatabaseUrl(t) } : {}
}

/** Node's arguments that run the TypeScript sources in a child process: tsx, as the tests themselves run (.taprc). */
export const TS_LOADER = ['--import=tsx']

let migrated: string | undefined
/**
 * A migrated SQLite database, made once per test process: each app's data dir starts with a
 * copy of it (3 ms) instead of running every migration again (60 ms), as each PostgreSQL test
 * database is made from a migrated template (tests/pg.ts). The app migrates it as it would
 * an existing file: nothing to do. tests/database.test.ts and the migration tests start from
 * empty files.
 */
function migratedSqlite(): string {
  if (migrated) return migrated
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-migrated-'))
  openDatabase(path.join(dir, 'prime.sqlite')).close()
  process.once('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  migrated = path.join(dir, 'prime.sqlite')
  return migrated
}

/** A fresh app on its own data dir (and database), answering-checked against the contract. */
export async function build(t: { teardown: (fn: () => unknown) => void }, env: Record<string, string> = {}, spec?: Record<string, any>): Promise<FastifyInstance & { testConfig: Config }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-test-'))
  const database = env.PRIME_DATABASE_URL === undefined ? await testDatabaseEnv(t) : {}
  // PRIME_CACHES=off from the runner's caches-off pass (scripts/run-tests.mjs): the apps keep nothing.
  const caches = process.env.PRIME_CACHES ? { PRIME_CACHES: process.env.PRIME_CACHES } : {}
  // Text filters' counts on PostgreSQL are exact however busy the machine: the tests compare
  // them with models; the budget's estimates are pinned by tests/events-count-estimate.test.ts.
  const config = loadConfig({
    PRIME_DATA_DIR: dir,
    PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD,
    LOG_LEVEL: 'silent',
    PRIME_RATE_LIMIT_MAX: '100000',
    PRIME_PG_COUNT_BUDGET_MS: '600000',
    ...caches,
    ...database,
    ...env,
  })
  if (config.databaseUrl === undefined && config.dbFile === path.join(dir, 'prime.sqlite')) fs.copyFileSync(migratedSqlite(), config.dbFile)
  const app = await buildApp({ config, logger: false, validateResponses: true, spec })
  t.teardown(async () => {
    await closeQueries(app)
    await app.close()
    // Retried: on a busy machine a removal may race the file system's own bookkeeping.
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 })
  })
  return Object.assign(app, { testConfig: config })
}

export async function login(app: FastifyInstance, username = 'admin', password = ADMIN_PASSWORD): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username, password } })
  if (res.statusCode !== 200) throw new Error(`login of ${username} failed: ${res.statusCode} ${res.body}`)
  return res.json().token
}

/** Creates an account with the given profile and answers its token. */
export async function userWithProfile(app: FastifyInstance, adminToken: string, userName: string, userProfile: 10 | 20 | 30): Promise<string> {
  const password = USER_PASSWORD
  const res = await app.inject({
    method: 'POST',
    url: '/prime/webui/admin/adduser',
    headers: { authorization: `Bearer ${adminToken}` },
    payload: { userName, email: `${userName}@example.com`, userProfile, password },
  })
  if (res.statusCode !== 200) throw new Error(`adduser ${userName}: ${res.statusCode} ${res.body}`)
  return login(app, userName, password)
}

/** A migrated database in a data dir of its own, closed and removed at teardown. */
export function tempDb(t: { teardown: (fn: () => void) => void }): { db: DB; file: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-db-'))
  const file = path.join(dir, 'prime.sqlite')
  const db = openDatabase(file)
  t.teardown(() => {
    db.close()
    fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
  })
  return { db, file }
}

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

export async function call(app: FastifyInstance, token: string | undefined, opts: InjectOptions) {
  return app.inject({ ...opts, headers: { ...(token ? bearer(token) : {}), ...(opts.headers ?? {}) } })
}

/**
 * Options of a subtest about one backend inside a file that runs on both: skipped on
 * PostgreSQL, saying why (the file-level markers are described in tests/backends.md).
 */
export const sqliteOnly = (why: string): { skip?: string } => (testBackend === 'postgres' ? { skip: `sqlite-only: ${why}` } : {})

/** Options of a subtest that PostgreSQL cannot pass yet: skipped there, naming what is missing. */
export const postgresPending = (what: string): { skip?: string } => (testBackend === 'postgres' ? { skip: `postgres-pending: ${what}` } : {})
