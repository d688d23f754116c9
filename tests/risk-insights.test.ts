// Pins the risk insights: what each one counts, its order and limits, the date rules of
// the error totals, and the cache rules of the reloadable ones (an hour; a reload within
// 10 s answers the last result).
import crypto from 'node:crypto'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call, sqliteOnly } from './helpers.js'
import { holdIndexing, indexEvents, insertRows, portsOf, query, queryValue, recordEvents, stepIndex } from './seed.js'
import { violationsView } from '../lib/insights/views.js'

const BASE = '/prime/webui/agents'
const DAY = 86_400_000

type Row = Record<string, string | number | null>

/** A row of the table, on either backend: its id. */
async function insertRow(app: FastifyInstance, table: string, row: Row): Promise<number> {
  const cols = Object.keys(row)
  return queryValue<number>(app, `INSERT INTO ${table} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')}) RETURNING id`, ...Object.values(row))
}

async function insertAgent(app: FastifyInstance, partial: Row = {}): Promise<{ id: number; uuid: string }> {
  const uuid = crypto.randomUUID()
  const row: Row = { uuid, machine_id: crypto.randomUUID(), enrolled_ms: Date.now(), host_identifier: `HOST-${uuid.slice(0, 8)}`, ...partial }
  return { id: await insertRow(app, 'agents', row), uuid: String(row.uuid) }
}

async function insertPeripheral(app: FastifyInstance, agent: { id: number; uuid: string }, partial: Row = {}): Promise<number> {
  const now = Date.now()
  const vid = String(partial.vid ?? '0951')
  const pid = String(partial.pid ?? '1666')
  const row: Row = {
    agent_id: agent.id,
    agent_uuid: agent.uuid,
    device_id: `USB\\VID_${vid}&PID_${pid}\\${crypto.randomBytes(4).toString('hex')}`,
    vid,
    pid,
    dev_icon: 3,
    first_seen_ms: now,
    last_seen_ms: now,
    ...partial,
  }
  const id = await insertRow(app, 'peripherals', row)
  await portsOf(app).agentState.refreshAgent(agent.id)
  return id
}

async function approve(app: FastifyInstance, agent: { id: number }, vid: string, pid: string) {
  await query(app, "INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, ?, ?, 'Approved', ?, 'test')", agent.id, vid, pid, Date.now())
  await portsOf(app).agentState.refreshAgent(agent.id)
}

const get = async (app: FastifyInstance, token: string, path: string) => {
  const res = await call(app, token, { method: 'GET', url: BASE + path })
  return { status: res.statusCode, body: res.statusCode === 200 ? res.json() : res.body, raw: res }
}

t.test('logged agents: the connected ones, newest check-in first, with their logged-on users', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  const older = await insertAgent(app, {
    host_identifier: 'OLDER',
    connection_status: 'Connected',
    last_updated_ms: now - 60_000,
    logged_on_users: '["ACME\\\\jdoe"]',
    operational_status: 'Armed',
    display_status: 'Armed',
    local_ip_address: '10.0.0.1',
  })
  const newer = await insertAgent(app, { host_identifier: 'NEWER', connection_status: 'Connected', last_updated_ms: now - 1000, logged_on_users: 'not json', display_status: 'Free' })
  await insertAgent(app, { host_identifier: 'GONE', connection_status: 'Disconnected', last_updated_ms: now - 3_600_000 })
  const { status, body } = await get(app, token, '/getloggedagents')
  t.equal(status, 200, JSON.stringify(body))
  t.match(body, { recordsTotal: 2, recordsFiltered: 2, disconnectAfterSeconds: 180 })
  t.same(
    body.data.map((a: any) => a.uuid),
    [newer.uuid, older.uuid],
  )
  t.same(body.data[1], {
    uuid: older.uuid,
    hostIdentifier: 'OLDER',
    localIpAddress: '10.0.0.1',
    operationalStatus: 'Armed',
    displayStatusCombined: 'Armed',
    lastUpdated: new Date(now - 60_000).toISOString(),
    loggedOnUsers: ['ACME\\jdoe'],
  })
  t.same(body.data[0].loggedOnUsers, [], 'an unreadable list is empty, not an error')
})

t.test('policy test: what arming would block, and approved peripherals that are still risky', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const free = await insertAgent(app, { host_identifier: 'b-free', operational_status: 'Free', connection_status: 'Connected' })
  const armed = await insertAgent(app, { host_identifier: 'A-armed', operational_status: 'Armed' })
  const clean = await insertAgent(app, { host_identifier: 'C-clean' })
  await insertPeripheral(app, free, { vid: '0951', pid: '1666', gui_vid: 'Kingston Technology' })
  await insertPeripheral(app, free, { vid: '0781', pid: '5581', present: 0 })
  await insertPeripheral(app, armed, { vid: '0951', pid: '1666' })
  await insertPeripheral(app, armed, { vid: '0483', pid: '5740', dev_icon: 12 })
  await approve(app, armed, '0483', '5740')
  await insertPeripheral(app, clean, { vid: '046D', pid: 'C077', dev_icon: 2 })
  await approve(app, clean, '046D', 'C077')

  const { status, body } = await get(app, token, '/getPolicyTest')
  t.equal(status, 200, JSON.stringify(body))
  t.match(body, { agentsEvaluated: 3, agentsWithFindings: 2, wouldBlock: 2, knownAttackTools: 1, vulnerablePeripherals: 0, truncated: false })
  t.same(
    body.data.map((a: any) => a.hostIdentifier),
    ['A-armed', 'b-free'],
    'ordered by host name, any case',
  )
  const [a, b] = body.data
  t.match(a, { uuid: armed.uuid, operationalStatus: 'Armed', connectionStatus: 'Disconnected' })
  const byVid = Object.fromEntries(a.findings.map((f: any) => [f.vid, f]))
  t.match(byVid['0951'], { approved: false, outcomeIfArmed: 'Blocked', blockedNow: true, reason: 'Not approved on this agent.' })
  t.match(byVid['0483'], { approved: true, isKnownAttackTool: true, outcomeIfArmed: 'Allowed', blockedNow: false, devIcon: 12, devIconDescription: 'Communication', guiVid: 'STMicroelectronics' })
  t.match(byVid['0483'].reason, /known attack tool/)
  t.equal(b.findings.length, 1, 'a peripheral not present is no finding')
  t.match(b.findings[0], { vid: '0951', guiVid: 'Kingston Technology', outcomeIfArmed: 'Blocked', blockedNow: false, devIconDescription: 'Mass Storage' })
})

t.test('error totals: reported errors and failed commands per day and per agent, in the date range', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const a = await insertAgent(app, { host_identifier: 'alpha', local_ip_address: '10.0.0.5' })
  const b = await insertAgent(app, { host_identifier: 'beta' })
  const at = (s: string) => Date.parse(s)
  const err = (...values: unknown[]) => query(app, 'INSERT INTO agent_errors (agent_id, time_ms, code, message) VALUES (?, ?, ?, ?)', ...values)
  await err(a.id, at('2024-12-30T09:00:00Z'), 'DRV', 'driver fault')
  await err(a.id, at('2024-12-30T23:59:59.999Z'), 'DRV', 'driver fault again')
  await err(b.id, at('2024-12-31T00:00:00Z'), 'SVC', 'service crashed')
  await err(b.id, at('2024-12-20T00:00:00Z'), 'SVC', 'too early')
  const cmd = (...values: unknown[]) =>
    query(app, "INSERT INTO agent_commands (agent_id, type, status, created_ms, created_by, completed_ms, result_message) VALUES (?, ?, ?, ?, 'admin', ?, ?)", ...values)
  await cmd(a.id, 'UpdateAgent', 'Failed', at('2024-12-29T00:00:00Z'), at('2024-12-31T10:00:00Z'), 'package download timed out')
  await cmd(a.id, 'SetMode', 'Succeeded', at('2024-12-29T00:00:00Z'), at('2024-12-31T11:00:00Z'), null)

  const { status, body } = await get(app, token, '/errorTotal?FromDate=2024-12-25&ToDate=2024-12-31')
  t.equal(status, 200, JSON.stringify(body))
  t.match(body, { fromDate: '2024-12-25T00:00:00.000Z', toDate: '2024-12-31T23:59:59.999Z', totalErrors: 4, reportedErrors: 3, failedCommands: 1, agentsWithErrors: 2 })
  t.same(body.byDay, [
    { date: '2024-12-30', reportedErrors: 2, failedCommands: 0, total: 2 },
    { date: '2024-12-31', reportedErrors: 1, failedCommands: 1, total: 2 },
  ])
  t.same(body.data[0], {
    uuid: a.uuid,
    hostIdentifier: 'alpha',
    localIpAddress: '10.0.0.5',
    total: 3,
    reportedErrors: 2,
    failedCommands: 1,
    lastErrorTime: '2024-12-31T10:00:00.000Z',
    lastErrorText: 'UpdateAgent failed: package download timed out',
  })
  t.match(body.data[1], { uuid: b.uuid, total: 1, lastErrorText: 'service crashed' })

  const instants = await get(app, token, '/errorTotal?fromDate=2024-12-30T09:00:00Z&toDate=2024-12-30 23:59:59')
  t.match(instants.body, { totalErrors: 1, toDate: '2024-12-30T23:59:59.000Z' }, 'a time means that instant, inclusive at both ends')
  const zoned = await get(app, token, '/errorTotal?FromDate=2024-12-31T01:00:00%2B02:00&ToDate=2024-12-31T00:00:00Z')
  t.match(zoned.body, { fromDate: '2024-12-30T23:00:00.000Z', totalErrors: 2 }, 'an offset is applied')

  const defaults = await get(app, token, '/errorTotal')
  t.equal(defaults.status, 200)
  const span = Date.parse(defaults.body.toDate) - Date.parse(defaults.body.fromDate)
  t.equal(span, 7 * DAY, 'defaults: the 7 days up to now')
  t.ok(Math.abs(Date.parse(defaults.body.toDate) - Date.now()) < 60_000)
  t.same(defaults.body.byDay, [])

  const reversed = await get(app, token, '/errorTotal?FromDate=2025-01-02&ToDate=2025-01-01')
  t.equal(reversed.status, 400)
  t.match(reversed.body, /FromDate/)
  const tooLong = await get(app, token, '/errorTotal?FromDate=2023-01-01&ToDate=2024-12-31')
  t.equal(tooLong.status, 400)
  const yearOk = await get(app, token, '/errorTotal?FromDate=2024-01-01&ToDate=2024-12-31')
  t.equal(yearOk.status, 200, 'a leap year from its first to its last day is 366 days')
  const futureFrom = await get(app, token, '/errorTotal?FromDate=2999-01-01')
  t.equal(futureFrom.status, 400, 'FromDate after the default ToDate (now)')
  const notADate = await get(app, token, '/errorTotal?FromDate=2024-02-30')
  t.equal(notADate.status, 400)
})

t.test('uncommon peripherals: models present on few hosts, cached for an hour, reload answers the last result within 10 s', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const agents: { id: number; uuid: string }[] = []
  for (const i of [0, 1, 2, 3]) agents.push(await insertAgent(app, { host_identifier: `host-${i}` }))
  const now = Date.now()
  await insertPeripheral(app, agents[0], { vid: '1D6B', pid: '0104', dev_icon: 14, first_seen_ms: now - 5000, last_seen_ms: now - 1000 })
  await insertPeripheral(app, agents[1], { vid: '1D6B', pid: '0104', dev_icon: 14, present: 0, first_seen_ms: now - 9000, last_seen_ms: now - 8000 })
  for (const a of agents.slice(0, 3)) await insertPeripheral(app, a, { vid: '046D', pid: 'C077', dev_icon: 2 })
  await insertPeripheral(app, agents[2], { vid: '0781', pid: '5581', last_seen_ms: now - 2000 })
  await insertPeripheral(app, agents[3], { vid: '0781', pid: '5581', last_seen_ms: now - 3000 })
  await insertPeripheral(app, agents[3], { vid: '05E3', pid: '0610', dev_icon: 4 })
  await insertPeripheral(app, agents[3], { vid: '0000', pid: '0000', dev_icon: 13 })
  await insertPeripheral(app, agents[3], { vid: 'AAAA', pid: 'BBBB', present: 0 })

  const first = await get(app, token, '/RiskInsights/UncommonPeripherals')
  t.equal(first.status, 200, JSON.stringify(first.body))
  t.match(first.body, { maxHosts: 2, agentsConsidered: 4, recordsTotal: 2 })
  t.same(
    first.body.data.map((m: any) => `${m.vid}:${m.pid}`),
    ['1D6B:0104', '0781:5581'],
    'fewest hosts first; hubs, no-VID and absent models left out',
  )
  t.match(first.body.data[0], {
    guiVid: 'Linux Foundation',
    guiPid: 'Multifunction Composite Gadget',
    devIcon: 14,
    devIconDescription: 'HID',
    hostsCount: 1,
    peripheralsCount: 1,
    presentCount: 1,
    firstSeen: new Date(now - 5000).toISOString(),
    lastSeen: new Date(now - 1000).toISOString(),
    hosts: [{ uuid: agents[0].uuid, hostIdentifier: 'host-0', localIpAddress: null }],
  })
  t.match(first.body.data[1], { hostsCount: 2, presentCount: 2, hosts: [{ hostIdentifier: 'host-2' }, { hostIdentifier: 'host-3' }] })

  // New data: the cached answer stays until it is an hour old, and a reload within 10 s answers it too.
  const late = await insertAgent(app, { host_identifier: 'late' })
  await insertPeripheral(app, late, { vid: '16C0', pid: '0486', dev_icon: 14 })
  const cached = await get(app, token, '/RiskInsights/UncommonPeripherals')
  t.same(cached.body, first.body, 'cached')
  const burst = await get(app, token, '/RiskInsights/UncommonPeripherals/Reload')
  t.same(burst.body, first.body, 'a reload within 10 s of the last computation answers it')

  await query(app, 'UPDATE insight_cache SET computed_ms = computed_ms - 11000')
  const reloaded = await get(app, token, '/riskinsights/uncommonperipherals/reload')
  t.equal(reloaded.status, 200)
  t.not(reloaded.body.computedTime, first.body.computedTime)
  t.match(reloaded.body, { agentsConsidered: 5, recordsTotal: 3 })
  t.same(await get(app, token, '/RiskInsights/UncommonPeripherals').then((r) => r.body), reloaded.body, 'the reload replaced the cache')

  await query(app, 'UPDATE insight_cache SET computed_ms = computed_ms - 3600000')
  const stale = await get(app, token, '/RiskInsights/UncommonPeripherals')
  t.not(stale.body.computedTime, reloaded.body.computedTime, 'an hour-old result is computed again')

  const [burstA, burstB] = await Promise.all([get(app, token, '/RiskInsights/UncommonPeripherals/Reload'), get(app, token, '/RiskInsights/UncommonPeripherals/Reload')])
  t.same(burstA.body, burstB.body, 'concurrent reloads answer one computation')
})

t.test('uncommon peripherals: nothing is uncommon in a fleet no larger than the threshold', async (t) => {
  const app = await build(t, { PRIME_UNCOMMON_PERIPHERAL_MAX_HOSTS: '3' })
  const token = await login(app)
  for (let i = 0; i < 3; i++) await insertPeripheral(app, await insertAgent(app), { vid: '1D6B', pid: '0104' })
  const res = await get(app, token, '/RiskInsights/UncommonPeripherals')
  t.match(res.body, { maxHosts: 3, agentsConsidered: 3, recordsTotal: 0, data: [] })
})

t.test('vulnerable peripherals: models in the catalogue that agents reported, most severe first', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const a = await insertAgent(app, { host_identifier: 'a' })
  const b = await insertAgent(app, { host_identifier: 'b' })
  const c = await insertAgent(app, { host_identifier: 'c' })
  for (const x of [a, b, c]) await insertPeripheral(app, x, { vid: '046D', pid: 'C52B', dev_icon: 1 })
  await approve(app, a, '046D', 'C52B')
  await insertPeripheral(app, c, { vid: '046D', pid: 'C52B', dev_icon: 1, present: 0 })
  await insertPeripheral(app, b, { vid: '1D6B', pid: '0104', dev_icon: 14, present: 0 })
  await insertPeripheral(app, c, { vid: '0951', pid: '1666' })

  const res = await get(app, token, '/RiskInsights/VulnerablePeripherals')
  t.equal(res.status, 200, JSON.stringify(res.body))
  t.equal(res.body.recordsTotal, 2)
  t.match(
    res.body.data[0],
    {
      vid: '1D6B',
      pid: '0104',
      kind: 'KnownAttackTool',
      severity: 2,
      catalogueEntryId: '1f0c6b8e-7d2a-4e31-9b5c-3a8d0e6f4c21',
      hostsCount: 1,
      presentCount: 0,
      approvedCount: 0,
      hosts: [{ uuid: b.uuid }],
    },
    'an attack tool reported earlier, not present now, comes first (more severe)',
  )
  t.match(res.body.data[1], {
    vid: '046D',
    pid: 'C52B',
    kind: 'VulnerableDevice',
    severity: 3,
    guiVid: 'Logitech, Inc.',
    guiPid: 'Unifying Receiver',
    devIconDescription: 'Keyboard',
    hostsCount: 3,
    presentCount: 3,
    approvedCount: 1,
    hosts: [{ hostIdentifier: 'a' }, { hostIdentifier: 'b' }, { hostIdentifier: 'c' }],
  })
  const reload = await get(app, token, '/RiskInsights/VulnerablePeripherals/Reload')
  t.same(reload.body, res.body, 'within 10 s of the last computation')
})

t.test(
  'whitelist violations are read a slice at a time (a block of 4,096 ids of the event index, or above its mark), the same either way',
  sqliteOnly("the slices of SQLite's event index (its blocks of ids and its mark)"),
  async (t) => {
    const app = await build(t)
    app.repos.eventQueries.holdIndexing(true)
    const now = Date.now()
    const ev = app.db.prepare(
      `INSERT INTO events (id, created_ms, event_code, severity, category, entity_id, description, details, peripheral_icon, asset_key, asset_name, peripheral_vid, peripheral_pid)
     VALUES (?, ?, '0x110007', 4, 'USB', 'src', 'd', '', 3, ?, ?, '0951', '1666')`,
    )
    // Ids far apart: two blocks of the index, 49 slices of ids above its mark.
    const hosts = Array.from({ length: 25 }, (_, i) => crypto.randomUUID().replace(/^./, String.fromCharCode(97 + i)))
    hosts.forEach((h, i) => ev.run(1 + i, now - DAY, h, `HOST-${i}`))
    ev.run(200_000, now - DAY / 2, hosts[0], 'HOST-0-RENAMED')
    const answer = async () => {
      let pauses = 0
      const rows = await app.repos.insights.whitelistViolations(
        now - 30 * DAY,
        now,
        async () => {
          pauses++
        },
        0,
      )
      const w = violationsView(now - 30 * DAY, now, rows)
      return { pauses, w }
    }
    const unindexed = await answer()
    t.equal(unindexed.pauses, 49, 'ids 1 to 200,000 above the mark: 49 slices')
    app.repos.eventQueries.catchUp()
    const indexed = await answer()
    t.equal(indexed.pauses, 2, 'indexed: the two blocks that hold violations')
    t.same(indexed.w, unindexed.w)
    const [m] = indexed.w.data
    t.match(m, { violationsCount: 26, hostsCount: 25 })
    t.equal(m.hosts.length, 20, 'up to 20 hosts listed')
    t.same(m.hosts.map((h) => h.uuid).sort(), [...hosts].sort().slice(0, 20), 'the first 20 by asset key')
    t.ok(
      m.hosts.some((h) => h.hostIdentifier === 'HOST-0-RENAMED'),
      'a host is named by the greatest name its events gave',
    )
  },
)

t.test('unique whitelist violations of the last 30 days, by model', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const a = await insertAgent(app, { host_identifier: 'alpha', local_ip_address: '10.1.1.1' })
  const b = await insertAgent(app, { host_identifier: 'Beta' })
  const now = Date.now()
  const ev = (createdMs: number, code: string, peripheralIcon: number, assetKey: string, assetName: string, peripheralVid: string, peripheralPid: string) =>
    recordEvents(app, createdMs, [{ code, severity: 4, category: 'USB', entityId: 'src', description: 'd', details: '', peripheralIcon, assetKey, assetName, peripheralVid, peripheralPid }])
  await ev(now - 2 * DAY, '0x110004', 3, a.uuid, 'alpha', '0951', '1666')
  await ev(now - 1 * DAY, '0x110004', 3, a.uuid, 'alpha', '0951', '1666')
  await ev(now - 3 * DAY, '0x110004', 3, b.uuid, 'Beta', '0951', '1666')
  const gone = crypto.randomUUID()
  await ev(now - 4 * DAY, '0x110004', 3, gone, 'DELETED-HOST', '0951', '1666')
  await ev(now - 5 * DAY, '0x110004', 14, b.uuid, 'Beta', '16c0', '0486')
  await ev(now - 31 * DAY, '0x110004', 3, a.uuid, 'alpha', 'AAAA', 'BBBB')
  await ev(now - 1 * DAY, '0x110001', 3, a.uuid, 'alpha', 'CCCC', 'DDDD')
  // The same answer whatever part of the events the event index holds (it finds the
  // indexed ones; the rest are read from the table).
  holdIndexing(app, true)
  const unindexed = (await get(app, token, '/UniqueWhitelistViolation')).body
  stepIndex(app, 'events', 3)
  const part = (await get(app, token, '/UniqueWhitelistViolation')).body
  indexEvents(app)
  if (app.storage.backend === 'sqlite') t.equal(app.repos.eventQueries.indexer.indexed('events'), app.db.prepare('SELECT max(id) FROM events').pluck().get())

  const res = await get(app, token, '/UniqueWhitelistViolation')
  for (const other of [unindexed, part]) t.same([other.recordsTotal, other.data], [res.body.recordsTotal, res.body.data])
  t.equal(res.status, 200, JSON.stringify(res.body))
  const span = Date.parse(res.body.toTime) - Date.parse(res.body.fromTime)
  t.equal(span, 30 * DAY)
  t.equal(res.body.recordsTotal, 2, 'only violations, only in the window')
  t.match(res.body.data[0], {
    vid: '0951',
    pid: '1666',
    guiVid: 'Kingston Technology',
    devIcon: 3,
    devIconDescription: 'Mass Storage',
    violationsCount: 4,
    hostsCount: 3,
    firstSeen: new Date(now - 4 * DAY).toISOString(),
    lastSeen: new Date(now - DAY).toISOString(),
  })
  t.same(
    res.body.data[0].hosts,
    [
      { uuid: a.uuid, hostIdentifier: 'alpha', localIpAddress: '10.1.1.1' },
      { uuid: b.uuid, hostIdentifier: 'Beta', localIpAddress: null },
      { uuid: gone, hostIdentifier: 'DELETED-HOST', localIpAddress: null },
    ],
    'a deleted agent is named as its events named it',
  )
  t.match(res.body.data[1], { vid: '16C0', pid: '0486', violationsCount: 1, hostsCount: 1, devIcon: 14 })
})

t.test('classification summary: agents by class, risk flags, present peripherals by device class', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const a = await insertAgent(app, {
    connection_status: 'Connected',
    operational_status: 'Armed',
    display_status: 'Armed',
    license_status: 'Activated',
    running_mode: 'Standard',
    os_version: 'Windows 11',
    service_version: '4.2',
  })
  const b = await insertAgent(app, {
    connection_status: 'Connected',
    operational_status: 'Armed',
    display_status: 'Armed',
    license_status: 'Activated',
    running_mode: 'VDI',
    os_version: 'Windows 11',
    service_version: '4.2',
  })
  await insertAgent(app, { license_status: 'Pending' })
  await insertPeripheral(app, a, { vid: '0951', pid: '1666', dev_icon: 3 })
  await insertPeripheral(app, a, { vid: '046D', pid: 'C077', dev_icon: 2 })
  await approve(app, a, '046D', 'C077')
  await insertPeripheral(app, b, { vid: '16C0', pid: '0486', dev_icon: 14 })
  await insertPeripheral(app, b, { vid: '046D', pid: 'C077', dev_icon: 2, present: 0 })

  const res = await get(app, token, '/AgentsClassificationSummary')
  t.equal(res.status, 200, JSON.stringify(res.body))
  const s = res.body
  t.equal(s.totalAgents, 3)
  t.same(s.byConnectionStatus, [
    { name: 'Connected', count: 2 },
    { name: 'Disconnected', count: 1 },
  ])
  t.same(s.byOperationalStatus, [
    { name: 'Armed', count: 2 },
    { name: 'Free', count: 1 },
  ])
  t.same(s.byDisplayStatus, [
    { name: 'Armed', count: 2 },
    { name: 'Disconnected', count: 1 },
  ])
  t.same(s.byLicenseStatus, [
    { name: 'Activated', count: 2 },
    { name: 'Pending', count: 1 },
  ])
  t.same(
    s.byOsVersion,
    [
      { name: 'Windows 11', count: 2 },
      { name: null, count: 1 },
    ],
    'null: not reported',
  )
  t.same(s.byRunningMode.map((r: any) => r.name).sort(), [null, 'Standard', 'VDI'].sort())
  t.same(s.bySeverity, [
    { severity: 2, severityString: 'Critical', count: 1 },
    { severity: 4, severityString: 'Warning', count: 1 },
    { severity: 6, severityString: 'Informational', count: 1 },
  ])
  t.same(s.risk, { withUnapprovedPeripherals: 2, withVulnerablePeripherals: 0, withKnownAttackTools: 1, withVulnerablePeripheralOrWLV: 2, inAction: 0 })
  t.same(s.peripheralsByClass, [
    { devIcon: 2, devIconDescription: 'Mouse', present: 1, approved: 1, notApproved: 0 },
    { devIcon: 3, devIconDescription: 'Mass Storage', present: 1, approved: 0, notApproved: 1 },
    { devIcon: 14, devIconDescription: 'HID', present: 1, approved: 0, notApproved: 1 },
  ])
})

t.test('classification summary: the connection and display statuses as the agents hold them, through a mass disconnect', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const modes = ['Armed', 'Free'] as const
  const agents: { id: number; uuid: string }[] = []
  for (let i = 0; i < 12; i++) agents.push(await insertAgent(app, { connection_status: 'Connected', operational_status: modes[i % 2], display_status: modes[i % 2], last_updated_ms: 1000 + i }))
  // Every third one is being armed or updated: its display status says so (db/agent-state.ts).
  const command = (...values: unknown[]) => query(app, "INSERT INTO agent_commands (agent_id, type, parameters, created_ms, created_by) VALUES (?, ?, ?, 0, 'test')", ...values)
  for (const [i, a] of agents.entries()) {
    if (i % 3 === 0) await command(a.id, i % 2 ? 'UpdateAgent' : 'SetMode', i % 2 ? '{}' : '{"mode":"Armed"}')
    await portsOf(app).agentState.refreshAgent(a.id)
  }
  await insertAgent(app, { license_status: 'Pending' })
  const asStored = async (column: string) =>
    (await query<{ name: string; count: number }>(app, `SELECT ${column} AS name, count(*) AS count FROM agents GROUP BY 1 ORDER BY 2 DESC, 1`)).map((r) => ({ name: r.name, count: r.count }))
  const check = async (when: string) => {
    const s = (await get(app, token, '/AgentsClassificationSummary')).body
    t.same(s.byConnectionStatus, await asStored('connection_status'), `connection, ${when}`)
    t.same(s.byDisplayStatus, await asStored('display_status'), `display, ${when}`)
  }
  await check('all but one connected')
  const display = await asStored('display_status')
  t.ok(display.some((r) => r.name === 'Arming') && display.some((r) => r.name === 'Updating'), 'display statuses of their own among them')
  // The sweeper's disconnect: seven of them, quiet since before 2000.
  t.equal(
    (
      await portsOf(app).gatewayStore.disconnectMany(
        agents.slice(0, 7).map((a) => a.id),
        2000,
        'Agent disconnected',
      )
    ).length,
    7,
  )
  await check('seven disconnected')
  t.equal(
    (
      await portsOf(app).gatewayStore.disconnectMany(
        agents.map((a) => a.id),
        2000,
        'Agent disconnected',
      )
    ).length,
    5,
  )
  await check('every agent disconnected')
})

t.test('classification summary: the 50 most common values, the rest under Other', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const row = (host: string, os: string) => ({ uuid: crypto.randomUUID(), machine_id: crypto.randomUUID(), enrolled_ms: 0, host_identifier: host, os_version: os })
  await insertRows(app, 'agents', [...Array.from({ length: 60 }, (_, i) => row(`h${i}`, `OS ${String(i).padStart(2, '0')}`)), ...Array.from({ length: 5 }, (_, i) => row(`x${i}`, 'OS common'))])
  const res = await get(app, token, '/AgentsClassificationSummary')
  const os = res.body.byOsVersion
  t.equal(os.length, 51)
  t.same(os[0], { name: 'OS common', count: 5 })
  t.same(os[50], { name: 'Other', count: 11 })
  t.equal(
    os.reduce((n: number, r: any) => n + r.count, 0),
    65,
  )
})

t.test('the insights answer an empty fleet', async (t) => {
  const app = await build(t)
  const token = await login(app)
  for (const path of [
    '/getloggedagents',
    '/getPolicyTest',
    '/errorTotal',
    '/RiskInsights/UncommonPeripherals',
    '/RiskInsights/UncommonPeripherals/Reload',
    '/RiskInsights/VulnerablePeripherals',
    '/RiskInsights/VulnerablePeripherals/Reload',
    '/UniqueWhitelistViolation',
    '/AgentsClassificationSummary',
  ]) {
    const res = await get(app, token, path)
    t.equal(res.status, 200, `${path}: ${JSON.stringify(res.body)}`)
  }
})
