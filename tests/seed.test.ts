import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { seedFleet, checkSeed } from '../scripts/seed.js'

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
  const indexed = () => db.prepare(`SELECT ${columns.join(', ')} FROM agents_fts ORDER BY rowid`).raw().all()

  await seedFleet(db, { agents: 130, peripheralsPerAgent: 3, chunk: 50, seed: 7 })
  t.equal((db.prepare('SELECT count(*) FROM agents_fts').pluck().get()), 130)
  t.same(indexed(), expected(), 'one row per agent, with the trigger\'s text')
  await seedFleet(db, { agents: 40, peripheralsPerAgent: 3, chunk: 50, seed: 8 })
  t.same(indexed(), expected(), 'an append indexes the new agents only')
  t.ok(db.prepare("SELECT name FROM sqlite_master WHERE name = 'agents_fts_insert'").get(), 'the trigger is back after the load')
  const uuid = db.prepare('SELECT uuid FROM agents ORDER BY id DESC LIMIT 1').pluck().get() as string
  t.ok((db.prepare('SELECT count(*) FROM agents_fts WHERE agents_fts MATCH ?').pluck().get(`"${uuid}"`) as number) >= 1, 'a seeded agent is found')
  t.same(checkSeed(db).mismatches, [])
})
