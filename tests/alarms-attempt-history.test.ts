// The attempt history of deliveries: a delivered attempt is kept on its outbox row, not as a
// row of alarm_attempts (migration 031), and alarm_attempt_history (and the repository's
// attempts()) give every attempt as alarm_attempts alone gave them before: after a TCP
// syslog write of several lines, after a failed write and its retry, for a delivery
// cancelled while its attempt was in flight, and after pruning.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { call } from './helpers.js'
import { alarmsOf, query, recordEvents } from './seed.js'
import { ALARM_PATH, alarmApp, closedPort, tcpReceiver, waitFor } from './fixtures/receivers.js'
import { iso } from '../lib/time.js'
import type { AttemptRecord } from '../lib/alarms/ports.js'
import type { EventInput } from '../lib/events/ports.js'

const setup = alarmApp

async function syslogDest(app: FastifyInstance, token: string, port: number, id?: string) {
  const payload = { ...(id ? { id } : {}), name: 'siem', type: 'syslog', filters: { minimumSeverity: 'Debug' }, syslog: { host: '127.0.0.1', port, transport: 'tcp' } }
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json()
}

const events = (n: number): EventInput[] =>
  Array.from({ length: n }, (_, i) => ({ code: '0x110005', severity: 2, category: 'USB', entityId: 'PC-1 (10.0.0.1)', description: 'Known attack tool detected', details: `event ${i}` }))

// The events' deliveries are queued behind their writes (by the worker): queued here first.
async function outbox(app: FastifyInstance, destinationId: string): Promise<any[]> {
  await alarmsOf(app).queueAllEvents()
  return query(app, 'SELECT * FROM alarm_outbox WHERE destination_id = ? ORDER BY id', destinationId)
}
const history = (app: FastifyInstance, outboxId: number) => query(app, 'SELECT * FROM alarm_attempt_history WHERE outbox_id = ? ORDER BY attempt', outboxId)
const attemptRows = (app: FastifyInstance, destinationId: string) => query(app, 'SELECT outbox_id, attempt, outcome FROM alarm_attempts WHERE destination_id = ? ORDER BY id', destinationId)

t.test('a TCP syslog write of several lines: each delivery shows its one attempt, kept on its outbox row', async (t) => {
  const { app, token, worker, clock } = await setup(t)
  const rx = await tcpReceiver()
  t.teardown(() => rx.close())
  const dest = await syslogDest(app, token, rx.port)
  await recordEvents(app, Date.now(), events(5))
  const started = clock.get()
  await worker.drain()
  const rows = await outbox(app, dest.id)
  t.equal(rows.length, 5)
  t.ok(
    rows.every((r) => r.status === 'delivered' && r.attempts === 1 && r.last_error === null),
    'all delivered at the first attempt',
  )
  const { duration_ms: duration, done_ms: done } = rows[0]
  t.ok(duration > 0, 'the write took some time')
  t.equal(done, started + Math.round(duration), 'done when the write ended')
  for (const r of rows) {
    const expected = { outbox_id: r.id, destination_id: dest.id, attempt: 1, started_ms: started, duration_ms: duration, outcome: 'delivered', error: null }
    t.same(await history(app, r.id), [expected], 'one attempt: the write that delivered it, with the time and duration of that write')
    t.same(await alarmsOf(app).attempts(r.id), [{ attempt: 1, started_ms: started, duration_ms: duration, outcome: 'delivered', error: null }], 'the repository reads the same')
  }
  t.same(await attemptRows(app, dest.id), [], 'no row of alarm_attempts for a delivered attempt')
  const listed = (await call(app, token, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })).json().data[0]
  t.same(listed.delivery, { pending: 0, lastAttemptTime: iso(started), lastStatus: 'delivered', lastError: null, lastDeliveredTime: iso(done), failedLast24h: 0 })
})

t.test('a failed write and its retry: the retry stays a row, the delivered attempt follows it', async (t) => {
  const { app, token, worker, clock } = await setup(t)
  const dest = await syslogDest(app, token, await closedPort())
  await recordEvents(app, Date.now(), events(3))
  const first = clock.get()
  await worker.turn()
  let rows = await outbox(app, dest.id)
  t.ok(
    rows.every((r) => r.status === 'pending' && r.attempts === 1 && r.started_ms === null),
    'all waiting for a retry',
  )
  const listed = (await call(app, token, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })).json().data[0]
  t.match(listed.delivery, { pending: 3, lastStatus: 'failed', lastError: /^The receiver could not be reached/ })

  const rx = await tcpReceiver()
  t.teardown(() => rx.close())
  await syslogDest(app, token, rx.port, dest.id)
  clock.set(Math.max(...rows.map((r) => r.next_attempt_ms)))
  const second = clock.get()
  await worker.drain()
  await waitFor(() => rx.messages.length >= 3, 5000, 'the lines')
  t.equal(rx.messages.length, 3, 'sent again, once each')
  rows = await outbox(app, dest.id)
  for (const r of rows) {
    t.match(r, { status: 'delivered', attempts: 2, last_error: null, started_ms: second })
    const tried = await history(app, r.id)
    t.same(
      tried.map((a) => [a.attempt, a.outcome, a.started_ms]),
      [
        [1, 'retry', first],
        [2, 'delivered', second],
      ],
    )
    t.match(tried[0], { destination_id: dest.id, error: /^The receiver could not be reached/ })
    t.equal(tried[1].error, null)
    t.ok(tried[1].duration_ms > 0)
  }
  t.same(
    await attemptRows(app, dest.id),
    rows.map((r) => ({ outbox_id: r.id, attempt: 1, outcome: 'retry' })),
    'only the failed attempts are rows of alarm_attempts',
  )
})

t.test('a delivered attempt of a delivery cancelled meanwhile keeps a row of its own', async (t) => {
  const { app, token } = await setup(t)
  const dest = await syslogDest(app, token, await closedPort())
  await recordEvents(app, Date.now(), events(2))
  const [kept, cancelled] = await outbox(app, dest.id)
  await query(app, `UPDATE alarm_outbox SET status = 'cancelled', done_ms = 5 WHERE id = ?`, cancelled.id)
  const attempt = (outboxId: number, startedMs: number): AttemptRecord => ({ outboxId, destinationId: dest.id, attempt: 1, startedMs, durationMs: 2.5, outcome: 'delivered', error: null })
  const failed = await alarmsOf(app).recordAttempts([attempt(kept.id, 1000), attempt(cancelled.id, 1000)])
  t.same([...failed], [])
  const [a, b] = await outbox(app, dest.id)
  t.match(a, { status: 'delivered', attempts: 1, started_ms: 1000, duration_ms: 2.5, done_ms: 1003 })
  t.match(b, { status: 'cancelled', attempts: 0, started_ms: null, duration_ms: null, done_ms: 5 }, 'a cancelled delivery stays cancelled')
  t.same(await attemptRows(app, dest.id), [{ outbox_id: cancelled.id, attempt: 1, outcome: 'delivered' }], 'its attempt is a row of alarm_attempts, as before')
  for (const id of [kept.id, cancelled.id]) {
    t.same(await history(app, id), [{ outbox_id: id, destination_id: dest.id, attempt: 1, started_ms: 1000, duration_ms: 2.5, outcome: 'delivered', error: null }])
  }
})

t.test('pruning drops a delivered attempt when it started before the mark, as its row was', async (t) => {
  const { app, token } = await setup(t)
  const dest = await syslogDest(app, token, await closedPort())
  await recordEvents(app, Date.now(), events(4))
  const [gone, straddling, recent, retried] = await outbox(app, dest.id)
  const mark = 1_000_000
  const at = (outboxId: number, startedMs: number, durationMs: number, outcome: AttemptRecord['outcome'] = 'delivered'): AttemptRecord => ({
    outboxId,
    destinationId: dest.id,
    attempt: 1,
    startedMs,
    durationMs,
    outcome,
    error: outcome === 'delivered' ? null : 'x',
    nextAttemptMs: outcome === 'retry' ? mark + 60_000 : undefined,
  })
  await alarmsOf(app).recordAttempts([at(gone.id, mark - 100, 50), at(straddling.id, mark - 10, 30), at(recent.id, mark + 5, 1), at(retried.id, mark - 5, 1, 'retry')])
  t.same((await history(app, straddling.id)).length, 1)
  await alarmsOf(app).prune(mark)
  const rows = new Map((await outbox(app, dest.id)).map((r) => [r.id, r]))
  t.notOk(rows.has(gone.id), 'a delivery done before the mark is dropped')
  t.same(await history(app, gone.id), [])
  t.match(rows.get(straddling.id), { status: 'delivered', done_ms: mark + 20 }, 'one done after the mark stays')
  t.same(await history(app, straddling.id), [], 'but its attempt started before the mark: dropped')
  t.same(
    (await history(app, recent.id)).map((a) => [a.attempt, a.outcome, a.started_ms]),
    [[1, 'delivered', mark + 5]],
    'an attempt after the mark stays',
  )
  t.same(await history(app, retried.id), [], 'a retry that started before the mark is dropped')
  t.match(rows.get(retried.id), { status: 'pending', attempts: 1 }, 'its delivery still waits')
})
