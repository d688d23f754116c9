// The data directory holds the database, its WAL, report files and the generated secrets:
// only the server's own user may read it. Checked at every start, before the database opens.
import fs from 'node:fs'
import path from 'node:path'

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
