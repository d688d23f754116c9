// Pins the agents' JSON kept per row on PostgreSQL (db/agent-views-kept.ts, used by
// db/postgres/agents.ts): the rev trigger of migration 003 watches every column a list shows
// but the id and the check-in time, and a page never serves an agent's JSON kept from before
// a write, whichever connection (node) wrote it; what it serves is what the row says now,
// check-in time included (which alone does not move the rev).
import t from 'tap'
import { REV_COLUMNS } from '../db/agents.js'
import { pgAgentsRepo } from '../db/postgres/agents.js'
import type { AgentRow } from '../lib/agents/ports.js'
import { agentListView, agentView } from '../lib/agents/views.js'
import { CacheRegistry } from '../lib/platform/cache.js'
import { Rand, seedFleet } from './fixtures/pg-lists-fleet.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const BY_HOST = { field: 'hostIdentifier', direction: 'asc' } as const

t.test('PostgreSQL: the rev trigger watches every column the list shows but the id and the check-in time', { skip: noPostgres }, async (t) => {
  const pg = await pgTestDatabase(t)
  const def = (await pg.one<{ def: string }>("SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = 'agents_rev_update'"))!.def
  const watched = (side: 'old' | 'new') =>
    [...def.matchAll(new RegExp(`\\b${side}\\.(\\w+)`, 'g'))]
      .map((m) => m[1])
      .filter((c) => c !== 'rev')
      .sort()
  t.same(watched('old'), [...REV_COLUMNS].sort())
  t.same(watched('new'), [...REV_COLUMNS].sort())
})

t.test('PostgreSQL: a page serves each agent as its row says now, whoever wrote it', { skip: noPostgres }, async (t) => {
  const { db: sqlite } = tempDb(t)
  const pg = await pgTestDatabase(t)
  await seedFleet(sqlite, pg, new Rand(7), { agents: 120, peripherals: 100 })
  const caches = new CacheRegistry()
  const agents = pgAgentsRepo(pg, agentListView, { caches })
  // Another node: its own repository and cache over the same database.
  const other = pgAgentsRepo(pg, agentListView)
  const byIdOrder = async (data: { uuid: string }[]) => {
    const rows = (await pg.query<AgentRow>('SELECT * FROM agents WHERE uuid = ANY($1::text[])', [data.map((d) => d.uuid)])) as AgentRow[]
    const byUuid = new Map(rows.map((r) => [r.uuid, agentView(r)]))
    return data.map((d) => byUuid.get(d.uuid))
  }
  const page = async () => {
    const p = await agents.page({}, BY_HOST, 50, 0)
    return { ...p, data: JSON.parse(p.json) as Record<string, any>[] }
  }
  const kept = () => caches.stats().find((c) => c.name === 'agent-views')!

  const first = await page()
  t.equal(first.data.length, 50)
  t.equal(first.total, 120)
  t.same(first.data, await byIdOrder(first.data as { uuid: string }[]), 'the first page is the rows serialized')
  t.equal(kept().entries, 50, "the page's agents are kept")
  const hits = kept().hits
  const again = await page()
  t.same(again.data, first.data, 'and the same again')
  t.equal(kept().hits, hits + 50, 'from what was kept')
  t.same((await other.page({}, BY_HOST, 50, 0)).json, first.json, "another node's answer is the same")

  const id = (await pg.one<{ id: number }>('SELECT id FROM agents WHERE uuid = $1', [first.data[3].uuid]))!.id
  await pg.query("UPDATE agents SET os_version = 'Windows 12 Pro', in_action = 1 WHERE id = $1", [id])
  let now = await page()
  t.equal(now.data[3].osVersion, 'Windows 12 Pro', 'a write by any connection shows at once')
  t.equal(now.data[3].inAction, true)
  t.same(now.data, await byIdOrder(now.data as { uuid: string }[]))
  t.same((await other.page({}, BY_HOST, 50, 0)).json, now.json, 'on every node')

  // Check-in times alone, for the whole page, as the gateway writes them.
  const ids = ((await pg.query<{ id: number }>('SELECT id FROM agents WHERE uuid = ANY($1::text[])', [now.data.map((d) => d.uuid)])) as { id: number }[]).map((r) => r.id)
  await pg.query('UPDATE agents SET last_updated_ms = 1767225600000 + id WHERE id = ANY($1::bigint[])', [ids])
  await pg.query('UPDATE agents SET last_updated_ms = NULL WHERE id = $1', [ids[7]])
  const hitsBefore = kept().hits
  now = await page()
  t.equal(kept().hits, hitsBefore + 50, 'check-in times alone leave what is kept')
  t.equal(now.data[3].lastUpdated, new Date(1767225600000 + id).toISOString(), 'a check-in time shows at once')
  t.same(now.data, await byIdOrder(now.data as { uuid: string }[]), 'every agent of the page with its check-in time')

  // Deleted between the page's statement and its views: left out.
  const { rows } = await agents.list({}, BY_HOST, 20, 20)
  const gone = [rows[1].id, rows[5].id]
  await pg.query('DELETE FROM agents WHERE id = ANY($1::bigint[])', [gone])
  const few = pgAgentsRepo(pg, agentListView)
  const data = JSON.parse(await few.views(rows)) as { uuid: string }[]
  t.equal(data.length, 18, 'agents deleted since the page was read are left out')
  const left = rows.map((r) => r.id).filter((i) => !gone.includes(i))
  const views = new Map(((await pg.query<AgentRow>('SELECT * FROM agents WHERE id = ANY($1::bigint[])', [left])) as AgentRow[]).map((r) => [r.id, agentView(r)]))
  t.same(
    data,
    left.map((i) => views.get(i)),
    'the others, in the page order, each as its row says',
  )
})
