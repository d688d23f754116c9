// Backup and restore of a data directory. A backup is a directory: a consistent copy of the
// database taken with SQLite's online backup API while the server runs and writes, every
// other file of the data directory (secrets, keys, report files, archives), and
// manifest.json with the size and SHA-256 of each. A restore checks all of it before it
// writes anything.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { latestSchemaVersion } from '../db/index.js'
import { DataDirInUse, DataDirLock, HOLDER_FILE, LOCK_FILE } from './data-dir.js'

export const MANIFEST = 'manifest.json'
export const DB_FILE = 'prime.sqlite'
/** Says who holds the data directory's lock (lib/data-dir.ts). */
export const PID_FILE = HOLDER_FILE
const FORMAT = 1

/** The database's own files and the data directory's lock and holder are never copied as files. */
const SKIPPED = new Set([DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, `${DB_FILE}-journal`, PID_FILE, LOCK_FILE, `${LOCK_FILE}-journal`])
/** Left in place when a restore moves a directory's contents aside: the restore holds that lock. */
const KEPT_IN_PLACE = new Set([LOCK_FILE, `${LOCK_FILE}-journal`, PID_FILE])

export interface ManifestFile {
  path: string
  size: number
  sha256: string
}
export interface Manifest {
  format: number
  createdTime: string
  schemaVersion: number
  database: ManifestFile
  files: ManifestFile[]
}

export class BackupError extends Error {
  override name = 'BackupError'
}

function sha256(file: string): string {
  const hash = crypto.createHash('sha256')
  const fd = fs.openSync(file, 'r')
  try {
    const buf = Buffer.allocUnsafe(1 << 20)
    for (let n: number; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0; ) hash.update(buf.subarray(0, n))
  } finally {
    fs.closeSync(fd)
  }
  return hash.digest('hex')
}

/** The files under `dir` (relative, `/`-separated), but the database's own and the pid file. */
function listFiles(dir: string, under = ''): string[] {
  const out: string[] = []
  for (const entry of fs.readdirSync(path.join(dir, under), { withFileTypes: true })) {
    const rel = under ? `${under}/${entry.name}` : entry.name
    if (!under && SKIPPED.has(entry.name)) continue
    if (entry.isDirectory()) out.push(...listFiles(dir, rel))
    else if (entry.isFile()) out.push(rel)
  }
  return out.sort()
}

/** Copies `from` to `to` with mode 0600, creating its directories 0700. */
function copyPrivate(from: string, to: string) {
  fs.mkdirSync(path.dirname(to), { recursive: true, mode: 0o700 })
  fs.copyFileSync(from, to)
  fs.chmodSync(to, 0o600)
}

function isEmptyDir(dir: string): boolean {
  return !fs.existsSync(dir) || fs.readdirSync(dir).length === 0
}

export interface BackupResult {
  manifest: Manifest
  ms: number
  bytes: number
}

/**
 * Backs up the data directory `dataDir` into `outDir` (absent or empty). The database is
 * copied first, as of one instant (a write by the server restarts the copy, which then
 * takes the rest in one step: it always ends); then the other files, so that every file
 * the copied database refers to is there (one created later is an extra).
 */
export async function backup(dataDir: string, outDir: string): Promise<BackupResult> {
  const started = performance.now()
  const dbFile = path.join(dataDir, DB_FILE)
  if (!fs.existsSync(dbFile)) throw new BackupError(`${dataDir} holds no database (${DB_FILE})`)
  if (!isEmptyDir(outDir)) throw new BackupError(`${outDir} is not empty: back up into a new directory`)
  fs.mkdirSync(outDir, { recursive: true, mode: 0o700 })
  fs.chmodSync(outDir, 0o700)
  const target = path.join(outDir, DB_FILE)
  const source = new Database(dbFile, { fileMustExist: true })
  try {
    source.pragma('busy_timeout = 5000')
    await source.backup(target, { progress: () => 1 << 30 })
  } finally {
    source.close()
  }
  fs.chmodSync(target, 0o600)
  // A copy in rollback-journal mode is one self-contained file, readable read-only (the
  // server puts it back in WAL mode when it opens it).
  const copy = new Database(target, { fileMustExist: true })
  copy.pragma('journal_mode = DELETE')
  const schemaVersion = copy.pragma('user_version', { simple: true }) as number
  copy.close()
  const files: ManifestFile[] = []
  for (const rel of listFiles(dataDir)) {
    const to = path.join(outDir, 'files', ...rel.split('/'))
    try {
      copyPrivate(path.join(dataDir, ...rel.split('/')), to)
    } catch (err) {
      // Removed since it was listed (a report file past its retention): not part of the copy.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue
      throw err
    }
    files.push({ path: rel, size: fs.statSync(to).size, sha256: sha256(to) })
  }
  const manifest: Manifest = {
    format: FORMAT,
    createdTime: new Date().toISOString(),
    schemaVersion,
    database: { path: DB_FILE, size: fs.statSync(target).size, sha256: sha256(target) },
    files,
  }
  fs.writeFileSync(path.join(outDir, MANIFEST), JSON.stringify(manifest, null, 2) + '\n', { mode: 0o600 })
  const bytes = manifest.database.size + files.reduce((n, f) => n + f.size, 0)
  return { manifest, ms: performance.now() - started, bytes }
}

/** Checks a backup directory: its manifest, each file's size and checksum, the database. Answers the manifest. */
export function verifyBackup(fromDir: string): Manifest {
  let manifest: Manifest
  try {
    manifest = JSON.parse(fs.readFileSync(path.join(fromDir, MANIFEST), 'utf8'))
  } catch (err) {
    throw new BackupError(`${fromDir} holds no readable ${MANIFEST}: ${(err as Error).message}`)
  }
  if (manifest?.format !== FORMAT || !manifest.database || !Array.isArray(manifest.files)) throw new BackupError(`${MANIFEST} is not a backup manifest of format ${FORMAT}`)
  const check = (f: ManifestFile, file: string) => {
    if (typeof f.path !== 'string' || f.path.split('/').some((p) => p === '..' || p === '' || p === '.') || path.isAbsolute(f.path)) {
      throw new BackupError(`${MANIFEST} names an unsafe path: ${JSON.stringify(f.path)}`)
    }
    if (!fs.existsSync(file)) throw new BackupError(`${f.path} is missing from the backup`)
    if (fs.statSync(file).size !== f.size || sha256(file) !== f.sha256) throw new BackupError(`${f.path} does not match its checksum: the backup is damaged`)
  }
  check(manifest.database, path.join(fromDir, DB_FILE))
  for (const f of manifest.files) check(f, path.join(fromDir, 'files', ...f.path.split('/')))
  const latest = latestSchemaVersion()
  if (manifest.schemaVersion > latest) throw new BackupError(`the backup's schema version ${manifest.schemaVersion} is newer than this server's (${latest}): restore it with that version`)
  const db = new Database(path.join(fromDir, DB_FILE), { readonly: true, fileMustExist: true })
  try {
    const version = db.pragma('user_version', { simple: true }) as number
    if (version !== manifest.schemaVersion) throw new BackupError(`the database is at schema version ${version}, the manifest says ${manifest.schemaVersion}`)
    const result = (db.pragma('integrity_check(10)') as { integrity_check: string }[]).map((r) => r.integrity_check).join('; ')
    if (result !== 'ok') throw new BackupError(`the database fails SQLite's integrity check: ${result}`)
  } finally {
    db.close()
  }
  return manifest
}

export interface RestoreResult {
  manifest: Manifest
  ms: number
  movedAside: string | null
}

/**
 * Restores the backup in `fromDir` into `dataDir`, after checking it whole (verifyBackup).
 * Refuses a data directory a server runs on (its lock is held; `force` changes nothing to
 * that), and a non-empty one unless `force`: then its contents are moved aside into
 * `<dataDir>.replaced-<time>` (nothing is deleted). The restore holds the lock meanwhile, so
 * that no server starts on a half-written directory. The database is written last, under a
 * temporary name renamed into place.
 */
export function restore(fromDir: string, dataDir: string, opts: { force?: boolean } = {}): RestoreResult {
  const started = performance.now()
  const manifest = verifyBackup(fromDir)
  const holdsContents = (dir: string) => fs.existsSync(dir) && fs.readdirSync(dir).some((entry) => !KEPT_IN_PLACE.has(entry))
  // Checked before the lock is taken, which creates the directory.
  const nonEmpty = holdsContents(dataDir)
  let lock: DataDirLock
  try {
    lock = DataDirLock.take(dataDir, 'restore')
  } catch (err) {
    if (err instanceof DataDirInUse) throw new BackupError(`${err.message}: stop it first (--force does not override this)`)
    throw err
  }
  try {
    let movedAside: string | null = null
    if (nonEmpty) {
      if (!opts.force) throw new BackupError(`${dataDir} is not empty: restore into an empty directory, or give --force to move its contents aside`)
      movedAside = `${path.resolve(dataDir)}.replaced-${new Date().toISOString().replace(/[:.]/g, '')}`
      fs.mkdirSync(movedAside, { mode: 0o700 })
      for (const entry of fs.readdirSync(dataDir)) if (!KEPT_IN_PLACE.has(entry)) fs.renameSync(path.join(dataDir, entry), path.join(movedAside, entry))
    }
    fs.chmodSync(dataDir, 0o700)
    for (const f of manifest.files) copyPrivate(path.join(fromDir, 'files', ...f.path.split('/')), path.join(dataDir, ...f.path.split('/')))
    const temp = path.join(dataDir, `${DB_FILE}.restoring`)
    copyPrivate(path.join(fromDir, DB_FILE), temp)
    fs.renameSync(temp, path.join(dataDir, DB_FILE))
    return { manifest, ms: performance.now() - started, movedAside }
  } finally {
    lock.release()
  }
}
