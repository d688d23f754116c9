// backend: sqlite-only — SQLite's term thread (db/event-engine/term-thread.ts)
// Pins the phrase queries of terms' first searches run in a thread (db/event-engine/term-thread.ts,
// awaited by `ready` in db/event-engine/event-queries.ts): after `ready`, the term's documents are
// remembered, so the search on the request's turn runs no phrase query; the pages are those
// SQL and the reference model give, for documents added after the thread's answer too; a
// thread that cannot answer leaves the search to run the query itself, with the same
// answers; closing stops the thread.
import t from 'tap'
import { build } from './helpers.js'
import { DAY, expectedEvents, writeEvents } from './fixtures/events.js'
import { eventQueriesRepo } from '../db/event-engine/event-queries.js'
import type { EventRow } from '../lib/events/ports.js'
import { eventFilter } from '../lib/events/filter.js'

const NOW = Date.UTC(2026, 5, 30, 12)
const iso = (ms: number) => new Date(ms).toISOString()
const questions: Record<string, string>[] = [
  { Details: 'kingston' },
  { Details: 'removed', FromDate: iso(NOW - 2 * DAY), ToDate: iso(NOW - DAY) },
  { Details: 'DataTraveler 3.0' },
  { PeripheralAssetId: 'VID_0951' },
  { GlobalSearch: 'kingston' },
  { GlobalSearch: 'Logitech', MinimumSeverity: 'Warning' },
  { Details: 'zzz-nowhere' },
]

t.test('phrase queries answered by the thread give the pages the rows give', async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 3000, { now: NOW, days: 3 })
  // A second repository on the app's connection whose every phrase query goes to the thread.
  const repo = eventQueriesRepo(app.db, { phraseThreadDocs: 0 })
  t.teardown(() => repo.close())
  repo.holdIndexing(true)
  repo.catchUp()
  const check = async (label: string) => {
    const rows = app.db.prepare('SELECT * FROM events ORDER BY id DESC').all() as EventRow[]
    let fromThread = 0
    for (const q of questions) {
      const f = eventFilter(q)
      if (repo.phrasesToAsk(f).length) fromThread++
      await repo.events.ready(f)
      t.same(repo.phrasesToAsk(f), [], `${label}: ${JSON.stringify(q)}: remembered once ready`)
      const page = repo.events.pageRows(f, { field: 'eventID', direction: 'desc' }, 1000, 0)
      const want = expectedEvents(rows, q).map((e) => e.id)
      t.same({ n: page.filtered, ids: page.rows.map((r) => r[0]) }, { n: want.length, ids: want }, `${label}: ${JSON.stringify(q)}`)
    }
    return fromThread
  }
  const first = await check('first searches')
  // Rare terms take the AND of their rarest trigrams instead, once the rarity sample is read.
  t.ok(first >= 2, `the common terms' first searches went to the thread (${first})`)
  // Documents added since: asked of the thread again from where the terms' answers end.
  writeEvents(app, 500, { now: NOW + DAY, days: 1, seed: 5 })
  repo.catchUp()
  t.ok((await check('documents added since')) >= 1, 'the documents added since went to the thread')
  // Answered again: nothing left to ask.
  t.equal(await check('asked again'), 0, 'nothing asked again')
})

t.test('a thread that cannot answer leaves the search to run the query, with the same answers', async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 1500, { now: NOW, days: 3, seed: 3 })
  const repo = eventQueriesRepo(app.db, { phraseThreadDocs: 0 })
  repo.holdIndexing(true)
  repo.catchUp()
  // Stopped: every question to it is refused.
  await repo.close()
  const rows = app.db.prepare('SELECT * FROM events ORDER BY id DESC').all() as EventRow[]
  for (const q of questions) {
    const f = eventFilter(q)
    await repo.events.ready(f)
    const page = repo.events.pageRows(f, { field: 'eventID', direction: 'desc' }, 1000, 0)
    const want = expectedEvents(rows, q).map((e) => e.id)
    t.same({ n: page.filtered, ids: page.rows.map((r) => r[0]) }, { n: want.length, ids: want }, JSON.stringify(q))
  }
})
