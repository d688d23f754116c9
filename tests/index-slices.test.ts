// Pins the slices of the event index's catch-up (db/event-catch-up.ts, lib/events/indexing.ts):
// every request that arrives during a slice waits for it, so a slice sizes its steps to the
// time it has left at the pace of the last ones, instead of steps of 2,048 records that alone
// took longer than the slice should.
import t from 'tap'
import { build } from './helpers.js'
import { eventMaker } from './fixtures/events.js'
import { eventIndexLoop, SLICE_MS } from '../lib/events/indexing.js'

/** Extra time each indexed record takes here: a slow disk, or a busy core. */
const SLOW_MS_PER_RECORD = 0.03

t.test('a slice sizes its steps to its budget at the pace of the last ones', async (t) => {
  const app = await build(t)
  const q = app.repos.eventQueries
  const make = eventMaker(3)
  app.db.transaction(() => app.repos.events.record(Date.now(), Array.from({ length: 3000 }, make)))()
  const real = q.indexer.step
  const asked: number[] = []
  q.indexer.step = (table, max) => {
    const n = real(table, max)
    if (table === 'events') asked.push(max)
    const until = performance.now() + n * SLOW_MS_PER_RECORD
    while (performance.now() < until);
    return n
  }
  t.teardown(() => void (q.indexer.step = real))
  q.startIndexing()
  let slices = 0
  while (q.indexSlice(SLICE_MS)) slices++
  t.equal(q.indexer.indexed('events'), app.db.prepare('SELECT max(id) FROM events').pluck().get(), 'every event indexed in the end')
  t.ok(slices > 10, `in many small slices (${slices})`)
  // The first guess may be off; from the third step on, a step fits in the slice at the pace seen.
  const fit = Math.floor(SLICE_MS / SLOW_MS_PER_RECORD)
  t.ok(
    asked.slice(2).every((n) => n <= fit),
    `steps of at most ${fit} records once the pace is known (asked ${asked.slice(0, 12).join(', ')}, ...)`,
  )
})

t.test('the loop reports its slices and the longest in the loop statistics, and then starts counting again', async (t) => {
  let calls = 0
  const loop = eventIndexLoop({ indexSlice: () => ++calls < 3, onIndexWanted: () => {} })
  t.equal(loop.stats?.(), undefined, 'nothing before it ran')
  loop.start()
  await new Promise((resolve) => setTimeout(resolve, 600))
  loop.stop()
  const stats = loop.stats?.()
  t.ok(stats && stats.slices >= 2 && stats.maxSliceMs >= 0 && stats.busyMs >= 0, JSON.stringify(stats))
  t.equal(loop.stats?.(), undefined, 'counted afresh after each report')
})

t.test("an index step's commit is not synced on its own; the connection is FULL again after it, and a step inside a transaction leaves the setting alone", async (t) => {
  const app = await build(t)
  const q = app.repos.eventQueries
  const make = eventMaker(5)
  const db = app.db
  const seen: string[] = []
  const pragma = db.pragma.bind(db)
  db.pragma = ((source: string, options?: { simple?: boolean }) => {
    if (source.startsWith('synchronous')) seen.push(`${source} (in a transaction: ${db.inTransaction})`)
    return pragma(source, options)
  }) as typeof db.pragma
  t.teardown(() => void (db.pragma = pragma))

  db.transaction(() => app.repos.events.record(Date.now(), Array.from({ length: 10 }, make)))()
  seen.length = 0
  t.equal(q.indexer.step('events', 100), 10)
  t.same(seen, ['synchronous (in a transaction: false)', 'synchronous = NORMAL (in a transaction: false)', 'synchronous = FULL (in a transaction: false)'])
  t.equal(pragma('synchronous', { simple: true }), 2, 'FULL again')

  db.transaction(() => app.repos.events.record(Date.now(), Array.from({ length: 10 }, make)))()
  seen.length = 0
  db.transaction(() => t.equal(q.indexer.step('events', 100), 10, 'indexed inside the transaction'))()
  t.same(seen, [], "inside a transaction: the setting is the transaction's own")
  t.equal(pragma('synchronous', { simple: true }), 2)
})
