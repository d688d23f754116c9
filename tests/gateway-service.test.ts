// The agent gateway service without Fastify's routes: plain context, the ports of a test
// app's database (SQLite or PostgreSQL), its own settings.
import t from 'tap'
import { asyncPort } from '../db/unit-of-work.js'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { agentGateway } from '../lib/gateway/service.js'
import { sweepAgents } from '../lib/gateway/sweeper.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { build, sqliteOnly } from './helpers.js'
import { portsOf, query, queryOne, queryValue } from './seed.js'
import { attackTool, hostState, mouse, stick } from './fixtures/gateway.js'

const SECRET = 'pes_service-test-secret'

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t)
  const ports = portsOf(app)
  const { uow } = app.storage
  let failAudit = false
  const record = async (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    await recordAudit({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }, ctx, entry)
  }
  const errors: object[] = []
  const deps = {
    store: ports.gatewayStore,
    events: ports.eventRecorder,
    agentState: ports.agentState,
    uow,
    audit: { record },
    log: { warn: () => {}, error: (d: object) => void errors.push(d) },
    settings: {
      agents: { enrollmentSecret: SECRET, checkInSeconds: 60, minCheckInSeconds: 5, enrollPerMinutePerAddress: 3, enrollPerMinute: 100, resultBytesPerDay: 1000 },
      license: { accountName: 'Acme', accountId: null, seats: 1, expirationDate: null },
      rateLimitWindowMs: 60_000,
      agentRequests: 1000,
    },
  }
  const gateway = agentGateway(deps)
  const events = () => query<{ code: string; details: string }>(app, 'SELECT event_code AS code, details FROM events ORDER BY id')
  // Only what the service wrote from here on.
  const mark = (await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')) ?? 0
  const auditRows = () => query(app, 'SELECT user_name, source_ip, description, outcome FROM audit_trail WHERE id > ? ORDER BY id', mark)
  // The agent as its credential finds it (as the gateway's authentication does).
  const agentOf = async (uuid: string) => (await app.storage.credentials.agentByCredential(await queryValue<string>(app, 'SELECT credential_hash FROM agents WHERE uuid = ?', uuid)))!
  return { app, deps, gateway, events, auditRows, agentOf, errors, failAudit: (on: boolean) => (failAudit = on) }
}

const agentCtx = (address = '192.0.2.10') => systemContext({ sourceAddress: address, requestId: 'req-gw' })
const enrollBody = (machineId: string, host: string) => ({ enrollmentSecret: SECRET, machineId, hostIdentifier: host })

t.test('enrollment: a wrong secret is refused and audited; the first agent takes the one seat, the next waits', async (t) => {
  const { gateway, auditRows, app } = await setup(t)
  await t.rejects(gateway.enroll(agentCtx(), { ...enrollBody('m-1', 'HOST-1'), enrollmentSecret: 'pes_wrong' }), { status: 401 })
  t.match((await auditRows()).at(-1), { outcome: 'Refused', description: 'Enrollment of "HOST-1" refused: wrong enrollment secret' })
  const first = await gateway.enroll(agentCtx(), enrollBody('m-1', 'HOST-1'))
  const second = await gateway.enroll(agentCtx(), enrollBody('m-2', 'HOST-2'))
  t.match(first, { reEnrolled: false, pendingApproval: false, checkInIntervalSeconds: 60 })
  const status = (uuid: string) => queryValue<string>(app, 'SELECT license_status AS s FROM agents WHERE uuid = ?', uuid)
  t.equal(await status(first.uuid), 'Activated')
  t.equal(await status(second.uuid), 'Pending', 'one seat: the second waits for it')
  t.match((await auditRows()).at(-1), { user_name: `agent:${second.uuid}`, source_ip: '192.0.2.10', description: 'Agent "HOST-2" enrolled' })
})

t.test('a re-enrollment without the current credential is held, and an Administrator decides', async (t) => {
  const { gateway, events, app } = await setup(t)
  const first = await gateway.enroll(agentCtx(), enrollBody('m-1', 'HOST-1'))
  const held = await gateway.enroll(agentCtx('198.51.100.7'), enrollBody('m-1', 'HOST-1'))
  t.match(held, { uuid: first.uuid, pendingApproval: true })
  t.match((await events()).at(-1)!.details, /from 198\.51\.100\.7\) did not present the agent's current credential/)
  const admin = systemContext({ actor: 'alice', profile: 30 })
  const id = (await queryValue<string>(app, 'SELECT id FROM agent_reenrollments')).toUpperCase()
  const decided = await gateway.decideReEnrollment(admin, first.uuid, 'Approve', id)
  t.match(decided, { uuid: first.uuid, decision: 'Approve', reEnrollmentId: id.toLowerCase(), sourceIp: '198.51.100.7' })
  t.match((await events()).at(-1)!.details, /approved by alice/)
  await t.rejects(gateway.decideReEnrollment(admin, first.uuid, 'Reject', id), { status: 404 }, 'nothing is held any more')
})

t.test('check-ins: changes become events and one audit record; an unchanged one is routine; peripherals reconciled in one call', async (t) => {
  const { gateway, events, auditRows, agentOf, app } = await setup(t)
  const { uuid } = await gateway.enroll(agentCtx(), enrollBody('m-1', 'HOST-1'))
  const first = await gateway.checkIn(agentCtx(), await agentOf(uuid), hostState([mouse, stick]))
  t.equal(first.routine, false)
  t.same(first.answer.commands, [])
  const before = (await events()).length
  const again = await gateway.checkIn(agentCtx(), await agentOf(uuid), hostState([mouse, stick]))
  t.equal(again.routine, true, 'the same state again: routine, nothing written')
  t.equal((await events()).length, before)
  // The stick is left out and an attack tool appears.
  await gateway.checkIn(agentCtx(), await agentOf(uuid), hostState([mouse, attackTool]))
  const codes = (await events()).slice(before).map((e) => e.details)
  t.match(codes.join('\n'), /was removed/)
  t.match(codes.join('\n'), /keystroke injection \(example\); agent is Free/, 'the attack tool, named from the catalogue')
  const present = await query<{ device_id: string; present: number }>(app, 'SELECT device_id, present FROM peripherals ORDER BY id')
  t.same(
    present.map((p) => [p.device_id, p.present]),
    [
      [mouse.deviceID, 1],
      [stick.deviceID, 0],
      [attackTool.deviceID, 1],
    ],
  )
  t.match((await auditRows()).at(-1), { user_name: `agent:${uuid}`, description: 'Check-in of "DESKTOP-9LR722S" changed peripherals' })
  await t.rejects(gateway.checkIn(agentCtx(), await agentOf(uuid), hostState([mouse, mouse])), { status: 400 }, 'a device listed twice')
})

t.test('a check-in whose audit record fails is rolled back whole', async (t) => {
  const { gateway, events, agentOf, failAudit, app } = await setup(t)
  const { uuid } = await gateway.enroll(agentCtx(), enrollBody('m-1', 'HOST-1'))
  const before = (await events()).length
  failAudit(true)
  await t.rejects(gateway.checkIn(agentCtx(), await agentOf(uuid), hostState([mouse])), /audit trail is full/)
  t.equal((await events()).length, before, 'no event')
  t.equal(await queryValue(app, 'SELECT count(*) AS n FROM peripherals'), 0, 'no peripheral')
  t.equal((await queryOne(app, 'SELECT last_updated_ms AS t FROM agents WHERE uuid = ?', uuid))!.t, null, 'no state')
})

t.test('limits: enrollments per address, and check-ins closer than the minimum', async (t) => {
  const { gateway } = await setup(t)
  const enrollment = { gatewayLimit: 'enrollment' as const }
  for (let i = 0; i < 3; i++) gateway.admit({ address: '192.0.2.1', bytes: 0 }, enrollment, 1000)
  t.throws(() => gateway.admit({ address: '192.0.2.1', bytes: 0 }, enrollment, 1000), { status: 429 })
  t.doesNotThrow(() => gateway.admit({ address: '192.0.2.2', bytes: 0 }, enrollment, 1000), 'another address has its own')
  const checkIn = { gatewayLimit: 'check-in' as const }
  gateway.admit({ address: '192.0.2.1', agentId: 7, bytes: 0 }, checkIn, 10_000)
  t.throws(() => gateway.admit({ address: '192.0.2.1', agentId: 7, bytes: 0 }, checkIn, 12_000), { status: 429 })
  t.doesNotThrow(() => gateway.admit({ address: '192.0.2.1', agentId: 7, bytes: 0 }, checkIn, 15_000))
  const results = { gatewayLimit: 'result-bytes' as const }
  gateway.admit({ address: '192.0.2.1', agentId: 8, bytes: 900 }, results, 20_000)
  t.throws(() => gateway.admit({ address: '192.0.2.1', agentId: 8, bytes: 200 }, results, 21_000), { status: 429 }, 'the day allows 1000 bytes')
})

t.test('the sweeper disconnects a silent agent and gives the free seat to the one waiting', async (t) => {
  const { gateway, deps, agentOf, app, events } = await setup(t)
  const a = await gateway.enroll(agentCtx(), enrollBody('m-1', 'HOST-1'))
  const b = await gateway.enroll(agentCtx(), enrollBody('m-2', 'HOST-2'))
  await gateway.checkIn(agentCtx(), await agentOf(a.uuid), hostState([mouse]))
  const sweeper = { ...deps, gateway, disconnectSeconds: 180, seats: 2 }
  const swept = await sweepAgents(sweeper, Date.now() + 181_000)
  t.match(swept, { disconnected: 1, activated: 1, more: false })
  t.match((await events()).at(-1)!.details, /has not checked in since/)
  t.equal(await queryValue(app, 'SELECT license_status AS s FROM agents WHERE uuid = ?', b.uuid), 'Activated')
})

t.test('seats are given out within the budget: a call over it stops after one agent and asks for more', async (t) => {
  const { gateway, deps, app } = await setup(t)
  // One seat in use; three agents wait for the seats made free.
  for (let i = 1; i <= 4; i++) await gateway.enroll(agentCtx(), enrollBody(`m-${i}`, `HOST-${i}`))
  const pending = async () => Number(await queryValue(app, "SELECT count(*) AS n FROM agents WHERE license_status = 'Pending'"))
  t.equal(await pending(), 3)
  const sweeper = { ...deps, gateway, disconnectSeconds: 180, seats: 4 }
  // A budget of 0 ms: each call is over it after its first activation.
  const calls = []
  for (let i = 0; i < 5 && (await pending()) > 0; i++) calls.push(await sweepAgents(sweeper, Date.now(), 0))
  t.same(
    calls.map((c) => [c.activated, c.more]),
    [
      [1, true],
      [1, true],
      [1, false],
    ],
    'one agent a call, and more asked for while any waits',
  )
  t.equal(await pending(), 0, 'every seat is given out')
})

t.test(
  'with group commit, check-ins arriving together share one commit, and one that fails is undone alone',
  sqliteOnly("SQLite's group commit (the COMMITs of its one connection counted)"),
  async (t) => {
    const { deps, gateway: enroller, agentOf, app } = await setup(t)
    const { db, repos } = app
    const a = await enroller.enroll(agentCtx(), enrollBody('m-1', 'HOST-1'))
    const b = await enroller.enroll(agentCtx(), enrollBody('m-2', 'HOST-2'))
    const c = await enroller.enroll(agentCtx(), enrollBody('m-3', 'HOST-3'))
    const record = (ctx: Context, entry: AuditEntry) => {
      if (entry.description.includes('"HOST-2"')) throw new Error('the audit trail is full')
      recordAudit({ repo: repos.audit, refusalWindowMs: 60_000, flushRefusal: () => {} }, ctx, entry)
    }
    const commits: string[] = []
    const exec = db.exec.bind(db)
    db.exec = (sql: string) => {
      if (sql === 'COMMIT') commits.push(sql)
      return exec(sql)
    }
    const gateway = agentGateway({ ...deps, audit: asyncPort({ record }, deps.uow), checkIns: { run: deps.uow.runGrouped } })
    // A turn of the loop of their own: the enrollments' units spent some of this one's 20 ms.
    await new Promise((resolve) => setTimeout(resolve, 2))
    const results = await Promise.allSettled([a, b, c].map(async (x, i) => gateway.checkIn(agentCtx(), await agentOf(x.uuid), hostState([mouse], { hostIdentifier: `HOST-${i + 1}` }))))
    t.same(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    )
    t.equal(commits.length, 1, 'one commit for the three')
    const state = (uuid: string) =>
      db.prepare('SELECT last_updated_ms AS t, (SELECT count(*) FROM peripherals p WHERE p.agent_uuid = agents.uuid) AS n FROM agents WHERE uuid = ?').get(uuid) as { t: number | null; n: number }
    t.ok(state(a.uuid).t !== null && state(a.uuid).n === 1, 'the first is stored')
    t.same(state(b.uuid), { t: null, n: 0 }, 'the failing one left nothing')
    t.ok(state(c.uuid).t !== null && state(c.uuid).n === 1, 'the third is stored')
    const sources = db.prepare(`SELECT DISTINCT asset_name FROM events WHERE event_code = '0x110001' ORDER BY asset_name`).pluck().all()
    t.same(sources, ['HOST-1', 'HOST-3'], 'the events of the stored ones only')
  },
)
