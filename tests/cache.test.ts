// backend: none — the in-memory cache alone (db/cache.ts), no database
// Pins the one in-memory cache (db/cache.ts) that the kept list answers, the kept
// notification answers and the verified access tokens use.
import t from 'tap'
import { Cache } from '../db/cache.js'
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
