// The asset producer: ReplayAll queues a snapshot of every asset, SendMonitorOldLocation
// only what moved since it was last published, and neither queues (nor records) anything
// while no alarm destination receives the asset feed.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { build, call, login, userWithProfile } from './helpers.js'
import { queryColumn, queryValue } from './seed.js'
import { checkIn, enroll, gatewayEnv, hostState, mouse, stick } from './fixtures/gateway.js'

t.test('ReplayAll and SendMonitorOldLocation', async (t) => {
  // A receiver for the webhook, so that deliveries succeed; the test reads what was queued.
  const hook = http.createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()))
  await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve))
  t.teardown(() => hook.close())
  const app = await build(t, { ...gatewayEnv, PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1', PRIME_POLLER_ENROLLMENT_SECRET: 'pes_asset-test-poller-secret' })
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'reader', 10)
  const post = (what: string, token = admin) => call(app, token, { method: 'POST', url: `/prime/webui/assetproducer/${what}` })
  const queued = async () => ((await queryColumn(app, 'SELECT body FROM asset_messages ORDER BY id')) as string[]).map((b) => JSON.parse(b))
  let seen = 0
  const fresh = async () => {
    const all = await queued()
    const out = all.slice(seen)
    seen = all.length
    return out
  }

  const a1 = await enroll(app, 'asset-machine-1', 'HOST-ONE')
  const a2 = await enroll(app, 'asset-machine-2', 'HOST-TWO')
  t.equal((await checkIn(app, a1.credential, hostState([mouse, stick], { hostIdentifier: 'HOST-ONE' }))).statusCode, 200)
  t.equal((await checkIn(app, a2.credential, hostState([], { hostIdentifier: 'HOST-TWO', localIpAddress: '192.168.100.129' }))).statusCode, 200)
  const host = await call(app, admin, {
    method: 'POST',
    url: '/prime/webui/agents/agentless/connectiondetails',
    payload: { name: 'nas-01', address: 'nas-01.corp.example', protocol: 'SSH', userName: 'svc', password: 'pw-secret-123' },
  })

  t.equal((await post('ReplayAll', user)).statusCode, 403, 'a User may not publish')
  let res = await post('SendMonitorOldLocation')
  t.match(res.json(), { assetsQueued: 0, destinations: 0, messagesQueued: 0 }, 'nobody subscribed: nothing queued')
  t.equal((await queued()).length, 0)
  t.equal(await queryValue(app, 'SELECT count(*) FROM asset_locations'), 0, 'and no location recorded')

  const dest = await call(app, admin, {
    method: 'POST',
    url: '/prime/webui/Events/AddOrUpdateAlarmDest',
    payload: { name: 'assets', type: 'webhook', filters: { feeds: ['assets'] }, webhook: { url: `http://127.0.0.1:${(hook.address() as AddressInfo).port}/`, secret: 'asset-feed-signing-secret' } },
  })
  t.equal(dest.statusCode, 200, dest.body)

  // First publication of locations: every asset, with no previous location.
  res = await post('SendMonitorOldLocation')
  t.match(res.json(), { assetsQueued: 3, agents: 2, peripherals: 2, agentlessHosts: 1, destinations: 1, messagesQueued: 3 })
  let messages = await fresh()
  t.ok(messages.every((m) => m.kind === 'locationChanged' && m.trigger === 'SendMonitorOldLocation' && m.previousLocation === null))
  const one = messages.find((m) => m.name === 'HOST-ONE')
  t.match(one, {
    assetType: 'Agent',
    assetId: a1.uuid,
    parentId: null,
    operationalStatus: 'Free',
    connectionStatus: 'Connected',
    location: { ipAddress: '192.168.100.128', hostName: 'HOST-ONE', switchIp: '192.168.100.2', switchPortId: 'Gi1/0/14', agentUuid: null },
  })
  t.same(
    one.peripherals.map((p: any) => p.id),
    [`${a1.uuid}/${mouse.deviceID}`, `${a1.uuid}/${stick.deviceID}`],
  )
  t.match(
    messages.find((m) => m.assetType === 'AgentlessHost'),
    { assetId: String(host.json().id), name: 'nas-01', location: { ipAddress: null, hostName: 'nas-01.corp.example' }, connectionStatus: 'Pending', peripherals: [] },
  )
  t.match((await post('SendMonitorOldLocation')).json(), { assetsQueued: 0, messagesQueued: 0 }, 'at once again: nothing moved')

  // Moves: an agent to another switch port, a peripheral to another agent, a host to another address.
  await checkIn(
    app,
    a1.credential,
    hostState([mouse], { hostIdentifier: 'HOST-ONE', connectedSwitch: { ip: '192.168.100.2', name: 'floor3-sw1', portId: 'Gi1/0/20', portName: 'GigabitEthernet1/0/20' } }),
  )
  await checkIn(app, a2.credential, hostState([stick], { hostIdentifier: 'HOST-TWO', localIpAddress: '192.168.100.129' }))
  await call(app, admin, { method: 'PUT', url: '/prime/webui/agents/agentless/connectiondetails', payload: { id: host.json().id, address: '10.7.0.9' } })
  res = await post('SendMonitorOldLocation')
  t.match(res.json(), { assetsQueued: 3, agents: 1, peripherals: 3, agentlessHosts: 1 })
  messages = await fresh()
  t.match(
    messages.find((m) => m.assetType === 'Agent'),
    { name: 'HOST-ONE', location: { switchPortId: 'Gi1/0/20' }, previousLocation: { switchPortId: 'Gi1/0/14' } },
  )
  t.match(
    messages.find((m) => m.assetType === 'Peripheral'),
    {
      assetId: `${a2.uuid}/${stick.deviceID}`,
      parentId: a2.uuid,
      name: /DataTraveler/,
      location: { agentUuid: a2.uuid, agentHostIdentifier: 'HOST-TWO', ipAddress: '192.168.100.129' },
      previousLocation: { agentUuid: a1.uuid },
    },
  )
  t.match(
    messages.find((m) => m.assetType === 'AgentlessHost'),
    { location: { ipAddress: '10.7.0.9', hostName: null }, previousLocation: { hostName: 'nas-01.corp.example' } },
  )

  // ReplayAll: a snapshot of everything, whatever moved.
  res = await post('ReplayAll')
  t.match(res.json(), { assetsQueued: 3, agents: 2, peripherals: 3, agentlessHosts: 1, destinations: 1, messagesQueued: 3 }, 'peripherals no longer present are in the snapshot too')
  messages = await fresh()
  t.match(messages.find((m) => m.name === 'HOST-ONE').peripherals, [
    { deviceID: mouse.deviceID, present: true },
    { deviceID: stick.deviceID, present: false },
  ])
  t.ok(messages.every((m) => m.kind === 'snapshot' && m.trigger === 'ReplayAll' && m.previousLocation === null))
  t.equal(new Set(messages.map((m) => m.messageId)).size, 3)
  const audit = await queryColumn(app, "SELECT description FROM audit_trail WHERE operation_id IN ('replayAllAssets', 'sendMonitorOldLocation') ORDER BY id")
  t.equal(audit.length, 6, 'every call is audited, the refused one too')
})
