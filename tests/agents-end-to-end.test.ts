// The agents story end to end, as a security team and an agent live it: the agent enrolls
// and checks in, an operator lists it the way integrations do, arms it, watches the command
// go Pending -> Delivered -> Succeeded, sees an attack tool raise an event and the agent's
// flags, approves a peripheral and exports the fleet.
import t from 'tap'
import { build, login, call, userWithProfile } from './helpers.js'
import { query } from './seed.js'
import { attackTool, checkIn, enroll, gatewayEnv, hostState, mouse, reportResults, stick } from './fixtures/gateway.js'

const env = gatewayEnv
const state = (mode: 'Armed' | 'Free', peripherals: object[]) => hostState(peripherals, { operationalStatus: mode })

t.test('enroll, check in, list, arm, command lifecycle, attack tool, approval, export', async (t) => {
  const app = await build(t, env)
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'operator', 20)

  const agent = await enroll(app)
  let res = await checkIn(app, agent.credential, state('Free', [mouse, stick]))
  t.equal(res.statusCode, 200, res.body)

  // Listed the way the SOAR integration asks.
  res = await call(app, manager, { method: 'GET', url: '/prime/webui/agents?hostIdentifier=desktop-9lr&hasUnapprovedPeripherals=True&sortBy=lastConfiguration_desc&pageSize=50' })
  t.equal(res.statusCode, 200, res.body)
  const page = res.json()
  t.equal(page.recordsFiltered, 1)
  t.equal(page.data[0].uuid, agent.uuid)
  t.equal(page.data[0].connectionStatus, 'Connected')
  t.equal(page.data[0].operationalStatus, 'Free')
  t.equal(page.data[0].notApproved, 2, 'both devices present and not approved')

  // Armed through agents/configuration with the integration's exact body.
  res = await call(app, manager, {
    method: 'POST',
    url: '/prime/webui/agents/configuration',
    payload: [{ uuid: null, hostIdentifier: 'DESKTOP-9LR722S', ipAddress: null, agentConfigViewResource: { isSystemArmed: 'ARM' } }],
  })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json()[0].uuid, agent.uuid, 'the client reads [0].uuid')
  const commandId = res.json()[0].commandIds[0]

  const detail = async () => (await call(app, manager, { method: 'GET', url: `/prime/webui/agents/agent/${agent.uuid}` })).json()
  let d = await detail()
  t.equal(d.commands.find((c: { commandId: number }) => c.commandId === commandId).status, 'Pending')
  t.equal(d.inAction, true)
  t.equal(d.displayStatusCombined, 'Arming')

  res = await checkIn(app, agent.credential, state('Free', [mouse, stick]))
  t.equal(res.statusCode, 200, res.body)
  const delivered = res.json().commands.find((c: { commandId: number }) => c.commandId === commandId)
  t.same(delivered && { type: delivered.type, mode: delivered.parameters.mode }, { type: 'SetMode', mode: 'Armed' }, 'the check-in hands the command over')
  d = await detail()
  t.equal(d.commands.find((c: { commandId: number }) => c.commandId === commandId).status, 'Delivered')

  res = await reportResults(app, agent.credential, [{ commandId, status: 'Succeeded', message: 'Mode set to Armed.' }])
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().succeeded, 1)
  res = await checkIn(app, agent.credential, state('Armed', [mouse, stick]))
  t.equal(res.statusCode, 200, res.body)
  d = await detail()
  t.equal(d.commands.find((c: { commandId: number }) => c.commandId === commandId).status, 'Succeeded')
  t.equal(d.operationalStatus, 'Armed')
  t.equal(d.displayStatusCombined, 'Armed')
  t.equal(d.inAction, false)
  t.ok(d.lastConfiguered, 'lastConfiguered is set once the mode is applied')
  t.equal(d.containsVulnerablePeripheralOrWLV, true, 'unapproved devices on an armed agent are a whitelist violation')

  // An attack tool is plugged in.
  res = await checkIn(app, agent.credential, state('Armed', [mouse, stick, attackTool]))
  t.equal(res.statusCode, 200, res.body)
  d = await detail()
  t.equal(d.hasKnownAttackTools, true)
  t.equal(d.severity, 2)
  t.match(d.latestEventText, /attack tool/i)
  const events = await query(app, 'SELECT event_code, severity FROM events WHERE asset_key = ? ORDER BY id', agent.uuid)
  t.ok(
    events.some((e) => e.event_code === '0x110005' && e.severity === 2),
    'a critical attack-tool event',
  )
  t.ok(
    events.some((e) => e.event_code === '0x110004'),
    'arming with unapproved devices present raised its event',
  )

  // The stick is approved through peripherals/command.
  res = await call(app, manager, {
    method: 'POST',
    url: '/prime/webui/peripherals/command',
    payload: { opCode: 'APPROVE', peripheralsIds: [{ uuid: agent.uuid, hostIdentifier: null, ipAddress: null, vid: '0951', pid: '1666' }] },
  })
  t.equal(res.statusCode, 200, res.body)
  t.same(res.json(), [agent.uuid])
  res = await call(app, manager, { method: 'GET', url: `/prime/webui/peripherals?hostUuid=${agent.uuid}&vid=0951` })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().data[0].approved, true)
  t.equal(res.json().data[0].adminStatus, 'Approved')

  // Exported as CSV and PDF.
  res = await call(app, manager, { method: 'POST', url: '/prime/webui/agents/exportagentcsv', payload: { hostIdentifier: 'DESKTOP' } })
  t.equal(res.statusCode, 200, res.body)
  t.match(res.headers['content-type'], /^text\/csv/)
  t.match(res.headers['content-disposition'], /attachment; filename="?agents-\d{8}T\d{6}Z\.csv/)
  const lines = res.body.trim().split('\r\n')
  t.equal(lines.length, 2, 'a header and the agent')
  t.match(lines[0], /^uuid,hostIdentifier,localIpAddress/)
  t.match(lines[1], agent.uuid)
  res = await call(app, manager, { method: 'POST', url: '/prime/webui/agents/exportagentpdf/exportpdf', payload: {} })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.headers['content-type'], 'application/pdf')
  t.equal(res.rawPayload.subarray(0, 5).toString(), '%PDF-')
})
