// Delivery in bulk: webhook batch mode (opt in per destination; off, each record still goes
// alone and unchanged), batches re-formed from the same head on retry, one failure event
// per failed batch, the test message as a batch of one; syslog lines written together over
// TCP and one reused UDP socket; host lookups kept a few seconds with the address rule
// applied on each use.
import dgram from 'node:dgram'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { call } from './helpers.js'
import { query, queryValue, recordEventIds } from './seed.js'
import { ALARM_PATH, alarmApp, httpReceiver, tcpReceiver } from './fixtures/receivers.js'
import { allowList, keptResolver, resolveChecked, type Resolver } from '../lib/alarms/address.js'
import type { EventInput } from '../lib/events/ports.js'

const SECRET = 'whsec-batches-0123456789'

const setup = alarmApp

async function addDest(app: FastifyInstance, token: string, payload: object) {
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json()
}

const hook = (name: string, url: string, batch?: object) => ({ name, type: 'webhook', filters: { minimumSeverity: 'Debug' }, webhook: { url, secret: SECRET, ...(batch ? { batch } : {}) } })

const event = (details: string): EventInput => ({
  code: '0x110005',
  severity: 2,
  category: 'USB',
  entityId: 'PC-1 (10.0.0.1)',
  description: 'Known attack tool detected',
  details,
})
const events = (n: number, from = 0) => Array.from({ length: n }, (_, i) => event(`event ${from + i}`))

const outbox = async (app: FastifyInstance, destinationId: string) =>
  (await query(app, 'SELECT id, record_id, delivery_id, status, attempts, next_attempt_ms FROM alarm_outbox WHERE destination_id = ? ORDER BY id', destinationId)) as any[]
const stored = async (app: FastifyInstance, id: string) => JSON.parse(((await queryValue(app, 'SELECT settings FROM alarm_destinations WHERE id = ?', id)) as string) ?? 'null')

t.test('batch mode is off unless asked for: answered as off, nothing stored, one record per request', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  const dest = await addDest(app, token, hook('single', rx.url))
  t.same(dest.webhook.batch, { maxEvents: 1, maxBytes: 1048576 }, 'answered with its defaults')
  t.notOk('batch' in (await stored(app, dest.id)), 'the stored settings are those of before')
  // Sent back as GetAlarmDests answers it (batch off included): still nothing stored.
  const again = await addDest(app, token, { ...hook('single', rx.url), id: dest.id, webhook: { url: rx.url, batch: dest.webhook.batch } })
  t.same(again.webhook.batch, { maxEvents: 1, maxBytes: 1048576 })
  t.notOk('batch' in (await stored(app, dest.id)))

  await recordEventIds(app, Date.now(), events(3))
  await worker.drain()
  t.equal(rx.deliveries.length, 3, 'one request per record')
  for (const d of rx.deliveries) {
    t.notOk('x-prime-batch-size' in d.headers)
    t.equal(d.headers['x-prime-delivery-id'], d.body.deliveryId)
    t.same(Object.keys(d.body), ['deliveryId', 'feed', 'sentTime', 'attempt', 'destination', 'event'])
  }
})

t.test('batch mode: single payloads in order, signed as a whole, any 2xx acknowledges all', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  const dest = await addDest(app, token, hook('batched', rx.url, { maxEvents: 3 }))
  t.same(dest.webhook.batch, { maxEvents: 3, maxBytes: 1048576 })
  t.same((await stored(app, dest.id)).batch, { maxEvents: 3, maxBytes: 1048576 })
  const ids = await recordEventIds(app, Date.now(), events(7))
  await worker.drain()

  t.same(
    rx.deliveries.map((d) => d.body.count),
    [3, 3, 1],
    'up to maxEvents per request',
  )
  const rows = await outbox(app, dest.id)
  const elements = rx.deliveries.flatMap((d) => d.body.deliveries)
  t.same(
    elements.map((e: any) => e.event.eventID),
    ids,
    'every record once, in order',
  )
  t.same(
    elements.map((e: any) => e.deliveryId),
    rows.map((r) => r.delivery_id),
    "each element carries its delivery's id",
  )
  for (const d of rx.deliveries) {
    t.ok(d.verified, 'the whole body is signed')
    t.equal(d.headers['x-prime-batch-size'], String(d.body.count))
    t.equal(d.headers['x-prime-delivery-id'], d.body.batchId)
    t.equal(d.headers['x-prime-timestamp'], String(d.body.sentTime))
    t.same(Object.keys(d.body), ['batchId', 'sentTime', 'destination', 'count', 'deliveries'])
    t.same(d.body.destination, { id: dest.id, name: 'batched' })
    for (const e of d.body.deliveries) {
      t.same(Object.keys(e), ['deliveryId', 'feed', 'sentTime', 'attempt', 'destination', 'event'], 'each element is the single payload')
      t.match(e, { feed: 'events', attempt: 1, sentTime: d.body.sentTime, destination: { id: dest.id, name: 'batched' } })
    }
  }
  t.not(rx.deliveries[0].body.batchId, rx.deliveries[1].body.batchId)
  t.ok(
    rows.every((r) => r.status === 'delivered' && r.attempts === 1),
    'all delivered',
  )
  const attempts = (await query(app, 'SELECT outbox_id, attempt, outcome FROM alarm_attempt_history WHERE destination_id = ? ORDER BY outbox_id, attempt', dest.id)) as any[]
  t.same(
    attempts.map((a) => [a.outbox_id, a.attempt, a.outcome]),
    rows.map((r) => [r.id, 1, 'delivered']),
    'one attempt recorded per delivery, in order',
  )
  const listed = (await call(app, token, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })).json().data[0]
  t.match(listed.delivery, { pending: 0, lastStatus: 'delivered', lastError: null })
  t.match(listed.webhook, { batch: { maxEvents: 3, maxBytes: 1048576 } })
})

t.test('batch mode: maxBytes bounds a batch; a payload larger than it goes alone', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  await addDest(app, token, hook('sized', rx.url, { maxEvents: 100, maxBytes: 65536 }))
  const big = 'x'.repeat(25_000)
  await recordEventIds(app, Date.now(), [event(big), event(big), event(big), event('y'.repeat(65_000)), event('small')])
  await worker.drain()
  t.same(
    rx.deliveries.map((d) => d.body.count),
    [2, 1, 1, 1],
  )
  t.ok(rx.deliveries[0].raw.length <= 65536)
  t.ok(rx.deliveries[2].raw.length > 65536, 'too large for any batch: alone')
  t.ok(rx.deliveries.every((d) => d.verified))
})

t.test('batch mode: a retry re-forms the batch from the same head; one failure event per failed batch', async (t) => {
  const { app, token, worker, clock } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  rx.respond = (_body, n) => (n === 1 ? { status: 503 } : { status: 200 })
  const dest = await addDest(app, token, hook('retried', rx.url, { maxEvents: 10 }))
  const first = await recordEventIds(app, Date.now(), events(3))
  await worker.turn()
  t.equal(rx.deliveries.length, 1)
  let rows = await outbox(app, dest.id)
  t.ok(
    rows.every((r) => r.status === 'pending' && r.attempts === 1),
    'each element waits for a retry',
  )
  t.equal(new Set(rows.map((r) => r.next_attempt_ms)).size, 1, 'all at the same time')

  const more = await recordEventIds(app, Date.now(), events(2, 3))
  clock.set(rows[0].next_attempt_ms)
  await worker.drain()
  t.equal(rx.deliveries.length, 2)
  const retried = rx.deliveries[1].body
  t.not(retried.batchId, rx.deliveries[0].body.batchId, 'a new batch id')
  t.same(
    retried.deliveries.map((e: any) => e.event.eventID),
    [...first, ...more],
    'from the same head, with what was queued since',
  )
  t.same(
    retried.deliveries.map((e: any) => e.attempt),
    [2, 2, 2, 1, 1],
  )
  t.same(
    retried.deliveries.slice(0, 3).map((e: any) => e.deliveryId),
    rx.deliveries[0].body.deliveries.map((e: any) => e.deliveryId),
    'the same delivery ids: receivers de-duplicate on them',
  )
  rows = await outbox(app, dest.id)
  t.same(
    rows.map((r) => [r.status, r.attempts]),
    [
      ['delivered', 2],
      ['delivered', 2],
      ['delivered', 2],
      ['delivered', 1],
      ['delivered', 1],
    ],
  )

  // Refused for good: every element failed, one event for the batch.
  rx.respond = () => ({ status: 400 })
  const failing = await recordEventIds(app, Date.now(), events(4, 10))
  await worker.drain()
  rows = (await outbox(app, dest.id)).filter((r) => failing.includes(r.record_id))
  t.ok(
    rows.every((r) => r.status === 'failed' && r.attempts === 1),
    'every element failed',
  )
  const failures = (await query(app, `SELECT details, alarm_destination_id FROM events WHERE event_code = '0x410001'`)) as any[]
  t.equal(failures.length, 1, 'one failure event, not one per delivery')
  t.equal(failures[0].alarm_destination_id, dest.id)
  t.match(
    failures[0].details,
    new RegExp(
      `^Batch [0-9a-f-]{36} of 4 deliveries, deliveries ${rows[0].delivery_id} \\(event ${failing[0]}\\) to ${rows[3].delivery_id} \\(event ${failing[3]}\\), to alarm destination "retried" \\(webhook\\) failed for good after 1 attempt: The receiver refused it: HTTP 4xx\\.$`,
    ),
  )
})

t.test('TestAlarmDests to a batch destination sends a batch of one, as the contract says', async (t) => {
  const { app, token } = await setup(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  const dest = await addDest(app, token, hook('tested', rx.url, { maxEvents: 50 }))
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/TestAlarmDests`, payload: [dest.id] })
  t.equal(res.statusCode, 200)
  const result = res.json().results[0]
  t.match(result, { status: 'delivered', message: { feed: 'test' } })
  t.equal(rx.deliveries.length, 1)
  t.ok(rx.deliveries[0].verified)
  t.equal(rx.deliveries[0].headers['x-prime-batch-size'], '1')
  t.match(rx.deliveries[0].body, { count: 1 })
  t.same(rx.deliveries[0].body.deliveries, [result.message], 'the answer shows the element sent')
})

t.test('batch settings: limits refused with 400, turned off by leaving them out, audited', async (t) => {
  const { app, token } = await setup(t)
  for (const batch of [{ maxEvents: 0 }, { maxEvents: 1001 }, { maxBytes: 1000 }, { maxBytes: 5 * 1024 * 1024 }, { maxEvents: 5, other: 1 }]) {
    const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload: hook(`bad-${JSON.stringify(batch)}`, 'http://127.0.0.1:9/h', batch) })
    t.equal(res.statusCode, 400, JSON.stringify(batch))
  }
  const dest = await addDest(app, token, hook('toggled', 'http://127.0.0.1:9/h', { maxEvents: 20, maxBytes: 2097152 }))
  t.same((await stored(app, dest.id)).batch, { maxEvents: 20, maxBytes: 2097152 })
  const off = await addDest(app, token, { ...hook('toggled', 'http://127.0.0.1:9/h'), id: dest.id })
  t.same(off.webhook.batch, { maxEvents: 1, maxBytes: 1048576 })
  t.notOk('batch' in (await stored(app, dest.id)))
  const audit = (await queryValue(app, `SELECT details FROM audit_trail WHERE description LIKE 'Alarm destination "toggled" updated%' ORDER BY id DESC LIMIT 1`)) as string
  t.match(JSON.parse(audit), { webhook: { batch: null } }, 'turning it off is audited')
})

t.test('syslog over TCP: many lines in order on one connection, framed one by one', async (t) => {
  const { app, token, worker } = await setup(t)
  const rx = await tcpReceiver()
  t.teardown(() => rx.close())
  const dest = await addDest(app, token, { name: 'siem', type: 'syslog', filters: { minimumSeverity: 'Debug' }, syslog: { host: '127.0.0.1', port: rx.port, transport: 'tcp' } })
  const ids = await recordEventIds(app, Date.now(), events(1200))
  await worker.drain()
  // Written is not yet read: the receiver gets the last lines a moment later, later still
  // on a loaded machine.
  const end = Date.now() + 5000
  while (rx.messages.length < ids.length && Date.now() < end) await new Promise((r) => setTimeout(r, 5))
  t.equal(rx.framingErrors, 0)
  t.equal(rx.connections, 1)
  t.same(
    rx.messages.map((m) => Number(/eventID="(\d+)"/.exec(m)?.[1])),
    ids,
    'every line once, in order',
  )
  t.ok(
    (await outbox(app, dest.id)).every((r) => r.status === 'delivered'),
    'all delivered',
  )
})

t.test('syslog over UDP: one socket for every datagram', async (t) => {
  const { app, token, worker } = await setup(t)
  const socket = dgram.createSocket('udp4')
  const got: { port: number; text: string }[] = []
  socket.on('message', (msg, rinfo) => got.push({ port: rinfo.port, text: msg.toString('utf8') }))
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => socket.close(() => r())))
  await addDest(app, token, { name: 'udp', type: 'syslog', filters: { minimumSeverity: 'Debug' }, syslog: { host: '127.0.0.1', port: (socket.address() as AddressInfo).port, transport: 'udp' } })
  await recordEventIds(app, Date.now(), events(20))
  await worker.drain()
  const end = Date.now() + 2000
  while (got.length < 20 && Date.now() < end) await new Promise((r) => setTimeout(r, 5))
  t.equal(got.length, 20)
  t.equal(new Set(got.map((g) => g.port)).size, 1, 'sent from one source port')
})

t.test('kept lookups: one per host within the time kept, the address rule applied on each use', async (t) => {
  let lookups = 0
  let answer = '10.0.0.5'
  const resolver: Resolver = async () => {
    lookups++
    return [{ address: answer, family: 4 }]
  }
  let now = 0
  const kept = keptResolver(5000, resolver, () => now)
  const open = allowList([])
  t.same(await resolveChecked('siem.example.com', open, kept), { address: '10.0.0.5', family: 4 })
  t.same(await resolveChecked('siem.example.com', open, kept), { address: '10.0.0.5', family: 4 })
  t.equal(lookups, 1, 'looked up once')
  await t.rejects(resolveChecked('siem.example.com', allowList([], true), kept), { kind: 'private' }, 'a stricter rule refuses the kept address')
  t.equal(lookups, 1)
  answer = '10.0.0.6'
  now = 4999
  t.match(await resolveChecked('siem.example.com', open, kept), { address: '10.0.0.5' })
  now = 5000
  t.match(await resolveChecked('siem.example.com', open, kept), { address: '10.0.0.6' }, 'a DNS change is seen once the time kept has passed')
  t.equal(lookups, 2)
  const failing = keptResolver(5000, async () => {
    lookups++
    throw Object.assign(new Error('no'), { code: 'ENOTFOUND' })
  })
  await t.rejects(resolveChecked('gone.example.com', open, failing), { kind: 'unresolvable' })
  await t.rejects(resolveChecked('gone.example.com', open, failing), { kind: 'unresolvable' })
  t.equal(lookups, 4, 'a failed lookup is not kept')
})
