// backend: postgres-pending — not yet converted: seeds or checks through SQLite's repositories (app.repos, app.db); the loop itself runs on PostgreSQL and is tested there by tests/pg-background-loops.test.ts
// A mass disconnect: the sweeper disconnects quiet agents in bulk (one update and one
// recordMany per call) and leaves exactly what disconnecting them one at a time leaves (a
// disconnect, a status refresh and the event with the agent's texts): the same agents'
// rows, the same events. Once more than a batch waits, it takes them in id order.
import t from 'tap'
import type { DB } from '../db/index.js'
import { asyncPort } from '../db/unit-of-work.js'
import { hostEvent } from '../lib/gateway/events.js'
import { agentSweeperLoop, sweepAgents, type SweepSlice } from '../lib/gateway/sweeper.js'
import { createRepos } from '../lib/repos.js'
import { iso } from '../lib/time.js'
import { seedFleet } from '../scripts/seed.js'
import { tempDb } from './helpers.js'
import { storedAgent } from './fixtures/gateway.js'

const AGENTS = 1500
const DAY = 86_400_000

async function fleet(t: Parameters<typeof tempDb>[0], now: number) {
  const { db } = tempDb(t)
  await seedFleet(db, { agents: AGENTS, peripheralsPerAgent: 2, seed: 11, now })
  return db
}

const agentRows = (db: DB) =>
  (db.prepare('SELECT * FROM agents ORDER BY id').all() as Record<string, unknown>[]).map((r) => {
    // The row's revision counts its updates: how many statements touched it is not what is pinned.
    const { rev: _rev, ...rest } = r
    return rest
  })
const eventRows = (db: DB, after: number, order = 'id') =>
  db.prepare(`SELECT created_ms, event_code, severity, category, entity_id, description, details, asset_key, asset_name FROM events WHERE id > ? ORDER BY ${order}`).all(after) as Record<
    string,
    unknown
  >[]
const sweeperDeps = (db: DB) => {
  const repos = createRepos(db)
  const uow = repos.uow
  return {
    store: asyncPort(repos.gateway, uow),
    events: asyncPort(repos.events, uow),
    agentState: asyncPort(repos.agentState, uow),
    uow,
    log: { warn: () => {}, error: () => {} },
    gateway: { flushHeartbeats: async () => {}, prune: () => {} },
    disconnectSeconds: 180,
    seats: 0,
  }
}
const agentIdOf = (db: DB) => {
  const ids = new Map((db.prepare('SELECT uuid, id FROM agents').all() as { uuid: string; id: number }[]).map((a) => [a.uuid, a.id]))
  return (e: Record<string, unknown>) => ids.get(e.asset_key as string)!
}
const r = (db: DB, sql: string) => db.prepare(sql).pluck().get() as number
const newest = (db: DB) => db.prepare('SELECT coalesce(max(id), 0) FROM events').pluck().get() as number

t.test('a sweep of many quiet agents: slices until done, and the same result as one agent at a time', async (t) => {
  const seededAt = Date.now() - 60_000
  const bulk = await fleet(t, seededAt)
  const single = await fleet(t, seededAt)
  const later = seededAt + DAY
  const quietSince = later - 180_000
  const connected = bulk.prepare(`SELECT count(*) FROM agents WHERE connection_status = 'Connected'`).pluck().get() as number
  t.ok(connected > 1000, `${connected} agents connected to begin with`)

  // One agent at a time, as the sweeper did before: disconnect, refresh its status, its event.
  const one = createRepos(single)
  const from1 = newest(single)
  for (const a of one.gateway.staleAgents(quietSince, AGENTS)) {
    single.transaction(() => {
      if (!one.gateway.disconnect(a.id, quietSince)) return
      one.agentState.refreshStatus(a.id)
      one.events.record(later, [hostEvent('disconnected', a, `${a.host_identifier} has not checked in since ${iso(a.last_updated_ms)}.`)], a.id)
    })()
  }

  const deps = sweeperDeps(bulk)
  const from = newest(bulk)
  let calls = 0
  let disconnected = 0
  let firstBatch = 0
  for (;;) {
    // A budget of 1 ms: many calls, each taking a batch sized by the pace measured so far.
    const r = await sweepAgents(deps, later, 1)
    if (calls === 0) firstBatch = r.disconnected
    calls++
    disconnected += r.disconnected
    if (!r.more) break
    t.ok(calls < AGENTS, 'the sweep ends')
  }
  t.equal(disconnected, connected, 'every connected agent was disconnected')
  t.ok(calls > 2, `in ${calls} calls`)
  t.ok(
    r(bulk, "SELECT count(*) FROM agents WHERE connection_status = 'Connected'") === 0 &&
      r(bulk, "SELECT count(*) FROM agents WHERE display_status <> 'Disconnected' AND connection_status = 'Disconnected'") === 0,
  )
  const events = eventRows(bulk, from)
  t.equal(events.length, connected, 'one event per agent')
  t.same(eventRows(bulk, from, 'asset_key'), eventRows(single, from1, 'asset_key'), 'the same events and texts as one agent at a time')
  // The first batch the longest quiet first, as one at a time; the rest in id order.
  const idOf = agentIdOf(bulk)
  const byId = events.slice(firstBatch).map(idOf)
  t.ok(firstBatch > 0 && firstBatch < connected, `a first batch of ${firstBatch}, then the others`)
  t.same(
    byId,
    [...byId].sort((a, b) => a - b),
    'the others in id order',
  )
  t.same(events.slice(0, firstBatch), eventRows(single, from1).slice(0, firstBatch), 'the first batch: the longest quiet first, as one at a time')
  t.same(agentRows(bulk), agentRows(single), 'the same agents: status, counters, latest event texts')
  t.same((await sweepAgents(deps, later, 1)).disconnected, 0, 'nothing left to disconnect')
})

t.test('an agent that checked in meanwhile is left connected', async (t) => {
  const { db } = tempDb(t)
  const repos = createRepos(db)
  const ids = [1, 2, 3].map((n) => storedAgent(repos, n))
  db.prepare(`UPDATE agents SET connection_status = 'Connected', last_updated_ms = 1000`).run()
  db.prepare('UPDATE agents SET last_updated_ms = 5000 WHERE id = ?').run(ids[1])
  t.same(
    repos.gateway.disconnectMany([ids[2], ids[1], ids[0], 999], 2000, 'Agent disconnected').map((a) => a.id),
    [ids[2], ids[0]],
    'those still quiet, in the order asked',
  )
  t.same(repos.gateway.disconnectMany([ids[0]], 2000, 'Agent disconnected'), [], 'once')
  const row = (id: number) => db.prepare('SELECT connection_status, display_status, latest_event_text FROM agents WHERE id = ?').get(id)
  t.same(row(ids[0]), { connection_status: 'Disconnected', display_status: 'Disconnected', latest_event_text: 'Agent disconnected' }, 'disconnected, shown so, its latest text')
  t.equal((row(ids[1]) as { connection_status: string }).connection_status, 'Connected', 'the one that checked in is left connected')
})

t.test('a pass in id order ends, then finds agents quiet since: none is left connected', async (t) => {
  const seededAt = Date.now() - 60_000
  const db = await fleet(t, seededAt)
  const later = seededAt + DAY
  db.exec(`UPDATE agents SET connection_status = 'Connected'`)
  const deps = sweeperDeps(db)
  const ids = db.prepare('SELECT id FROM agents ORDER BY id').pluck().all() as number[]
  // The lowest ids check in just before the sweep begins: quiet only for a later call.
  const low = ids.slice(0, 50)
  db.prepare(`UPDATE agents SET last_updated_ms = ? WHERE id IN (SELECT value FROM json_each(?))`).run(later, JSON.stringify(low))
  const from = newest(db)
  let r = await sweepAgents(deps, later, 2)
  for (let calls = 0; r.more && calls < AGENTS * 2; calls++) r = await sweepAgents(deps, later, 2)
  t.equal(db.prepare(`SELECT count(*) FROM agents WHERE connection_status = 'Connected'`).pluck().get(), low.length, 'all but those that checked in')
  // Later, those go quiet too: the pass is over, and they are found by the next calls.
  const after = later + 200_000
  r = await sweepAgents(deps, after, 2)
  for (let calls = 0; r.more && calls < AGENTS; calls++) r = await sweepAgents(deps, after, 2)
  t.equal(db.prepare(`SELECT count(*) FROM agents WHERE connection_status = 'Connected'`).pluck().get(), 0, 'none left connected')
  t.equal(newest(db) - from, ids.length, 'one event per agent')
})

t.test("the loop asks the slice policy for each call's budget", async (t) => {
  const seededAt = Date.now() - 60_000
  const db = await fleet(t, seededAt)
  // Quiet long ago: the loop's own clock finds them all overdue.
  db.prepare('UPDATE agents SET last_updated_ms = ?').run(seededAt - DAY)
  const asked: number[] = []
  const slices: SweepSlice[] = []
  const budgets = [0, 0, 5]
  const deps = { ...sweeperDeps(db), sliceMs: () => budgets[Math.min(asked.push(0) - 1, budgets.length - 1)] }
  const loop = agentSweeperLoop(deps, 10, (s) => slices.push(s))
  loop.start()
  t.teardown(() => loop.stop())
  for (let i = 0; i < 1000 && db.prepare(`SELECT count(*) FROM agents WHERE connection_status = 'Connected'`).pluck().get() !== 0; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  await loop.stop()
  t.equal(db.prepare(`SELECT count(*) FROM agents WHERE connection_status = 'Connected'`).pluck().get(), 0, 'the loop disconnected every quiet agent')
  t.same(
    slices.slice(0, 3).map((s) => [s.budgetMs, s.result.disconnected]),
    [
      [0, 1],
      [0, 1],
      [5, slices[2].result.disconnected],
    ],
    'a budget of 0 ms takes one agent; the next budget is the one asked for',
  )
  t.ok(slices[2].result.disconnected > 1, 'a budget of 5 ms takes more')
  t.ok(loop.stats?.()?.slices, 'the loop statistics count its slices')
})

t.test('a batch whose events cannot be written leaves its agents untouched', async (t) => {
  const { db } = tempDb(t)
  const repos = createRepos(db)
  for (const n of [1, 2, 3]) storedAgent(repos, n)
  db.prepare(`UPDATE agents SET connection_status = 'Connected', display_status = 'Free', last_updated_ms = 1000`).run()
  const before = agentRows(db)
  const from = newest(db)
  const deps = sweeperDeps(db)
  // The disk fills up after the agents' update: the whole batch is undone.
  const failing = { ...deps, events: { ...deps.events, recordMany: async () => Promise.reject(new Error('disk full')) } }
  await t.rejects(sweepAgents(failing, DAY, 5), /disk full/)
  t.same(agentRows(db), before, 'every agent as it was: connected, its status and texts')
  t.equal(newest(db), from, 'no event')
  const r = await sweepAgents(deps, DAY, 5)
  t.equal(r.disconnected, 3, 'the next call disconnects them')
  t.equal(newest(db) - from, 3, 'each with its event')
})

t.test("during a pass, the sweep's other work runs once a sweep interval, and a batch that fails is read again", async (t) => {
  const seededAt = Date.now() - 60_000
  const db = await fleet(t, seededAt)
  const later = seededAt + DAY
  db.exec(`UPDATE agents SET connection_status = 'Connected'`)
  const deps = sweeperDeps(db)
  const asked: string[] = []
  for (const name of ['overdueCommands', 'expireLicenses', 'waitingForSeat'] as const) {
    const real = deps.store[name] as (...a: unknown[]) => Promise<unknown>
    ;(deps.store as Record<string, unknown>)[name] = (...a: unknown[]) => {
      asked.push(name)
      return real(...a)
    }
  }
  // The first call starts the pass and does the other work; the next ones, within the interval, only disconnect.
  let r = await sweepAgents(deps, later, 2)
  t.ok(r.more, 'a pass is under way')
  t.same(asked, ['overdueCommands', 'expireLicenses', 'waitingForSeat'], 'the first call does the rest of the sweep too')
  for (let i = 0; i < 3; i++) r = await sweepAgents(deps, later + 1000 * i, 2)
  t.equal(asked.length, 3, 'calls within the interval leave it')
  // A batch of the pass that cannot be written: its agents stay connected, and the next call takes them.
  const connected = () => db.prepare(`SELECT count(*) FROM agents WHERE connection_status = 'Connected'`).pluck().get() as number
  const left = connected()
  const connectedIds = () => db.prepare(`SELECT id FROM agents WHERE connection_status = 'Connected' ORDER BY id`).pluck().all() as number[]
  const next = connectedIds()
  const failing = { ...deps, events: { ...deps.events, recordMany: async () => Promise.reject(new Error('disk full')) } }
  await t.rejects(sweepAgents(failing, later + 3000, 2), /disk full/)
  t.equal(connected(), left, 'nothing disconnected')
  r = await sweepAgents(deps, later + 3000, 2)
  t.ok(r.disconnected > 0 && connected() === left - r.disconnected, 'the next call disconnects the batch that failed')
  t.same(connectedIds(), next.slice(r.disconnected), 'those it disconnected are the lowest ids still connected: the batch that failed, none passed over')
  // Past the interval, the other work runs again.
  r = await sweepAgents(deps, later + 6000, 2)
  t.equal(asked.length, 6, 'once the interval has passed')
  for (let calls = 0; r.more && calls < AGENTS * 2; calls++) r = await sweepAgents(deps, later + 6000, 2)
  t.equal(connected(), 0, 'the pass ends with every agent disconnected')
  t.ok(asked.length >= 9, 'the call that ends the pass does the rest of the sweep')
})
