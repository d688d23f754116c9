import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { migrationsDir } from './migrations-dir.js'
import { registerMatchFunctions } from './match.js'
import { registerGramFunctions } from './asset-grams.js'

export type DB = Database.Database

/** SQLite's automatic checkpoint of a connection, in pages, when no thread does it (db/checkpoints.ts). */
export const AUTO_CHECKPOINT_PAGES = 10_000
export { migrationsDir }

/**
 * `cacheMb`: SQLite's page cache of this connection, resident once filled; the operating
 * system's file cache keeps the rest of the file near. At 4 MB, lists that read many pages
 * (risk notifications by a date range, pinned ones; agentless lists) took 1.7-3 times as
 * long as at 16 MB in the same process, for 12 MB less.
 * `mmapMb`: that much of the file is read through a memory map instead of a copy into the
 * page cache per read (0: none, SQLite's default); the mapped pages the process touched
 * count in its RSS, though they are the file cache's and the system takes them back freely.
 */
export function openDatabase(file: string, { cacheMb = 16, mmapMb = 0 }: { cacheMb?: number; mmapMb?: number } = {}): DB {
  // Created private: SQLite gives the WAL and shared-memory files the database file's mode.
  if (file !== ':memory:' && file !== '') fs.closeSync(fs.openSync(file, 'a', 0o600))
  const db = new Database(file)
  db.pragma('journal_mode = WAL')
  // FULL, not NORMAL: in WAL mode NORMAL may lose the last commits on power loss or an
  // OS crash. An audit record that a client was told about must survive that.
  db.pragma('synchronous = FULL')
  // Checkpoints every 10,000 pages (40 MB of WAL) rather than SQLite's 1,000: index pages
  // written again and again between checkpoints are copied back once, and event writes
  // ran 30% faster at millions of events. The server turns them off for its connection and
  // checkpoints in a thread instead (db/checkpoints.ts): scripts keep these.
  db.pragma(`wal_autocheckpoint = ${AUTO_CHECKPOINT_PAGES}`)
  // A long reader (the integrity check, a slow export) lets the WAL grow past that while
  // writes go on; once a checkpoint has caught up, the file is cut back to 64 MB instead of
  // keeping its largest size for good.
  db.pragma('journal_size_limit = 67108864')
  db.pragma('foreign_keys = ON')
  // Without it, INSERT OR REPLACE deletes rows without firing DELETE triggers, and the
  // audit trail's immutability rests on those triggers.
  db.pragma('recursive_triggers = ON')
  db.pragma('busy_timeout = 5000')
  db.pragma(`cache_size = ${-Math.round(cacheMb * 1024)}`)
  if (mmapMb > 0) db.pragma(`mmap_size = ${mmapMb * 1024 * 1024}`)
  registerMatchFunctions(db)
  // Called by the triggers of agents and peripherals (db/asset-grams.ts).
  registerGramFunctions(db)
  migrate(db)
  return db
}

/** The schema version the migrations of `dir` reach (the number of the last file). */
export function latestSchemaVersion(dir = migrationsDir): number {
  const files = fs
    .readdirSync(dir)
    .filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f))
    .sort()
  return files.length ? Number(files[files.length - 1].slice(0, 3)) : 0
}

/**
 * Applies db/migrations/NNN_name.sql files above PRAGMA user_version, each in one
 * transaction; a file that starts with `-- foreign keys: off` runs with them off.
 */
export function migrate(db: DB, dir = migrationsDir): number {
  const current = db.pragma('user_version', { simple: true }) as number
  // Migration 039 and the triggers it creates call it, whoever opened the connection.
  registerGramFunctions(db)
  const files = fs
    .readdirSync(dir)
    .filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f))
    .sort()
  const latest = files.length ? Number(files[files.length - 1].slice(0, 3)) : 0
  if (current > latest) throw new Error(`the database is at schema version ${current}, newer than this server knows (${latest}): refusing to start`)
  let version = current
  for (const file of files) {
    const n = Number(file.slice(0, 3))
    if (n <= current) continue
    if (n !== version + 1) throw new Error(`migration ${file} is out of sequence (schema is at ${version})`)
    const sql = fs.readFileSync(path.join(dir, file), 'utf8')
    // A migration that rebuilds a table others reference runs with foreign keys off (they
    // cannot be switched inside a transaction), and must leave every reference whole.
    const foreignKeysOff = sql.startsWith('-- foreign keys: off')
    const enforced = db.pragma('foreign_keys', { simple: true }) as number
    if (foreignKeysOff) db.pragma('foreign_keys = OFF')
    try {
      db.transaction(() => {
        db.exec(sql)
        const broken = foreignKeysOff ? (db.pragma('foreign_key_check') as unknown[]) : []
        if (broken.length > 0) throw new Error(`migration ${file} leaves ${broken.length} broken references`)
        db.pragma(`user_version = ${n}`)
      })()
    } finally {
      if (foreignKeysOff) db.pragma(`foreign_keys = ${enforced}`)
    }
    version = n
  }
  return version
}
