// backend: sqlite-only — SQLite's alarm queue (db/alarm-queue.ts); PostgreSQL's: tests/pg-alarms.test.ts
// db/alarm-queue.ts: the deliveries of events, queued behind their writes a slice at a time.
// Checked against a model that queues each event at its write, as the outbox did in the
// write's transaction: every destination must get the same deliveries in the same order,
// whatever the slices, the destinations' changes and the audit records between them.
import t from 'tap'
import { openDatabase } from '../db/index.js'
import type { DestinationInput } from '../lib/alarms/ports.js'
import { QUEUE_ROWS } from '../db/alarm-queue.js'
import type { EventCategory, EventInput } from '../lib/events/ports.js'
import { createRepos } from '../lib/repos.js'

const CATEGORIES: EventCategory[] = ['USB', 'Network', 'System', 'Host', 'General']

/** A small seeded generator (mulberry32): the same run every time. */
function random(seed: number) {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

function setup() {
  const db = openDatabase(':memory:')
  const repos = createRepos(db)
  const outbox = () => db.prepare(`SELECT destination_id AS d, feed AS f, record_id AS r FROM alarm_outbox ORDER BY id`).all() as { d: string; f: string; r: number }[]
  const upTo = () => db.prepare('SELECT up_to FROM alarm_events_queued').pluck().get() as number
  const lastEvent = () => db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").pluck().get() as number
  return { db, repos, outbox, upTo, lastEvent }
}

const ev = (severity: number, category: EventCategory, extra: Partial<EventInput> = {}): EventInput => ({
  code: '0x510001',
  severity,
  category,
  entityId: 'HOST (192.0.2.1)',
  description: 'd',
  details: 'x',
  ...extra,
})

const destination = (id: string, o: Partial<DestinationInput> = {}): DestinationInput => ({
  id,
  name: id,
  type: 'syslog',
  enabled: true,
  minSeverity: 7,
  categories: [],
  auditCategories: [],
  feeds: ['events'],
  settings: {},
  ...o,
})

t.test('against the model: random writes, slices and changes of destinations', async (t) => {
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    const rnd = random(seed)
    const pick = <T>(list: T[]) => list[Math.floor(rnd() * list.length)]
    const { repos, outbox, upTo, lastEvent } = setup()
    const dests = new Map<string, DestinationInput>()
    // What each destination must get, in order: the events it took when each was written.
    const expected = new Map<string, number[]>()
    const takes = (d: DestinationInput, e: EventInput) => d.enabled && e.severity <= d.minSeverity && (d.categories.length === 0 || d.categories.includes(e.category)) && e.alarmDestinationId !== d.id
    for (let step = 0; step < 120; step++) {
      const r = rnd()
      if (r < 0.1 || dests.size === 0) {
        const id = `d${dests.size}`
        const d = destination(id, { minSeverity: Math.floor(rnd() * 8), categories: rnd() < 0.5 ? [] : [pick(CATEGORIES), pick(CATEGORIES)] })
        repos.alarms.insert(d, 1, null)
        dests.set(id, d)
        expected.set(id, [])
      } else if (r < 0.2) {
        const d = pick([...dests.values()])
        const changed = { ...d, enabled: rnd() < 0.6, minSeverity: Math.floor(rnd() * 8), categories: rnd() < 0.5 ? [] : [pick(CATEGORIES)] }
        repos.alarms.update(changed, 2, null)
        dests.set(d.id, changed)
      } else if (r < 0.45) {
        repos.alarms.queueEvents()
      } else {
        // A write of 1 to 2,000 events: bursts longer than a slice.
        const n = rnd() < 0.1 ? 500 + Math.floor(rnd() * 1500) : 1 + Math.floor(rnd() * 20)
        const events = Array.from({ length: n }, () => ev(Math.floor(rnd() * 8), pick(CATEGORIES), rnd() < 0.05 ? { alarmDestinationId: pick([...dests.keys()]) } : {}))
        const ids = repos.events.record(3, events)
        for (const d of dests.values()) for (let i = 0; i < n; i++) if (takes(d, events[i])) expected.get(d.id)!.push(ids[i])
      }
    }
    repos.alarms.queueAllEvents()
    t.notOk(repos.alarms.eventsWaiting(), `seed ${seed}: nothing left waiting`)
    const rows = outbox()
    for (const [id, ids] of expected) {
      t.same(
        rows.filter((x) => x.d === id).map((x) => x.r),
        ids,
        `seed ${seed}: ${id} gets what it took when each event was written, in order (${ids.length})`,
      )
    }
    t.equal(upTo(), lastEvent(), `seed ${seed}: the mark is at the last event`)
  }
})

t.test('a slice writes at most QUEUE_ROWS rows, in order of event then destination', async (t) => {
  const { repos, outbox, upTo } = setup()
  for (const id of ['a', 'b', 'c']) repos.alarms.insert(destination(id), 1, null)
  const ids = repos.events.record(
    1,
    Array.from({ length: 2500 }, () => ev(1, 'USB')),
  )
  t.equal(outbox().length, 0, 'the write queues nothing itself')
  t.ok(repos.alarms.eventsWaiting())
  const perSlice = Math.floor(QUEUE_ROWS / 3)
  t.equal(repos.alarms.queueEvents(), perSlice * 3, 'one slice')
  t.equal(upTo(), ids[perSlice - 1], 'the mark after the last event the slice queued')
  t.same(
    outbox()
      .slice(0, 6)
      .map((x) => `${x.d}${x.r - ids[0]}`),
    ['a0', 'b0', 'c0', 'a1', 'b1', 'c1'],
  )
  t.equal(repos.alarms.queueAllEvents(), 7500 - perSlice * 3)
  t.equal(repos.alarms.queueEvents(), 0, 'none left')
})

t.test('a destination takes the events stored after it was created, or enabled again', async (t) => {
  const { repos, outbox } = setup()
  const before = repos.events.record(1, [ev(1, 'USB')])
  repos.alarms.insert(destination('new'), 1, null)
  const after = repos.events.record(1, [ev(1, 'USB')])
  // Disabled with one event waiting: it is queued with the destination as it was.
  repos.alarms.update(destination('new', { enabled: false }), 2, null)
  const whileOff = repos.events.record(1, [ev(1, 'USB')])
  repos.alarms.update(destination('new'), 3, null)
  const back = repos.events.record(1, [ev(1, 'USB')])
  repos.alarms.queueAllEvents()
  t.same(
    outbox().map((x) => x.r),
    [after[0], back[0]],
  )
  t.notOk(outbox().some((x) => x.r === before[0] || x.r === whileOff[0]))
})

t.test('events and audit records reach a destination taking both in the order they were stored', async (t) => {
  const { repos, outbox } = setup()
  repos.alarms.insert(destination('both', { feeds: ['events', 'audit'] }), 1, null)
  const e1 = repos.events.record(1, [ev(1, 'USB')])[0]
  const audit = (description: string) =>
    repos.audit.insert({ createdMs: 2, severity: 2, category: 'Users', user: 'admin', sourceIp: '127.0.0.1', description, details: '', operationId: 'x', outcome: 'Failed' })
  const a1 = audit('after e1')
  const e2 = repos.events.record(1, [ev(1, 'USB')])[0]
  repos.alarms.queueAllEvents()
  t.same(
    outbox().map((x) => `${x.f} ${x.r}`),
    [`events ${e1}`, `audit ${a1}`, `events ${e2}`],
  )
})

t.test('events removed before they were queued are passed over; with no destination nothing is read', async (t) => {
  const { db, repos, outbox, upTo } = setup()
  repos.events.record(
    1,
    Array.from({ length: 10 }, () => ev(1, 'USB')),
  )
  repos.alarms.queueEvents()
  t.equal(upTo(), 10, 'no destination: the mark moves to the last event')
  repos.alarms.insert(destination('a'), 1, null)
  const ids = repos.events.record(
    1,
    Array.from({ length: 10 }, () => ev(1, 'USB')),
  )
  db.prepare('DELETE FROM events WHERE id > ?').run(ids[4])
  repos.alarms.queueAllEvents()
  t.same(
    outbox().map((x) => x.r),
    ids.slice(0, 5),
  )
  t.equal(upTo(), ids[9], 'past the removed ones')
})

t.test('a slice undone with its transaction leaves the mark where it was', async (t) => {
  const { db, repos, outbox, upTo } = setup()
  repos.alarms.insert(destination('a'), 1, null)
  repos.events.record(1, [ev(1, 'USB'), ev(2, 'USB')])
  const mark = upTo()
  t.throws(() =>
    db.transaction(() => {
      repos.alarms.queueEvents()
      throw new Error('failed after the slice')
    })(),
  )
  t.equal(upTo(), mark)
  t.equal(outbox().length, 0)
  t.equal(repos.alarms.queueEvents(), 2, 'queued by the next one')
})

t.test("a destination's pending count and the health count the events not queued yet", async (t) => {
  const { repos } = setup()
  repos.alarms.insert(destination('usb', { categories: ['USB'], minSeverity: 4 }), 1, null)
  repos.events.record(1, [ev(1, 'USB'), ev(1, 'Host'), ev(6, 'USB'), ev(2, 'USB', { alarmDestinationId: 'usb' }), ev(4, 'USB')])
  t.equal(repos.alarms.counts('usb', 2).pending, 2, 'the two it takes, before they are queued')
  t.equal(repos.alarms.health(2).unqueued, 5)
  repos.alarms.queueAllEvents()
  t.equal(repos.alarms.counts('usb', 2).pending, 2, 'the same once queued')
  t.equal(repos.alarms.health(2).unqueued, 0)
  repos.alarms.update(destination('usb', { enabled: false, categories: ['USB'], minSeverity: 4 }), 3, null)
  repos.events.record(1, [ev(1, 'USB')])
  t.equal(repos.alarms.counts('usb', 3).pending, 2, 'a disabled destination takes no new ones')
})
