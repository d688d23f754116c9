// The agent service and the unit of work it runs in, without Fastify's routes: plain
// context, the ports of a test app's database (SQLite or PostgreSQL), a fleet written
// straight into it.
import t from 'tap'
import { agentService } from '../lib/agents/service.js'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { build } from './helpers.js'
import { portsOf, query, queryValue } from './seed.js'
import { addAgent, addDebugLogs, addPeripheral } from './fixtures/fleet.js'

const BY_HOST = { field: 'hostIdentifier', direction: 'asc' } as const
const NOW = Date.UTC(2026, 0, 15, 12)

async function setup(t: Parameters<typeof build>[0]) {
  // No list answers kept: every list reads what the rows hold now.
  const app = await build(t, { PRIME_KEPT_LIST_ANSWERS: '0' })
  const ports = portsOf(app)
  const { uow } = app.storage
  let failAudit = false
  const record = async (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    await recordAudit({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }, ctx, entry)
  }
  const service = agentService({
    agents: ports.agents,
    peripherals: ports.peripherals,
    commands: ports.commands,
    agentState: ports.agentState,
    reEnrollments: ports.reEnrollments,
    exports: ports.exports,
    uow,
    audit: { record },
    publicAddress: '192.0.2.1',
    now: () => NOW,
  })
  // Only what the service wrote (building the app audits nothing, but a test reads from here on).
  const mark = (await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')) ?? 0
  const auditRows = () => query(app, 'SELECT user_name, source_ip, request_id, operation_id, description, outcome, asset_key FROM audit_trail WHERE id > ? ORDER BY id', mark)
  const commandRows = (agentId: number) => query(app, 'SELECT type, status, parameters, created_by, created_ms, result_message FROM agent_commands WHERE agent_id = ? ORDER BY id', agentId)
  return { service, app, auditRows, commandRows, failAudit: (on: boolean) => (failAudit = on) }
}

const ctx = (over: Partial<Context> = {}) =>
  systemContext({
    actor: 'alice',
    profile: 30,
    sourceAddress: '192.0.2.7',
    requestId: 'req-1',
    operation: { operationId: 'setAgentsConfiguration', method: 'POST', path: '/x', auditCategory: 'Agents', readOnly: false },
    ...over,
  })

const arm = (uuid: string, approveAll = false) => ({ uuid, agentConfigViewResource: { isSystemArmed: 'ARM', approveAll } }) as never

t.test('arming an agent queues one SetMode, audited with the agent as the asset; asking again reuses it', async (t) => {
  const { service, app, auditRows, commandRows } = await setup(t)
  const agent = await addAgent(app, { host_identifier: 'HOST-A' })
  const done = await service.configure(ctx(), [arm(agent.uuid)], 'alice')
  t.equal(done.succeeded, 1)
  t.same(done.failures, [])
  t.equal(done.result[0].agentConfigViewResource.isSystemArmed, 'ARM')
  t.equal(done.result[0].agentConfigViewResource.centralizedConsoleIP, '192.0.2.1', 'the console address comes from the settings given')
  t.match(await commandRows(agent.id), [{ type: 'SetMode', status: 'Pending', parameters: '{"mode":"Armed"}', created_by: 'alice', created_ms: NOW }])
  t.match(await auditRows(), [
    {
      user_name: 'alice',
      source_ip: '192.0.2.7',
      request_id: 'req-1',
      operation_id: 'setAgentsConfiguration',
      description: 'Configured agent HOST-A: mode Armed',
      outcome: 'Succeeded',
      asset_key: agent.uuid,
    },
  ])

  const again = await service.configure(ctx(), [arm(agent.uuid)], 'alice')
  t.same(again.result[0].commandIds, done.result[0].commandIds, 'the SetMode still Pending is reused')
  t.equal((await commandRows(agent.id)).length, 1)
})

t.test('approving all where an attack tool is present needs the Administrator profile', async (t) => {
  const { service, app, auditRows, commandRows } = await setup(t)
  const agent = await addAgent(app, { host_identifier: 'HOST-B' })
  await addPeripheral(app, agent.id, { vid: '1D6B', pid: 'BEEF' })
  await query(app, "INSERT INTO catalogue (id, kind, vid, pid, name, severity, created_ms, created_by) VALUES ('t1', 'KnownAttackTool', '1D6B', 'BEEF', 'Rubber Duck', 1, 0, 'test')")
  await t.rejects(service.configure(ctx({ profile: 20 }), [arm(agent.uuid, true)], 'bob'), { code: 'no-agent-matched', status: 400 }, 'no item applied: a 400')
  t.same(await commandRows(agent.id), [], 'nothing queued')
  t.match(await auditRows(), [{ description: 'Agent configuration: 1 item(s) failed, none applied', outcome: 'Failed' }], "the failures' record is kept (written before the refusal)")

  const done = await service.configure(ctx(), [arm(agent.uuid, true)], 'alice')
  t.equal(done.succeeded, 1)
  t.match(await commandRows(agent.id), [
    { type: 'UpdatePolicy', parameters: '{"approvedPeripherals":[{"vid":"1D6B","pid":"BEEF"}]}' },
    { type: 'SetMode', parameters: '{"mode":"Armed"}' },
  ])
})

t.test('a change whose audit record cannot be written is rolled back whole', async (t) => {
  const { service, app, auditRows, commandRows, failAudit } = await setup(t)
  const agent = await addAgent(app, { host_identifier: 'HOST-C' })
  await addPeripheral(app, agent.id, { vid: '046D', pid: 'C077' })
  failAudit(true)
  await t.rejects(service.configure(ctx(), [arm(agent.uuid, true)], 'alice'), /the audit trail is full/)
  await t.rejects(service.remove(ctx(), [agent.uuid]), /the audit trail is full/)
  failAudit(false)
  t.same(await commandRows(agent.id), [], 'no command queued')
  t.equal(await queryValue(app, 'SELECT count(*) FROM approvals'), 0, 'no approval written')
  t.ok(await service.details(agent.uuid), 'the agent is still there')
  t.same(await auditRows(), [])
})

t.test('commands per agent: unknown uuids fail per item, a Pending one is reused, cancelling audits', async (t) => {
  const { service, app, auditRows, commandRows } = await setup(t)
  const agent = await addAgent(app, { host_identifier: 'HOST-D' })
  const unknown = '00000000-0000-4000-8000-000000000000'
  const first = await service.queue(ctx(), [agent.uuid, unknown], 'FetchDebugLogs', 'alice')
  t.match(first, {
    succeeded: 1,
    failed: 1,
    results: [
      { id: agent.uuid, status: 'done' },
      { id: unknown, status: 'failed', code: 'not-found' },
    ],
  })
  const second = await service.queue(ctx(), [agent.uuid], 'FetchDebugLogs', 'alice')
  t.same(second.results[0].commandIds, first.results[0].commandIds, 'reused')
  const cancelled = await service.cancelCommands(ctx(), [agent.uuid], 'alice')
  t.same(cancelled.results[0].commandIds, first.results[0].commandIds)
  t.match(await commandRows(agent.id), [{ status: 'Cancelled', result_message: 'Cancelled by alice.' }])
  await t.rejects(service.queue(ctx(), [], 'UpdateAgent', 'alice'), { status: 400 }, 'an empty list is refused')
  t.same(
    (await auditRows()).map((r) => r.description),
    [
      'Queued FetchDebugLogs for agent HOST-D',
      'setAgentsConfiguration: 1 item(s) failed, 1 applied',
      `FetchDebugLogs already pending for agent HOST-D (command ${first.results[0].commandIds[0]})`,
      'Cancelled 1 pending command(s) of agent HOST-D',
    ],
  )
})

t.test('peripheral approvals: per item, a whitelist pushed per agent', async (t) => {
  const { service, app, auditRows, commandRows } = await setup(t)
  const agent = await addAgent(app, { host_identifier: 'HOST-E' })
  await addPeripheral(app, agent.id, { vid: '046D', pid: 'C077' })
  const done = await service.commandPeripherals(
    ctx(),
    { opCode: 'APPROVE', peripheralsIds: [{ uuid: agent.uuid, vid: '046d', pid: 'c077' } as never, { uuid: agent.uuid, vid: 'FFFF', pid: 'FFFF' } as never] },
    'alice',
  )
  t.same(done.result, [agent.uuid])
  t.equal(done.succeeded, 1)
  t.match(done.failures, [{ index: 1, code: 'not-found' }])
  t.match(await commandRows(agent.id), [{ type: 'UpdatePolicy', parameters: '{"approvedPeripherals":[{"vid":"046D","pid":"C077"}]}' }])
  t.match(await auditRows(), [{ description: 'Approved 046D:C077 on agent HOST-E', asset_key: agent.uuid }, { outcome: 'Failed' }])
})

t.test('lists, details, debug logs and exports read what the rows hold', async (t) => {
  const { service, app, auditRows } = await setup(t)
  const a = await addAgent(app, { host_identifier: 'HOST-F' })
  await addAgent(app, { host_identifier: 'HOST-G' })
  await addPeripheral(app, a.id)
  const page = await service.list({}, BY_HOST, 10, 0)
  t.match(page, { total: 2, filtered: 2 })
  t.same(
    JSON.parse((page as { data: string }).data).map((v: { hostIdentifier: string }) => v.hostIdentifier),
    ['HOST-F', 'HOST-G'],
  )
  const filtered = await service.list({ hostIdentifier: 'G' }, BY_HOST, 10, 0)
  t.match(filtered, { total: 2, filtered: 1 })
  const details = await service.details(a.uuid.toUpperCase())
  t.equal(details.agent.id, a.id, 'found by uuid in any case')
  t.equal(details.peripherals.length, 1)
  await t.rejects(service.details('00000000-0000-4000-8000-000000000000'), { status: 404 })
  await t.rejects(service.debugLogs(ctx(), a.uuid), { status: 404 }, 'no logs yet')
  await addDebugLogs(app, a.id, 'line one\n')
  t.equal((await service.debugLogs(ctx(), a.uuid)).logs.content, 'line one\n')
  const file = await service.exportAgents(ctx(), 'csv', {}, BY_HOST, { hostIdentifier: 'HOST', pageSize: 10 })
  t.equal(file.records, 2)
  t.match(file.fileName, /^agents-20260115T120000Z\.csv$/)
  t.same(file.filters, [['hostIdentifier', 'HOST']], 'paging is left out of the filters given')
  const hosts: string[] = []
  for await (const row of await file.rows(1)) hosts.push(row.host_identifier)
  t.same(hosts, ['HOST-F'], 'the rows are read up to the limit asked')
  const models = await service.exportModels(ctx(), 'pdf', {}, null)
  t.match(models.rows, [{ vid: '046D', pid: 'C077', hosts: 1 }])
  t.same(
    (await auditRows()).map((r) => r.description),
    ['Downloaded the debug logs of agent HOST-F', `Exported 2 agent(s) as CSV (${file.fileName})`, `Exported 1 peripheral model(s) as PDF (${models.fileName})`],
  )
})
