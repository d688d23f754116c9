// The live stream on a real listening server: an attack tool plugged into an agent reaches a
// subscribed console as a riskNotification with fresh counts; pins, reads and dismissals
// follow; heartbeats keep it open; Last-Event-ID resumes; a revoked credential ends it.
import http from 'node:http'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call, userWithProfile } from './helpers.js'
import { attackTool, checkIn, enroll, gatewayEnv, hostState, mouse } from './fixtures/gateway.js'

const BASE = '/prime/webui/systemNotification'

interface SseEvent {
  id?: string
  event?: string
  data?: any
  comment?: string
  retry?: number
}

/** A subscriber that parses the stream as it arrives. */
class Subscriber {
  events: SseEvent[] = []
  status = 0
  headers: http.IncomingHttpHeaders = {}
  ended = false
  private buffer = ''
  private waiters: { test: (e: SseEvent) => boolean; resolve: (e: SseEvent) => void; reject: (err: Error) => void; timer: NodeJS.Timeout }[] = []
  private req!: http.ClientRequest
  body = ''

  static open(port: number, token: string, headers: Record<string, string> = {}): Promise<Subscriber> {
    const s = new Subscriber()
    return new Promise((resolve, reject) => {
      s.req = http.get({ host: '127.0.0.1', port, path: `${BASE}/stream`, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...headers } }, (res) => {
        s.status = res.statusCode ?? 0
        s.headers = res.headers
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => s.feed(chunk))
        res.on('end', () => {
          s.ended = true
          for (const w of s.waiters) w.reject(new Error('stream ended'))
        })
        resolve(s)
      })
      s.req.on('error', reject)
    })
  }

  private feed(chunk: string) {
    this.body += chunk
    this.buffer += chunk
    let end: number
    while ((end = this.buffer.indexOf('\n\n')) >= 0) {
      const block = this.buffer.slice(0, end)
      this.buffer = this.buffer.slice(end + 2)
      const e: SseEvent = {}
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) e.comment = line.slice(1).trim()
        else if (line.startsWith('id: ')) e.id = line.slice(4)
        else if (line.startsWith('event: ')) e.event = line.slice(7)
        else if (line.startsWith('data: ')) e.data = JSON.parse(line.slice(6))
        else if (line.startsWith('retry: ')) e.retry = Number(line.slice(7))
      }
      this.events.push(e)
      for (const w of [...this.waiters]) {
        if (w.test(e)) {
          clearTimeout(w.timer)
          this.waiters.splice(this.waiters.indexOf(w), 1)
          w.resolve(e)
        }
      }
    }
  }

  /** The first event at or after index `from` (received already or to come) that passes the test. */
  next(test: (e: SseEvent) => boolean, from = 0, ms = 3000): Promise<SseEvent> {
    const seen = this.events.slice(from).find(test)
    if (seen) return Promise.resolve(seen)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no matching event within ${ms} ms; got ${JSON.stringify(this.events.slice(from))}`)), ms)
      this.waiters.push({ test, resolve, reject, timer })
    })
  }

  close() {
    this.req.destroy()
  }
}

const isRisk = (e: SseEvent) => e.event === 'riskNotification'
const isCounts = (e: SseEvent) => e.event === 'counts'

async function setup(t: Parameters<typeof build>[0], env: Record<string, string> = {}) {
  const app = await build(t, { ...gatewayEnv, ...env })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const port = (app.server.address() as { port: number }).port
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'operator', 20)
  const viewer = await userWithProfile(app, admin, 'viewer', 10)
  const subscribers: Subscriber[] = []
  const subscribe = async (token: string, headers?: Record<string, string>) => {
    const s = await Subscriber.open(port, token, headers)
    subscribers.push(s)
    return s
  }
  t.teardown(() => subscribers.forEach((s) => s.close()))
  return { app, port, admin, manager, viewer, subscribe }
}

t.test('an attack tool reaches a subscribed console; pin, read and dismiss follow', async (t) => {
  const { app, manager, viewer, subscribe } = await setup(t)
  const agent = await enroll(app)
  const console = await subscribe(viewer)
  t.equal(console.status, 200)
  t.match(console.headers['content-type'], /^text\/event-stream/)
  t.equal(console.headers['cache-control'], 'no-cache')
  const opening = await console.next(isCounts)
  t.equal(console.events[0].retry, 5000, 'opens with retry')
  t.match(opening.data, { riskUnread: 0, unread: 0 })
  const other = await subscribe(manager)
  await other.next(isCounts)

  // Plugged in: the periodic look (every 250 ms) finds it, no call needed.
  const from = console.events.length
  const plugged = Date.now()
  t.equal((await checkIn(app, agent.credential, hostState([mouse, attackTool]))).statusCode, 200)
  const created = await console.next(isRisk, from)
  t.ok(Date.now() - plugged < 1000, 'within a second')
  t.match(created.data, { kind: 'KnownAttackTool', agentUuid: agent.uuid, occurrences: 1, isRead: false, isPinned: false })
  t.ok(Number(created.id) > 0, 'notification events carry an id')
  t.match((await console.next(isCounts, from)).data, { riskUnread: 1, riskTotal: 1, unread: 1 }, 'the unread count rises')
  await other.next(isRisk, 1)
  const id = created.data.id

  // Pinned by the manager: both consoles see it.
  let mark = console.events.length
  t.equal((await call(app, manager, { method: 'POST', url: `${BASE}/riskNotifications/pin`, payload: { id, pinned: true } })).json(), true)
  t.match((await console.next(isRisk, mark)).data, { id, isPinned: true, pinnedBy: 'operator' })
  t.match((await console.next(isCounts, mark)).data, { riskPinned: 1 })

  // Read by the viewer: its own stream shows it read, the manager's does not change.
  await other.next((e) => isCounts(e) && e.data.riskPinned === 1)
  mark = console.events.length
  const otherMark = other.events.length
  t.equal((await call(app, viewer, { method: 'POST', url: `${BASE}/riskNotifications/read` })).json(), true)
  t.match((await console.next(isRisk, mark)).data, { id, isRead: true })
  t.match((await console.next(isCounts, mark)).data, { riskUnread: 0, unread: 0 })

  // Heartbeats, for every subscriber.
  mark = console.events.length
  app.notifications.hub.heartbeat()
  t.equal((await console.next((e) => e.comment === 'heartbeat', mark)).comment, 'heartbeat')
  t.notOk(
    other.events.slice(otherMark).some((e) => isRisk(e) || isCounts(e)),
    'another user is not told of the viewer reading',
  )

  // Dismissed.
  mark = console.events.length
  t.equal((await call(app, manager, { method: 'POST', url: `${BASE}/riskNotifications/dismiss`, payload: { id } })).json(), true)
  t.match((await console.next(isRisk, mark)).data, { id, isDismissed: true, dismissedBy: 'operator', isPinned: false })
  t.match((await console.next(isCounts, mark)).data, { riskTotal: 0, riskPinned: 0 })

  // Resuming after the first event: the changes since are replayed, then fresh counts.
  const resumed = await subscribe(viewer, { 'last-event-id': created.id! })
  const counts = await resumed.next(isCounts)
  const replayed = resumed.events.filter(isRisk)
  t.same(
    replayed.map((e) => [e.data.isPinned, e.data.isDismissed]),
    [
      [true, false],
      [false, true],
    ],
    'pinned, then dismissed',
  )
  t.ok(replayed.every((e) => Number(e.id) > Number(created.id)))
  t.ok(resumed.events.indexOf(counts) > resumed.events.indexOf(replayed[1]), 'counts after the replay')
  t.equal(replayed[0].data.isRead, true, "the caller's read state")

  // An id the server does not know: reset.
  const stale = await subscribe(viewer, { 'last-event-id': '12' })
  t.match((await stale.next((e) => e.event === 'reset')).data, { reason: /Last-Event-ID 12/ })
  await stale.next(isCounts)
})

t.test('limits, media type, and the end of the credential', async (t) => {
  const { app, port, admin, viewer, subscribe } = await setup(t)
  // At most 5 streams per caller.
  const five = []
  for (let i = 0; i < 5; i++) five.push(await subscribe(viewer))
  await Promise.all(five.map((s) => s.next(isCounts)))
  const sixth = await subscribe(viewer)
  t.equal(sixth.status, 429)
  t.equal(app.notifications.hub.subscribers, 5)
  five[0].close()
  await new Promise((r) => setTimeout(r, 50))
  t.equal(app.notifications.hub.subscribers, 4, 'a closed connection is forgotten')
  const again = await subscribe(viewer)
  t.equal(again.status, 200)

  const json = await Subscriber.open(port, viewer, { accept: 'application/json' })
  t.equal(json.status, 406)
  json.close()
  const bad = await Subscriber.open(port, admin, { 'last-event-id': 'abc' })
  t.equal(bad.status, 400)
  t.match(bad.body, /Last-Event-ID/)
  bad.close()

  // Logged out: the stream says why, then ends.
  const token = await login(app)
  const s = await subscribe(token)
  await s.next(isCounts)
  t.equal((await call(app, token, { method: 'POST', url: '/prime/webui/auth/logout' })).statusCode, 200)
  app.notifications.hub.revalidate()
  t.match((await s.next((e) => e.event === 'reauthenticate')).data, { reason: 'token-revoked' })
  await new Promise((r) => setTimeout(r, 50))
  t.ok(s.ended, 'then the stream ends')

  // An expired access token (a short lifetime): token-expired.
  const expiring = await (async () => {
    const now = Date.now()
    const principal = await app.tokens.authenticate(admin, now)
    return app.jwt.sign({ sub: String(principal.id), sid: principal.sessionId, ims: now }, { expiresIn: 1 })
  })()
  const e = await subscribe(expiring)
  t.match((await e.next((x) => x.event === 'reauthenticate', 0, 3000)).data, { reason: 'token-expired' })
})

t.test('muted groups are not streamed; group changes are', async (t) => {
  const { app, manager, viewer, subscribe } = await setup(t, { PRIME_LICENSE_SEATS: '1' })
  const s = await subscribe(viewer)
  await s.next(isCounts)
  let mark = s.events.length
  const res = await call(app, manager, { method: 'POST', url: `${BASE}/notifications/update`, payload: { name: 'License', muted: true } })
  t.equal(res.statusCode, 200, res.body)
  const muted = await s.next((e) => e.event === 'group' && e.data.name === 'License', mark)
  t.match(muted.data, { muted: true, mutedBy: 'operator' })
  t.notOk('notifications' in muted.data, 'without its notifications')

  await enroll(app, 'machine-1', 'HOST-1')
  await enroll(app, 'machine-2', 'HOST-2')
  mark = s.events.length
  await app.notifications.checkHealth()
  const changed = await s.next((e) => e.event === 'group' && e.data.name === 'License' && e.data.state === 'Warning', mark)
  t.match(changed.data, { counts: { total: 1, unread: 0 } })
  await new Promise((r) => setTimeout(r, 300))
  t.notOk(
    s.events.slice(mark).some((e) => e.event === 'healthNotification'),
    "a muted group's notification is not sent",
  )

  await call(app, manager, { method: 'POST', url: `${BASE}/notifications/update`, payload: { name: 'License', muted: false } })
  mark = s.events.length
  await app.notifications.checkHealth()
  t.match((await s.next((e) => e.event === 'healthNotification', mark)).data, { group: 'License', state: 'Open', occurrences: 2, isRead: false })
  t.match((await s.next(isCounts, mark)).data, { healthUnread: 1 })
})

t.test('an in-process request gets the opening of the stream and its end', async (t) => {
  const app: FastifyInstance = await build(t)
  const token = await login(app)
  const res = await call(app, token, { method: 'GET', url: `${BASE}/stream`, headers: { accept: 'text/event-stream' } })
  t.equal(res.statusCode, 200)
  t.match(res.body, /^retry: 5000\n\nevent: counts\ndata: \{"riskUnread":0,/)
})
