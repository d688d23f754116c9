// Pins the large pages of agents, peripherals and agentless connections: a page of more
// than 10,000 rows is streamed with the same rows, fields, order and counts as the same
// query in smaller pages, valid against the contract. The size from which pages stream is
// lowered (streamedPages.above) so that this runs on a few hundred rows.
import crypto from 'node:crypto'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login } from './helpers.js'
import { addAgent, addPeripheral } from './fixtures/fleet.js'
import { backendOf, portsOf, query, queryOne } from './seed.js'
import { get, paged, streamAbove, validator } from './fixtures/pages.js'

/** The columns of a table to copy from a row, less those given (PostgreSQL's agents.rev is drawn per row: never copied there). */
async function columnsOf(app: FastifyInstance, table: string, id: number, without: string[]): Promise<string[]> {
  const row = (await queryOne(app, `SELECT * FROM ${table} WHERE id = ?`, id))!
  return Object.keys(row).filter((c) => !without.includes(c) && !(backendOf(app) === 'postgres' && c === 'rev'))
}

/** `n` copies of an agent (each its own uuid, name and mode) and of a peripheral spread over the first 60. */
async function fleet(app: FastifyInstance, agents: number, peripherals: number) {
  const template = await addAgent(app, {})
  const columns = await columnsOf(app, 'agents', template.id, ['id', 'uuid', 'machine_id', 'host_identifier', 'operational_status', 'hashtags'])
  for (let i = 1; i < agents; i++)
    await query(
      app,
      `INSERT INTO agents (uuid, machine_id, host_identifier, operational_status, hashtags, ${columns.join(', ')})
    SELECT ?, ?, ?, ?, ?, ${columns.join(', ')} FROM agents WHERE id = ?`,
      crypto.randomUUID(),
      crypto.randomUUID(),
      `DESKTOP-${String(i).padStart(5, '0')}${i % 2 ? 'a' : 'B'}`,
      i % 3 ? 'Free' : 'Armed',
      i % 7 ? null : '#lab',
      template.id,
    )
  const hosts = await query<{ id: number; uuid: string }>(app, 'SELECT id, uuid FROM agents ORDER BY id LIMIT 60')
  const mouse = await addPeripheral(app, hosts[0].id, {})
  const stick = await addPeripheral(app, hosts[0].id, { vid: '0951', pid: '1666' })
  const pColumns = await columnsOf(app, 'peripherals', mouse.id, ['id', 'agent_id', 'agent_uuid', 'device_id', 'serial_number'])
  for (let i = 2; i < peripherals; i++) {
    const host = hosts[i % hosts.length]
    const serial = `SN${String(i).padStart(6, '0')}`
    const from = i % 4 ? mouse.id : stick.id
    await query(
      app,
      `INSERT INTO peripherals (agent_id, agent_uuid, device_id, serial_number, ${pColumns.join(', ')})
    SELECT ?, ?, ?, ?, ${pColumns.join(', ')} FROM peripherals WHERE id = ?`,
      host.id,
      host.uuid,
      `USB\\VID_X&PID_Y\\${serial}`,
      serial,
      from,
    )
  }
  for (const h of hosts) await portsOf(app).agentState.refreshAgent(h.id)
}

t.test('agents, peripherals and agentless connections: a streamed page holds what smaller pages hold', async (t) => {
  const app = await build(t)
  const token = await login(app)
  streamAbove(t, 100)
  await fleet(app, 450, 520)
  const validAgents = validator(app, 'AgentsViewDataWrapper')
  const byHost = await paged(app, token, '/prime/webui/agents?SortBy=hostIdentifier_asc', 100)
  t.equal(byHost.recordsFiltered, 450)
  for (const query of ['SortBy=hostIdentifier_asc', 'SortBy=lastConfiguration_desc', 'Status=Armed&SortBy=uuid_desc', 'GlobalSearch=b&SortBy=hostIdentifier_desc']) {
    const small = query === 'SortBy=hostIdentifier_asc' ? byHost : await paged(app, token, `/prime/webui/agents?${query}`, 100)
    const big = await get(app, token, `/prime/webui/agents?${query}&PageSize=1000000`)
    t.equal(validAgents(big), '', `agents ${query}: valid against the contract`)
    t.same([big.recordsTotal, big.recordsFiltered], [small.recordsTotal, small.recordsFiltered], `agents ${query}: the same counts`)
    t.same(big.data, small.data, `agents ${query}: the same ${small.data.length} agents, fields and order`)
  }
  const second = await get(app, token, '/prime/webui/agents?SortBy=hostIdentifier_asc&PageSize=101&PageNumber=2')
  t.same(second.data, byHost.data.slice(101, 202), 'agents: page 2 of 101')

  const validPeripherals = validator(app, 'PeripheralsViewDataWrapper')
  for (const query of ['sortBy=hostUuid_asc', 'vendor=kingston', 'sortBy=serialNumber_desc']) {
    const small = await paged(app, token, `/prime/webui/peripherals?${query}`, 100)
    const big = await get(app, token, `/prime/webui/peripherals?${query}&pageSize=1000000`)
    t.equal(validPeripherals(big), '', `peripherals ${query}: valid against the contract`)
    t.same([big.recordsTotal, big.recordsFiltered], [small.recordsTotal, small.recordsFiltered], `peripherals ${query}: the same counts`)
    t.same(big.data, small.data, `peripherals ${query}: the same ${small.data.length} peripherals, fields and order`)
  }

  const STATUS = '/prime/webui/agents/agentless/connectiondetailsstatus'
  const status = await get(app, token, `${STATUS}?PageSize=1000000`)
  t.equal(validator(app, 'AgentslessRsStatusGetResponse')(status), '')
  t.same(status, await get(app, token, `${STATUS}?PageSize=100`), 'agentless connections: the same answer')
})
