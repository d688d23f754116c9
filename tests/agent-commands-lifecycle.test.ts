// Pins a command's life through the gateway: Pending, Delivered at a check-in, then
// Succeeded or Failed on the agent's report (or for lack of one), with its effects; and
// the sweeper that disconnects quiet agents.
import crypto from 'node:crypto'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build } from './helpers.js'
import { latestAudit, query, queryColumn, queryOne, queryValue } from './seed.js'
import { addCommand } from './fixtures/fleet.js'
import { sweepAgents as sweep, DELIVERY_TIMEOUT_MS } from '../lib/gateway/sweeper.js'
import { sweeperDeps } from '../lib/gateway/index.js'

const SECRET = 'pes_lifecycle-test-enrollment-secret'
const env = { PRIME_AGENT_ENROLLMENT_SECRET: SECRET, PRIME_AGENT_MIN_CHECKIN_SECONDS: '0' }
const RESULTS = '/prime/webui/gateway/commandresults'

const mouse = {
  deviceID: 'USB\\VID_046D&PID_C077\\5&20DBD6CE&0&4',
  vid: '046D',
  pid: 'C077',
  serialNumber: '5&20DBD6CE&0&4',
  description: 'USB Input Device',
  manufacturer: 'Logitech',
  caption: 'USB Optical Mouse',
  classCode: '03',
  subclassCode: '01',
  protocolCode: '02',
  present: true,
}

const state = (operationalStatus = 'Free', peripherals: object[] = [mouse]) => ({
  hostIdentifier: 'HOST-1',
  operationalStatus,
  localIpAddress: '10.0.0.5',
  serviceVersion: '4.2.1.118',
  peripherals,
})

interface Agent {
  uuid: string
  credential: string
  id: number
}

async function enroll(app: FastifyInstance, host = 'HOST-1'): Promise<Agent> {
  const res = await app.inject({ method: 'POST', url: '/prime/webui/gateway/enroll', payload: { enrollmentSecret: SECRET, machineId: crypto.randomUUID(), hostIdentifier: host } })
  if (res.statusCode !== 200) throw new Error(`enroll: ${res.statusCode} ${res.body}`)
  const { uuid, credential } = res.json()
  return { uuid, credential, id: await queryValue<number>(app, 'SELECT id FROM agents WHERE uuid = ?', uuid) }
}

const checkIn = (app: FastifyInstance, agent: Agent, body: object = state()) =>
  app.inject({ method: 'POST', url: '/prime/webui/gateway/checkin', headers: { authorization: `Bearer ${agent.credential}` }, payload: body })

const report = (app: FastifyInstance, agent: Agent, results: object[]) => app.inject({ method: 'POST', url: RESULTS, headers: { authorization: `Bearer ${agent.credential}` }, payload: { results } })

/** Queues a command the way the operators' side does: a row, then the agent's flags. */
async function queue(app: FastifyInstance, agent: Agent, type: string, parameters: object = {}, status = 'Pending', createdMs = Date.now()): Promise<number> {
  return (await addCommand(app, agent.id, { type: type as never, parameters: JSON.stringify(parameters), status: status as never, created_ms: createdMs, created_by: 'admin' })).id
}

const command = async (app: FastifyInstance, id: number) => (await queryOne(app, 'SELECT * FROM agent_commands WHERE id = ?', id)) as Record<string, any>
const agentRow = async (app: FastifyInstance, agent: Agent) => (await queryOne(app, 'SELECT * FROM agents WHERE id = ?', agent.id)) as Record<string, any>
const lastEvent = async (app: FastifyInstance) => queryValue<number>(app, 'SELECT coalesce(max(id), 0) AS id FROM events')
const eventsSince = async (app: FastifyInstance, id: number) => (await query(app, 'SELECT * FROM events WHERE id > ? ORDER BY id', id)) as Record<string, any>[]

t.test('SetMode: delivered at a check-in, applied when the agent reports success', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  t.equal((await checkIn(app, agent)).statusCode, 200)
  const id = await queue(app, agent, 'SetMode', { mode: 'Armed' })
  t.equal((await agentRow(app, agent)).display_status, 'Arming')
  t.equal((await agentRow(app, agent)).in_action, 1)

  // Unchanged state: the quick path still hands the command over.
  let res = await checkIn(app, agent)
  t.equal(res.statusCode, 200, res.body)
  const [delivered] = res.json().commands
  t.same(
    { ...delivered, creationTime: undefined, creationTimeEpoch: undefined },
    { commandId: id, type: 'SetMode', parameters: { mode: 'Armed' }, creationTime: undefined, creationTimeEpoch: undefined },
  )
  t.equal(delivered.creationTimeEpoch, (await command(app, id)).created_ms)
  t.equal((await command(app, id)).status, 'Delivered')
  t.ok((await command(app, id)).delivered_ms > 0)
  res = await checkIn(app, agent)
  t.same(res.json().commands, [], 'delivered once')

  const mark = await lastEvent(app)
  res = await report(app, agent, [{ commandId: id, status: 'Succeeded', message: 'Mode set to Armed.', completedTime: new Date().toISOString() }])
  t.equal(res.statusCode, 200, res.body)
  t.same(res.json(), { succeeded: 1, failed: 0, results: [{ id: String(id), status: 'done', code: null, reason: null }] })
  const c = await command(app, id)
  t.equal(c.status, 'Succeeded')
  t.equal(c.result_message, 'Mode set to Armed.')
  t.ok(c.completed_ms > 0)
  const a = await agentRow(app, agent)
  t.equal(a.operational_status, 'Armed')
  t.ok(a.last_configured_ms > 0, 'lastConfiguered')
  t.equal(a.in_action, 0)
  t.equal(a.display_status, 'Armed')
  const events = await eventsSince(app, mark)
  t.same(
    events.map((e) => e.event_code),
    ['0x310001', '0x110004'],
    'mode changed; the unapproved mouse is now a violation',
  )
  t.match(events[0].details, 'requested by admin')

  const audit = (await latestAudit(app, 1))[0]
  t.equal(audit.operation_id, 'reportCommandResults')
  t.equal(audit.user_name, `agent:${agent.uuid}`)
  t.equal(audit.asset_key, agent.uuid)

  const quiet = await lastEvent(app)
  t.equal((await checkIn(app, agent, state('Armed'))).statusCode, 200)
  t.same(
    (await eventsSince(app, quiet)).map((e) => e.event_code),
    [],
    'the next check-in reporting Armed is no news',
  )
})

t.test('at most 50 commands per check-in, the rest at the next one, soon', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  const ids: number[] = []
  for (let i = 0; i < 53; i++) ids.push(await queue(app, agent, 'UpdateAgent'))
  let res = await checkIn(app, agent)
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().commands.length, 50)
  t.same(
    res.json().commands.map((c: { commandId: number }) => c.commandId),
    ids.slice(0, 50),
    'oldest first',
  )
  t.equal(res.json().moreCommands, true)
  t.equal(res.json().nextCheckInSeconds, 5)
  res = await checkIn(app, agent)
  t.same(
    res.json().commands.map((c: { commandId: number }) => c.commandId),
    ids.slice(50),
  )
  t.equal(res.json().moreCommands, false)
  t.equal(res.json().nextCheckInSeconds, 60)
  t.equal((await agentRow(app, agent)).display_status, 'Updating')
})

t.test('a failure becomes an event; each result is answered on its own', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  const other = await enroll(app, 'HOST-2')
  const failing = await queue(app, agent, 'UpdateAgent')
  const succeeding = await queue(app, agent, 'UpdateAgent')
  const theirs = await queue(app, other, 'UpdateAgent')
  await checkIn(app, agent)
  await checkIn(app, other)
  const neverDelivered = await queue(app, agent, 'UpdateAgent')
  const cancelled = await queue(app, agent, 'UpdateAgent', {}, 'Cancelled')

  const mark = await lastEvent(app)
  const res = await report(app, agent, [
    { commandId: failing, status: 'Failed', message: 'Download failed: 404.' },
    { commandId: succeeding, status: 'Succeeded' },
    { commandId: theirs, status: 'Succeeded' },
    { commandId: 999999, status: 'Succeeded' },
    { commandId: neverDelivered, status: 'Succeeded' },
    { commandId: cancelled, status: 'Succeeded' },
  ])
  t.equal(res.statusCode, 200, res.body)
  const body = res.json()
  t.equal(body.succeeded, 2)
  t.equal(body.failed, 4)
  t.same(
    body.results.map((r: { id: string; status: string; code: string | null }) => [r.id, r.status, r.code]),
    [
      [String(failing), 'done', null],
      [String(succeeding), 'done', null],
      [String(theirs), 'failed', 'not-found'],
      ['999999', 'failed', 'not-found'],
      [String(neverDelivered), 'failed', 'conflict'],
      [String(cancelled), 'failed', 'conflict'],
    ],
  )
  t.equal((await command(app, failing)).status, 'Failed')
  t.equal((await command(app, failing)).result_message, 'Download failed: 404.')
  t.equal((await command(app, theirs)).status, 'Delivered', "another agent's command is untouched")
  t.equal((await command(app, neverDelivered)).status, 'Pending')
  const [event] = await eventsSince(app, mark)
  t.equal(event.event_code, '0x310005')
  t.equal(event.category, 'Host')
  t.equal(event.severity, 3)
  t.equal(event.asset_key, agent.uuid)
  t.match(event.details, 'Download failed: 404.')
  t.equal((await agentRow(app, agent)).latest_event_text, 'Agent command failed')

  const again = await report(app, agent, [
    { commandId: failing, status: 'Failed', message: 'Download failed: 404.' },
    { commandId: succeeding, status: 'Failed', message: 'changed my mind' },
  ])
  t.equal(again.statusCode, 409, 'results only for commands awaiting one: nothing taken, a conflict')
  t.equal(again.json().type, 'urn:prime:problem:conflict')
  t.same(
    again.json().errors.map((e: { name: string; reason: string }) => [e.name, e.reason]),
    [
      ['results/0/commandId', `conflict: Command ${failing} was already reported as Failed.`],
      ['results/1/commandId', `conflict: Command ${succeeding} was already reported as Succeeded.`],
    ],
    'each refused result named',
  )
  t.equal((await eventsSince(app, mark)).length, 1, 'no second event')
  t.equal((await command(app, succeeding)).status, 'Succeeded')
})

t.test('debug logs are kept (the last five), and UpdatePolicy clears inAction', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  await checkIn(app, agent)
  const logs: number[] = []
  for (let i = 0; i < 6; i++) logs.push(await queue(app, agent, 'FetchDebugLogs'))
  await query(app, `INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, '046D', 'C077', 'Approved', ?, 'admin')`, agent.id, Date.now() - 1000)
  const policy = await queue(app, agent, 'UpdatePolicy', { approvedPeripherals: [{ vid: '046D', pid: 'C077' }] })
  const peripheral = async () => (await queryOne(app, 'SELECT in_action, approved FROM peripherals WHERE agent_id = ?', agent.id)) as Record<string, number>
  t.same(await peripheral(), { in_action: 1, approved: 1 }, 'waiting for the agent')

  const res = await checkIn(app, agent)
  t.same(res.json().commands.find((c: { commandId: number }) => c.commandId === policy).parameters, { approvedPeripherals: [{ vid: '046D', pid: 'C077' }] })
  const answer = await report(app, agent, [...logs.map((id, i) => ({ commandId: id, status: 'Succeeded', output: `log ${i}` })), { commandId: policy, status: 'Succeeded' }])
  t.equal(answer.json().succeeded, 7, answer.body)
  t.same(await queryColumn(app, 'SELECT content FROM agent_debug_logs WHERE agent_id = ? ORDER BY id', agent.id), ['log 1', 'log 2', 'log 3', 'log 4', 'log 5'])
  t.equal((await command(app, logs[0])).has_output, 1)
  t.same(await peripheral(), { in_action: 0, approved: 1 }, 'the policy is applied')
  t.ok((await agentRow(app, agent)).last_configured_ms > 0)
  t.equal((await agentRow(app, agent)).in_action, 0)
})

t.test('the sweeper: quiet agents are disconnected, unanswered deliveries fail, late results still count', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  const quiet = await enroll(app, 'HOST-QUIET')
  await checkIn(app, quiet)
  await checkIn(app, agent)
  const id = await queue(app, agent, 'SetMode', { mode: 'Armed' })
  await checkIn(app, agent)
  t.equal((await command(app, id)).status, 'Delivered')

  t.same(await sweep(sweeperDeps(app)), { disconnected: 0, timedOut: 0, expired: 0, activated: 0, more: false }, 'nothing is due yet')
  const mark = await lastEvent(app)
  const later = Date.now() + 181_000
  t.same(await sweep(sweeperDeps(app), later), { disconnected: 2, timedOut: 0, expired: 0, activated: 0, more: false })
  const a = await agentRow(app, agent)
  t.equal(a.connection_status, 'Disconnected')
  t.equal(a.display_status, 'Disconnected')
  const events = await eventsSince(app, mark)
  t.same(
    events.map((e) => [e.event_code, e.severity, e.category]),
    [
      ['0x310002', 4, 'Host'],
      ['0x310002', 4, 'Host'],
    ],
  )
  t.equal(a.latest_event_text, 'Agent disconnected')

  const back = await lastEvent(app)
  t.equal((await checkIn(app, agent)).statusCode, 200)
  t.same(
    (await eventsSince(app, back)).map((e) => e.event_code),
    ['0x310003'],
    'a disconnected agent checking in is reconnected',
  )
  t.equal((await agentRow(app, agent)).connection_status, 'Connected')
  t.equal((await agentRow(app, agent)).display_status, 'Arming', 'connected again, its command still open')

  const timeout = await lastEvent(app)
  t.same((await sweep(sweeperDeps(app), Date.now() + DELIVERY_TIMEOUT_MS + 1000)).timedOut, 1)
  const failed = await command(app, id)
  t.equal(failed.status, 'Failed')
  t.equal(failed.result_message, 'No result reported')
  t.ok(
    (await eventsSince(app, timeout)).some((e) => e.event_code === '0x310005' && e.asset_key === agent.uuid),
    'the timeout is an event',
  )
  t.equal((await agentRow(app, agent)).in_action, 0)

  const late = await report(app, agent, [{ commandId: id, status: 'Succeeded', message: 'Armed, late.' }])
  t.same(late.json().results[0], { id: String(id), status: 'done', code: null, reason: null }, 'a late result replaces the timeout')
  t.equal((await command(app, id)).status, 'Succeeded')
  t.equal((await agentRow(app, agent)).operational_status, 'Armed')
})

t.test('a sweep batch ends once it has run its time (one agent at least), and the rest follows in the next', async (t) => {
  const app = await build(t, env)
  for (const name of ['HOST-A', 'HOST-B', 'HOST-C']) await checkIn(app, await enroll(app, name))
  const later = Date.now() + 181_000
  // A budget of 0 ms: every batch ends after its first agent.
  t.same(await sweep(sweeperDeps(app), later, 0), { disconnected: 1, timedOut: 0, expired: 0, activated: 0, more: true })
  t.same(await sweep(sweeperDeps(app), later, 0), { disconnected: 1, timedOut: 0, expired: 0, activated: 0, more: true })
  t.same(await sweep(sweeperDeps(app), later, 0), { disconnected: 1, timedOut: 0, expired: 0, activated: 0, more: false }, 'the last one ends the run')
  t.equal(await queryValue(app, "SELECT count(*) FROM agents WHERE connection_status = 'Disconnected'"), 3)
})

t.test('the sweeper hands freed license seats to waiting agents, and writes held check-in times', async (t) => {
  const app = await build(t, { ...env, PRIME_LICENSE_SEATS: '1' })
  const first = await enroll(app)
  const second = await enroll(app, 'HOST-2')
  t.equal((await agentRow(app, second)).license_status, 'Pending')
  await query(app, 'DELETE FROM agents WHERE id = ?', first.id)
  t.same((await sweep(sweeperDeps(app))).activated, 1)
  t.equal((await agentRow(app, second)).license_status, 'Activated')

  await checkIn(app, second)
  await query(app, 'UPDATE agents SET last_updated_ms = last_updated_ms - 10000 WHERE id = ?', second.id)
  const t0 = Date.now()
  await checkIn(app, second)
  await sweep(sweeperDeps(app))
  t.ok((await agentRow(app, second)).last_updated_ms >= t0, 'an unchanged check-in moves lastUpdated (written in batches)')
})

t.test('licenses expire when their date passes', async (t) => {
  const expires = Date.now() + 60_000
  const app = await build(t, { ...env, PRIME_LICENSE_EXPIRES: new Date(expires).toISOString() })
  const agent = await enroll(app)
  t.equal((await agentRow(app, agent)).license_status, 'Activated')
  t.equal((await sweep(sweeperDeps(app))).expired, 0, 'not before the date')
  t.equal((await sweep(sweeperDeps(app), expires + 1)).expired, 1)
  t.equal((await agentRow(app, agent)).license_status, 'Expired')
  t.equal((await sweep(sweeperDeps(app), expires + 2)).expired, 0, 'once')
})
