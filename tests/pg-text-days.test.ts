// PostgreSQL only: the events' trigram index is built for each day once the day has ended
// (migration 020, db/postgres/events-text-days.ts), not kept by the writes. Today's partition
// carries none; an ended day's gets one, by the loop under its lease; an index a dead build
// left invalid is made again; and a text filter answers the same records before and after.
import t from 'tap'
import { pgEventTextDays } from '../db/postgres/events-text-days.js'
import { pgRecordStores } from '../db/postgres/events-query.js'
import { pgEventsRepo } from '../db/postgres/events-write.js'
import { eventFilter } from '../lib/events/filter.js'
import { textIndexLoop } from '../lib/events/text-index.js'
import type { TextIndexUpkeep } from '../lib/events/ports.js'
import { eventMaker } from './fixtures/events.js'
import { fastCommits } from './fixtures/pg-records.js'
import { noPostgres } from './pg.js'

const DAY = 86_400_000
const NOW = Date.now()
const TODAY = Math.floor(NOW / DAY) * DAY

/** The text indexes of events' partitions: partition → valid. */
async function textIndexes(db: Awaited<ReturnType<typeof fastCommits>>): Promise<Record<string, boolean>> {
  const rows = await db.query<{ part: string; valid: boolean }>(
    `SELECT c.relname AS part, i.indisvalid AS valid FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
       JOIN pg_index i ON i.indrelid = c.oid JOIN pg_class x ON x.oid = i.indexrelid
     WHERE h.inhparent = 'events'::regclass AND pg_get_indexdef(i.indexrelid) LIKE '%gin_trgm_ops%'`,
  )
  return Object.fromEntries(rows.map((r) => [r.part, r.valid]))
}

t.test('an ended day gets its text index, today none; text filters answer the same', { skip: noPostgres }, async (t) => {
  const db = await fastCommits(t)
  const events = pgEventsRepo(db)
  const make = eventMaker(7)
  // Three days back, yesterday and today, a few check-ins each.
  for (const day of [TODAY - 3 * DAY, TODAY - DAY, TODAY]) for (let i = 0; i < 20; i++) await events.record(Math.min(NOW, day + i * 60_000), [make(), make(), make()])
  t.same(await textIndexes(db), {}, 'the writes built none: the table has no text index of its own')

  const stores = pgRecordStores(db, { countBudgetMs: 600_000 })
  const questions = [{ Description: 'usb' }, { Source: 'desk' }, { GlobalSearch: 'kingston' }, { GlobalSearch: 'armed' }, { Details: 'HYPERLINK' }, { Source: 'büro' }, { PeripheralAssetId: 'vid' }]
  const ask = () =>
    Promise.all(
      questions.map(async (q) => {
        const a = await stores.events.pageRows(eventFilter(q), { field: 'eventID', direction: 'desc' }, 1000, 0)
        return { filtered: a.filtered, ids: a.rows.map((r) => r[0]) }
      }),
    )
  const before = await ask()
  t.ok(
    before.every((a) => a.ids.length > 0),
    `every question finds records: ${before.map((a) => a.ids.length).join(', ')}`,
  )

  const days = pgEventTextDays(db, { graceMs: 0 })
  const wanted = (await days.unindexed(NOW)).map((u) => u.dayMs)
  // (Ended days of the template's own partitions may be wanted too: made when it was.)
  t.same(
    wanted.filter((d) => d >= TODAY - 3 * DAY),
    [TODAY - DAY, TODAY - 3 * DAY],
    'the ended days are wanted, newest first; today is not',
  )
  t.same(
    wanted,
    [...wanted].sort((a, b) => b - a),
    'newest first',
  )
  t.same(
    await pgEventTextDays(db, { graceMs: NOW - TODAY + 1 })
      .unindexed(NOW)
      .then((u) => u.map((x) => x.dayMs)),
    [TODAY - 3 * DAY],
    'a day within the grace after its end is left alone',
  )

  const built = await days.buildNext(NOW)
  t.match(built?.partition, /^events_p\d{8}$/, 'one day built')
  const loop = textIndexLoop({ upkeep: days, log: { info() {}, error: (d) => t.fail(`the loop failed: ${JSON.stringify(d)}`) }, now: () => NOW })
  loop.start()
  for (let i = 0; i < 100 && (await days.unindexed(NOW)).length; i++) await new Promise((r) => setTimeout(r, 50))
  await loop.stop()
  const indexed = await textIndexes(db)
  const names = (await db.query<{ p: string }>('SELECT record_partition_name($1, d) AS p FROM unnest($2::bigint[]) d', ['events', [TODAY - 3 * DAY, TODAY - DAY, TODAY]])).map((r) => r.p)
  t.ok(names.slice(0, 2).every((n) => n in indexed) && !(names[2] in indexed), 'the loop built the rest: the ended days have theirs, today none')
  t.ok(
    Object.values(indexed).every((v) => v),
    'valid',
  )
  t.same(await days.buildNext(NOW), null, 'nothing more wanted')

  t.same(await ask(), before, 'the same answers with the indexes')
  // The planner reads an indexed day through its index where it is cheapest (scans off).
  await db.uow.run(async () => {
    await db.run('SET LOCAL enable_seqscan = off')
    await db.run('SET LOCAL enable_indexscan = off')
    const part = await db.value<string>('SELECT record_partition_name($1, $2)', ['events', TODAY - DAY])
    const plan = (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN SELECT id FROM "${part}" WHERE details ILIKE '%kingston%'`)).map((r) => r['QUERY PLAN']).join('\n')
    t.match(plan, /_text/, `the day's text index answers a text condition: ${plan}`)
  })
})

t.test('an index a build left invalid is dropped and made again', { skip: noPostgres }, async (t) => {
  const db = await fastCommits(t)
  const events = pgEventsRepo(db)
  const make = eventMaker(3)
  for (let i = 0; i < 10; i++) await events.record(TODAY - 2 * DAY + i, [make(), make()])
  const part = await db.value<string>('SELECT record_partition_name($1, $2)', ['events', TODAY - 2 * DAY])
  // A unique index that cannot be unique fails half-way and stays, invalid, under the name a build uses.
  await db.run(`CREATE UNIQUE INDEX CONCURRENTLY "${part}_text" ON "${part}" (severity)`).then(
    () => t.fail('the index was expected to fail'),
    () => {},
  )
  t.same(await textIndexes(db), {}, 'no text index yet')
  const days = pgEventTextDays(db, { graceMs: 0 })
  const [u] = await days.unindexed(NOW)
  t.equal(u.invalid, `${part}_text`, 'the invalid one is seen')
  await days.buildNext(NOW)
  t.same(await textIndexes(db), { [part!]: true }, 'made again as the text index, valid')
  t.same(await days.unindexed(NOW), [], 'nothing more wanted')
})

t.test('stopping the loop cancels a build under way', async (t) => {
  let cancelled = 0
  let release: () => void = () => {}
  const upkeep: TextIndexUpkeep = {
    buildNext: () =>
      new Promise((resolve, reject) => {
        release = () => reject(Object.assign(new Error('canceling statement due to user request'), { code: '57014' }))
        void resolve
      }),
    async cancel() {
      cancelled++
      release()
    },
  }
  const errors: unknown[] = []
  const loop = textIndexLoop({ upkeep, log: { info() {}, error: (d) => errors.push(d) } })
  loop.start()
  await new Promise((r) => setTimeout(r, 20))
  await loop.stop()
  t.equal(cancelled, 1, 'cancelled once')
  t.same(errors, [], 'a cancelled build is not logged as a failure')
})
