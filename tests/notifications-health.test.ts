// System-health notifications from the health checks: a check that turns bad opens its
// group's notification, further bad checks add occurrences (a worse state makes it unread
// again), a good check resolves it. Groups are muted and listed; pins and dismissals are
// shared and audited; read state is per user.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call, userWithProfile } from './helpers.js'
import { latestAudit, portsOf, queryOne } from './seed.js'
import { enroll, gatewayEnv } from './fixtures/gateway.js'
import { checks } from '../lib/health.js'
import { licenseHealth } from '../lib/notifications/index.js'
import { sweepAgents as sweep } from '../lib/gateway/sweeper.js'
import { sweeperDeps } from '../lib/gateway/index.js'

const BASE = '/prime/webui/systemNotification'
const DAY = 86_400_000

const groups = async (app: FastifyInstance, token: string) => {
  const res = await call(app, token, { method: 'GET', url: `${BASE}/notifications` })
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`)
  return res.json() as any[]
}
const group = async (app: FastifyInstance, token: string, name: string) => (await groups(app, token)).find((g) => g.name === name)
const status = async (app: FastifyInstance, token: string) => (await call(app, token, { method: 'GET', url: `${BASE}/systemHealth` })).json()
const counts = async (app: FastifyInstance, token: string) => (await call(app, token, { method: 'GET', url: BASE })).json()

async function setup(t: Parameters<typeof build>[0]) {
  // One seat: the second agent to enroll waits for it (the License check's warning).
  const app = await build(t, { ...gatewayEnv, PRIME_LICENSE_SEATS: '1' })
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'operator', 20)
  const viewer = await userWithProfile(app, admin, 'viewer', 10)
  return { app, admin, manager, viewer }
}

t.test('the License check: seats and expiry', async (t) => {
  const { app } = await setup(t)
  // Read at each call: the test changes the license's terms in between.
  const license = () => licenseHealth({ license: app.config.license, use: () => portsOf(app).notifications.licenseUse() })
  t.match(await license(), { status: 'Healthy', detail: /^0 of 1 seats used \(0 %\); no expiry date\.$/ })
  await enroll(app, 'machine-1', 'HOST-1')
  t.match(await license(), { status: 'Warning', detail: /1 of 1 seats used \(100 %\).*90 % of the seats or more are in use/ })
  await enroll(app, 'machine-2', 'HOST-2')
  t.match(await license(), { status: 'Warning', detail: /1 agent waits for a free seat/ })
  app.config.license.seats = 10
  await sweep(sweeperDeps(app))
  app.config.license.expirationDate = new Date(Date.now() + 10 * DAY).toISOString()
  t.match(await license(), { status: 'Warning', detail: /2 of 10 seats used \(20 %\); expires .* \(in 10 days\); expires within 30 days/ })
  app.config.license.expirationDate = new Date(Date.now() + 100 * DAY).toISOString()
  t.match(await license(), { status: 'Healthy', detail: /in 100 days/ })
  app.config.license.expirationDate = new Date(Date.now() - DAY).toISOString()
  t.match(await license(), { status: 'Failed', detail: /^License expired on / })
})

t.test('a check that turns bad opens a notification, repeats add occurrences, recovery resolves it', async (t) => {
  const { app, manager, viewer } = await setup(t)
  // Before any periodic check, readers get a check of their own.
  let s = await status(app, viewer)
  t.equal(s.subsystems.find((x: any) => x.name === 'License').state, 'Healthy')
  t.same(
    s.subsystems.map((x: any) => x.name),
    ['Database', 'Authentication', 'DiskSpace', 'AlarmDelivery', 'Reports', 'WorkerPoller', 'License'],
  )
  const healthySince = s.subsystems.find((x: any) => x.name === 'License').since

  await enroll(app, 'machine-1', 'HOST-1')
  await enroll(app, 'machine-2', 'HOST-2')
  await app.notifications.checkHealth()
  let g = await group(app, viewer, 'License')
  t.match(g, { name: 'License', title: 'License', state: 'Warning', muted: false, counts: { total: 1, open: 1, unread: 1, pinned: 0 } })
  const opened = g.notifications[0]
  t.match(opened, { group: 'License', severity: 4, severityString: 'Warning', title: 'License needs attention', state: 'Open', occurrences: 1, isRead: false, resolvedTime: null })
  t.match(opened.description, /1 agent waits for a free seat/)
  s = await status(app, viewer)
  t.equal(s.status, 'Warning', 'the worst subsystem')
  t.match(
    s.subsystems.find((x: any) => x.name === 'License'),
    { state: 'Warning', detail: /waits for a free seat/ },
  )
  t.not(s.subsystems.find((x: any) => x.name === 'License').since, healthySince, 'since moves with the state')
  t.same(
    s.openNotifications.map((n: any) => n.id),
    [opened.id],
  )
  t.match(await counts(app, viewer), { healthUnread: 1, healthTotal: 1, unread: 1 })

  // Read by the viewer; still bad at the next check: one more occurrence, still read.
  t.equal((await call(app, viewer, { method: 'POST', url: `${BASE}/systemHealth/read` })).json(), true)
  t.equal((await call(app, viewer, { method: 'POST', url: `${BASE}/systemHealth/read` })).json(), false)
  await app.notifications.checkHealth()
  g = await group(app, viewer, 'License')
  t.match(g.notifications[0], { id: opened.id, occurrences: 2, isRead: true })
  t.match(await counts(app, viewer), { healthUnread: 0 })
  t.match(await counts(app, manager), { healthUnread: 1 }, 'read state is per user')

  // Worse: the license expired. The same notification, Error now, unread again.
  app.config.license.expirationDate = new Date(Date.now() - DAY).toISOString()
  await app.notifications.checkHealth()
  g = await group(app, viewer, 'License')
  t.equal(g.state, 'Failed')
  t.match(g.notifications[0], { id: opened.id, occurrences: 3, severity: 3, title: 'License is not valid', isRead: false })
  t.equal((await status(app, viewer)).status, 'Failed')

  // Recovered: resolved, no longer open; the group is healthy again.
  app.config.license.expirationDate = null
  app.config.license.seats = 10
  await sweep(sweeperDeps(app))
  await app.notifications.checkHealth()
  g = await group(app, viewer, 'License')
  t.equal(g.state, 'Healthy')
  t.match(g.counts, { total: 1, open: 0 })
  t.match(g.notifications[0], { id: opened.id, state: 'Resolved', occurrences: 3 })
  t.ok(g.notifications[0].resolvedTime)
  s = await status(app, viewer)
  t.same(s.openNotifications, [])

  // Bad again: a new notification.
  app.config.license.seats = 1
  await enroll(app, 'machine-3', 'HOST-3')
  await app.notifications.checkHealth()
  g = await group(app, viewer, 'License')
  t.equal(g.notifications.length, 2)
  t.not(g.notifications[0].id, opened.id, 'newest first, a new one')
  t.equal(g.notifications[0].state, 'Open')
})

t.test('an injected failure of the Database check, dismissed while it lasts', async (t) => {
  const { app, manager, viewer } = await setup(t)
  const real = checks.Database
  t.teardown(() => {
    checks.Database = real
  })
  checks.Database = () => ({ status: 'Failed', detail: 'Integrity check: page 12 is never used' })
  await app.notifications.checkHealth()
  const [n] = (await group(app, viewer, 'Database')).notifications
  t.match(n, { severity: 3, title: 'Database check failed', description: 'Integrity check: page 12 is never used', state: 'Open' })

  // Pins toggle (the body is the bare id).
  let res = await call(app, viewer, { method: 'POST', url: `${BASE}/systemHealth/pin`, payload: n.id })
  t.equal(res.statusCode, 403, 'a User may not pin')
  res = await call(app, manager, { method: 'POST', url: `${BASE}/systemHealth/pin`, payload: n.id })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json(), true)
  t.match((await group(app, viewer, 'Database')).notifications[0], { isPinned: true, pinnedBy: 'operator' })
  t.match(await counts(app, viewer), { healthPinned: 1, pinned: 1 })
  res = await call(app, manager, { method: 'POST', url: `${BASE}/systemHealth/pin`, payload: n.id })
  t.equal(res.json(), false, 'toggled back')
  await call(app, manager, { method: 'POST', url: `${BASE}/systemHealth/pin`, payload: n.id })

  res = await call(app, manager, { method: 'POST', url: `${BASE}/systemHealth/dismiss`, payload: n.id })
  t.equal(res.json(), true)
  res = await call(app, manager, { method: 'POST', url: `${BASE}/systemHealth/dismiss`, payload: n.id })
  t.equal(res.statusCode, 200)
  t.equal(res.json(), false, 'already dismissed')
  res = await call(app, manager, { method: 'POST', url: `${BASE}/systemHealth/pin`, payload: n.id })
  t.equal(res.statusCode, 409)
  let g = await group(app, viewer, 'Database')
  t.same(g.notifications, [], 'dismissed ones are not listed')
  t.match(g.counts, { total: 0, open: 0, pinned: 0 })
  t.equal(g.state, 'Failed', 'the state stays')
  t.equal((await status(app, viewer)).status, 'Failed')
  t.match(await counts(app, viewer), { healthPinned: 0, healthTotal: 0 }, 'dismissal unpinned it')

  // Still failing: it stays dismissed, no new notification.
  await app.notifications.checkHealth()
  t.same((await group(app, viewer, 'Database')).notifications, [])
  t.equal((await queryOne(app, 'SELECT * FROM health_notifications WHERE id = ?', n.id))!.occurrences, 2)
  // Recovers and fails again: a new one.
  checks.Database = real
  await app.notifications.checkHealth()
  t.equal((await queryOne(app, 'SELECT * FROM health_notifications WHERE id = ?', n.id))!.resolved_ms !== null, true)
  checks.Database = () => ({ status: 'Warning', detail: 'Slow' })
  await app.notifications.checkHealth()
  g = await group(app, viewer, 'Database')
  t.equal(g.notifications.length, 1)
  t.not(g.notifications[0].id, n.id)

  const audit = (await latestAudit(app, 6)).filter((a) => a.category === 'Notifications').map((a) => [a.outcome, a.description])
  t.match(audit, [
    ['Failed', /cannot be pinned/],
    ['Succeeded', /already dismissed/],
    ['Succeeded', /Dismissed system-health notification/],
    ['Succeeded', /Pinned system-health/],
    ['Succeeded', /Unpinned system-health/],
    ['Succeeded', /Pinned system-health/],
  ])

  // Bad bodies and unknown ids.
  for (const url of [`${BASE}/systemHealth/pin`, `${BASE}/systemHealth/dismiss`]) {
    res = await call(app, manager, { method: 'POST', url, payload: { id: n.id } })
    t.equal(res.statusCode, 400, `${url}: an object is not an id`)
    res = await call(app, manager, { method: 'POST', url, payload: 99999 })
    t.equal(res.statusCode, 404)
    t.match(res.json().detail, /99999/)
    res = await call(app, manager, { method: 'POST', url, payload: '"12"', headers: { 'content-type': 'application/json' } })
    t.equal(res.statusCode, 400)
  }
})

t.test('muting a group: still recorded and listed, not unread; shared and audited', async (t) => {
  const { app, manager, viewer } = await setup(t)
  await enroll(app, 'machine-1', 'HOST-1')
  await enroll(app, 'machine-2', 'HOST-2')
  await app.notifications.checkHealth()
  t.match(await counts(app, viewer), { healthUnread: 1 })

  let res = await call(app, viewer, { method: 'POST', url: `${BASE}/notifications/update`, payload: { name: 'License', muted: true } })
  t.equal(res.statusCode, 403)
  // A client posts back the group it read, with `muted` changed.
  const read = await group(app, manager, 'License')
  res = await call(app, manager, { method: 'POST', url: `${BASE}/notifications/update`, payload: { ...read, muted: true } })
  t.equal(res.statusCode, 200, res.body)
  const answered = res.json().find((x: any) => x.name === 'License')
  t.match(answered, { muted: true, mutedBy: 'operator', counts: { total: 1, open: 1, unread: 0 } })
  t.equal(answered.notifications.length, 1, 'still listed')
  t.equal(res.json().length, 7)
  t.match(await counts(app, viewer), { healthUnread: 0, healthTotal: 1 })
  t.equal((await status(app, viewer)).status, 'Warning', 'muting does not change the operational status')
  // Muted groups are marked read too.
  t.equal((await call(app, viewer, { method: 'POST', url: `${BASE}/systemHealth/read` })).json(), true)

  res = await call(app, manager, { method: 'POST', url: `${BASE}/notifications/update`, payload: { name: 'License', muted: false } })
  t.match(
    res.json().find((x: any) => x.name === 'License'),
    { muted: false, mutedBy: null, mutedTime: null },
  )
  t.match(await counts(app, manager), { healthUnread: 1 })
  t.match(await counts(app, viewer), { healthUnread: 0 })

  const audit = (await latestAudit(app, 4)).filter((a) => a.category === 'Notifications')
  t.match(
    audit.map((a) => a.description),
    [/Unmuted notification group License/, /Marked 1 system-health/, /Muted notification group License/],
  )
  t.same(JSON.parse(audit[2].details), { name: 'License', muted: { from: false, to: true } })

  for (const payload of [{ name: 'Kitchen', muted: true }, { name: 'License' }, { name: 'License', muted: 'yes' }, { name: 'License', muted: true, color: 'red' }]) {
    res = await call(app, manager, { method: 'POST', url: `${BASE}/notifications/update`, payload })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
  }
})
