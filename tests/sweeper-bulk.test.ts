// A mass disconnect: the sweeper disconnects quiet agents in bulk (one update, one status
// refresh and one recordMany per call) and leaves exactly what disconnecting them one at a
// time leaves: the same agents' rows, the same events in the same order.
import t from 'tap'
import type { DB } from '../db/index.js'
import { asyncPort } from '../db/unit-of-work.js'
import { hostEvent } from '../lib/gateway/events.js'
import { sweepAgents } from '../lib/gateway/sweeper.js'
import { createRepos } from '../lib/repos.js'
import { iso } from '../lib/time.js'
import { seedFleet } from '../scripts/seed.js'
import { tempDb } from './helpers.js'

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
const eventRows = (db: DB, after: number) =>
  db.prepare('SELECT created_ms, event_code, severity, category, entity_id, description, details, asset_key, asset_name FROM events WHERE id > ? ORDER BY id').all(after) as Record<string, unknown>[]
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

  const repos = createRepos(bulk)
  const uow = repos.uow
  const deps = {
    store: asyncPort(repos.gateway, uow),
    events: asyncPort(repos.events, uow),
    agentState: asyncPort(repos.agentState, uow),
    uow,
    log: { warn: () => {}, error: () => {} },
    gateway: { flushHeartbeats: async () => {}, prune: () => {} },
    disconnectSeconds: 180,
    seats: 0,
  }
  const from = newest(bulk)
  let calls = 0
  let disconnected = 0
  for (;;) {
    // A budget of 1 ms: many calls, each taking a batch sized by the pace measured so far.
    const r = await sweepAgents(deps, later, 1)
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
  t.same(events, eventRows(single, from1), 'the same events, texts and order as one agent at a time')
  t.same(agentRows(bulk), agentRows(single), 'the same agents: status, counters, latest event texts')
  t.same((await sweepAgents(deps, later, 1)).disconnected, 0, 'nothing left to disconnect')
})

t.test('an agent that checked in meanwhile is left connected', async (t) => {
  const { db } = tempDb(t)
  const repos = createRepos(db)
  const ids = [1, 2, 3].map((n) =>
    repos.gateway.insertAgent({
      uuid: `00000000-0000-4000-8000-00000000000${n}`,
      machineId: `m-${n}`,
      credentialHash: `h-${n}`,
      enrolledMs: 1,
      hostIdentifier: `HOST-${n}`,
      licenseStatus: 'Activated',
      expirationMs: null,
      licenseAccountName: 'Acme',
      checkInSeconds: 60,
    }),
  )
  db.prepare(`UPDATE agents SET connection_status = 'Connected', last_updated_ms = 1000`).run()
  db.prepare('UPDATE agents SET last_updated_ms = 5000 WHERE id = ?').run(ids[1])
  t.same(
    repos.gateway.disconnectMany([ids[2], ids[1], ids[0], 999], 2000).map((a) => a.id),
    [ids[2], ids[0]],
    'those still quiet, in the order asked',
  )
  t.same(repos.gateway.disconnectMany([ids[0]], 2000), [], 'once')
})
