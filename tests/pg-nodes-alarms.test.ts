// Two server processes deliver one destination's alarms to one webhook receiver; the node
// delivering it is killed with SIGKILL mid-run. The other node takes the destination over
// once the dead node's lease on it expires (db/postgres/alarms.ts alarmLeaseMs: longer than any
// attempt may take, made from the send timeout), from its oldest delivery still pending: every delivery arrives, in
// outbox order, with stable delivery ids (a delivery the dead node sent but had not recorded
// is sent again with its id: at least once).
import t from 'tap'
import { alarmLeaseMs } from '../db/postgres/alarms.js'
import { connectPostgres } from '../db/postgres/index.js'
import { allReady, killNode, loginAt, request, startNode, type Node } from './fixtures/nodes.js'
import { ALARM_PATH, alarmEnv, httpReceiver } from './fixtures/receivers.js'
import { ADMIN_PASSWORD } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const SECRET = 'whsec-pg-nodes-0123456789'
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
// A send timeout of 3 s (the receiver answers in 0.15): the lease, made from it, lasts 19 s.
const TIMEOUT_S = 3
const LEASE_MS = alarmLeaseMs(TIMEOUT_S * 1000)
const env = { ...alarmEnv, PRIME_ALARM_TIMEOUT_SECONDS: String(TIMEOUT_S), PRIME_RATE_LIMIT_MAX: '1000000', PRIME_LOGIN_RATE_LIMIT_MAX: '100000', PRIME_LOCKOUT_THRESHOLD: '1000' }

t.test('the delivering node killed mid-run: the other takes over, order kept, nothing lost', { skip: noPostgres, timeout: LEASE_MS + 120_000 }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const db = connectPostgres(url, { max: 1 })
  t.teardown(() => db.close())
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  // A receiver that takes a while: the run is still going when the node is killed.
  rx.respond = () => ({ status: 200, delayMs: 150 })
  const seen = rx.deliveries
  const a = await startNode(t, url, 'a', env)
  await allReady([a])
  const admin = await loginAt(a)
  const added = await request(a, 'POST', `${ALARM_PATH}/AddOrUpdateAlarmDest`, {
    token: admin,
    body: { name: 'soar', type: 'webhook', filters: { minimumSeverity: 'Debug', feeds: ['events', 'audit'] }, webhook: { url: rx.url, secret: SECRET } },
  })
  t.equal(added.status, 200, 'destination added')
  const destination = added.json().id as string

  // Audit records (logins) written through A: A takes the destination and delivers.
  // Ten at a time: written faster than the receiver takes them, so that a backlog waits.
  const writeThrough = (node: Node, n: number) =>
    Promise.all(
      Array.from({ length: 10 }, async () => {
        for (let i = 0; i < n / 10; i++) await loginAt(node, 'admin', ADMIN_PASSWORD)
      }),
    )
  await writeThrough(a, 100)
  const b = await startNode(t, url, 'b', env)
  await allReady([b])
  // Both write; A still holds the destination's lease, B waits for it.
  const writing = writeThrough(b, 40)
  for (let end = Date.now() + 20_000; seen.length < 15 && Date.now() < end; ) await sleep(10)
  t.ok(seen.length >= 15, `A is delivering (${seen.length} received)`)
  const lease = await db.one<{ holder: string }>('SELECT holder FROM leases WHERE name = $1', [`alarm-destination:${destination}`])
  t.ok(lease, 'held under a lease')
  const pending = async () => Number(await db.value(`SELECT count(*) FROM alarm_outbox WHERE destination_id = $1 AND status = 'pending'`, [destination]))
  t.ok((await pending()) > 10, 'with deliveries still pending')
  const killedAt = Date.now()
  await killNode(a)
  const atKill = seen.length
  // When the first delivery after the kill arrives (from B).
  let resumedAt: number | undefined
  const watching = (async () => {
    while (resumedAt === undefined && Date.now() < killedAt + LEASE_MS + 60_000) {
      if (seen.length > atKill) resumedAt = Date.now()
      await sleep(20)
    }
  })()
  await writing
  await writeThrough(b, 20)

  // B delivers the rest once A's lease has expired.
  const total = async () => Number(await db.value('SELECT count(*) FROM alarm_outbox WHERE destination_id = $1', [destination]))
  for (let end = Date.now() + LEASE_MS + 60_000; Date.now() < end; await sleep(100)) {
    const queued = await db.value<boolean>('SELECT (SELECT coalesce(max(id), 0) FROM events) <= (SELECT up_to FROM alarm_events_queued WHERE id = 1)')
    if (queued && (await pending()) === 0 && seen.length >= (await total())) break
  }
  const rows = await db.query<{ delivery_id: string; status: string }>('SELECT delivery_id, status FROM alarm_outbox WHERE destination_id = $1 ORDER BY id', [destination])
  t.ok(rows.length >= 150, `${rows.length} deliveries queued for the destination`)
  t.ok(
    rows.every((r) => r.status === 'delivered'),
    'every one delivered',
  )
  t.ok(
    seen.every((d) => d.verified),
    'every request signed with the shared secret',
  )
  const received = seen.map((d) => d.body.deliveryId as string)
  const firsts = [...new Set(received)]
  t.same(
    firsts,
    rows.map((r) => r.delivery_id),
    'each delivery id received, first in outbox order: nothing lost, nothing out of order',
  )
  const again = received.length - firsts.length
  t.ok(again <= 5, `${again} sent again after the kill (at least once), with their ids`)
  const repeated = received.filter((id, i) => received.indexOf(id) < i)
  t.ok(
    repeated.every((id) => received.indexOf(id) < atKill),
    'only what the dead node had sent comes again',
  )
  await watching
  const takeOverMs = (resumedAt ?? Date.now()) - killedAt
  t.ok(takeOverMs <= LEASE_MS + 10_000, `B resumed ${Math.round(takeOverMs / 1000)} s after the kill (lease ${LEASE_MS / 1000} s)`)
})
