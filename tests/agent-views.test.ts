// backend: sqlite-only — the agents' JSON kept per row by SQLite's triggers (db/agents.ts, migration 020)
// Pins the agents' JSON kept per row (db/agents.ts agentViews, migration 020): every write
// of the columns a list shows, through any connection, gives the row a new rev, and a page
// never serves an agent's JSON kept from before a write; what it serves is what the row
// says now, check-in time included (which alone does not move the rev).
import t from 'tap'
import Database from 'better-sqlite3'
import type { DB } from '../db/index.js'
import { agentViews, REV_COLUMNS } from '../db/agents.js'
import { VIEW_COLUMNS, type AgentRef, type AgentRow } from '../lib/agents/ports.js'
import { agentListView, agentView } from '../lib/agents/views.js'
import { createRepos } from '../lib/repos.js'
import { seedFleet } from '../scripts/seed.js'
import { tempDb } from './helpers.js'
import { registerGramFunctions } from '../db/asset-grams.js'

const BY_HOST = { field: 'hostIdentifier', direction: 'asc' } as const

/** The page's agents as the rows say now, serialized afresh. */
function fresh(db: DB, refs: AgentRef[]): unknown[] {
  const row = db.prepare<[number], AgentRow>('SELECT * FROM agents WHERE id = ?')
  return refs
    .map((r) => row.get(r.id))
    .filter((r) => r !== undefined)
    .map((r) => agentView(r))
}

t.test('every write of an agent row gives it a new rev, from one counter', async (t) => {
  const { db, file } = tempDb(t)
  await seedFleet(db, { agents: 20, peripheralsPerAgent: 1, seed: 3 })
  const rev = db.prepare<[number], number>('SELECT rev FROM agents WHERE id = ?').pluck()
  const revs = db.prepare('SELECT rev FROM agents').pluck().all() as number[]
  t.equal(new Set(revs).size, revs.length, 'seeded agents have revs of their own')
  const before = rev.get(1)!
  db.prepare('UPDATE agents SET host_identifier = host_identifier WHERE id = 1').run()
  const after = rev.get(1)!
  t.ok(after > before, 'a write that changes nothing still counts')
  t.ok(after > Math.max(...revs), 'the new rev is beyond every earlier one')
  const other = new Database(file)
  t.teardown(() => other.close())
  other.prepare("UPDATE agents SET hashtags = '#moved' WHERE id = 1").run()
  t.ok(rev.get(1)! > after, "another connection's write counts too")
  t.equal(rev.get(2), revs[1], 'other agents keep theirs')
  const beat = rev.get(1)
  db.prepare('UPDATE agents SET last_updated_ms = 1767225600000 WHERE id = 1').run()
  t.equal(rev.get(1), beat, 'a check-in time alone leaves it')
})

t.test('a bulk write of agents draws one new rev for all its rows (migration 032)', async (t) => {
  const { db } = tempDb(t)
  await seedFleet(db, { agents: 20, peripheralsPerAgent: 1, seed: 3 })
  db.exec(`UPDATE agents SET connection_status = 'Connected', last_updated_ms = 1000`)
  const repos = createRepos(db, 0)
  const counter = db.prepare<[], number>(`SELECT n FROM row_counts WHERE name = 'agents.rev'`).pluck()
  const revs = db.prepare<[string], { id: number; rev: number }>('SELECT id, rev FROM agents WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id')
  const ids = (db.prepare('SELECT id FROM agents ORDER BY id LIMIT 12').pluck().all() as number[]).slice(2)
  const before = counter.get()!
  const old = revs.all(JSON.stringify(ids))
  t.equal(repos.gateway.disconnectMany(ids, 2000, 'Agent disconnected').length, 10)
  t.equal(counter.get(), before + 1, 'a mass disconnect bumps the counter once, not once per agent')
  const now = revs.all(JSON.stringify(ids))
  t.same(new Set(now.map((r) => r.rev)), new Set([before + 1]), 'and every agent it wrote takes that rev')
  t.ok(
    now.every((r, i) => r.rev > old[i].rev),
    'a rev new for each of them',
  )

  const three = ids.slice(0, 3)
  const event = { code: 'X', severity: 5, category: 'Host' as const, entityId: 'h', description: 'd', details: 'x' }
  repos.events.recordMany(three.map((agentId) => ({ createdMs: 3000, events: [event], agentId })))
  t.equal(counter.get(), before + 2, 'the latest texts of several agents move with one bump')
  t.same(new Set(revs.all(JSON.stringify(three)).map((r) => r.rev)), new Set([before + 2]))
  repos.events.record(4000, [event], ids[5])
  t.equal(counter.get(), before + 3, "one agent's texts still count through the trigger")
  t.equal(revs.get(JSON.stringify([ids[5]]))!.rev, before + 3)
  db.prepare(`UPDATE agents SET severity = severity WHERE id = ?`).run(ids[6])
  t.equal(revs.get(JSON.stringify([ids[6]]))!.rev, before + 4, 'any other write counts as before')
})

t.test('the rev trigger watches every column the list shows but the id and the check-in time', async (t) => {
  const { db } = tempDb(t)
  const sql = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'agents_rev_update'").pluck().get() as string
  const listed = /AFTER UPDATE OF([\s\S]*?)\bON agents\b/i
    .exec(sql)![1]
    .split(',')
    .map((c) => c.trim())
  t.same([...listed].sort(), [...REV_COLUMNS].sort())
})

t.test('a page serves each agent as its row says now, whoever wrote it', async (t) => {
  const { db, file } = tempDb(t)
  await seedFleet(db, { agents: 120, peripheralsPerAgent: 1, seed: 5 })
  // No kept answers: the page itself is read every time; only the agents' JSON is kept.
  const repos = createRepos(db, 0)
  const page = () => {
    const { rows } = repos.agents.list({}, BY_HOST, 50, 0)
    return { rows, data: JSON.parse(repos.agents.views(rows)) as Record<string, unknown>[] }
  }
  const first = page()
  t.equal(first.data.length, 50)
  t.same(first.data, fresh(db, first.rows), 'the first page is the rows serialized')
  t.same(page().data, first.data, 'and the same again from what was kept')

  const id = first.rows[3].id
  db.prepare("UPDATE agents SET os_version = 'Windows 12 Pro', in_action = 1 WHERE id = ?").run(id)
  let now = page()
  t.equal(now.data[3].osVersion, 'Windows 12 Pro', 'a write through the same connection shows at once')
  t.equal(now.data[3].inAction, true)
  t.same(now.data, fresh(db, now.rows))

  const other = new Database(file)
  t.teardown(() => other.close())
  other.prepare('UPDATE agents SET not_approved = 7 WHERE id = ?').run(id)
  now = page()
  t.equal(now.data[3].notApproved, 7, 'a write through another connection shows at once')
  t.same(now.data, fresh(db, now.rows))

  // Check-in times alone, for the whole page, as the gateway writes them.
  other.prepare('UPDATE agents SET last_updated_ms = 1767225600000 + id WHERE id IN (SELECT value FROM json_each(?))').run(JSON.stringify(now.rows.map((r) => r.id)))
  db.prepare('UPDATE agents SET last_updated_ms = NULL WHERE id = ?').run(now.rows[7].id)
  now = page()
  t.equal(now.data[3].lastUpdated, new Date(1767225600000 + id).toISOString(), 'a check-in time shows at once')
  t.equal(now.data[7].lastUpdated, null)
  t.same(now.data, fresh(db, now.rows), 'every agent of the page with its check-in time')

  // A deleted agent whose id is used again, by an agent with the same uuid: the new row has a rev of its own.
  const last = db.prepare('SELECT * FROM agents ORDER BY id DESC LIMIT 1').get() as AgentRow
  const lastPage = () => {
    const { rows } = repos.agents.list({ uuid: last.uuid }, BY_HOST, 50, 0)
    return JSON.parse(repos.agents.views(rows)) as Record<string, unknown>[]
  }
  t.equal(lastPage()[0].hostIdentifier, last.host_identifier)
  db.prepare('DELETE FROM agents WHERE id = ?').run(last.id)
  const { id: _id, rev: _rev, host_identifier: _host, ...rest } = last
  const columns = Object.keys(rest)
  const reused = db.prepare(`INSERT INTO agents (${columns.join(', ')}, host_identifier) VALUES (${columns.map((c) => `@${c}`).join(', ')}, 'REBORN-HOST')`).run(rest)
  t.equal(Number(reused.lastInsertRowid), last.id, 'the id is used again')
  t.equal(lastPage()[0].hostIdentifier, 'REBORN-HOST', 'the page shows the new row, not the JSON kept for the old one')
})

t.test('a page is right whatever is kept: few kept, rows deleted under it', async (t) => {
  const { db, file } = tempDb(t)
  await seedFleet(db, { agents: 60, peripheralsPerAgent: 1, seed: 9 })
  const repos = createRepos(db, 0)
  // Three kept at most: every page pushes most of the others out.
  const views = agentViews(db, agentListView, 3)
  for (const offset of [0, 20, 0, 40, 20]) {
    const { rows } = repos.agents.list({}, BY_HOST, 20, offset)
    t.same(JSON.parse(views(rows)), fresh(db, rows), `offset ${offset}`)
  }
  // The page read, then two of its agents deleted before their JSON is read.
  const { rows } = repos.agents.list({}, BY_HOST, 20, 0)
  const other = new Database(file)
  t.teardown(() => other.close())
  // A connection that deletes agents needs the functions their triggers call (db/asset-grams.ts).
  registerGramFunctions(other)
  other.prepare('DELETE FROM agents WHERE id IN (?, ?)').run(rows[1].id, rows[5].id)
  const data = JSON.parse(agentViews(db, agentListView)(rows)) as { uuid: string }[]
  t.equal(data.length, 18, 'agents deleted since the page was read are left out')
  t.same(data, fresh(db, rows))
})

t.test('the columns read for a list (and a report) are exactly those the view reads', async (t) => {
  const used = new Set<string>(['id'])
  agentView(
    new Proxy({} as AgentRow, {
      get: (_t, k) => {
        if (typeof k === 'string') used.add(k)
        return null
      },
    }),
  )
  t.same([...used].sort(), [...VIEW_COLUMNS].sort())
})
