// backend: sqlite-only — the upkeep of SQLite's FTS5 trigram indexes (db/fts-upkeep.ts)
// Pins the upkeep of the trigram indexes (db/fts-upkeep.ts, lib/search-upkeep.ts): a
// merged index is left alone; after every agent's network adapters are rewritten the
// index is due, is merged into one segment slice by slice, passes FTS5's own integrity
// check, and every search answers exactly as before.
import t from 'tap'
import { build, login, call } from './helpers.js'
import { seedFleet } from '../scripts/seed.js'
import { searchUpkeep } from '../lib/search-upkeep.js'

t.test('a fragmented search index is merged back into one segment, answering the same', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await seedFleet(app.db, { agents: 1200, peripheralsPerAgent: 1, seed: 11 })
  const upkeep = searchUpkeep({ upkeep: app.repos.ftsUpkeep, log: app.log })
  const { ftsUpkeep } = app.repos

  // The seed's chunks leave segments of their own: merged first, as the server would.
  while (upkeep.check()) while (upkeep.slice(5));
  const built = ftsUpkeep.measure('agents_fts')
  t.equal(built.segments, 1, 'one segment after the first merge')
  t.ok(built.pages >= 64, `large enough to be kept up (${built.pages} pages)`)
  t.equal(upkeep.check(), null, 'nothing is due then')

  // Every agent's network adapters (in agents_fts) and latest event text (searched in
  // memory) rewritten, a batch per transaction, twice over.
  const rewrite = app.db.prepare('UPDATE agents SET latest_event_text = ?, nics_text = ? WHERE id BETWEEN ? AND ?')
  for (const text of ['Agent disconnected', 'Agent reconnected']) {
    for (let id = 0; id < 1300; id += 100) app.db.transaction(() => rewrite.run(text, text, id, id + 99))()
  }
  const searches = ['reconnected', 'disconnected', 'Latitude', 'Windows 10', 'ws0001']
  const answers = async () => {
    const out: unknown[] = []
    for (const term of searches) {
      const res = await call(app, token, { method: 'GET', url: `/prime/webui/agents?GlobalSearch=${encodeURIComponent(term)}&PageSize=1000` })
      out.push([term, res.json().recordsFiltered, res.json().data.map((a: { uuid: string }) => a.uuid)])
    }
    return out
  }
  const before = await answers()
  t.ok((before[0] as [string, number])[1] === 1200, 'the rewritten text is found in every agent')

  const fragmented = ftsUpkeep.measure('agents_fts')
  t.ok(fragmented.segments > 1 && fragmented.due, `due after the rewrites (${fragmented.segments} segments, ${fragmented.pages} pages)`)
  t.equal(upkeep.check(), 'agents_fts')
  t.equal(upkeep.check(), 'agents_fts', 'one merge at a time')
  let slices = 0
  while (upkeep.slice(1)) slices++
  t.ok(slices > 1, `merged in slices (${slices})`)
  t.equal(upkeep.merging, null)

  const merged = ftsUpkeep.measure('agents_fts')
  t.equal(merged.segments, 1, 'one segment again')
  t.ok(merged.pages < fragmented.pages, `smaller: ${fragmented.pages} -> ${merged.pages} pages`)
  t.notOk(merged.due)
  t.doesNotThrow(() => app.db.exec("INSERT INTO agents_fts (agents_fts) VALUES ('integrity-check')"), 'FTS5 finds the index consistent with the agents')
  t.same(await answers(), before, 'every search answers as before')
  t.equal(upkeep.check(), null, 'nothing is due after the merge')
})

t.test('small indexes are left alone, however many segments they have', async (t) => {
  const app = await build(t)
  await seedFleet(app.db, { agents: 30, peripheralsPerAgent: 1, seed: 12 })
  const rewrite = app.db.prepare('UPDATE agents SET nics_text = ? WHERE id = ?')
  for (let id = 1; id <= 30; id++) rewrite.run(`text ${id}`, id)
  const m = app.repos.ftsUpkeep.measure('agents_fts')
  t.ok(m.segments > 1, `${m.segments} segments`)
  t.notOk(m.due, `${m.pages} pages: not worth a merge`)
  t.equal(searchUpkeep({ upkeep: app.repos.ftsUpkeep, log: app.log }).check(), null)
})

t.test('a merge under steady writes finishes, and the segments written meanwhile do not pile up', async (t) => {
  // Repeating FTS5's negative 'merge' while writes go on restarts the merge each time a
  // segment was written since: it never finishes, and every write leaves one more segment
  // until FTS5's limit of 2,000 fails every write with SQLITE_FULL.
  const app = await build(t)
  await seedFleet(app.db, { agents: 1200, peripheralsPerAgent: 1, seed: 13 })
  const { ftsUpkeep } = app.repos
  const rewrite = app.db.prepare('UPDATE agents SET nics_text = ? WHERE id = ?')
  for (let id = 1; id <= 1200; id++) rewrite.run(`adapter ${id} rewritten`, id)
  const before = ftsUpkeep.measure('agents_fts')
  t.ok(before.due && before.segments > 1, `due: ${before.segments} segments, ${before.pages} pages`)

  // One agent rewritten (a segment of its own) after every step of 2 pages.
  let steps = 0
  let written = 0
  while (ftsUpkeep.mergeStep('agents_fts', 2, steps === 0)) {
    steps++
    rewrite.run(`adapter ${steps} again`, 1 + (written++ % 1200))
    if (steps > 2000) break
  }
  const after = ftsUpkeep.measure('agents_fts')
  t.ok(steps <= 2000, `finished in ${steps} steps, ${written} writes meanwhile`)
  t.ok(written >= 20, 'writes went on during the merge')
  t.ok(after.segments <= 8, `${after.segments} segments left (${after.pages} pages)`)
  t.notOk(after.due, 'nothing due after it')
  t.doesNotThrow(() => app.db.exec("INSERT INTO agents_fts (agents_fts) VALUES ('integrity-check')"), 'FTS5 finds the index consistent')
  const found = app.db.prepare('SELECT count(*) FROM agents_fts WHERE agents_fts MATCH \'"again"\'').pluck().get() as number
  t.equal(found, Math.min(written, 1200), 'every agent written during the merge is found')
})
