// What each kind of destination receives, checked at real receivers on 127.0.0.1: the
// signed webhook POST, RFC 5424 and CEF syslog lines over UDP and TCP (octet counting),
// and the e-mail.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login } from './helpers.js'
import { alarmsOf, latestAudit, query, queryOne, recordEventIds } from './seed.js'
import { ALARM_PATH, alarmEnv, httpReceiver, smtpReceiver, tcpReceiver, udpReceiver, verifySignature, waitFor } from './fixtures/receivers.js'
import { gatewayEnv, enroll, checkIn, hostState, attackTool } from './fixtures/gateway.js'
import { alarmWorker } from '../lib/alarms/index.js'
import { SYSLOG_HOSTNAME, VERSION } from '../lib/alarms/format.js'
import type { EventInput } from '../lib/events/ports.js'

const SECRET = 'whsec-formats-0123456789'

async function setup(t: Parameters<typeof build>[0], env: Record<string, string> = {}) {
  const app = await build(t, { ...alarmEnv, ...gatewayEnv, ...env })
  const token = await login(app)
  const worker = alarmWorker(app)
  worker.pause()
  return { app, token, worker }
}

async function addDest(app: FastifyInstance, token: string, payload: object) {
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json()
}

const attackEvent = (extra: Partial<EventInput> = {}): EventInput => ({
  code: '0x110005',
  severity: 2,
  category: 'USB',
  entityId: 'DESKTOP-9LR722S (192.168.100.128)',
  description: 'Known attack tool detected',
  details: 'Hak5 USB Rubber Ducky (VID 03EB, PID 2401) on DESKTOP-9LR722S; agent is Armed, device blocked.',
  hashtags: '#attack-tool #armed',
  peripheralIcon: 1,
  assetKey: '3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b',
  assetName: 'DESKTOP-9LR722S',
  peripheralAssetId: 'USB\\VID_03EB&PID_2401\\000000000001',
  ...extra,
})

const deliveryIds = async (app: FastifyInstance, destinationId: string) =>
  (await query(app, 'SELECT delivery_id, feed, record_id, status, attempts FROM alarm_outbox WHERE destination_id = ? ORDER BY id', destinationId)) as any[]

t.test('webhook: one signed JSON POST per record, headers as the contract says', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  const dest = await addDest(app, token, {
    name: 'soc-webhook',
    type: 'webhook',
    filters: { minimumSeverity: 'Warning', feeds: ['events', 'audit', 'assets'], auditCategories: ['Users'] },
    webhook: { url: rx.url + '?tenant=acme', secret: SECRET, headers: { Authorization: 'Bearer soar-token', 'X-Tenant': 'acme' } },
  })
  const [eventId] = await recordEventIds(app, Date.now(), [attackEvent()])
  // A refused request leaves a Warning audit record of category Users.
  const refused = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'x' } })
  t.equal(refused.statusCode, 400)
  const published = await alarmsOf(app).publishAssets(Date.now(), [
    { messageId: '2b7e4c1a-9f3d-4e8b-a6c5-1d2e3f4a5b6c', kind: 'snapshot', trigger: 'ReplayAll', assetType: 'Agent', assetId: 'a-1', name: 'PC-1', peripherals: [] },
  ])
  t.equal(published, 1)
  await worker.drain()

  t.equal(rx.deliveries.length, 3)
  const [ev, au, as] = rx.deliveries
  for (const d of rx.deliveries) {
    t.ok(d.verified, 'signature and timestamp verified by the receiver')
    t.equal(d.headers['content-type'], 'application/json')
    t.equal(d.headers['user-agent'], `Prime-Alarm/${VERSION}`)
    t.equal(d.headers['x-prime-delivery-id'], d.body.deliveryId)
    t.equal(Number(d.headers['x-prime-timestamp']), d.body.sentTime)
    t.equal(d.headers.authorization, 'Bearer soar-token')
    t.equal(d.headers['x-tenant'], 'acme')
    t.match(d.body, { attempt: 1, destination: { id: dest.id, name: 'soc-webhook' } })
    t.ok(Math.abs(d.body.sentTime - Date.now() / 1000) < 60)
  }
  const ids = await deliveryIds(app, dest.id)
  t.same(
    rx.deliveries.map((d) => d.body.deliveryId),
    ids.map((r) => r.delivery_id),
    'in outbox order, with the stored delivery ids',
  )
  t.same(
    ids.map((r) => r.status),
    ['delivered', 'delivered', 'delivered'],
  )

  t.same(Object.keys(ev.body).sort(), ['attempt', 'deliveryId', 'destination', 'event', 'feed', 'sentTime'])
  t.equal(ev.body.feed, 'events')
  const row = (await queryOne(app, 'SELECT created_ms FROM events WHERE id = ?', eventId)) as { created_ms: number }
  t.same(ev.body.event, {
    eventID: eventId,
    creationTime: new Date(row.created_ms).toISOString(),
    creationTimeEpoch: row.created_ms,
    eventCode: '0x110005',
    severity: 2,
    severityString: 'Critical',
    category: 'USB',
    eventEntityID: 'DESKTOP-9LR722S (192.168.100.128)',
    description: 'Known attack tool detected',
    details: 'Hak5 USB Rubber Ducky (VID 03EB, PID 2401) on DESKTOP-9LR722S; agent is Armed, device blocked.',
    hashtags: '#attack-tool #armed',
    peripheralIcon: '1',
    assetKey: '3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b',
    assetName: 'DESKTOP-9LR722S',
    peripheralAssetId: 'USB\\VID_03EB&PID_2401\\000000000001',
  })
  t.equal(au.body.feed, 'audit')
  t.match(au.body.auditTrail, { category: 'Users', severity: 4, severityString: 'Warning', outcome: 'Failed', operationId: 'addUser', user: 'admin' })
  t.notOk('event' in au.body)
  t.equal(as.body.feed, 'assets')
  t.same(as.body.asset, { messageId: '2b7e4c1a-9f3d-4e8b-a6c5-1d2e3f4a5b6c', kind: 'snapshot', trigger: 'ReplayAll', assetType: 'Agent', assetId: 'a-1', name: 'PC-1', peripherals: [] })
  // A receiver holding another secret rejects the bodies.
  t.notOk(verifySignature('another-secret-0000000', rx.deliveries[0].headers, Buffer.from(rx.deliveries[0].raw)))
  // The query string of the URL is kept.
  const list = (await call(app, token, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })).json()
  t.match(list.data[0].delivery, { pending: 0, lastStatus: 'delivered', lastError: null, failedLast24h: 0 })
})

t.test('a check-in that finds an attack tool reaches the webhook (gateway to outbox to receiver)', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  await addDest(app, token, { name: 'hook', type: 'webhook', filters: { minimumSeverity: 'Critical' }, webhook: { url: rx.url, secret: SECRET } })
  const agent = await enroll(app)
  const res = await checkIn(app, agent.credential, hostState([attackTool]))
  t.equal(res.statusCode, 200, res.body)
  worker.resume()
  await waitFor(() => rx.deliveries.length >= 1, 5000, 'the attack-tool alarm')
  t.match(rx.deliveries[0].body.event, { eventCode: '0x110005', severity: 2, assetKey: agent.uuid, assetName: 'DESKTOP-9LR722S' })
  t.ok(
    rx.deliveries.every((d) => d.body.event.severity <= 2),
    'only Critical or worse',
  )
})

t.test('syslog over UDP, RFC 5424: header, structured data escaping, one datagram of at most 2048 bytes', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await udpReceiver()
  t.teardown(() => rx.close())
  const dest = await addDest(app, token, { name: 'udp', type: 'syslog', syslog: { host: '127.0.0.1', port: rx.port, facility: 'local4' } })
  const [id1, id2, id3] = await recordEventIds(app, Date.now(), [
    attackEvent(),
    attackEvent({ entityId: 'PC "quoted" \\ ] (10.0.0.7)', assetName: 'a]b"c\\d', details: 'first line\nsecond "line" ]' }),
    attackEvent({ details: 'é'.repeat(3000), assetName: null, assetKey: null }),
  ])
  await worker.drain()
  await waitFor(() => rx.messages.length === 3, 2000, 'three datagrams')
  const [d1, d2, d3] = (await deliveryIds(app, dest.id)).map((r) => r.delivery_id)
  const time = async (id: number) => new Date(((await queryOne(app, 'SELECT created_ms FROM events WHERE id = ?', id)) as any).created_ms).toISOString()
  t.equal(
    rx.messages[0],
    `<162>1 ${await time(id1)} ${SYSLOG_HOSTNAME} prime - 0x110005 [prime@32473 deliveryId="${d1}" eventID="${id1}" category="USB" severity="2" source="DESKTOP-9LR722S (192.168.100.128)" asset="DESKTOP-9LR722S"] Known attack tool detected: Hak5 USB Rubber Ducky (VID 03EB, PID 2401) on DESKTOP-9LR722S; agent is Armed, device blocked.`,
  )
  t.equal(
    rx.messages[1],
    `<162>1 ${await time(id2)} ${SYSLOG_HOSTNAME} prime - 0x110005 [prime@32473 deliveryId="${d2}" eventID="${id2}" category="USB" severity="2" source="PC \\"quoted\\" \\\\ \\] (10.0.0.7)" asset="a\\]b\\"c\\\\d"] Known attack tool detected: first line\nsecond "line" ]`,
    'param values escape " \\ and ] (the message part is not structured data)',
  )
  t.ok(Buffer.byteLength(rx.messages[2]) <= 2048 && Buffer.byteLength(rx.messages[2]) > 2000, `cut to fit: ${Buffer.byteLength(rx.messages[2])} bytes`)
  t.notMatch(rx.messages[2], '\ufffd', 'cut between characters, never inside one')
  t.match(rx.messages[2], `[prime@32473 deliveryId="${d3}" eventID="${id3}" category="USB" severity="2" source="DESKTOP-9LR722S (192.168.100.128)"] Known attack tool detected: éé`)
  t.notMatch(rx.messages[2], 'asset=', 'a null asset leaves its parameter out')
})

t.test('syslog over TCP, CEF: octet-counting frames on one connection, CEF escaping, audit records', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await tcpReceiver()
  t.teardown(() => rx.close())
  const dest = await addDest(app, token, {
    name: 'tcp-cef',
    type: 'syslog',
    filters: { minimumSeverity: 'Debug', feeds: ['events', 'audit'], categories: ['USB', 'System'], auditCategories: ['Users'] },
    syslog: { host: '127.0.0.1', port: rx.port, transport: 'tcp', format: 'cef', facility: 'auth' },
  })
  const [e1, e2] = await recordEventIds(app, Date.now(), [
    attackEvent(),
    attackEvent({ code: '0x110006', severity: 4, description: 'Vulnerable | peripheral \\ detected', details: 'a=b \\ c\r\nnext line\nthird', entityId: 'Prime server', assetName: null }),
  ])
  const refused = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'x' } })
  t.equal(refused.statusCode, 400)
  await worker.drain()
  await waitFor(() => rx.messages.length === 3, 2000, 'three frames')
  t.equal(rx.framingErrors, 0, 'every frame is a valid octet count and message')
  t.equal(rx.connections, 1, 'one connection carries them all')
  const [d1, d2, d3] = (await deliveryIds(app, dest.id)).map((r) => r.delivery_id)
  const created = async (id: number) => ((await queryOne(app, 'SELECT created_ms FROM events WHERE id = ?', id)) as any).created_ms as number
  t.equal(
    rx.messages[0],
    `<34>1 ${new Date(await created(e1)).toISOString()} ${SYSLOG_HOSTNAME} prime - 0x110005 - CEF:0|Prime|Prime Device Security|${VERSION}|0x110005|Known attack tool detected|8|rt=${await created(e1)} externalId=${e1} cat=USB dvchost=DESKTOP-9LR722S src=192.168.100.128 msg=Hak5 USB Rubber Ducky (VID 03EB, PID 2401) on DESKTOP-9LR722S; agent is Armed, device blocked. cs1Label=deliveryId cs1=${d1}`,
  )
  t.equal(
    rx.messages[1],
    `<36>1 ${new Date(await created(e2)).toISOString()} ${SYSLOG_HOSTNAME} prime - 0x110006 - CEF:0|Prime|Prime Device Security|${VERSION}|0x110006|Vulnerable \\| peripheral \\\\ detected|5|rt=${await created(e2)} externalId=${e2} cat=USB msg=a\\=b \\\\ c\\nnext line\\nthird cs1Label=deliveryId cs1=${d2}`,
    'header fields escape | and \\; extension values escape = and \\ and line breaks',
  )
  const audit = (await latestAudit(app, 10)).find((r) => r.operation_id === 'addUser')!
  t.equal(
    rx.messages[2],
    `<36>1 ${new Date(audit.created_ms).toISOString()} ${SYSLOG_HOSTNAME} prime - audit - CEF:0|Prime|Prime Device Security|${VERSION}|audit|${audit.description.replace(/[\\|]/g, (c) => '\\' + c)}|5|rt=${audit.created_ms} externalId=${audit.id} cat=Users src=127.0.0.1 suser=admin msg=${audit.details.replace(/[\\=]/g, (c) => '\\' + c)} cs1Label=deliveryId cs1=${d3}`,
  )
})

t.test('syslog RFC 5424 of an audit record and an asset message', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await tcpReceiver()
  t.teardown(() => rx.close())
  const dest = await addDest(app, token, {
    name: 'tcp-5424',
    type: 'syslog',
    filters: { minimumSeverity: 'Notice', feeds: ['audit', 'assets'], auditCategories: ['AlarmDestinations'] },
    syslog: { host: '127.0.0.1', port: rx.port, transport: 'tcp' },
  })
  // Creating the destination is itself an audit record of its categories: it is the first delivered.
  const message = {
    messageId: '5d0c9a52-3b1e-4f4f-8d7e-0a6b2c9e4f11',
    kind: 'locationChanged',
    timeEpoch: 1735732800000,
    assetType: 'Agent',
    assetId: 'u-1',
    name: 'PC-1',
    location: { ipAddress: '10.0.0.9' },
  }
  await alarmsOf(app).publishAssets(Date.now(), [message])
  await worker.drain()
  await waitFor(() => rx.messages.length === 2, 2000, 'two frames')
  const [d1, d2] = (await deliveryIds(app, dest.id)).map((r) => r.delivery_id)
  const audit = (await latestAudit(app, 5)).find((r) => r.operation_id === 'addOrUpdateAlarmDest')!
  t.equal(
    rx.messages[0],
    `<133>1 ${new Date(audit.created_ms).toISOString()} ${SYSLOG_HOSTNAME} prime - audit [prime@32473 deliveryId="${d1}" auditTrailID="${audit.id}" category="AlarmDestinations" severity="5" source="admin (127.0.0.1)" asset="tcp-5424"] Alarm destination "tcp-5424" created: ${audit.details}`,
  )
  t.equal(
    rx.messages[1],
    `<134>1 2025-01-01T12:00:00.000Z ${SYSLOG_HOSTNAME} prime - asset [prime@32473 deliveryId="${d2}" messageId="5d0c9a52-3b1e-4f4f-8d7e-0a6b2c9e4f11" kind="locationChanged" category="Agent" asset="PC-1"] ${JSON.stringify(message)}`,
  )
})

t.test('e-mail: subject, body fields, delivery id header, console link', async (t) => {
  const smtp = await smtpReceiver()
  t.teardown(() => smtp.close())
  const { app, token, worker } = await setup(t, { PRIME_SMTP_URL: smtp.url, PRIME_SMTP_FROM: 'Prime Alarms <alarms@prime.example>', PRIME_PUBLIC_URL: 'https://prime.example.com/' })
  const dest = await addDest(app, token, { name: 'mail', type: 'email', email: { recipients: ['soc@example.com', 'oncall@example.org'] } })
  await addDest(app, token, {
    name: 'mail-2',
    type: 'email',
    filters: { feeds: ['audit'], minimumSeverity: 'Debug', auditCategories: ['Users'] },
    email: { recipients: ['audit@example.com'], subjectPrefix: '' },
  })
  const [eventId] = await recordEventIds(app, Date.now(), [attackEvent()])
  await worker.drain()
  t.equal(smtp.mails.length, 1)
  const mail = smtp.mails[0]
  const [d1] = (await deliveryIds(app, dest.id)).map((r) => r.delivery_id)
  const created = ((await queryOne(app, 'SELECT created_ms FROM events WHERE id = ?', eventId)) as any).created_ms
  t.equal(mail.subject, '[Prime] [Critical] Known attack tool detected - DESKTOP-9LR722S')
  t.equal(mail.from, 'alarms@prime.example')
  t.same(mail.envelopeTo, ['soc@example.com', 'oncall@example.org'])
  t.same(mail.to, ['soc@example.com', 'oncall@example.org'])
  t.equal(mail.headers['x-prime-delivery-id'], d1)
  t.equal(
    mail.text.replace(/\r\n/g, '\n').trimEnd(),
    [
      'Event: 0x110005 Known attack tool detected',
      'Severity: Critical (2)',
      'Category: USB',
      `Time: ${new Date(created).toISOString()}`,
      'Source: DESKTOP-9LR722S (192.168.100.128)',
      'Agent: DESKTOP-9LR722S (3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b)',
      'Peripheral: USB\\VID_03EB&PID_2401\\000000000001',
      'Details: Hak5 USB Rubber Ducky (VID 03EB, PID 2401) on DESKTOP-9LR722S; agent is Armed, device blocked.',
      `Event id: ${eventId}`,
      `Delivery id: ${d1}`,
      '',
      'Open the console: https://prime.example.com/',
    ].join('\n'),
  )
  t.match(mail.html, 'Severity: Critical (2)')
  t.match(mail.html, '<a href="https://prime.example.com/">')

  // An audit record, with no subject prefix.
  await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'x' } })
  await worker.drain()
  t.equal(smtp.mails.length, 2)
  t.match(smtp.mails[1], { subject: /^\[Warning\] Failed: addUser .* - admin$/, envelopeTo: ['audit@example.com'] })
  t.match(smtp.mails[1].text, /^Audit record: Failed: addUser/)
  t.match(smtp.mails[1].text, /\nUser: admin\nSource IP: 127\.0\.0\.1\nOperation: addUser\nOutcome: Failed\n/)
})
