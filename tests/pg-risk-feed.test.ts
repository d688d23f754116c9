// PostgreSQL only: risk notifications are raised behind the writes of events (migration 021,
// db/postgres/risk-feed.ts). What the feed raises, in slices, by consumers taking turns, is
// what raising in the writing transaction raised; a rolled-back write raises nothing; and the
// mark never passes an event still being written.
import t from 'tap'
import type { EventInput } from '../lib/events/ports.js'
import { pgEventsRepo } from '../db/postgres/events-write.js'
import { pgRiskRaiser, raiseRecorded } from '../db/postgres/risk.js'
import { pgRiskFeed } from '../db/postgres/risk-feed.js'
import { fastCommits, rand } from './fixtures/pg-records.js'
import { noPostgres } from './pg.js'

const NOW = Date.now()
const KINDS = [
  { code: '0x110005', description: 'Known attack tool detected' },
  { code: '0x110006', description: 'Vulnerable peripheral detected' },
  { code: '0x110004', description: 'Unapproved peripheral on an armed agent' },
  { code: '0x110001', description: 'New USB peripheral detected' }, // not risky
]

/** `n` check-ins of 1-4 events over a few agents and devices, some of them repeats of one notification. */
function checkIns(seed: number, n: number): EventInput[][] {
  const r = rand(seed)
  return Array.from({ length: n }, () =>
    Array.from({ length: 1 + Math.floor(r() * 4) }, () => {
      const k = KINDS[Math.floor(r() * KINDS.length)]
      const agent = Math.floor(r() * 5)
      const device = Math.floor(r() * 3)
      return {
        code: k.code,
        severity: 3,
        category: 'USB' as const,
        entityId: `PC-${agent} (10.0.0.${agent})`,
        description: k.description,
        details: `device ${device} on PC-${agent}, ${Math.floor(r() * 1000)}`,
        assetKey: `agent-${agent}`,
        assetName: `PC-${agent}`,
        peripheralAssetId: `USB\\VID_0951&PID_1666\\${device}`,
        peripheralVid: '0951',
        peripheralPid: '1666',
      }
    }),
  )
}

/** The notifications as compared: everything but the ids and change numbers, which depend on the order of raising. */
async function notifications(db: Awaited<ReturnType<typeof fastCommits>>) {
  return db.query(
    `SELECT r.kind, r.agent_uuid, r.device_key, r.host_identifier, r.title, r.description, r.occurrences, r.first_ms, r.last_ms,
       (SELECT array_agg(e.details ORDER BY e.id) FROM risk_notification_events x JOIN events e ON e.id = x.event_id WHERE x.notification_id = r.id) AS events
     FROM risk_notifications r ORDER BY r.kind, r.agent_uuid, r.device_key`,
  )
}

t.test('the feed raises, a slice at a time, what raising in the writing transaction raised', { skip: noPostgres }, async (t) => {
  const inline = await fastCommits(t)
  const behind = await fastCommits(t)
  const batches = checkIns(11, 60)
  const inlineEvents = pgEventsRepo(inline, { recorded: raiseRecorded(pgRiskRaiser(inline), await pgRiskRaiser(inline).codes()) })
  const behindEvents = pgEventsRepo(behind)
  const feed = pgRiskFeed(behind, pgRiskRaiser(behind), 7)
  for (const [i, events] of batches.entries()) {
    await inlineEvents.record(NOW + i, events)
    await behindEvents.record(NOW + i, events)
    // Caught up now and then, as the loop would.
    if (i % 17 === 5) await feed.catchUp()
  }
  t.ok(await feed.waiting(), 'events wait to be raised')
  t.ok((await feed.catchUp()) > 1, 'in several slices')
  t.equal(await feed.waiting(), null, 'none waits after')
  t.equal(await feed.catchUp(), 0, 'nothing more to do')
  const expected = await notifications(inline)
  t.ok(expected.length > 5, `notifications raised: ${expected.length}`)
  t.same(await notifications(behind), expected, 'the same notifications, occurrences and events')
  t.equal(await behind.value('SELECT up_to FROM risk_raised'), await behind.value(`SELECT top FROM record_counts WHERE name = 'events'`), 'the mark is at the newest event')
})

t.test('consumers taking turns raise each event once; a write rolled back raises nothing', { skip: noPostgres }, async (t) => {
  const db = await fastCommits(t, 8)
  const events = pgEventsRepo(db)
  const batches = checkIns(5, 80)
  for (const [i, e] of batches.entries()) await events.record(NOW + i, e)
  // A write that fails after its events: rolled back with them.
  await db.uow
    .run(async () => {
      await events.record(NOW, checkIns(6, 1)[0])
      throw new Error('the check-in failed')
    })
    .catch(() => {})
  const feeds = [pgRiskFeed(db, pgRiskRaiser(db), 9), pgRiskFeed(db, pgRiskRaiser(db), 13), pgRiskFeed(db, pgRiskRaiser(db), 5)]
  await Promise.all(feeds.map((f) => f.catchUp()))
  const risky = new Set(['0x110005', '0x110006', '0x110004'])
  const written = batches.flat().filter((e) => risky.has(e.code)).length
  t.equal(Number(await db.value('SELECT sum(occurrences) FROM risk_notifications')), written, 'every risky event counted once')
  t.equal(Number(await db.value('SELECT count(*) FROM risk_notification_events')), written, 'and linked once')
})

t.test('the mark stops before an event still being written', { skip: noPostgres }, async (t) => {
  const db = await fastCommits(t, 6)
  const events = pgEventsRepo(db)
  const feed = pgRiskFeed(db, pgRiskRaiser(db))
  await events.record(NOW, checkIns(3, 1)[0])
  let release: () => void = () => {}
  const held = new Promise<void>((r) => {
    release = r
  })
  // A writer that has taken its ids (under the feed lock) and not committed yet.
  const writing = db.uow.run(async () => {
    await events.record(NOW + 1, [{ ...checkIns(4, 1)[0][0], code: '0x110005' }])
    await held
  })
  await new Promise((r) => setTimeout(r, 50))
  await feed.catchUp()
  const mark = Number(await db.value('SELECT up_to FROM risk_raised'))
  release()
  await writing
  const top = Number(await db.value(`SELECT top FROM record_counts WHERE name = 'events'`))
  t.ok(mark < top, `the mark (${mark}) stayed below the event being written (${top})`)
  await feed.catchUp()
  t.equal(Number(await db.value('SELECT up_to FROM risk_raised')), top, 'and takes it once it is committed')
  t.equal(Number(await db.value(`SELECT count(*) FROM risk_notification_events x JOIN events e ON e.id = x.event_id WHERE e.id = $1`, [top])), 1, 'raised')
})
