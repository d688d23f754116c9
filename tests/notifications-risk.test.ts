// Risk notifications as the agent gateway raises them: an attack tool, a vulnerable
// peripheral and an unapproved peripheral on an armed agent each open one notification per
// agent, device and kind; repeats add occurrences; read state is per user; pins and
// dismissals are shared and audited.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call, userWithProfile } from './helpers.js'
import { latestAudit, queryValue, recordEventIds } from './seed.js'
import { attackTool, checkIn, enroll, gatewayEnv, hostState, mouse, stick } from './fixtures/gateway.js'

const vulnerableReceiver = {
  deviceID: 'USB\\VID_046D&PID_C52B\\6&2F1A3B&0&3',
  vid: '046d',
  pid: 'c52b',
  serialNumber: '6&2F1A3B&0&3',
  description: 'USB Composite Device',
  manufacturer: 'Logitech',
  caption: 'Logitech USB Receiver',
  status: 'OK',
  classCode: '03',
  subclassCode: '01',
  protocolCode: '01',
  present: true,
}

const RISK = '/prime/webui/systemNotification/riskNotifications'
const COUNTS = '/prime/webui/systemNotification'

async function list(app: FastifyInstance, token: string, query = '') {
  const res = await call(app, token, { method: 'GET', url: `${RISK}${query ? `?${query}` : ''}` })
  if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`)
  return { total: Number(res.headers['x-total-count']), items: res.json() as any[] }
}

const counts = async (app: FastifyInstance, token: string) => (await call(app, token, { method: 'GET', url: COUNTS })).json()

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t, gatewayEnv)
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'operator', 20)
  const viewer = await userWithProfile(app, admin, 'viewer', 10)
  const agent = await enroll(app)
  return { app, admin, manager, viewer, agent }
}

t.test('an attack tool raises one notification; a repeat adds an occurrence and makes it unread again', async (t) => {
  const { app, manager, viewer, agent } = await setup(t)
  t.same(await counts(app, viewer), { riskUnread: 0, riskPinned: 0, riskTotal: 0, healthUnread: 0, healthPinned: 0, healthTotal: 0, unread: 0, pinned: 0 })

  let res = await checkIn(app, agent.credential, hostState([mouse, attackTool]))
  t.equal(res.statusCode, 200, res.body)
  let page = await list(app, viewer)
  t.equal(page.total, 1)
  const n = page.items[0]
  t.match(n, {
    kind: 'KnownAttackTool',
    severity: 2,
    severityString: 'Critical',
    agentUuid: agent.uuid,
    hostIdentifier: 'DESKTOP-9LR722S',
    hostIp: '192.168.100.128',
    vid: '0483',
    pid: '5740',
    serialNumber: attackTool.serialNumber,
    deviceID: attackTool.deviceID,
    occurrences: 1,
    isRead: false,
    isPinned: false,
    isDismissed: false,
    title: 'Known attack tool connected to DESKTOP-9LR722S',
  })
  t.match(n.description, /keystroke injection/, 'the catalogue entry is named')
  t.equal(n.relatedEventIds.length, 1)
  const events = await call(app, viewer, { method: 'GET', url: `/prime/webui/Events/GetEvents?FromEventId=${n.relatedEventIds[0]}&ToEventId=${n.relatedEventIds[0]}` })
  t.equal(events.statusCode, 200, events.body)
  t.match(events.json().data, [{ eventID: n.relatedEventIds[0], eventCode: '0x110005', assetKey: agent.uuid }], 'linked to the attack tool event')
  t.equal(n.firstSeen, n.lastSeen)
  t.equal(n.creationTimeEpoch, Date.parse(n.firstSeen))
  t.match(await counts(app, viewer), { riskUnread: 1, riskTotal: 1, unread: 1 })

  // The viewer reads everything: only its own counts change.
  res = await call(app, viewer, { method: 'POST', url: `${RISK}/read` })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json(), true)
  t.equal((await call(app, viewer, { method: 'POST', url: `${RISK}/read` })).json(), false, 'nothing left to mark')
  t.match(await counts(app, viewer), { riskUnread: 0, riskTotal: 1 })
  t.match(await counts(app, manager), { riskUnread: 1 }, 'read state is per user')
  t.equal((await list(app, viewer)).items[0].isRead, true)
  t.equal((await list(app, manager)).items[0].isRead, false)

  // Unplugged, plugged in again: the same notification, one more occurrence, unread for everyone.
  t.equal((await checkIn(app, agent.credential, hostState([mouse]))).statusCode, 200)
  await new Promise((r) => setTimeout(r, 5))
  t.equal((await checkIn(app, agent.credential, hostState([mouse, attackTool]))).statusCode, 200)
  page = await list(app, viewer)
  t.equal(page.total, 1, 'aggregated')
  t.equal(page.items[0].id, n.id)
  t.equal(page.items[0].occurrences, 2)
  t.equal(page.items[0].relatedEventIds.length, 2)
  t.ok(page.items[0].lastSeen > n.lastSeen, 'lastSeen moves')
  t.equal(page.items[0].firstSeen, n.firstSeen)
  t.equal(page.items[0].isRead, false, 'a new occurrence is unread again')
  t.match(await counts(app, viewer), { riskUnread: 1 })
})

t.test('each kind, agent and device is its own notification', async (t) => {
  const { app, admin, manager, viewer, agent } = await setup(t)
  await checkIn(app, agent.credential, hostState([mouse, attackTool, vulnerableReceiver]))
  const other = await enroll(app, undefined, 'LAPTOP-7QX2')
  await checkIn(app, other.credential, hostState([attackTool], { hostIdentifier: 'LAPTOP-7QX2', localIpAddress: '10.0.0.7' }))
  // Armed: an unapproved peripheral plugged in is blocked (a whitelist violation).
  const armed = await enroll(app, undefined, 'KIOSK-01')
  await checkIn(app, armed.credential, hostState([stick], { hostIdentifier: 'KIOSK-01', operationalStatus: 'Armed', localIpAddress: '10.0.0.9' }))
  // Armed while an unapproved peripheral is present: it is blocked from then on.
  const arming = await enroll(app, undefined, 'LAB-02')
  await checkIn(app, arming.credential, hostState([stick], { hostIdentifier: 'LAB-02', localIpAddress: '10.0.0.11' }))
  await checkIn(app, arming.credential, hostState([stick], { hostIdentifier: 'LAB-02', operationalStatus: 'Armed', localIpAddress: '10.0.0.11' }))

  let page = await list(app, viewer, 'pageSize=50')
  t.equal(page.total, 5)
  const kinds = page.items.map((i) => `${i.kind}@${i.hostIdentifier}`).sort()
  t.same(kinds, ['KnownAttackTool@DESKTOP-9LR722S', 'KnownAttackTool@LAPTOP-7QX2', 'UnapprovedPeripheralOnArmedAgent@LAB-02', 'VulnerablePeripheral@DESKTOP-9LR722S', 'WhitelistViolation@KIOSK-01'])
  const vulnerable = page.items.find((i) => i.kind === 'VulnerablePeripheral')
  t.match(vulnerable, { severity: 3, severityString: 'Error', vid: '046D', pid: 'C52B' })
  t.match(
    page.items.find((i) => i.kind === 'WhitelistViolation'),
    { severity: 4, vid: '0951', pid: '1666', hostIp: '10.0.0.9' },
  )
  t.match(
    page.items.find((i) => i.kind === 'UnapprovedPeripheralOnArmedAgent'),
    { severity: 4, vid: '0951', pid: '1666', hostIp: '10.0.0.11' },
  )

  // Filters, as separate query parameters with any case of name and value.
  t.equal((await list(app, viewer, 'kind=knownattacktool')).total, 2)
  t.equal((await list(app, viewer, 'Kind=VulnerablePeripheral,UnapprovedPeripheralOnArmedAgent')).total, 2)
  t.equal((await list(app, viewer, 'kind=WhitelistViolation')).total, 1)
  t.equal((await list(app, viewer, 'severity=Critical')).total, 2)
  t.equal((await list(app, viewer, 'minimumSeverity=3')).total, 3)
  t.equal((await list(app, viewer, 'minimumSeverity=warning')).total, 5)
  t.equal((await list(app, viewer, 'hostIdentifier=laptop')).total, 1, 'contains, any case (trigram)')
  t.equal((await list(app, viewer, 'hostIdentifier=LA')).total, 2, 'contains, short term')
  t.equal((await list(app, viewer, `agentUuid=${other.uuid.slice(0, 8)}`)).total, 1)
  t.equal((await list(app, viewer, 'vid=046d&pid=C52B')).total, 1)
  t.equal((await list(app, viewer, 'globalSearch=kiosk')).total, 1)
  // Not a bare VID such as 0951: agent uuids are random hex and may hold it.
  t.equal((await list(app, viewer, 'globalSearch=vid_0951')).total, 2, 'device id')
  t.equal((await list(app, viewer, 'globalSearch=KINGSTON')).total, 2, 'vendor')
  t.equal((await list(app, viewer, 'isRead=False')).total, 5)
  t.equal((await list(app, viewer, 'isRead=true')).total, 0)
  const today = new Date().toISOString().slice(0, 10)
  t.equal((await list(app, viewer, `fromDate=${today}&toDate=${today}`)).total, 5)
  t.equal((await list(app, viewer, 'toDate=2020-01-01')).total, 0)
  t.equal((await list(app, viewer, 'fromDate=2999-01-01 00:00:00')).total, 0)

  // Sorting and paging: every page of one together is the whole list, in order.
  const bySeverity = await list(app, viewer, 'sortBy=severity_asc&pageSize=50')
  t.same(
    bySeverity.items.map((i) => i.severity),
    [2, 2, 3, 4, 4],
  )
  const ids: number[] = []
  for (let p = 1; p <= 6; p++) {
    const one = await list(app, viewer, `sortBy=hostIdentifier_desc&pageSize=1&pageNumber=${p}`)
    t.equal(one.total, 5)
    ids.push(...one.items.map((i) => i.id))
  }
  t.same(
    ids,
    (await list(app, viewer, 'sortBy=hostIdentifier_desc&pageSize=10')).items.map((i) => i.id),
  )
  t.equal(ids.length, 5)

  // Pinned by a manager, seen pinned by everyone.
  const target = page.items.find((i) => i.hostIdentifier === 'LAPTOP-7QX2')
  let res = await call(app, viewer, { method: 'POST', url: `${RISK}/pin`, payload: { id: target.id, pinned: true } })
  t.equal(res.statusCode, 403, 'a User may not pin')
  res = await call(app, manager, { method: 'POST', url: `${RISK}/pin`, payload: { id: target.id, pinned: true } })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json(), true)
  res = await call(app, manager, { method: 'POST', url: `${RISK}/pin`, payload: { ID: target.id, Pinned: true } })
  t.equal(res.json(), true, 'pinning again changes nothing')
  page = await list(app, viewer, 'isPinned=true')
  t.equal(page.total, 1)
  t.match(page.items[0], { id: target.id, isPinned: true, pinnedBy: 'operator' })
  t.match(await counts(app, admin), { riskPinned: 1, pinned: 1 })
  res = await call(app, manager, { method: 'POST', url: `${RISK}/pin`, payload: { id: target.id, pinned: false } })
  t.equal(res.json(), false)
  t.equal((await list(app, viewer, 'isPinned=true')).total, 0)

  const audit = (await latestAudit(app, 10)).filter((a) => a.category === 'Notifications')
  t.match(
    audit.map((a) => a.description),
    [/Unpinned risk notification/, /already pinned/, /Pinned risk notification/],
  )
  t.match(audit[0], { user_name: 'operator', asset_type: 'Notification', asset_detail: 'RiskNotification', asset_key: String(target.id), asset_parent_id: other.uuid })
  t.same(JSON.parse(audit[0].details).pinned, { from: true, to: false })
})

t.test('dismissal is shared, audited, idempotent, and a later occurrence opens a new notification', async (t) => {
  const { app, manager, viewer, agent } = await setup(t)
  await checkIn(app, agent.credential, hostState([attackTool]))
  const [n] = (await list(app, viewer)).items
  await call(app, manager, { method: 'POST', url: `${RISK}/pin`, payload: { id: n.id, pinned: true } })

  // The client posts back the object it read.
  let res = await call(app, manager, { method: 'POST', url: `${RISK}/dismiss`, payload: n })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json(), true)
  res = await call(app, manager, { method: 'POST', url: `${RISK}/dismiss`, payload: { id: n.id } })
  t.equal(res.statusCode, 200)
  t.equal(res.json(), false, 'already dismissed')
  t.equal((await list(app, viewer)).total, 0, 'left out without isDismissed')
  const dismissed = await list(app, viewer, 'isDismissed=true')
  t.match(dismissed.items[0], { id: n.id, isDismissed: true, dismissedBy: 'operator', isPinned: false, pinnedBy: null })
  t.match(await counts(app, viewer), { riskUnread: 0, riskTotal: 0, riskPinned: 0 })
  res = await call(app, manager, { method: 'POST', url: `${RISK}/pin`, payload: { id: n.id, pinned: true } })
  t.equal(res.statusCode, 409, 'a dismissed notification cannot be pinned')
  const audit = (await latestAudit(app, 3)).filter((a) => a.category === 'Notifications')
  t.match(
    audit.map((a) => [a.outcome, a.description]),
    [
      ['Failed', /cannot be pinned/],
      ['Succeeded', /already dismissed/],
      ['Succeeded', /Dismissed risk notification/],
    ],
  )

  await checkIn(app, agent.credential, hostState([]))
  await checkIn(app, agent.credential, hostState([attackTool]))
  const again = await list(app, viewer)
  t.equal(again.total, 1)
  t.not(again.items[0].id, n.id, 'a new notification')
  t.equal(again.items[0].occurrences, 1)
  t.equal((await list(app, viewer, 'isDismissed=true')).items[0].occurrences, 1, 'the dismissed one stays as it was')
})

t.test('bad input answers a clear 4xx', async (t) => {
  const { app, manager, viewer } = await setup(t)
  const bad = async (query: string, name: RegExp) => {
    const res = await call(app, viewer, { method: 'GET', url: `${RISK}?${query}` })
    t.equal(res.statusCode, 400, `${query}: ${res.body}`)
    t.match(res.json().detail, name, query)
  }
  await bad('color=red', /color/)
  await bad('isRead=maybe', /isRead/)
  await bad('kind=Rubber', /kind/)
  await bad('severity=loud', /severity/)
  await bad('pageSize=10001', /pageSize/)
  await bad('pageSize=0', /pageSize/)
  await bad('pageNumber=0', /pageNumber/)
  await bad('sortBy=color_asc', /sortBy/)
  await bad('fromDate=2024-02-30', /fromDate/)
  await bad('fromDate=2024-05-02&toDate=2024-05-01', /toDate/)
  await bad('vid=XYZ1', /vid/)
  await bad('hostIdentifier=a%00b', /hostIdentifier/)

  for (const [url, body] of [
    [`${RISK}/pin`, { pinned: true }],
    [`${RISK}/dismiss`, {}],
  ] as const) {
    let res = await call(app, manager, { method: 'POST', url, payload: { id: 999, ...body } })
    t.equal(res.statusCode, 404, `${url} unknown id`)
    t.match(res.json().detail, /999/)
    res = await call(app, manager, { method: 'POST', url, payload: { id: 'x', ...body } })
    t.equal(res.statusCode, 400)
  }
  const res = await call(app, manager, { method: 'POST', url: `${RISK}/dismiss`, payload: { id: 1, kind: 'Rubber' } })
  t.equal(res.statusCode, 400, 'posted-back properties must be valid')
})

t.test('events written in one batch: one change per notification, all of their events linked; a bad batch writes nothing', async (t) => {
  const { app, viewer, agent } = await setup(t)
  t.equal((await checkIn(app, agent.credential, hostState([mouse, attackTool]))).statusCode, 200)
  const before = (await list(app, viewer)).items[0]
  // Read from the table itself: on PostgreSQL the notifications of events written are raised behind the writes, caught up first here as every read of the notifications does.
  const seq = async () => {
    await app.storage.riskFeed?.catchUp()
    return (await queryValue(app, 'SELECT seq FROM notification_counter')) as number
  }
  const events = async () => (await queryValue(app, 'SELECT count(*) FROM events')) as number
  const tool = {
    code: '0x110005',
    severity: 2,
    category: 'USB',
    entityId: 'DESKTOP-9LR722S (192.168.100.128)',
    description: 'Known attack tool detected',
    assetKey: agent.uuid,
    assetName: 'DESKTOP-9LR722S',
    peripheralAssetId: attackTool.deviceID,
  } as const
  const stickEvent = { ...tool, code: '0x110006', description: 'Vulnerable peripheral detected', peripheralAssetId: stick.deviceID, peripheralVid: stick.vid, peripheralPid: stick.pid }
  const quiet = { ...tool, code: '0x110002', severity: 6, description: 'USB peripheral removed' }

  let seq0 = await seq()
  const now = Date.parse(before.lastSeen) + 1000
  await recordEventIds(app, now, [
    { ...tool, details: 'first of the batch' },
    { ...quiet, details: 'removed' },
    { ...stickEvent, details: 'a stick' },
    { ...tool, details: 'last of the batch' },
  ])
  t.equal((await seq()) - seq0, 2, 'one change for each notification the batch touches')
  const page = await list(app, viewer, 'sortBy=severity_asc')
  t.equal(page.total, 2)
  const [attack, vulnerable] = page.items
  t.equal(attack.id, before.id)
  t.equal(attack.occurrences, 3, 'both events of the batch count')
  t.equal(attack.relatedEventIds.length, 3)
  t.equal(attack.description, 'last of the batch', 'the latest occurrence describes it')
  t.equal(Date.parse(attack.lastSeen), now)
  t.equal(attack.firstSeen, before.firstSeen)
  t.match(vulnerable, { kind: 'VulnerablePeripheral', occurrences: 1, description: 'a stick', vid: stick.vid })
  t.equal(vulnerable.relatedEventIds.length, 1)

  // A bad event anywhere in a batch: no event of it is kept, and no notification changes.
  seq0 = await seq()
  const n0 = await events()
  await t.rejects(
    recordEventIds(app, now + 1000, [
      { ...tool, details: 'kept?' },
      { ...quiet, details: 'bad', severity: 9 },
    ]),
  )
  t.equal(await events(), n0, 'no event written')
  t.equal(await seq(), seq0, 'no notification changed')
  t.equal((await list(app, viewer, 'sortBy=severity_asc')).items[0].occurrences, 3)
})
