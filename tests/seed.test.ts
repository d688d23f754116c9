// backend: sqlite-only — the bulk load into a SQLite file and its FTS5 indexes (scripts/seed.ts)
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { seedFleet, checkSeed } from '../scripts/seed.js'
import { seedEvents } from '../scripts/seed-events.js'

t.test('a bulk load indexes every agent for full-text search as the insert trigger would, appends included', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-seed-'))
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  t.teardown(() => {
    db.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  // What the trigger inserts for an agent, from its own expressions.
  const trigger = db.prepare("SELECT sql FROM sqlite_master WHERE name = 'agents_fts_insert'").pluck().get() as string
  const m = /INSERT INTO agents_fts\s*\(([^)]*)\)\s*VALUES\s*\(([^;]*)\)\s*;\s*END$/i.exec(trigger)!
  const columns = m[1].split(',').map((c) => c.trim())
  const expected = () => db.prepare(`SELECT ${m[2]} FROM agents AS new ORDER BY new.id`).raw().all()
  const indexed = () =>
    db
      .prepare(`SELECT ${columns.join(', ')} FROM agents_fts ORDER BY rowid`)
      .raw()
      .all()

  await seedFleet(db, { agents: 130, peripheralsPerAgent: 3, chunk: 50, seed: 7 })
  t.equal(db.prepare('SELECT count(*) FROM agents_fts').pluck().get(), 130)
  t.same(indexed(), expected(), "one row per agent, with the trigger's text")
  await seedFleet(db, { agents: 40, peripheralsPerAgent: 3, chunk: 50, seed: 8 })
  t.same(indexed(), expected(), 'an append indexes the new agents only')
  t.ok(db.prepare("SELECT name FROM sqlite_master WHERE name = 'agents_fts_insert'").get(), 'the trigger is back after the load')
  const uuid = db.prepare('SELECT uuid FROM agents ORDER BY id DESC LIMIT 1').pluck().get() as string
  t.ok((db.prepare('SELECT count(*) FROM agents_fts WHERE agents_fts MATCH ?').pluck().get(`"${uuid}"`) as number) >= 1, 'a seeded agent is found')
  t.same(checkSeed(db).mismatches, [])
})

t.test('a fleet with its event history is written in time order, as a live server numbers events', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-seed-'))
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  t.teardown(() => {
    db.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const now = Date.UTC(2026, 5, 30, 12)
  // A destination taking every event: a bulk load queues no delivery all the same.
  db.prepare(`INSERT INTO alarm_destinations (id, name, name_key, type, min_severity, settings, created_ms, updated_ms) VALUES ('all', 'all', 'all', 'syslog', 7, '{}', 1, 1)`).run()
  const r = await seedFleet(db, { agents: 60, peripheralsPerAgent: 3, chunk: 25, seed: 5, now, history: { events: 4000, days: 90 } })
  t.equal(db.prepare('SELECT up_to FROM alarm_events_queued').pluck().get(), db.prepare('SELECT max(id) FROM events').pluck().get(), "the deliveries' mark passed over the loaded events")
  const fleetOnly = await (async () => {
    const other = openDatabase(path.join(dir, 'fleet-only.sqlite'))
    try {
      return (await seedFleet(other, { agents: 60, peripheralsPerAgent: 3, chunk: 25, seed: 5, now })).events
    } finally {
      other.close()
    }
  })()
  t.equal(r.events, fleetOnly + 4000, "the fleet's own events and the history")
  t.equal(db.prepare('SELECT count(*) FROM events').pluck().get(), r.events)
  const backwards = db.prepare('SELECT count(*) FROM (SELECT created_ms, lag(created_ms) OVER (ORDER BY id) AS before FROM events) WHERE created_ms < before').pluck().get()
  t.equal(backwards, 0, 'ids follow time')
  const span = db.prepare('SELECT min(created_ms) AS first, max(created_ms) AS last FROM events').get() as { first: number; last: number }
  t.ok(span.first < now - 365 * 86_400_000 && span.last <= now, 'enrollments up to two years back, history over 90 days, nothing in the future')
  t.ok(
    (db
      .prepare('SELECT count(*) FROM events WHERE created_ms >= ?')
      .pluck()
      .get(now - 90 * 86_400_000) as number) >= 4000,
  )
  // History after younger events would put old events at high ids: refused.
  await t.rejects(seedEvents(db, { events: 10, hosts: 60, days: 30, seed: 5, now }), /event ids would not follow time/)
  t.equal(db.prepare('SELECT count(*) FROM events').pluck().get(), r.events, 'nothing written')
  await t.rejects(seedFleet(db, { agents: 5, peripheralsPerAgent: 3, seed: 6, now, history: { events: 10, days: 30 } }), /new fleet only/)
})
