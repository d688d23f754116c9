// backend: sqlite-only — the slices of SQLite's event index catch-up (db/event-engine/event-catch-up.ts)
// Pins the slices of the event index's catch-up (db/event-engine/event-catch-up.ts, lib/events/indexing.ts):
// every request that arrives during a slice waits for it, so a slice sizes its steps to the
// time it has left at the pace of the last ones, instead of steps of 2,048 records that alone
// took longer than the slice should; and its budget is short while requests are in flight,
// long when the server is idle (lib/platform/slices.ts, counted by lib/platform/loops.ts).
import http from 'node:http'
import net from 'node:net'
import { PassThrough } from 'node:stream'
import Fastify from 'fastify'
import t, { type Test } from 'tap'
import { build, call, login } from './helpers.js'
import { eventMaker } from './fixtures/events.js'
import { eventIndexLoop, SLICE_MS } from '../lib/events/indexing.js'
import { WHOLE_STEPS_MS } from '../db/event-engine/event-catch-up.js'
import { registerLoops } from '../lib/platform/loops.js'
import { LONG_SLICE_MS, QUIET_MS, requestActivity, SHORT_SLICE_MS } from '../lib/platform/slices.js'

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
  let warmed = 0
  const loop = eventIndexLoop({ indexSlice: () => ++calls < 3, onIndexWanted: () => {}, warm: () => void warmed++ })
  t.equal(loop.stats?.(), undefined, 'nothing before it ran')
  loop.start()
  t.equal(warmed, 1, "the index's counts are read when the loop starts, before the server listens")
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

t.test('slice budgets: short while a request is in flight or one ended a moment ago, long once idle', async (t) => {
  let now = 1000
  const activity = requestActivity(() => now)
  t.equal(activity.sliceMs(), LONG_SLICE_MS, 'idle at first')
  activity.begin()
  activity.begin()
  t.equal(activity.sliceMs(), SHORT_SLICE_MS, 'two in flight')
  now += 10_000
  activity.end()
  t.equal(activity.sliceMs(), SHORT_SLICE_MS, 'one still in flight, however long it takes')
  activity.end()
  t.equal(activity.inFlight(), 0)
  now += QUIET_MS - 1
  t.equal(activity.sliceMs(), SHORT_SLICE_MS, 'none in flight, but one ended a moment ago: the next may be coming')
  now += 1
  t.equal(activity.sliceMs(), LONG_SLICE_MS, 'idle again')
  activity.end()
  t.equal(activity.inFlight(), 0, 'never below nothing')
})

t.test('the event index loop asks for the budget before each slice and indexes with it', async (t) => {
  const asked: number[] = []
  const budgets = [SHORT_SLICE_MS, LONG_SLICE_MS, SHORT_SLICE_MS]
  let i = 0
  let wake = () => {}
  const loop = eventIndexLoop(
    {
      indexSlice: (ms) => {
        asked.push(ms)
        return asked.length < budgets.length
      },
      onIndexWanted: (fn) => void (wake = fn ?? (() => {})),
      warm: () => {},
    },
    () => budgets[i++],
  )
  loop.start()
  // Wanted now: the slices follow one another without waiting for the loop's next turn.
  wake()
  for (let i = 0; i < 400 && asked.length < budgets.length; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  loop.stop()
  t.same(asked.slice(0, 3), budgets, 'each slice with the budget answered just before it')
})

/** A bare app with the loop registry, counted as the pipeline counts, and a route that answers when told to (`release`). */
async function held(t: Test) {
  let now = 0
  const app = Fastify()
  app.decorate('config', { loopStatsSeconds: 0 } as any)
  const loops = registerLoops(
    app,
    requestActivity(() => now),
  )
  app.addHook('onRequest', (req, _reply, done) => {
    loops.requests.begin(req)
    done()
  })
  app.addHook('onSend', (req, _reply, payload, done) => {
    loops.requests.end(req)
    done(null, payload)
  })
  let release = () => {}
  const seen: number[] = []
  app.get('/held', async () => {
    seen.push(loops.sliceMs())
    await new Promise<void>((resolve) => (release = resolve))
    return { ok: true }
  })
  app.get('/stream', async (_req, reply) => {
    const stream = new PassThrough()
    stream.write('data: open\n\n')
    t.teardown(() => void stream.end())
    return reply.header('content-type', 'text/event-stream').send(stream)
  })
  t.teardown(() => app.close())
  return { app, loops, seen, release: () => release(), tick: (ms: number) => void (now += ms) }
}

t.test('the app counts a request in flight from its arrival to its answer', async (t) => {
  const h = await held(t)
  t.equal(h.loops.sliceMs(), LONG_SLICE_MS, 'idle before any request')
  const answer = h.app.inject({ method: 'GET', url: '/held' })
  while (h.seen.length === 0) await new Promise((resolve) => setImmediate(resolve))
  t.same(h.seen, [SHORT_SLICE_MS], 'short while it is in flight')
  h.tick(1000)
  t.equal(h.loops.sliceMs(), SHORT_SLICE_MS, 'still short while it waits')
  h.release()
  t.equal((await answer).statusCode, 200)
  t.equal(h.loops.sliceMs(), SHORT_SLICE_MS, 'short just after it')
  h.tick(QUIET_MS)
  t.equal(h.loops.sliceMs(), LONG_SLICE_MS, 'long once no request has come for a while')
  const refused = await h.app.inject({ method: 'GET', url: '/nowhere' })
  t.equal(refused.statusCode, 404)
  t.equal(h.loops.sliceMs(), SHORT_SLICE_MS, 'an answer that is a refusal counts too')
})

t.test('a request given up by its client, and a stream handed over, are no longer in flight', async (t) => {
  const h = await held(t)
  const address = await h.app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = new URL(address)
  const socket = net.connect(Number(port), '127.0.0.1')
  socket.write('GET /held HTTP/1.1\r\nHost: x\r\n\r\n')
  for (let i = 0; i < 400 && h.seen.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  h.tick(QUIET_MS)
  t.equal(h.loops.sliceMs(), SHORT_SLICE_MS, 'in flight')
  socket.destroy()
  // The close reaches the server a moment later (at most 2 s here).
  for (let i = 0; i < 400 && h.loops.sliceMs() === SHORT_SLICE_MS; i++) {
    await new Promise((resolve) => setTimeout(resolve, 5))
    h.tick(QUIET_MS)
  }
  t.equal(h.loops.sliceMs(), LONG_SLICE_MS, 'idle once its client closed the connection, though it was never answered')
  h.release()

  const stream = await new Promise<http.IncomingMessage>((resolve) => http.get(`${address}/stream`, resolve))
  t.equal(stream.statusCode, 200)
  h.tick(QUIET_MS)
  t.equal(h.loops.sliceMs(), LONG_SLICE_MS, 'idle while a stream stays open (the notification stream): nobody waits for it')
  stream.destroy()
})

t.test('several requests on one keep-alive connection, one given up with the connection', async (t) => {
  const h = await held(t)
  const address = await h.app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = new URL(address)
  const socket = net.connect(Number(port), '127.0.0.1')
  let got = ''
  socket.on('data', (d) => (got += d))
  // Two answered on the connection, then a third left in flight.
  for (let i = 1; i <= 2; i++) {
    socket.write('GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n')
    for (let k = 0; k < 400 && got.split('HTTP/1.1 404').length - 1 < i; k++) await new Promise((resolve) => setTimeout(resolve, 5))
  }
  t.equal(h.loops.requests.inFlight(), 0, 'the answered ones are no longer in flight')
  socket.write('GET /held HTTP/1.1\r\nHost: x\r\n\r\n')
  for (let i = 0; i < 400 && h.seen.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  t.equal(h.loops.requests.inFlight(), 1, 'the held one is')
  socket.destroy()
  for (let i = 0; i < 400 && h.loops.requests.inFlight() > 0; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  t.equal(h.loops.requests.inFlight(), 0, 'none once the connection closed')
  h.release()
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(h.loops.requests.inFlight(), 0, 'its late answer ends nothing twice')
})

t.test('in the app: a request whose client closes its connection before the answer is no longer in flight', async (t) => {
  const app = await build(t)
  let release = () => {}
  let arrived = false
  app.get('/held', async () => {
    arrived = true
    await new Promise<void>((resolve) => (release = resolve))
    return { ok: true }
  })
  const address = await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = new URL(address)
  const flights = app.loops.requests
  // A refusal counts while it is being answered, and ends with its answer.
  const socket = net.connect(Number(port), '127.0.0.1')
  let got = ''
  socket.on('data', (d) => (got += d))
  socket.write('GET /prime/webui/admin/getuserdetails HTTP/1.1\r\nHost: x\r\n\r\n')
  for (let i = 0; i < 400 && !got.includes('\r\n\r\n'); i++) await new Promise((resolve) => setTimeout(resolve, 5))
  t.match(got, /^HTTP\/1.1 401/, 'refused')
  t.equal(flights.inFlight(), 0, 'a refusal answered is no longer in flight')
  socket.write('GET /held HTTP/1.1\r\nHost: x\r\n\r\n')
  for (let i = 0; i < 400 && !arrived; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  t.equal(flights.inFlight(), 1, 'in flight while its handler works')
  t.equal(app.loops.sliceMs(), SHORT_SLICE_MS)
  socket.destroy()
  for (let i = 0; i < 400 && flights.inFlight() > 0; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  t.equal(flights.inFlight(), 0, 'no longer in flight once its client closed the connection, though it was never answered')
  release()
  await new Promise((resolve) => setTimeout(resolve, QUIET_MS + 20))
  t.equal(flights.inFlight(), 0, 'its late answer ends nothing twice')
  t.equal(app.loops.sliceMs(), LONG_SLICE_MS, 'long once the server is idle')
})

t.test('in the app: short slices while a request is in flight', async (t) => {
  const app = await build(t)
  const during: number[] = []
  app.addHook('preHandler', async () => void during.push(app.loops.sliceMs()))
  await app.ready()
  const token = await login(app)
  t.equal((await call(app, token, { url: '/prime/webui/admin/PrimeVersion' })).statusCode, 200)
  t.ok(during.length > 0 && during.every((ms) => ms === SHORT_SLICE_MS), `short during the request (${during})`)
  await new Promise((resolve) => setTimeout(resolve, QUIET_MS + 20))
  t.equal(app.loops.sliceMs(), LONG_SLICE_MS, 'long once the server is idle')
})

t.test('an idle slice indexes in whole steps: a step costs a few ms however few records it holds', async (t) => {
  t.ok(LONG_SLICE_MS >= WHOLE_STEPS_MS, 'the idle budget is one of whole steps')
  const app = await build(t)
  const q = app.repos.eventQueries
  const make = eventMaker(9)
  app.db.transaction(() => app.repos.events.record(Date.now(), Array.from({ length: 5000 }, make)))()
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
  q.indexSlice(SHORT_SLICE_MS)
  q.indexSlice(SHORT_SLICE_MS)
  const fit = Math.floor(SHORT_SLICE_MS / SLOW_MS_PER_RECORD)
  t.ok(asked.at(-1)! <= fit, `while requests are in flight, steps that fit the slice (${asked})`)
  asked.length = 0
  while (q.indexSlice(LONG_SLICE_MS));
  t.ok(asked.length > 0 && asked.every((n) => n === 2048), `when idle, steps of 2,048 records (${asked})`)
  t.equal(q.indexer.indexed('events'), app.db.prepare('SELECT max(id) FROM events').pluck().get(), 'every event indexed in the end')
})
