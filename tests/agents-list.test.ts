// Pins GET agents and GET agents/agent/{agentId}: every filter, sort order and paging rule,
// and the bad inputs each answered 400 naming the field.
import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { addAgent, addCommand, addDebugLogs, addFleet, addPeripheral } from './fixtures/fleet.js'
import { latestAudit, portsOf, query, queryValue } from './seed.js'

const DAY = 86_400_000
const T0 = Date.UTC(2024, 4, 1, 12, 0, 0) // 2024-05-01 12:00:00 UTC

/** A small fleet whose every filtered field differs from agent to agent. */
async function fleet(app: FastifyInstance) {
  const pc1 = await addAgent(app, {
    host_identifier: 'DESKTOP-9LR722S',
    local_ip_address: '192.168.100.128',
    ip_addresses: '192.168.100.128 10.8.0.4',
    operational_status: 'Armed',
    connection_status: 'Connected',
    service_version: '4.2.1.118',
    os_version: 'Windows 10 Pro 22H2 (10.0.19045)',
    hashtags: '#finance #floor3',
    license_status: 'Activated',
    running_mode: 'Standard',
    last_configured_ms: T0,
    last_updated_ms: T0 + DAY,
    expiration_ms: T0 + 365 * DAY,
    pc_model: 'OptiPlex 7090',
    latest_event_text: 'New USB peripheral detected: Kingston DataTraveler',
  })
  const pc2 = await addAgent(app, {
    host_identifier: 'laptop-hr-07',
    local_ip_address: '192.168.100.140',
    ip_addresses: '192.168.100.140',
    operational_status: 'Free',
    connection_status: 'Connected',
    service_version: '4.1.7.3',
    os_version: 'Windows 11 Pro 23H2 (10.0.22631)',
    hashtags: '#hr',
    license_status: 'Expired',
    running_mode: 'VDI',
    last_configured_ms: T0 + 2 * 3600_000,
    last_updated_ms: T0 - DAY,
    expiration_ms: T0 - DAY,
    pc_model: 'Latitude 5440',
  })
  const srv = await addAgent(app, {
    host_identifier: 'SRV-FILES-01',
    local_ip_address: '10.0.0.5',
    ip_addresses: '10.0.0.5',
    operational_status: 'Armed',
    connection_status: 'Disconnected',
    service_version: '4.2.0.90',
    os_version: 'Windows Server 2022 (10.0.20348)',
    hashtags: null,
    license_status: 'Pending',
    running_mode: 'Server',
    last_configured_ms: null,
    last_updated_ms: T0 - 10 * DAY,
    expiration_ms: null,
    pc_model: 'PowerEdge R650',
  })
  // pc1: an unapproved mass storage device (armed: Warning), pc2: a known attack tool (Critical), srv: a vulnerable receiver (Error).
  await addPeripheral(app, pc1.id, { vid: '0951', pid: '1666', class_code: '08', subclass_code: '06', protocol_code: '50' })
  await addPeripheral(app, pc2.id, { vid: '16C0', pid: '0486' })
  await addPeripheral(app, srv.id, { vid: '046D', pid: 'C52B' })
  await query(app, "INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, '046D', 'C52B', 'Approved', 0, 'test')", srv.id)
  await portsOf(app).agentState.refreshAgent(srv.id)
  return { pc1, pc2, srv }
}

/** Asserts a 400 whose errors name the field. */
function invalid(t: Test, res: LightMyRequestResponse, name: string, location = 'query') {
  t.equal(res.statusCode, 400, `400 naming ${name}: ${res.body.slice(0, 300)}`)
  const body = res.json()
  t.equal(body.type, 'urn:prime:problem:validation')
  t.ok(
    body.errors?.some((e: any) => e.name === name && e.location === location),
    `errors name ${location}/${name}: ${JSON.stringify(body.errors)}`,
  )
  return body
}

t.test('GET agents', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const { pc1, pc2, srv } = await fleet(app)
  const get = (query: string) => call(app, token, { method: 'GET', url: `/prime/webui/agents?${query}` })
  /** The hostIdentifiers a query answers, in order. */
  const hosts = async (query: string) => {
    const res = await get(query)
    t.equal(res.statusCode, 200, `${query}: ${res.body.slice(0, 300)}`)
    return (res.json().data as { hostIdentifier: string }[]).map((a) => a.hostIdentifier)
  }
  const PC1 = 'DESKTOP-9LR722S',
    PC2 = 'laptop-hr-07',
    SRV = 'SRV-FILES-01'

  t.test('every agent with the contract fields, default order hostIdentifier asc (case-insensitive)', async (t) => {
    const res = await get('')
    t.equal(res.statusCode, 200)
    const body = res.json()
    t.equal(body.recordsTotal, 3)
    t.equal(body.recordsFiltered, 3)
    t.same(
      body.data.map((a: any) => a.hostIdentifier),
      [PC1, PC2, SRV],
    )
    const first = body.data[0]
    t.equal(first.uuid, pc1.uuid)
    t.equal(first.lastConfiguered, '2024-05-01T12:00:00.000Z', 'the historical spelling, ISO with milliseconds')
    t.equal(first.lastUpdated, '2024-05-02T12:00:00.000Z')
    t.equal(first.operationalStatus, 'Armed')
    t.equal(first.displayStatusCombined, 'Armed')
    t.equal(first.notApproved, 1)
    t.equal(first.hasUnapprovedPeripherals, true)
    t.equal(first.containsVulnerablePeripheralOrWLV, true, 'unapproved on an armed agent is a whitelist violation')
    t.equal(first.severity, 4)
    t.equal(first.hashtags, '#finance #floor3')
    t.equal(body.data[1].hasKnownAttackTools, true)
    t.equal(body.data[1].severity, 2)
    t.equal(body.data[2].hasVulnerablePeripherals, true)
    t.equal(body.data[2].approvedAndPresent, 1)
    t.equal(body.data[2].lastConfiguered, null)
    t.equal(body.data[2].displayStatusCombined, 'Disconnected')
  })

  t.test('text filters: case-insensitive contains, with trigrams (3+ characters) and without', async (t) => {
    t.same(await hosts('HostIdentifier=desktop-9lr'), [PC1])
    t.same(await hosts('hostIdentifier=HR'), [PC2], 'two characters, camelCase name')
    t.same(await hosts('HOSTIDENTIFIER=-'), [PC1, PC2, SRV], 'one character, name in any case')
    t.same(await hosts('hostIdentifier=nothing-like-it'), [])
    t.same(await hosts(`Uuid=${pc2.uuid.slice(9, 18).toUpperCase()}`), [PC2])
    t.same(await hosts(`uuid=${srv.uuid.slice(0, 2)}`).then((h) => h.includes(SRV)), true)
    t.same(await hosts('IpAddress=10.8.0'), [PC1], 'an address of a network adapter')
    t.same(await hosts('ipAddress=192.168.100.'), [PC1, PC2])
    t.same(await hosts('Version=4.2'), [PC1, SRV])
    t.same(await hosts('OsVersion=server'), [SRV])
    t.same(await hosts('Hashtags=%23HR'), [PC2])
    t.same(await hosts('Hashtags=%23f'), [PC1])
    t.same(await hosts('HostIdentifier=_'), [], '_ is no wildcard')
    t.same(await hosts('HostIdentifier=%25'), [], '% is no wildcard')
    t.same(await hosts('HostIdentifier=9LR%25'), [], '% is no wildcard in a trigram term either')
    invalid(t, await get('HostIdentifier=%00ab'), 'HostIdentifier')
    invalid(t, await get('GlobalSearch=abc%00'), 'GlobalSearch')
    for (const odd of ['%22%22%22', 'a%22b', '%7Bx%7D%3A', 'NOT%20OR', '%F0%9F%98%80%F0%9F%98%80%F0%9F%98%80', '*'.repeat(256)]) {
      t.same(await hosts(`HostIdentifier=${odd}&GlobalSearch=${odd}`), [], `${odd}: an ordinary term, never query syntax`)
    }
  })

  t.test('GlobalSearch looks in every searchable field', async (t) => {
    t.same(await hosts('GlobalSearch=kingston'), [PC1], 'latest event text')
    t.same(await hosts('globalSearch=LATITUDE'), [PC2], 'pc model')
    t.same(await hosts('GlobalSearch=10.0.0.5'), [SRV], 'address')
    t.same(await hosts(`GlobalSearch=${srv.uuid}`), [SRV], 'uuid')
    t.same(await hosts('GlobalSearch=%23hr'), [PC2], 'hashtags')
    t.same(await hosts('GlobalSearch=Acme'), [PC1, PC2, SRV], 'license account name')
    t.same(await hosts('GlobalSearch=hr'), [PC2], 'two characters')
    t.same(await hosts('GlobalSearch=desktop&HostIdentifier=laptop'), [], 'combined with other filters by AND')
  })

  t.test('booleans: True/False in any case, 1/0', async (t) => {
    for (const v of ['True', 'true', 'TRUE', '1']) t.same(await hosts(`HasUnapprovedPeripherals=${v}`), [PC1, PC2], v)
    for (const v of ['False', 'false', '0']) t.same(await hosts(`hasUnapprovedPeripherals=${v}`), [SRV], v)
    t.same(await hosts('hasKnownAttackTools=True'), [PC2])
    t.same(await hosts('HasVulnerablePeripherals=true'), [SRV])
    t.same(await hosts('ContainsVulnerablePeripheralOrWLV=True'), [PC1, SRV], 'a free agent with an unapproved device is no violation')
    invalid(t, await get('HasUnapprovedPeripherals=yes'), 'HasUnapprovedPeripherals')
  })

  t.test('Status, License and DeploymentMode: one value or a list, any case; an unknown value is named', async (t) => {
    t.same(await hosts('Status=Connected'), [PC1, PC2])
    t.same(await hosts('Status=connected,armed'), [PC1], 'different kinds AND-ed')
    t.same(await hosts('Status=Armed,Free'), [PC1, PC2, SRV], 'same kind OR-ed')
    t.same(await hosts('Status=Disconnected,Free'), [])
    const unknown = invalid(t, await get('Status=Connected,Sleeping'), 'Status')
    t.match(unknown.detail, /Sleeping/, 'names the unknown value')
    t.same(await hosts('License=expired,PENDING'), [PC2, SRV])
    invalid(t, await get('License=Bogus'), 'License')
    t.same(await hosts('DeploymentMode=vdi'), [PC2])
    t.same(await hosts('DeploymentMode=Server,Standard'), [PC1, SRV])
    invalid(t, await get('DeploymentMode=Cloud'), 'DeploymentMode')
    invalid(t, await get('Status=not%20a%20list'), 'Status')
  })

  t.test('Status matches the combined display status for pending work', async (t) => {
    const command = await addCommand(app, pc2.id, { type: 'UpdateAgent' })
    t.same(await hosts('Status=Updating'), [PC2])
    t.same(await hosts('Status=Updating,Arming'), [PC2])
    t.same(await hosts('Status=Updating,Armed'), [], 'pc2 is free')
    await query(app, "UPDATE agent_commands SET status = 'Cancelled' WHERE id = ?", command.id)
    await portsOf(app).agentState.refreshStatus(pc2.id)
    t.same(await hosts('Status=Updating'), [])
  })

  t.test('dates: a date alone is that UTC day, a date and time is at or after; null never matches', async (t) => {
    t.same(await hosts('LastConfiguration=2024-05-01'), [PC1, PC2])
    t.same(await hosts('LastConfiguration=2024-05-01T13:00:00Z'), [PC2])
    t.same(await hosts('lastConfiguration=2024-05-01 12:00:00'), [PC1, PC2])
    t.same(await hosts('LastConfiguration=2024-05-01T12:00:00.001Z'), [PC2])
    t.same(await hosts('LastConfiguration=2024-05-01T14:00:00%2B02:00'), [PC1, PC2], 'a zone offset')
    t.same(await hosts('LastConfiguration=2024-05-02'), [])
    t.same(await hosts('LastUpdated=2024-05-02'), [PC1])
    t.same(await hosts('LastUpdated=2024-04-22T00:00:00Z'), [PC1, PC2])
    t.same(await hosts('ExpirationDate=2024-04-30'), [PC2])
    invalid(t, await get('LastConfiguration=2024-13-01'), 'LastConfiguration')
    invalid(t, await get('LastConfiguration=2023-02-29'), 'LastConfiguration')
    invalid(t, await get('LastUpdated=yesterday'), 'LastUpdated')
  })

  t.test('Severity by name or number, exactly', async (t) => {
    t.same(await hosts('Severity=Warning'), [PC1])
    t.same(await hosts('severity=2'), [PC2])
    t.same(await hosts('Severity=error'), [SRV])
    t.same(await hosts('Severity=6'), [])
    invalid(t, await get('Severity=Severe'), 'Severity')
    invalid(t, await get('Severity=9'), 'Severity')
  })

  t.test('SortBy: every declared field, lastConfiguration as an alias, nulls last both ways', async (t) => {
    const op = app.contract.operations.get('getAgents')!
    for (const field of op.sortFields) {
      for (const dir of ['asc', 'desc']) {
        const res = await get(`SortBy=${field}_${dir}`)
        t.equal(res.statusCode, 200, `${field}_${dir}`)
        t.equal(res.json().data.length, 3)
      }
    }
    t.same(await hosts('sortBy=lastConfiguration_desc'), [PC2, PC1, SRV], "the clients' sort: newest first, never configured last")
    t.same(await hosts('SortBy=lastConfiguration_asc'), [PC1, PC2, SRV], 'nulls last ascending too')
    t.same(await hosts('SortBy=lastConfiguered_desc'), [PC2, PC1, SRV])
    t.same(await hosts('SortBy=LASTCONFIGURATION_DESC'), [PC2, PC1, SRV], 'field and direction in any case')
    t.same(await hosts('SortBy=hostIdentifier_desc'), [SRV, PC2, PC1])
    t.same(await hosts('SortBy=severity_asc'), [PC2, SRV, PC1])
    t.same(await hosts('SortBy=expirationDate_asc'), [PC2, PC1, SRV])
    t.same(await hosts('SortBy=expirationDate_desc'), [PC1, PC2, SRV])
    t.same(await hosts('SortBy=lastUpdated_asc'), [SRV, PC2, PC1])
    const unknown = invalid(t, await get('SortBy=password_asc'), 'SortBy')
    t.match(unknown.errors[0].reason, /lastConfiguration/, 'lists the sortable fields')
    invalid(t, await get('sortBy=hostIdentifier'), 'SortBy')
    invalid(t, await get('SortBy=hostIdentifier_up'), 'SortBy')
  })

  t.test('ties are broken by uuid, in the sort direction', async (t) => {
    const twins = []
    for (let i = 0; i < 4; i++) twins.push(await addAgent(app, { host_identifier: 'TWIN', os_version: 'Twin OS' }))
    const uuids = twins.map((a) => a.uuid).sort()
    const order = async (query: string) => ((await get(query)).json().data as any[]).map((a) => a.uuid)
    t.same(await order('HostIdentifier=TWIN&SortBy=hostIdentifier_asc'), uuids)
    t.same(await order('HostIdentifier=TWIN&SortBy=hostIdentifier_desc'), [...uuids].reverse())
    t.same(await order('HostIdentifier=TWIN&SortBy=osVersion_asc'), uuids)
    const paged = [...(await order('HostIdentifier=TWIN&PageSize=3')), ...(await order('HostIdentifier=TWIN&PageSize=3&PageNumber=2'))]
    t.same(paged, uuids, 'pages do not overlap or skip')
    for (const a of twins) await portsOf(app).agents.remove(a.id)
  })

  t.test('paging: 1-based, PageSize at most 1000000', async (t) => {
    const p2 = await get('PageSize=2&PageNumber=2')
    t.equal(p2.statusCode, 200)
    t.same(
      p2.json().data.map((a: any) => a.hostIdentifier),
      [SRV],
    )
    t.equal(p2.json().recordsFiltered, 3)
    t.equal(p2.json().recordsTotal, 3)
    t.same(await hosts('pageSize=1&pageNumber=1'), [PC1], 'camelCase names')
    t.same(await hosts('PageSize=2&PageNumber=5'), [], 'past the end: an empty page')
    t.same(await hosts('PageSize=1000000'), [PC1, PC2, SRV], 'the maximum')
    const over = invalid(t, await get('PageSize=1000001'), 'PageSize')
    t.match(over.detail, /1000000/, 'says what the maximum is')
    invalid(t, await get('pageSize=0'), 'PageSize')
    invalid(t, await get('PageNumber=0'), 'PageNumber')
    const filtered = (await get('Status=Connected&PageSize=1')).json()
    t.equal(filtered.recordsTotal, 3, 'recordsTotal counts every agent')
    // The sweeper disconnects these agents (checked in long ago) once its turn comes, a few seconds in.
    const connected = await queryValue(app, "SELECT count(*) FROM agents WHERE connection_status = 'Connected'")
    t.equal(filtered.recordsFiltered, connected, 'recordsFiltered those matching')
  })

  t.test('whichever way a page is read (filter index or sort index), the answer is the same; exports iterate the same order', async (t) => {
    for (const query of ['', 'Status=Connected', 'HostIdentifier=top', 'GlobalSearch=acme&SortBy=lastConfiguration_desc', 'Version=4&SortBy=severity_desc']) {
      const all = await hosts(`${query}&PageSize=100`)
      const onePerPage = [await hosts(`${query}&PageSize=1&PageNumber=1`), await hosts(`${query}&PageSize=1&PageNumber=2`), await hosts(`${query}&PageSize=1&PageNumber=3`)].flat()
      t.same(onePerPage, all.slice(0, 3), `${query || '(no filter)'}: pages of one`)
    }
    const exported = async (...args: Parameters<ReturnType<typeof portsOf>['exports']['agentIds']>) => {
      const exports = portsOf(app).exports
      const names: string[] = []
      for await (const a of await exports.agents(await exports.agentIds(...args))) names.push(a.host_identifier)
      return names
    }
    t.same(await exported({ globalSearch: 'acme' }, { field: 'lastConfiguration', direction: 'desc' }), [PC2, PC1, SRV])
    t.same(await exported({ hasUnapprovedPeripherals: true }, { field: 'hostIdentifier', direction: 'asc' }), [PC1, PC2])
  })

  t.test('a parameter without a value is left out', async (t) => {
    t.same(await hosts('HostIdentifier=&Status='), [PC1, PC2, SRV])
  })
})

t.test('GET agents/agent/{agentId}', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const { pc1 } = await fleet(app)
  const older = await addPeripheral(app, pc1.id, { vid: '046D', pid: 'C077', present: 0, last_seen_ms: T0 - DAY })
  const newer = await addPeripheral(app, pc1.id, { vid: '045E', pid: '07F8', last_seen_ms: T0 + DAY })
  const done = []
  for (let i = 0; i < 25; i++) done.push(await addCommand(app, pc1.id, { type: 'UpdateAgent', status: 'Succeeded', created_ms: T0 + i, completed_ms: T0 + i + 1 }))
  const delivered = await addCommand(app, pc1.id, { type: 'SetMode', parameters: '{"mode":"Free"}', status: 'Delivered', created_ms: T0 + 100, delivered_ms: T0 + 101 })
  const pending = await addCommand(app, pc1.id, { type: 'FetchDebugLogs', created_ms: T0 + 200 })

  const res = await call(app, token, { method: 'GET', url: `/prime/webui/agents/agent/${pc1.uuid.toUpperCase()}` })
  t.equal(res.statusCode, 200, res.body.slice(0, 300))
  const a = res.json()
  t.equal(a.uuid, pc1.uuid, 'uuid matched case-insensitively')
  t.equal(a.hostIdentifier, 'DESKTOP-9LR722S')
  t.type(a.machineId, 'string')
  t.match(a.enrolledTime, /Z$/)
  t.equal(a.isSystemLocked, false)
  t.equal(a.checkInIntervalSeconds, 60)
  t.same(a.loggedOnUsers, ['ACME\\jdoe'])
  t.equal(a.nics.length, 1)
  t.equal(a.nics[0].name, 'Ethernet')
  t.equal(a.nics[0].isEthernet, true)
  t.equal(a.displayStatusCombined, 'Freeing', "a SetMode towards Free is in the agent's hands")
  t.equal(a.inAction, true)
  t.same(
    a.peripherals.map((p: any) => p.present),
    [true, true, false],
    'present ones first',
  )
  t.same(
    a.peripherals.map((p: any) => p.vid),
    ['0951', '045E', '046D'],
    'each most recently seen first',
  )
  t.ok(older.id && newer.id)
  t.equal(a.peripherals[0].hashtags, '#finance #floor3 #unapproved', "the agent's tags then the risk tags")
  t.same(
    a.commands.slice(0, 2).map((c: any) => c.commandId),
    [pending.id, delivered.id],
    'open commands first, newest first',
  )
  t.equal(a.commands.length, 22, 'then the 20 most recent finished ones')
  t.same(
    a.commands.slice(2).map((c: any) => c.commandId),
    done
      .slice(5)
      .map((c) => c.id)
      .reverse(),
  )
  t.same(a.commands[1].parameters, { mode: 'Free' })
  t.equal(a.commands[1].deliveredTime, new Date(T0 + 101).toISOString())
  t.equal(a.commands[0].creationTimeEpoch, T0 + 200)

  const unknown = await call(app, token, { method: 'GET', url: '/prime/webui/agents/agent/00000000-0000-0000-0000-000000000000' })
  t.equal(unknown.statusCode, 404)
  t.equal(unknown.json().type, 'urn:prime:problem:not-found')
  const notUuid = await call(app, token, { method: 'GET', url: '/prime/webui/agents/agent/not-a-uuid' })
  t.equal(notUuid.statusCode, 404)
})

t.test('GET agents/agent/{agentId}/debuglogs', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'mona', 20)
  const user = await userWithProfile(app, admin, 'ulf', 10)
  const { pc1 } = await fleet(app)
  const url = `/prime/webui/agents/agent/${pc1.uuid}/debuglogs`

  const none = await call(app, manager, { method: 'GET', url })
  t.equal(none.statusCode, 404, 'no logs collected yet')
  t.match(none.json().detail, /fetchagentsdebuglogs/)

  await addDebugLogs(app, pc1.id, 'old logs', T0)
  await addDebugLogs(app, pc1.id, '2024-05-01 12:00:01.112 INFO  service started\n', T0 + 60_000)
  const res = await call(app, manager, { method: 'GET', url })
  t.equal(res.statusCode, 200, res.body.slice(0, 200))
  t.match(res.headers['content-type'], /^text\/plain; charset=utf-8/)
  t.equal(res.headers['content-disposition'], 'attachment; filename="DESKTOP-9LR722S-debuglogs-20240501T120100Z.log"')
  t.equal(res.body, '2024-05-01 12:00:01.112 INFO  service started\n', 'the latest logs')
  const [record] = await latestAudit(app)
  t.equal(record.operation_id, 'getAgentDebugLogs', 'the download is audited')
  t.equal(record.user_name, 'mona')
  t.equal(record.asset_key, pc1.uuid)
  t.equal(record.asset_type, 'Agent')

  t.equal((await call(app, user, { method: 'GET', url })).statusCode, 403, 'logs need the Manager profile')
  t.equal((await call(app, manager, { method: 'GET', url: '/prime/webui/agents/agent/00000000-0000-0000-0000-000000000000/debuglogs' })).statusCode, 404)
})

t.test("a flag filter alone is counted from the flag's total, which every change keeps right", async (t) => {
  const app = await build(t)
  const token = await login(app)
  await addFleet(app, { agents: 60, seed: 23 })
  const flags = [
    ['HasUnapprovedPeripherals', 'has_unapproved'],
    ['HasVulnerablePeripherals', 'has_vulnerable'],
    ['HasKnownAttackTools', 'has_attack_tool'],
    ['ContainsVulnerablePeripheralOrWLV', 'vulnerable_or_wlv'],
  ]
  const check = async (stage: string) => {
    for (const [param, column] of flags) {
      for (const value of [true, false]) {
        const res = await call(app, token, { method: 'GET', url: `/prime/webui/agents?${param}=${value}&PageSize=1` })
        const actual = await queryValue(app, `SELECT count(*) FROM agents WHERE ${column} = ?`, value ? 1 : 0)
        t.equal(res.json().recordsFiltered, actual, `${stage}: ${param}=${value} counts ${actual}`)
      }
    }
  }
  await check('after the fleet was written')
  for (const [, column] of flags) t.ok((await queryValue<number>(app, `SELECT count(*) FROM agents WHERE ${column} = 1`)) > 0, `some agents have ${column}`)
  // Pages in host order come from the flag's own index: the same agents, in the same order.
  for (const [param, column] of flags) {
    for (const value of [true, false]) {
      for (const dir of ['asc', 'desc']) {
        // Host names case-insensitively, then uuids (ASCII: both backends fold it alike).
        const rows = await query<{ uuid: string; host: string }>(app, `SELECT uuid, lower(host_identifier) AS host FROM agents WHERE ${column} = ?`, value ? 1 : 0)
        const byHost = (a: { uuid: string; host: string }, b: { uuid: string; host: string }) => (a.host < b.host ? -1 : a.host > b.host ? 1 : a.uuid < b.uuid ? -1 : a.uuid > b.uuid ? 1 : 0)
        const want = rows.sort((a, b) => (dir === 'asc' ? byHost(a, b) : byHost(b, a))).map((r) => r.uuid)
        const got: unknown[] = []
        for (let page = 1; page <= Math.ceil(want.length / 7) + 1; page++) {
          const res = await call(app, token, { method: 'GET', url: `/prime/webui/agents?${param}=${value}&SortBy=hostIdentifier_${dir}&PageSize=7&PageNumber=${page}` })
          got.push(...res.json().data.map((a: { uuid: string }) => a.uuid))
        }
        t.same(got, want, `${param}=${value} hostIdentifier_${dir}, page by page`)
      }
    }
  }

  // Approving every model of the flagged agents clears their flag (through db/agent-state.ts).
  const flagged = await query<{ host_identifier: string; vid: string; pid: string }>(
    app,
    `SELECT a.host_identifier, p.vid, p.pid FROM agents a JOIN peripherals p ON p.agent_id = a.id
    WHERE a.has_unapproved = 1 AND p.is_unapproved = 1 ORDER BY a.id LIMIT 20`,
  )
  const res = await call(app, token, {
    method: 'POST',
    url: '/prime/webui/peripherals/command',
    payload: { opCode: 'APPROVE', peripheralsIds: flagged.map((p) => ({ hostIdentifier: p.host_identifier, vid: p.vid, pid: p.pid })) },
  })
  t.equal(res.statusCode, 200, res.body.slice(0, 300))
  await check('after approvals')

  await query(app, 'UPDATE agents SET has_vulnerable = 1, vulnerable_or_wlv = 1, has_attack_tool = id % 2 WHERE id % 7 = 0')
  await check('after flags were set')
  const uuids = (await query<{ uuid: string }>(app, 'SELECT uuid FROM agents ORDER BY has_unapproved + has_vulnerable + has_attack_tool DESC, id LIMIT 6')).map((r) => r.uuid)
  const deleted = await call(app, token, { method: 'POST', url: '/prime/webui/agents/deleteAgents', payload: uuids })
  t.equal(deleted.statusCode, 200, deleted.body.slice(0, 300))
  await check('after deletes')
})
