// The events story as a new user lives it: a Manager adds a webhook and a syslog
// destination, tests both, sees a real peripheral event (an agent's check-in) arrive at
// both, and exports events and audit trails as CSV and PDF.
import t from 'tap'
import { build, call, login, userWithProfile } from './helpers.js'
import { alarmEnv, ALARM_PATH, httpReceiver, tcpReceiver, waitFor } from './fixtures/receivers.js'
import { attackTool, checkIn, enroll, gatewayEnv, hostState } from './fixtures/gateway.js'

const SECRET = 'soc-webhook-signing-secret-0001'

t.test('a Manager routes a peripheral event to a webhook and a syslog receiver, then exports events and audit trails', async (t) => {
  const app = await build(t, { ...alarmEnv, ...gatewayEnv })
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'soc-manager', 20)
  const hook = await httpReceiver(SECRET)
  const syslog = await tcpReceiver()
  t.teardown(async () => {
    await hook.close()
    await syslog.close()
  })

  // Two destinations: everything Warning or worse from USB goes to both.
  const add = async (payload: object) => {
    const res = await call(app, manager, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload })
    t.equal(res.statusCode, 200, res.body)
    return res.json()
  }
  const webhook = await add({ name: 'soc-webhook', type: 'webhook', filters: { minimumSeverity: 'Warning', categories: ['USB'] }, webhook: { url: hook.url, secret: SECRET } })
  const siem = await add({
    name: 'siem-syslog',
    type: 'syslog',
    filters: { minimumSeverity: 'Warning', categories: ['USB'] },
    syslog: { host: '127.0.0.1', port: syslog.port, transport: 'tcp', format: 'cef' },
  })
  t.notOk(JSON.stringify(webhook).includes(SECRET), 'the secret is never answered')

  // Both are tested for real: each receiver gets the test message.
  const tested = await call(app, manager, { method: 'POST', url: `${ALARM_PATH}/TestAlarmDests`, payload: [webhook.id, siem.id] })
  t.equal(tested.statusCode, 200, tested.body)
  t.match(tested.json(), { succeeded: 2, failed: 0 })
  await waitFor(() => hook.deliveries.length >= 1 && syslog.messages.length >= 1, 5000, 'the test messages')
  t.equal(hook.deliveries[0].body.feed, 'test')
  t.ok(hook.deliveries[0].verified, 'the test message is signed with the secret')
  t.match(syslog.messages[0], /CEF:0\|Prime\|Prime Device Security\|[^|]+\|0x510001\|/)

  // A real agent plugs in an attack tool: the gateway raises 0x110005 and both receive it.
  const agent = await enroll(app)
  const res = await checkIn(app, agent.credential, hostState([attackTool]))
  t.equal(res.statusCode, 200, res.body)
  await waitFor(() => hook.deliveries.some((d) => d.body.feed === 'events') && syslog.messages.length >= 2, 10_000, 'the attack-tool alarm at both')
  const delivered = hook.deliveries.find((d) => d.body.feed === 'events')!
  t.ok(delivered.verified, 'signed')
  t.match(delivered.body.event, { eventCode: '0x110005', category: 'USB', severity: 2, assetKey: agent.uuid, assetName: 'DESKTOP-9LR722S' })
  const line = syslog.messages.find((m) => m.includes('|0x110005|'))
  t.ok(line, 'the syslog receiver has the same event')
  t.match(line!, new RegExp(`externalId=${delivered.body.event.eventID}\\b`))
  t.match(line!, /cs1Label=deliveryId cs1=[0-9a-f-]{36}$/, 'with its own delivery id')
  // Informational events (the new peripheral) pass neither filter.
  t.notOk(
    hook.deliveries.some((d) => d.body.feed === 'events' && d.body.event.severity > 4),
    'nothing below Warning',
  )

  // The same event is in the event list, and the destinations' work in the audit trail.
  const list = await call(app, manager, { method: 'GET', url: '/prime/webui/Events/GetEvents?MinimumSeverity=Critical&Category=USB' })
  t.equal(list.statusCode, 200, list.body)
  t.ok(list.json().data.some((e: any) => e.eventID === delivered.body.event.eventID))
  const audits = await call(app, manager, { method: 'GET', url: '/prime/webui/Events/GetAuditTrails?Category=AlarmDestinations&User=soc-manager' })
  t.equal(audits.statusCode, 200, audits.body)
  t.ok(audits.json().recordsFiltered >= 3, 'two destinations added and one test, by the manager')

  // Exports: CSV and PDF of both.
  const exports: [string, object, string, RegExp][] = [
    ['ExportGetEvents', { Category: 'USB', MinimumSeverity: 'Warning' }, 'text/csv', /^\uFEFFeventID,creationTime,/],
    ['ExportGetEventsPDF/exportpdf', { Category: 'USB' }, 'application/pdf', /^%PDF-/],
    ['ExportGetAudit', { Category: 'AlarmDestinations' }, 'text/csv', /^\uFEFFauditTrailID,/],
    ['ExportGetAuditPDF/exportpdf', { User: 'soc-manager' }, 'application/pdf', /^%PDF-/],
  ]
  for (const [path, payload, type, start] of exports) {
    const file = await call(app, manager, { method: 'POST', url: `/prime/webui/Events/${path}`, payload })
    t.equal(file.statusCode, 200, `${path}: ${file.statusCode}`)
    t.match(file.headers['content-type'], type, path)
    t.match(file.headers['content-disposition'], /^attachment; filename="/, path)
    const text = type === 'text/csv' ? file.body : file.rawPayload.subarray(0, 8).toString('latin1')
    t.match(text, start, path)
    if (path === 'ExportGetEvents') {
      t.ok(file.body.includes('Known attack tool detected'), 'the CSV has the alarm')
      t.notOk(file.body.includes(',New USB peripheral detected,'), 'and only what the filters match')
    }
  }
  const exported = await call(app, manager, { method: 'GET', url: '/prime/webui/Events/GetAuditTrails?Category=System&User=soc-manager' })
  t.ok(exported.json().recordsFiltered >= 4, 'the exports are audited')
})
