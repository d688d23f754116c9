// npm run pg-load copies a SQLite data dir into PostgreSQL with the tables' triggers off: what
// those triggers keep is set afterwards, the newest id of events and of the audit trail
// included (the feeds' horizon and the alarm queue's bound, migration 012), not only the totals.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { eventsRepo } from '../db/events.js'
import { connectPostgres, migratePostgres, pgMigrationsDir } from '../db/postgres/index.js'
import { loadIntoPostgres } from '../scripts/pg-load.js'
import { noPostgres, pgEmptyDatabaseUrl } from './pg.js'

t.test('the kept totals, newest ids and day spans of a loaded database are those of its rows, its indexes built on every partition', { skip: noPostgres }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-pg-load-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  const events = eventsRepo(db)
  const now = Date.now()
  db.transaction(() =>
    events.record(
      now,
      Array.from({ length: 25 }, (_, i) => ({ code: '0x110001', severity: 6, category: 'USB' as const, entityId: 'PC (10.0.0.1)', description: 'New USB peripheral detected', details: `e${i}` })),
    ),
  )()
  db.prepare("INSERT INTO audit_trail (created_ms, severity, category, user_name, description, details, outcome) VALUES (?, 5, 'Users', 'admin', 'changed', '{}', 'Succeeded')").run(now)
  const lite = db
    .prepare('SELECT (SELECT count(*) FROM events) AS events, (SELECT max(id) FROM events) AS top, (SELECT count(*) FROM audit_trail) AS audits, (SELECT max(id) FROM audit_trail) AS auditTop')
    .get() as Record<string, number>
  db.close()

  const url = await pgEmptyDatabaseUrl(t)
  const report = await loadIntoPostgres(dir, url, { replace: true, sample: 5, log: () => {} })
  t.same(report.mismatches, [], 'the copy is equal')
  const pg = connectPostgres(url, { max: 1 })
  t.teardown(() => pg.close())
  const kept = await pg.query<{ name: string; n: number; top: number }>('SELECT name, n, top FROM record_counts ORDER BY name')
  t.same(
    kept.map((r) => [r.name, Number(r.n), Number(r.top)]),
    [
      ['audit_trail', lite.audits, lite.auditTop],
      ['events', lite.events, lite.top],
    ],
    'totals and newest ids counted from the rows copied',
  )
  const spans = await pg.query<{ name: string; n: number; low: number; high: number }>('SELECT name, sum(n) AS n, min(low) AS low, max(high) AS high FROM record_days GROUP BY name ORDER BY name')
  t.same(
    spans.map((r) => [r.name, Number(r.n), Number(r.high)]),
    [
      ['audit_trail', lite.audits, lite.auditTop],
      ['events', lite.events, lite.top],
    ],
    "the days' spans of ids counted from the rows copied",
  )
  t.same(
    await pg.query(`SELECT c.relname AS name FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE NOT i.indisvalid ORDER BY 1`),
    [],
    'every index rebuilt after the copy is valid (a partitioned one on every partition)',
  )
  t.equal(
    await pg.value(
      `SELECT count(*) FROM pg_indexes WHERE tablename = (SELECT c.relname FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid WHERE h.inhparent = 'events'::regclass ORDER BY 1 DESC LIMIT 1)`,
    ),
    await pg.value(`SELECT count(*) FROM pg_indexes WHERE tablename = 'events'`),
    "a day's partition of events has every index of the table",
  )
})

t.test('migration 017 builds on every partition the indexes that an earlier copy left on the parent alone', { skip: noPostgres }, async (t) => {
  // The schema as before 017, then an index broken as the copy broke it.
  const before = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-pg-017-'))
  t.teardown(() => fs.rmSync(before, { recursive: true, force: true }))
  for (const f of fs.readdirSync(pgMigrationsDir).filter((f) => f < '017')) fs.copyFileSync(path.join(pgMigrationsDir, f), path.join(before, f))
  const pg = connectPostgres(await pgEmptyDatabaseUrl(t), { max: 1 })
  t.teardown(() => pg.close())
  const client = await pg.pool.connect()
  try {
    await migratePostgres(client, before)
    const def = (await client.query<{ def: string }>(`SELECT pg_get_indexdef('events_text'::regclass) AS def`)).rows[0].def
    t.match(def, / ON ONLY /, 'a partitioned index reads back ON ONLY')
    await client.query('DROP INDEX events_text')
    await client.query(def)
    const invalid = `SELECT count(*)::int AS n FROM pg_index WHERE indrelid = 'events'::regclass AND NOT indisvalid`
    t.equal((await client.query(invalid)).rows[0].n, 1, 'made again from it: invalid, on no partition')
    // Up to 017 (020 builds the text index per ended day instead).
    const through = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-pg-017-'))
    t.teardown(() => fs.rmSync(through, { recursive: true, force: true }))
    for (const f of fs.readdirSync(pgMigrationsDir).filter((f) => f < '018')) fs.copyFileSync(path.join(pgMigrationsDir, f), path.join(through, f))
    t.same((await migratePostgres(client, through)).applied, [17], '017 runs')
    t.equal((await client.query(invalid)).rows[0].n, 0, 'valid after 017')
    const onPartition = await client.query(
      `SELECT count(*)::int AS n FROM pg_inherits h JOIN pg_index i ON i.indrelid = h.inhrelid JOIN pg_class c ON c.oid = i.indexrelid
       WHERE h.inhparent = 'events'::regclass AND pg_get_indexdef(i.indexrelid) LIKE '%gin_trgm_ops%'`,
    )
    t.equal(onPartition.rows[0].n, Number((await client.query(`SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'events'::regclass`)).rows[0].n), 'on every partition')
  } finally {
    client.release()
  }
})
