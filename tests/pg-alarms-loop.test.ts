// The alarm delivery loop on PostgreSQL, end to end through the app: events (a worker
// poller's reachability changes) and audit records (the requests' own) written through the
// routes reach a webhook receiver on 127.0.0.1, in outbox order, once each, while the loop
// runs on its own timer; its health check answers from the figures the loop reads; and a
// node that stops lets go of its destinations, so that another node delivers at once.
import t from 'tap'
import { connectPostgres, type Postgres } from '../db/postgres/index.js'
import { alarmDeliveryHealth } from '../lib/alarms/index.js'
import { ALARM_PATH, alarmEnv, httpReceiver, type HttpReceiver } from './fixtures/receivers.js'
import { build, call, login } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const SECRET = 'whsec-pg-loop-0123456789'
const POLLER_SECRET = 'pes_pg-alarms-loop-poller-secret'
const AGENTLESS = '/prime/webui/agents/agentless'
const PASSWORD = 'Correct-horse-battery'

type App = Awaited<ReturnType<typeof build>>

async function node(t: Parameters<typeof build>[0], url: string) {
  const app = await build(t, { PRIME_DATABASE_URL: url, PRIME_POLLER_ENROLLMENT_SECRET: POLLER_SECRET, ...alarmEnv })
  return { app, admin: await login(app) }
}

async function addDestination(app: App, admin: string, rx: HttpReceiver): Promise<string> {
  const res = await call(app, admin, {
    method: 'POST',
    url: `${ALARM_PATH}/AddOrUpdateAlarmDest`,
    payload: { name: 'soar', type: 'webhook', filters: { minimumSeverity: 'Debug', feeds: ['events', 'audit'] }, webhook: { url: rx.url, secret: SECRET } },
  })
  if (res.statusCode !== 200) throw new Error(`AddOrUpdateAlarmDest: ${res.statusCode} ${res.body}`)
  return res.json().id
}

/** Resolves once every stored event is queued and nothing is pending (at most `ms`). */
async function drained(db: Postgres, ms = 20_000): Promise<void> {
  const end = Date.now() + ms
  for (;;) {
    const done = await db.value<boolean>(
      `SELECT (SELECT coalesce(max(id), 0) FROM events) <= (SELECT up_to FROM alarm_events_queued WHERE id = 1)
         AND NOT EXISTS (SELECT 1 FROM alarm_outbox WHERE status = 'pending')`,
    )
    if (done) return
    if (Date.now() > end) throw new Error('timed out waiting for the outbox to drain')
    await new Promise((r) => setTimeout(r, 20))
  }
}

const outbox = (db: Postgres) => db.query<{ delivery_id: string; feed: string; record_id: number; status: string }>('SELECT delivery_id, feed, record_id, status FROM alarm_outbox ORDER BY id')

t.test('the loop delivers events and audit records written through the routes, in order, once each', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const db = connectPostgres(url, { max: 2 })
  t.teardown(() => db.close())
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  const { app, admin } = await node(t, url)
  t.equal(app.storage.backend, 'postgres')
  t.ok(
    app.loops.list().some((l) => l.name === 'alarm-delivery' && l.running),
    'the loop runs on PostgreSQL',
  )

  const auditBefore = (await db.value<number>('SELECT coalesce(max(id), 0) FROM audit_trail'))!
  await addDestination(app, admin, rx)

  // Audit records: accounts added.
  for (const name of ['Ann', 'Bob', 'Cid']) {
    const res = await call(app, admin, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: name, email: `${name}@example.com`, userProfile: 10, password: PASSWORD } })
    t.equal(res.statusCode, 200, res.body)
  }
  // Events: a worker poller reports a host going unreachable and back, interleaved with audit records.
  const registered = await app.inject({ method: 'POST', url: `${AGENTLESS}/poller/register`, payload: { enrollmentSecret: POLLER_SECRET, name: 'poller-a', hostName: 'vm', version: '1.0.0' } })
  t.equal(registered.statusCode, 200, registered.body)
  const poller = registered.json()
  t.equal((await call(app, admin, { method: 'PUT', url: `${AGENTLESS}/workerpollerdetails/activatedstatus`, payload: { pollerId: poller.pollerId, isActivated: true } })).statusCode, 200)
  const made = await call(app, admin, {
    method: 'POST',
    url: `${AGENTLESS}/connectiondetails`,
    payload: { name: 'host-1', address: '10.9.0.1', protocol: 'SSH', userName: 'svc', password: PASSWORD, pollerId: poller.pollerId },
  })
  t.equal(made.statusCode, 200, made.body)
  const connectionId = made.json().id
  const t0 = Date.now() - 3_600_000
  const at = (s: number) => new Date(t0 + s * 1000).toISOString()
  let n = 0
  const run = (s: number, reachable: boolean) => ({
    runId: `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`,
    connectionId,
    statusString: reachable ? 'Reachable' : 'Unreachable',
    startTime: at(s),
    endTime: at(s + 1),
    ...(reachable ? { statusDescription: 'SSH banner' } : { statusErrorDescription: 'Connection refused.' }),
  })
  const report = async (runs: object[]) => {
    const res = await app.inject({ method: 'POST', url: `${AGENTLESS}/poller/runs`, headers: { authorization: `Bearer ${poller.credential}` }, payload: { runs } })
    t.equal(res.statusCode, 200, res.body)
  }
  let s = 0
  for (let round = 0; round < 5; round++) {
    await report([run((s += 10), true), run((s += 10), false), run((s += 10), true), run((s += 10), false)])
    await call(app, admin, { method: 'PUT', url: `${AGENTLESS}/connectiondetails`, payload: { id: connectionId, port: 2200 + round } })
  }
  await report([run((s += 10), true)])

  await drained(db)
  const rows = await outbox(db)
  const events = await db.query<{ id: number }>('SELECT id FROM events ORDER BY id')
  t.equal(events.length, 20, 'the runs raised 20 events (one per change of reachability)')
  t.same(
    rows.filter((r) => r.feed === 'events').map((r) => r.record_id),
    events.map((e) => e.id),
    'every event queued, in order',
  )
  const audit = await db.query<{ id: number }>('SELECT id FROM audit_trail WHERE id > $1 ORDER BY id', [auditBefore])
  t.same(
    rows.filter((r) => r.feed === 'audit').map((r) => r.record_id),
    audit.map((a) => a.id),
    'every audit record written since the destination was added queued, in order',
  )
  t.ok(
    rows.every((r) => r.status === 'delivered'),
    'all delivered',
  )
  t.ok(
    rx.deliveries.every((d) => d.verified && d.status === 200),
    'signed',
  )
  t.same(
    rx.deliveries.map((d) => d.body.deliveryId),
    rows.map((r) => r.delivery_id),
    'each once, in outbox order',
  )
  t.same(
    rx.deliveries.map((d) => (d.body.feed === 'events' ? d.body.event.eventID : d.body.auditTrail.auditTrailID)),
    rows.map((r) => r.record_id),
    'each carrying its record',
  )

  t.match(await alarmDeliveryHealth(app), { status: 'Healthy', detail: /^1 destination \(1 enabled\); 0 deliveries pending; 0 failed for good/ })
  const health = await call(app, admin, { method: 'GET', url: '/prime/webui/admin/SubsystemHealth' })
  t.equal(health.statusCode, 200, health.body)
  t.match(
    health.json().subsystems.find((x: { name: string }) => x.name === 'AlarmDelivery'),
    { status: 'Healthy' },
  )
})

t.test('the health check reads the outbox', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  const { app, admin } = await node(t, url)
  const worker = app.alarmWorker
  await worker.pause()
  let now = Date.now()
  worker.clock = () => now
  t.same(await alarmDeliveryHealth(app), { status: 'Healthy', detail: 'No alarm destinations' })
  await addDestination(app, admin, rx)
  t.match(await alarmDeliveryHealth(app), { status: 'Healthy', detail: /^1 destination \(1 enabled\); 1 delivery pending, oldest queued / }, 'the audit record of adding it')
  rx.respond = () => ({ status: 503 })
  await worker.drain()
  t.match(await alarmDeliveryHealth(app), { status: 'Warning', detail: /1 delivery pending, .*; 1 destination retrying after a failed attempt$/ })
  now += 3600_000 + 60_000
  t.match(await alarmDeliveryHealth(app), { status: 'Failed', detail: /1 delivery pending/ }, 'waiting over an hour')
  rx.respond = () => ({ status: 200 })
  await worker.drain()
  t.match(await alarmDeliveryHealth(app), { status: 'Healthy', detail: /^1 destination \(1 enabled\); 0 deliveries pending; 0 failed for good/ }, 'recovered once delivered')
  t.same(
    rx.deliveries.map((d) => d.status),
    [503, 200],
  )
})

t.test('a node that stops lets go of its destinations: another delivers at once', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const db = connectPostgres(url, { max: 2 })
  t.teardown(() => db.close())
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  // Node A takes the destination before node B starts.
  const a = await node(t, url)
  const id = await addDestination(a.app, a.admin, rx)
  await drained(db)
  const lease = () => db.one<{ holder: string; held: boolean }>('SELECT holder, expires_at > now() AS held FROM leases WHERE name = $1', [`alarm-destination:${id}`])
  const before = await lease()
  t.ok(before, 'node A took the destination')

  // Node A keeps the lease while it waits for a retry; stopping lets it go.
  rx.respond = () => ({ status: 503 })
  await call(a.app, a.admin, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'Dee', email: 'dee@example.com', userProfile: 10, password: PASSWORD } })
  const end = Date.now() + 20_000
  while (!(await db.value<boolean>(`SELECT EXISTS (SELECT 1 FROM alarm_outbox WHERE status = 'pending' AND attempts > 0)`))) {
    if (Date.now() > end) throw new Error('timed out waiting for a failed attempt')
    await new Promise((r) => setTimeout(r, 20))
  }
  const b = await node(t, url)
  t.match(await lease(), { holder: before!.holder, held: true }, 'held through the retry wait')
  await a.app.close()
  t.match(await lease(), { holder: before!.holder, held: false }, 'let go when node A stopped')

  // Node B takes the destination over at once: the retry is due, and so is what is written now.
  rx.respond = () => ({ status: 200 })
  const sent = rx.deliveries.length
  await db.run('UPDATE alarm_outbox SET next_attempt_ms = 0 WHERE status = $1', ['pending'])
  await call(b.app, b.admin, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'Eve', email: 'eve@example.com', userProfile: 10, password: PASSWORD } })
  await drained(db, 10_000)
  t.ok(rx.deliveries.length > sent, 'node B delivered')
  const taken = await lease()
  t.not(taken!.holder, before!.holder, 'under a lease of its own')
  const rows = await outbox(db)
  t.ok(
    rows.every((r) => r.status === 'delivered'),
    'all delivered',
  )
  const delivered = rx.deliveries.filter((d) => d.status === 200).map((d) => d.body.deliveryId)
  t.same(
    delivered,
    rows.map((r) => r.delivery_id),
    'each delivered once, in outbox order',
  )
})
