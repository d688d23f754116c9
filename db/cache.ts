// The one in-memory cache of the server: bounded (least recently used out first), entries
// that may expire, explicit invalidation, and whole-cache invalidation when the version of
// what it was read from moves on. One instance per owner (an app's repository, service or
// token check): never a module global. It imports nothing, so any layer may use it; it is
// kept in db/ because the storage layer's kept answers use it, and db/ imports nothing above it.

export interface CacheOptions {
  /** Entries at most; 0 keeps nothing (every question is read afresh). */
  max: number
  /** How long an entry lives unless `set` says otherwise (default: until evicted or invalidated). */
  ttlMs?: number
  /** The clock expiries are measured on. */
  now?: () => number
}

export class Cache<K, V> {
  private readonly entries = new Map<K, { value: V; expiresMs: number }>()
  private version: unknown = undefined
  private readonly max: number
  private readonly ttlMs: number
  private readonly now: () => number

  constructor(opts: CacheOptions) {
    this.max = opts.max
    this.ttlMs = opts.ttlMs ?? Infinity
    this.now = opts.now ?? Date.now
  }

  get size(): number {
    return this.entries.size
  }

  /** The entry, made the most recently used; undefined when absent or expired (at `now`). */
  get(key: K, now?: number): V | undefined {
    const e = this.entries.get(key)
    if (!e) return undefined
    this.entries.delete(key)
    if (e.expiresMs !== Infinity && (now ?? this.now()) >= e.expiresMs) return undefined
    this.entries.set(key, e)
    return e.value
  }

  /** Keeps `value` (until `expiresMs` when given), making room by dropping the least recently used. */
  set(key: K, value: V, expiresMs?: number): void {
    if (this.max <= 0) return
    this.entries.delete(key)
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value as K)
    this.entries.set(key, { value, expiresMs: expiresMs ?? (this.ttlMs === Infinity ? Infinity : this.now() + this.ttlMs) })
  }

  /** The kept value of `key`, or `compute()`'s, then kept. */
  getOrSet(key: K, compute: () => V): V {
    if (this.max <= 0) return compute()
    const hit = this.get(key)
    if (hit !== undefined) return hit
    const value = compute()
    this.set(key, value)
    return value
  }

  delete(key: K): void {
    this.entries.delete(key)
  }

  clear(): void {
    this.entries.clear()
  }

  /**
   * Says which version of the source the next answers are read from: a version other than
   * the last one given drops every entry (they were read from an older one).
   */
  validFor(version: unknown): void {
    if (version === this.version) return
    this.entries.clear()
    this.version = version
  }
}
