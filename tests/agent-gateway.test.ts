// Pins the agent gateway: enrollment and its credential, what a check-in stores and which
// events it raises, and who may call the gateway (agents only, and only agents).
import crypto from 'node:crypto'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call } from './helpers.js'
import { lastAuditId, latestAudit, query, queryOne } from './seed.js'
import { ENROLLMENT_SECRET, attackTool, checkIn, enroll, gatewayEnv, hostState, mouse, stick } from './fixtures/gateway.js'

const SECRET = ENROLLMENT_SECRET
const env = gatewayEnv
const ENROLL = '/prime/webui/gateway/enroll'
const CHECKIN = '/prime/webui/gateway/checkin'
const state = hostState

const unknownGadget = {
  deviceID: 'USB\\VID_ABCD&PID_0001\\XYZ',
  vid: 'abcd',
  pid: '0001',
  serialNumber: 'XYZ',
  manufacturer: 'Acme',
  caption: 'Gadget',
  present: true,
}

const enrollReq = (app: FastifyInstance, body: Record<string, unknown>, remoteAddress = '127.0.0.1') => app.inject({ method: 'POST', url: ENROLL, payload: body, remoteAddress })

const row = async <T = Record<string, any>>(app: FastifyInstance, sql: string, ...args: unknown[]) => (await queryOne(app, sql, ...args)) as T
const rows = async <T = Record<string, any>>(app: FastifyInstance, sql: string, ...args: unknown[]) => (await query(app, sql, ...args)) as T[]
const codes = async (app: FastifyInstance, uuid: string, after = 0) =>
  (await rows<{ event_code: string }>(app, 'SELECT event_code FROM events WHERE asset_key = ? AND id > ? ORDER BY id', uuid, after)).map((e) => e.event_code)
const lastEvent = async (app: FastifyInstance) => (await row<{ id: number }>(app, 'SELECT coalesce(max(id), 0) AS id FROM events')).id
const lastAudit = lastAuditId

t.test('enrollment issues a credential kept only as a hash, and records the agent', async (t) => {
  const app = await build(t, env)
  const before = await lastAudit(app)
  const res = await enrollReq(app, { enrollmentSecret: SECRET, machineId: '4C4C4544-0042-3510-8052-B4C04F4E3732', hostIdentifier: 'DESKTOP-9LR722S' })
  t.equal(res.statusCode, 200, res.body)
  const body = res.json()
  t.match(body.uuid, /^[0-9a-f-]{36}$/, 'a lower-case uuid')
  t.match(body.credential, /^pag_[A-Za-z0-9_-]{43}$/, 'pag_ and 32 random bytes')
  t.equal(body.reEnrolled, false)
  t.equal(body.checkInIntervalSeconds, 60)

  const agent = await row(app, 'SELECT * FROM agents WHERE uuid = ?', body.uuid)
  t.equal(agent.credential_hash, crypto.createHash('sha256').update(body.credential).digest('base64url'), 'only the hash is stored')
  t.equal(agent.operational_status, 'Free')
  t.equal(agent.connection_status, 'Disconnected', 'disconnected until the first check-in')
  t.equal(agent.license_status, 'Activated', 'a seat was free')
  t.equal(agent.license_account_name, 'Prime')
  t.equal(agent.latest_event_text, 'Agent enrolled')
  t.same(await codes(app, body.uuid), ['0x310004'])

  const audits = (await query(app, 'SELECT * FROM audit_trail WHERE id > ? ORDER BY id', before)) as Record<string, any>[]
  t.equal(audits.length, 1, 'one audit record')
  t.equal(audits[0].category, 'Agents')
  t.equal(audits[0].outcome, 'Succeeded')
  t.equal(audits[0].asset_key, body.uuid)
  t.equal(audits[0].asset_name, 'DESKTOP-9LR722S')
  t.equal(audits[0].asset_type, 'Agent')
  t.notMatch(audits[0].details, body.credential, 'the credential is not in the audit trail')
  t.notMatch(audits[0].details, SECRET, 'nor the secret')
})

t.test('a wrong secret answers 401 and is audited; the license seats run out into Pending', async (t) => {
  const app = await build(t, { ...env, PRIME_LICENSE_SEATS: '1' })
  const before = await lastAudit(app)
  const res = await enrollReq(app, { enrollmentSecret: 'pes_not-the-right-secret', machineId: 'machine-0001', hostIdentifier: 'INTRUDER' })
  t.equal(res.statusCode, 401, res.body)
  t.match(res.headers['www-authenticate'], /^Bearer/)
  t.equal(res.json().type, 'urn:prime:problem:unauthenticated')
  const audits = (await query(app, 'SELECT * FROM audit_trail WHERE id > ? ORDER BY id', before)) as Record<string, any>[]
  t.equal(audits.length, 1, 'one audit record')
  t.equal(audits[0].outcome, 'Refused')
  t.equal(audits[0].operation_id, 'enrollAgent')
  t.match(audits[0].description, 'INTRUDER')
  t.notMatch(audits[0].details, 'pes_not-the-right-secret', 'the secret tried is not recorded')
  t.equal((await row(app, 'SELECT count(*) AS n FROM agents')).n, 0, 'no agent')

  const first = await enroll(app)
  const second = await enroll(app)
  t.equal((await row(app, 'SELECT license_status FROM agents WHERE uuid = ?', first.uuid)).license_status, 'Activated')
  t.equal((await row(app, 'SELECT license_status FROM agents WHERE uuid = ?', second.uuid)).license_status, 'Pending', 'no seat left')
})

t.test('enrolling a machine again with its current credential keeps the agent and rotates its credential', async (t) => {
  const app = await build(t, env)
  const first = await enroll(app, 'machine-guid-1234')
  t.equal((await checkIn(app, first.credential, state([mouse]))).statusCode, 200)
  const again = await enroll(app, 'MACHINE-GUID-1234', 'DESKTOP-RENAMED', first.credential)
  t.equal(again.pendingApproval, false)
  t.equal(again.uuid, first.uuid, 'same agent')
  t.equal(again.reEnrolled, true)
  t.not(again.credential, first.credential)
  const old = await checkIn(app, first.credential, state([mouse]))
  t.equal(old.statusCode, 401, 'the old credential stops working at once')
  t.match(old.headers['www-authenticate'], /^Bearer/)
  t.equal((await checkIn(app, again.credential, state([mouse]))).statusCode, 200, 'the new one works')
  t.equal((await row(app, 'SELECT count(*) AS n FROM peripherals WHERE agent_uuid = ?', first.uuid)).n, 1, 'its peripherals are kept')
  t.same(
    (await codes(app, first.uuid)).filter((c) => c === '0x310004'),
    ['0x310004', '0x310004'],
    'each enrollment is an event',
  )
})

t.test('failed enrollments are limited per address; accepted ones only by the enrollment budgets', async (t) => {
  const app = await build(t, { ...env, PRIME_RATE_LIMIT_MAX: '10' })
  for (let i = 0; i < 30; i++) await enroll(app, `site-machine-${i}`, `HOST-${i}`)
  t.equal((await row(app, 'SELECT count(*) AS n FROM agents')).n, 30, '30 accepted enrollments from one address, beyond the per-address limit')

  const wrong = { enrollmentSecret: 'pes_guessing-the-secret-0', machineId: 'machine-x', hostIdentifier: 'X' }
  const answers: number[] = []
  for (let i = 0; i < 21; i++) answers.push((await enrollReq(app, wrong, '10.1.1.1')).statusCode)
  t.same(answers, [...Array(20).fill(401), 429], '20 failures, then 429')
  const right = await enrollReq(app, { enrollmentSecret: SECRET, machineId: 'machine-y', hostIdentifier: 'Y' }, '10.1.1.1')
  t.equal(right.statusCode, 429, 'even the right secret waits for the minute to pass')
  t.match(right.headers['retry-after'], /^[1-9]\d*$/)
  t.ok(Number(right.headers['retry-after']) <= 60)
  t.equal(right.json().type, 'urn:prime:problem:rate-limited')
  t.equal((await enrollReq(app, { enrollmentSecret: SECRET, machineId: 'machine-z', hostIdentifier: 'Z' }, '10.2.2.2')).statusCode, 200, 'other addresses are not affected')

  const invalid: number[] = []
  for (let i = 0; i < 21; i++) invalid.push((await enrollReq(app, { enrollmentSecret: SECRET, hostIdentifier: 'no machine id' }, '10.3.3.3')).statusCode)
  t.same(invalid, [...Array(20).fill(400), 429], 'invalid enrollments are failures too')

  // An IPv6 client is counted per /64 network, as the request limits count it.
  const v6: number[] = []
  for (let i = 0; i < 21; i++) v6.push((await enrollReq(app, wrong, `2001:db8:5:6::${(i + 1).toString(16)}`)).statusCode)
  t.same(v6, [...Array(20).fill(401), 429], 'every address of a /64 shares the failures')
  t.equal((await enrollReq(app, { enrollmentSecret: SECRET, machineId: 'machine-v6', hostIdentifier: 'V6' }, '2001:db8:5:7::1')).statusCode, 200, 'the next /64 is not affected')
})

t.test('the first check-in stores the state and the peripherals with what the server derives', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  const before = await lastAudit(app)
  const res = await checkIn(app, agent.credential, state([mouse, stick]))
  t.equal(res.statusCode, 200, res.body)
  const body = res.json()
  t.equal(body.uuid, agent.uuid)
  t.equal(body.nextCheckInSeconds, 60)
  t.equal(body.moreCommands, false)
  t.same(body.commands, [])

  const a = await row(app, 'SELECT * FROM agents WHERE uuid = ?', agent.uuid)
  t.equal(a.connection_status, 'Connected')
  t.ok(a.last_updated_ms > 0)
  t.equal(a.nics_text, 'Ethernet||00-1A-2B-3C-4D-5E||192.168.100.128||Up**Wi-Fi||00-1A-2B-3C-4D-5F||||Down')
  t.equal(a.ip_addresses, '192.168.100.128')
  t.equal(a.ethernets_count, 1)
  t.equal(a.model_tooltip, 'Dell Inc. OptiPlex 7090 - Windows 10 Pro 22H2 (10.0.19045) - 2 network adapters')
  t.equal(a.hashtags, '#finance #floor3')
  t.equal(a.switch_ip, '192.168.100.2')
  t.equal(a.port_id, 'Gi1/0/14')
  t.equal(a.is_system_locked, 1)
  t.equal(a.license_account_id, 'ACME-0001')
  t.same(JSON.parse(a.logged_on_users), ['ACME\\jdoe'])
  t.equal(a.not_approved, 2)
  t.equal(a.has_unapproved, 1)
  t.equal(a.severity, 5, 'unapproved on a free agent: Notice')

  const m = await row(
    app,
    'SELECT p.*, v.text AS vendor_text, d.text AS product_text FROM peripherals p LEFT JOIN peripheral_texts v ON v.id = p.vendor_text_id LEFT JOIN peripheral_texts d ON d.id = p.product_text_id WHERE p.device_id = ?',
    mouse.deviceID,
  )
  t.equal(m.vid, '046D', 'upper-case ids')
  t.equal(m.pid, 'C077')
  t.equal(m.gui_vid, 'Logitech, Inc.', 'vendor name from the USB ids')
  t.equal(m.gui_pid, 'M105 Optical Mouse')
  t.equal(m.gui_serial, null, 'an OS-made serial is not shown')
  t.equal(m.dev_icon, 2, 'a mouse')
  t.equal(m.present, 1)
  t.equal(m.vendor_text, 'logitech, inc. | logitech')
  t.equal(m.product_text, 'm105 optical mouse | usb input device | usb optical mouse')
  t.equal(m.agent_uuid, agent.uuid)
  const s = await row(app, 'SELECT gui_serial, dev_icon FROM peripherals WHERE device_id = ?', stick.deviceID)
  t.equal(s.gui_serial, '60A44C413A8EF1A0B9A1BE27')
  t.equal(s.dev_icon, 3, 'mass storage')

  const events = await rows(app, `SELECT * FROM events WHERE asset_key = ? AND event_code = '0x110001' ORDER BY id`, agent.uuid)
  t.equal(events.length, 2, 'every present peripheral is new')
  t.equal(events[0].category, 'USB')
  t.equal(events[0].severity, 6)
  t.equal(events[0].entity_id, 'DESKTOP-9LR722S (192.168.100.128)')
  t.equal(events[0].asset_name, 'DESKTOP-9LR722S')
  t.equal(events[0].peripheral_asset_id, mouse.deviceID)
  t.equal(events[0].peripheral_icon, 2)
  t.equal(events[0].peripheral_vid, '046D')
  t.match(events[0].details, 'Logitech, Inc. M105 Optical Mouse (VID 046D, PID C077) on DESKTOP-9LR722S')
  t.equal(a.latest_event_text, 'New USB peripheral detected')
  t.equal(a.latest_minus1_event_text, 'New USB peripheral detected')
  t.equal(a.latest_minus2_event_text, 'Agent enrolled')

  const audits = (await query(app, 'SELECT * FROM audit_trail WHERE id > ?', before)) as Record<string, any>[]
  t.equal(audits.length, 1, 'the first check-in is audited (versions and peripherals changed)')
  t.equal(audits[0].user_name, `agent:${agent.uuid}`)
  t.equal(audits[0].operation_id, 'agentCheckIn')
  t.equal(audits[0].asset_key, agent.uuid)
  t.equal(audits[0].asset_detail, 'WindowsHost')
})

t.test('an unchanged check-in changes nothing but the time', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  t.equal((await checkIn(app, agent.credential, state([mouse, stick]))).statusCode, 200)
  const events = await lastEvent(app)
  const audits = await lastAudit(app)
  const peripherals = await rows(app, 'SELECT * FROM peripherals ORDER BY id')
  await query(app, 'UPDATE agents SET last_updated_ms = last_updated_ms - 60000')
  const t0 = Date.now()

  // Only the agent's clock differs.
  const res = await checkIn(app, agent.credential, state([mouse, stick], { agentTime: '2030-01-01T00:00:00.000Z' }))
  t.equal(res.statusCode, 200, res.body)
  t.equal(await lastEvent(app), events, 'no event')
  t.equal(await lastAudit(app), audits, 'no audit record')
  t.same(await rows(app, 'SELECT * FROM peripherals ORDER BY id'), peripherals, 'peripherals untouched')
  await app.services.gateway.flushHeartbeats()
  t.ok((await row(app, 'SELECT last_updated_ms FROM agents')).last_updated_ms >= t0, 'the check-in time is recorded')

  // The same state with its keys in another order is compared in full, and is no news either.
  const reordered = Object.fromEntries(Object.entries(state([stick, mouse].map((p) => Object.fromEntries(Object.entries(p).reverse())))).reverse())
  t.equal((await checkIn(app, agent.credential, reordered)).statusCode, 200)
  t.equal(await lastEvent(app), events, 'no event')
  t.equal(await lastAudit(app), audits, 'no audit record')
})

t.test('unplugging and plugging back a peripheral', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  await checkIn(app, agent.credential, state([mouse, stick]))
  await query(app, 'UPDATE peripherals SET last_seen_ms = last_seen_ms - 60000')
  const t0 = Date.now()
  await checkIn(app, agent.credential, state([mouse, stick])) // unchanged: the quick path
  let mark = await lastEvent(app)

  t.equal((await checkIn(app, agent.credential, state([mouse]))).statusCode, 200)
  t.same(await codes(app, agent.uuid, mark), ['0x110003'], 'left out of the list: disconnected')
  const unplugged = await row(app, 'SELECT present, last_seen_ms FROM peripherals WHERE device_id = ?', stick.deviceID)
  t.equal(unplugged.present, 0)
  t.ok(unplugged.last_seen_ms >= t0, 'last seen at the check-in before, even an unchanged one')
  const gone = await row(app, 'SELECT * FROM events WHERE id > ?', mark)
  t.equal(gone.peripheral_asset_id, stick.deviceID)
  t.equal(gone.peripheral_icon, 3)
  t.equal((await row(app, 'SELECT approved_and_disconnected, not_approved FROM agents')).not_approved, 1)

  mark = await lastEvent(app)
  t.equal((await checkIn(app, agent.credential, state([mouse, stick]))).statusCode, 200)
  t.same(await codes(app, agent.uuid, mark), ['0x110002'], 'seen before on this agent: reconnected')
  t.equal((await row(app, 'SELECT present FROM peripherals WHERE device_id = ?', stick.deviceID)).present, 1)

  mark = await lastEvent(app)
  t.equal((await checkIn(app, agent.credential, state([mouse, { ...stick, present: false }]))).statusCode, 200)
  t.same(await codes(app, agent.uuid, mark), ['0x110003'], 'reported not present: disconnected')
})

t.test('a known attack tool raises a critical event and the agent flags', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  await checkIn(app, agent.credential, state([mouse]))
  const mark = await lastEvent(app)
  t.equal((await checkIn(app, agent.credential, state([mouse, attackTool]))).statusCode, 200)
  t.same(await codes(app, agent.uuid, mark), ['0x110001', '0x110005'])
  const e = await row(app, `SELECT * FROM events WHERE event_code = '0x110005'`)
  t.equal(e.severity, 2)
  t.equal(e.hashtags, '#attack-tool #free')
  t.equal(e.peripheral_vid, '0483')
  t.match(e.details, 'keystroke injection')
  const a = await row(app, 'SELECT has_attack_tool, severity, latest_event_text FROM agents')
  t.equal(a.has_attack_tool, 1)
  t.equal(a.severity, 2)
  t.equal(a.latest_event_text, 'Known attack tool detected')
  t.equal((await row(app, 'SELECT is_attack_tool FROM peripherals WHERE vid = ?', '0483')).is_attack_tool, 1)
})

t.test('unapproved peripherals on an armed agent', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  await checkIn(app, agent.credential, state([mouse]))
  let mark = await lastEvent(app)
  t.equal((await checkIn(app, agent.credential, state([mouse], { operationalStatus: 'Armed' }))).statusCode, 200)
  t.same(await codes(app, agent.uuid, mark), ['0x310001', '0x110004'], 'arming with an unapproved peripheral present')
  const mode = await row(app, `SELECT * FROM events WHERE event_code = '0x310001'`)
  t.equal(mode.category, 'Host')
  t.equal(mode.severity, 5)
  t.match(mode.details, /Armed \(was Free\); changed on the host/)
  t.equal((await row(app, 'SELECT vulnerable_or_wlv, severity FROM agents')).severity, 4)

  mark = await lastEvent(app)
  t.equal((await checkIn(app, agent.credential, state([mouse, unknownGadget], { operationalStatus: 'Armed' }))).statusCode, 200)
  t.same(await codes(app, agent.uuid, mark), ['0x110001', '0x110007'], 'a new unapproved peripheral while armed: a whitelist violation')
  const wlv = await row(app, `SELECT * FROM events WHERE id > ? AND event_code = '0x110007'`, mark)
  t.equal(wlv.severity, 4)
  t.equal(wlv.description, 'Whitelist violation')
  t.equal(wlv.hashtags, '#whitelist-violation #armed')
  t.equal(wlv.peripheral_asset_id, unknownGadget.deviceID)
  t.match(wlv.details, 'Acme Gadget (VID ABCD, PID 0001, serial XYZ)')
})

t.test('network location, versions, errors and the license account', async (t) => {
  const app = await build(t, { ...env, PRIME_LICENSE_ACCOUNT_ID: 'ACME-0001' })
  const agent = await enroll(app)
  await checkIn(app, agent.credential, state([mouse]))
  let mark = await lastEvent(app)
  let audits = await lastAudit(app)
  const moved = state([mouse], { localIpAddress: '10.0.0.7', connectedSwitch: { ip: '10.0.0.1', name: 'lab-sw', portId: 'Gi1/0/2', portName: null } })
  t.equal((await checkIn(app, agent.credential, moved)).statusCode, 200)
  t.same(await codes(app, agent.uuid, mark), ['0x210002'])
  const e = await row(app, 'SELECT * FROM events WHERE id > ?', mark)
  t.equal(e.category, 'Network')
  t.equal(e.entity_id, 'DESKTOP-9LR722S (10.0.0.7)')
  t.match(e.details, 'address 192.168.100.128 -> 10.0.0.7')
  t.equal((await row(app, 'SELECT ip_addresses FROM agents')).ip_addresses, '10.0.0.7 192.168.100.128', 'every address, local first')
  t.equal(await lastAudit(app), audits, 'a move alone is not audited')

  mark = await lastEvent(app)
  const errors = [{ time: '2025-01-01T12:00:00.000Z', code: 'E42', message: 'Filter driver restarted.' }]
  t.equal((await checkIn(app, agent.credential, { ...moved, serviceVersion: '4.3.0.1', errors })).statusCode, 200)
  t.same(await codes(app, agent.uuid, mark), [], 'errors are counted, not events')
  t.same(await rows(app, 'SELECT time_ms, code, message FROM agent_errors'), [{ time_ms: Date.parse('2025-01-01T12:00:00.000Z'), code: 'E42', message: 'Filter driver restarted.' }])
  const audit = (await latestAudit(app))[0]
  t.ok(audit.id > audits, 'a version change is audited')
  t.same(JSON.parse(audit.details).serviceVersion, { from: '4.2.1.118', to: '4.3.0.1' })

  audits = await lastAudit(app)
  t.equal((await checkIn(app, agent.credential, { ...moved, serviceVersion: '4.3.0.1', licenseAccountId: 'OTHER-9' })).statusCode, 200)
  t.equal((await row(app, 'SELECT license_status FROM agents')).license_status, 'Invalid', "another account than the server's")
  t.ok((await lastAudit(app)) > audits, 'a license change is audited')
  t.equal((await checkIn(app, agent.credential, { ...moved, serviceVersion: '4.3.0.1' })).statusCode, 200)
  t.equal((await row(app, 'SELECT license_status FROM agents')).license_status, 'Activated', 'back to the right account')
})

t.test('a peripheral listed twice answers 400', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  const res = await checkIn(app, agent.credential, state([mouse, stick, mouse]))
  t.equal(res.statusCode, 400, res.body)
  t.same(res.json().errors, [{ location: 'body', name: 'peripherals/2/deviceID', reason: 'is listed twice' }])
})

t.test('only agents call the gateway, and agents call nothing else', async (t) => {
  const app = await build(t, env)
  const admin = await login(app)
  const agent = await enroll(app)
  const integration = await call(app, admin, { method: 'POST', url: '/prime/webui/admin/integrationTokens', payload: { name: 'siem', userProfile: 30 } })
  const pit = integration.json().token as string
  t.match(pit, /^pit_/)
  const results = { results: [{ commandId: 1, status: 'Succeeded' }] }
  for (const [name, credential] of [
    ['a user token', admin],
    ['an integration token', pit],
    ['an unknown agent credential', 'pag_' + 'A'.repeat(43)],
    ['garbage', 'nonsense'],
  ]) {
    for (const [url, payload] of [
      [CHECKIN, state([])],
      ['/prime/webui/gateway/commandresults', results],
    ] as const) {
      const res = await app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${credential}` }, payload })
      t.equal(res.statusCode, 401, `${url} with ${name}`)
      t.match(res.headers['www-authenticate'], /^Bearer/)
    }
  }
  for (const url of ['/prime/webui/admin/PrimeVersion', '/prime/webui/Events/GetEvents', '/prime/webui/admin/all']) {
    const res = await call(app, agent.credential, { method: 'GET', url })
    t.equal(res.statusCode, 401, `${url} refuses an agent credential`)
  }

  await query(app, 'DELETE FROM agents WHERE uuid = ?', agent.uuid)
  t.equal((await checkIn(app, agent.credential, state([]))).statusCode, 401, 'a deleted agent must enroll again')
})

t.test('check-ins closer than the minimum interval answer 429; gateway calls are not limited per address', async (t) => {
  const app = await build(t, { PRIME_AGENT_ENROLLMENT_SECRET: SECRET, PRIME_RATE_LIMIT_MAX: '4' })
  const agents = [await enroll(app), await enroll(app), await enroll(app)]
  for (const a of agents) t.equal((await checkIn(app, a.credential, state([mouse]))).statusCode, 200, 'first check-in of each agent')
  const again = await checkIn(app, agents[0].credential, state([mouse]))
  t.equal(again.statusCode, 429, again.body)
  t.match(again.headers['retry-after'], /^[1-5]$/, 'Retry-After within the 5 seconds')
  t.equal(again.json().type, 'urn:prime:problem:rate-limited')
  t.notOk(again.headers['x-ratelimit-limit'], 'not the per-address limit')
  t.equal((await checkIn(app, agents[1].credential, { hostIdentifier: 7 })).statusCode, 429, 'too soon, whatever the body')

  // Four requests per address: neither the enrollments nor the check-ins counted.
  for (let i = 0; i < 4; i++) {
    const refused = await checkIn(app, 'pag_' + 'B'.repeat(43), state([]))
    t.equal(refused.statusCode, 401, 'a refused credential counts against the address')
  }
  const limited = await checkIn(app, 'pag_' + 'B'.repeat(43), state([]))
  t.equal(limited.statusCode, 429)
  t.equal(limited.headers['x-ratelimit-limit'], '4')
})

t.test('reported errors are stored up to 1000 per agent per day', async (t) => {
  const app = await build(t, env)
  const agent = await enroll(app)
  const other = await enroll(app, 'other-machine-0001')
  const errors = Array.from({ length: 50 }, (_, i) => ({ time: '2025-01-01T12:00:00.000Z', code: `E${i}`, message: 'Filter driver restarted.' }))
  for (let i = 0; i < 21; i++) t.equal((await checkIn(app, agent.credential, state([mouse], { errors }))).statusCode, 200)
  const stored = async (id: string) => (await row(app, 'SELECT count(*) AS n FROM agent_errors e JOIN agents a ON a.id = e.agent_id WHERE a.uuid = ?', id)).n
  t.equal(await stored(agent.uuid), 1000, '1050 reported, 1000 stored')
  t.equal((await checkIn(app, other.credential, state([mouse], { errors }))).statusCode, 200)
  t.equal(await stored(other.uuid), 50, 'another agent has its own allowance')
})

t.test("the enrollment event names its source as the host's later events do: one source per host", async (t) => {
  const app = await build(t, env)
  const sources = async (uuid: string) => (await rows<{ entity_id: string }>(app, 'SELECT DISTINCT entity_id FROM events WHERE asset_key = ? ORDER BY entity_id', uuid)).map((r) => r.entity_id)
  // The address sent at enrollment, then the same one reported by the check-ins.
  const sent = (await enrollReq(app, { enrollmentSecret: SECRET, machineId: 'machine-sent-address', hostIdentifier: 'HOST-A', localIpAddress: '10.20.30.40' }, '10.9.9.9')).json()
  t.equal((await checkIn(app, sent.credential, state([stick], { hostIdentifier: 'HOST-A', localIpAddress: '10.20.30.40' }))).statusCode, 200)
  t.ok((await codes(app, sent.uuid)).length > 1 && (await codes(app, sent.uuid))[0] === '0x310004', `enrolled, then the check-in's events: ${await codes(app, sent.uuid)}`)
  t.same(await sources(sent.uuid), ['HOST-A (10.20.30.40)'], 'one form for every kind')
  // No address sent: the request's, as a check-in without one uses.
  const bare = (await enrollReq(app, { enrollmentSecret: SECRET, machineId: 'machine-request-address', hostIdentifier: 'HOST-B' }, '10.1.2.3')).json()
  t.equal(
    (
      await app.inject({
        method: 'POST',
        url: CHECKIN,
        headers: { authorization: `Bearer ${bare.credential}` },
        payload: state([stick], { hostIdentifier: 'HOST-B', localIpAddress: null }),
        remoteAddress: '10.1.2.3',
      })
    ).statusCode,
    200,
  )
  t.same(await sources(bare.uuid), ['HOST-B (10.1.2.3)'])
  // A host's digest of sources counts it once.
  const token = await login(app)
  const feed = await call(app, token, { url: '/prime/webui/Events/GetEventsIntegration?FromEventId=1&PageSize=100' })
  const hosts = new Set(
    feed
      .json()
      .data.filter((e: { eventCode: string }) => e.eventCode.startsWith('0x31') || e.eventCode.startsWith('0x11'))
      .map((e: { eventEntityID: string }) => e.eventEntityID),
  )
  t.same([...hosts].sort(), ['HOST-A (10.20.30.40)', 'HOST-B (10.1.2.3)'])
})

t.test('one machine enrolling twice at once: one agent enrolled, the other enrollment held for approval', async (t) => {
  // As when the enrollments come one after the other: the second finds the machine enrolled
  // and, without its current credential, is held for an Administrator.
  const app = await build(t, env)
  for (let round = 0; round < 6; round++) {
    const machineId = `race-machine-${round}`
    const body = { enrollmentSecret: ENROLLMENT_SECRET, machineId, hostIdentifier: `RACE-${round}` }
    const answers = await Promise.all([enrollReq(app, body), enrollReq(app, { ...body, machineId: machineId.toUpperCase() })])
    // 202: the held one (what a later enrollment without the current credential answers).
    t.same(answers.map((a) => a.statusCode).sort(), [200, 202], `round ${round}: one enrolled, one held: ${answers.map((a) => a.body.slice(0, 100)).join(' | ')}`)
    t.equal(Number((await row(app, 'SELECT count(*) AS n FROM agents WHERE lower(machine_id) = ?', machineId)).n), 1, `round ${round}: one agent`)
  }
})
