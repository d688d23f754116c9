// What the events' feed lock costs (db/postgres/events-write.ts): events per second through
// the PostgreSQL recorder with batches of 1, 16 and 256 events a transaction, by one writer
// and by four at once, against the same INSERT without the lock. Also four writers whose
// units hold on 2 ms after recording (the gateway's check-in goes on after its events): the
// lock is held until the commit, so that time is serialized too. The baseline runs without
// the trigger that keeps the table's total (record_counts, migration 004), whose row lock
// serializes writers as well (behind the feed lock, at no further cost).
//
//   npx tsc -p . && PRIME_DATABASE_URL=postgres://prime@127.0.0.1:5432/prime node dist/scripts/bench-pg-events.js
//
// BENCH_SYNC=off runs with synchronous_commit off. Then the server's recorder with its risk
// hook over a year of day partitions (below). Runs in a scratch database of its own (made,
// migrated and dropped), about a minute.
import pg from 'pg'
import type { EventBatch, EventInput } from '../lib/events/ports.js'
import { connectPostgres, migratePostgres } from '../db/postgres/index.js'
import { pgEventsRepo } from '../db/postgres/events-write.js'
import { pgRiskRaiser, raiseRecorded } from '../db/postgres/risk.js'
import { eventCodes } from '../lib/event-codes.js'
import { EVENT_FIELDS } from '../lib/events/ports.js'
import { eventFilter } from '../lib/events/filter.js'
import { pgRecordStores } from '../db/postgres/events-query.js'

const SECONDS = Number(process.env.BENCH_SECONDS ?? 2)
const base = process.env.PRIME_DATABASE_URL ?? process.env.PRIME_TEST_DATABASE_URL
if (!base) throw new Error('set PRIME_DATABASE_URL to a PostgreSQL server (a role that may create databases)')

const event = (i: number): EventInput => ({
  code: eventCodes.peripheralNew.code,
  severity: 6,
  category: 'USB',
  entityId: `DESKTOP-${i % 500} (10.0.${i % 250}.1)`,
  description: 'New USB peripheral detected',
  details: `Kingston DataTraveler 3.0 (VID 0951, PID 1666, serial ${i}) on DESKTOP-${i % 500}.`,
  hashtags: i % 3 ? null : '#unapproved',
  peripheralIcon: 3,
  assetKey: `agent-${i % 500}`,
  assetName: `DESKTOP-${i % 500}`,
  peripheralAssetId: `USB\\VID_0951&PID_1666\\${i}`,
})

/** The recorder's INSERT without the feed lock: the baseline. */
const PLAIN = `INSERT INTO events (created_ms, event_code, severity, category, entity_id, description, details, hashtags,
    peripheral_icon, asset_key, asset_name, peripheral_asset_id)
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
    $9::int[], $10::text[], $11::text[], $12::text[]) RETURNING id`

async function main() {
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  const name = `prime_bench_events_${process.pid}`
  await admin.query(`CREATE DATABASE ${name}`)
  const url = new URL(base!)
  url.pathname = `/${name}`
  // BENCH_SYNC=off: commits wait for no fsync, so that the lock's own cost shows apart from the disk's.
  if (process.env.BENCH_SYNC === 'off') url.searchParams.set('options', '-c synchronous_commit=off')
  const db = connectPostgres(url.toString(), { max: 8 })
  try {
    const client = await db.pool.connect()
    await migratePostgres(client)
    client.release()
    const recorder = pgEventsRepo(db)
    let n = 0
    const batchOf = (size: number): EventBatch => ({ createdMs: Date.now(), events: Array.from({ length: size }, () => event(n++)) })
    const plain = async (b: EventBatch) => {
      const col = <T>(fn: (e: EventInput) => T) => b.events.map(fn)
      await db.uow.run(() =>
        db.query(PLAIN, [
          b.events.map(() => b.createdMs),
          col((e) => e.code),
          col((e) => e.severity),
          col((e) => e.category),
          col((e) => e.entityId),
          col((e) => e.description),
          col((e) => e.details),
          col((e) => e.hashtags ?? null),
          col((e) => e.peripheralIcon ?? -1),
          col((e) => e.assetKey ?? null),
          col((e) => e.assetName ?? null),
          col((e) => e.peripheralAssetId ?? null),
        ]),
      )
    }
    const locked = (holdMs: number) => async (b: EventBatch) => {
      await db.uow.run(async () => {
        await recorder.recordMany([b])
        if (holdMs) await new Promise((resolve) => setTimeout(resolve, holdMs))
      })
    }
    /** Events per second by `writers` writers each writing batches of `size` for SECONDS. */
    const measure = async (write: (b: EventBatch) => Promise<void>, size: number, writers: number) => {
      // A first batch makes the day's partition and warms the connections.
      await write(batchOf(size))
      const end = performance.now() + SECONDS * 1000
      let events = 0
      let txs = 0
      const started = performance.now()
      await Promise.all(
        Array.from({ length: writers }, async () => {
          while (performance.now() < end) {
            await write(batchOf(size))
            events += size
            txs++
          }
        }),
      )
      const s = (performance.now() - started) / 1000
      return { eventsPerS: Math.round(events / s), txPerS: Math.round(txs / s) }
    }
    const rows: Record<string, unknown>[] = []
    for (const size of [1, 16, 256]) {
      for (const writers of [1, 4]) {
        // Without the kept total's trigger too: its row lock, held to the commit, would serialize the writers as the feed lock does.
        await db.query('ALTER TABLE events DISABLE TRIGGER events_added')
        const without = await measure(plain, size, writers)
        await db.query('ALTER TABLE events ENABLE TRIGGER events_added')
        const withLock = await measure(locked(0), size, writers)
        rows.push({ size, writers, 'no lock ev/s': without.eventsPerS, 'feed lock ev/s': withLock.eventsPerS, 'feed lock tx/s': withLock.txPerS })
      }
      const held = await measure(locked(2), size, 4)
      rows.push({ size, writers: '4, 2 ms held', 'no lock ev/s': '', 'feed lock ev/s': held.eventsPerS, 'feed lock tx/s': held.txPerS })
    }
    console.table(rows)

    // The server's recorder with its risk hook over a year of day partitions (retention's
    // default keeps a year): BENCH_DAYS days (365) of BENCH_YEAR_EVENTS events (100,000), then
    // 32 check-ins x 3 events a unit of work, one writer, a seventh of them risky. The hook as
    // it was (the risky events read back by id, every day's partition probed) against the
    // hook as the server has it (raiseRecorded: the events given, prepared statements).
    const days = Number(process.env.BENCH_DAYS ?? 365)
    const now = Date.now()
    await db.query('TRUNCATE events')
    await db.query('SELECT ensure_partitions($1, $2::bigint, $3::bigint)', ['events', now - days * 86_400_000, now + 86_400_000])
    await db.query(
      `INSERT INTO events (created_ms, event_code, severity, category, entity_id, description, details, peripheral_icon, asset_key, asset_name, peripheral_asset_id)
       SELECT $1::bigint - i * $2::bigint / $3::bigint, $4, 6, 'USB', 'DESKTOP-' || (i % 500), 'New USB peripheral detected',
         'Kingston DataTraveler 3.0 (VID 0951, PID 1666, serial ' || i || ')', 3, 'agent-' || (i % 500), 'DESKTOP-' || (i % 500), 'USB\\VID_0951&PID_1666\\' || i
       FROM generate_series(1, $3::bigint) i`,
      [now, days * 86_400_000, Number(process.env.BENCH_YEAR_EVENTS ?? 100_000), eventCodes.peripheralNew.code],
    )
    await db.query('ANALYZE events')
    const risk = pgRiskRaiser(db)
    const codes = await risk.codes()
    const riskyCode = eventCodes.unapprovedOnArmed.code
    const byId = pgEventsRepo(db, {
      recorded: async (ids, recorded) => {
        const risky = ids.filter((_, i) => codes.has(recorded[i].event.code))
        if (risky.length) await risk.raise(risky)
      },
    })
    const given = pgEventsRepo(db, { recorded: raiseRecorded(risk, codes) })
    const checkIns = (): EventBatch[] =>
      Array.from({ length: 32 }, () => ({
        createdMs: Date.now(),
        events: Array.from({ length: 3 }, () => {
          const e = event(n++)
          return n % 7 === 0 ? { ...e, code: riskyCode } : e
        }),
      }))
    const year: Record<string, unknown>[] = []
    for (const [name, recorder] of [
      ['risky events read back by id', byId],
      ['risky events given (the server)', given],
      ['risky events read back by id', byId],
      ['risky events given (the server)', given],
    ] as const) {
      await db.uow.run(() => recorder.recordMany(checkIns()))
      const end = performance.now() + SECONDS * 1000
      let units = 0
      const started = performance.now()
      while (performance.now() < end) {
        await db.uow.run(() => recorder.recordMany(checkIns()))
        units++
      }
      const ms = performance.now() - started
      year.push({ [`${days} day partitions, 32 x 3 events a unit`]: name, 'ev/s': Math.round((units * 96) / (ms / 1000)), 'ms a unit': +(ms / units).toFixed(2) })
    }
    console.table(year)

    // Reads by id over the same year: a feed page of 100 after an id near the newest (a SIEM
    // poller keeping up) and after an id half a year back (one catching up), with its count,
    // and the alarm queue's slice of 1,000 after its mark. As they were (every day's partition
    // planned and probed) against the stores now (the days whose ids meet the range, migration 016).
    const stores = pgRecordStores(db, { countBudgetMs: 600_000 })
    const newest = await stores.events.lastId()
    const oldest = (await db.value<number>('SELECT min(id) FROM events'))!
    const cols = EVENT_FIELDS.map((c) => `e.${c}`).join(', ')
    const feedBefore = (from: number) =>
      Promise.all([
        db.query(`SELECT * FROM (SELECT ${cols} FROM events e WHERE e.id BETWEEN $1 AND $2 ORDER BY e.id ASC LIMIT 100 OFFSET 0) e ORDER BY e.id ASC`, [from, Number.MAX_SAFE_INTEGER]),
        db.query(`SELECT (SELECT n FROM record_counts WHERE name = 'events') AS total, (SELECT count(*) FROM events e WHERE e.id BETWEEN $1 AND $2) AS filtered`, [from, Number.MAX_SAFE_INTEGER]),
      ])
    const feedNow = (from: number) => stores.events.pageRows(eventFilter({ FromEventId: String(from) }), { field: 'eventID', direction: 'asc' }, 100, 0, true)
    const sliceBefore = (mark: number) => db.query('SELECT id, severity, category, alarm_destination_id FROM events ev WHERE ev.id > $1 AND ev.id <= $2 ORDER BY ev.id LIMIT 1000', [mark, newest])
    // As alarm_queue_events (migration 016) reads: the days first, then the events in them.
    const sliceNow = async (mark: number) => {
      const d = await db.one<{ from_ms: number; to_ms: number }>(`SELECT min(day_ms) AS from_ms, max(day_ms) + 86400000 AS to_ms FROM record_days WHERE name = 'events' AND high > $1 AND low <= $2`, [
        mark,
        newest,
      ])
      return db.query('SELECT id, severity, category, alarm_destination_id FROM events ev WHERE ev.id > $1 AND ev.id <= $2 AND ev.created_ms >= $3 AND ev.created_ms < $4 ORDER BY ev.id LIMIT 1000', [
        mark,
        newest,
        d?.from_ms,
        d?.to_ms,
      ])
    }
    const median = async (run: () => Promise<unknown>) => {
      const times: number[] = []
      for (let i = 0; i < 15; i++) {
        const t0 = performance.now()
        await run()
        times.push(performance.now() - t0)
      }
      return +times.sort((a, b) => a - b)[7].toFixed(2)
    }
    const head = newest - 150
    const middle = oldest + Math.floor((newest - oldest) / 2)
    const reads: Record<string, unknown>[] = []
    for (const [what, before, now] of [
      ['feed page of 100 (and its count) near the newest id', () => feedBefore(head), () => feedNow(head)],
      ['feed page of 100 (and its count) half a year back', () => feedBefore(middle), () => feedNow(middle)],
      ['alarm queue slice of 1,000 near the newest id', () => sliceBefore(newest - 1500), () => sliceNow(newest - 1500)],
    ] as const) {
      reads.push({ [`${days} day partitions, median of 15`]: what, 'every day (ms)': await median(before), 'days meeting the ids (ms)': await median(now) })
    }
    console.table(reads)
  } finally {
    await db.close()
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
  }
}

await main()
