// backend: sqlite-only — SQLite's kept text counts (db/event-engine/event-counts.ts)
// Pins the bound of the text counts kept (keptDocsMax, db/event-engine/event-counts.ts): a repository
// that keeps almost none makes every count again, in turn, and its pages are the ones SQL and
// the reference model give, as those of a repository that keeps them all, over random pages
// and days and after more events are indexed.
import t from 'tap'
import { build } from './helpers.js'
import { DAY, expectedEvents, writeEvents } from './fixtures/events.js'
import { eventQueriesRepo } from '../db/event-engine/event-queries.js'
import type { EventRow } from '../lib/events/ports.js'
import { eventFilter } from '../lib/events/filter.js'

const NOW = Date.UTC(2026, 5, 30, 12)
const iso = (ms: number) => new Date(ms).toISOString()
const terms: Record<string, string>[] = [{ Details: 'kingston' }, { PeripheralAssetId: 'VID_0951' }, { GlobalSearch: 'kingston' }, { GlobalSearch: 'Logitech' }, { Details: 'removed' }]

t.test('text counts evicted and made again give the pages of counts kept', async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 3000, { now: NOW, days: 3 })
  const tight = eventQueriesRepo(app.db, { keptDocsMax: 1 })
  const roomy = eventQueriesRepo(app.db)
  t.teardown(async () => {
    await tight.close()
    await roomy.close()
  })
  // A fixed sequence of terms with pages and days, each term several times in a row and apart.
  let seed = 7
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31
  const questions = Array.from({ length: 40 }, (_, i) => {
    const q = { ...terms[i % terms.length] }
    const from = NOW - DAY * (0.2 + next() * 2.5)
    return next() < 0.5 ? { ...q, FromDate: iso(from), ToDate: iso(from + DAY / 2) } : { ...q, PageNumber: String(1 + Math.floor(next() * 3)) }
  })
  const check = async (label: string) => {
    for (const repo of [tight, roomy]) {
      repo.holdIndexing(true)
      repo.catchUp()
    }
    const rows = app.db.prepare('SELECT * FROM events ORDER BY id DESC').all() as EventRow[]
    for (const q of questions) {
      const f = eventFilter(q)
      const offset = 20 * (Number(q.PageNumber ?? 1) - 1)
      const want = expectedEvents(rows, q).map((e) => e.id)
      const expected = { n: want.length, ids: want.slice(offset, offset + 20) }
      for (const [name, repo] of [
        ['kept almost none', tight],
        ['kept all', roomy],
      ] as const) {
        await repo.events.ready(f)
        const page = repo.events.pageRows(f, { field: 'eventID', direction: 'desc' }, 20, offset)
        t.same({ n: page.filtered, ids: page.rows.map((r) => r[0]) }, expected, `${label}, ${name}: ${JSON.stringify(q)}`)
      }
    }
  }
  await check('first')
  // Each count pushed the one before out; all of them are kept in the other.
  t.equal(tight.keptTexts().counts, 1, 'kept almost none: one count kept')
  t.ok(roomy.keptTexts().counts >= terms.length, `kept all: ${roomy.keptTexts().counts} counts kept`)
  await check('asked again')
  // More indexed: a count made again starts from the blocks of the term's count before, if kept.
  writeEvents(app, 600, { now: NOW + DAY / 2, days: 1, seed: 9 })
  await check('more indexed')
})

t.test("a new term's text count is made by ready, in a turn of the loop before the question's", async (t) => {
  const app = await build(t)
  app.repos.eventQueries.holdIndexing(true)
  writeEvents(app, 3000, { now: NOW, days: 3 })
  const repo = eventQueriesRepo(app.db)
  t.teardown(() => repo.close())
  repo.holdIndexing(true)
  repo.catchUp()
  const f = eventFilter({ Details: 'kingston', FromDate: iso(NOW - DAY), ToDate: iso(NOW) })
  const before = repo.keptTexts().counts
  // What each turn of the loop sees (an immediate a turn), and when the caller goes on.
  const seen: string[] = []
  let ticking = true
  const tick = () => {
    seen.push(`turn: ${repo.keptTexts().counts - before} made`)
    if (ticking) setImmediate(tick)
  }
  setImmediate(tick)
  const ready = repo.events.ready(f)
  t.equal(repo.keptTexts().counts, before, 'not made in the caller’s turn')
  t.ok(ready, 'something to wait for: the count')
  await ready
  seen.push('ready')
  ticking = false
  t.equal(repo.keptTexts().counts, before + 1, 'made once ready')
  t.ok(seen.indexOf('turn: 1 made') !== -1 && seen.indexOf('turn: 1 made') < seen.indexOf('ready'), `a turn passed between the count and the question: ${seen.join(', ')}`)
  const page = repo.events.pageRows(f, { field: 'eventID', direction: 'desc' }, 20, 0)
  t.equal(repo.keptTexts().counts, before + 1, 'the question uses the count made')
  t.ok(page.filtered > 0, `${page.filtered} matches`)
  t.equal(repo.events.ready(f), undefined, 'asked again: nothing to wait for')
})
