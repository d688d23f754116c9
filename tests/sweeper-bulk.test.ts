// A mass disconnect: the sweeper disconnects quiet agents in bulk (one update and one
// recordMany per call) and leaves exactly what disconnecting them one at a time leaves (a
// disconnect, a status refresh and the event with the agent's texts): the same agents'
// rows, the same events. Once more than a batch waits, it takes them in id order. The
// fleet is written with plain SQL both schemas share, and the sweeper runs over a test
// app's ports, on either storage.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { hostEvent } from '../lib/gateway/events.js'
import { agentSweeperLoop, sweepAgents, type SweepSlice } from '../lib/gateway/sweeper.js'
import { iso } from '../lib/time.js'
import { build } from './helpers.js'
import { insertRows, portsOf, query, queryColumn, queryValue } from './seed.js'
import { storedAgent } from './fixtures/gateway.js'

const AGENTS = 1500
const DAY = 86_400_000

type App = FastifyInstance

/** Agent n of every fleet (the same in each app): HOST-n, four in five connected, each quiet a little longer than the next. */
const agentOf = (n: number, now: number) => ({
  uuid: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
  machine_id: `m-${n}`,
  enrolled_ms: now - 30 * DAY,
  host_identifier: `HOST-${n}`,
  local_ip_address: `10.0.${n >> 8}.${n & 255}`,
  operational_status: n % 3 ? 'Free' : 'Armed',
  connection_status: n % 5 ? 'Connected' : 'Disconnected',
  license_status: 'Activated',
  last_updated_ms: now - ((n * 7919) % AGENTS) * 1000,
})

async function fleet(t: Parameters<typeof build>[0], now: number) {
  const app = await build(t)
  await insertRows(
    app,
    'agents',
    Array.from({ length: AGENTS }, (_, i) => agentOf(i + 1, now)),
  )
  // Two peripherals each, one of them unplugged: the agents' counters are not all zero.
  const agents = await query<{ id: number; uuid: string }>(app, 'SELECT id, uuid FROM agents ORDER BY id')
  await insertRows(
    app,
    'peripherals',
    agents.flatMap((a) =>
      ['C077', '1666'].map((pid, k) => ({
        agent_id: a.id,
        agent_uuid: a.uuid,
        device_id: `USB\\VID_046D&PID_${pid}\\${a.id}`,
        vid: '046D',
        pid,
        present: k === 0 ? 1 : 0,
        first_seen_ms: now - DAY,
        last_seen_ms: now,
      })),
    ),
  )
  await portsOf(app).agentState.refreshAgents(agents.map((a) => a.id))
  return app
}

const agentRows = async (app: App) =>
  (await query(app, 'SELECT * FROM agents ORDER BY id')).map((r) => {
    // The row's revision counts its updates: how many statements touched it is not what is pinned.
    const { rev: _rev, ...rest } = r
    return rest
  })
const eventRows = (app: App, after: number, order = 'id') =>
  query(app, `SELECT created_ms, event_code, severity, category, entity_id, description, details, asset_key, asset_name FROM events WHERE id > ? ORDER BY ${order}`, after)
const sweeperDeps = (app: App) => {
  const ports = portsOf(app)
  return {
    store: ports.gatewayStore,
    events: ports.eventRecorder,
    agentState: ports.agentState,
    uow: app.storage.uow,
    log: { warn: () => {}, error: () => {} },
    gateway: { flushHeartbeats: async () => {}, prune: () => {} },
    disconnectSeconds: 180,
    seats: 0,
  }
}
const agentIdOf = async (app: App) => {
  const ids = new Map((await query<{ uuid: string; id: number }>(app, 'SELECT uuid, id FROM agents')).map((a) => [a.uuid, a.id]))
  return (e: Record<string, unknown>) => ids.get(e.asset_key as string)!
}
const r = (app: App, sql: string) => queryValue<number>(app, sql)
const newest = (app: App) => queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM events')
const connectedCount = (app: App) => queryValue<number>(app, "SELECT count(*) FROM agents WHERE connection_status = 'Connected'")

t.test('a sweep of many quiet agents: slices until done, and the same result as one agent at a time', async (t) => {
  const seededAt = Date.now() - 60_000
  const bulk = await fleet(t, seededAt)
  const single = await fleet(t, seededAt)
  const later = seededAt + DAY
  const quietSince = later - 180_000
  const connected = await connectedCount(bulk)
  t.ok(connected > 1000, `${connected} agents connected to begin with`)

  // One agent at a time, as the sweeper did before: disconnect, refresh its status, its event.
  const one = portsOf(single)
  const from1 = await newest(single)
  for (const a of await one.gatewayStore.staleAgents(quietSince, AGENTS)) {
    await single.storage.uow.run(async () => {
      if (!(await one.gatewayStore.disconnect(a.id, quietSince))) return
      await one.agentState.refreshStatus(a.id)
      await one.eventRecorder.record(later, [hostEvent('disconnected', a, `${a.host_identifier} has not checked in since ${iso(a.last_updated_ms)}.`)], a.id)
    })
  }

  const deps = sweeperDeps(bulk)
  const from = await newest(bulk)
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
  t.equal(await connectedCount(bulk), 0)
  t.equal(await r(bulk, "SELECT count(*) FROM agents WHERE display_status <> 'Disconnected' AND connection_status = 'Disconnected'"), 0)
  const events = await eventRows(bulk, from)
  t.equal(events.length, connected, 'one event per agent')
  t.same(await eventRows(bulk, from, 'asset_key'), await eventRows(single, from1, 'asset_key'), 'the same events and texts as one agent at a time')
  // The first batch the longest quiet first, as one at a time; the rest in id order.
  const idOf = await agentIdOf(bulk)
  const byId = events.slice(firstBatch).map(idOf)
  t.ok(firstBatch > 0 && firstBatch < connected, `a first batch of ${firstBatch}, then the others`)
  t.same(
    byId,
    [...byId].sort((a, b) => a - b),
    'the others in id order',
  )
  t.same(events.slice(0, firstBatch), (await eventRows(single, from1)).slice(0, firstBatch), 'the first batch: the longest quiet first, as one at a time')
  t.same(await agentRows(bulk), await agentRows(single), 'the same agents: status, counters, latest event texts')
  t.same((await sweepAgents(deps, later, 1)).disconnected, 0, 'nothing left to disconnect')
})

t.test('an agent that checked in meanwhile is left connected', async (t) => {
  const app = await build(t)
  const store = portsOf(app).gatewayStore
  const ids: number[] = []
  for (const n of [1, 2, 3]) ids.push(await storedAgent(portsOf(app).gatewayStore, n))
  await query(app, `UPDATE agents SET connection_status = 'Connected', last_updated_ms = 1000`)
  await query(app, 'UPDATE agents SET last_updated_ms = 5000 WHERE id = ?', ids[1])
  t.same(
    (await store.disconnectMany([ids[2], ids[1], ids[0], 999], 2000, 'Agent disconnected')).map((a) => a.id),
    [ids[2], ids[0]],
    'those still quiet, in the order asked',
  )
  t.same(await store.disconnectMany([ids[0]], 2000, 'Agent disconnected'), [], 'once')
  const row = (id: number) => query(app, 'SELECT connection_status, display_status, latest_event_text FROM agents WHERE id = ?', id).then((rows) => rows[0])
  t.same(await row(ids[0]), { connection_status: 'Disconnected', display_status: 'Disconnected', latest_event_text: 'Agent disconnected' }, 'disconnected, shown so, its latest text')
  t.equal((await row(ids[1])).connection_status, 'Connected', 'the one that checked in is left connected')
})

t.test('a pass in id order ends, then finds agents quiet since: none is left connected', async (t) => {
  const seededAt = Date.now() - 60_000
  const app = await fleet(t, seededAt)
  const later = seededAt + DAY
  await query(app, `UPDATE agents SET connection_status = 'Connected'`)
  const deps = sweeperDeps(app)
  const ids = await queryColumn<number>(app, 'SELECT id FROM agents ORDER BY id')
  // The lowest ids check in just before the sweep begins: quiet only for a later call.
  const low = ids.slice(0, 50)
  await query(app, 'UPDATE agents SET last_updated_ms = ? WHERE id <= ?', later, low.at(-1))
  const from = await newest(app)
  let r = await sweepAgents(deps, later, 2)
  for (let calls = 0; r.more && calls < AGENTS * 2; calls++) r = await sweepAgents(deps, later, 2)
  t.equal(await connectedCount(app), low.length, 'all but those that checked in')
  // Later, those go quiet too: the pass is over, and they are found by the next calls.
  const after = later + 200_000
  r = await sweepAgents(deps, after, 2)
  for (let calls = 0; r.more && calls < AGENTS; calls++) r = await sweepAgents(deps, after, 2)
  t.equal(await connectedCount(app), 0, 'none left connected')
  t.equal((await newest(app)) - from, ids.length, 'one event per agent')
})

t.test("the loop asks the slice policy for each call's budget", async (t) => {
  const seededAt = Date.now() - 60_000
  const app = await fleet(t, seededAt)
  // Quiet long ago: the loop's own clock finds them all overdue.
  await query(app, 'UPDATE agents SET last_updated_ms = ?', seededAt - DAY)
  const asked: number[] = []
  const slices: SweepSlice[] = []
  const budgets = [0, 0, 5]
  const deps = { ...sweeperDeps(app), sliceMs: () => budgets[Math.min(asked.push(0) - 1, budgets.length - 1)] }
  const loop = agentSweeperLoop(deps, 10, (s) => slices.push(s))
  loop.start()
  t.teardown(() => loop.stop())
  for (let i = 0; i < 1000 && (await connectedCount(app)) !== 0; i++) await new Promise((resolve) => setTimeout(resolve, 5))
  await loop.stop()
  t.equal(await connectedCount(app), 0, 'the loop disconnected every quiet agent')
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
  const app = await build(t)
  for (const n of [1, 2, 3]) await storedAgent(portsOf(app).gatewayStore, n)
  await query(app, `UPDATE agents SET connection_status = 'Connected', display_status = 'Free', last_updated_ms = 1000`)
  const before = await agentRows(app)
  const from = await newest(app)
  const deps = sweeperDeps(app)
  // The disk fills up after the agents' update: the whole batch is undone.
  const failing = { ...deps, events: { ...deps.events, recordMany: async () => Promise.reject(new Error('disk full')) } }
  await t.rejects(sweepAgents(failing, DAY, 5), /disk full/)
  t.same(await agentRows(app), before, 'every agent as it was: connected, its status and texts')
  t.equal(await newest(app), from, 'no event')
  const r = await sweepAgents(deps, DAY, 5)
  t.equal(r.disconnected, 3, 'the next call disconnects them')
  t.equal((await newest(app)) - from, 3, 'each with its event')
})

t.test("during a pass, the sweep's other work runs once a sweep interval, and a batch that fails is read again", async (t) => {
  const seededAt = Date.now() - 60_000
  const app = await fleet(t, seededAt)
  const later = seededAt + DAY
  await query(app, `UPDATE agents SET connection_status = 'Connected'`)
  const deps = sweeperDeps(app)
  const asked: string[] = []
  // The app's port wrapped, not changed: its other users call it as it is.
  const store: Record<string, unknown> = { ...deps.store }
  for (const name of ['overdueCommands', 'expireLicenses', 'waitingForSeat'] as const) {
    const real = deps.store[name] as (...a: unknown[]) => Promise<unknown>
    store[name] = (...a: unknown[]) => {
      asked.push(name)
      return real(...a)
    }
  }
  deps.store = store as typeof deps.store
  // The first call starts the pass and does the other work; the next ones, within the interval, only disconnect.
  let r = await sweepAgents(deps, later, 2)
  t.ok(r.more, 'a pass is under way')
  t.same(asked, ['overdueCommands', 'expireLicenses', 'waitingForSeat'], 'the first call does the rest of the sweep too')
  for (let i = 0; i < 3; i++) r = await sweepAgents(deps, later + 1000 * i, 2)
  t.equal(asked.length, 3, 'calls within the interval leave it')
  // A batch of the pass that cannot be written: its agents stay connected, and the next call takes them.
  const left = await connectedCount(app)
  const connectedIds = () => queryColumn<number>(app, `SELECT id FROM agents WHERE connection_status = 'Connected' ORDER BY id`)
  const next = await connectedIds()
  const failing = { ...deps, events: { ...deps.events, recordMany: async () => Promise.reject(new Error('disk full')) } }
  await t.rejects(sweepAgents(failing, later + 3000, 2), /disk full/)
  t.equal(await connectedCount(app), left, 'nothing disconnected')
  r = await sweepAgents(deps, later + 3000, 2)
  t.ok(r.disconnected > 0 && (await connectedCount(app)) === left - r.disconnected, 'the next call disconnects the batch that failed')
  t.same(await connectedIds(), next.slice(r.disconnected), 'those it disconnected are the lowest ids still connected: the batch that failed, none passed over')
  // Past the interval, the other work runs again.
  r = await sweepAgents(deps, later + 6000, 2)
  t.equal(asked.length, 6, 'once the interval has passed')
  for (let calls = 0; r.more && calls < AGENTS * 2; calls++) r = await sweepAgents(deps, later + 6000, 2)
  t.equal(await connectedCount(app), 0, 'the pass ends with every agent disconnected')
  t.ok(asked.length >= 9, 'the call that ends the pass does the rest of the sweep')
})

t.test("license seats handed out: a unit's activations fit the budget at the pace of the last units, their commits included", async (t) => {
  const now = Date.now()
  const app = await build(t)
  // Disconnected, so that the sweep has no one to disconnect: only seats to hand out.
  await insertRows(
    app,
    'agents',
    Array.from({ length: AGENTS }, (_, i) => ({ ...agentOf(i + 1, now), connection_status: 'Disconnected', license_status: 'Pending' })),
  )
  const deps = sweeperDeps(app)
  // A disk on which each commit takes 60 ms: here, the unit's end holds the event loop that long.
  const uow = {
    run: async <T>(work: () => Promise<T>): Promise<T> => {
      const r = await deps.uow.run(work)
      const until = performance.now() + 60
      while (performance.now() < until);
      return r
    },
  }
  const slow = { ...deps, uow, seats: AGENTS }
  const BUDGET = 20
  const first = await sweepAgents(slow, now, BUDGET)
  t.ok(first.activated >= 1 && first.more, `the first call activated ${first.activated} agents, and more wait`)
  // That unit took 60 ms and more: the pace it leaves allows at most a third of that, and
  // never less than one (each unit makes progress; on a busy machine the first may take only 2).
  const most = Math.max(1, Math.floor(BUDGET / (60 / first.activated)))
  const second = await sweepAgents(slow, now, BUDGET)
  t.ok(second.activated >= 1 && second.activated <= most, `the second activated ${second.activated} (at most ${most})`)
  t.ok(second.more, 'and more are due at once')
  const third = await sweepAgents(slow, now, BUDGET)
  t.ok(third.activated >= 1 && third.activated <= most, `the third ${third.activated}`)
  t.equal(await r(app, "SELECT count(*) FROM agents WHERE license_status = 'Activated'"), first.activated + second.activated + third.activated, 'each one counted is activated')
})
