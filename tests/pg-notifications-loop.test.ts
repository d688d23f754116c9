// The notifications' loops on PostgreSQL, end to end through the app: a stream opened on a
// listening server receives a risk notification raised by a check-in's event and a health
// notification raised by the health checks (which answer admin/SubsystemHealth from the
// server), a read-all shows on the reader's stream, a revoked session's stream ends; and
// with two nodes on one database, what one node writes reaches the other node's streams.
import http from 'node:http'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'
import { attackTool, checkIn, enroll, gatewayEnv, hostState, mouse } from './fixtures/gateway.js'
import { STREAM_LIMITS } from '../lib/notifications/stream.js'

const BASE = '/prime/webui/systemNotification'
const DAY = 86_400_000

interface SseEvent {
  id?: string
  event?: string
  data?: any
}

/** An open stream on a listening server, parsed as it arrives. */
async function subscribe(t: Parameters<typeof build>[0], app: FastifyInstance, token: string, headers: Record<string, string> = {}) {
  const port = (app.server.address() as { port: number }).port
  const events: SseEvent[] = []
  let buffer = ''
  let wake = () => {}
  let ended = false
  const req = http.get({ host: '127.0.0.1', port, path: `${BASE}/stream`, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...headers } })
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => req.on('response', resolve).on('error', reject))
  t.teardown(() => req.destroy())
  res.setEncoding('utf8')
  res.on('data', (chunk: string) => {
    buffer += chunk
    let end: number
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const e: SseEvent = {}
      for (const line of buffer.slice(0, end).split('\n')) {
        if (line.startsWith('id: ')) e.id = line.slice(4)
        else if (line.startsWith('event: ')) e.event = line.slice(7)
        else if (line.startsWith('data: ')) e.data = JSON.parse(line.slice(6))
      }
      buffer = buffer.slice(end + 2)
      events.push(e)
    }
    wake()
  })
  res.on('end', () => {
    ended = true
    wake()
  })
  /** The first event from index `from` on that passes `test`, received or to come. */
  const next = (test: (e: SseEvent) => boolean, from = 0, ms = 5000) =>
    new Promise<SseEvent>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching event within ${ms} ms; got ${JSON.stringify(events.slice(from))}`)), ms)
      const look = () => {
        const found = events.slice(from).find(test)
        if (found || ended) {
          clearTimeout(timer)
          wake = () => {}
          if (found) resolve(found)
          else reject(new Error(`the stream ended; got ${JSON.stringify(events.slice(from))}`))
        }
      }
      wake = look
      look()
    })
  const end = new Promise<void>((resolve) => res.on('end', resolve))
  return {
    status: res.statusCode,
    events,
    next,
    end,
    get ended() {
      return ended
    },
  }
}

const isCounts = (e: SseEvent) => e.event === 'counts'

t.test('the stream and the health checks on PostgreSQL', { skip: noPostgres }, async (t) => {
  const app = await build(t, { ...gatewayEnv, PRIME_DATABASE_URL: await pgTestDatabaseUrl(t) })
  t.equal(app.storage.backend, 'postgres')
  await app.listen({ host: '127.0.0.1', port: 0 })
  const loops = app.loops.list().filter((l) => l.name === 'notification-stream' || l.name === 'health-checks')
  t.same(
    loops.map((l) => [l.name, l.singleton, l.running]),
    [
      ['notification-stream', false, true],
      ['health-checks', true, true],
    ],
    'both loops run on PostgreSQL',
  )
  const admin = await login(app)
  const viewer = await userWithProfile(app, admin, 'viewer', 10)
  const console = await subscribe(t, app, viewer)
  t.equal(console.status, 200)
  t.match((await console.next(isCounts)).data, { riskUnread: 0, healthUnread: 0 })

  // A check-in whose event is risky: the risk notification reaches the open stream.
  const agent = await enroll(app)
  let mark = console.events.length
  t.equal((await checkIn(app, agent.credential, hostState([mouse, attackTool]))).statusCode, 200)
  const risk = await console.next((e) => e.event === 'riskNotification', mark)
  t.match(risk.data, { kind: 'KnownAttackTool', agentUuid: agent.uuid, occurrences: 1, isRead: false })
  t.equal(risk.data.relatedEventIds.length, 1, 'with the event that raised it')
  t.match((await console.next((e) => isCounts(e) && e.data.riskUnread === 1, mark)).data, { riskTotal: 1 })

  // Read by the viewer: its stream shows the notification read, and the counts follow.
  mark = console.events.length
  t.equal((await call(app, viewer, { method: 'POST', url: `${BASE}/riskNotifications/read` })).json(), true)
  t.match((await console.next((e) => e.event === 'riskNotification', mark)).data, { id: risk.data.id, isRead: true })
  t.match((await console.next(isCounts, mark)).data, { riskUnread: 0 })

  // The health checks read PostgreSQL: SubsystemHealth answers them.
  const health = await call(app, admin, { method: 'GET', url: '/prime/webui/admin/SubsystemHealth' })
  t.equal(health.statusCode, 200, health.body)
  const subsystems = health.json().subsystems as { name: string; status: string; detail: string }[]
  t.same(
    subsystems.map((s) => s.name).filter((n) => ['Database', 'Authentication', 'License'].includes(n)),
    ['Database', 'Authentication', 'License'],
  )
  t.notOk(
    subsystems.some((s) => s.name === 'DiskSpace'),
    "DiskSpace is SQLite's",
  )
  t.match(
    subsystems.find((s) => s.name === 'Database'),
    { status: 'Healthy', detail: /^Read and write succeeded; [\d.]+ MiB; schema version \d+$/ },
  )
  t.match(
    subsystems.find((s) => s.name === 'Authentication'),
    { status: 'Healthy', detail: /2 of 2 accounts active; 1 active Administrator/ },
  )
  t.match(
    subsystems.find((s) => s.name === 'License'),
    { status: 'Healthy', detail: /1 of \d+ seats used/ },
  )

  // The license expired: the health checks raise a notification, streamed with its group.
  app.config.license.expirationDate = new Date(Date.now() - DAY).toISOString()
  mark = console.events.length
  await app.notifications.checkHealth()
  const raised = await console.next((e) => e.event === 'healthNotification', mark)
  t.match(raised.data, { group: 'License', state: 'Open', title: 'License is not valid', occurrences: 1, isRead: false })
  t.match((await console.next((e) => e.event === 'group' && e.data.name === 'License', mark)).data, { state: 'Failed' })
  t.match((await console.next((e) => isCounts(e) && e.data.healthUnread === 1, mark)).data, { healthTotal: 1 })
  const status = await call(app, viewer, { method: 'GET', url: `${BASE}/systemHealth` })
  t.match(status.json(), { status: 'Failed' })

  // Recovered: the same notification, resolved.
  app.config.license.expirationDate = null
  mark = console.events.length
  await app.notifications.checkHealth()
  t.match((await console.next((e) => e.event === 'healthNotification', mark)).data, { id: raised.data.id, state: 'Resolved' })

  // Resuming after the risk notification: the changes since are replayed.
  const resumed = await subscribe(t, app, viewer, { 'last-event-id': risk.id! })
  await resumed.next(isCounts)
  t.same(
    resumed.events.filter((e) => e.event === 'healthNotification').map((e) => e.data.state),
    ['Open', 'Resolved'],
    'replayed in order',
  )

  // Logged out: the session's stream says why, then ends.
  const token = await login(app)
  const own = await subscribe(t, app, token)
  await own.next(isCounts)
  t.equal((await call(app, token, { method: 'POST', url: '/prime/webui/auth/logout' })).statusCode, 200)
  t.match((await own.next((e) => e.event === 'reauthenticate')).data, { reason: 'token-revoked' })
  await own.end
  t.ok(own.ended, 'then the stream ends')
  t.notOk(console.ended, "the other caller's stream stays open")
})

t.test("two nodes on one database: what one writes reaches the other's streams", { skip: noPostgres }, async (t) => {
  const saved = { ...STREAM_LIMITS }
  // Another node's revocation is found by the periodic check: made short here.
  STREAM_LIMITS.revalidateMs = 300
  t.teardown(() => Object.assign(STREAM_LIMITS, saved))
  const url = await pgTestDatabaseUrl(t)
  const a = await build(t, { ...gatewayEnv, PRIME_DATABASE_URL: url })
  const b = await build(t, { ...gatewayEnv, PRIME_DATABASE_URL: url })
  await a.listen({ host: '127.0.0.1', port: 0 })
  const admin = await login(a)
  const s = await subscribe(t, a, admin)
  await s.next(isCounts)

  // Node B's health checks raise a notification; node A's hub finds it at its next look.
  b.config.license.expirationDate = new Date(Date.now() - DAY).toISOString()
  const mark = s.events.length
  await b.notifications.checkHealth()
  t.match((await s.next((e) => e.event === 'healthNotification', mark)).data, { group: 'License', state: 'Open' })
  t.match((await s.next((e) => isCounts(e) && e.data.healthUnread === 1, mark)).data, { healthTotal: 1 })

  // Both nodes run the checks at once (the same settings): one open notification, never two.
  a.config.license.expirationDate = b.config.license.expirationDate
  await Promise.all([a.notifications.checkHealth(), b.notifications.checkHealth()])
  const groups = (await call(b, admin, { method: 'GET', url: `${BASE}/notifications` })).json() as { name: string; counts: { open: number } }[]
  t.match(
    groups.find((g) => g.name === 'License'),
    { counts: { open: 1 } },
  )

  // The session logged out through node B: node A's stream of it ends.
  const token = await login(a)
  const own = await subscribe(t, a, token)
  await own.next(isCounts)
  t.equal((await call(b, token, { method: 'POST', url: '/prime/webui/auth/logout' })).statusCode, 200)
  t.match((await own.next((e) => e.event === 'reauthenticate')).data, { reason: 'token-revoked' })
  await own.end
  t.notOk(s.ended, 'the admin session stream stays open')
})
