// backend: sqlite-only — the writes SQLite's gateway and agent-state repositories make (counted by a TEMP trigger on its connection) and their query plans (db/gateway.ts, db/agent-state.ts)
// A check-in writes what changed and nothing else: a peripheral reported as stored keeps
// its row (bar its last sight while present), and the agent's derived counters and status
// are rewritten only when they change (each rewrite of the agent row bumps its revision).
// The status refresh reads the latest open SetMode without a sort.
import t from 'tap'
import type { DB } from '../db/index.js'
import { agentStateRepo } from '../db/agent-state.js'
import { asyncPort } from '../db/unit-of-work.js'
import { auditTrail } from '../lib/audit.js'
import { agentGateway } from '../lib/gateway/service.js'
import { systemContext } from '../lib/platform/context.js'
import { createRepos } from '../lib/repos.js'
import { tempDb } from './helpers.js'
import { hostState, mouse, stick, storedAgent } from './fixtures/gateway.js'

function gatewayOver(db: DB) {
  const repos = createRepos(db)
  const uow = repos.uow
  const gateway = agentGateway({
    store: asyncPort(repos.gateway, uow),
    events: asyncPort(repos.events, uow),
    agentState: asyncPort(repos.agentState, uow),
    uow,
    checkIns: { run: uow.runGrouped },
    audit: auditTrail({ repo: repos.audit, refusalWindowMs: 60_000, flushRefusal: () => {} }, uow),
    log: { warn: () => {}, error: () => {} },
    settings: {
      agents: { enrollmentSecret: 'pes_x', checkInSeconds: 60, minCheckInSeconds: 0, enrollPerMinutePerAddress: 1e9, enrollPerMinute: 1e9, resultBytesPerDay: 1e9 },
      license: { accountName: 'Acme', accountId: null, seats: 100, expirationDate: null },
      rateLimitWindowMs: 60_000,
      agentRequests: 1e9,
    },
  })
  const id = storedAgent(repos.gateway, 1)
  const agent = () => db.prepare('SELECT id, uuid, host_identifier, local_ip_address, connection_status, state_digest FROM agents WHERE id = ?').get(id) as never
  const checkIn = (body: object) => gateway.checkIn(systemContext({ sourceAddress: '10.0.0.9' }), agent(), body as never)
  return { repos, id, checkIn }
}

/** Counts the updates of each peripheral row from here on. */
function peripheralWrites(db: DB) {
  db.exec(`CREATE TEMP TABLE IF NOT EXISTS writes (device_id TEXT, n INTEGER);
    CREATE TEMP TRIGGER IF NOT EXISTS count_writes AFTER UPDATE ON main.peripherals BEGIN
      INSERT INTO writes VALUES (new.device_id, 1);
    END;
    DELETE FROM writes;`)
  return () => Object.fromEntries((db.prepare('SELECT device_id, sum(n) AS n FROM writes GROUP BY device_id').all() as { device_id: string; n: number }[]).map((r) => [r.device_id, r.n]))
}

t.test('a peripheral reported as stored keeps its row; the agent row is rewritten once', async (t) => {
  const { db } = tempDb(t)
  const { id, checkIn } = gatewayOver(db)
  await checkIn(hostState([mouse, stick]))
  await checkIn(hostState([{ ...mouse, present: false }, stick]))
  const rows = () => db.prepare('SELECT device_id, present, last_seen_ms, vendor_text_id, product_text_id FROM peripherals ORDER BY id').all()
  const rev = () => db.prepare('SELECT rev FROM agents WHERE id = ?').pluck().get(id) as number
  const before = rows()
  const rev0 = rev()
  const writes = peripheralWrites(db)
  // The same peripherals; another user logged on (a full comparison, no event, no audit record).
  await checkIn(hostState([{ ...mouse, present: false }, stick], { loggedOnUsers: ['ACME\\someone-else'] }))
  t.same(writes(), { [stick.deviceID]: 1 }, 'the absent mouse is not written; the present stick has its last sight only')
  const after = rows() as { device_id: string; last_seen_ms: number }[]
  t.same(after[0], before[0], 'the mouse as it was')
  t.same({ ...after[1], last_seen_ms: 0 }, { ...(before[1] as object), last_seen_ms: 0 }, 'the stick as it was but for its last sight')
  t.ok(after[1].last_seen_ms >= (before[1] as { last_seen_ms: number }).last_seen_ms)
  t.equal(rev() - rev0, 1, 'the agent row: its state, and no refresh that changed nothing')

  // Back again: the mouse is written (present, seen now), as before.
  writes()
  db.exec('DELETE FROM writes')
  await checkIn(hostState([mouse, stick]))
  // The mouse: present again and seen, then its unapproved flag (the refresh); the stick: seen.
  t.same(writes(), { [mouse.deviceID]: 2, [stick.deviceID]: 1 })
  t.equal(db.prepare('SELECT present FROM peripherals WHERE device_id = ?').pluck().get(mouse.deviceID), 1)
})

t.test('a changed report still rewrites the peripheral', async (t) => {
  const { db } = tempDb(t)
  const { checkIn } = gatewayOver(db)
  await checkIn(hostState([mouse]))
  await checkIn(hostState([{ ...mouse, caption: 'USB Optical Mouse (renamed)' }]))
  const p = db.prepare('SELECT caption, product_text_id FROM peripherals').get() as { caption: string; product_text_id: number }
  t.equal(p.caption, 'USB Optical Mouse (renamed)')
  t.match(db.prepare('SELECT text FROM peripheral_texts WHERE id = ?').pluck().get(p.product_text_id), /renamed/)
})

t.test('a status refresh that changes nothing writes nothing', async (t) => {
  const { db } = tempDb(t)
  const repos = createRepos(db)
  const id = storedAgent(repos.gateway, 1)
  db.prepare(`UPDATE agents SET connection_status = 'Connected' WHERE id = ?`).run(id)
  repos.agentState.refreshAgent(id)
  const rev = () => db.prepare('SELECT rev FROM agents WHERE id = ?').pluck().get(id) as number
  const rev0 = rev()
  repos.agentState.refreshAgent(id)
  repos.agentState.refreshStatus(id)
  t.equal(rev(), rev0)
  // A change still lands: an open SetMode to Armed makes it Arming.
  db.prepare(`INSERT INTO agent_commands (agent_id, type, parameters, status, created_ms, created_by) VALUES (?, 'SetMode', '{"mode":"Free"}', 'Delivered', 1, 'a')`).run(id)
  db.prepare(`INSERT INTO agent_commands (agent_id, type, parameters, status, created_ms, created_by) VALUES (?, 'SetMode', '{"mode":"Armed"}', 'Pending', 2, 'a')`).run(id)
  repos.agentState.refreshStatus(id)
  t.equal(db.prepare('SELECT display_status FROM agents WHERE id = ?').pluck().get(id), 'Arming', 'the latest open SetMode decides')
  t.ok(rev() > rev0)
})

t.test("the refresh statements need no sort (a temporary b-tree per call cost more than the rest of a check-in's refresh)", (t) => {
  const { db } = tempDb(t)
  const prepared: string[] = []
  const prepare = db.prepare.bind(db)
  const watched = Object.create(db) as DB
  watched.prepare = ((sql: string) => {
    prepared.push(sql)
    return prepare(sql)
  }) as DB['prepare']
  agentStateRepo(watched)
  t.ok(prepared.length >= 4)
  for (const sql of prepared.filter((s) => s.trimStart().startsWith('UPDATE'))) {
    const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(sql.includes(':agent') ? { agent: 1 } : sql.includes('?') ? [1] : []) as { detail: string }[]).map((r) => r.detail)
    t.notOk(
      plan.some((d) => /TEMP B-TREE/.test(d)),
      sql.slice(0, 60),
    )
  }
  t.end()
})
