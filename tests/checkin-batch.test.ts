// backend: postgres-pending — not yet converted: seeds through SQLite's repositories (storedAgent, refreshAgents) and counts SQLite's revisions (row_counts 'agents.rev'; PostgreSQL draws them from its agents_rev sequence); PostgreSQL's batched check-ins are compared with SQLite's by tests/pg-gateway.test.ts
// Check-ins that arrive together are compared and written together (batchCheckIns, the
// server's default with PRIME_GROUP_COMMIT): one statement per step for all of them. The
// rows, events, audit records and answers are those of the same check-ins one at a time,
// and a check-in that fails fails alone.
import t from 'tap'
import type { DB } from '../db/index.js'
import { asyncPort } from '../db/unit-of-work.js'
import { auditTrail } from '../lib/audit.js'
import { agentGateway } from '../lib/gateway/service.js'
import { systemContext } from '../lib/platform/context.js'
import { createRepos } from '../lib/repos.js'
import { tempDb } from './helpers.js'
import { attackTool, hostState, mouse, stick, storedAgent } from './fixtures/gateway.js'

const AGENTS = 4

function gatewayOver(db: DB, batch: boolean, seats = 100) {
  const repos = createRepos(db)
  const uow = repos.uow
  const calls = { updateStates: [] as number[] }
  const store = asyncPort(repos.gateway, uow)
  const updateStates = store.updateStates
  store.updateStates = (writes) => {
    calls.updateStates.push(writes.length)
    return updateStates(writes)
  }
  const gateway = agentGateway({
    store,
    events: asyncPort(repos.events, uow),
    agentState: asyncPort(repos.agentState, uow),
    uow,
    checkIns: batch ? { run: uow.runGrouped } : uow,
    batchCheckIns: batch,
    audit: auditTrail({ repo: repos.audit, refusalWindowMs: 60_000, flushRefusal: () => {} }, uow),
    log: { warn: () => {}, error: () => {} },
    settings: {
      agents: { enrollmentSecret: 'pes_x', checkInSeconds: 60, minCheckInSeconds: 0, enrollPerMinutePerAddress: 1e9, enrollPerMinute: 1e9, resultBytesPerDay: 1e9 },
      license: { accountName: 'Acme', accountId: null, seats, expirationDate: null },
      rateLimitWindowMs: 60_000,
      agentRequests: 1e9,
    },
  })
  const ids = Array.from({ length: AGENTS }, (_, i) => storedAgent(repos, i + 1))
  const agent = (id: number) => db.prepare('SELECT id, uuid, host_identifier, local_ip_address, connection_status, state_digest FROM agents WHERE id = ?').get(id) as never
  const checkIn = (id: number, body: object) => gateway.checkIn(systemContext({ sourceAddress: '10.0.0.9' }), agent(id), body as never)
  return { ids, checkIn, calls }
}

/** Each agent's body in each round: peripherals that come and go, a mode, a new name, errors. */
const rounds: ((n: number) => object)[] = [
  (n) => hostState(n === 2 ? [mouse, stick, attackTool] : [mouse, stick], { hostIdentifier: `HOST-${n}`, operationalStatus: n === 2 ? 'Armed' : 'Free' }),
  (n) =>
    hostState(n % 2 ? [{ ...mouse, present: false }] : [stick], {
      hostIdentifier: n === 4 ? 'HOST-4-RENAMED' : `HOST-${n}`,
      operationalStatus: n === 1 ? 'Armed' : 'Free',
      errors: n === 3 ? [{ time: '2026-01-02T03:04:05Z', code: 'E1', message: 'driver reload' }] : [],
      loggedOnUsers: [`ACME\\user${n}`],
    }),
  (n) => hostState([mouse, { ...stick, caption: 'Renamed stick' }], { hostIdentifier: `HOST-${n}`, serviceVersion: '4.3.0.1', localIpAddress: `10.1.0.${n}` }),
]

/** What the check-ins leave, times and revisions aside (they differ from run to run). */
function snapshot(db: DB) {
  const rows = (sql: string) => db.prepare(sql).all() as Record<string, unknown>[]
  const untimed = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.endsWith('_ms') && k !== 'rev' && k !== 'request_id'))
  return {
    agents: rows('SELECT * FROM agents ORDER BY id').map(untimed),
    peripherals: rows('SELECT * FROM peripherals ORDER BY id').map(untimed),
    events: rows('SELECT * FROM events ORDER BY id').map(untimed),
    audit: rows('SELECT * FROM audit_trail ORDER BY id').map(untimed),
    errors: rows('SELECT * FROM agent_errors ORDER BY id'),
    texts: rows('SELECT * FROM peripheral_texts ORDER BY id'),
  }
}

t.test('check-ins written together leave what the same check-ins one at a time leave, and get the same answers', async (t) => {
  const dbs = [tempDb(t).db, tempDb(t).db]
  const together = gatewayOver(dbs[0], true)
  const alone = gatewayOver(dbs[1], false)
  const answered: { together: unknown[]; alone: unknown[] } = { together: [], alone: [] }
  const plain = (a: { answer: { serverTime?: string } }) => ({ ...a, answer: { ...a.answer, serverTime: undefined } })
  for (const round of rounds) {
    const all = await Promise.all(together.ids.map((id, i) => together.checkIn(id, round(i + 1))))
    answered.together.push(...all.map(plain))
    for (const [i, id] of alone.ids.entries()) answered.alone.push(plain(await alone.checkIn(id, round(i + 1))))
  }
  t.same(together.calls.updateStates, [AGENTS, AGENTS, AGENTS], 'each round: one batch of every agent')
  t.same(alone.calls.updateStates, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
  t.same(answered.together, answered.alone)
  const a = snapshot(dbs[0])
  const b = snapshot(dbs[1])
  t.ok(a.events.length > 10 && a.audit.length >= AGENTS && a.errors.length === 1, 'the rounds raise events, audit records and an error')
  t.same(a, b)
})

t.test('a check-in that fails in a batch fails alone: the others are written and answered', async (t) => {
  const { db } = tempDb(t)
  const { ids, checkIn, calls } = gatewayOver(db, true)
  // The third agent's state cannot be written: its statement fails, and with it the batch's.
  db.exec(`CREATE TEMP TRIGGER refuse BEFORE UPDATE OF state_digest ON main.agents WHEN old.id = ${ids[2]} BEGIN SELECT RAISE(ABORT, 'refused'); END`)
  const results = await Promise.allSettled(ids.map((id, i) => checkIn(id, hostState([mouse], { hostIdentifier: `HOST-${i + 1}` }))))
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
  )
  t.match((results[2] as PromiseRejectedResult).reason, { message: /refused/ })
  t.same(calls.updateStates, [AGENTS, 1, 1, 1, 1], 'the batch, then each one alone')
  const rows = db.prepare('SELECT id, state_digest IS NOT NULL AS written, (SELECT count(*) FROM peripherals p WHERE p.agent_id = agents.id) AS peripherals FROM agents ORDER BY id').all()
  t.same(rows, [
    { id: ids[0], written: 1, peripherals: 1 },
    { id: ids[1], written: 1, peripherals: 1 },
    { id: ids[2], written: 0, peripherals: 0 },
    { id: ids[3], written: 1, peripherals: 1 },
  ])
  t.same(db.prepare('SELECT DISTINCT asset_name FROM events ORDER BY asset_name').pluck().all(), ['HOST-1', 'HOST-2', 'HOST-4'], 'no event of the failed one')
})

t.test('an agent deleted before its batch is refused alone', async (t) => {
  const { db } = tempDb(t)
  const { ids, checkIn, calls } = gatewayOver(db, true)
  const pending = ids.map((id, i) => checkIn(id, hostState([stick], { hostIdentifier: `HOST-${i + 1}` })))
  db.prepare('DELETE FROM agents WHERE id = ?').run(ids[1])
  const results = await Promise.allSettled(pending)
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
  )
  t.match((results[1] as PromiseRejectedResult).reason, { message: /no longer exists/ })
  t.same(calls.updateStates, [AGENTS - 1], 'one batch for the others')
})

t.test("an agent's second check-in waits for the batch after its first", async (t) => {
  const { db } = tempDb(t)
  const { ids, checkIn, calls } = gatewayOver(db, true)
  const first = checkIn(ids[0], hostState([mouse], { hostIdentifier: 'HOST-1' }))
  const second = checkIn(ids[0], hostState([stick], { hostIdentifier: 'HOST-1' }))
  const other = checkIn(ids[1], hostState([mouse], { hostIdentifier: 'HOST-2' }))
  await Promise.all([first, second, other])
  t.same(calls.updateStates, [2, 1])
  t.same(db.prepare('SELECT device_id, present FROM peripherals WHERE agent_id = ? ORDER BY id').all(ids[0]), [
    { device_id: mouse.deviceID, present: 0 },
    { device_id: stick.deviceID, present: 1 },
  ])
})

t.test('agents that take a free seat check in one at a time: a batch never hands out more seats than are free', async (t) => {
  const { db } = tempDb(t)
  // Three seats: two taken, two agents waiting with an Invalid license.
  const { ids, checkIn } = gatewayOver(db, true, 3)
  db.prepare(`UPDATE agents SET license_status = 'Invalid' WHERE id IN (?, ?)`).run(ids[2], ids[3])
  await Promise.all(ids.map((id, i) => checkIn(id, hostState([], { hostIdentifier: `HOST-${i + 1}`, licenseAccountId: undefined }))))
  t.same(db.prepare('SELECT license_status FROM agents ORDER BY id').pluck().all(), ['Activated', 'Activated', 'Activated', 'Pending'])
})

t.test('a refresh of many agents gives those it changes one new rev, and draws none when it changes nothing', async (t) => {
  const { db } = tempDb(t)
  const repos = createRepos(db)
  const ids = [1, 2, 3].map((n) => storedAgent(repos, n))
  db.exec(`UPDATE agents SET connection_status = 'Connected'`)
  repos.agentState.refreshAgents(ids)
  const counter = () => db.prepare(`SELECT n FROM row_counts WHERE name = 'agents.rev'`).pluck().get() as number
  const revs = () => db.prepare('SELECT rev FROM agents ORDER BY id').pluck().all() as number[]
  // Two agents' display status is out of date.
  db.prepare(`UPDATE agents SET display_status = 'Armed' WHERE id IN (?, ?)`).run(ids[0], ids[1])
  const [n0, r0] = [counter(), revs()]
  repos.agentState.refreshAgents(ids)
  t.same(db.prepare('SELECT display_status FROM agents ORDER BY id').pluck().all(), ['Free', 'Free', 'Free'])
  t.equal(counter(), n0 + 1, 'one rev drawn for the statement')
  t.same(revs(), [n0 + 1, n0 + 1, r0[2]], 'the changed agents share it; the other keeps its own')
  repos.agentState.refreshAgents(ids)
  t.equal(counter(), n0 + 1, 'nothing to change: no rev drawn')
})

t.test('a group of check-ins refreshes what it changed only, and leaves nothing a full refresh would change', async (t) => {
  const { db } = tempDb(t)
  const repos = createRepos(db)
  const { ids, checkIn } = gatewayOver(db, true)
  // Approvals, a vulnerable model and an open command: inputs a check-in does not change.
  const kinds = [mouse, stick, attackTool, { ...mouse, deviceID: 'USB\\VID_046D&PID_C077\\OTHER', serialNumber: 'OTHER' }]
  db.prepare(`INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, ?, ?, 'Approved', 1, 'admin')`).run(ids[0], mouse.vid, mouse.pid)
  db.prepare(`INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, ?, ?, 'Disapproved', 1, 'admin')`).run(ids[1], stick.vid, stick.pid)
  db.prepare(`INSERT INTO catalogue (id, kind, vid, pid, name, vulnerability, severity, created_ms, created_by) VALUES ('v1', 'VulnerableDevice', ?, ?, 'Stick', 'CVE-1', 2, 1, 'admin')`).run(
    stick.vid,
    stick.pid,
  )
  db.prepare(`INSERT INTO agent_commands (agent_id, type, parameters, status, created_ms, created_by) VALUES (?, 'UpdatePolicy', '{}', 'Pending', 1, 'admin')`).run(ids[2])
  repos.agentState.refreshAgents(ids)
  // A small deterministic generator: which peripherals each agent reports, present or not, and its mode.
  let seed = 7
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648
  const full = () => {
    for (const id of ids) repos.agentState.refreshAgent(id)
  }
  const state = () => [db.prepare('SELECT * FROM agents ORDER BY id').all(), db.prepare('SELECT * FROM peripherals ORDER BY id').all()]
  let changed = 0
  for (let round = 0; round < 24; round++) {
    const before = db.prepare('SELECT approved_and_present, approved_and_disconnected, not_approved, severity, display_status FROM agents ORDER BY id').all()
    const reported = ids.map(() => kinds.filter(() => next() < 0.6).map((p) => ({ ...p, present: next() < 0.7, caption: next() < 0.2 ? `Renamed ${round}` : p.caption })))
    const modes = ids.map(() => (next() < 0.4 ? 'Armed' : 'Free'))
    const body = (i: number, mode: string) => hostState(reported[i], { hostIdentifier: `HOST-${i + 1}`, operationalStatus: mode })
    await Promise.all(ids.map((id, i) => checkIn(id, body(i, modes[i]))))
    // Every other round, the same peripherals again in the other mode: only the mode changes.
    if (round % 2) await Promise.all(ids.map((id, i) => checkIn(id, body(i, modes[i] === 'Armed' ? 'Free' : 'Armed'))))
    const after = db.prepare('SELECT approved_and_present, approved_and_disconnected, not_approved, severity, display_status FROM agents ORDER BY id').all()
    if (JSON.stringify(before) !== JSON.stringify(after)) changed++
    const written = state()
    full()
    t.same(state(), written, `round ${round}: a full refresh changes nothing`)
  }
  t.ok(changed >= 12, `the rounds change the agents' counters and statuses (${changed} of 24)`)
})
