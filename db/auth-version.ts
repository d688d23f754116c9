import type { DB } from './index.js'

const readers = new WeakMap<DB, () => number>()

/**
 * What `PRAGMA data_version` says, read at most once a millisecond: it moves with every
 * commit by another connection (another process on the same data dir, a worker thread),
 * never with this connection's own. Reading it per request took about 6% of a small
 * request's CPU time; each read takes and drops a shared lock (two system calls). One
 * reader per connection, shared by the caches that ask (the credentials' and the accounts').
 */
export function otherConnectionsCommits(db: DB): () => number {
  let reader = readers.get(db)
  if (reader) return reader
  const dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck()
  let checkedMs = -1
  let seen = 0
  reader = () => {
    const now = Date.now()
    if (now !== checkedMs) {
      checkedMs = now
      seen = dataVersion.get()!
    }
    return seen
  }
  readers.set(db, reader)
  return reader
}

/**
 * Moves with every write that can change who a credential belongs to or whether it still
 * works (account changes, revocations, deletions), so that lookups done per request can be
 * cached and still see a revocation on the very next request. This connection's writes
 * call `bump()`; a commit by another connection moves it too, within a millisecond (the
 * other writer may have revoked a session or disabled an account).
 */
export class AuthVersion {
  private count = 0
  private othersSeen: number | undefined
  private readonly listeners: (() => unknown)[] = []
  /** The telling queued for this turn's writes outside a unit of work, until it has run. */
  private pending: Promise<void> | undefined

  constructor(
    private readonly others?: () => number,
    /**
     * Defers the telling to the commit of the caller's unit of work, when it is in one
     * (db/unit-of-work.ts); a unit that awaits what its callbacks answer (PostgreSQL's) is
     * answered once the listeners have acted.
     */
    private readonly afterCommit: (fn: () => Promise<void>) => boolean = () => false,
  ) {}

  /**
   * Resolves once the listeners have acted on this write (their Promises settled), so that
   * an asynchronous backend can answer a revoking request only after the streams it ends
   * are closed; at once inside a unit of work, whose commit tells instead.
   */
  bump(): Promise<void> {
    this.count++
    if (this.listeners.length === 0) return DONE
    // A unit of work tells when it commits, and never if it rolls back.
    if (this.afterCommit(() => this.tell())) return DONE
    // Once the writing code has run to its end: a synchronous transaction has committed (or
    // rolled back) by then, and several writes of one request tell once.
    this.pending ??= new Promise<void>((resolve) =>
      queueMicrotask(() => {
        this.pending = undefined
        resolve(this.tell())
      }),
    )
    return this.pending
  }

  private async tell(): Promise<void> {
    const acting = this.listeners.map((listener) => listener())
    if (acting.some(isPromise)) await Promise.allSettled(acting)
  }

  /**
   * Calls `listener` after writes by this connection that bump the version (it must not
   * throw; a Promise it answers is waited for by `bump`'s, and must not reject).
   */
  onBump(listener: () => unknown): void {
    this.listeners.push(listener)
  }

  get value(): number {
    if (this.others) {
      const at = this.others()
      if (at !== this.othersSeen) {
        this.othersSeen = at
        this.count++
      }
    }
    return this.count
  }
}

const DONE = Promise.resolve()
const isPromise = (v: unknown): v is Promise<unknown> => typeof (v as Promise<unknown> | undefined)?.then === 'function'
