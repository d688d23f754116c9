// Check-ins that arrive together are compared and written together (batchCheckIns, the
// server's default with PRIME_GROUP_COMMIT): one statement per step for all of them. The
// rows, events, audit records and answers are those of the same check-ins one at a time,
// and a check-in that fails fails alone. On either backend: the gateway over a test app's
// ports, its agents stored through them, the rows read with plain SQL.
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { auditDeps, auditTrail } from '../lib/audit.js'
import { agentGateway } from '../lib/gateway/service.js'
import { systemContext } from '../lib/platform/context.js'
import { build, testBackend } from './helpers.js'
import { attackTool, hostState, mouse, stick, storedAgent } from './fixtures/gateway.js'
import { portsOf, query, queryColumn, queryValue } from './seed.js'

const AGENTS = 4

type App = FastifyInstance

/**
 * `slow.ms`: each check-in's state write takes that long more (0: as it is), to make check-ins
 * heavy; `slowCommit.ms`: each unit's end takes that long more a check-in it wrote (as its
 * COMMIT would, writing the search indexes' pending terms).
 */
async function gatewayOver(app: App, batch: boolean, seats = 100, batchBudgetMs?: number, slow = { ms: 0 }, slowCommit = { ms: 0 }) {
  const ports = portsOf(app)
  const uow = app.storage.uow
  const calls = { updateStates: [] as number[], units: [] as number[] }
  // The app's port wrapped, not changed: updateStates counted (and by unit of work).
  const store = { ...ports.gatewayStore }
  store.updateStates = (writes) => {
    calls.updateStates.push(writes.length)
    calls.units[calls.units.length - 1] += writes.length
    const end = Date.now() + slow.ms * writes.length
    while (Date.now() < end);
    return ports.gatewayStore.updateStates(writes)
  }
  const counted = {
    run: <T>(work: () => Promise<T>) =>
      uow.run(async () => {
        calls.units.push(0)
        const result = await work()
        const end = Date.now() + slowCommit.ms * calls.units[calls.units.length - 1]
        while (Date.now() < end);
        return result
      }),
  }
  const gateway = agentGateway({
    store,
    events: ports.eventRecorder,
    agentState: ports.agentState,
    uow: counted,
    checkIns: batch ? { run: uow.runGrouped } : uow,
    batchCheckIns: batch,
    batchBudgetMs,
    audit: auditTrail(auditDeps(app)),
    log: { warn: () => {}, error: () => {} },
    settings: {
      agents: { enrollmentSecret: 'pes_x', checkInSeconds: 60, minCheckInSeconds: 0, enrollPerMinutePerAddress: 1e9, enrollPerMinute: 1e9, resultBytesPerDay: 1e9 },
      license: { accountName: 'Acme', accountId: null, seats, expirationDate: null },
      rateLimitWindowMs: 60_000,
      agentRequests: 1e9,
    },
  } as Parameters<typeof agentGateway>[0])
  const ids: number[] = []
  for (let i = 0; i < AGENTS; i++) ids.push(await storedAgent(portsOf(app).gatewayStore, i + 1))
  const agent = async (id: number) => (await query(app, 'SELECT id, uuid, host_identifier, local_ip_address, connection_status, state_digest FROM agents WHERE id = ?', id))[0] as never
  const checkInAs = (row: never, body: object) => gateway.checkIn(systemContext({ sourceAddress: '10.0.0.9' }), row, body as never)
  const checkIn = async (id: number, body: object) => checkInAs(await agent(id), body)
  /**
   * Check-ins of the agents `of` arriving in one turn (as a batch gathers them): their rows
   * read first, then every call made at once; answers each call's promise.
   */
  const arriving = async (of: number[], body: (i: number) => object, meanwhile?: () => Promise<unknown>) => {
    const rows = await Promise.all(of.map(agent))
    await meanwhile?.()
    return rows.map((row, i) => checkInAs(row, body(i)))
  }
  return { ids, checkIn, arriving, calls }
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
async function snapshot(app: App) {
  const rows = (sql: string) => query(app, sql)
  const untimed = (r: Record<string, unknown>) => Object.fromEntries(Object.entries(r).filter(([k]) => !k.endsWith('_ms') && k !== 'rev' && k !== 'request_id'))
  const texts = new Map((await rows('SELECT id, text FROM peripheral_texts')).map((r) => [r.id, r.text]))
  // PostgreSQL draws a text id for an insert that finds the text there already (ON CONFLICT
  // DO NOTHING): its ids may differ from one run to another, the texts they name may not.
  const named = (r: Record<string, unknown>) => {
    const { vendor_text_id, product_text_id, ...rest } = r
    const ids = testBackend === 'postgres' ? {} : { vendor_text_id, product_text_id }
    return { ...rest, ...ids, vendor_text: texts.get(vendor_text_id), product_text: texts.get(product_text_id) }
  }
  return {
    agents: (await rows('SELECT * FROM agents ORDER BY id')).map(untimed),
    peripherals: (await rows('SELECT * FROM peripherals ORDER BY id')).map(untimed).map(named),
    events: (await rows('SELECT * FROM events ORDER BY id')).map(untimed),
    audit: (await rows('SELECT * FROM audit_trail ORDER BY id')).map(untimed),
    errors: await rows('SELECT * FROM agent_errors ORDER BY id'),
    texts: testBackend === 'postgres' ? await rows('SELECT kind, text FROM peripheral_texts ORDER BY kind, text') : await rows('SELECT * FROM peripheral_texts ORDER BY id'),
  }
}

t.test('check-ins written together leave what the same check-ins one at a time leave, and get the same answers', async (t) => {
  const apps = [await build(t), await build(t)]
  const together = await gatewayOver(apps[0], true)
  const alone = await gatewayOver(apps[1], false)
  const answered: { together: unknown[]; alone: unknown[] } = { together: [], alone: [] }
  const plain = (a: { answer: { serverTime?: string } }) => ({ ...a, answer: { ...a.answer, serverTime: undefined } })
  for (const round of rounds) {
    const all = await Promise.all(await together.arriving(together.ids, (i) => round(i + 1)))
    answered.together.push(...all.map(plain))
    for (const [i, id] of alone.ids.entries()) answered.alone.push(plain(await alone.checkIn(id, round(i + 1))))
  }
  t.same(together.calls.updateStates, [AGENTS, AGENTS, AGENTS], 'each round: one batch of every agent')
  t.same(alone.calls.updateStates, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
  t.same(answered.together, answered.alone)
  const a = await snapshot(apps[0])
  const b = await snapshot(apps[1])
  t.ok(a.events.length > 10 && a.audit.length >= AGENTS && a.errors.length === 1, 'the rounds raise events, audit records and an error')
  t.same(a, b)
})

t.test('a batch holds as many check-ins as its budget allows, compared one first, then twice as many while they fit', async (t) => {
  // A budget no check-in fits in: one check-in a batch, then the pace says how many fit.
  const tight = await gatewayOver(await build(t), true, 100, 0)
  await Promise.all(await tight.arriving(tight.ids, (i) => rounds[0](i + 1)))
  t.same(tight.calls.units, [1, 1, 1, 1], 'a budget of 0 ms: each check-in in a batch of its own')
  const wide = await gatewayOver(await build(t), true, 100, 60_000)
  await Promise.all(await wide.arriving(wide.ids, (i) => rounds[1](i + 1)))
  t.same(wide.calls.units, [AGENTS], 'a budget every check-in fits in: one batch')
  t.same(wide.calls.updateStates, [1, 2, 1], 'compared one first, then twice as many')
  const unbounded = await gatewayOver(await build(t), true)
  await Promise.all(await unbounded.arriving(unbounded.ids, (i) => rounds[2](i + 1)))
  t.same(unbounded.calls.updateStates, [AGENTS], 'no budget (a database server): one batch')
})

/** Every check-in answered and compared once, in units of work of at most two (a 30 ms budget at 12 ms a check-in). */
function unitsOfAtMostTwo(t: Test, answers: unknown[], units: number[], cost: string) {
  t.equal(answers.length, AGENTS, 'every check-in answered')
  t.same(
    units.reduce((a, b) => a + b, 0),
    AGENTS,
    'each compared once',
  )
  t.ok(
    units.every((n) => n <= 2),
    `no unit of work took more check-ins than its 30 ms hold ${cost}: ${units.join(', ')}`,
  )
}

t.test("a batch whose check-ins turn heavy stops once its budget is spent, whatever the last batches' pace", async (t) => {
  // Light check-ins first: the pace they leave would let every heavy one into one batch.
  const slow = { ms: 0 }
  const g = await gatewayOver(await build(t), true, 100, 30, slow)
  await Promise.all(await g.arriving(g.ids, (i) => rounds[0](i + 1)))
  g.calls.units.length = 0
  slow.ms = 12
  const answers = await Promise.all(await g.arriving(g.ids, (i) => rounds[1](i + 1)))
  unitsOfAtMostTwo(t, answers, g.calls.units, 'at 12 ms each')
})

t.test('a batch leaves room in its budget for its commit, at the pace of the last commits', async (t) => {
  const slowCommit = { ms: 0 }
  const g = await gatewayOver(await build(t), true, 100, 30, { ms: 0 }, slowCommit)
  await Promise.all(await g.arriving(g.ids, (i) => rounds[0](i + 1)))
  // Light to compare, dear to commit: a round to learn it, then one that must heed it.
  slowCommit.ms = 12
  await Promise.all(await g.arriving(g.ids, (i) => rounds[1](i + 1)))
  g.calls.units.length = 0
  const answers = await Promise.all(await g.arriving(g.ids, (i) => rounds[2](i + 1)))
  unitsOfAtMostTwo(t, answers, g.calls.units, 'at 12 ms of commit each')
})

t.test('a check-in that fails in a batch fails alone: the others are written and answered', async (t) => {
  const app = await build(t)
  const { ids, arriving, calls } = await gatewayOver(app, true)
  // The third agent's state cannot be written: its statement fails, and with it the batch's.
  if (testBackend === 'postgres') {
    await query(app, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$`)
    await query(app, `CREATE TRIGGER refuse BEFORE UPDATE OF state_digest ON agents FOR EACH ROW WHEN (old.id = ${ids[2]}) EXECUTE FUNCTION refuse()`)
  } else await query(app, `CREATE TEMP TRIGGER refuse BEFORE UPDATE OF state_digest ON main.agents WHEN old.id = ${ids[2]} BEGIN SELECT RAISE(ABORT, 'refused'); END`)
  const results = await Promise.allSettled(await arriving(ids, (i) => hostState([mouse], { hostIdentifier: `HOST-${i + 1}` })))
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'fulfilled', 'rejected', 'fulfilled'],
  )
  t.match((results[2] as PromiseRejectedResult).reason, { message: /refused/ })
  t.same(calls.updateStates, [AGENTS, 1, 1, 1, 1], 'the batch, then each one alone')
  const rows = await query(
    app,
    'SELECT id, CASE WHEN state_digest IS NOT NULL THEN 1 ELSE 0 END AS written, (SELECT count(*) FROM peripherals p WHERE p.agent_id = agents.id) AS peripherals FROM agents ORDER BY id',
  )
  t.same(rows, [
    { id: ids[0], written: 1, peripherals: 1 },
    { id: ids[1], written: 1, peripherals: 1 },
    { id: ids[2], written: 0, peripherals: 0 },
    { id: ids[3], written: 1, peripherals: 1 },
  ])
  t.same(await queryColumn(app, 'SELECT DISTINCT asset_name FROM events ORDER BY asset_name'), ['HOST-1', 'HOST-2', 'HOST-4'], 'no event of the failed one')
})

t.test('an agent deleted before its batch is refused alone', async (t) => {
  const app = await build(t)
  const { ids, arriving, calls } = await gatewayOver(app, true)
  const body = (i: number) => hostState([stick], { hostIdentifier: `HOST-${i + 1}` })
  const gone = () => query(app, 'DELETE FROM agents WHERE id = ?', ids[1])
  let pending: Promise<unknown>[]
  if (testBackend === 'sqlite') {
    // Deleted once the check-ins are in, before their batch runs (the delete is synchronous).
    pending = await arriving(ids, body)
    await gone()
  } else {
    // Another connection's delete has no set place among the batch's statements: it commits
    // after the check-ins' rows were read (as their credentials were), before they arrive.
    pending = await arriving(ids, body, gone)
  }
  const results = await Promise.allSettled(pending)
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'fulfilled', 'fulfilled'],
  )
  t.match((results[1] as PromiseRejectedResult).reason, { message: /no longer exists/ })
  t.same(calls.updateStates, [AGENTS - 1], 'one batch for the others')
})

t.test("an agent's second check-in waits for the batch after its first", async (t) => {
  const app = await build(t)
  const { ids, arriving, calls } = await gatewayOver(app, true)
  const bodies = [hostState([mouse], { hostIdentifier: 'HOST-1' }), hostState([stick], { hostIdentifier: 'HOST-1' }), hostState([mouse], { hostIdentifier: 'HOST-2' })]
  await Promise.all(await arriving([ids[0], ids[0], ids[1]], (i) => bodies[i]))
  t.same(calls.updateStates, [2, 1])
  t.same(await query(app, 'SELECT device_id, present FROM peripherals WHERE agent_id = ? ORDER BY id', ids[0]), [
    { device_id: mouse.deviceID, present: 0 },
    { device_id: stick.deviceID, present: 1 },
  ])
})

t.test('agents that take a free seat check in one at a time: a batch never hands out more seats than are free', async (t) => {
  const app = await build(t)
  // Three seats: two taken, two agents waiting with an Invalid license.
  const { ids, arriving } = await gatewayOver(app, true, 3)
  await query(app, `UPDATE agents SET license_status = 'Invalid' WHERE id IN (?, ?)`, ids[2], ids[3])
  await Promise.all(await arriving(ids, (i) => hostState([], { hostIdentifier: `HOST-${i + 1}`, licenseAccountId: undefined })))
  t.same(await queryColumn(app, 'SELECT license_status FROM agents ORDER BY id'), ['Activated', 'Activated', 'Activated', 'Pending'])
})

t.test('a refresh of many agents gives those it changes one new rev, and draws none when it changes nothing', async (t) => {
  const app = await build(t)
  const state = portsOf(app).agentState
  const ids: number[] = []
  for (const n of [1, 2, 3]) ids.push(await storedAgent(portsOf(app).gatewayStore, n))
  await query(app, `UPDATE agents SET connection_status = 'Connected'`)
  await state.refreshAgents(ids)
  // SQLite counts its revs in row_counts; PostgreSQL draws them from the agents_rev sequence.
  const counter = () => (testBackend === 'postgres' ? queryValue<number>(app, 'SELECT last_value FROM agents_rev') : queryValue<number>(app, `SELECT n FROM row_counts WHERE name = 'agents.rev'`))
  const revs = () => queryColumn<number>(app, 'SELECT rev FROM agents ORDER BY id')
  // Two agents' display status is out of date.
  await query(app, `UPDATE agents SET display_status = 'Armed' WHERE id IN (?, ?)`, ids[0], ids[1])
  const [n0, r0] = [await counter(), await revs()]
  await state.refreshAgents(ids)
  t.same(await queryColumn(app, 'SELECT display_status FROM agents ORDER BY id'), ['Free', 'Free', 'Free'])
  const r1 = await revs()
  if (testBackend === 'postgres') {
    // A rev per rewritten row (agents_rev_update), each above every rev before.
    t.equal(await counter(), n0 + 2, 'one rev drawn per changed agent')
    t.same([...r1.slice(0, 2)].sort(), [n0 + 1, n0 + 2], 'the changed agents take new revs')
    t.equal(r1[2], r0[2], 'the other keeps its own')
  } else {
    t.equal(await counter(), n0 + 1, 'one rev drawn for the statement')
    t.same(r1, [n0 + 1, n0 + 1, r0[2]], 'the changed agents share it; the other keeps its own')
  }
  const n1 = await counter()
  await state.refreshAgents(ids)
  t.equal(await counter(), n1, 'nothing to change: no rev drawn')
  t.same(await revs(), r1, 'and no row rewritten')
})

t.test('a group of check-ins refreshes what it changed only, and leaves nothing a full refresh would change', async (t) => {
  const app = await build(t)
  const agentState = portsOf(app).agentState
  const { ids, arriving } = await gatewayOver(app, true)
  // Approvals, a vulnerable model and an open command: inputs a check-in does not change.
  const kinds = [mouse, stick, attackTool, { ...mouse, deviceID: 'USB\\VID_046D&PID_C077\\OTHER', serialNumber: 'OTHER' }]
  await query(app, `INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, ?, ?, 'Approved', 1, 'admin')`, ids[0], mouse.vid, mouse.pid)
  await query(app, `INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, ?, ?, 'Disapproved', 1, 'admin')`, ids[1], stick.vid, stick.pid)
  await query(
    app,
    `INSERT INTO catalogue (id, kind, vid, pid, name, vulnerability, severity, created_ms, created_by) VALUES ('v1', 'VulnerableDevice', ?, ?, 'Stick', 'CVE-1', 2, 1, 'admin')`,
    stick.vid,
    stick.pid,
  )
  await query(app, `INSERT INTO agent_commands (agent_id, type, parameters, status, created_ms, created_by) VALUES (?, 'UpdatePolicy', '{}', 'Pending', 1, 'admin')`, ids[2])
  await agentState.refreshAgents(ids)
  // A small deterministic generator: which peripherals each agent reports, present or not, and its mode.
  let seed = 7
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648
  const full = async () => {
    for (const id of ids) await agentState.refreshAgent(id)
  }
  const state = async () => [await query(app, 'SELECT * FROM agents ORDER BY id'), await query(app, 'SELECT * FROM peripherals ORDER BY id')]
  const derived = () => query(app, 'SELECT approved_and_present, approved_and_disconnected, not_approved, severity, display_status FROM agents ORDER BY id')
  let changed = 0
  for (let round = 0; round < 24; round++) {
    const before = await derived()
    const reported = ids.map(() => kinds.filter(() => next() < 0.6).map((p) => ({ ...p, present: next() < 0.7, caption: next() < 0.2 ? `Renamed ${round}` : p.caption })))
    const modes = ids.map(() => (next() < 0.4 ? 'Armed' : 'Free'))
    const body = (i: number, mode: string) => hostState(reported[i], { hostIdentifier: `HOST-${i + 1}`, operationalStatus: mode })
    await Promise.all(await arriving(ids, (i) => body(i, modes[i])))
    // Every other round, the same peripherals again in the other mode: only the mode changes.
    if (round % 2) await Promise.all(await arriving(ids, (i) => body(i, modes[i] === 'Armed' ? 'Free' : 'Armed')))
    const after = await derived()
    if (JSON.stringify(before) !== JSON.stringify(after)) changed++
    const written = await state()
    await full()
    t.same(await state(), written, `round ${round}: a full refresh changes nothing`)
  }
  t.ok(changed >= 12, `the rounds change the agents' counters and statuses (${changed} of 24)`)
})
