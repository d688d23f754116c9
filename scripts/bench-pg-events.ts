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
  } finally {
    await db.close()
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
  }
}

await main()
