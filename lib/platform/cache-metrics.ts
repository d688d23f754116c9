// The caches' counts as metrics (app.caches, lib/platform/cache.ts): hits, misses and evictions as
// counters, entries and bytes as gauges, by cache, read from the registry when scraped.
import type { FastifyInstance } from 'fastify'
import client from 'prom-client'
import type { Counter } from 'prom-client'
import type { CacheStats } from './cache.js'

/** Each cache's counts (`app.caches`), read from the registry when scraped (a few dozen numbers). */
export function registerCacheMetrics(app: FastifyInstance, registry: client.Registry): void {
  const stats = () => app.caches.stats()
  // The registry's counts only grow: the counters are set to them (reset, then raised to the count).
  const counter = (name: string, help: string, of: (s: CacheStats) => number) => {
    const c: Counter<'cache'> = new client.Counter({
      name,
      help,
      labelNames: ['cache'],
      registers: [registry],
      collect() {
        c.reset()
        for (const s of stats()) c.inc({ cache: s.name }, of(s))
      },
    })
  }
  counter('prime_cache_hits_total', 'Cache lookups answered from the cache, by cache (GET /prime/webui/system/caches lists them).', (s) => s.hits)
  counter('prime_cache_misses_total', 'Cache lookups not answered from it (read from the database or computed), by cache.', (s) => s.misses)
  counter('prime_cache_evictions_total', "Entries pushed out by a bound (the cache's own or the total, PRIME_CACHE_MB), by cache.", (s) => s.evictions)
  const gauge = (name: string, help: string, of: (s: CacheStats) => number) => {
    const g = new client.Gauge({
      name,
      help,
      labelNames: ['cache'],
      registers: [registry],
      collect() {
        g.reset()
        for (const s of stats()) g.set({ cache: s.name }, of(s))
      },
    })
  }
  gauge('prime_cache_entries', 'Entries a cache holds now, by cache.', (s) => s.entries)
  gauge('prime_cache_bytes', 'Bytes a cache holds now (estimated), by cache.', (s) => s.bytes)
}
