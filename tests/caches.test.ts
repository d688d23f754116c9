// The caches for operators: GET /prime/webui/system/caches (Administrators only) and the
// prime_cache_* metrics show each cache's counts moving; PRIME_CACHES=off keeps nothing.
// On the test pass's backend (both passes): the verified tokens' cache is the platform's.
import t from 'tap'
import { build, call, login, userWithProfile } from './helpers.js'

const CACHES = '/prime/webui/system/caches'
/** The value of one sample line (its name with labels as written), or undefined. */
const sample = (text: string, series: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}
type View = { on: boolean; bytes: number; maxBytes: number | null; caches: { name: string; hits: number; misses: number; entries: number; bytes: number; signal: string }[] }
const tokens = (view: View) => view.caches.find((c) => c.name === 'verified-access-tokens')!

t.test("the caches' view and metrics show hits moving", async (t) => {
  const app = await build(t, { PRIME_CACHES: 'on', PRIME_CACHE_MB: '64' })
  const admin = await login(app)
  t.equal((await app.inject({ method: 'GET', url: CACHES })).statusCode, 401, 'no credential: 401')
  const user = await userWithProfile(app, admin, 'caches-user', 10)
  t.equal((await call(app, user, { method: 'GET', url: CACHES })).statusCode, 403, 'a User: 403')

  const first = await call(app, admin, { method: 'GET', url: CACHES })
  t.equal(first.statusCode, 200, first.body)
  const before = first.json() as View
  t.equal(before.on, true)
  t.equal(before.maxBytes, 64 * 1024 * 1024, 'the total bound is PRIME_CACHE_MB')
  t.ok(tokens(before), 'the verified tokens are a cache')
  t.ok(tokens(before).signal.length > 0, 'each says what invalidates it')
  t.equal(
    before.bytes,
    before.caches.reduce((n, c) => n + c.bytes, 0),
    "the total is the caches' sum",
  )
  if (app.storage.backend === 'sqlite') {
    const names = before.caches.map((c) => c.name)
    for (const n of ['agent-list-answers', 'peripheral-list-answers', 'event-doc-stretches', 'event-match-ids', 'event-list-answers', 'notification-answers']) t.ok(names.includes(n), n)
    // The default total (PRIME_CACHE_MB, 208) is the sum of the caches' own bounds rounded up: say so when one is added.
    const sum = before.caches.reduce((n, c) => n + (c.maxBytes ?? 0), 0)
    t.equal(Math.round(sum / 2 ** 20), 201, "the caches' own bounds add up to 201 MiB (docs/operating.md, lib/config.ts)")
  }

  for (let i = 0; i < 3; i++) t.equal((await call(app, admin, { method: 'GET', url: '/prime/webui/admin/getuserdetails' })).statusCode, 200)
  const after = (await call(app, admin, { method: 'GET', url: CACHES })).json() as View
  t.ok(tokens(after).hits >= tokens(before).hits + 4, "each request's token was a hit")
  t.ok(tokens(after).entries >= 1)

  const metrics = (await call(app, admin, { method: 'GET', url: '/metrics' })).body
  const hits = sample(metrics, 'prime_cache_hits_total{cache="verified-access-tokens"}')
  t.ok(hits !== undefined && hits >= tokens(after).hits + 1, 'the metrics count them too')
  t.ok(sample(metrics, 'prime_cache_misses_total{cache="verified-access-tokens"}') !== undefined, 'misses')
  t.ok(sample(metrics, 'prime_cache_evictions_total{cache="verified-access-tokens"}') !== undefined, 'evictions')
  t.ok((sample(metrics, 'prime_cache_entries{cache="verified-access-tokens"}') ?? 0) >= 1, 'entries')
  t.ok((sample(metrics, 'prime_cache_bytes{cache="verified-access-tokens"}') ?? 0) > 0, 'bytes')
  const again = (await call(app, admin, { method: 'GET', url: '/metrics' })).body
  t.ok((sample(again, 'prime_cache_hits_total{cache="verified-access-tokens"}') ?? 0) > hits!, 'and move between scrapes')
})

t.test('PRIME_CACHES=off: nothing is kept, every lookup is a miss', async (t) => {
  const app = await build(t, { PRIME_CACHES: 'off' })
  const admin = await login(app)
  for (let i = 0; i < 3; i++) t.equal((await call(app, admin, { method: 'GET', url: '/prime/webui/admin/getuserdetails' })).statusCode, 200)
  const view = (await call(app, admin, { method: 'GET', url: CACHES })).json() as View
  t.equal(view.on, false)
  t.equal(view.bytes, 0)
  for (const c of view.caches) t.same([c.name, c.hits, c.entries], [c.name, 0, 0], c.name)
  t.ok(tokens(view).misses >= 4, "each request's token was verified again")
})
