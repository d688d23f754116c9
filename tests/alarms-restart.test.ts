// The outbox survives a crash: the real server runs as a child process, is killed
// (SIGKILL) while delivering, and started again; every queued event then reaches the
// receiver at least once, each with one delivery id, none missing; the same for a
// destination in batch mode, whose batches are taken apart as the contract says.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { eventsRepo } from '../db/events.js'
import type { EventInput } from '../lib/events/ports.js'
import { connectPostgres } from '../db/postgres/index.js'
import { pgEventsRepo } from '../db/postgres/events-write.js'
import { alarmLeaseMs } from '../db/postgres/alarms.js'
import { projectRoot } from '../lib/paths.js'
import { freePort, httpReceiver, waitFor } from './fixtures/receivers.js'
import { ADMIN_PASSWORD, testDatabaseEnv } from './helpers.js'

// Compiling the server and two starts take a while on a busy machine.
t.setTimeout(420_000)

const SECRET = 'whsec-restart-0123456789'
const EVENTS = 300
/** The servers' send timeout (s): short, so that on PostgreSQL the killed server's leases, made from it, run out sooner. */
const TIMEOUT_S = 3
const server = path.join(projectRoot, 'dist', 'lib', 'server.js')

function start(env: NodeJS.ProcessEnv, logFile: string): Promise<ChildProcess> {
  const log = fs.openSync(logFile, 'a')
  const child = spawn(process.execPath, [server], { env: { ...process.env, ...env }, stdio: ['ignore', log, log] })
  fs.closeSync(log)
  return new Promise((resolve, reject) => {
    const poll = setInterval(() => {
      if (/Server listening/.test(fs.readFileSync(logFile, 'utf8'))) {
        clearInterval(poll)
        child.removeAllListeners('exit')
        resolve(child)
      }
    }, 10)
    child.once('exit', (code) => {
      clearInterval(poll)
      reject(new Error(`server exited ${code}: ${fs.readFileSync(logFile, 'utf8').slice(-2000)}`))
    })
  })
}

/** What tells how an event came to be queued twice for a destination (its outbox rows and the queue's mark). */
async function queuedTwice(url: string | undefined, dir: string): Promise<unknown> {
  const sql = `SELECT o.id, o.destination_id, o.record_id, o.delivery_id, o.queued_ms, o.status, o.attempts FROM alarm_outbox o
    WHERE (o.destination_id, o.feed, o.record_id) IN (SELECT destination_id, feed, record_id FROM alarm_outbox GROUP BY 1, 2, 3 HAVING count(*) > 1)
    ORDER BY o.record_id, o.id LIMIT 20`
  if (url) {
    const pg = connectPostgres(url, { max: 1 })
    try {
      return { rows: await pg.query(sql), mark: await pg.value('SELECT up_to FROM alarm_events_queued') }
    } finally {
      await pg.close()
    }
  }
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  try {
    return { rows: db.prepare(sql).all() }
  } finally {
    db.close()
  }
}

t.test('killed mid-delivery and started again: every event arrives, none missing', async (t) => {
  // The server as deployed, compiled only when stale (the test runner builds first): a
  // whole tsc here would rewrite dist/ under the other files' server processes.
  const built = spawnSync(process.execPath, [path.join(projectRoot, 'scripts', 'build-if-stale.mjs')], { encoding: 'utf8' })
  t.ok(fs.existsSync(server) && fs.existsSync(path.join(projectRoot, 'dist', 'lib', 'alarms', 'worker.js')), `compiled (${built.status}: ${built.stdout.slice(0, 300)})`)
  // Teardowns run last-registered first: the server is killed before its database is dropped.
  const database = await testDatabaseEnv(t)
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-restart-'))
  const rx = await httpReceiver(SECRET)
  const batches = await httpReceiver(SECRET)
  let child: ChildProcess | undefined
  t.teardown(async () => {
    child?.kill('SIGKILL')
    await rx.close()
    await batches.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  // Slow enough that the kill lands while deliveries are still being made.
  rx.respond = () => ({ status: 200, delayMs: 10 })
  batches.respond = () => ({ status: 200, delayMs: 40 })
  const port = await freePort()
  const env = {
    PRIME_DATA_DIR: dir,
    PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1',
    PRIME_RATE_LIMIT_MAX: '100000',
    PRIME_ALARM_TIMEOUT_SECONDS: String(TIMEOUT_S),
    ...database,
  }
  const logFile = path.join(dir, 'server.log')
  child = await start(env, logFile)

  const base = `http://127.0.0.1:${port}/prime/webui`
  const login = await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }) })
  const { token } = (await login.json()) as { token: string }
  const saved = await fetch(`${base}/Events/AddOrUpdateAlarmDest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name: 'soar', type: 'webhook', filters: { minimumSeverity: 'Debug' }, webhook: { url: rx.url, secret: SECRET } }),
  })
  t.equal(saved.status, 200)
  const batched = await fetch(`${base}/Events/AddOrUpdateAlarmDest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name: 'batched', type: 'webhook', filters: { minimumSeverity: 'Debug' }, webhook: { url: batches.url, secret: SECRET, batch: { maxEvents: 10 } } }),
  })
  t.equal(batched.status, 200)

  // Events written by another process on the same database: they are queued all the same.
  const batch = (from: number): EventInput[] =>
    Array.from({ length: 50 }, (_, k) => ({
      code: '0x110001',
      severity: 6,
      category: 'USB' as const,
      entityId: 'PC (10.0.0.1)',
      description: 'New USB peripheral detected',
      details: `event ${from + k}`,
    }))
  const ids: number[] = []
  if (database.PRIME_DATABASE_URL) {
    const pg = connectPostgres(database.PRIME_DATABASE_URL, { max: 1 })
    const events = pgEventsRepo(pg)
    for (let i = 0; i < EVENTS; i += 50) ids.push(...(await events.record(Date.now(), batch(i))))
    await pg.close()
  } else {
    const db = openDatabase(path.join(dir, 'prime.sqlite'))
    const events = eventsRepo(db)
    for (let i = 0; i < EVENTS; i += 50) db.transaction(() => ids.push(...events.record(Date.now(), batch(i))))()
    db.close()
  }

  await waitFor(() => rx.deliveries.length >= 40, 20_000, 'deliveries to start')
  child.kill('SIGKILL')
  await new Promise((r) => child!.once('exit', r))
  const beforeKill = rx.deliveries.length
  t.ok(beforeKill < EVENTS, `killed mid-delivery, after ${beforeKill} of ${EVENTS}`)

  const t1 = Date.now()
  child = await start(env, logFile)
  const received = () => new Set(rx.deliveries.map((d) => d.body.event.eventID))
  // On PostgreSQL the killed server's leases on its destinations run out first.
  const takeOver = database.PRIME_DATABASE_URL ? alarmLeaseMs(TIMEOUT_S * 1000) : 0
  await waitFor(() => ids.every((id) => received().has(id)), takeOver + 60_000, 'every event after the restart')

  t.comment(`restarted and drained in ${Date.now() - t1} ms`)
  const byDelivery = new Map<string, number>()
  t.ok(
    rx.deliveries.every((d) => d.verified),
    'every request signed',
  )
  for (const d of rx.deliveries) {
    const known = byDelivery.get(d.body.deliveryId)
    if (known !== undefined && known !== d.body.event.eventID) t.fail(`delivery id ${d.body.deliveryId} carried two events`)
    byDelivery.set(d.body.deliveryId, d.body.event.eventID)
  }
  if (byDelivery.size !== EVENTS) t.comment(`outbox rows of an event queued more than once: ${JSON.stringify(await queuedTwice(database.PRIME_DATABASE_URL, dir))}`)
  t.equal(byDelivery.size, EVENTS, 'one delivery id per event')
  t.same(
    [...new Set(byDelivery.values())].sort((a, b) => a - b),
    ids,
    'none missing',
  )
  const firstSeen: number[] = []
  const seen = new Set<number>()
  for (const d of rx.deliveries) {
    if (seen.has(d.body.event.eventID)) continue
    seen.add(d.body.event.eventID)
    firstSeen.push(d.body.event.eventID)
  }
  t.same(firstSeen, ids, 'first received in record order')
  t.comment(`${rx.deliveries.length} requests for ${EVENTS} events: ${rx.deliveries.length - EVENTS} repeated after the kill`)

  // The batch destination: every element once at least, none missing, new ones in order.
  const elements = () => batches.deliveries.flatMap((d) => d.body.deliveries as any[])
  await waitFor(() => new Set(elements().map((e) => e.event.eventID)).size === EVENTS, 60_000, 'every event in batches')
  t.ok(
    batches.deliveries.every((d) => d.verified && d.headers['x-prime-batch-size'] === String(d.body.deliveries.length)),
    'every batch signed and counted',
  )
  const firstInBatches: number[] = []
  const taken = new Set<string>()
  for (const e of elements()) {
    if (taken.has(e.deliveryId)) continue
    taken.add(e.deliveryId)
    firstInBatches.push(e.event.eventID)
  }
  t.same(firstInBatches, ids, 'each delivery id once, first received in record order, none missing')
  t.comment(`${elements().length} elements in ${batches.deliveries.length} batches for ${EVENTS} events`)

  // A graceful stop ends cleanly.
  const exited = new Promise<number | null>((r) => child!.once('exit', (code) => r(code)))
  child.kill('SIGTERM')
  t.equal(await exited, 0)
  child = undefined
})
