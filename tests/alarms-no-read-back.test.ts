// Alarm destinations cannot read an internal service back nor map its ports: whatever a
// target answers (status line, headers, body, network error), callers and stored records
// see only a coarse outcome, and a closed port, a silent port and a name that does not
// resolve are one outcome answered after the same time. Texts stored before are rewritten.
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import Database from 'better-sqlite3'
import type { FastifyInstance } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { latestAudit, query, queryValue, recordEventIds } from './seed.js'
import { ALARM_PATH, alarmEnv, closedPort } from './fixtures/receivers.js'
import { alarmWorker } from '../lib/alarms/index.js'
import { migrate } from '../db/index.js'
import { migrationsDir } from '../lib/paths.js'

const SECRET = 'whsec-no-read-back-0123'
/** What an internal service answers: none of it may come back. */
const INTERNAL = 'INTERNAL-ANSWER root:x:0:0 aws_secret_access_key=AKIA-not-for-you'
// Long enough for a receiver on 127.0.0.1 to answer on a busy machine, short for the tests.
const TIMEOUT_S = 3
const TIMEOUT_ENV = { ...alarmEnv, PRIME_ALARM_TIMEOUT_SECONDS: String(TIMEOUT_S) }
const UNREACHABLE = `The receiver could not be reached: no connection or no answer within ${TIMEOUT_S} s (the cause is in the server log).`

/** An "internal service" on 127.0.0.1 answering `status` with a telling body and headers. */
async function internalService(t: Test, status: number): Promise<string> {
  const server = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(status, `Reason ${INTERNAL}`, { 'content-type': 'text/plain', location: `http://10.0.0.1/${INTERNAL}`, 'x-internal': INTERNAL })
      res.end(`${INTERNAL}\n`.repeat(5))
    })
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.closeAllConnections()
        server.close(() => r())
      }),
  )
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/internal`
}

/** A port that accepts connections and never answers (an open port of something silent). */
async function silentPort(t: Test): Promise<number> {
  const sockets = new Set<net.Socket>()
  const server = net.createServer((s) => {
    sockets.add(s)
    s.on('error', () => undefined)
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(
    () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy()
        server.close(() => r())
      }),
  )
  return (server.address() as AddressInfo).port
}

/** A port that accepts connections and resets them at once. */
async function resettingPort(t: Test): Promise<number> {
  const server = net.createServer((s) => s.resetAndDestroy())
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>((r) => server.close(() => r())))
  return (server.address() as AddressInfo).port
}

async function addDest(app: FastifyInstance, token: string, payload: object) {
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/AddOrUpdateAlarmDest`, payload })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json()
}
const hook = (name: string, url: string, feeds = ['events']) => ({ name, type: 'webhook', filters: { feeds }, webhook: { url, secret: SECRET } })
const testDests = (app: FastifyInstance, token: string, ids: string[]) => call(app, token, { method: 'POST', url: `${ALARM_PATH}/TestAlarmDests`, payload: ids })

t.test("TestAlarmDests answers the status class only, never the target's answer", async (t) => {
  const app = await build(t, TIMEOUT_ENV)
  const token = await login(app)
  const cases: [number, string, 'rejected'][] = [
    [500, 'The receiver refused it: HTTP 5xx.', 'rejected'],
    [403, 'The receiver refused it: HTTP 4xx.', 'rejected'],
    [404, 'The receiver refused it: HTTP 4xx.', 'rejected'],
    [302, 'The receiver refused it: HTTP 3xx (redirects are not followed).', 'rejected'],
  ]
  const ids: string[] = []
  for (const [status] of cases) ids.push((await addDest(app, token, hook(`svc-${status}`, await internalService(t, status)))).id)
  const res = await testDests(app, token, ids)
  t.equal(res.statusCode, 200, res.body)
  t.notMatch(res.body, 'INTERNAL-ANSWER', 'nothing of any answer comes back')
  res.json().results.forEach((r: any, i: number) => t.match(r, { status: 'failed', code: cases[i][2], error: cases[i][1] }, `HTTP ${cases[i][0]}`))
  const record = (await latestAudit(app, 3)).find((r) => r.operation_id === 'testAlarmDests')!
  t.notMatch(record.details, 'INTERNAL-ANSWER', 'nor is it in the audit record')
})

t.test('a closed port, a silent port, a reset and a name that does not resolve are one outcome, at one time', async (t) => {
  const app = await build(t, { ...TIMEOUT_ENV, PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1,no-such-host.invalid' })
  const token = await login(app)
  const closed = await closedPort()
  const silent = await silentPort(t)
  const reset = await resettingPort(t)
  const targets: [string, object][] = [
    ['closed webhook', hook('closed', `http://127.0.0.1:${closed}/`)],
    ['silent webhook', hook('silent', `http://127.0.0.1:${silent}/`)],
    ['resetting webhook', hook('reset', `http://127.0.0.1:${reset}/`)],
    ['https to a silent port', hook('tls', `https://127.0.0.1:${silent}/`)],
    ['closed tcp syslog', { name: 'closed-syslog', type: 'syslog', syslog: { host: '127.0.0.1', port: closed, transport: 'tcp' } }],
  ]
  const ids: string[] = []
  for (const [, payload] of targets) ids.push((await addDest(app, token, payload)).id)
  // A name that resolved when saved and no longer does (written directly: saving checks it).
  const gone = await addDest(app, token, hook('gone', `http://127.0.0.1:${closed}/`))
  await query(app, 'UPDATE alarm_destinations SET settings = ? WHERE id = ?', JSON.stringify({ url: 'http://no-such-host.invalid/', secret: SECRET, headers: {} }), gone.id)
  targets.push(['a name that no longer resolves', {}])
  ids.push(gone.id)

  const t0 = performance.now()
  const res = await testDests(app, token, ids)
  const took = performance.now() - t0
  t.equal(res.statusCode, 200, res.body)
  const results = res.json().results
  results.forEach((r: any, i: number) => {
    t.match(r, { status: 'failed', code: 'unreachable', error: UNREACHABLE }, targets[i][0])
    t.ok(r.durationMs >= TIMEOUT_S * 1000 && r.durationMs < TIMEOUT_S * 1000 + 3000, `${targets[i][0]}: answered after the timeout, not before (${r.durationMs} ms)`)
  })
  t.ok(took >= TIMEOUT_S * 1000, `the whole answer waited for it (${Math.round(took)} ms)`)
  t.notMatch(res.body, /ECONN|EAI_AGAIN|ENOTFOUND|socket hang up|SSL routines|wrong version|timed out/, 'no network error text')
})

t.test('the worker keeps only the coarse outcome: lastError (read by a User), attempts, 0x410001 events', async (t) => {
  const app = await build(t, TIMEOUT_ENV)
  const token = await login(app)
  const worker = alarmWorker(app)
  worker.pause()
  const forbidden = await addDest(app, token, hook('forbidden', await internalService(t, 403)))
  const failing = await addDest(app, token, hook('failing', await internalService(t, 503)))
  const closed = await addDest(app, token, hook('closed', `http://127.0.0.1:${await closedPort()}/`))
  await recordEventIds(app, Date.now(), [{ code: '0x110005', severity: 2, category: 'USB', entityId: 'PC-1 (10.0.0.1)', description: 'Known attack tool detected', details: 'x' }])
  const started = performance.now()
  await worker.turn()
  t.ok(performance.now() - started >= TIMEOUT_S * 1000, "an unreachable receiver's attempt ends after the timeout, so its recorded time tells nothing either")

  const reader = await userWithProfile(app, token, 'reader', 10)
  const list = await call(app, reader, { method: 'GET', url: `${ALARM_PATH}/GetAlarmDests` })
  t.equal(list.statusCode, 200)
  t.notMatch(list.body, 'INTERNAL-ANSWER')
  const byId = new Map(list.json().data.map((d: any) => [d.id, d.delivery.lastError]))
  t.equal(byId.get(forbidden.id), 'The receiver refused it: HTTP 4xx.')
  t.equal(byId.get(failing.id), 'The receiver refused it: HTTP 5xx.')
  t.equal(byId.get(closed.id), UNREACHABLE)

  const stored = JSON.stringify([
    await query(app, 'SELECT * FROM alarm_attempts'),
    await query(app, 'SELECT * FROM alarm_outbox'),
    await query(app, 'SELECT * FROM alarm_destinations'),
    await query(app, 'SELECT * FROM events'),
  ])
  t.notMatch(stored, 'INTERNAL-ANSWER', 'stored nowhere')
  t.notMatch(stored, 'ECONNREFUSED')
  const failure = (await queryValue(app, `SELECT details FROM events WHERE event_code = '0x410001'`)) as string
  t.match(failure, /to alarm destination "forbidden" \(webhook\) failed for good after 1 attempt: The receiver refused it: HTTP 4xx\.$/)
  const events = await call(app, reader, { method: 'GET', url: '/prime/webui/Events/GetEvents?category=System' })
  t.notMatch(events.body, 'INTERNAL-ANSWER')
})

/** A database at schema version `version - 1`, as a server of that version left it. */
function databaseBefore(t: Test, version: number): Database.Database {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-coarse-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const db = new Database(path.join(dir, 'prime.sqlite'))
  t.teardown(() => db.close())
  for (const name of fs
    .readdirSync(migrationsDir)
    .filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f))
    .sort()) {
    const n = Number(name.slice(0, 3))
    if (n >= version) continue
    db.transaction(() => {
      db.exec(fs.readFileSync(path.join(migrationsDir, name), 'utf8'))
      db.pragma(`user_version = ${n}`)
    })()
  }
  return db
}

t.test('texts stored before are rewritten to the coarse outcome', async (t) => {
  const db = databaseBefore(t, 25)
  const old = {
    http: `HTTP 401 Unauthorized: ${INTERNAL}`,
    redirect: `HTTP 302 Found: ${INTERNAL} (redirect to http://10.0.0.1/ not followed) (gave up after 3 attempts over 24 h)`,
    refused: 'ECONNREFUSED [::1]:6379: connect ECONNREFUSED ::1:6379',
    timeout: 'no answer within 10 s',
    smtp: `SMTP 550 5.1.1 <${INTERNAL}>: Recipient address rejected`,
    address: 'Address refused: the address 127.0.0.1 is a loopback address, allowed only when db.corp or 127.0.0.1 is listed in PRIME_ALARM_ALLOWED_HOSTS.',
    ours: 'The event 42 no longer exists.',
  }
  const dest = db.prepare(`INSERT INTO alarm_destinations (id, name, name_key, type, settings, created_ms, updated_ms, last_status, last_error)
    VALUES (?, ?, ?, 'webhook', '{}', 1, 1, 'failed', ?)`)
  const outbox = db.prepare(`INSERT INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms, status, attempts, last_error, done_ms)
    VALUES (?, 'events', 1, ?, 1, 'failed', 1, ?, 2)`)
  const attempt = db.prepare(`INSERT INTO alarm_attempts (outbox_id, destination_id, attempt, started_ms, duration_ms, outcome, error) VALUES (?, ?, 1, 1, 1, 'failed', ?)`)
  const event = db.prepare(`INSERT INTO events (created_ms, event_code, severity, category, entity_id, description, details, alarm_destination_id)
    VALUES (1, '0x410001', 3, 'System', 'Prime server', 'Alarm delivery failure', ?, ?)`)
  let i = 0
  for (const [key, text] of Object.entries(old)) {
    const id = `d-${key}`
    const deliveryId = `00000000-0000-4000-8000-${String(++i).padStart(12, '0')}`
    dest.run(id, key, key, text)
    const o = outbox.run(id, deliveryId, text)
    attempt.run(o.lastInsertRowid, id, text)
    event.run(`Delivery ${deliveryId} of event 1 to alarm destination "${key}" (webhook) failed for good after 1 attempt: ${text}`, id)
  }
  // An event whose delivery row was pruned since.
  event.run(`Delivery 00000000-0000-4000-8000-999999999999 of event 1 to alarm destination "gone" (webhook) failed for good after 2 attempts: ${old.http}`, 'd-gone')
  migrate(db)

  const expected: Record<string, string> = {
    http: 'The receiver refused it: HTTP 4xx.',
    redirect: 'The receiver refused it: HTTP 3xx (redirects are not followed). (gave up after its retries over 24 h)',
    refused: 'The receiver could not be reached: no connection or no answer within 10 s (the cause is in the server log).',
    timeout: 'The receiver could not be reached: no connection or no answer within 10 s (the cause is in the server log).',
    smtp: 'The mail server refused it: SMTP 5xx.',
    address: 'Address refused by the address rule.',
    ours: 'The event 42 no longer exists.',
  }
  for (const key of Object.keys(old)) {
    const id = `d-${key}`
    t.equal(db.prepare('SELECT last_error FROM alarm_destinations WHERE id = ?').pluck().get(id), expected[key], `destination: ${key}`)
    t.equal(db.prepare('SELECT last_error FROM alarm_outbox WHERE destination_id = ?').pluck().get(id), expected[key], `outbox: ${key}`)
    t.equal(db.prepare('SELECT error FROM alarm_attempts WHERE destination_id = ?').pluck().get(id), expected[key], `attempt: ${key}`)
    t.match(
      db.prepare('SELECT details FROM events WHERE alarm_destination_id = ?').pluck().get(id),
      new RegExp(`^Delivery [0-9a-f-]{36} of event 1 to alarm destination "${key}" \\(webhook\\) failed for good after 1 attempt: `),
      `event: ${key}`,
    )
    t.ok((db.prepare('SELECT details FROM events WHERE alarm_destination_id = ?').pluck().get(id) as string).endsWith(`: ${expected[key]}`), `event text: ${key}`)
  }
  t.equal(
    db.prepare(`SELECT details FROM events WHERE alarm_destination_id = 'd-gone'`).pluck().get(),
    'Delivery 00000000-0000-4000-8000-999999999999 of event 1 to alarm destination "gone" (webhook) failed for good after 2 attempts: Delivery failed (the detail of failures before this version is no longer shown).',
  )
  const everything = JSON.stringify([
    db.prepare('SELECT * FROM alarm_destinations').all(),
    db.prepare('SELECT * FROM alarm_outbox').all(),
    db.prepare('SELECT * FROM alarm_attempts').all(),
    db.prepare('SELECT * FROM events').all(),
  ])
  t.notMatch(everything, 'INTERNAL-ANSWER')
  t.notMatch(everything, 'ECONNREFUSED')
})
