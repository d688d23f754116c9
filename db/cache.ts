// The one in-memory cache of the server: bounded (the least recently used out first, as a second-chance approximation), entries
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
  private readonly entries = new Map<K, { value: V; expiresMs: number; used: boolean }>()
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

  /** The entry, marked as used since the last eviction pass; undefined when absent or expired (at `now`). */
  get(key: K, now?: number): V | undefined {
    const e = this.entries.get(key)
    if (!e) return undefined
    if (e.expiresMs !== Infinity && (now ?? this.now()) >= e.expiresMs) {
      this.entries.delete(key)
      return undefined
    }
    // Marked, not moved: deleting and setting the key again on every hit (every request's
    // token check) churned the map's table. Eviction gives marked entries a second chance.
    e.used = true
    return e.value
  }

  /** Keeps `value` (until `expiresMs` when given), making room by dropping an entry not used lately. */
  set(key: K, value: V, expiresMs?: number): void {
    if (this.max <= 0) return
    this.entries.delete(key)
    if (this.entries.size >= this.max) this.evictOne()
    this.entries.set(key, { value, expiresMs: expiresMs ?? (this.ttlMs === Infinity ? Infinity : this.now() + this.ttlMs), used: false })
  }

  /**
   * Drops the oldest entry not used since it was last passed over (second chance, an LRU
   * approximation): a used one goes to the newest end unmarked. Ends within one pass.
   */
  private evictOne(): void {
    for (const [key, e] of this.entries) {
      this.entries.delete(key)
      if (!e.used) return
      e.used = false
      this.entries.set(key, e)
    }
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
