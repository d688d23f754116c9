// backend: sqlite-only — the in-memory agent search over SQLite (db/agent-texts.ts); PostgreSQL searches with pg_trgm
// Pins the in-memory agent search (db/agent-texts.ts): for every field and many kinds of
// term it answers exactly the agents whose stored text contains the term, whatever the
// case; it follows inserts, changes and deletions made through its own connection or
// another one; a reader whose notes were pruned before it read them builds again; and the
// agent list's pages through it (walked or sought) are the matching agents in order.
import crypto from 'node:crypto'
import t, { type Test } from 'tap'
import { openDatabase, type DB } from '../db/index.js'
import { agentTexts, idsOf, TEXT_FIELDS, type TextField } from '../db/agent-texts.js'
import { createRepos } from '../lib/repos.js'
import { agentSearchLoop } from '../lib/search-upkeep.js'
import { seedFleet } from '../scripts/seed.js'
import { tempDb } from './helpers.js'

/** The agents whose field contains the term, read from the rows themselves. */
function truth(db: DB, field: TextField | 'uuid' | 'ip_addresses' | 'nics_text', term: string): number[] {
  const lower = term.toLowerCase()
  return (db.prepare(`SELECT id, ${field} AS v FROM agents ORDER BY id`).all() as { id: number; v: string | null }[]).filter((r) => r.v?.toLowerCase().includes(lower)).map((r) => r.id)
}

let n = 0
function addAgent(db: DB, values: Partial<Record<TextField, string | null>>): number {
  n++
  const row = {
    uuid: crypto.randomUUID(),
    machine_id: crypto.randomUUID(),
    enrolled_ms: 0,
    host_identifier: `EXTRA-HOST-${n}`,
    os_version: null,
    pc_model: null,
    service_version: null,
    license_account_name: null,
    latest_event_text: null,
    hashtags: null,
    ...values,
  }
  const columns = Object.keys(row)
  return Number(db.prepare(`INSERT INTO agents (${columns.join(', ')}) VALUES (${columns.map((c) => `@${c}`).join(', ')})`).run(row).lastInsertRowid)
}

const TERMS: [TextField, string][] = [
  ['host_identifier', 'sales-lt'],
  ['host_identifier', 'SALES-LT'],
  ['host_identifier', 'ws0001'],
  ['host_identifier', 'lt'],
  ['host_identifier', 'x'],
  ['host_identifier', 'łódź'],
  ['host_identifier', 'ŁÓDŹ-BIURO'],
  ['host_identifier', 'Москва'],
  ['host_identifier', 'мос'],
  ['host_identifier', '東京'],
  ['host_identifier', '100%'],
  ['host_identifier', 'a_b'],
  ['host_identifier', '"quoted"'],
  ['host_identifier', 'no such host'],
  ['pc_model', 'latitude 5440'],
  ['pc_model', 'e'],
  ['os_version', 'Windows 10'],
  ['os_version', '22h2'],
  ['service_version', '4.'],
  ['license_account_name', 'prime'],
  ['latest_event_text', 'disconnected'],
  ['hashtags', '#sales'],
  ['hashtags', '#'],
]

/** Every term of every field answers as the rows do. */
function agrees(t: Test, db: DB, texts: ReturnType<typeof agentTexts>, when: string) {
  const wrong: string[] = []
  for (const [field, term] of TERMS) {
    const got = idsOf(texts.search(field, term))
    const want = truth(db, field, term)
    if (JSON.stringify(got) !== JSON.stringify(want)) wrong.push(`${field} "${term}": ${got.length} found, ${want.length} hold it`)
  }
  t.same(wrong, [], `${when}: every search answers the agents that hold the term`)
}

t.test('answers as the rows do, and follows every change', async (t) => {
  const { db, file } = tempDb(t)
  // More host names than the trigram lists start at (1,024), so both ways of matching run.
  await seedFleet(db, { agents: 1100, peripheralsPerAgent: 1, seed: 5 })
  addAgent(db, { host_identifier: 'Łódź-Biuro-PC01', hashtags: '#łódź' })
  addAgent(db, { host_identifier: 'МОСКВА-ОФИС-01' })
  addAgent(db, { host_identifier: '東京-PC-01' })
  addAgent(db, { host_identifier: 'CPU-100%-A_B "quoted"' })
  const texts = agentTexts(db)
  t.ok(texts.search('host_identifier', 'sales').n > 100, 'the fleet has host names to find')
  agrees(t, db, texts, 'as built')

  // Through the same connection: renames, new texts, a null, an insert, a deletion.
  const ids = db.prepare('SELECT id FROM agents ORDER BY id').pluck().all() as number[]
  db.prepare("UPDATE agents SET host_identifier = 'NYC-SALES-LT99999' WHERE id = ?").run(ids[3])
  db.prepare("UPDATE agents SET host_identifier = 'łódź-2' WHERE id = ?").run(ids[4])
  db.prepare("UPDATE agents SET latest_event_text = 'Agent disconnected' WHERE id < ?").run(ids[200])
  db.prepare('UPDATE agents SET hashtags = NULL WHERE id = ?').run(ids[5])
  db.prepare("UPDATE agents SET pc_model = 'Latitude 5440 Rugged' WHERE id = ?").run(ids[6])
  addAgent(db, { host_identifier: 'PAR-SALES-LT77777', pc_model: 'Latitude 5440' })
  db.prepare('DELETE FROM agents WHERE id = ?').run(ids[7])
  agrees(t, db, texts, 'after changes through its own connection')

  // Through another connection, as another process would write.
  const other = openDatabase(file)
  t.teardown(() => other.close())
  other.prepare("UPDATE agents SET host_identifier = 'LON-SALES-LT55555', os_version = 'Windows 10 IoT' WHERE id = ?").run(ids[8])
  other.prepare('DELETE FROM agents WHERE id = ?').run(ids[9])
  other.prepare("INSERT INTO agents (uuid, machine_id, enrolled_ms, host_identifier, hashtags) VALUES (?, ?, 0, 'ŁÓDŹ-3', '#sales')").run(crypto.randomUUID(), crypto.randomUUID())
  agrees(t, db, texts, 'after changes through another connection')

  // Many changes at once (the whole fleet disconnected): built again from the table.
  db.prepare("UPDATE agents SET latest_event_text = 'Agent disconnected (' || id || ')'").run()
  agrees(t, db, texts, 'after every agent changed')

  // Values come and go: lists of moved agents and values no agent holds are let go of.
  const relabel = db.prepare('UPDATE agents SET latest_event_text = ? WHERE id = ?')
  for (let round = 0; round < 110; round++) {
    db.transaction(() => {
      for (let i = 0; i < 50; i++) relabel.run(`event ${round}-${i}`, ids[10 + ((round * 50 + i) % 1000)])
    })()
    if (round % 10 === 0) texts.search('latest_event_text', 'event')
  }
  agrees(t, db, texts, 'after 5,500 values came and went')
  t.equal(texts.search('latest_event_text', 'event 109-').n, 50)
})

t.test('a reader whose notes were pruned before it read them builds again', async (t) => {
  const { db, file } = tempDb(t)
  await seedFleet(db, { agents: 200, peripheralsPerAgent: 1, seed: 6 })
  const other = openDatabase(file)
  t.teardown(() => other.close())
  const mine = agentTexts(db)
  const theirs = agentTexts(other)
  mine.search('host_identifier', 'x')
  theirs.search('host_identifier', 'x')
  db.prepare("UPDATE agents SET host_identifier = 'RENAMED-' || id WHERE id % 3 = 0").run()
  mine.search('host_identifier', 'x')
  t.ok(mine.prune() > 0, 'the notes this reader applied are pruned')
  t.equal(db.prepare('SELECT count(*) FROM agent_text_changes').pluck().get(), 0)
  agrees(t, other, theirs, 'the other reader, its notes gone')
  t.equal(theirs.search('host_identifier', 'renamed-').n, truth(other, 'host_identifier', 'renamed-').length)
  t.ok(truth(other, 'host_identifier', 'renamed-').length > 50)

  // A reader not built yet needs no note: they all go.
  db.prepare("UPDATE agents SET hashtags = '#again'").run()
  const fresh = agentTexts(db)
  t.ok(fresh.prune() > 0)
  agrees(t, db, fresh, 'built after the prune')
})

t.test('between requests the notes are applied in steps, and worn dictionaries built again in steps', async (t) => {
  const { db } = tempDb(t)
  await seedFleet(db, { agents: 1100, peripheralsPerAgent: 1, seed: 7 })
  // Steps of 100 rows and 256 values: a rebuild here takes a few dozen of them.
  const texts = agentTexts(db, { rows: 100, values: 256 })
  texts.search('host_identifier', 'x')
  const change = db.prepare('UPDATE agents SET latest_event_text = ?, host_identifier = ? WHERE id = ?')
  const ids = db.prepare('SELECT id FROM agents ORDER BY id').pluck().all() as number[]
  let rounds = 0
  let stepsWhileRebuilding = 0
  let prunedWhileRebuilding = false
  let checkedAfterRebuild = false
  // Every agent gets new texts each round: the lists of moved agents grow until the
  // dictionaries are worn (twice the agents and 4,096 more).
  while (rounds < 12) {
    rounds++
    db.transaction(() => {
      // The first 40 are left alone: they are changed once, during a rebuild (below).
      for (const id of ids.slice(40)) change.run(`event ${rounds} of ${id}`, `HOST-${rounds}-${id}`, id)
    })()
    if (rounds === 7) db.prepare('DELETE FROM agents WHERE id = ?').run(ids[5])
    // One step a call (no time to spend): applied 256 notes at a time, or a rebuild's step.
    for (let steps = 0; texts.catchUp(0); steps++) {
      if (texts.rebuilding) {
        stepsWhileRebuilding++
        if (stepsWhileRebuilding === 3) {
          // A search meanwhile applies what is left to the worn dictionaries, which serve.
          agrees(t, db, texts, `round ${rounds}, mid-rebuild`)
          t.equal(texts.search('latest_event_text', `event ${rounds} of`).n, truth(db, 'latest_event_text', `event ${rounds} of`).length)
          texts.prune()
          prunedWhileRebuilding = true
          // Written while the rows are being read, to rows read already (the first chunks):
          // found once the new dictionaries serve.
          for (const id of ids.slice(0, 40)) db.prepare("UPDATE agents SET host_identifier = 'MID-REBUILD-' || id WHERE id = ?").run(id)
          addAgent(db, { host_identifier: 'ADDED-MID-REBUILD', latest_event_text: 'added' })
        }
      }
      if (steps > 10_000) throw new Error('catchUp does not end')
    }
    if (prunedWhileRebuilding && !checkedAfterRebuild) {
      checkedAfterRebuild = true
      t.same(idsOf(texts.search('host_identifier', 'mid-rebuild-')), truth(db, 'host_identifier', 'mid-rebuild-'), 'right after the rebuild, what was written during it is found')
    }
  }
  t.ok(stepsWhileRebuilding > 3, `worn dictionaries were built again in steps (${stepsWhileRebuilding} steps)`)
  t.ok(prunedWhileRebuilding, 'notes were pruned while a rebuild was under way')
  // The 40 written mid-rebuild, less the one deleted in round 7.
  t.equal(truth(db, 'host_identifier', 'mid-rebuild-').length, 39)
  t.notOk(texts.rebuilding, 'no rebuild is left under way')
  agrees(t, db, texts, 'after the rounds')
  for (const [field, term] of [
    ['latest_event_text', 'event 12 of'],
    ['latest_event_text', 'event 11 of'],
    ['host_identifier', 'host-12-'],
    ['host_identifier', 'added-mid'],
    ['latest_event_text', 'added'],
    ['host_identifier', 'mid-rebuild-'],
  ] as [TextField, string][]) {
    t.same(idsOf(texts.search(field, term)), truth(db, field, term), `${field} "${term}"`)
  }
  texts.prune()
  t.equal(db.prepare('SELECT count(*) FROM agent_text_changes').pluck().get(), 0, 'every note applied is pruned at the end')
})

t.test("the server's loop applies the notes between requests, with no search asking", async (t) => {
  const { db } = tempDb(t)
  await seedFleet(db, { agents: 300, peripheralsPerAgent: 1, seed: 8 })
  const texts = agentTexts(db)
  const logged: string[] = []
  const loop = agentSearchLoop({ texts, log: { info: () => {}, warn: (_d, m) => logged.push(m) } }, 60_000, 10)
  loop.start()
  t.teardown(() => loop.stop())
  db.prepare("UPDATE agents SET latest_event_text = 'Applied by the loop ' || id").run()
  const notes = () => db.prepare('SELECT count(*) FROM agent_text_changes').pluck().get() as number
  t.ok(notes() >= 300, 'the change left a note per agent')
  // prune() drops only the notes applied: all of them, once the loop has caught up.
  for (let waited = 0; waited < 5000 && notes() > 0; waited += 20) {
    await new Promise((r) => setTimeout(r, 20))
    texts.prune()
  }
  t.equal(notes(), 0, 'every note was applied by the loop')
  t.ok(((loop.stats?.() as { slices: number } | undefined)?.slices ?? 0) > 0, 'its slices are counted')
  t.same(logged, [])
  t.same(idsOf(texts.search('latest_event_text', 'applied by the loop')), truth(db, 'latest_event_text', 'applied by the loop'))
})

t.test('the agent list pages through the matches, walked or sought, in order', async (t) => {
  const { db } = tempDb(t)
  await seedFleet(db, { agents: 1500, peripheralsPerAgent: 1, seed: 7 })
  const repos = createRepos(db, 0)
  const hostOrder = (ids: number[]) =>
    db.prepare(`SELECT id FROM agents WHERE id IN (SELECT value FROM json_each(?)) ORDER BY host_identifier COLLATE NOCASE, uuid`).pluck().all(JSON.stringify(ids)) as number[]
  for (const term of ['sales', 'lt0001', 'Latitude', 'windows 11', '#hr', 'ethernet 2', '10.2']) {
    const want = hostOrder([...TEXT_FIELDS, 'uuid', 'ip_addresses', 'nics_text'].flatMap((f) => truth(db, f as TextField, term)))
    const first = repos.agents.list({ globalSearch: term }, { field: 'hostIdentifier', direction: 'asc' }, 50, 0)
    t.equal(first.filtered, want.length, `GlobalSearch "${term}": counted`)
    const got: number[] = []
    for (let offset = 0; offset < want.length; offset += 200) got.push(...repos.agents.list({ globalSearch: term }, { field: 'hostIdentifier', direction: 'asc' }, 200, offset).rows.map((r) => r.id))
    t.same(got, want, `GlobalSearch "${term}": every page in host order`)
  }
  const want = db.prepare("SELECT id FROM agents WHERE lower(host_identifier) LIKE '%sales-lt%' ORDER BY last_configured_ms DESC, uuid DESC").pluck().all() as number[]
  t.ok(want.length > 50)
  const got = repos.agents.list({ hostIdentifier: 'SALES-LT' }, { field: 'lastConfiguration', direction: 'desc' }, 50, 0)
  t.equal(got.filtered, want.length)
  t.same(
    got.rows.map((r) => r.id),
    want.slice(0, 50),
    'HostIdentifier contains, by last configuration: the first page',
  )
})
