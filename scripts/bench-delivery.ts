// npm run bench -- delivery: alarm delivery through the durable outbox. Each round starts
// the built server on a fresh data dir with one webhook destination pointing at a receiver
// in this process (which verifies every signature), queues BENCH_EVENTS events (10,000) in
// one go, kills the server (SIGKILL) once half of them have arrived, starts it again and
// waits until every event has arrived. Reports the time to drain, the delivery rate, the
// repeats the kill caused, and checks that none is lost.
//
// Settings: BENCH_EVENTS (10000), BENCH_ROUNDS (3), BENCH_LOG_LEVEL (info, as in production).
import { spawnSync } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import os from 'node:os'
import path from 'node:path'
import { openDatabase } from '../db/index.js'
import { eventsRepo } from '../db/events.js'
import { eventOf } from '../lib/event-codes.js'
import { PIN, median, startTimed } from './bench-support.js'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const PORT = 18083
const PASSWORD = 'Bench-password-123'
const SECRET = 'whsec-bench-delivery-0123456789'

/** The webhook receiver: checks each signature as the contract tells receivers to, counts events once. */
function receiver() {
  const state = { requests: 0, badSignatures: 0, events: new Set<number>(), firstAt: 0, lastNewAt: 0, onNew: () => {} }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(chunks)
      const expected = 'sha256=' + crypto.createHmac('sha256', SECRET).update(raw).digest('hex')
      const given = String(req.headers['x-prime-signature'] ?? '')
      state.requests++
      if (given.length !== expected.length || !crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected))) state.badSignatures++
      const id = JSON.parse(raw.toString('utf8')).event?.eventID
      if (typeof id === 'number' && !state.events.has(id)) {
        state.events.add(id)
        state.lastNewAt = performance.now()
        if (state.firstAt === 0) state.firstAt = state.lastNewAt
        state.onNew()
      }
      res.writeHead(200).end()
    })
  })
  server.keepAliveTimeout = 60_000
  return { state, server }
}

async function until(check: () => boolean, ms: number, what: string) {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 2))
  }
}

if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])
const rows: { drain: number; rate: number; rateAfter: number; repeats: number; restart: number; beforeKill: number }[] = []
for (let round = 1; round <= ROUNDS; round++) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-delivery-'))
  const { state, server } = receiver()
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const url = `http://127.0.0.1:${(server.address() as import('node:net').AddressInfo).port}/hook`
  const env = {
    PRIME_DATA_DIR: dir,
    PRIME_ADMIN_PASSWORD: PASSWORD,
    PORT: String(PORT),
    HOST: '127.0.0.1',
    LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    PRIME_ALARM_ALLOWED_HOSTS: '127.0.0.1',
    PRIME_RATE_LIMIT_MAX: '100000000',
  }
  const logFile = path.join(dir, 'server.log')
  let { child } = await startTimed(env, logFile)
  const base = `http://127.0.0.1:${PORT}/prime/webui`
  const { token } = (await (
    await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }) })
  ).json()) as { token: string }
  const saved = await fetch(`${base}/Events/AddOrUpdateAlarmDest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name: 'bench', type: 'webhook', filters: { minimumSeverity: 'Debug' }, webhook: { url, secret: SECRET } }),
  })
  if (saved.status !== 200) throw new Error(`AddOrUpdateAlarmDest: ${saved.status} ${await saved.text()}`)

  // Queued the way every writer queues: the events table's trigger, in the events' transaction.
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  const events = eventsRepo(db)
  const ids: number[] = []
  const queuedAt = performance.now()
  for (let i = 0; i < EVENTS; i += 500) {
    const n = Math.min(500, EVENTS - i)
    db.transaction(() => {
      ids.push(
        ...events.record(
          Date.now(),
          Array.from({ length: n }, (_, k) => ({ ...eventOf('peripheralNew'), entityId: 'BENCH-PC (10.0.0.1)', details: `bench event ${i + k}` })),
        ),
      )
    })()
  }
  db.close()

  // Kill once half have arrived.
  await new Promise<void>((r) => {
    state.onNew = () => {
      if (state.events.size >= EVENTS / 2) {
        state.onNew = () => {}
        child.kill('SIGKILL')
        r()
      }
    }
  })
  await new Promise((r) => child.once('exit', r))
  const killedAt = performance.now()
  const beforeKill = state.events.size
  const rateBefore = beforeKill / ((killedAt - state.firstAt) / 1000)
  const restarted = await startTimed(env, logFile)
  child = restarted.child
  const resumedAt = performance.now()
  const afterRestart = state.events.size
  await until(() => state.events.size === EVENTS, 600_000, 'every event')
  const drainedAt = state.lastNewAt
  const lost = ids.filter((id) => !state.events.has(id)).length
  if (lost || state.badSignatures) throw new Error(`round ${round}: ${lost} events lost, ${state.badSignatures} bad signatures`)
  await new Promise<void>((r) => {
    child.once('exit', () => r())
    child.kill('SIGTERM')
  })
  server.closeAllConnections()
  server.close()
  fs.rmSync(dir, { recursive: true, force: true })
  const rateAfter = (EVENTS - afterRestart) / ((drainedAt - resumedAt) / 1000)
  rows.push({ drain: (drainedAt - queuedAt) / 1000, rate: rateBefore, rateAfter, repeats: state.requests - EVENTS, restart: restarted.ms, beforeKill })
  console.log(
    `round ${round}: drained ${EVENTS} in ${((drainedAt - queuedAt) / 1000).toFixed(2)} s; ${rateBefore.toFixed(0)} events/s before the kill, ${rateAfter.toFixed(0)} after; ${state.requests - EVENTS} repeated; none lost`,
  )
}

console.log(
  `\n${EVENTS} events per round to one local webhook (signatures verified), server killed with SIGKILL once half had arrived, then started again; ${ROUNDS} rounds, medians${PIN ? '; receiver on CPU 0, server on CPU 1' : ''}.\n`,
)
console.log('| time to drain (queue to last event, s) | delivery rate before the kill (events/s) | rate after the restart (events/s) | repeated after the kill | restart to listening (ms) | lost |')
console.log('|---|---|---|---|---|---|')
console.log(
  `| ${median(rows.map((r) => r.drain)).toFixed(2)} | ${median(rows.map((r) => r.rate)).toFixed(0)} | ${median(rows.map((r) => r.rateAfter)).toFixed(0)} | ${median(rows.map((r) => r.repeats))} | ${median(rows.map((r) => r.restart)).toFixed(0)} | 0 |`,
)
