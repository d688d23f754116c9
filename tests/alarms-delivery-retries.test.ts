// Delivery when receivers fail: retries with exponential backoff (driven through the
// worker's clock, no waiting), order kept per destination, permanent failures raising
// "Alarm delivery failure" events, the 24-hour limit, refused addresses and redirects,
// the health check, and a graceful shutdown that lets deliveries in flight finish.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import Database from 'better-sqlite3'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, ADMIN_PASSWORD } from './helpers.js'
import { alarmsOf, query, queryValue, recordEventIds } from './seed.js'
import { ALARM_PATH, alarmApp, alarmEnv, closedPort, httpReceiver, smtpReceiver, waitFor } from './fixtures/receivers.js'
import { alarmDeliveryHealth, alarmWorker } from '../lib/alarms/index.js'
import { backoff, GIVE_UP_MS } from '../lib/alarms/worker.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import type { EventInput } from '../lib/events/ports.js'

const SECRET = 'whsec-retries-0123456789'

const setup = alarmApp

async function addHook(app: FastifyInstance, token: string, name: string, url: string, filters: object = {}) {
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload: { name, type: 'webhook', filters, webhook: { url, secret: SECRET } } })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json()
}

const event = (details: string, extra: Partial<EventInput> = {}): EventInput => ({
  code: '0x110005',
  severity: 2,
  category: 'USB',
  entityId: 'PC-1 (10.0.0.1)',
  description: 'Known attack tool detected',
  details,
  ...extra,
})

// The events' deliveries are queued behind their writes (by the worker): queued here first.
async function outbox(app: FastifyInstance, destinationId: string): Promise<any[]> {
  await alarmsOf(app).queueAllEvents()
  return await query(app, 'SELECT * FROM alarm_outbox WHERE destination_id = ? ORDER BY id', destinationId)
}
const attempts = async (app: FastifyInstance, outboxId: number) => (await query(app, 'SELECT * FROM alarm_attempt_history WHERE outbox_id = ? ORDER BY attempt', outboxId)) as any[]

t.test('backoff: 10 s doubling, at most 1 h, with jitter', async (t) => {
  const mid = () => 0.5
  t.same(
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 30].map((n) => backoff(n, mid)),
    [10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 640_000, 1_280_000, 2_560_000, 3_600_000, 3_600_000, 3_600_000],
  )
  t.equal(
    backoff(1, () => 0),
    9000,
    'jitter: 10 % earlier at most',
  )
  t.equal(
    backoff(1, () => 1),
    11_000,
    '10 % later at most',
  )
  t.equal(
    backoff(12, () => 1),
    3_600_000,
    'never above 1 h',
  )
  const spread = new Set(Array.from({ length: 50 }, () => backoff(3)))
  t.ok(spread.size > 10, 'real jitter spreads retries')
})

t.test('a failing receiver: retried with backoff, same delivery id, order kept', async (t) => {
  const { app, token, worker, clock } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  rx.respond = (_body, n) => (n <= 2 ? { status: 503 } : { status: 200 })
  const dest = await addHook(app, token, 'hook', rx.url)
  await recordEventIds(app, Date.now(), [event('first'), event('second')])

  await worker.turn()
  t.equal(rx.deliveries.length, 1, 'first attempt of the first event only: the second waits behind it')
  let [first, second] = await outbox(app, dest.id)
  t.match(first, { status: 'pending', attempts: 1, last_error: 'The receiver refused it: HTTP 5xx.' })
  let wait = first.next_attempt_ms - clock.get()
  t.ok(wait >= 9000 && wait <= 11_100, `first retry after about 10 s (${wait} ms)`)
  t.match(second, { status: 'pending', attempts: 0 })

  await worker.turn()
  clock.set(first.next_attempt_ms - 1)
  await worker.turn()
  t.equal(rx.deliveries.length, 1, 'nothing is tried before its time')

  clock.set(first.next_attempt_ms)
  await worker.turn()
  t.equal(rx.deliveries.length, 2)
  ;[first] = await outbox(app, dest.id)
  wait = first.next_attempt_ms - clock.get()
  t.ok(wait >= 18_000 && wait <= 22_100, `second retry after about 20 s (${wait} ms)`)

  clock.set(first.next_attempt_ms)
  await worker.turn()
  t.equal(rx.deliveries.length, 4, 'third attempt succeeds, then the second event follows')
  t.same(
    rx.deliveries.map((d) => [d.body.event.details, d.body.attempt]),
    [
      ['first', 1],
      ['first', 2],
      ['first', 3],
      ['second', 1],
    ],
  )
  t.equal(new Set(rx.deliveries.slice(0, 3).map((d) => d.body.deliveryId)).size, 1, 'one delivery id across the retries')
  t.ok(
    rx.deliveries.every((d) => d.verified),
    'each attempt signed anew',
  )
  ;[first, second] = await outbox(app, dest.id)
  t.match(first, { status: 'delivered', attempts: 3, last_error: null })
  t.match(second, { status: 'delivered', attempts: 1 })

  const tried = await attempts(app, first.id)
  t.same(
    tried.map((a) => [a.attempt, a.outcome]),
    [
      [1, 'retry'],
      [2, 'retry'],
      [3, 'delivered'],
    ],
  )
  t.match(tried[0], { error: 'The receiver refused it: HTTP 5xx.', destination_id: dest.id })
  t.equal(tried[2].error, null)
  t.ok(
    tried.every((a) => a.duration_ms > 0 && a.started_ms > 0),
    'every attempt has its time and duration',
  )
  const listed = (await call(app, token, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })).json().data[0]
  t.match(listed.delivery, { pending: 0, lastStatus: 'delivered', lastError: null, failedLast24h: 0 })
})

t.test('429 with Retry-After waits as asked; network errors are retried', async (t) => {
  const { app, token, worker, clock } = await setup(t, { PRIME_ALARM_TIMEOUT_SECONDS: '3' })
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  rx.respond = () => ({ status: 429, headers: { 'retry-after': '120' } })
  const dest = await addHook(app, token, 'hook', rx.url)
  await recordEventIds(app, Date.now(), [event('one')])
  await worker.turn()
  const [row] = await outbox(app, dest.id)
  t.ok(row.next_attempt_ms - clock.get() >= 120_000, 'not before the 120 s asked')
  t.equal(row.last_error, 'The receiver refused it: HTTP 4xx.')

  const port = await closedPort()
  const down = await addHook(app, token, 'down', `http://127.0.0.1:${port}/x`)
  await recordEventIds(app, Date.now(), [event('two')])
  await worker.turn()
  const [refused] = await outbox(app, down.id)
  t.match(refused, { status: 'pending', attempts: 1, last_error: /^The receiver could not be reached: no connection or no answer within 3 s/ })
  const listed = (await call(app, token, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })).json().data.find((d: any) => d.name === 'down')
  t.match(listed.delivery, { pending: 1, lastStatus: 'failed', lastError: /^The receiver could not be reached/ })
})

t.test('permanent failures: 4xx fails at once and raises 0x410001, never sent to its own destination', async (t) => {
  const { app, token, worker } = await setup(t)
  const bad = await httpReceiver(SECRET)
  const other = await httpReceiver(SECRET)
  t.teardown(() => Promise.all([bad.close(), other.close()]))
  bad.respond = () => ({ status: 400 })
  const a = await addHook(app, token, 'rejecting', bad.url, { minimumSeverity: 'Error' })
  const b = await addHook(app, token, 'other', other.url, { minimumSeverity: 'Error' })
  const [e1, e2] = await recordEventIds(app, Date.now(), [event('one'), event('two')])
  await worker.drain()

  t.equal(bad.deliveries.length, 2, 'each tried once, the second not held up by the first')
  t.same(
    (await outbox(app, a.id)).map((r) => [r.record_id, r.status, r.attempts]),
    [
      [e1, 'failed', 1],
      [e2, 'failed', 1],
    ],
  )
  const failures = (await query(app, `SELECT * FROM events WHERE event_code = '0x410001' ORDER BY id`)) as any[]
  t.equal(failures.length, 2)
  t.match(failures[0], { severity: 3, category: 'System', description: 'Alarm delivery failure', entity_id: 'Prime server', alarm_destination_id: a.id })
  t.match(
    failures[0].details,
    new RegExp(
      `^Delivery ${(await outbox(app, a.id))[0].delivery_id} of event ${e1} to alarm destination "rejecting" \\(webhook\\) failed for good after 1 attempt: The receiver refused it: HTTP 4xx\\.$`,
    ),
  )
  t.notOk(
    (await outbox(app, a.id)).some((r) => failures.some((f) => f.id === r.record_id && r.record_id > e2)),
    'not queued for the destination it is about',
  )
  t.same((await outbox(app, a.id)).length, 2)
  t.same(
    other.deliveries.map((d) => d.body.event.eventCode),
    ['0x110005', '0x110005', '0x410001', '0x410001'],
    'the other destination receives them',
  )
  t.same(
    other.deliveries.slice(2).map((d) => d.body.event.eventID),
    failures.map((f) => f.id),
  )

  const listed = (await call(app, token, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })).json().data.find((d: any) => d.id === a.id)
  t.match(listed.delivery, { pending: 0, lastStatus: 'failed', lastError: 'The receiver refused it: HTTP 4xx.', failedLast24h: 2 })
  t.match(await alarmDeliveryHealth(app), { status: 'Failed', detail: /2 failed for good in the last 24 h/ })
  const health = await call(app, token, { method: 'GET', url: '/prime/webui/admin/SubsystemHealth' })
  t.match(
    health.json().subsystems.find((s: any) => s.name === 'AlarmDelivery'),
    { status: 'Failed' },
  )

  // Both destinations broken: failures about failures raise nothing more.
  other.respond = () => ({ status: 404 })
  await recordEventIds(app, Date.now(), [event('three')])
  await worker.drain()
  await worker.drain()
  const after = (await query(app, `SELECT alarm_destination_id AS d FROM events WHERE event_code = '0x410001' ORDER BY id`)) as any[]
  t.same(after.map((r) => r.d).sort(), [a.id, a.id, a.id, b.id].sort(), 'one failure event per failed record, none for failed failure events')
  t.equal(await queryValue(app, `SELECT count(*) AS n FROM alarm_outbox WHERE status = 'pending'`), 0, 'nothing left circling')
})

t.test('e-mail: an SMTP 4xx answer is retried, a 5xx one fails at once', async (t) => {
  const smtp = await smtpReceiver()
  t.teardown(() => smtp.close())
  const app = await build(t, { ...alarmEnv, PRIME_SMTP_URL: smtp.url })
  const token = await login(app)
  const worker = alarmWorker(app)
  worker.pause()
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload: { name: 'mail', type: 'email', email: { recipients: ['soc@example.com'] } } })
  const dest = res.json()
  smtp.refuseRecipients = 451
  await recordEventIds(app, Date.now(), [event('one')])
  await worker.turn()
  t.match((await outbox(app, dest.id))[0], { status: 'pending', attempts: 1, last_error: 'The mail server refused it: SMTP 4xx.' })
  smtp.refuseRecipients = 550
  worker.clock = () => Date.now() + 3600_000
  await worker.turn()
  t.match((await outbox(app, dest.id))[0], { status: 'failed', attempts: 2, last_error: 'The mail server refused it: SMTP 5xx.' })
  t.equal(smtp.mails.length, 0)
  smtp.refuseRecipients = null
  await recordEventIds(app, Date.now(), [event('two')])
  await worker.drain()
  t.same(
    smtp.mails.map((m) => m.subject),
    ['[Prime] [Critical] Known attack tool detected - PC-1 (10.0.0.1)'],
  )
})

t.test('retries stop 24 h after queueing', async (t) => {
  const { app, token, worker, clock } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  rx.respond = () => ({ status: 500 })
  const dest = await addHook(app, token, 'hook', rx.url)
  await recordEventIds(app, Date.now(), [event('one')])
  await worker.turn()
  let [row] = await outbox(app, dest.id)
  // Late retries are never scheduled past the limit: the last one falls on it.
  clock.set(row.queued_ms + GIVE_UP_MS - 5000)
  await worker.turn()
  ;[row] = await outbox(app, dest.id)
  t.equal(row.next_attempt_ms, row.queued_ms + GIVE_UP_MS, 'the last retry is at the limit')
  clock.set(row.next_attempt_ms)
  await worker.turn()
  ;[row] = await outbox(app, dest.id)
  t.match(row, { status: 'failed', attempts: 3, last_error: 'The receiver refused it: HTTP 5xx. (gave up after 3 attempts over 24 h)' })
  t.equal(rx.deliveries.length, 3)
  t.equal(await queryValue(app, `SELECT count(*) FROM events WHERE event_code = '0x410001' AND alarm_destination_id = ?`, dest.id), 1)
})

t.test('redirects are not followed; a refused address fails at delivery too', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  rx.respond = (body) => (body ? { status: 302, headers: { location: 'http://169.254.169.254/latest/meta-data/' } } : { status: 200 })
  const dest = await addHook(app, token, 'redirected', rx.url)
  await recordEventIds(app, Date.now(), [event('one')])
  await worker.drain()
  t.equal(rx.deliveries.length, 1, 'one request, the redirect not followed')
  t.match((await outbox(app, dest.id))[0], { status: 'failed', last_error: 'The receiver refused it: HTTP 3xx (redirects are not followed).' })

  // A destination whose address has become forbidden since it was saved (here, written directly).
  const moved = await addHook(app, token, 'moved', rx.url)
  await query(app, 'UPDATE alarm_destinations SET settings = ? WHERE id = ?', JSON.stringify({ url: 'http://169.254.169.254/hook', secret: SECRET, headers: {} }), moved.id)
  await recordEventIds(app, Date.now(), [event('two')])
  await worker.drain()
  t.match((await outbox(app, moved.id)).at(-1), { status: 'failed', attempts: 1, last_error: 'Address refused: 169.254.169.254: link-local or cloud metadata address.' })
  t.equal(rx.deliveries.filter((d) => d.body?.destination.name === 'moved').length, 0, 'nothing sent anywhere')
})

t.test('health: healthy, warning while retrying, failed after a permanent failure', async (t) => {
  const { app, token, worker, clock } = await setup(t)
  t.same(await alarmDeliveryHealth(app), { status: 'Healthy', detail: 'No alarm destinations' })
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  await addHook(app, token, 'hook', rx.url)
  t.match(await alarmDeliveryHealth(app), { status: 'Healthy', detail: /^1 destination \(1 enabled\); 0 deliveries pending; 0 failed for good/ })
  rx.respond = () => ({ status: 503 })
  await recordEventIds(app, Date.now(), [event('one')])
  await worker.turn()
  t.match(await alarmDeliveryHealth(app), { status: 'Warning', detail: /1 delivery pending, oldest queued .*; 1 destination retrying after a failed attempt/ })
  rx.respond = () => ({ status: 200 })
  clock.set(clock.get() + 3600_000)
  await worker.drain()
  t.match(await alarmDeliveryHealth(app), { status: 'Healthy' }, 'recovered once delivered')
  // A backlog that waits too long is Failed even before anything gives up.
  worker.clock = () => Date.now() + 2 * 3600_000
  rx.respond = () => ({ status: 503 })
  await recordEventIds(app, Date.now(), [event('two')])
  t.match(await alarmDeliveryHealth(app), { status: 'Healthy', detail: /0 deliveries pending; 1 event not queued yet;/ }, 'stored, not queued yet')
  await alarmsOf(app).queueAllEvents()
  t.match(await alarmDeliveryHealth(app), { status: 'Failed', detail: /1 delivery pending/ })
})

t.test('disabled destinations get no new records, but their pending deliveries are still made', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  const dest = await addHook(app, token, 'hook', rx.url)
  await recordEventIds(app, Date.now(), [event('queued while enabled')])
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload: { id: dest.id, name: 'hook', type: 'webhook', enabled: false, webhook: { url: rx.url } } })
  t.equal(res.statusCode, 200, res.body)
  await recordEventIds(app, Date.now(), [event('recorded while disabled')])
  await worker.drain()
  t.same(
    rx.deliveries.map((d) => d.body.event.details),
    ['queued while enabled'],
  )
})

t.test('closing the app lets a delivery in flight finish and records it', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-test-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent', ...alarmEnv })
  const app = await buildApp({ config, logger: false })
  const token = await login(app)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  rx.respond = () => ({ status: 200, delayMs: 400 })
  const dest = await addHook(app, token, 'slow', rx.url)
  alarmWorker(app).pause()
  await recordEventIds(app, Date.now(), [event('in flight'), event('not started')])
  const turn = alarmWorker(app).turn()
  await waitFor(() => rx.deliveries.length === 1, 3000, 'the first request')
  const t0 = Date.now()
  await app.close()
  await turn
  t.ok(Date.now() - t0 >= 300, 'close waited for the answer')
  t.equal(rx.deliveries.length, 1, 'no new delivery starts once closing')
  const db = new Database(config.dbFile, { readonly: true })
  const rows = db.prepare('SELECT status FROM alarm_outbox WHERE destination_id = ? ORDER BY id').pluck().all(dest.id)
  db.close()
  t.same(rows, ['delivered', 'pending'], 'the finished delivery was recorded before the database closed')
})
