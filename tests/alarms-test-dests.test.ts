// TestAlarmDests: a real test message to each destination, in parallel, reported per
// destination (delivered or the error, and how long it took), never stored or queued.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { latestAudit, query, queryValue } from './seed.js'
import { ALARM_PATH, alarmEnv, closedPort, httpReceiver, smtpReceiver, tcpReceiver, udpReceiver, waitFor } from './fixtures/receivers.js'
import { SYSLOG_HOSTNAME, VERSION } from '../lib/alarms/format.js'

const SECRET = 'whsec-test-dests-012345'

async function addDest(app: FastifyInstance, token: string, payload: object) {
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json()
}
const test = (app: FastifyInstance, token: string, payload: unknown) =>
  call(app, token, { method: 'POST', url: `${ALARM_PATH}/TestAlarmDests`, headers: { 'content-type': 'application/json' }, payload: JSON.stringify(payload) })

t.test('each type receives its test message; failures and unknown ids are reported', async (t) => {
  const smtp = await smtpReceiver()
  const http = await httpReceiver(SECRET)
  const udp = await udpReceiver()
  const tcp = await tcpReceiver()
  t.teardown(() => Promise.all([smtp.close(), http.close(), udp.close(), tcp.close()]))
  const app = await build(t, { ...alarmEnv, PRIME_SMTP_URL: smtp.url, PRIME_ALARM_TIMEOUT_SECONDS: '5' })
  const token = await login(app)
  const hook = await addDest(app, token, { name: 'soc-webhook', type: 'webhook', enabled: false, webhook: { url: http.url, secret: SECRET } })
  const udp5424 = await addDest(app, token, { name: 'udp-5424', type: 'syslog', syslog: { host: '127.0.0.1', port: udp.port } })
  const tcpCef = await addDest(app, token, { name: 'siem-syslog', type: 'syslog', syslog: { host: '127.0.0.1', port: tcp.port, transport: 'tcp', format: 'cef', facility: 'local0' } })
  const mail = await addDest(app, token, { name: 'on-call', type: 'email', email: { recipients: ['soc@example.com'], subjectPrefix: '[Test]' } })
  const port = await closedPort()
  const down = await addDest(app, token, { name: 'down', type: 'syslog', syslog: { host: '127.0.0.1', port, transport: 'tcp' } })
  const downHook = await addDest(app, token, { name: 'down-hook', type: 'webhook', webhook: { url: `http://127.0.0.1:${port}/x`, secret: SECRET } })
  const eventsBefore = await queryValue(app, 'SELECT count(*) FROM events')
  const outboxBefore = await queryValue(app, 'SELECT count(*) FROM alarm_outbox')

  const unknown = '11111111-2222-3333-4444-555555555555'
  const res = await test(app, token, [hook.id.toUpperCase(), udp5424.id, tcpCef.id, mail.id, down.id, downHook.id, unknown])
  t.equal(res.statusCode, 200, res.body)
  const body = res.json()
  t.equal(body.succeeded, 4)
  t.equal(body.failed, 3)
  const [rHook, rUdp, rTcp, rMail, rDown, rDownHook, rUnknown] = body.results
  t.equal(rHook.id, hook.id.toUpperCase(), 'ids answered as given')
  for (const [r, d] of [
    [rHook, hook],
    [rUdp, udp5424],
    [rTcp, tcpCef],
    [rMail, mail],
  ]) {
    t.match(r, { name: d.name, type: d.type, status: 'delivered', error: null, code: null }, d.name)
    t.ok(r.durationMs >= 0 && r.durationMs < 10_000)
    t.ok(Math.abs(Date.parse(r.testedTime) - Date.now()) < 60_000)
  }

  // Webhook, disabled or not: the usual signed payload with feed "test".
  t.equal(http.deliveries.length, 1)
  const delivered = http.deliveries[0]
  t.ok(delivered.verified)
  t.same(delivered.body, rHook.message, 'the message answered is the one sent')
  t.match(delivered.body, {
    feed: 'test',
    attempt: 1,
    destination: { id: hook.id, name: 'soc-webhook' },
    event: {
      eventCode: '0x510001',
      description: 'Alarm destination test message',
      category: 'General',
      severity: 6,
      severityString: 'Informational',
      details: 'Test message from Prime to soc-webhook.',
      eventEntityID: 'Prime server',
    },
  })
  t.equal(delivered.headers['x-prime-delivery-id'], delivered.body.deliveryId)

  await waitFor(() => udp.messages.length === 1 && tcp.messages.length === 1, 2000, 'the syslog messages')
  t.equal(udp.messages[0], rUdp.message)
  t.match(
    rUdp.message,
    new RegExp(
      `^<134>1 \\S+Z ${SYSLOG_HOSTNAME} prime - 0x510001 \\[prime@32473 deliveryId="[0-9a-f-]{36}" category="General" severity="6" source="Prime server"\\] Alarm destination test message: Test message from Prime to udp-5424\\.$`,
    ),
  )
  t.equal(tcp.messages[0], rTcp.message)
  t.match(
    rTcp.message,
    new RegExp(
      `^<134>1 (\\S+)Z ${SYSLOG_HOSTNAME} prime - 0x510001 - CEF:0\\|Prime\\|Prime Device Security\\|${VERSION.replace(/\./g, '\\.')}\\|0x510001\\|Alarm destination test message\\|1\\|rt=\\d+ cat=General msg=Test message from Prime to siem-syslog\\. cs1Label=deliveryId cs1=[0-9a-f-]{36}$`,
    ),
  )
  t.equal(tcp.framingErrors, 0)

  t.equal(smtp.mails.length, 1)
  t.equal(smtp.mails[0].subject, '[Test] [Informational] Alarm destination test message - Prime server')
  t.equal(smtp.mails[0].subject, rMail.message.subject)
  t.match(smtp.mails[0].text, /^Event: 0x510001 Alarm destination test message\nSeverity: Informational \(6\)\nCategory: General\n/)
  t.notMatch(smtp.mails[0].text, 'Event id:', 'no stored event to name')

  const unreachable = 'The receiver could not be reached: no connection or no answer within 5 s (the cause is in the server log).'
  t.match(rDown, { name: 'down', type: 'syslog', status: 'failed', code: 'unreachable', error: unreachable })
  t.type(rDown.message, 'string', 'the message attempted is answered too')
  t.match(rDownHook, { status: 'failed', code: 'unreachable', error: unreachable })
  t.same(rUnknown, { id: unknown, name: null, type: null, status: 'failed', error: 'No alarm destination with this id.', code: 'not-found', durationMs: 0, testedTime: rUnknown.testedTime })

  t.equal(await queryValue(app, 'SELECT count(*) FROM events'), eventsBefore, 'no event stored')
  t.equal(await queryValue(app, 'SELECT count(*) FROM alarm_outbox'), outboxBefore, 'nothing queued')
  const record = (await latestAudit(app, 3)).find((r) => r.operation_id === 'testAlarmDests')!
  t.match(record, { category: 'AlarmDestinations', description: 'Alarm destinations tested: 4 of 7 delivered', outcome: 'Succeeded' })
  t.notMatch(record.details, SECRET)
})

t.test('destinations are tested in parallel, each within its own time', async (t) => {
  const slow1 = await httpReceiver(SECRET)
  const slow2 = await httpReceiver(SECRET)
  t.teardown(() => Promise.all([slow1.close(), slow2.close()]))
  slow1.respond = () => ({ status: 200, delayMs: 1500 })
  slow2.respond = () => ({ status: 500, delayMs: 1500 })
  const app = await build(t, alarmEnv)
  const token = await login(app)
  const a = await addDest(app, token, { name: 'a', type: 'webhook', webhook: { url: slow1.url, secret: SECRET } })
  const b = await addDest(app, token, { name: 'b', type: 'webhook', webhook: { url: slow2.url, secret: SECRET } })
  const t0 = Date.now()
  const res = await test(app, token, [a.id, b.id])
  const took = Date.now() - t0
  t.equal(res.statusCode, 200)
  t.ok(took < 2800, `both in about 1.5 s, not 3 s one after the other (${took} ms)`)
  const [ra, rb] = res.json().results
  t.match(ra, { status: 'delivered' })
  t.ok(ra.durationMs >= 1450, `duration measured: ${ra.durationMs}`)
  t.match(rb, { status: 'failed', code: 'rejected', error: 'The receiver refused it: HTTP 5xx.' })
  t.equal(slow2.deliveries.length, 1, 'no retry')
})

t.test('the address rule applies; invalid bodies; profiles', async (t) => {
  const app = await build(t, alarmEnv)
  const token = await login(app)
  const dest = await addDest(app, token, { name: 'moved', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: SECRET } })
  await query(app, 'UPDATE alarm_destinations SET settings = ? WHERE id = ?', JSON.stringify({ url: 'http://[fe80::1]:80/', secret: SECRET, headers: {} }), dest.id)
  const res = await test(app, token, [dest.id])
  t.equal(res.statusCode, 200)
  t.match(res.json().results[0], { status: 'failed', code: 'address-refused', error: 'Address refused: fe80::1: link-local or cloud metadata address.' })

  // Settings the request cannot carry (written directly, past the checks): a failure, not a 500.
  await query(app, 'UPDATE alarm_destinations SET settings = ? WHERE id = ?', JSON.stringify({ url: 'http://127.0.0.1:9/', secret: SECRET, headers: { 'X-A': 'caf\u2192' } }), dest.id)
  const unsendable = await test(app, token, [dest.id])
  t.equal(unsendable.statusCode, 200)
  t.match(unsendable.json().results[0], { status: 'failed', code: 'delivery-failed', error: /X-A/ })

  for (const body of [null, [], Array.from({ length: 21 }, (_, i) => `id-${i}`)]) {
    const bad = await test(app, token, body)
    t.equal(bad.statusCode, 400, `body ${JSON.stringify(body).slice(0, 40)}`)
  }
  const user = await userWithProfile(app, token, 'reader', 10)
  t.equal((await test(app, user, [dest.id])).statusCode, 403)
  const manager = await userWithProfile(app, token, 'manager', 20)
  t.equal((await test(app, manager, [dest.id])).statusCode, 200)
})
