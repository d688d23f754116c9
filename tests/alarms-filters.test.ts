// Which records reach which destination: minimum severity, event and audit categories,
// feeds (events, audit, assets), the enabled flag; queued in the transaction that stores
// the record (an audit record or asset message), or behind it by the worker (an event).
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login } from './helpers.js'
import { alarmsOf, query, queryColumn, queryValue, recordEvents } from './seed.js'
import { ALARM_PATH, alarmEnv, httpReceiver } from './fixtures/receivers.js'
import { alarmWorker } from '../lib/alarms/index.js'
import type { EventCategory } from '../lib/events/ports.js'

const SECRET = 'whsec-filters-0123456789'

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t, alarmEnv)
  const token = await login(app)
  alarmWorker(app).pause()
  const rx = await httpReceiver(SECRET)
  t.teardown(() => rx.close())
  const add = async (name: string, filters: object, enabled = true) => {
    const res = await call(app, token, {
      method: 'POST',
      url: `${ALARM_PATH}/AddOrUpdateAlarmDest`,
      payload: { name, type: 'webhook', enabled, filters, webhook: { url: `${rx.url}?d=${name}`, secret: SECRET } },
    })
    if (res.statusCode !== 200) throw new Error(res.body)
    return res.json()
  }
  return { app, token, rx, add }
}

// The events' deliveries are queued behind their writes (by the worker): queued here first.
async function queued(app: FastifyInstance, destinationId: string, feed: string): Promise<number[]> {
  await alarmsOf(app).queueAllEvents()
  return queryColumn<number>(app, 'SELECT record_id FROM alarm_outbox WHERE destination_id = ? AND feed = ? ORDER BY id', destinationId, feed)
}

const record = async (app: FastifyInstance, severity: number, category: EventCategory = 'USB') =>
  ((await recordEvents(app, Date.now(), [{ code: '0x110001', severity, category, entityId: 'PC (10.0.0.1)', description: 'd', details: `severity ${severity}` }])) as number[])[0]

t.test('minimum severity: that severity or worse', async (t) => {
  const { app, add } = await setup(t)
  const warning = await add('warning', {})
  const debug = await add('debug', { minimumSeverity: 'Debug' })
  const critical = await add('critical', { minimumSeverity: 'Critical' })
  const ids: number[] = []
  for (const s of [0, 1, 2, 3, 4, 5, 6, 7]) ids.push(await record(app, s))
  t.same(await queued(app, warning.id, 'events'), ids.slice(0, 5), 'Warning (default): 0 to 4')
  t.same(await queued(app, debug.id, 'events'), ids)
  t.same(await queued(app, critical.id, 'events'), ids.slice(0, 3))
})

t.test('event categories: empty means all', async (t) => {
  const { app, add } = await setup(t)
  const usbNetwork = await add('usb-network', { categories: ['USB', 'Network'] })
  const all = await add('all', {})
  const usb = await record(app, 2, 'USB')
  const network = await record(app, 2, 'Network')
  const host = await record(app, 2, 'Host')
  const system = await record(app, 2, 'System')
  t.same(await queued(app, usbNetwork.id, 'events'), [usb, network])
  t.same(await queued(app, all.id, 'events'), [usb, network, host, system])
})

t.test('feeds and audit categories', async (t) => {
  const { app, token, rx, add } = await setup(t)
  const eventsOnly = await add('events-only', { minimumSeverity: 'Debug' })
  const auditUsers = await add('audit-users', { minimumSeverity: 'Debug', feeds: ['audit'], auditCategories: ['Users', 'Authentication'] })
  const auditWarnings = await add('audit-warnings', { feeds: ['audit'] })
  const assets = await add('assets', { feeds: ['assets'] })
  const everything = await add('everything', { minimumSeverity: 'Debug', feeds: ['events', 'audit', 'assets'] })

  const event = await record(app, 6)
  const created = await call(app, token, {
    method: 'POST',
    url: '/prime/webui/admin/adduser',
    payload: { userName: 'carol', email: 'carol@example.com', userProfile: 10, password: 'Long-enough-pass-1' },
  })
  t.equal(created.statusCode, 200, created.body)
  const refused = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'x' } })
  t.equal(refused.statusCode, 400)
  const audits = await query(app, `SELECT id, category, severity FROM audit_trail WHERE operation_id = 'addUser' ORDER BY id`)
  t.same(
    audits.map((a) => [a.category, a.severity]),
    [
      ['Users', 5],
      ['Users', 4],
    ],
  )
  const published = await alarmsOf(app).publishAssets(Date.now(), [
    { kind: 'snapshot', assetId: 'a1' },
    { kind: 'snapshot', assetId: 'a2' },
  ])
  t.equal(published, 4, 'two messages for each of the two destinations subscribed to assets')

  t.same(await queued(app, eventsOnly.id, 'events'), [event])
  t.same(await queued(app, eventsOnly.id, 'audit'), [])
  t.same(await queued(app, eventsOnly.id, 'assets'), [])
  t.same(
    await queued(app, auditUsers.id, 'audit'),
    audits.map((a) => a.id),
  )
  t.same(await queued(app, auditUsers.id, 'events'), [])
  t.same(await queued(app, auditWarnings.id, 'audit'), [audits[1].id], 'Warning and worse only: the refused request')
  t.same((await queued(app, assets.id, 'assets')).length, 2)
  t.same(await queued(app, assets.id, 'events'), [])
  t.same(await queued(app, assets.id, 'audit'), [])
  const all = await queryColumn<string>(app, 'SELECT feed FROM alarm_outbox WHERE destination_id = ? ORDER BY id', everything.id)
  // Every audit record after its creation (other destinations created, the login, the two addUser calls) and the rest in record order.
  t.ok(all.includes('events') && all.includes('audit') && all.includes('assets'))
  t.same(all.slice(-3), ['audit', 'assets', 'assets'], 'in the order the records were stored')

  await alarmWorker(app).drain()
  const to = (name: string) => rx.deliveries.filter((d) => d.body.destination.name === name)
  t.same(
    to('assets').map((d) => [d.body.feed, d.body.asset.assetId]),
    [
      ['assets', 'a1'],
      ['assets', 'a2'],
    ],
  )
  t.same(
    to('audit-users').map((d) => d.body.auditTrail.auditTrailID),
    audits.map((a) => a.id),
  )
  t.same(
    to('events-only').map((d) => d.body.event.eventID),
    [event],
  )
})

t.test('the enabled flag: a disabled destination matches nothing new', async (t) => {
  const { app, token, add } = await setup(t)
  const off = await add('off', {}, false)
  await record(app, 0)
  t.same(await queued(app, off.id, 'events'), [])
  t.equal(await alarmsOf(app).publishAssets(Date.now(), [{ kind: 'snapshot' }]), 0)
  t.equal(await queryValue(app, 'SELECT count(*) FROM asset_messages'), 0, 'with no subscriber nothing is stored')
  const on = await call(app, token, {
    method: 'POST',
    url: `${ALARM_PATH}/AddOrUpdateAlarmDest`,
    payload: { id: off.id, name: 'off', type: 'webhook', enabled: true, webhook: { url: 'http://127.0.0.1:9/' } },
  })
  t.equal(on.statusCode, 200, on.body)
  const later = await record(app, 0)
  t.same(await queued(app, off.id, 'events'), [later])
})

t.test('a record and its deliveries are stored together or not at all', async (t) => {
  const { app, add } = await setup(t)
  const dest = await add('hook', {})
  await t.rejects(
    app.storage.uow.run(async () => {
      await record(app, 1)
      throw new Error('rolled back')
    }),
  )
  t.equal(await queryValue(app, 'SELECT count(*) FROM events'), 0)
  t.same(await queued(app, dest.id, 'events'), [])
  const id = await record(app, 1)
  t.same(await queued(app, dest.id, 'events'), [id])
  const ids = await queryColumn<string>(app, 'SELECT delivery_id FROM alarm_outbox')
  t.ok(
    ids.every((d) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(d)),
    'delivery ids are version 4 uuids',
  )
})
