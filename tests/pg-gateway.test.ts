// The agent gateway's storage on PostgreSQL (db/postgres/gateway.ts, agent-state.ts) against
// SQLite's (db/gateway.ts, agent-state.ts): the gateway service and its sweeper run the same
// enrollments, check-ins, command results, re-enrollments and sweeps on both, under one
// clock and one sequence of UUIDs, and answer alike, raise the same events and leave the
// same rows. Then what only PostgreSQL has: concurrent check-ins and enrollments.
import crypto from 'node:crypto'
import t from 'tap'
import { agentStateRepo } from '../db/agent-state.js'
import { CheckInTimeWrites } from '../db/answer-cache.js'
import { commandsRepo } from '../db/commands.js'
import { gatewayRepo, internPeripheralTexts } from '../db/gateway.js'
import type { DB } from '../db/index.js'
import { pgAgentStateRepo } from '../db/postgres/agent-state.js'
import { pgCommandsRepo } from '../db/postgres/commands.js'
import { pgGatewayRepo, pgInternPeripheralTexts } from '../db/postgres/gateway.js'
import type { Postgres } from '../db/postgres/index.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { agentGateway } from '../lib/gateway/service.js'
import { sweepAgents } from '../lib/gateway/sweeper.js'
import type { GatewayStore } from '../lib/gateway/ports.js'
import { systemContext } from '../lib/platform/context.js'
import type { UnitOfWork } from '../lib/platform/ports.js'
import { attackTool, hostState, mouse, stick } from './fixtures/gateway.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const SECRET = 'pes_pg-gateway-secret'
const SEATS = 2
const START = 1_800_000_000_000

// One clock for both backends, moved by the test; UUIDs counted per backend.
let clock = START
const realNow = Date.now
const realUuid = crypto.randomUUID
let uuids = { n: 0 }
Date.now = () => clock
crypto.randomUUID = () => `00000000-0000-4000-8000-${(++uuids.n).toString(16).padStart(12, '0')}` as ReturnType<typeof crypto.randomUUID>
t.teardown(() => {
  Date.now = realNow
  crypto.randomUUID = realUuid
})

type Row = Record<string, unknown>

interface Side {
  name: string
  store: GatewayStore & { byCredential(hash: string): Promise<import('../lib/gateway/ports.js').GatewayAgent | undefined> }
  commands: { queue(agentId: number, type: 'SetMode' | 'UpdatePolicy' | 'UpdateAgent' | 'FetchDebugLogs', parameters: Record<string, unknown>, now: number, by: string): Promise<number> }
  agentState: ReturnType<typeof asyncPort<ReturnType<typeof agentStateRepo>>>
  uow: UnitOfWork
  gateway: ReturnType<typeof agentGateway>
  sweep(now: number): Promise<unknown>
  events: unknown[]
  audits: unknown[]
  uuids: { n: number }
  /** Rows of a query written with $n parameters. */
  rows(sql: string, params?: unknown[]): Promise<Row[]>
  exec(sql: string, params?: unknown[]): Promise<void>
}

function sideOf(name: string, parts: Omit<Side, 'name' | 'gateway' | 'sweep' | 'events' | 'audits' | 'uuids'>): Side {
  const events: unknown[] = []
  const audits: unknown[] = []
  const recorder = {
    record: async (createdMs: number, list: unknown[], agentId?: number) => void events.push({ createdMs, list, agentId }),
    recordMany: async (items: unknown[]) => void events.push({ many: items }),
  }
  const gateway = agentGateway({
    store: parts.store,
    events: recorder as never,
    agentState: parts.agentState,
    uow: parts.uow,
    batchCheckIns: true,
    audit: { record: async (_ctx, entry) => void audits.push(entry) },
    log: { warn: () => {}, error: () => {} },
    settings: {
      agents: { enrollmentSecret: SECRET, checkInSeconds: 60, minCheckInSeconds: 0, enrollPerMinutePerAddress: 1000, enrollPerMinute: 1000, resultBytesPerDay: 100_000 },
      license: { accountName: 'Acme', accountId: null, seats: SEATS, expirationDate: null },
      rateLimitWindowMs: 60_000,
      agentRequests: 100_000,
    },
  })
  const sweep = (now: number) =>
    sweepAgents(
      { store: parts.store, events: recorder as never, agentState: parts.agentState, uow: parts.uow, log: { warn: () => {}, error: () => {} }, gateway, disconnectSeconds: 300, seats: SEATS },
      now,
      1000,
    )
  return { name, ...parts, gateway, sweep, events, audits, uuids: { n: 0 } }
}

function sqliteSide(db: DB): Side {
  const uow = sqliteUnitOfWork(db)
  const positional = (sql: string) => sql.replace(/\$\d+/g, '?')
  return sideOf('sqlite', {
    store: asyncPort(gatewayRepo(db, new CheckInTimeWrites()), uow),
    commands: asyncPort(commandsRepo(db), uow),
    agentState: asyncPort(agentStateRepo(db), uow),
    uow,
    rows: async (sql, params = []) => db.prepare(positional(sql)).all(...params) as Row[],
    exec: async (sql, params = []) => void db.prepare(positional(sql)).run(...params),
  })
}

function pgSide(pg: Postgres): Side {
  return sideOf('postgres', {
    store: pgGatewayRepo(pg, { seats: SEATS }),
    commands: pgCommandsRepo(pg),
    agentState: pgAgentStateRepo(pg),
    uow: pg.uow,
    rows: (sql, params = []) => pg.query(sql, params),
    exec: async (sql, params = []) => void (await pg.run(sql, params)),
  })
}

/** Runs `fn` on one side with its own UUIDs. */
async function on<T>(side: Side, fn: (s: Side) => Promise<T>): Promise<T> {
  uuids = side.uuids
  return fn(side)
}

/** What differs by design: credentials are random, revs are drawn differently (compared apart). */
function normal(rows: Row[]): Row[] {
  return rows.map((r) => {
    const out = { ...r }
    if ('credential_hash' in out) out.credential_hash = out.credential_hash === null ? null : 'set'
    delete out.rev
    return out
  })
}

const TABLES: Record<string, string> = {
  agents: 'SELECT * FROM agents ORDER BY id',
  // Texts by value: PostgreSQL interns a statement's new ones in (kind, text) order (no
  // deadlock between two check-ins inserting the same ones), SQLite in the report's.
  peripherals: `SELECT p.*, v.text AS vendor_text_id, t.text AS product_text_id FROM peripherals p
    LEFT JOIN peripheral_texts v ON v.id = p.vendor_text_id LEFT JOIN peripheral_texts t ON t.id = p.product_text_id ORDER BY p.id`,
  peripheral_texts: 'SELECT kind, text FROM peripheral_texts ORDER BY kind, text',
  agent_commands: 'SELECT * FROM agent_commands ORDER BY id',
  agent_debug_logs: 'SELECT * FROM agent_debug_logs ORDER BY id',
  agent_errors: 'SELECT * FROM agent_errors ORDER BY id',
  agent_reenrollments: 'SELECT * FROM agent_reenrollments ORDER BY agent_id',
  approvals: 'SELECT * FROM approvals ORDER BY agent_id, vid, pid',
}

async function sameRows(t: Tap.Test, a: Side, b: Side, step: string) {
  for (const [table, sql] of Object.entries(TABLES)) t.same(normal(await b.rows(sql)), normal(await a.rows(sql)), `${step}: ${table}`)
}

/** Which agents' revs moved since `before` (ids), on one side. */
async function revs(s: Side): Promise<Map<number, number>> {
  return new Map((await s.rows('SELECT id, rev FROM agents ORDER BY id')).map((r) => [r.id as number, r.rev as number]))
}
const movedRevs = (before: Map<number, number>, after: Map<number, number>) => [...after].filter(([id, rev]) => before.get(id) !== rev).map(([id]) => id)

const ctx = (address = '192.0.2.10') => systemContext({ sourceAddress: address, requestId: 'req-pg' })
const enrollBody = (machineId: string, host: string, currentCredential?: string) => ({ enrollmentSecret: SECRET, machineId, hostIdentifier: host, currentCredential })

/** An answer less what is random on each side (credentials). */
function answerOf(x: unknown): unknown {
  if (x === null || typeof x !== 'object') return x
  if (Array.isArray(x)) return x.map(answerOf)
  const out: Row = {}
  for (const [k, v] of Object.entries(x)) out[k] = k === 'credential' || k === 'credential_hash' ? typeof v : answerOf(v)
  return out
}

t.test('the gateway on both backends: same answers, events and rows', { skip: noPostgres }, async (t) => {
  const sqlite = sqliteSide(tempDb(t).db)
  const pg = pgSide(await pgTestDatabase(t))
  const sides = [sqlite, pg]
  const credentials = new Map<Side, Map<string, string>>(sides.map((s) => [s, new Map()]))
  const agentOf = async (s: Side, machine: string) => (await s.store.byCredential(sha(credentials.get(s)!.get(machine)!)))!
  const sha = (c: string) => crypto.createHash('sha256').update(c).digest('base64url')

  /** The same step on each side: answers, events, audit records and rows compared. */
  async function both<T>(step: string, fn: (s: Side) => Promise<T>, compareRows = true): Promise<T[]> {
    const answers: T[] = []
    const marks = sides.map((s) => [s.events.length, s.audits.length])
    for (const s of sides) answers.push(await on(s, fn))
    t.same(answerOf(answers[1]), answerOf(answers[0]), `${step}: answers`)
    t.same(pg.events.slice(marks[1][0]), sqlite.events.slice(marks[0][0]), `${step}: events`)
    t.same(pg.audits.slice(marks[1][1]), sqlite.audits.slice(marks[0][1]), `${step}: audit records`)
    if (compareRows) await sameRows(t, sqlite, pg, step)
    return answers
  }

  /** Check-ins of several agents in the same turn: one batch on both sides. */
  const batch = async (s: Side, items: [string, object][]) => {
    const agents = await Promise.all(items.map(([m]) => agentOf(s, m)))
    return Promise.all(items.map(([, body], i) => s.gateway.checkIn(ctx(), agents[i], body as never)))
  }

  const enroll = (machine: string, host: string) =>
    both(`enroll ${machine}`, async (s) => {
      const a = await s.gateway.enroll(ctx(), enrollBody(machine, host))
      credentials.get(s)!.set(machine, a.credential)
      return a
    })
  await enroll('m-1', 'HOST-1')
  await enroll('m-2', 'HOST-2')
  await enroll('m-3', 'HOST-3')
  t.same(
    (await pg.rows('SELECT license_status FROM agents ORDER BY id')).map((r) => r.license_status),
    ['Activated', 'Activated', 'Pending'],
    'two seats: the third waits',
  )

  await both('byCredential, byMachineId, agentByUuid, unknown ones', async (s) => [
    // Without whether commands wait, which PostgreSQL reads with the agent (SQLite asks apart).
    (({ has_pending: _, ...a }) => a)(await agentOf(s, 'm-1')),
    await s.store.byCredential('nope'),
    await s.store.byMachineId('m-2'),
    await s.store.byMachineId('m-9'),
    await s.store.agentByUuid('00000000-0000-4000-8000-000000000001'.toUpperCase()),
    await s.store.agentByUuid('nope'),
    await s.store.activatedCount(),
  ])

  clock += 1000
  await both('first check-ins, three agents in one batch', async (s) =>
    batch(s, [
      ['m-1', hostState([mouse, stick])],
      ['m-2', hostState([attackTool], { hostIdentifier: 'HOST-2', operationalStatus: 'Armed' })],
      ['m-3', hostState([], { hostIdentifier: 'HOST-3' })],
    ]),
  )
  const revsAfterFirst = await Promise.all(sides.map(revs))

  clock += 60_000
  await both('the same state again: routine, a heartbeat', async (s) => {
    const a = await s.gateway.checkIn(ctx(), await agentOf(s, 'm-1'), hostState([mouse, stick]) as never)
    await s.gateway.flushHeartbeats()
    return a
  })
  const revsAfterHeartbeat = await Promise.all(sides.map(revs))
  t.same(movedRevs(revsAfterFirst[1], revsAfterHeartbeat[1]), [], 'a check-in time alone moves no rev')

  clock += 60_000
  const changedStick = { ...stick, description: 'USB Mass Storage (renamed)' }
  const keyboard = { ...mouse, deviceID: 'USB\\VID_046D&PID_C31C\\6&1', pid: 'c31c', caption: 'USB Keyboard', serialNumber: '6&1' }
  await both('peripherals added, rewritten, left out and gone; an address moved', async (s) =>
    batch(s, [
      ['m-1', hostState([changedStick, keyboard], { localIpAddress: '192.168.100.129' })],
      ['m-2', hostState([{ ...attackTool, present: false }], { hostIdentifier: 'HOST-2', operationalStatus: 'Armed' })],
    ]),
  )
  const revsAfterChange = await Promise.all(sides.map(revs))
  t.same(movedRevs(revsAfterHeartbeat[1], revsAfterChange[1]), movedRevs(revsAfterHeartbeat[0], revsAfterChange[0]), 'the same agents took a new rev')

  clock += 60_000
  await both('present again, and an error reported', async (s) =>
    batch(s, [
      ['m-1', hostState([changedStick, keyboard, mouse], { localIpAddress: '192.168.100.129' })],
      ['m-2', hostState([attackTool], { hostIdentifier: 'HOST-2', operationalStatus: 'Armed', errors: [{ time: new Date(clock).toISOString(), code: 'E1', message: 'driver hiccup' }] })],
    ]),
  )
  await both('presentPeripherals, presentPeripheralsOf, knownPeripheralsOf, agents', async (s) => {
    const [a1, a2, a3] = [await agentOf(s, 'm-1'), await agentOf(s, 'm-2'), await agentOf(s, 'm-3')]
    const known = await s.store.knownPeripheralsOf([a1.id, a2.id, a3.id, 999])
    return {
      present: await s.store.presentPeripherals(a2.id),
      presentOf: [...(await s.store.presentPeripheralsOf([a1.id, a2.id, 999]))],
      // The stored columns (SQLite reads them through a signature).
      known: [...known].map(([id, list]) => [id, list.map((p) => ({ id: p.id, device_id: p.device_id, present: p.present, vid: p.vid, description: p.description, is_disabled: p.is_disabled }))]),
      agents: (await s.store.agents([a3.id, a1.id])).sort((x, y) => x.id - y.id).map((r) => ({ ...r, rev: 0, credential_hash: 'set' })),
    }
  })

  // Commands: a SetMode queued, delivered at the next check-in, its result reported.
  clock += 60_000
  await both('a SetMode queued and delivered', async (s) => {
    const before = await agentOf(s, 'm-1')
    const id = await s.commands.queue(before.id, 'SetMode', { mode: 'Armed' }, clock, 'alice')
    const log = await s.commands.queue(before.id, 'FetchDebugLogs', {}, clock, 'alice')
    await s.uow.run(() => s.agentState.refreshStatus(before.id))
    const pending = [await s.store.hasPendingCommands(before.id), await s.store.withPendingCommands([before.id, 999])]
    // Read again as the check-in's own request reads it (with whether commands wait, on PostgreSQL).
    const a1 = await agentOf(s, 'm-1')
    const answer = await s.gateway.checkIn(ctx(), a1, hostState([changedStick, keyboard, mouse], { localIpAddress: '192.168.100.129' }) as never)
    return { id, log, pending, answer, command: await s.store.command(id), missing: await s.store.command(999) }
  })
  clock += 5000
  await both('results: the mode taken, the logs kept, an unknown command refused', async (s) => {
    const a1 = await agentOf(s, 'm-1')
    const results = await s.gateway.reportResults(ctx(), a1.id, {
      results: [
        { commandId: 1, status: 'Succeeded' },
        { commandId: 2, status: 'Succeeded', output: 'log line' },
        { commandId: 77, status: 'Succeeded' },
      ],
    } as never)
    return { results, requested: await s.store.modeRequestedBy(a1.id, 'Armed'), nobody: await s.store.modeRequestedBy(a1.id, 'Free') }
  })
  clock += 1000
  await both('debug logs: the latest five kept', async (s) => {
    const a1 = await agentOf(s, 'm-1')
    for (let i = 0; i < 7; i++) await s.store.addDebugLog(a1.id, 2, clock + i, `log ${i}`, 5)
    return null
  })

  // An UpdatePolicy delivered and never answered times out in the sweep; the quiet ones disconnect.
  await both('an UpdatePolicy delivered', async (s) => {
    const before = await agentOf(s, 'm-2')
    await s.commands.queue(before.id, 'UpdatePolicy', {}, clock, 'bob')
    await s.uow.run(() => s.agentState.refreshStatus(before.id))
    // The agent as the check-in's own request reads it, after the command.
    return s.gateway.checkIn(ctx(), await agentOf(s, 'm-2'), hostState([attackTool], { hostIdentifier: 'HOST-2', operationalStatus: 'Armed' }) as never)
  })
  clock += 16 * 60_000
  await both('sweeper reads', async (s) => [await s.store.staleAgents(clock - 300_000, 10), await s.store.overdueCommands(clock - 15 * 60_000, 10), await s.store.lastAgentId()])
  await both('the sweep: disconnects, a timed-out command', (s) => s.sweep(clock))
  await both('nothing left to sweep', (s) => s.sweep(clock))
  await both('disconnect and disconnectMany of agents no longer quiet', async (s) => [
    await s.store.disconnect(1, clock),
    await s.store.disconnectMany([3, 2, 1], clock, 'gone'),
    await s.store.disconnectMany([], clock, 'gone'),
  ])

  // Back: a reconnect. The license seats: the agent that waited takes one freed by... none (expired keep theirs).
  clock += 1000
  await both('reconnected', async (s) => s.gateway.checkIn(ctx(), await agentOf(s, 'm-3'), hostState([stick], { hostIdentifier: 'HOST-3' }) as never))

  await both('a mass disconnect pass: disconnectRange in id order, a batch at a time', async (s) => {
    await s.exec(`UPDATE agents SET connection_status = 'Connected', last_updated_ms = $1 WHERE id IN (1, 2)`, [clock - 1000])
    const quietSince = clock + 1
    return [
      await s.store.staleAgents(quietSince, 10),
      await s.store.disconnectRange(0, 3, quietSince, 1, 'first batch'),
      await s.store.disconnectRange(1, 3, quietSince, 5, 'second batch'),
      await s.store.disconnectRange(0, 3, quietSince, 5, 'none left'),
    ]
  })
  await both('reconnected again', async (s) =>
    batch(s, [
      ['m-1', hostState([changedStick, keyboard, mouse], { localIpAddress: '192.168.100.129' })],
      ['m-2', hostState([attackTool], { hostIdentifier: 'HOST-2', operationalStatus: 'Armed' })],
      ['m-3', hostState([stick], { hostIdentifier: 'HOST-3' })],
    ]),
  )

  // Re-enrollments: held without proof, replaced by a later one, decided on the one held.
  clock += 1000
  await both('a re-enrollment without proof is held', async (s) => {
    const a = await s.gateway.enroll(ctx('198.51.100.7'), enrollBody('m-1', 'HOST-1b'))
    credentials.get(s)!.set('m-1 held', a.credential)
    return [a, await s.store.heldReEnrollment(1), await s.store.heldReEnrollmentByCredential(sha(a.credential))]
  })
  clock += 1000
  await both('a later one replaces it', async (s) => {
    const a = await s.gateway.enroll(ctx('198.51.100.8'), enrollBody('m-1', 'HOST-1c'))
    credentials.get(s)!.set('m-1 held', a.credential)
    return a
  })
  await both('deciding on the replaced one is refused; on the held one, approved', async (s) => {
    const admin = systemContext({ actor: 'alice', profile: 30 })
    const held = (await s.store.heldReEnrollment(1))!
    const refused = await s.gateway.decideReEnrollment(admin, '00000000-0000-4000-8000-000000000001', 'Approve', '00000000-0000-4000-8000-00000000000a').catch((e) => e.status)
    const decided = await s.gateway.decideReEnrollment(admin, '00000000-0000-4000-8000-000000000001', 'Approve', held.id)
    credentials.get(s)!.set('m-1', credentials.get(s)!.get('m-1 held')!)
    return [refused, decided, await s.store.heldReEnrollment(1), await s.store.dropReEnrollment(1).then((r) => r.changes)]
  })
  await both('a re-enrollment with the current credential rotates it', async (s) => {
    const a = await s.gateway.enroll(ctx(), enrollBody('m-2', 'HOST-2', credentials.get(s)!.get('m-2')))
    credentials.get(s)!.set('m-2', a.credential)
    return a
  })

  // Seats: an expired license keeps its seat; a freed one (the agent deleted) goes to the waiting agent.
  await both('licenses expire; seats', async (s) => {
    await s.exec('UPDATE agents SET expiration_ms = $1 WHERE id = 2', [clock - 1])
    const expired = await s.store.expireLicenses(clock)
    const waiting = await s.store.waitingForSeat(10)
    await s.exec('DELETE FROM agents WHERE id = 2')
    const swept = await s.sweep(clock + 10_000)
    return { expired, waiting, swept, after: await s.store.waitingForSeat(10), activated: await s.store.activatedCount() }
  })
})

t.test('a check-in of 2048+ peripherals keeps the latest absent ones', { skip: noPostgres }, async (t) => {
  const sqlite = sqliteSide(tempDb(t).db)
  const pg = pgSide(await pgTestDatabase(t))
  for (const s of [sqlite, pg]) {
    await s.exec(`INSERT INTO agents (uuid, machine_id, enrolled_ms, host_identifier, connection_status) VALUES ('a1', 'm1', 1, 'H', 'Connected')`)
  }
  const device = (i: number, present: number) => ({
    deviceId: `D${i}`,
    vid: '1234',
    pid: (i % 7).toString(16).padStart(4, '0'),
    serialNumber: null,
    description: `d${i % 5}`,
    status: 'OK',
    manufacturer: i % 2 ? 'Acme' : null,
    caption: null,
    guiVid: null,
    guiPid: null,
    guiSerial: null,
    devIcon: 0,
    classCode: null,
    subclassCode: null,
    protocolCode: null,
    hierarchy: null,
    parentDeviceId: null,
    isDisabled: 0,
    present,
  })
  const answers: unknown[] = []
  for (const s of [sqlite, pg]) {
    const first = await s.store.applyPeripheralsMany(
      [{ agentId: 1, agentUuid: 'a1', changes: { reported: Array.from({ length: 10 }, (_, i) => ({ id: null, values: device(i, i % 2) })), absent: [] }, now: 100, previousMs: 50 }],
      12,
    )
    const second = await s.store.applyPeripheralsMany(
      [{ agentId: 1, agentUuid: 'a1', changes: { reported: Array.from({ length: 5 }, (_, i) => ({ id: null, values: device(100 + i, 1) })), absent: [1, 3] }, now: 200, previousMs: 100 }],
      12,
    )
    const none = await s.store.applyPeripheralsMany([], 12)
    answers.push([first, second, none])
  }
  t.same(answers[1], answers[0], 'the same written, moved and agents')
  t.same(normal(await pg.rows(TABLES.peripherals)), normal(await sqlite.rows(TABLES.peripherals)), 'the same peripherals kept')
  t.same(await pg.rows(TABLES.peripheral_texts), await sqlite.rows(TABLES.peripheral_texts), 'texts interned once each')
})

t.test('PostgreSQL: concurrent check-ins land consistently', { skip: noPostgres }, async (t) => {
  const db = await pgTestDatabase(t, 12)
  const pg = pgSide(db)
  const credentials: string[] = []
  uuids = pg.uuids
  for (let i = 0; i < 20; i++) credentials.push((await pg.gateway.enroll(ctx(), enrollBody(`c-${i}`, `HOST-${i}`))).credential)
  const agent = async (i: number) => (await pg.store.byCredential(crypto.createHash('sha256').update(credentials[i]).digest('base64url')))!
  const peripheralsOf = (i: number) => [
    { ...mouse, deviceID: `${mouse.deviceID}-${i}` },
    { ...stick, deviceID: `shared-${i % 3}`, manufacturer: `Vendor ${i % 4}` },
  ]
  clock += 1000
  // Each check-in in a unit of its own (no batching), all at once.
  const alone = agentGateway({
    ...({} as never),
    store: pg.store,
    events: { record: async () => {}, recordMany: async () => {} },
    agentState: pg.agentState,
    uow: pg.uow,
    audit: { record: async () => {} },
    log: { warn: () => {}, error: () => {} },
    settings: {
      agents: { enrollmentSecret: SECRET, checkInSeconds: 60, minCheckInSeconds: 0, enrollPerMinutePerAddress: 1000, enrollPerMinute: 1000, resultBytesPerDay: 1000 },
      license: { accountName: 'Acme', accountId: null, seats: SEATS, expirationDate: null },
      rateLimitWindowMs: 60_000,
      agentRequests: 100_000,
    },
  })
  const agents = await Promise.all(Array.from({ length: 20 }, (_, i) => agent(i)))
  await Promise.all(agents.map((a, i) => alone.checkIn(ctx(), a, hostState(peripheralsOf(i), { hostIdentifier: `HOST-${i}` }) as never)))
  t.equal(await db.value('SELECT count(*) FROM peripherals'), 40, 'twenty agents: two peripherals each')
  t.equal(await db.value(`SELECT count(*) FROM agents WHERE connection_status = 'Connected' AND not_approved = 2 AND has_unapproved = 1`), 20, 'each agent counted')
  t.same(
    await db.query('SELECT kind, count(*) AS n FROM peripheral_texts GROUP BY kind ORDER BY kind'),
    [
      { kind: 'product', n: 2 },
      { kind: 'vendor', n: 5 },
    ],
    'texts interned once each, whoever inserted them first',
  )
  t.equal(await db.value('SELECT count(*) FROM peripherals WHERE vendor_text_id IS NULL OR product_text_id IS NULL'), 0, 'every peripheral has its texts')

  // Five check-ins of one agent at once, each with a new peripheral and one left out.
  clock += 1000
  const one = agents[0]
  const bodies = Array.from({ length: 5 }, (_, k) =>
    hostState(
      [
        { ...mouse, deviceID: `${mouse.deviceID}-0` },
        { ...stick, deviceID: `burst-${k}` },
      ],
      { hostIdentifier: 'HOST-0' },
    ),
  )
  const answers = await Promise.allSettled(bodies.map((b) => alone.checkIn(ctx(), one, b as never)))
  t.same(
    answers.map((a) => a.status),
    ['fulfilled', 'fulfilled', 'fulfilled', 'fulfilled', 'fulfilled'],
    'every one answered',
  )
  const rows = await db.query<{ device_id: string; present: number }>(`SELECT device_id, present FROM peripherals WHERE agent_id = $1 ORDER BY device_id`, [one.id])
  t.equal(rows.filter((r) => r.device_id === `${mouse.deviceID}-0`).length, 1, 'the device every one listed: one row')
  t.equal(rows.filter((r) => r.present).length, 2, 'as one of them left it: the mouse and its burst device present')
  const counters = await db.one('SELECT not_approved, approved_and_present, has_unapproved FROM agents WHERE id = $1', [one.id])
  t.same(counters, { not_approved: 2, approved_and_present: 0, has_unapproved: 1 }, 'its counters follow its rows')

  // Concurrent deliveries to one agent: each command handed over once.
  for (let i = 0; i < 5; i++) await pg.commands.queue(one.id, 'UpdateAgent', { n: i }, clock, 'alice')
  const deliveries = await Promise.all([1, 2, 3, 4].map(() => db.uow.run(() => pg.store.deliverPending(one.id, 2, clock))))
  const handed = deliveries.flatMap((d) => d.commands.map((c) => c.id)).sort((a, b) => a - b)
  t.same(handed, [...new Set(handed)], 'no command delivered twice')
  t.equal(await db.value(`SELECT count(*) FROM agent_commands WHERE agent_id = $1 AND status = 'Delivered'`, [one.id]), handed.length, 'the ones answered are the ones delivered')
  t.ok(handed.length >= 2, 'at least one delivery took its batch')
})

t.test('PostgreSQL: seats are never over-allocated by concurrent enrollments and sweeps', { skip: noPostgres }, async (t) => {
  const db = await pgTestDatabase(t, 12)
  const pg = pgSide(db)
  uuids = pg.uuids
  const enrolled = await Promise.all(Array.from({ length: 12 }, (_, i) => pg.gateway.enroll(ctx(), enrollBody(`s-${i}`, `SEAT-${i}`))))
  t.equal(enrolled.length, 12)
  t.equal(await db.value(`SELECT count(*) FROM agents WHERE license_status = 'Activated'`), SEATS, 'as many activated as there are seats')
  // A seat freed: two sweepers and an enrollment race for it.
  await db.run(`DELETE FROM agents WHERE id = (SELECT min(id) FROM agents WHERE license_status = 'Activated')`)
  const other = pgGatewayRepo(db, { seats: SEATS })
  await Promise.all([
    pg.sweep(clock),
    db.uow.run(async () => {
      for (const id of await other.waitingForSeat(5)) await other.activate(id)
    }),
    pg.gateway.enroll(ctx(), enrollBody('s-late', 'SEAT-late')),
  ])
  t.equal(await db.value(`SELECT count(*) FROM agents WHERE license_status = 'Activated'`), SEATS, 'still as many as there are seats')
  await db.run(`UPDATE agents SET license_status = 'Expired' WHERE id = (SELECT min(id) FROM agents WHERE license_status = 'Activated')`)
  await db.run(`DELETE FROM agents WHERE id = (SELECT max(id) FROM agents WHERE license_status = 'Pending')`)
  t.equal(await db.value('SELECT activated FROM license_seats'), await db.value(`SELECT count(*) FROM agents WHERE license_status = 'Activated'`), 'the seats counted as the agents are')
})

/** 256 characters of four bytes each, hardly compressible. */
const wide = (seed: number) => Array.from({ length: 256 }, (_, i) => String.fromCodePoint(0x1f300 + (((i + seed * 256) * 7919) % 1500))).join('')

t.test('interning texts: the same texts as SQLite, once each however many intern them at once', { skip: noPostgres }, async (t) => {
  const { db } = tempDb(t)
  const pg = await pgTestDatabase(t, 6)
  const items = [
    { guiVid: 'Logitech', manufacturer: 'Logitech, Inc.', guiPid: 'Mouse', description: null, caption: 'USB Mouse' },
    { guiVid: null, manufacturer: null, guiPid: null, description: null, caption: null },
    { guiVid: 'Logitech', manufacturer: 'Logitech, Inc.', guiPid: 'Keyboard', description: 'HID', caption: null },
    // Longer than a b-tree entry holds (the texts are unique by their digest).
    { guiVid: null, manufacturer: null, guiPid: wide(0), description: wide(1), caption: wide(2) },
  ]
  const sqliteIntern = internPeripheralTexts(db)
  const text = (id: number | null, rows: Row[]) => (id === null ? null : rows.find((r) => r.id === id)!.text)
  const sqliteIds = items.map((i) => sqliteIntern(i))
  const sqliteTexts = db.prepare('SELECT id, text FROM peripheral_texts').all() as Row[]
  const intern = pgInternPeripheralTexts(pg)
  const answers = await Promise.all([1, 2, 3, 4, 5].map(() => intern(items)))
  const pgTexts = await pg.query('SELECT id, text FROM peripheral_texts')
  t.equal(pgTexts.length, sqliteTexts.length, 'each text once')
  for (const a of answers) {
    t.same(
      a.map((x) => [text(x.vendorTextId, pgTexts), text(x.productTextId, pgTexts)]),
      sqliteIds.map((x) => [text(x.vendorTextId, sqliteTexts), text(x.productTextId, sqliteTexts)]),
      'the same texts for the same peripherals',
    )
  }
  t.same(await intern([]), [])
})
