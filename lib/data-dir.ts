// The data directory holds the database, its WAL, report files and the generated secrets:
// only the server's own user may read it. Checked at every start, before the database opens.
// One process writes into it at a time: a server, or a restore (DataDirLock).
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'

/** Group or others may write. */
const OTHERS_WRITE = 0o022
/** Group or others may read, write or enter. */
const OTHERS_ANY = 0o077

/** A data directory the server will not start on; its message says how to fix it. */
export class DataDirRefused extends Error {}

export interface Tightened {
  path: string
  from: string
  to: string
}

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, '0')

/**
 * Makes the data directory and everything in it private (group and others lose every
 * permission: files 0600, folders 0700) and answers what it changed, for a warning. Refuses (throws) when the directory, or anything
 * in it, may be written by other users: a secret or database they planted there would be
 * trusted, and tightening the modes now would not undo that.
 */
export function secureDataDir(dir: string): Tightened[] {
  const found: { path: string; mode: number; dir: boolean }[] = []
  const walk = (p: string) => {
    const st = fs.lstatSync(p)
    // A link is not followed: what it points to is not the data directory's.
    if (st.isSymbolicLink()) return
    found.push({ path: p, mode: st.mode, dir: st.isDirectory() })
    if (st.isDirectory()) for (const name of fs.readdirSync(p)) walk(path.join(p, name))
  }
  walk(dir)
  const writable = found.filter((f) => (f.mode & OTHERS_WRITE) !== 0)
  if (writable.length > 0) {
    const named = writable
      .slice(0, 5)
      .map((f) => `${f.path} (mode ${octal(f.mode)})`)
      .join(', ')
    throw new DataDirRefused(
      `the data directory ${dir} can be written by other users: ${named}${writable.length > 5 ? ` and ${writable.length - 5} more` : ''}. ` +
        `Files they put there (a JWT secret, a database) would be trusted: check its contents, make it private (chmod -R go-rwx ${dir}) and start again.`,
    )
  }
  const tightened: Tightened[] = []
  for (const f of found) {
    if ((f.mode & OTHERS_ANY) === 0) continue
    // The owner's bits stay (0600 for a file, 0700 for a folder); group and others lose theirs.
    const to = f.mode & 0o700
    try {
      fs.chmodSync(f.path, to)
    } catch (err) {
      throw new DataDirRefused(
        `the data directory ${dir} is readable by other users and ${f.path} cannot be made private (${(err as Error).message}): make it private (chmod -R go-rwx ${dir}) and start again.`,
      )
    }
    tightened.push({ path: f.path, from: octal(f.mode), to: octal(to) })
  }
  return tightened
}

/** The file whose lock marks the data directory as in use (lib/server.ts, a restore). */
export const LOCK_FILE = 'server.lock'
/** Who holds the lock: written by its holder after taking it, read for the refusal's message only. */
export const HOLDER_FILE = 'server.pid'

export interface Holder {
  pid: number
  /** When the holder took the lock, ISO 8601. */
  since: string
  /** What holds it: a server, or a restore writing into the directory. */
  by: 'server' | 'restore'
}

/** The data directory is held by another process; the message names it. */
export class DataDirInUse extends DataDirRefused {
  constructor(
    readonly dir: string,
    readonly holder: Holder | null,
  ) {
    const who = holder ? `${holder.by === 'restore' ? 'a restore' : 'a server'} (pid ${holder.pid}, since ${holder.since})` : 'another process (it has not said which yet)'
    super(`the data directory ${dir} is in use by ${who}`)
  }
}

/** What the holder file says, or null when it is absent or not one. */
export function readHolder(dir: string): Holder | null {
  try {
    const h = JSON.parse(fs.readFileSync(path.join(dir, HOLDER_FILE), 'utf8'))
    return Number.isInteger(h?.pid) && typeof h.since === 'string' && (h.by === 'server' || h.by === 'restore') ? h : null
  } catch {
    return null
  }
}

/**
 * The data directory's lock: SQLite's exclusive lock on `server.lock`, an fcntl(2) lock the
 * kernel releases whenever the holding process ends, SIGKILL and power loss included, so a
 * lock is never stale and nothing has to guess whether its holder still lives (a pid file or a
 * lock directory can only guess). better-sqlite3 is already here, and SQLite also keeps two
 * connections of one process apart, which plain fcntl locks do not. NFS and other network
 * file systems may not honour these locks: the data directory belongs on a local disk.
 */
export class DataDirLock {
  private constructor(
    readonly dir: string,
    private db: Database.Database | null,
    readonly holder: Holder,
  ) {}

  /** Takes the lock of `dir` (made 0700 when absent), or throws DataDirInUse naming who holds it. */
  static take(dir: string, by: Holder['by']): DataDirLock {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    const file = path.join(dir, LOCK_FILE)
    // Not followed: a link planted there would lock (and create) a file elsewhere.
    if (fs.lstatSync(file, { throwIfNoEntry: false })?.isSymbolicLink()) throw new DataDirRefused(`${file} is a symbolic link: remove it and start again`)
    const db = new Database(file, { timeout: 0 })
    try {
      db.pragma('locking_mode = EXCLUSIVE')
      // Nothing is ever written there: no journal file beside it.
      db.pragma('journal_mode = MEMORY')
      // The exclusive lock, kept after the commit in this locking mode until the connection closes.
      db.exec('BEGIN EXCLUSIVE')
      db.exec('COMMIT')
    } catch (err) {
      db.close()
      if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new DataDirInUse(dir, readHolder(dir))
      throw err
    }
    fs.chmodSync(file, 0o600)
    const holder: Holder = { pid: process.pid, since: new Date().toISOString(), by }
    fs.writeFileSync(path.join(dir, HOLDER_FILE), `${JSON.stringify(holder)}\n`, { mode: 0o600 })
    return new DataDirLock(dir, db, holder)
  }

  /** Releases the lock and removes the holder file (the lock file stays: it is locked, not present, that counts). */
  release(): void {
    if (!this.db) return
    if (readHolder(this.dir)?.pid === process.pid) fs.rmSync(path.join(this.dir, HOLDER_FILE), { force: true })
    this.db.close()
    this.db = null
  }
}
