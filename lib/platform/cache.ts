// The in-memory caches of the server and their registry. Every kept structure that is only a
// cache is made by an app's registry (`caches.create`) with a name, a byte bound and what
// invalidates it; the registry counts each cache's hits, misses, evictions, entries and
// bytes, holds a total bound across them (the least recently used entry of any cache goes
// first) and can turn them all off (`PRIME_CACHES=off`: every get is a miss, nothing is
// kept, so every answer comes from the base structures). One registry per app, never a
// module global. The file imports nothing of the project (lru-cache alone), so any layer may
// use it: the platform's, the features' and the storage's caches (db/ may import it, the
// layering check's db-returns-rows says so).

import { LRUCache } from 'lru-cache'

/** Bytes an entry costs beyond its key and value (the list's slot, the entry object). */
const ENTRY_BYTES = 64

/**
 * An estimate of what a value holds in memory: strings two bytes a character, buffers and
 * typed arrays their bytes, numbers 8; arrays and plain objects what they hold, to a few
 * levels (a cache of structured values may give a `sizeOf` of its own).
 */
export function estimateBytes(value: unknown, depth = 3): number {
  switch (typeof value) {
    case 'string':
      return 16 + value.length * 2
    case 'number':
    case 'boolean':
    case 'undefined':
    case 'bigint':
      return 8
    case 'object': {
      if (value === null) return 8
      if (ArrayBuffer.isView(value)) return 64 + value.byteLength
      if (value instanceof ArrayBuffer) return 64 + value.byteLength
      if (depth <= 0) return 64
      let n = 16
      if (Array.isArray(value)) {
        for (const v of value) n += 8 + (typeof v === 'object' || typeof v === 'string' ? estimateBytes(v, depth - 1) : 0)
        return n
      }
      if (value instanceof Map || value instanceof Set) return 64 + value.size * 64
      for (const k in value) {
        const v = (value as Record<string, unknown>)[k]
        n += 16 + (typeof v === 'object' || typeof v === 'string' ? estimateBytes(v, depth - 1) : 0)
      }
      return n
    }
    default:
      return 64
  }
}

export interface CacheOptions<K = unknown, V = unknown> {
  /** Entries at most; 0 keeps nothing (every question is read afresh). Default: no bound but the bytes. */
  max?: number
  /** Bytes at most (estimated: `sizeOf`); default: no bound but the entries and the registry's total. */
  maxBytes?: number
  /** What an entry costs in bytes (default: `estimateBytes` of its key and value). */
  sizeOf?: (value: V, key: K) => number
  /** How long an entry lives unless `set` says otherwise (default: until evicted or invalidated). */
  ttlMs?: number
  /** The clock expiries are measured on. */
  now?: () => number
}

/** What `caches.create` takes: a cache's options, and its name and invalidating signal for operators. */
export interface RegisteredCacheOptions<K, V> extends CacheOptions<K, V> {
  /** Unique in the registry, lower-case letters, digits and dashes: the `cache` label of the metrics. */
  name: string
  /** What invalidates it (a sentence for the Administrators' view). */
  signal: string
}

export interface CacheStats {
  name: string
  signal: string
  entries: number
  bytes: number
  maxBytes: number | null
  hits: number
  misses: number
  evictions: number
}

interface Entry<V> {
  value: V
  expiresMs: number
  bytes: number
  /** The registry's use tick when last set or hit: the total bound evicts the smallest. */
  used: number
}

// Entries are kept in lru-cache's list (arrays of slots, no reordering of a Map on every hit:
// a hit costs a third of a Map's delete and set at 50,000 entries); the bytes, the counts,
// expiry and the recency across caches are this class's.
export class Cache<K, V> {
  private readonly entries: LRUCache<K & {}, Entry<V>>
  private version: unknown = undefined
  readonly maxBytes: number
  private readonly ttlMs: number
  private readonly now: () => number
  private readonly sizeOf: (value: V, key: K) => number
  /** False when nothing may be kept (a bound of 0, or the registry's caches off). */
  readonly keeps: boolean
  hits = 0
  misses = 0
  evictions = 0
  bytes = 0

  constructor(
    opts: CacheOptions<K, V>,
    private readonly registry?: CacheRegistry,
    readonly name = '',
    readonly signal = '',
  ) {
    const max = opts.max ?? Infinity
    this.maxBytes = opts.maxBytes ?? Infinity
    this.ttlMs = opts.ttlMs ?? Infinity
    this.now = opts.now ?? Date.now
    this.sizeOf = opts.sizeOf ?? ((value, key) => estimateBytes(key) + estimateBytes(value))
    this.keeps = max > 0 && this.maxBytes > 0 && (registry?.on ?? true)
    this.entries = new LRUCache<K & {}, Entry<V>>({
      max: this.keeps && Number.isFinite(max) ? max : 0,
      maxSize: this.keeps && Number.isFinite(this.maxBytes) ? Math.max(1, Math.floor(this.maxBytes)) : Number.MAX_SAFE_INTEGER,
      dispose: (e, _, reason) => {
        this.bytes -= e.bytes
        if (this.registry) this.registry.bytes -= e.bytes
        if (reason === 'evict') this.evictions++
      },
    })
  }

  get size(): number {
    return this.entries.size
  }

  /** The entry, made the most recently used; undefined when absent or expired (at `now`). */
  get(key: K, now?: number): V | undefined {
    const e = this.entries.get(key as K & {})
    if (e === undefined) {
      this.misses++
      return undefined
    }
    if (e.expiresMs !== Infinity && (now ?? this.now()) >= e.expiresMs) {
      this.entries.delete(key as K & {})
      this.misses++
      return undefined
    }
    if (this.registry) e.used = this.registry.tick++
    this.hits++
    return e.value
  }

  /**
   * The entry when `valid` accepts it (a hit), else undefined (a miss; a kept entry it
   * refuses is dropped): for entries that carry the version they were read at.
   */
  getValid(key: K, valid: (value: V) => boolean): V | undefined {
    const e = this.entries.peek(key as K & {})
    if (e !== undefined && !valid(e.value)) this.entries.delete(key as K & {})
    return this.get(key)
  }

  /** Whether `key` is kept (not counted, not made more recent). */
  has(key: K): boolean {
    return this.entries.has(key as K & {})
  }

  /** Keeps `value` (until `expiresMs` when given), making room by dropping the least recently used. */
  set(key: K, value: V, expiresMs?: number): void {
    if (!this.keeps) return
    const bytes = Math.ceil(ENTRY_BYTES + this.sizeOf(value, key))
    // An entry larger than the bound would only push every other out, then go itself.
    if (bytes > this.maxBytes) {
      this.entries.delete(key as K & {})
      return
    }
    const used = this.registry ? this.registry.tick++ : 0
    const entry = { value, expiresMs: expiresMs ?? (this.ttlMs === Infinity ? Infinity : this.now() + this.ttlMs), bytes, used }
    // Counted before: setting may dispose of the key's old entry and of others, which subtract theirs.
    this.bytes += bytes
    if (this.registry) this.registry.bytes += bytes
    this.entries.set(key as K & {}, entry, { size: bytes })
    if (this.registry && this.registry.bytes > this.registry.maxBytes) this.registry.evictOver(this)
  }

  /** The kept value of `key`, or `compute()`'s, then kept. */
  getOrSet(key: K, compute: () => V): V {
    if (!this.keeps) {
      this.misses++
      return compute()
    }
    const hit = this.get(key)
    if (hit !== undefined) return hit
    const value = compute()
    this.set(key, value)
    return value
  }

  delete(key: K): void {
    this.entries.delete(key as K & {})
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
    this.clear()
    this.version = version
  }

  /** The use tick of the least recently used entry (undefined when empty): the registry's total bound compares them. */
  oldestUse(): number | undefined {
    for (const e of this.entries.rvalues()) if (e !== undefined) return e.used
    return undefined
  }

  /** Drops the least recently used entry, counted as an eviction. */
  evictOldest(): void {
    this.entries.pop()
  }

  stats(): CacheStats {
    return {
      name: this.name,
      signal: this.signal,
      entries: this.entries.size,
      bytes: this.bytes,
      maxBytes: this.maxBytes === Infinity ? null : this.maxBytes,
      hits: this.hits,
      misses: this.misses,
      evictions: this.evictions,
    }
  }
}

export interface CacheRegistryOptions {
  /** False: every cache keeps nothing (PRIME_CACHES=off). Default true. */
  on?: boolean
  /** The bytes all caches together may hold (PRIME_CACHE_MB); default no bound but each cache's. */
  maxBytes?: number
}

/**
 * An app's caches: each made here with a name, counted, and held together under one total
 * bound. A structure that is the data rather than a copy of it (an index) is not made here.
 */
export class CacheRegistry {
  readonly on: boolean
  readonly maxBytes: number
  /** Bytes held by every cache together. */
  bytes = 0
  /** Moves with every set and hit: an entry's recency across caches. */
  tick = 1
  private readonly caches = new Map<string, Cache<any, any>>()

  constructor(opts: CacheRegistryOptions = {}) {
    this.on = opts.on ?? true
    this.maxBytes = opts.maxBytes ?? Infinity
  }

  /** A new cache of this registry; its name must be new. */
  create<K, V>(opts: RegisteredCacheOptions<K, V>): Cache<K, V> {
    if (!/^[a-z0-9-]+$/.test(opts.name)) throw new Error(`a cache's name is lower-case letters, digits and dashes: ${opts.name}`)
    if (this.caches.has(opts.name)) throw new Error(`a cache named ${opts.name} exists already`)
    const cache = new Cache<K, V>(opts, this, opts.name, opts.signal)
    this.caches.set(opts.name, cache)
    return cache
  }

  /** Each cache's counts, in the order they were made. */
  stats(): CacheStats[] {
    return [...this.caches.values()].map((c) => c.stats())
  }

  /** While the total is over its bound, drops the least recently used entry of any cache (`by` made the last entry). */
  evictOver(by: Cache<any, any>): void {
    while (this.bytes > this.maxBytes) {
      let oldest: Cache<any, any> | undefined
      let at = Infinity
      for (const c of this.caches.values()) {
        const used = c.oldestUse()
        if (used !== undefined && used < at) {
          at = used
          oldest = c
        }
      }
      ;(oldest ?? by).evictOldest()
      if (!oldest && by.size === 0) return
    }
  }
}

/** A cache of `registry`, or one of its own where none is given (scripts, and tests of a part alone). */
export function cacheIn<K, V>(registry: CacheRegistry | undefined, opts: RegisteredCacheOptions<K, V>): Cache<K, V> {
  return registry ? registry.create(opts) : new Cache<K, V>(opts, undefined, opts.name, opts.signal)
}
