// Pins what operators do to agents: agent mode and approve-all (agents/configuration, in
// the shape existing clients send and read), deleting agents, and queueing, reusing and
// cancelling commands - per item, in one transaction, audited, by profile.
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { addAgent, addCommand, addPeripheral } from './fixtures/fleet.js'
import { backendOf, latestAudit, query, queryOne, queryValue } from './seed.js'

const CONFIGURE = '/prime/webui/agents/configuration'

async function setup(t: Test) {
  const app = await build(t, { PRIME_PUBLIC_ADDRESS: '10.0.0.5' })
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'mona', 20)
  const user = await userWithProfile(app, admin, 'ulf', 10)
  return { app, admin, manager, user }
}

const post = (app: FastifyInstance, token: string, url: string, payload: unknown) => call(app, token, { method: 'POST', url, payload: payload as any, headers: { 'content-type': 'application/json' } })

const commandsOf = (app: FastifyInstance, agentId: number) =>
  query<{ id: number; type: string; status: string; parameters: string; created_by: string; result_message: string | null }>(
    app,
    'SELECT id, type, status, parameters, created_by, result_message FROM agent_commands WHERE agent_id = ? ORDER BY id',
    agentId,
  )

const agentRowOrNone = (app: FastifyInstance, id: number) => queryOne(app, 'SELECT * FROM agents WHERE id = ?', id)
const agentRow = async (app: FastifyInstance, id: number) => (await agentRowOrNone(app, id))!

t.test('agents/configuration: the body existing clients send arms the agent and answers [0].uuid', async (t) => {
  const { app, manager } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'DESKTOP-9LR722S', local_ip_address: '192.168.100.128', is_system_locked: 1 })
  const res = await post(app, manager, CONFIGURE, [{ uuid: null, hostIdentifier: 'desktop-9lr722s', ipAddress: null, agentConfigViewResource: { isSystemArmed: 'ARM' } }])
  t.equal(res.statusCode, 200, res.body)
  const body = res.json()
  t.equal(body.length, 1)
  t.equal(body[0].uuid, pc.uuid, "the matched agent's uuid, never null")
  t.equal(body[0].hostIdentifier, 'DESKTOP-9LR722S')
  t.equal(body[0].ipAddress, '192.168.100.128')
  t.same(body[0].agentConfigViewResource, { isSystemArmed: 'ARM', isSystemLocked: true, centralizedConsoleIP: '10.0.0.5', approveAll: false })
  t.equal(res.headers['x-items-succeeded'], '1')
  t.equal(res.headers['x-items-failed'], '0')
  t.notOk(res.headers['x-item-failures'], 'no failures header when nothing failed')
  const commands = await commandsOf(app, pc.id)
  t.equal(commands.length, 1)
  t.same(body[0].commandIds, [commands[0].id])
  t.match(commands[0], { type: 'SetMode', status: 'Pending', created_by: 'mona' })
  t.same(JSON.parse(commands[0].parameters), { mode: 'Armed' })
  t.equal((await agentRow(app, pc.id)).display_status, 'Arming')
  t.equal((await agentRow(app, pc.id)).in_action, 1)

  const record = (await latestAudit(app))[0]
  t.equal(record.operation_id, 'setAgentsConfiguration')
  t.equal(record.category, 'Agents')
  t.equal(record.user_name, 'mona')
  t.equal(record.asset_key, pc.uuid, 'the agent is the audited asset')
  t.equal(record.asset_name, 'DESKTOP-9LR722S')
  t.equal(record.asset_type, 'Agent')
  t.match(JSON.parse(record.details), { mode: 'Armed', commandIds: [commands[0].id] })

  const view = (await call(app, manager, { method: 'GET', url: `/prime/webui/agents?HostIdentifier=DESKTOP` })).json().data[0]
  t.equal(view.displayStatusCombined, 'Arming')
  t.equal(view.inAction, true)
})

t.test('agents/configuration: matching is exact on every identifier given, case-insensitive', async (t) => {
  const { app, manager } = await setup(t)
  const a = await addAgent(app, { host_identifier: 'PC-1', local_ip_address: '10.1.1.1' })
  const b = await addAgent(app, { host_identifier: 'pc-1', local_ip_address: '10.1.1.2' })
  const c = await addAgent(app, { host_identifier: 'PC-10', local_ip_address: '10.1.1.3' })
  const res = await post(app, manager, CONFIGURE, [
    { hostIdentifier: 'PC-1', agentConfigViewResource: { isSystemArmed: 'arm' } },
    { hostIdentifier: 'PC-1', ipAddress: '10.1.1.2', agentConfigViewResource: { isSystemArmed: 'Armed' } },
    { uuid: c.uuid.toUpperCase(), hostIdentifier: 'pc-10', agentConfigViewResource: { isSystemArmed: 'ARMED' } },
    { uuid: c.uuid, hostIdentifier: 'PC-1', agentConfigViewResource: { isSystemArmed: 'ARM' } },
    { ipAddress: '10.1.1.1', agentConfigViewResource: { isSystemArmed: 'ARM' } },
    { uuid: null, hostIdentifier: null, ipAddress: null, agentConfigViewResource: { isSystemArmed: 'ARM' } },
    { hostIdentifier: 'PC-\u00e9', agentConfigViewResource: { isSystemArmed: 'ARM' } },
  ])
  t.equal(res.statusCode, 200, res.body)
  t.same(
    res.json().map((r: any) => r.uuid),
    [b.uuid, c.uuid, a.uuid],
    'the applied items in request order',
  )
  t.equal(res.headers['x-items-succeeded'], '3')
  t.equal(res.headers['x-items-failed'], '4')
  const failures = JSON.parse(res.headers['x-item-failures'] as string)
  t.same(
    failures.map((f: any) => [f.index, f.code]),
    [
      [0, 'ambiguous'],
      [3, 'not-found'],
      [5, 'invalid'],
      [6, 'not-found'],
    ],
  )
  t.match(failures[1].reason, /No agent matches uuid=.*hostIdentifier=PC-1/)
  t.notMatch(res.headers['x-item-failures'] as string, /[^\x20-\x7e]/, 'the header is ASCII')
  t.match(res.headers['x-item-failures'] as string, /PC-\\u00e9/, 'non-ASCII escaped as \\uXXXX')
  t.equal((await commandsOf(app, a.id)).length, 1, 'an ambiguous item changes none of the agents it matched')
  const failed = (await latestAudit(app))[0]
  t.equal(failed.outcome, 'Failed', 'the failed items are audited too')
  t.equal(JSON.parse(failed.details).failed.length, 4)
})

t.test('agents/configuration: when no item applies, 400 no-agent-matched names each item, and nothing changes', async (t) => {
  const { app, manager } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'PC-1' })
  const res = await post(app, manager, CONFIGURE, [
    { uuid: null, hostIdentifier: 'PC-7', ipAddress: null, agentConfigViewResource: { isSystemArmed: 'ARM' } },
    { hostIdentifier: 'PC-8', agentConfigViewResource: { isSystemArmed: 'free', approveAll: true } },
  ])
  t.equal(res.statusCode, 400, res.body)
  const body = res.json()
  t.equal(body.type, 'urn:prime:problem:no-agent-matched')
  t.equal(body.title, 'No agent matched')
  t.match(body.detail, /No item could be applied: 2 not found/)
  t.same(
    body.errors.map((e: any) => [e.location, e.name]),
    [
      ['body', '0'],
      ['body', '1'],
    ],
  )
  t.match(body.errors[0].reason, /^not-found: No agent matches hostIdentifier=PC-7/)
  t.equal((await commandsOf(app, pc.id)).length, 0)
  const record = (await latestAudit(app))[0]
  t.equal(record.outcome, 'Failed')
  t.equal(record.operation_id, 'setAgentsConfiguration')
})

t.test('agents/configuration: bad bodies answer 400', async (t) => {
  const { app, manager } = await setup(t)
  await addAgent(app, { host_identifier: 'PC-1' })
  const nothing = await post(app, manager, CONFIGURE, [{ hostIdentifier: 'PC-1', agentConfigViewResource: { isSystemArmed: null, approveAll: false } }])
  t.equal(nothing.statusCode, 400, 'an item that asks for nothing')
  t.equal(nothing.json().errors[0].name, '0/agentConfigViewResource')
  t.equal((await post(app, manager, CONFIGURE, [])).statusCode, 400, 'empty')
  t.equal((await post(app, manager, CONFIGURE, null)).statusCode, 400, 'null')
  t.equal((await post(app, manager, CONFIGURE, [{ hostIdentifier: 'PC-1', agentConfigViewResource: { isSystemArmed: 'sleep' } }])).statusCode, 400, 'an unknown mode')
})

t.test('agents/configuration: SetMode commands supersede, reuse or are not needed', async (t) => {
  const { app, manager } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'PC-1', operational_status: 'Free' })
  const configure = async (isSystemArmed: string | null, approveAll?: boolean) => {
    const res = await post(app, manager, CONFIGURE, [{ hostIdentifier: 'PC-1', agentConfigViewResource: { isSystemArmed, approveAll } }])
    t.equal(res.statusCode, 200, res.body)
    return res.json()[0]
  }
  const free = await configure('free')
  t.same(free.commandIds, [], 'already free with nothing pending: nothing queued, still done')
  t.equal(free.agentConfigViewResource.isSystemArmed, 'free')
  const arm = await configure('ARM')
  t.equal(arm.commandIds.length, 1)
  t.same((await configure('Armed')).commandIds, arm.commandIds, 'the same mode again reuses the pending command')
  const back = await configure('free')
  t.same(back.commandIds, [], 'freeing a free agent whose arming was still pending: the arming is cancelled, nothing queued')
  t.same(
    (await commandsOf(app, pc.id)).map((c) => c.status),
    ['Cancelled'],
  )
  t.match((await commandsOf(app, pc.id))[0].result_message, /Superseded/)
  t.equal((await agentRow(app, pc.id)).display_status, 'Free')
  t.equal((await agentRow(app, pc.id)).in_action, 0)

  const armAgain = await configure('ARM')
  await query(app, "UPDATE agent_commands SET status = 'Delivered', delivered_ms = ? WHERE id = ?", Date.now(), armAgain.commandIds[0])
  const freeAfterDelivery = await configure('free')
  t.equal(freeAfterDelivery.commandIds.length, 1, "an arming in the agent's hands is followed by a new SetMode")
  t.same(JSON.parse((await commandsOf(app, pc.id)).at(-1)!.parameters), { mode: 'Free' })
  t.equal((await agentRow(app, pc.id)).display_status, 'Freeing')

  const keep = await post(app, manager, CONFIGURE, [{ hostIdentifier: 'PC-1', agentConfigViewResource: { approveAll: true } }])
  t.equal(keep.json()[0].agentConfigViewResource.isSystemArmed, 'free', "null mode echoes the agent's current mode")
})

t.test('agents/configuration: a later item for the same agent supersedes an earlier one', async (t) => {
  const { app, manager } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'PC-1', operational_status: 'Free' })
  const res = await post(app, manager, CONFIGURE, [
    { hostIdentifier: 'PC-1', agentConfigViewResource: { isSystemArmed: 'ARM' } },
    { uuid: pc.uuid, agentConfigViewResource: { isSystemArmed: 'free' } },
    { uuid: pc.uuid, agentConfigViewResource: { isSystemArmed: 'ARM' } },
  ])
  t.equal(res.statusCode, 200)
  const commands = await commandsOf(app, pc.id)
  t.same(
    commands.map((c) => c.status),
    ['Cancelled', 'Pending'],
  )
  t.same(res.json()[2].commandIds, [commands[1].id])
})

t.test('agents/configuration: approveAll approves the present peripherals and sends the whole whitelist', async (t) => {
  const { app, admin, manager } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'PC-1', operational_status: 'Armed' })
  await addPeripheral(app, pc.id, { vid: '0951', pid: '1666' })
  await addPeripheral(app, pc.id, { vid: '046D', pid: 'C077' })
  await addPeripheral(app, pc.id, { vid: '046D', pid: 'C077' })
  await addPeripheral(app, pc.id, { vid: '0781', pid: '5581', present: 0 })
  await query(app, "INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, '1050', '0407', 'Approved', 1, 'earlier')", pc.id)
  t.equal((await agentRow(app, pc.id)).not_approved, 3)

  const res = await post(app, manager, CONFIGURE, [{ uuid: pc.uuid, agentConfigViewResource: { approveAll: true } }])
  t.equal(res.statusCode, 200, res.body)
  const item = res.json()[0]
  t.equal(item.agentConfigViewResource.approveAll, true)
  t.equal(item.agentConfigViewResource.isSystemArmed, 'ARM')
  const approvals = await query(app, 'SELECT vid, pid, status, changed_by FROM approvals WHERE agent_id = ? ORDER BY vid, pid', pc.id)
  t.same(
    approvals,
    [
      { vid: '046D', pid: 'C077', status: 'Approved', changed_by: 'mona' },
      { vid: '0951', pid: '1666', status: 'Approved', changed_by: 'mona' },
      { vid: '1050', pid: '0407', status: 'Approved', changed_by: 'earlier' },
    ],
    'present models approved by the caller; the absent one is not',
  )
  const [policy] = await commandsOf(app, pc.id)
  t.equal(policy.type, 'UpdatePolicy')
  t.same(item.commandIds, [policy.id])
  t.same(
    JSON.parse(policy.parameters),
    {
      approvedPeripherals: [
        { vid: '046D', pid: 'C077' },
        { vid: '0951', pid: '1666' },
        { vid: '1050', pid: '0407' },
      ],
    },
    'the whole whitelist',
  )
  const row = await agentRow(app, pc.id)
  t.equal(row.not_approved, 0)
  t.equal(row.approved_and_present, 3)
  t.equal(row.has_unapproved, 0)
  t.equal(row.display_status, 'Pending', 'armed agent waiting for its policy')
  const peripherals = (await call(app, manager, { method: 'GET', url: `/prime/webui/agents/agent/${pc.uuid}` })).json().peripherals
  t.ok(
    peripherals.filter((p: any) => p.present).every((p: any) => p.adminStatus === 'Approved' && p.inAction),
    'approved, waiting for the agent',
  )

  const again = await post(app, manager, CONFIGURE, [{ uuid: pc.uuid, agentConfigViewResource: { approveAll: true, isSystemArmed: 'ARM' } }])
  t.same(again.json()[0].commandIds, [], 'nothing new to approve and already armed: nothing queued')

  await addPeripheral(app, pc.id, { vid: '16C0', pid: '0486' })
  const tool = await post(app, manager, CONFIGURE, [{ uuid: pc.uuid, agentConfigViewResource: { approveAll: true } }])
  t.equal(tool.statusCode, 400, 'a Manager cannot approve a known attack tool, so the only item fails')
  t.match(tool.json().errors[0].reason, /^not-allowed: .*16C0:0486.*Administrator/)
  const byAdmin = await post(app, admin, CONFIGURE, [{ uuid: pc.uuid, agentConfigViewResource: { approveAll: true } }])
  t.equal(byAdmin.statusCode, 200, 'an Administrator can')
  t.equal(await queryValue(app, "SELECT status FROM approvals WHERE agent_id = ? AND vid = '16C0'", pc.id), 'Approved')
  t.same(
    (await commandsOf(app, pc.id)).map((c) => c.status),
    ['Cancelled', 'Pending'],
    'the newer whitelist replaces the pending one',
  )
})

t.test('profiles: User cannot configure or queue; Manager cannot delete agents', async (t) => {
  const { app, user, manager } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'PC-1' })
  const configure = await post(app, user, CONFIGURE, [{ hostIdentifier: 'PC-1', agentConfigViewResource: { isSystemArmed: 'ARM' } }])
  t.equal(configure.statusCode, 403)
  t.equal(configure.json().type, 'urn:prime:problem:forbidden')
  t.equal((await latestAudit(app))[0].outcome, 'Refused', 'the refusal is audited')
  for (const op of ['updateAgents', 'fetchagentsdebuglogs', 'deleteAgentsCommands']) {
    t.equal((await post(app, user, `/prime/webui/agents/${op}`, [pc.uuid])).statusCode, 403, op)
  }
  t.equal((await post(app, manager, '/prime/webui/agents/deleteAgents', [pc.uuid])).statusCode, 403, 'deleting agents needs an Administrator')
  t.equal((await commandsOf(app, pc.id)).length, 0)
  t.ok(await agentRowOrNone(app, pc.id))
})

t.test('deleteAgents: per item; peripherals, approvals and commands go, events stay', async (t) => {
  const { app, admin } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'PC-1' })
  const other = await addAgent(app, { host_identifier: 'PC-2' })
  await addPeripheral(app, pc.id)
  await addCommand(app, pc.id, { type: 'UpdateAgent' })
  await query(app, "INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, '046D', 'C077', 'Approved', 1, 'x')", pc.id)
  await query(
    app,
    "INSERT INTO events (created_ms, event_code, severity, category, entity_id, description, details, asset_key) VALUES (1, '0x110001', 6, 'USB', 'PC-1', 'New USB peripheral detected', '{}', ?)",
    pc.uuid,
  )

  const res = await post(app, admin, '/prime/webui/agents/deleteAgents', [pc.uuid.toUpperCase(), '00000000-0000-0000-0000-000000000000'])
  t.equal(res.statusCode, 200, res.body)
  t.same(res.json(), {
    succeeded: 1,
    failed: 1,
    results: [
      { id: pc.uuid.toUpperCase(), status: 'done', reason: null, code: null },
      { id: '00000000-0000-0000-0000-000000000000', status: 'failed', reason: 'No agent with this uuid.', code: 'not-found' },
    ],
  })
  t.notOk(await agentRowOrNone(app, pc.id))
  t.ok(await agentRowOrNone(app, other.id), 'the other agent stays')
  for (const table of ['peripherals', 'approvals', 'agent_commands']) {
    t.equal(await queryValue(app, `SELECT count(*) FROM ${table} WHERE agent_id = ?`, pc.id), 0, `${table} removed`)
  }
  t.equal(await queryValue(app, 'SELECT count(*) FROM events WHERE asset_key = ?', pc.uuid), 1, 'its events are kept')
  // SQLite keeps the count of agents (row_counts); PostgreSQL counts them.
  if (backendOf(app) === 'sqlite') t.equal(await queryValue(app, "SELECT n FROM row_counts WHERE name = 'agents'"), 1)
  const records = await latestAudit(app, 2)
  const deleted = records.find((r) => r.outcome === 'Succeeded')!
  t.equal(deleted.asset_key, pc.uuid)
  t.match(deleted.description, /Deleted agent PC-1/)
  t.equal(records.find((r) => r.outcome === 'Failed')?.operation_id, 'deleteAgents', 'the failed item is audited')

  t.equal((await post(app, admin, '/prime/webui/agents/deleteAgents', [])).statusCode, 400, 'an empty list')
  t.equal((await post(app, admin, '/prime/webui/agents/deleteAgents', null)).statusCode, 400, 'null')
})

t.test('deleteAgentsCommands: cancels Pending commands, leaves Delivered ones', async (t) => {
  const { app, manager } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'PC-1', operational_status: 'Armed' })
  const idle = await addAgent(app, { host_identifier: 'PC-2' })
  await addPeripheral(app, pc.id, { vid: '0951', pid: '1666' })
  const configured = await post(app, manager, CONFIGURE, [{ uuid: pc.uuid, agentConfigViewResource: { approveAll: true, isSystemArmed: 'free' } }])
  const [policyId, setModeId] = configured.json()[0].commandIds
  const delivered = await addCommand(app, pc.id, { type: 'UpdateAgent', status: 'Delivered', delivered_ms: Date.now() })
  t.equal((await agentRow(app, pc.id)).in_action, 1)

  const res = await post(app, manager, '/prime/webui/agents/deleteAgentsCommands', [pc.uuid, idle.uuid, 'nope'])
  t.equal(res.statusCode, 200, res.body)
  t.same(res.json(), {
    succeeded: 2,
    failed: 1,
    results: [
      { id: pc.uuid, status: 'done', reason: null, code: null, commandIds: [policyId, setModeId] },
      { id: idle.uuid, status: 'done', reason: null, code: null, commandIds: [] },
      { id: 'nope', status: 'failed', reason: 'No agent with this uuid.', code: 'not-found', commandIds: [] },
    ],
  })
  t.same(
    (await commandsOf(app, pc.id)).map((c) => [c.id, c.status]),
    [
      [policyId, 'Cancelled'],
      [setModeId, 'Cancelled'],
      [delivered.id, 'Delivered'],
    ],
  )
  t.match((await commandsOf(app, pc.id))[0].result_message, /Cancelled by mona/)
  const row = await agentRow(app, pc.id)
  t.equal(row.display_status, 'Updating', 'the delivered update is still in progress')
  t.equal(await queryValue(app, 'SELECT in_action FROM peripherals WHERE agent_id = ?', pc.id), 0, 'no policy is pending for the approval any more')
  const record = (await latestAudit(app, 2)).find((r) => r.outcome === 'Succeeded')!
  t.equal(record.asset_key, pc.uuid)
  t.same(JSON.parse(record.details).commandIds, [policyId, setModeId])
})

t.test('updateAgents and fetchagentsdebuglogs: one command per agent, an open one reused', async (t) => {
  const { app, manager } = await setup(t)
  const pc = await addAgent(app, { host_identifier: 'PC-1' })
  for (const [url, type] of [
    ['/prime/webui/agents/updateAgents', 'UpdateAgent'],
    ['/prime/webui/agents/fetchagentsdebuglogs', 'FetchDebugLogs'],
  ]) {
    const first = await post(app, manager, url, [pc.uuid, '00000000-0000-0000-0000-000000000000'])
    t.equal(first.statusCode, 200, first.body)
    const body = first.json()
    t.equal(body.succeeded, 1)
    t.equal(body.failed, 1)
    t.equal(body.results[1].code, 'not-found')
    const [id] = body.results[0].commandIds
    const command = (await commandsOf(app, pc.id)).find((c) => c.id === id)!
    t.match(command, { type, status: 'Pending', created_by: 'mona' })
    const second = await post(app, manager, url, [pc.uuid.toUpperCase()])
    t.same(second.json().results[0].commandIds, [id], `${type}: the pending command is reused`)
    await query(app, "UPDATE agent_commands SET status = 'Delivered' WHERE id = ?", id)
    const third = await post(app, manager, url, [pc.uuid])
    const [next] = third.json().results[0].commandIds
    t.not(next, id, `${type}: a delivered one is in the agent's hands, so a new one is queued`)
    t.same((await post(app, manager, url, [pc.uuid])).json().results[0].commandIds, [next], `${type}: which the next request reuses`)
    const record = (await latestAudit(app))[0]
    t.equal(record.asset_key, pc.uuid)
    t.match(JSON.parse(record.details), { type, reused: true })
  }
  t.equal((await agentRow(app, pc.id)).display_status, 'Updating')
  t.equal((await post(app, manager, '/prime/webui/agents/updateAgents', [])).statusCode, 400)
})

t.test('peripherals/command: two approvals on one agent at once leave a whitelist with both models last', async (t) => {
  // The agent applies its UpdatePolicy commands in id order, the last one's whitelist in
  // force: whichever way two approvals of different models interleave, that last one lists both.
  const { app, manager } = await setup(t)
  const approve = (uuid: string, vid: string, pid: string) => post(app, manager, '/prime/webui/peripherals/command', { opCode: 'APPROVE', peripheralsIds: [{ uuid, vid, pid }] })
  for (let round = 0; round < 12; round++) {
    const pc = await addAgent(app, { host_identifier: `RACE-${round}` })
    await addPeripheral(app, pc.id, { vid: '0951', pid: '1666' })
    await addPeripheral(app, pc.id, { vid: '046D', pid: 'C077' })
    const [a, b] = await Promise.all([approve(pc.uuid, '0951', '1666'), approve(pc.uuid, '046D', 'C077')])
    t.equal(a.statusCode, 200, a.body)
    t.equal(b.statusCode, 200, b.body)
    const policies = (await commandsOf(app, pc.id)).filter((c) => c.type === 'UpdatePolicy' && c.status !== 'Cancelled')
    t.equal(policies.length, 1, `round ${round}: one UpdatePolicy left to deliver`)
    t.same(
      JSON.parse(policies.at(-1)!.parameters).approvedPeripherals,
      [
        { vid: '046D', pid: 'C077' },
        { vid: '0951', pid: '1666' },
      ],
      `round ${round}: the last whitelist lists both models`,
    )
  }
})
