// backend: sqlite-only — SQLite's query index of events and audit records (db/event-engine/event-index.ts)
// Pins the query index of events and audit records (db/event-engine/event-index.ts): it is kept off
// the write path and never changes an answer. Answers stay exact while it is behind,
// after a restart (the counts are read back from their tables), when another process
// indexes the same database at the same time, and when an indexed event is deleted
// (it starts over).
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call } from './helpers.js'
import { writeEvents, expectedEvents, sortEvents } from './fixtures/events.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { openDatabase } from '../db/index.js'
import { recordIndexer } from '../db/event-engine/event-index.js'
import type { EventRow } from '../lib/events/ports.js'
import { eventFilter } from '../lib/events/filter.js'

const URL = '/prime/webui/Events/GetEvents'
const probes: Record<string, string>[] = [
  {},
  { MinimumSeverity: 'Warning' },
  { GlobalSearch: 'kingston' },
  { Source: 'nyc' },
  { Details: 'removed', Category: 'USB' },
  { AssetName: 'desktop', Severity: '4' },
]

async function check(t: Test, app: FastifyInstance, token: string, rows: EventRow[], label: string) {
  // A time span that cuts blocks of ids: their counts are read from the rows (and kept).
  const times = rows.map((r) => r.created_ms)
  const lo = Math.min(...times),
    hi = Math.max(...times)
  const span = { FromDate: new Date(lo + (hi - lo) / 3).toISOString(), ToDate: new Date(lo + (2 * (hi - lo)) / 3).toISOString() }
  for (const q of [...probes, span, { ...span, MinimumSeverity: 'Warning' }]) {
    const res = await call(app, token, { method: 'GET', url: `${URL}?${new URLSearchParams({ ...q, PageSize: '50' })}` })
    const want = sortEvents(expectedEvents(rows, q))
    t.same(
      { filtered: res.json().recordsFiltered, ids: res.json().data.map((e: { eventID: number }) => e.eventID) },
      { filtered: want.length, ids: want.slice(0, 50).map((e) => e.id) },
      `${label}: ${JSON.stringify(q)}`,
    )
  }
}

const all = (app: FastifyInstance) => app.db.prepare('SELECT * FROM events ORDER BY id').all() as EventRow[]

t.test('writing an event stays one insert: the index follows afterwards, in the background', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const triggers = app.db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events' AND sql LIKE '%INSERT ON events%'").pluck().all() as string[]
  t.notOk(
    triggers.some((n) => /index|rollup|kind|doc|source/.test(n)),
    `no insert trigger of the index on events (${triggers.join(', ')})`,
  )
  const rows = writeEvents(app, 300, { now: Date.now(), days: 1 })
  t.equal(app.repos.eventQueries.indexer.indexed('events'), 0, 'nothing indexed while writing')
  await check(t, app, token, rows, 'not indexed yet')
  // The first query started the indexer: let it run to the end.
  for (let i = 0; i < 200 && app.repos.eventQueries.indexer.indexed('events') < rows[rows.length - 1].id; i++) await new Promise((r) => setTimeout(r, 5))
  t.equal(app.repos.eventQueries.indexer.indexed('events'), rows[rows.length - 1].id, 'the background indexer caught up')
  await check(t, app, token, rows, 'indexed in the background')
})

t.test('after a restart the counts are read back and answers stay the same', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-test-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: 'Correct-horse-42', LOG_LEVEL: 'silent' })
  let app = await buildApp({ config, logger: false, validateResponses: true })
  let rows = writeEvents(app, 200, { now: Date.now(), days: 1 })
  app.repos.eventQueries.holdIndexing(true)
  app.repos.eventQueries.catchUp()
  await app.close()
  app = await buildApp({ config, logger: false, validateResponses: true })
  t.teardown(() => app.close())
  app.repos.eventQueries.holdIndexing(true)
  const token = await login(app)
  rows = rows.concat(writeEvents(app, 50, { now: Date.now(), days: 1, seed: 5 }))
  await check(t, app, token, rows, 'restarted, 50 not indexed')
  app.repos.eventQueries.catchUp()
  await check(t, app, token, rows, 'restarted, all indexed')
})

t.test('two indexers on one database (the server and a script) take turns and count each event once', async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  const token = await login(app)
  const rows = writeEvents(app, 400, { now: Date.now(), days: 1 })
  const other = openDatabase(app.testConfig.dbFile)
  t.teardown(() => other.close())
  const script = recordIndexer(other)
  for (let i = 0; i < 12; i++) {
    script.step('events', 17)
    app.repos.eventQueries.indexer.step('events', 23)
  }
  t.ok(app.repos.eventQueries.indexer.indexed('events') > 0)
  await check(t, app, token, rows, 'indexed by both in turns')
  script.catchUp('events')
  await check(t, app, token, rows, 'finished by the other one')
  const sum = other.prepare('SELECT sum(n) FROM event_rollup WHERE level = 1').pluck().get()
  t.equal(sum, rows.length, 'the block counts add up to the events')
})

t.test('deleting an indexed event makes the index start over; answers stay exact meanwhile', async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  const token = await login(app)
  writeEvents(app, 250, { now: Date.now(), days: 1 })
  app.repos.eventQueries.catchUp()
  await check(t, app, token, all(app), 'indexed')
  // From the middle: inside the time span that check() counts from the rows.
  app.db.prepare('DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY id LIMIT 40 OFFSET 100)').run()
  t.equal(app.repos.eventQueries.indexer.indexed('events'), 0, 'the index no longer vouches for any event')
  await check(t, app, token, all(app), 'after the delete, before indexing again')
  app.repos.eventQueries.catchUp()
  t.ok(app.repos.eventQueries.indexer.indexed('events') > 0)
  await check(t, app, token, all(app), 'indexed again')
})

t.test('the texts text filters need are read a slice at a time, with indexing paused, and read the same as in one go', async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 300, { now: Date.now(), days: 1 })
  app.repos.eventQueries.catchUp()
  const whole = recordIndexer(app.db).summary('events', true)
  const sliced = recordIndexer(app.db)
  let pauses = 0
  await sliced.loadTextsGradually(
    async () => {
      pauses++
    },
    16,
    0,
  )
  t.ok(pauses > 5, `${pauses} pauses between slices of 16 rows`)
  // A pause comes once a slice's time is spent, not after every chunk.
  const unhurried = recordIndexer(app.db)
  let none = 0
  await unhurried.loadTextsGradually(
    async () => {
      none++
    },
    16,
    60_000,
  )
  t.equal(none, 0, 'no pause within the time of a slice')
  t.ok(unhurried.hasTexts())
  t.ok(sliced.hasTexts())
  const got = sliced.summary('events', true)
  const column = (c: { data: Int32Array }, size: number) => Array.from(c.data.subarray(0, size))
  t.same(
    { docs: got.docs.size, kind: column(got.docs.kind, got.docs.size), n: column(got.docs.n, got.docs.size), sources: got.sources.key, sourceN: column(got.sources.n, got.sources.size) },
    {
      docs: whole.docs.size,
      kind: column(whole.docs.kind, whole.docs.size),
      n: column(whole.docs.n, whole.docs.size),
      sources: whole.sources.key,
      sourceN: column(whole.sources.n, whole.sources.size),
    },
  )

  // Through the server: the first text query awaits the texts, later ones need not.
  const server = await build(t)
  server.repos.eventQueries.holdIndexing(true)
  const token = await login(server)
  const rows = writeEvents(server, 200, { now: Date.now(), days: 1 })
  server.repos.eventQueries.catchUp()
  const queries = server.repos.eventQueries
  t.equal(queries.events.ready(eventFilter({ MinimumSeverity: 'Warning' })), undefined, 'a query without text waits for nothing')
  t.type(queries.events.ready(eventFilter({ Source: 'nyc' })), Promise, 'the first text query waits for the texts')
  await check(t, server, token, rows, 'texts read on the first text query')
  t.equal(queries.events.ready(eventFilter({ Source: 'nyc' })), undefined, 'read once')
})
