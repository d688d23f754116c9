// backend: none — the in-memory cache alone (lib/platform/cache.ts), no database
// Pins the in-memory cache (lib/platform/cache.ts) every kept structure is made with, and its registry:
// byte bounds, the total bound across caches, the counts, and turning every cache off.
import t from 'tap'
import { Cache, CacheRegistry, estimateBytes } from '../lib/platform/cache.js'
import { KeptAnswers } from '../lib/notifications/kept.js'

t.test('bounded: the least recently used goes first', async (t) => {
  const c = new Cache<string, number>({ max: 2 })
  c.set('a', 1)
  c.set('b', 2)
  t.equal(c.get('a'), 1, 'a is now the most recently used')
  c.set('c', 3)
  t.same([c.get('a'), c.get('b'), c.get('c')], [1, undefined, 3])
  t.equal(c.size, 2)
})

t.test("entries expire: at the cache's age or at their own time", async (t) => {
  let now = 1000
  const c = new Cache<string, string>({ max: 10, ttlMs: 100, now: () => now })
  c.set('aged', 'x')
  c.set('own', 'y', 1050)
  now = 1049
  t.same([c.get('aged'), c.get('own')], ['x', 'y'])
  now = 1050
  t.same([c.get('aged'), c.get('own')], ['x', undefined])
  t.equal(c.get('aged', 1100), undefined, 'a time given to get wins over the clock')
  t.equal(c.size, 0, 'expired entries are dropped when met')
})

t.test('invalidation: one entry, all of them, or all when the source version moves on', async (t) => {
  const c = new Cache<string, number>({ max: 10 })
  let reads = 0
  const read = () => ++reads
  c.validFor(1)
  t.equal(c.getOrSet('k', read), 1)
  t.equal(c.getOrSet('k', read), 1, 'kept')
  c.validFor(1)
  t.equal(c.getOrSet('k', read), 1, 'the same version keeps it')
  c.validFor(2)
  t.equal(c.getOrSet('k', read), 2, 'a new version reads again')
  c.delete('k')
  t.equal(c.getOrSet('k', read), 3)
  c.clear()
  t.equal(c.getOrSet('k', read), 4)
})

t.test('max 0 keeps nothing', async (t) => {
  const c = new Cache<string, number>({ max: 0 })
  let reads = 0
  c.getOrSet('k', () => ++reads)
  c.getOrSet('k', () => ++reads)
  c.set('j', 1)
  t.equal(reads, 2)
  t.equal(c.size, 0)
})

t.test('kept notification answers follow the change number', async (t) => {
  const kept = new KeptAnswers(1)
  let reads = 0
  t.equal(await kept.answer(7, 'q', async () => ++reads), 1)
  t.equal(await kept.answer(7, 'q', async () => ++reads), 1)
  t.equal(await kept.answer(7, 'r', async () => ++reads), 2)
  t.equal(await kept.answer(7, 'q', async () => ++reads), 3, 'one answer at most: q went out for r')
  t.equal(await kept.answer(8, 'q', async () => ++reads), 4, 'a new change number reads again')
})

/** A cache whose entries cost their value in bytes (plus the fixed cost of an entry, 64). */
const sized = (caches: CacheRegistry, name: string, maxBytes?: number) => caches.create<string, number>({ name, signal: 'tests', maxBytes, sizeOf: (v) => v })

t.test('a byte bound: the least recently used go until the new entry fits', async (t) => {
  const caches = new CacheRegistry()
  const c = sized(caches, 'c', 3 * 164)
  for (const k of ['a', 'b', 'c']) c.set(k, 100)
  t.equal(c.bytes, 3 * 164)
  c.get('a')
  c.set('d', 200)
  t.same([c.has('a'), c.has('b'), c.has('c'), c.has('d')], [true, false, false, true], 'b and c went, a was used')
  t.equal(c.evictions, 2)
  c.set('huge', 10_000)
  t.notOk(c.has('huge'), 'an entry over the bound is not kept')
  t.ok(c.has('a'), 'and pushes nothing out')
  c.delete('a')
  c.clear()
  t.equal(c.bytes, 0)
  t.equal(caches.bytes, 0, 'the total follows deletes and clears')
})

t.test('the total bound evicts the least recently used entry of any cache', async (t) => {
  const caches = new CacheRegistry({ maxBytes: 4 * 164 })
  const x = sized(caches, 'x')
  const y = sized(caches, 'y')
  x.set('x1', 100)
  y.set('y1', 100)
  x.set('x2', 100)
  y.set('y2', 100)
  t.equal(caches.bytes, 4 * 164)
  x.get('x1')
  y.set('y3', 100)
  t.same([x.has('x1'), y.has('y1'), x.has('x2'), y.has('y2'), y.has('y3')], [true, false, true, true, true], "y1 was the oldest use of any cache: y's own entry went")
  y.set('y4', 100)
  t.same([x.has('x1'), x.has('x2')], [true, false], 'then x2, from the other cache')
  t.equal(x.evictions + y.evictions, 2)
  t.ok(caches.bytes <= caches.maxBytes)
  const total = caches.stats().reduce((n, s) => n + s.bytes, 0)
  t.equal(total, caches.bytes, "the total is the sum of the caches' bytes")
})

t.test('counts: hits, misses, evictions, entries and bytes, by cache', async (t) => {
  const caches = new CacheRegistry()
  const c = caches.create<string, string>({ name: 'answers', signal: 'a write', max: 1 })
  t.equal(c.get('q'), undefined)
  c.set('q', 'hello')
  t.equal(c.get('q'), 'hello')
  t.equal(c.get('q'), 'hello')
  c.set('r', 'world')
  t.same(caches.stats(), [{ name: 'answers', signal: 'a write', entries: 1, bytes: 64 + estimateBytes('r') + estimateBytes('world'), maxBytes: null, hits: 2, misses: 1, evictions: 1 }])
  t.throws(() => caches.create({ name: 'answers', signal: 'again' }), /exists already/, 'names are unique: they label the metrics')
  c.validFor(1)
  c.validFor(2)
  t.equal(c.size, 0, 'a new version drops every entry')
  t.equal(c.evictions, 1, 'an invalidation is not an eviction')
})

t.test('off: every cache keeps nothing and every get is a miss', async (t) => {
  const caches = new CacheRegistry({ on: false })
  const c = caches.create<string, number>({ name: 'c', signal: 'tests' })
  let reads = 0
  c.set('k', 1)
  t.equal(c.get('k'), undefined)
  t.equal(
    c.getOrSet('k', () => ++reads),
    1,
  )
  t.equal(
    c.getOrSet('k', () => ++reads),
    2,
    'computed again',
  )
  t.notOk(c.keeps)
  t.same(caches.stats()[0], { name: 'c', signal: 'tests', entries: 0, bytes: 0, maxBytes: null, hits: 0, misses: 3, evictions: 0 })
  const kept = new KeptAnswers(10, caches)
  t.equal(await kept.answer(1, 'q', async () => ++reads), 3)
  t.equal(await kept.answer(1, 'q', async () => ++reads), 4, 'kept notification answers too')
})

t.test('estimates: strings two bytes a character, buffers their bytes, structures what they hold', async (t) => {
  t.equal(estimateBytes('abcd'), 16 + 8)
  t.equal(estimateBytes(Buffer.alloc(100)), 64 + 100)
  t.equal(estimateBytes(new Int32Array(10)), 64 + 40)
  t.ok(estimateBytes({ a: 'x'.repeat(1000), b: [1, 2, 3] }) > 2000)
})

t.test('getValid: an entry its check refuses is a miss, and goes', async (t) => {
  const caches = new CacheRegistry()
  const c = caches.create<string, { version: number }>({ name: 'versioned', signal: 'tests' })
  c.set('q', { version: 1 })
  t.same(
    c.getValid('q', (v) => v.version === 1),
    { version: 1 },
  )
  t.equal(
    c.getValid('q', (v) => v.version === 2),
    undefined,
  )
  t.notOk(c.has('q'))
  t.same([c.hits, c.misses], [1, 1])
})
