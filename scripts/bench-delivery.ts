// npm run bench -- delivery: alarm delivery through the durable outbox, one case per kind of
// destination. Each round saves the case's destination on a fresh data dir, stops the
// server, stores the case's events (the server's delivery worker queues their deliveries
// behind the writes, as for every writer), starts the server, kills it (SIGKILL) once half of them have arrived,
// starts it again and waits until every event has arrived. The receivers run in this
// process and take deliveries as the contract tells receivers to: each webhook signature
// verified (a batch once, then its elements in order), syslog frames read strictly, each
// delivery counted once by its deliveryId. A round fails when an event is lost, a
// signature does not verify or new events arrive out of order.
//
// Cases (BENCH_CASES, all by default), each against its target:
// - single: webhook, one event per request (today's default; reported, no target);
// - batch: webhook in batch mode, 500 per batch, >= 5,000 events/s;
// - syslog: syslog over TCP (RFC 5424, octet counting), >= 20,000 events/s;
// - slow: webhook in batch mode, 1,000 per batch, the receiver answering after 100 ms, >= 5,000 events/s.
// - burst (BENCH_CASES=burst, not in the default run): a mass disconnect, BENCH_BURST_EVENTS
//   (100,000) events stored in slices of 500 (by a thread of this process) while the server runs, to three destinations
//   (webhook batch 500, syslog TCP, webhook one per request), the server killed halfway
//   (by the batch destination's count) and started again: the time from the first queued
//   event to the last arrived at each, <= 30 s for the batch and syslog ones.
// Beside each: the receiver's own floor, what it takes from a client in this process
// sending preformed bodies (or frames) one at a time for BENCH_SECONDS: what the loopback
// and the receiver allow, whatever the server does.
//
// Settings: BENCH_EVENTS (10,000 for single), BENCH_BATCH_EVENTS (50,000 for the others),
// BENCH_ROUNDS (3), BENCH_SECONDS (3, the floors), BENCH_LOG_LEVEL (info, as in production),
// BENCH_PORT (18083, the server's).
import { spawnSync, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { Worker } from 'node:worker_threads'
import { openDatabase } from '../db/index.js'
import { eventsRepo } from '../db/events.js'
import { eventOf } from '../lib/event-codes.js'
import { PIN, median, startTimed, stop } from './bench-support.js'

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000)
const BATCH_EVENTS = Number(process.env.BENCH_BATCH_EVENTS ?? 50_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3)
/** The server's port (BENCH_PORT): another bench on the same machine may hold the default. */
const PORT = Number(process.env.BENCH_PORT ?? 18083)
const PASSWORD = 'Bench-password-123'
const SECRET = 'whsec-bench-delivery-0123456789'

interface Case {
  key: string
  label: string
  /** events/s, or null: reported only. */
  target: number | null
  events: number
  kind: 'webhook' | 'syslog'
  batch?: number
  delayMs: number
}
const ALL: Case[] = [
  { key: 'single', label: 'webhook, one event per request', target: null, events: EVENTS, kind: 'webhook', delayMs: 0 },
  { key: 'batch', label: 'webhook, batch 500', target: 5000, events: BATCH_EVENTS, kind: 'webhook', batch: 500, delayMs: 0 },
  { key: 'syslog', label: 'syslog TCP', target: 20_000, events: BATCH_EVENTS, kind: 'syslog', delayMs: 0 },
  { key: 'slow', label: 'slow receiver 100 ms, batch 1000', target: 5000, events: BATCH_EVENTS, kind: 'webhook', batch: 1000, delayMs: 100 },
]
const BURST_EVENTS = Number(process.env.BENCH_BURST_EVENTS ?? 100_000)
const wanted = (process.env.BENCH_CASES ?? ALL.map((c) => c.key).join(',')).split(',')
const CASES = ALL.filter((c) => wanted.includes(c.key))

/** What a receiver has taken: each delivery once (by deliveryId), the events they carry. */
function tally() {
  return {
    requests: 0,
    elements: 0,
    repeats: 0,
    badSignatures: 0,
    badBatches: 0,
    outOfOrder: 0,
    lastNew: 0,
    deliveries: new Set<string>(),
    events: new Set<number>(),
    firstAt: 0,
    lastNewAt: 0,
    onNew: () => {},
  }
}
type Tally = ReturnType<typeof tally>

function take(state: Tally, deliveryId: string, eventId: number) {
  state.elements++
  if (state.deliveries.has(deliveryId)) {
    state.repeats++
    return
  }
  state.deliveries.add(deliveryId)
  // New deliveries of one destination arrive in record order.
  if (eventId < state.lastNew) state.outOfOrder++
  state.lastNew = eventId
  state.events.add(eventId)
  state.lastNewAt = performance.now()
  if (state.firstAt === 0) state.firstAt = state.lastNewAt
  state.onNew()
}

/** A webhook receiver: verifies the signature once per request, then takes each element in order. */
function webhookReceiver(delayMs: number) {
  const state = tally()
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(chunks)
      const expected = 'sha256=' + crypto.createHmac('sha256', SECRET).update(raw).digest('hex')
      const given = String(req.headers['x-prime-signature'] ?? '')
      state.requests++
      if (given.length !== expected.length || !crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected))) state.badSignatures++
      else {
        const body = JSON.parse(raw.toString('utf8'))
        const size = req.headers['x-prime-batch-size']
        const elements = size === undefined ? [body] : body.deliveries
        if (size !== undefined && (Number(size) !== elements.length || body.count !== elements.length || body.batchId !== req.headers['x-prime-delivery-id'])) state.badBatches++
        for (const e of elements) take(state, e.deliveryId, e.event.eventID)
      }
      const answer = () => res.writeHead(200).end()
      if (delayMs) setTimeout(answer, delayMs)
      else answer()
    })
  })
  server.keepAliveTimeout = 60_000
  return { state, server }
}

/** A syslog receiver over TCP: RFC 6587 octet-counting frames, read strictly. */
function syslogReceiver() {
  const state = tally()
  const server = net.createServer((socket) => {
    let buf = Buffer.alloc(0)
    socket.on('data', (chunk) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk
      let at = 0
      for (;;) {
        const space = buf.indexOf(0x20, at)
        if (space < 0) break
        const n = Number(buf.toString('latin1', at, space))
        if (!Number.isInteger(n) || n <= 0) throw new Error(`syslog framing broken at "${buf.toString('latin1', at, at + 20)}"`)
        if (buf.length < space + 1 + n) break
        const line = buf.toString('utf8', space + 1, space + 1 + n)
        state.requests++
        const deliveryId = /deliveryId="([^"]+)"/.exec(line)?.[1]
        const eventId = /eventID="(\d+)"/.exec(line)?.[1]
        if (!deliveryId || !eventId) state.badBatches++
        else take(state, deliveryId, Number(eventId))
        at = space + 1 + n
      }
      buf = buf.subarray(at)
    })
    socket.on('error', () => undefined)
  })
  return { state, server }
}

const listen = async (server: net.Server) => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return (server.address() as net.AddressInfo).port
}
const close = (server: net.Server) =>
  new Promise<void>((r) => {
    if (server instanceof http.Server) server.closeAllConnections()
    server.close(() => r())
  })

async function until(check: () => boolean, ms: number, what: string) {
  const end = Date.now() + ms
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 2))
  }
}

/** A payload as the server forms it, for the floors. */
const payload = (i: number) => ({
  deliveryId: crypto.randomUUID(),
  feed: 'events',
  sentTime: Math.floor(Date.now() / 1000),
  attempt: 1,
  destination: { id: crypto.randomUUID(), name: 'bench' },
  event: {
    eventID: i,
    creationTime: new Date().toISOString(),
    creationTimeEpoch: Date.now(),
    eventCode: eventOf('peripheralNew').code,
    severity: 5,
    severityString: 'Notice',
    category: 'USB',
    eventEntityID: 'BENCH-PC (10.0.0.1)',
    description: 'New peripheral connected',
    details: `bench event ${i}`,
    hashtags: null,
    peripheralIcon: '-1',
    assetKey: null,
    assetName: null,
    peripheralAssetId: null,
  },
})

/** The receiver's own rate (events/s): preformed bodies sent one at a time for SECONDS. */
async function floor(c: Case): Promise<number> {
  const per = c.kind === 'syslog' ? 500 : (c.batch ?? 1)
  let next = 1
  const end = performance.now() + SECONDS * 1000
  if (c.kind === 'syslog') {
    const { state, server } = syslogReceiver()
    const port = await listen(server)
    const socket = net.connect(port, '127.0.0.1')
    await new Promise((r) => socket.once('connect', r))
    const t0 = performance.now()
    let sent = 0
    while (performance.now() < end) {
      const frames = Buffer.concat(
        Array.from({ length: per }, () => {
          const line = `<133>1 ${new Date().toISOString()} bench prime - 0x110001 [prime@32473 deliveryId="${crypto.randomUUID()}" eventID="${next++}" category="USB" severity="5" source="BENCH-PC (10.0.0.1)"] New peripheral connected: bench event`
          return Buffer.concat([Buffer.from(`${Buffer.byteLength(line)} `), Buffer.from(line)])
        }),
      )
      sent += per
      await new Promise<void>((r, j) => socket.write(frames, (err) => (err ? j(err) : r())))
    }
    await until(() => state.events.size === sent, 60_000, 'the floor to drain')
    const rate = sent / ((performance.now() - t0) / 1000)
    socket.destroy()
    await close(server)
    return rate
  }
  const { state, server } = webhookReceiver(c.delayMs)
  const port = await listen(server)
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const t0 = performance.now()
  let sent = 0
  while (performance.now() < end) {
    const parts = Array.from({ length: per }, () => JSON.stringify(payload(next++)))
    const batchId = crypto.randomUUID()
    const raw = Buffer.from(
      c.batch
        ? `${JSON.stringify({ batchId, sentTime: Math.floor(Date.now() / 1000), destination: { id: batchId, name: 'bench' }, count: per }).slice(0, -1)},"deliveries":[${parts.join(',')}]}`
        : parts[0],
    )
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': raw.length,
      'x-prime-delivery-id': batchId,
      'x-prime-signature': 'sha256=' + crypto.createHmac('sha256', SECRET).update(raw).digest('hex'),
    }
    if (c.batch) headers['x-prime-batch-size'] = per
    await new Promise<void>((r, j) => {
      const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/hook', agent, headers }, (res) => {
        res.resume()
        res.on('end', () => r())
      })
      req.on('error', j)
      req.end(raw)
    })
    sent += per
  }
  const rate = sent / ((performance.now() - t0) / 1000)
  if (state.badSignatures || state.events.size !== sent) throw new Error(`floor of ${c.label}: ${state.badSignatures} bad signatures, ${state.events.size} of ${sent} taken`)
  agent.destroy()
  await close(server)
  return rate
}

interface Round {
  rateBefore: number
  rateAfter: number
  drain: number
  repeats: number
  restart: number
}

async function round(c: Case, n: number): Promise<Round> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-delivery-'))
  const rx = c.kind === 'syslog' ? syslogReceiver() : webhookReceiver(c.delayMs)
  const { state, server } = rx
  const rxPort = await listen(server)
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
  let child: ChildProcess = (await startTimed(env, logFile)).child
  const base = `http://127.0.0.1:${PORT}/prime/webui`
  const { token } = (await (
    await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }) })
  ).json()) as { token: string }
  const settings =
    c.kind === 'syslog'
      ? { syslog: { host: '127.0.0.1', port: rxPort, transport: 'tcp', format: 'rfc5424' } }
      : { webhook: { url: `http://127.0.0.1:${rxPort}/hook`, secret: SECRET, ...(c.batch ? { batch: { maxEvents: c.batch, maxBytes: 4 * 1024 * 1024 } } : {}) } }
  const saved = await fetch(`${base}/Events/AddOrUpdateAlarmDest`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name: 'bench', type: c.kind, filters: { minimumSeverity: 'Debug' }, ...settings }),
  })
  if (saved.status !== 200) throw new Error(`AddOrUpdateAlarmDest: ${saved.status} ${await saved.text()}`)
  await stop(child)

  // Queued while the server is down, so that the rates below are delivery alone.
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  const events = eventsRepo(db)
  const ids: number[] = []
  for (let i = 0; i < c.events; i += 500) {
    const k = Math.min(500, c.events - i)
    db.transaction(() => {
      ids.push(
        ...events.record(
          Date.now(),
          Array.from({ length: k }, (_, j) => ({ ...eventOf('peripheralNew'), entityId: 'BENCH-PC (10.0.0.1)', details: `bench event ${i + j}` })),
        ),
      )
    })()
  }
  db.close()

  const killed = new Promise<void>((r) => {
    state.onNew = () => {
      if (state.events.size >= c.events / 2) {
        state.onNew = () => {}
        child.kill('SIGKILL')
        r()
      }
    }
  })
  child = (await startTimed(env, logFile)).child
  await killed
  await new Promise((r) => child.once('exit', r))
  const killedAt = performance.now()
  const beforeKill = state.events.size
  const rateBefore = beforeKill / ((killedAt - state.firstAt) / 1000)
  const restarted = await startTimed(env, logFile)
  child = restarted.child
  const afterRestart = state.events.size
  let resumedAt = 0
  state.onNew = () => {
    resumedAt ||= performance.now()
  }
  await until(() => state.events.size === c.events, 600_000, 'every event')
  const drainedAt = state.lastNewAt
  const lost = ids.filter((id) => !state.events.has(id)).length
  if (lost || state.badSignatures || state.badBatches || state.outOfOrder) {
    throw new Error(`${c.label}, round ${n}: ${lost} lost, ${state.badSignatures} bad signatures, ${state.badBatches} malformed, ${state.outOfOrder} out of order`)
  }
  await stop(child)
  await close(server)
  fs.rmSync(dir, { recursive: true, force: true })
  const rateAfter = (c.events - afterRestart) / ((drainedAt - (resumedAt || drainedAt)) / 1000)
  const r = { rateBefore, rateAfter, drain: (drainedAt - state.firstAt) / 1000, repeats: state.repeats, restart: restarted.ms }
  console.log(
    `${c.label}, round ${n}: ${c.events} events, ${rateBefore.toFixed(0)} events/s before the kill, ${rateAfter.toFixed(0)} after the restart; ${state.repeats} repeated; none lost (${state.requests} requests)`,
  )
  return r
}

/** The mass-disconnect burst: seconds from the first queued event to the last arrived, per destination. */
async function burst(): Promise<string[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-delivery-'))
  const receivers = [
    { label: 'webhook, batch 500', target: 30, rx: webhookReceiver(0), kind: 'webhook', batch: 500 },
    { label: 'syslog TCP', target: 30, rx: syslogReceiver(), kind: 'syslog', batch: 0 },
    { label: 'webhook, one event per request', target: null, rx: webhookReceiver(0), kind: 'webhook', batch: 0 },
  ]
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
  let child: ChildProcess = (await startTimed(env, logFile)).child
  const base = `http://127.0.0.1:${PORT}/prime/webui`
  const { token } = (await (
    await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password: PASSWORD }) })
  ).json()) as { token: string }
  for (const [k, r] of receivers.entries()) {
    const port = await listen(r.rx.server)
    const settings =
      r.kind === 'syslog'
        ? { syslog: { host: '127.0.0.1', port, transport: 'tcp', format: 'rfc5424' } }
        : { webhook: { url: `http://127.0.0.1:${port}/hook`, secret: SECRET, ...(r.batch ? { batch: { maxEvents: r.batch, maxBytes: 4 * 1024 * 1024 } } : {}) } }
    const saved = await fetch(`${base}/Events/AddOrUpdateAlarmDest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: `burst-${k}`, type: r.kind, filters: { minimumSeverity: 'Debug' }, ...settings }),
    })
    if (saved.status !== 200) throw new Error(`AddOrUpdateAlarmDest: ${saved.status} ${await saved.text()}`)
  }
  const killed = new Promise<void>((r) => {
    receivers[0].rx.state.onNew = () => {
      if (receivers[0].rx.state.events.size >= BURST_EVENTS / 2) {
        receivers[0].rx.state.onNew = () => {}
        child.kill('SIGKILL')
        r()
      }
    }
  })
  // Stored as a sweep of disconnects writes them: slices of 500, while the server delivers, in
  // a thread of this process (its receivers do not hold the writer up).
  const queuedAt = performance.now()
  const writer = new Worker(new URL('./bench-burst-writer.js', import.meta.url), { workerData: { file: path.join(dir, 'prime.sqlite'), events: BURST_EVENTS, slice: 500 } })
  const { ids, ms: writing } = await new Promise<{ ids: number[]; ms: number }>((resolve, reject) => {
    writer.once('message', resolve)
    writer.once('error', reject)
  })
  const queued = (performance.now() - queuedAt) / 1000
  await killed
  await new Promise((r) => child.once('exit', r))
  child = (await startTimed(env, logFile)).child
  await until(() => receivers.every((r) => r.rx.state.events.size === BURST_EVENTS), 600_000, 'every event at every destination')
  await stop(child)
  // The target of the write itself: stored within 3 s while the server queues and delivers.
  const rows: string[] = [
    `| burst ${BURST_EVENTS}: stored, while the server queues and delivers them | ${BURST_EVENTS} | <= 3 s | ${queued.toFixed(2)} s from the writer's start (its slices ${(writing / 1000).toFixed(2)} s) | | | | | | | ${queued <= 3 ? 'met' : 'MISSED'} |`,
  ]
  for (const r of receivers) {
    const st = r.rx.state
    const lost = ids.filter((id) => !st.events.has(id)).length
    if (lost || st.badSignatures || st.badBatches || st.outOfOrder)
      throw new Error(`burst, ${r.label}: ${lost} lost, ${st.badSignatures} bad signatures, ${st.badBatches} malformed, ${st.outOfOrder} out of order`)
    const took = (st.lastNewAt - queuedAt) / 1000
    rows.push(
      `| burst ${BURST_EVENTS}: ${r.label} | ${BURST_EVENTS} | ${r.target === null ? '-' : `<= ${r.target} s`} | ${took.toFixed(1)} s to the last (queued in ${queued.toFixed(1)} s) | | | | ${st.repeats} | | 0 | ${r.target === null ? 'reported' : took <= r.target ? 'met' : 'MISSED'} |`,
    )
    await close(r.rx.server)
  }
  fs.rmSync(dir, { recursive: true, force: true })
  return rows
}

if (PIN) spawnSync('taskset', ['-p', '-c', '0', String(process.pid)])
const load = os.loadavg().map((x) => x.toFixed(2))
const table: string[] = []
for (const c of CASES) {
  const f = await floor(c)
  const rounds: Round[] = []
  for (let n = 1; n <= ROUNDS; n++) rounds.push(await round(c, n))
  const before = median(rounds.map((r) => r.rateBefore))
  const after = median(rounds.map((r) => r.rateAfter))
  const met = c.target === null ? 'reported' : Math.min(before, after) >= c.target ? 'met' : 'MISSED'
  table.push(
    `| ${c.label} | ${c.events} | ${c.target === null ? '-' : `>= ${c.target}`} | ${before.toFixed(0)} | ${after.toFixed(0)} | ${f.toFixed(0)} | ${(Math.min(before, after) / f).toFixed(2)} | ${median(rounds.map((r) => r.repeats))} | ${median(rounds.map((r) => r.restart)).toFixed(0)} | 0 | ${met} |`,
  )
}
if (wanted.includes('burst')) table.push(...(await burst()))
console.log(
  `\nServer killed with SIGKILL once half the events had arrived, then started again; ${ROUNDS} round${ROUNDS === 1 ? '' : 's'} per case, medians; load average ${load.join(' ')} at the start${PIN ? '; receivers on CPU 0, server on CPU 1' : ''}.\n`,
)
console.log(
  '| case | events | target (events/s) | before the kill (events/s) | after the restart (events/s) | receiver floor (events/s) | slower of the two / floor | repeated | restart to listening (ms) | lost | |',
)
console.log('|---|---|---|---|---|---|---|---|---|---|---|')
for (const row of table) console.log(row)
