// Backup and restore with PostgreSQL (PRIME_DATABASE_URL): PostgreSQL's own tools, pg_dump
// and pg_restore (the server's client package), in their custom format, with a manifest
// that names the schema version and the dump's size and SHA-256. With PostgreSQL a node
// keeps nothing of its own on disk (secrets and report files are in the database), so the
// dump is the whole backup. A restore checks the manifest and the dump before it writes,
// and refuses a database that holds data or that servers are connected to unless forced.
import { spawn } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { pgMigrationFiles } from '../db/postgres/index.js'
import { BackupError } from './backup.js'

export const PG_DUMP_FILE = 'prime.pgdump'
const MANIFEST = 'manifest.json'
const FORMAT = 1

export interface PgManifest {
  format: number
  backend: 'postgres'
  createdTime: string
  schemaVersion: number
  dump: { path: string; size: number; sha256: string }
}

function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] })
    let err = ''
    child.stderr.on('data', (c) => (err += c))
    child.on('error', (e) => reject(new BackupError(`${command} could not be run (${e.message}): install PostgreSQL's client tools`)))
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new BackupError(`${command} failed (exit ${code}): ${err.trim().slice(0, 2000)}`))))
  })
}

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'prime-backup' })
  client.on('error', () => {})
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

const sha256 = (file: string) => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex')

/** Dumps the database into `outDir` (new, mode 0700) while servers run: pg_dump reads one snapshot. */
export async function backupPostgres(url: string, outDir: string): Promise<{ manifest: PgManifest; ms: number }> {
  const start = Date.now()
  if (fs.existsSync(outDir)) throw new BackupError(`${outDir} exists: a backup goes into a new directory`)
  const schemaVersion = await withClient(url, async (c) => Number((await c.query('SELECT coalesce(max(version), 0) AS v FROM schema_migrations')).rows[0].v))
  fs.mkdirSync(outDir, { recursive: true, mode: 0o700 })
  const dump = path.join(outDir, PG_DUMP_FILE)
  await run('pg_dump', ['--format=custom', '--no-owner', '--no-privileges', `--file=${dump}`, `--dbname=${url}`])
  fs.chmodSync(dump, 0o600)
  const manifest: PgManifest = {
    format: FORMAT,
    backend: 'postgres',
    createdTime: new Date().toISOString(),
    schemaVersion,
    dump: { path: PG_DUMP_FILE, size: fs.statSync(dump).size, sha256: sha256(dump) },
  }
  fs.writeFileSync(path.join(outDir, MANIFEST), `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o600 })
  return { manifest, ms: Date.now() - start }
}

/** The manifest of a PostgreSQL backup, checked (dump present, size and checksum, a schema this server knows). */
export function verifyPostgresBackup(fromDir: string): PgManifest {
  let manifest: PgManifest
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(fromDir, MANIFEST), 'utf8'))
  } catch (err) {
    throw new BackupError(`${fromDir} holds no readable ${MANIFEST}: ${(err as Error).message}`)
  }
  if (manifest.backend !== 'postgres') throw new BackupError(`${fromDir} is a backup of an embedded SQLite data directory: restore it without PRIME_DATABASE_URL`)
  if (manifest.format !== FORMAT) throw new BackupError(`${fromDir} is a backup of format ${manifest.format}; this server reads format ${FORMAT}`)
  const dump = path.join(fromDir, manifest.dump.path)
  if (!fs.existsSync(dump)) throw new BackupError(`${dump} is missing`)
  if (fs.statSync(dump).size !== manifest.dump.size || sha256(dump) !== manifest.dump.sha256) throw new BackupError(`${dump} does not match its manifest (damaged or altered)`)
  const latest = pgMigrationFiles().length
  if (manifest.schemaVersion > latest) throw new BackupError(`the backup is at schema version ${manifest.schemaVersion}, newer than this server knows (${latest})`)
  return manifest
}

/**
 * Restores a backup into the database of `url`. Refused while servers are connected to it,
 * and when it already holds this product's schema, unless `force` (then its objects are
 * replaced). The server migrates a restored older schema when it starts.
 */
export async function restorePostgres(fromDir: string, url: string, opts: { force?: boolean } = {}): Promise<{ manifest: PgManifest; ms: number }> {
  const start = Date.now()
  const manifest = verifyPostgresBackup(fromDir)
  const { servers, schema } = await withClient(url, async (c) => ({
    servers: Number((await c.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'prime-webui'")).rows[0].n),
    schema: (await c.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")).rows[0].present as boolean,
  }))
  if (servers > 0) throw new BackupError(`${servers} server connection(s) are open to this database: stop every node before a restore`)
  if (schema && !opts.force) throw new BackupError('the database already holds data of this product: restore into an empty database, or give --force to replace it')
  // Replaced whole: pg_restore's own --clean cannot drop partitions' inherited constraints.
  if (schema) await withClient(url, (c) => c.query('DROP SCHEMA public CASCADE; CREATE SCHEMA public'))
  await run('pg_restore', ['--no-owner', '--no-privileges', '--single-transaction', '--exit-on-error', `--dbname=${url}`, path.join(fromDir, manifest.dump.path)])
  return { manifest, ms: Date.now() - start }
}
