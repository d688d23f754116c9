// Pins report e-mail against a real SMTP server on 127.0.0.1 (messages parsed with
// postal-mime): the test message and what sendtestreport says the server answered
// (accepted, refused, unreachable, not configured), its limits; each run's file sent to
// the recipients as an attachment; refused recipients; failed deliveries retried with
// backoff (driven through tick(now)), given up after the last attempt, and shown in the
// Reports health check.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { MAIL_BACKOFF_MS, MAX_MAIL_ATTEMPTS } from '../lib/reports/mail.js'
import { build, call, login, userWithProfile } from './helpers.js'
import { auditSince, lastAuditId } from './seed.js'
import { addAgent } from './fixtures/fleet.js'
import { createReport, download, REPORTS, runNow, smtp } from './reports-support.js'

const SENDER = 'prime-reports@example.com'
const health = async (app: FastifyInstance, token: string) =>
  (await call(app, token, { method: 'GET', url: '/prime/webui/admin/SubsystemHealth' })).json().subsystems.find((s: { name: string }) => s.name === 'Reports')
const testMail = (app: FastifyInstance, token: string, query: string) => call(app, token, { method: 'GET', url: `${REPORTS}/sendtestreport?${query}` })

t.test('sendtestreport says what the SMTP server answered', async (t) => {
  const server = await smtp(t)
  const app = await build(t, { PRIME_SMTP_URL: server.url, PRIME_SMTP_FROM: SENDER })
  const token = await login(app)
  const before = await lastAuditId(app)
  let res = await testMail(app, token, 'Recipient=secops@example.com')
  t.equal(res.statusCode, 200)
  t.match(res.json(), { accepted: true, sender: SENDER, recipient: 'secops@example.com', smtpServer: `127.0.0.1:${server.port}`, smtpCode: 250, smtpResponse: /^250 .*queued as TEST1/, error: null })
  t.match(res.json().messageId, /^<.+@.+>$/)
  t.equal(server.messages.length, 1)
  t.match(server.messages[0], { envelopeFrom: SENDER, envelopeTo: ['secops@example.com'], subject: /test message/, text: /sent by admin/ })
  t.equal(server.messages[0].messageId, res.json().messageId)
  t.match((await auditSince(app, before))[0], { category: 'Reports', operation_id: 'sendTestReport', outcome: 'Succeeded', description: /secops@example\.com: accepted/ })

  res = await testMail(app, token, 'Sender=soc%40example.com&recipient=lead@example.com')
  t.match(res.json(), { accepted: true, sender: 'soc@example.com' }, 'another sender; parameter names in any case')
  t.equal(server.messages[1].from.address, 'soc@example.com')

  server.refuse.add('nobody@example.org')
  res = await testMail(app, token, 'Recipient=nobody@example.org')
  t.equal(res.statusCode, 503, 'a refusal is an error answer a script can tell')
  t.match(res.json(), { code: 'mail-not-sent', detail: /nobody@example\.org .*127\.0\.0\.1:\d+: The SMTP server refused the recipient.*550 5\.7\.1 Relaying denied/ })
  t.match((await auditSince(app, before)).at(-1), { outcome: 'Failed', details: /"smtpCode":550/ })

  for (const q of ['Recipient=not-an-address', '', 'Recipient=a@example.com&Sender=bad%20sender']) t.equal((await testMail(app, token, q)).statusCode, 400, `400 for "${q}"`)
  const user = await userWithProfile(app, token, 'viewer', 10)
  t.equal((await testMail(app, user, 'Recipient=a@example.com')).statusCode, 403, 'it sends mail: Manager or higher')

  await server.stop()
  res = await testMail(app, token, 'Recipient=secops@example.com')
  t.equal(res.statusCode, 503)
  t.match(res.json(), { code: 'mail-not-sent', detail: /ECONNECTION|ECONNREFUSED|connect/i }, 'the server unreachable')
})

t.test('sendtestreport without SMTP says mail is not configured', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const res = await testMail(app, token, 'Recipient=secops@example.com')
  t.equal(res.statusCode, 409)
  t.match(res.json(), { code: 'mail-not-configured', detail: /not configured .*PRIME_SMTP_URL.*no test message was sent/ })
})

t.test('sendtestreport rate limit', async (t) => {
  const server = await smtp(t)
  const app = await build(t, { PRIME_SMTP_URL: server.url, PRIME_SMTP_FROM: SENDER })
  const token = await login(app)
  for (let i = 0; i < 10; i++) t.equal((await testMail(app, token, 'Recipient=secops@example.com')).statusCode, 200)
  const limited = await testMail(app, token, 'Recipient=secops@example.com')
  t.equal(limited.statusCode, 429, 'the 11th in a minute')
  t.ok(Number(limited.headers['retry-after']) >= 1)
  const other = await userWithProfile(app, token, 'manager', 20)
  t.equal((await testMail(app, other, 'Recipient=secops@example.com')).statusCode, 200, 'per caller')
})

t.test('a run e-mails its file to the recipients', async (t) => {
  const server = await smtp(t)
  const app = await build(t, { PRIME_SMTP_URL: server.url, PRIME_SMTP_FROM: SENDER, PRIME_PUBLIC_URL: 'https://prime.example.com' })
  const token = await login(app)
  await addAgent(app, { host_identifier: 'FIN-LT-001' })
  const r = await createReport(app, token, {
    name: 'Weekly agents',
    type: 'agentsInventory',
    format: 'PDF',
    recipients: ['secops@example.com', 'lead@example.com'],
    description: 'For the Monday review.',
  })
  const run = await runNow(app, token, r.id)
  t.match(run, { status: 'succeeded', emailStatus: 'sent', emailDetail: /^250 / })
  t.equal(server.messages.length, 1, 'one message to both')
  const m = server.messages[0]
  t.same(m.envelopeTo.sort(), ['lead@example.com', 'secops@example.com'])
  t.equal(m.envelopeFrom, SENDER, 'the default sender')
  t.match(m.subject, /^Report: Weekly agents \(/)
  t.match(m.text, /"Weekly agents" was generated on/)
  t.match(m.text, /For the Monday review\./)
  t.match(m.text, /https:\/\/prime\.example\.com/)
  t.equal(m.attachments.length, 1)
  const a = m.attachments[0]
  t.equal(a.filename, run.fileName)
  t.equal(a.mimeType, 'application/pdf')
  const file = (await download(app, token, r.id, run.fileId)).rawPayload
  t.ok(Buffer.from(a.content as ArrayBuffer).equals(file), 'the attachment is the stored file')
  t.equal((await health(app, token)).status, 'Healthy')

  // A sender of its own, and a recipient the server refuses: partial.
  server.refuse.add('lead@example.com')
  await call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { id: r.id, sender: 'soc@example.com', format: 'CSV' } })
  const partial = await runNow(app, token, r.id)
  t.match(partial, { emailStatus: 'partial', emailDetail: /Refused: lead@example\.com; accepted: secops@example\.com/ })
  t.equal(server.messages[1].envelopeFrom, 'soc@example.com')
  t.match(server.messages[1].attachments[0], { filename: partial.fileName, mimeType: 'text/csv' })
  const h = await health(app, token)
  t.match(h, { status: 'Warning', detail: /refused for some recipients.*"Weekly agents"/ })
})

t.test('failed deliveries are retried with backoff, then given up, and show in health', async (t) => {
  const server = await smtp(t, false)
  const app = await build(t, { PRIME_SMTP_URL: server.url, PRIME_SMTP_FROM: SENDER })
  const token = await login(app)
  await addAgent(app)
  const r = await createReport(app, token, { name: 'Retried', type: 'agentsInventory', format: 'CSV', recipients: ['secops@example.com'] })
  const run = await runNow(app, token, r.id)
  t.match(run, { status: 'succeeded', emailStatus: 'pending', emailDetail: new RegExp(`Attempt 1 of ${MAX_MAIL_ATTEMPTS} failed`) }, 'the run succeeded; its e-mail waits')
  t.match(await health(app, token), { status: 'Warning', detail: /1 e-mail\(s\) waiting for a retry/ })
  const getRun = async () => (await call(app, token, { method: 'GET', url: `${REPORTS}/get/${r.id}` })).json().runs[0]

  const sched = app.reportScheduler
  const t0 = Date.now()
  await sched.tick(t0 + MAIL_BACKOFF_MS[0] - 5000)
  await sched.idle()
  t.match(await getRun(), { emailStatus: 'pending', emailDetail: /Attempt 1 of/ }, 'not before its time')
  await server.start()
  await sched.tick(t0 + MAIL_BACKOFF_MS[0] + 1000)
  await sched.idle()
  t.match(await getRun(), { emailStatus: 'sent', emailDetail: /^250 / }, 'delivered on the second attempt')
  t.equal(server.messages.length, 1)
  t.equal((await health(app, token)).status, 'Healthy')

  // A server that only says "try again later": every attempt, then failed for good.
  server.busy = true
  const second = await runNow(app, token, r.id)
  t.match(second, { emailStatus: 'pending', emailDetail: /451/ })
  let now = Date.now()
  for (const wait of MAIL_BACKOFF_MS) {
    now += wait + 1000
    await sched.tick(now)
    await sched.idle()
  }
  const last = await getRun()
  t.match(last, { emailStatus: 'failed', emailDetail: new RegExp(`Gave up after ${MAX_MAIL_ATTEMPTS} attempts: 451`) })
  t.equal(server.messages.length, 1, 'nothing more was accepted')
  t.match(await health(app, token), { status: 'Failed', detail: /could not be delivered.*"Retried"/ })
  await sched.tick(now + 24 * 3_600_000)
  await sched.idle()
  t.equal((await getRun()).emailStatus, 'failed', 'no attempt after the last')

  // A permanent refusal is not retried.
  server.busy = false
  server.refuse.add('secops@example.com')
  const third = await runNow(app, token, r.id)
  t.match(third, { emailStatus: 'failed', emailDetail: /550/ })
})

t.test('a report whose recipients are set while e-mail is not configured', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const r = await createReport(app, token, { name: 'No SMTP', type: 'auditTrailDigest', format: 'CSV', recipients: ['secops@example.com'] })
  t.match(r.warnings, [/E-mail is not configured .*PRIME_SMTP_URL.*stored, not mailed/], 'said at creation')
  const run = await runNow(app, token, r.id)
  t.match(run, { status: 'succeeded', emailStatus: 'none', emailDetail: /Not mailed: .*not configured .*PRIME_SMTP_URL/ }, 'the file is stored; not a mail failure')
  const h = await health(app, token)
  t.equal(h.status, 'Healthy', 'a choice, not an error')
  t.match(h.detail, /e-mail not configured \(PRIME_SMTP_URL\): the files of 1 report\(s\) with recipients are stored, not mailed/)
  const updated = await call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { id: r.id, description: 'weekly' } })
  t.match(updated.json().warnings, [/not configured/], 'said at update too')
  const quiet = await createReport(app, token, { name: 'No recipients', type: 'auditTrailDigest', format: 'CSV' })
  t.notOk('warnings' in quiet, 'nothing to say without recipients')
})
