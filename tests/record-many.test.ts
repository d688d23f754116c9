// backend: sqlite-only — SQLite's multi-row event writes (db/events.ts recordMany)
// db/events.ts recordMany: several callers' events written in one go (multi-row inserts),
// with the ids, order, alarm outbox rows (queued behind the writes: db/alarm-queue.ts),
// agents' latest texts and risk notifications each caller would have had alone.
import t from 'tap'
import { openDatabase } from '../db/index.js'
import type { EventInput } from '../lib/events/ports.js'
import { createRepos } from '../lib/repos.js'
import { eventCodes } from '../lib/event-codes.js'
import { storedAgent } from './fixtures/gateway.js'

function setup() {
  const db = openDatabase(':memory:')
  const repos = createRepos(db)
  const agent = (n: number) => storedAgent(repos.gateway, n)
  // Two destinations: every event of severity <= 6 is queued for each.
  for (const id of ['d1', 'd2'])
    db.prepare(`INSERT INTO alarm_destinations (id, name, name_key, type, min_severity, settings, created_ms, updated_ms) VALUES (?, ?, ?, 'syslog', 6, '{}', 1, 1)`).run(id, id, id)
  const texts = (id: number) =>
    db.prepare('SELECT latest_event_text AS a, latest_minus1_event_text AS b, latest_minus2_event_text AS c FROM agents WHERE id = ?').get(id) as {
      a: string | null
      b: string | null
      c: string | null
    }
  return { db, repos, agent, texts }
}

const ev = (description: string, severity = 6, extra: Partial<EventInput> = {}): EventInput => ({
  code: '0x510001',
  severity,
  category: 'General',
  entityId: 'HOST (192.0.2.1)',
  description,
  details: `details of ${description}`,
  ...extra,
})

t.test('ids are consecutive and increasing in the order given, across several INSERT statements; each event gets its outbox rows', async (t) => {
  const { db, repos, agent, texts } = setup()
  const a1 = agent(1)
  const a2 = agent(2)
  const many = Array.from({ length: 70 }, (_, i) => ev(`bulk-${i}`, i % 8))
  const ids = repos.events.recordMany([
    { createdMs: 1000, events: [ev('a1'), ev('a2')], agentId: a1 },
    { createdMs: 1001, events: [ev('lone')] },
    { createdMs: 1002, events: many },
    { createdMs: 1003, events: [ev('c1'), ev('c2'), ev('c3'), ev('c4')], agentId: a2 },
    { createdMs: 1004, events: [], agentId: a2 },
    { createdMs: 1005, events: [ev('d1')], agentId: a1 },
  ])
  t.same(
    ids.map((x) => x.length),
    [2, 1, 70, 4, 0, 1],
  )
  const flat = ids.flat()
  t.same(
    flat,
    Array.from({ length: flat.length }, (_, i) => flat[0] + i),
    'consecutive and increasing',
  )
  const rows = db.prepare('SELECT id, created_ms, description FROM events ORDER BY id').all() as { id: number; created_ms: number; description: string }[]
  t.same(
    rows.map((r) => r.description),
    ['a1', 'a2', 'lone', ...many.map((e) => e.description), 'c1', 'c2', 'c3', 'c4', 'd1'],
    'stored in the order given',
  )
  t.same(
    rows.map((r) => r.id),
    flat,
    'the ids answered are the rows stored',
  )
  t.equal(rows.find((r) => r.description === 'c1')!.created_ms, 1003, "each caller's time")
  repos.alarms.queueAllEvents()
  const outbox = db.prepare(`SELECT destination_id AS d, record_id AS r FROM alarm_outbox WHERE feed = 'events' ORDER BY id`).all() as { d: string; r: number }[]
  const queued = rows.filter((r) => r.description.startsWith('bulk-') === false || Number(r.description.slice(5)) % 8 <= 6)
  t.same(
    outbox,
    queued.flatMap((r) => [
      { d: 'd1', r: r.id },
      { d: 'd2', r: r.id },
    ]),
    'each event of severity <= 6 is queued for each destination, in id order',
  )
  t.same(texts(a1), { a: 'd1', b: 'a2', c: 'a1' }, "an agent's texts follow all of its events in the call, in order")
  t.same(texts(a2), { a: 'c4', b: 'c3', c: 'c2' })
})

t.test("the outbox rows follow each destination's filters, as the per-row trigger did; a rolled-back call leaves nothing to queue", async (t) => {
  const { db, repos } = setup()
  const dest = db.prepare(
    `INSERT INTO alarm_destinations (id, name, name_key, type, min_severity, categories, enabled, feed_events, settings, created_ms, updated_ms)
     VALUES (?, ?, ?, 'webhook', ?, ?, ?, ?, '{}', 1, 1)`,
  )
  dest.run('usb', 'usb', 'usb', 7, ',USB,', 1, 1)
  dest.run('off', 'off', 'off', 7, '', 0, 1)
  dest.run('audit-only', 'audit-only', 'audit-only', 7, '', 1, 0)
  const ids = repos.events.recordMany([
    {
      createdMs: 1,
      events: [ev('usb-low', 7, { category: 'USB' }), ev('usb', 3, { category: 'USB' }), ev('host', 2, { category: 'Host' }), ev('failure about d1', 3, { alarmDestinationId: 'd1' })],
    },
  ])[0]
  repos.alarms.queueAllEvents()
  const outbox = db.prepare(`SELECT destination_id AS d, record_id AS r FROM alarm_outbox WHERE feed = 'events' ORDER BY id`).all()
  t.same(outbox, [
    { d: 'usb', r: ids[0] },
    { d: 'd1', r: ids[1] },
    { d: 'd2', r: ids[1] },
    { d: 'usb', r: ids[1] },
    { d: 'd1', r: ids[2] },
    { d: 'd2', r: ids[2] },
    { d: 'd2', r: ids[3] },
  ])
  t.ok((db.prepare(`SELECT count(DISTINCT delivery_id) AS n FROM alarm_outbox`).get() as { n: number }).n === 7, 'a delivery id of its own for each row')
  const before = (db.prepare('SELECT count(*) AS n FROM alarm_outbox').get() as { n: number }).n
  t.throws(() =>
    db.transaction(() => {
      repos.events.record(2, [ev('undone')])
      throw new Error('the caller fails')
    })(),
  )
  repos.alarms.queueAllEvents()
  t.equal((db.prepare('SELECT count(*) AS n FROM alarm_outbox').get() as { n: number }).n, before, 'a rolled-back call leaves no outbox row')
  t.notOk(db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events' AND name LIKE '%outbox%'`).get(), 'no per-row trigger queues them twice')
})

t.test('outbox rows of a large call: in order of event then destination across statements, each with a uuid and the time queued', async (t) => {
  const { db, repos } = setup()
  const t0 = Date.now()
  // 150 events for two destinations: 300 rows, more than one INSERT statement writes.
  const events = Array.from({ length: 150 }, (_, i) => ev(`e${i}`, i % 8, { category: i % 3 ? 'USB' : 'Host' }))
  const ids = repos.events.record(5, events)
  t.equal(db.prepare('SELECT count(*) FROM alarm_outbox').pluck().get(), 0, 'the write queues nothing itself')
  repos.alarms.queueAllEvents()
  const rows = db.prepare(`SELECT destination_id AS d, record_id AS r, delivery_id AS u, queued_ms AS q FROM alarm_outbox WHERE feed = 'events' ORDER BY id`).all() as {
    d: string
    r: number
    u: string
    q: number
  }[]
  const expected = ids.flatMap((id, i) =>
    events[i].severity <= 6
      ? [
          { d: 'd1', r: id },
          { d: 'd2', r: id },
        ]
      : [],
  )
  t.same(
    rows.map(({ d, r }) => ({ d, r })),
    expected,
  )
  t.ok(
    rows.every((x) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(x.u)),
    'delivery ids are random (version 4) uuids',
  )
  t.equal(new Set(rows.map((x) => x.u)).size, rows.length, 'each row its own delivery id')
  t.ok(
    rows.every((x) => x.q >= t0 && x.q <= Date.now()),
    'queued at the wall-clock time of the queueing',
  )
  // No destination subscribed: nothing queued, the events stored all the same.
  db.exec('UPDATE alarm_destinations SET enabled = 0')
  const more = repos.events.record(6, [ev('alone')])
  repos.alarms.queueAllEvents()
  t.equal(db.prepare('SELECT count(*) FROM alarm_outbox WHERE record_id = ?').pluck().get(more[0]), 0)
  t.equal(db.prepare('SELECT count(*) FROM events WHERE id = ?').pluck().get(more[0]), 1)
})

t.test('the texts shift by one, two or three places, alone and for several agents at once', async (t) => {
  const { repos, agent, texts } = setup()
  const [a, b, c] = [agent(1), agent(2), agent(3)]
  for (const id of [a, b, c]) repos.events.record(1, [ev('old-3'), ev('old-2'), ev('old-1')], id)
  repos.events.recordMany([
    { createdMs: 2, events: [ev('new-1')], agentId: a },
    { createdMs: 2, events: [ev('new-1'), ev('new-2')], agentId: b },
    { createdMs: 2, events: [ev('new-1'), ev('new-2'), ev('new-3'), ev('new-4')], agentId: c },
  ])
  t.same(texts(a), { a: 'new-1', b: 'old-1', c: 'old-2' })
  t.same(texts(b), { a: 'new-2', b: 'new-1', c: 'old-1' })
  t.same(texts(c), { a: 'new-4', b: 'new-3', c: 'new-2' })
  repos.events.record(3, [ev('alone')], a)
  t.same(texts(a), { a: 'alone', b: 'new-1', c: 'old-1' }, 'record() is one batch of one caller')
  repos.events.recordMany([
    { createdMs: 4, events: [ev('x')], agentId: a },
    { createdMs: 4, events: [ev('y')], agentId: a },
  ])
  t.same(texts(a), { a: 'y', b: 'x', c: 'alone' }, 'two callers for one agent: both of their events count')
})

t.test('the texts of more agents than one statement takes: each shifted, all with one new rev', async (t) => {
  const { db, repos, agent, texts } = setup()
  const ids = Array.from({ length: 150 }, (_, i) => agent(10 + i))
  for (const id of ids) repos.events.record(1, [ev(`old-${id}-3`), ev(`old-${id}-2`), ev(`old-${id}-1`)], id)
  const revBefore = db.prepare(`SELECT n FROM row_counts WHERE name = 'agents.rev'`).pluck().get() as number
  repos.events.recordMany(ids.map((id, i) => ({ createdMs: 2, agentId: id, events: Array.from({ length: 1 + (i % 3) }, (_, k) => ev(`new-${id}-${k + 1}`)) })))
  ids.forEach((id, i) => {
    const n = 1 + (i % 3)
    const expected =
      n === 1 ? { a: `new-${id}-1`, b: `old-${id}-1`, c: `old-${id}-2` } : n === 2 ? { a: `new-${id}-2`, b: `new-${id}-1`, c: `old-${id}-1` } : { a: `new-${id}-3`, b: `new-${id}-2`, c: `new-${id}-1` }
    if (JSON.stringify(texts(id)) !== JSON.stringify(expected)) t.same(texts(id), expected, `agent ${id}`)
  })
  t.pass('every agent shifted by its own count')
  const revs = db
    .prepare(`SELECT DISTINCT rev FROM agents WHERE id IN (${ids.join(', ')})`)
    .pluck()
    .all()
  t.same(revs, [revBefore + 1], 'one new rev for the whole call, across statements')
  t.equal(db.prepare(`SELECT n FROM row_counts WHERE name = 'agents.rev'`).pluck().get(), revBefore + 1)
})

t.test('a bad event anywhere writes nothing; risky events raise their notification once per call', async (t) => {
  const { db, repos, agent } = setup()
  const a = agent(1)
  t.throws(
    () =>
      repos.events.recordMany([
        { createdMs: 1, events: [ev('fine')], agentId: a },
        { createdMs: 1, events: [ev('bad', 9)] },
      ]),
    /severity 9 is not 0-7/,
  )
  t.equal(db.prepare('SELECT count(*) FROM events').pluck().get(), 0)
  const uuid = db.prepare('SELECT uuid FROM agents WHERE id = ?').pluck().get(a) as string
  const attack = (serial: string): EventInput => ({
    ...eventCodes.attackTool,
    entityId: 'HOST-1',
    details: 'an attack tool',
    assetKey: uuid,
    assetName: 'HOST-1',
    peripheralAssetId: `USB\\VID_0483&PID_5740\\${serial}`,
    peripheralVid: '0483',
    peripheralPid: '5740',
  })
  repos.events.recordMany([
    { createdMs: 10, events: [attack('S1')], agentId: a },
    { createdMs: 11, events: [ev('plain'), attack('S1')], agentId: a },
    { createdMs: 12, events: [attack('S2')] },
  ])
  const raised = db.prepare('SELECT device_key, occurrences, first_ms, last_ms FROM risk_notifications ORDER BY id').all()
  t.same(raised, [
    { device_key: '0483:5740:USB\\VID_0483&PID_5740\\S1', occurrences: 2, first_ms: 10, last_ms: 11 },
    { device_key: '0483:5740:USB\\VID_0483&PID_5740\\S2', occurrences: 1, first_ms: 12, last_ms: 12 },
  ])
  t.equal(db.prepare('SELECT count(*) FROM risk_notification_events').pluck().get(), 3, 'each risky event linked to its notification')
})
