// Pins the retention job (lib/retention/job.ts): old events and audit records are archived and
// then deleted, with the query index's counts exactly those of a rebuild (SQLite's index); on
// PostgreSQL whole past days go by dropping their partitions once archived; nothing an alarm
// destination still waits for is deleted; only the job can delete audit records, and each
// run is audited; the other kinds that grow are pruned by their own settings.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import pg from 'pg'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, sqliteOnly, testBackend } from './helpers.js'
import { addEvents, expectedEvents, sortEvents } from './fixtures/events.js'
import type { EventRow } from '../lib/events/ports.js'
import type { AuditRecord } from '../lib/platform/ports.js'
import { eventView } from '../lib/events/views.js'
import { idsOf } from '../db/event-engine/event-doc-ids.js'
import { dirBytes, runHealthChecks } from '../lib/health.js'
import { loadConfig } from '../lib/config.js'
import { addAuditRecords, indexEvents, query, queryColumn, queryValue } from './seed.js'

const DAY = 86_400_000
const NOW = Date.UTC(2026, 5, 30, 12)

/** The query index's counts, as a rebuild from the rows would make them (time spans aside). */
function counts(app: FastifyInstance) {
  app.repos.eventQueries.indexer.catchUp('events')
  app.repos.eventQueries.indexer.catchUp('audit_trail')
  const q = (sql: string) => JSON.stringify(app.db.prepare(sql).raw().all())
  return {
    eventRollup: q('SELECT level, block, kind, n FROM event_rollup WHERE n > 0 ORDER BY 1, 2, 3'),
    auditRollup: q('SELECT level, block, kind, n FROM audit_rollup WHERE n > 0 ORDER BY 1, 2, 3'),
    sourceIds: q('SELECT * FROM event_source_ids ORDER BY 1, 2, 3'),
    kindIds: q('SELECT * FROM event_kind_ids ORDER BY 1, 2, 3'),
    sources: q('SELECT id, n FROM event_sources WHERE n > 0 ORDER BY id'),
    docs: q('SELECT id, n FROM event_docs WHERE n > 0 ORDER BY id'),
    // The document of each event (event_doc_ids), however its stretches are cut.
    docIds: JSON.stringify(
      (app.db.prepare('SELECT lo, docs FROM event_doc_ids ORDER BY hi').all() as { lo: number; docs: Buffer }[]).flatMap((s) =>
        [...idsOf(s.docs)].map((d, i) => [s.lo + i, d]).filter(([, d]) => d !== 0),
      ),
    ),
  }
}

function rebuilt(app: FastifyInstance) {
  app.db.prepare('UPDATE record_index_state SET stale = 1').run()
  const indexer = app.repos.eventQueries.indexer
  indexer.catchUp('events')
  indexer.catchUp('audit_trail')
  return counts(app)
}

/** SQLite's query index keeps counts exactly those of a rebuild; PostgreSQL counts from its tables (nothing kept to check). */
function indexExact(t: { same: (a: unknown, b: unknown, m: string) => unknown }, app: FastifyInstance) {
  if (testBackend === 'sqlite') t.same(counts(app), rebuilt(app), 'counts are those of a rebuild')
}

/** PostgreSQL's day partitions of `table` (YYYYMMDD), oldest first. */
const partitionDays = async (app: FastifyInstance, table: 'events' | 'audit_trail') =>
  (
    await queryColumn<string>(
      app,
      `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = ?::regclass AND c.relname ~ ('^' || ? || '_p[0-9]{8}$') ORDER BY c.relname`,
      table,
      table,
    )
  ).map((name) => name.slice(-8))
const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')

/** Audit records written as the audit store writes them; answers their ids, in the order given. */
async function addAudits(app: FastifyInstance, records: AuditRecord[]): Promise<number[]> {
  const from = await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')
  await addAuditRecords(app, records)
  const ids = await query<{ id: number; description: string }>(app, 'SELECT id, description FROM audit_trail WHERE id > ? ORDER BY id', from)
  const byText = new Map(ids.map((r) => [r.description, r.id]))
  return records.map((r) => byText.get(r.description)!)
}

const change = (createdMs: number, description: string, user = 'admin', sourceIp = '127.0.0.1'): AuditRecord => ({
  createdMs,
  severity: 5,
  category: 'Users',
  user,
  sourceIp,
  description,
  details: '{}',
  operationId: 'updateUser',
  outcome: 'Succeeded',
})

function readArchive(file: string): Record<string, any>[] {
  return zlib
    .gunzipSync(fs.readFileSync(file))
    .toString('utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
}

async function answers(t: Parameters<Parameters<typeof t.test>[1]>[0], app: FastifyInstance, token: string, rows: EventRow[], label: string) {
  // Text filters over a time range that the prune cuts: counts kept from before must not answer after.
  const range = { FromDate: new Date(NOW - 60 * DAY).toISOString(), ToDate: new Date(NOW - 10 * DAY).toISOString() }
  for (const q of [
    {},
    { MinimumSeverity: 'Warning' },
    { GlobalSearch: 'kingston' },
    { Source: 'nyc' },
    { FromDate: new Date(NOW - 45 * DAY).toISOString() },
    { Details: 'removed', ...range },
    { Source: 'nyc', ...range },
  ]) {
    const res = await call(app, token, { url: `/prime/webui/Events/GetEvents?${new URLSearchParams({ ...q, PageSize: '50' })}` })
    const want = sortEvents(expectedEvents(rows, q))
    t.same(
      { total: res.json().recordsTotal, filtered: res.json().recordsFiltered, ids: res.json().data.map((e: { eventID: number }) => e.eventID) },
      { total: rows.length, filtered: want.length, ids: want.slice(0, 50).map((e) => e.id) },
      `${label}: ${JSON.stringify(q)}`,
    )
  }
}

t.test('old events are archived, then deleted; the index stays exact; the outbox holds them back', async (t) => {
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '30', PRIME_RETENTION_AUDIT_DAYS: '30' })
  const token = await login(app)
  // 90 days of events, with ids that jump across blocks of the index on the way.
  const rows = await addEvents(app, 3000, { now: NOW, days: 90, jumps: [500, 1700] })
  indexEvents(app)
  await answers(t, app, token, rows, 'before')
  const cutoff = NOW - 30 * DAY
  const old = rows.filter((r) => r.created_ms < cutoff)
  t.ok(old.length > 1500, `${old.length} events are past their retention`)

  if (testBackend === 'sqlite') {
    // Events not queued yet for a destination that takes them may be owed to it: none goes.
    // The delivery loop may have passed over them already while no destination took them
    // (the requests above let it run): the queue mark is set back, with the destination, at once.
    app.db.transaction(() => {
      app.db.prepare('UPDATE alarm_events_queued SET up_to = 0 WHERE id = 1').run()
      app.db.prepare(`INSERT INTO alarm_destinations (id, name, name_key, type, min_severity, settings, created_ms, updated_ms) VALUES ('owed', 'owed', 'owed', 'syslog', 7, '{}', 1, 1)`).run()
    })()
    t.equal((await app.retention.run(NOW)).events.deleted, 0, 'nothing deleted before their deliveries are queued')
    t.equal(await queryValue(app, 'SELECT count(*) FROM events'), rows.length)
    // Gone before they were queued: owed to nobody (with what the loop may have queued meanwhile).
    await query(app, `DELETE FROM alarm_destinations WHERE id = 'owed'`)
    await query(app, `DELETE FROM alarm_outbox WHERE destination_id = 'owed'`)
    await query(app, 'UPDATE alarm_events_queued SET up_to = (SELECT max(id) FROM events) WHERE id = 1')
  } else {
    // PostgreSQL's delivery loop has passed over the events no destination took when they
    // were stored (its queue mark is at the last one): a destination made since is owed none.
    t.equal(await queryValue(app, 'SELECT up_to FROM alarm_events_queued WHERE id = 1'), rows.at(-1)!.id, 'the queue mark is past every event')
  }

  // A destination still waits for an old event: nothing from it on goes.
  const held = old[Math.floor(old.length / 2)]
  await query(app, "INSERT INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms) VALUES ('dest', 'events', ?, 'd-1', ?)", held.id, NOW)
  const first = await app.retention.run(NOW)
  t.equal(first.events.deleted, old.filter((r) => r.id < held.id).length, 'deleted up to the event the outbox holds')
  t.equal(first.events.lastId, old.filter((r) => r.id < held.id).at(-1)!.id)
  t.ok(await queryValue(app, 'SELECT 1 FROM events WHERE id = ?', held.id), 'the held event is there')
  if (testBackend === 'postgres') {
    // The days before the held event's went whole: their partitions are dropped.
    const days = await partitionDays(app, 'events')
    t.equal(days[0], dayOf(held.created_ms), "the oldest partition left is the held event's day")
  }
  let kept = rows.filter((r) => r.id >= held.id)
  await answers(t, app, token, kept, 'after a held run')
  indexExact(t, app)

  await query(app, "UPDATE alarm_outbox SET status = 'delivered', done_ms = ? WHERE record_id = ?", NOW, held.id)
  const second = await app.retention.run(NOW)
  kept = rows.filter((r) => r.created_ms >= cutoff)
  t.equal(second.events.deleted, old.length - first.events.deleted, 'the rest went once delivered')
  t.equal(await queryValue(app, 'SELECT count(*) FROM events'), kept.length, 'exactly the events within 30 days are left')
  await answers(t, app, token, kept, 'after')
  indexExact(t, app)
  if (testBackend === 'sqlite') t.equal(app.db.prepare("SELECT stale FROM record_index_state WHERE name = 'events'").pluck().get(), 0)
  else
    t.ok(
      (await partitionDays(app, 'events')).every((d) => d >= dayOf(cutoff)),
      "no partition of a whole day past the rule is left: the cutoff's day went row by row",
    )
  // Answers again with the counts read back from their tables (another process's view).
  await answers(t, app, token, kept, 'after, counts reloaded')

  // Every deleted event is in the archive of its day, as the integration feed shows it.
  const dir = path.join(app.testConfig.dataDir, 'archive')
  const files = fs.readdirSync(dir).sort()
  t.ok(
    files.every((f) => /^events-\d{4}-\d{2}-\d{2}\.jsonl\.gz$/.test(f)),
    files.join(', '),
  )
  t.equal(fs.statSync(dir).mode & 0o777, 0o700)
  const archived = files.flatMap((f) => readArchive(path.join(dir, f)).map((e) => ({ ...e, file: f })))
  t.same(
    archived.map((e) => e.eventID).sort((a, b) => a - b),
    old.map((r) => r.id),
    'each deleted event archived once',
  )
  const byId = new Map(old.map((r) => [r.id, r]))
  for (const e of archived.slice(0, 20)) {
    const { file, ...item } = e
    t.same(item, eventView(byId.get(e.eventID)!), 'the feed fields')
    t.equal(file, `events-${item.creationTime.slice(0, 10)}.jsonl.gz`, 'in the file of its UTC day')
  }

  const runs = await query<{ description: string; category: string }>(app, "SELECT * FROM audit_trail WHERE description LIKE 'Retention:%' ORDER BY id")
  t.equal(runs.length, 2, 'one audit record per run')
  t.match(runs[1], { category: 'System', description: new RegExp(`^Retention: deleted ${second.events.deleted} events older than 30 days`) })

  const quiet = await app.retention.run(NOW)
  t.equal(quiet.events.deleted, 0)
  t.equal(await queryValue(app, "SELECT count(*) FROM audit_trail WHERE description LIKE 'Retention:%'"), 2, 'a run that deletes nothing writes no record')
})

t.test('audit records: only the job deletes them, only past their retention', async (t) => {
  const app = await build(t, { PRIME_RETENTION_AUDIT_DAYS: '10' })
  // The run is 50 days ahead: the records of the app's start are past their retention too.
  const runAt = Date.now() + 50 * DAY
  const ids = await addAudits(
    app,
    Array.from({ length: 300 }, (_, i) => change(Date.now() - (40 - i / 10) * DAY, `change ${i}`)),
  )
  const [young] = await addAudits(app, [change(runAt - DAY, 'change 999')])
  await t.rejects(query(app, 'DELETE FROM audit_trail WHERE id = ?', ids[0]), /immutable/, 'nobody else deletes audit records')
  if (testBackend === 'sqlite') {
    t.throws(
      () =>
        app.db.transaction(() => {
          app.repos.retention.openGate(runAt - 10 * DAY)
          app.db.prepare('DELETE FROM audit_trail WHERE id = ?').run(young)
        })(),
      /immutable/,
      'not even with the gate open, for a record within its retention',
    )
    t.equal(app.db.prepare('SELECT open FROM retention_gate').pluck().get(), 0)
  } else {
    // The gate is a setting of the transaction (prime.retention_before_ms): opened on a connection of the test's own.
    const client = new pg.Client({ connectionString: app.config.databaseUrl })
    await client.connect()
    t.teardown(() => client.end())
    await client.query('BEGIN')
    await client.query(`SELECT set_config('prime.retention_before_ms', $1, true)`, [String(runAt - 10 * DAY)])
    await t.rejects(client.query('DELETE FROM audit_trail WHERE id = $1', [young]), /immutable/, 'not even with the gate open, for a record within its retention')
    await client.query('ROLLBACK')
  }
  indexEvents(app)
  const older = await queryColumn<number>(app, 'SELECT id FROM audit_trail WHERE id < ? ORDER BY id', young)
  const run = await app.retention.run(runAt)
  t.equal(run.audit.deleted, older.length)
  t.same(await queryColumn(app, 'SELECT id FROM audit_trail WHERE id <= ?', young), [young], 'the old records went, the young one stays')
  if (testBackend === 'sqlite') t.equal(app.db.prepare('SELECT open FROM retention_gate').pluck().get(), 0, 'the gate is closed after the run')
  const archived = fs.readdirSync(path.join(app.testConfig.dataDir, 'archive')).flatMap((f) => readArchive(path.join(app.testConfig.dataDir, 'archive', f)))
  t.same(
    archived.map((a) => a.auditTrailID).sort((a, b) => a - b),
    older,
    'each one archived',
  )
  t.match(
    archived.find((a) => a.auditTrailID === ids[0]),
    { description: 'change 0', operationId: 'updateUser', assetReference: { type: 'Unknown' } },
  )
  indexExact(t, app)
  const token = await login(app)
  const feed = await call(app, token, { url: '/prime/webui/Events/GetAuditsIntegration?FromAuditTrailId=1&PageSize=10000' })
  const left = await queryValue<number>(app, 'SELECT count(*) FROM audit_trail')
  t.equal(feed.json().data.at(-1).auditTrailID, young, 'the feed answers from the oldest record kept')
  t.equal(feed.json().recordsTotal, left, 'its totals follow')
})

t.test('command history, notifications, read marks and agentless runs have their own retention', async (t) => {
  const app = await build(t, { PRIME_RETENTION_COMMANDS_DAYS: '5', PRIME_RETENTION_NOTIFICATIONS_DAYS: '5' })
  await query(app, "INSERT INTO agents (uuid, machine_id, enrolled_ms, host_identifier) VALUES ('a-1', 'm-1', 0, 'H1')")
  const agent = await queryValue<number>(app, "SELECT id FROM agents WHERE uuid = 'a-1'")
  const cmd = (status: string, createdMs: number, completedMs: number | null) =>
    query(app, "INSERT INTO agent_commands (agent_id, type, status, created_ms, created_by, completed_ms) VALUES (?, 'SetMode', ?, ?, 'admin', ?)", agent, status, createdMs, completedMs)
  await cmd('Succeeded', NOW - 9 * DAY, NOW - 9 * DAY)
  await cmd('Failed', NOW - 9 * DAY, NOW - 8 * DAY)
  await cmd('Succeeded', NOW - DAY, NOW - DAY)
  await cmd('Pending', NOW - 20 * DAY, null)
  await query(
    app,
    "INSERT INTO health_notifications (group_name, severity, title, description, first_ms, last_ms, resolved_ms, occurred_seq, change_seq) VALUES ('Database', 3, 't', 'd', ?, ?, ?, 1, 1), ('Reports', 3, 't', 'd', ?, ?, NULL, 2, 2)",
    NOW - 30 * DAY,
    NOW - 30 * DAY,
    NOW - 29 * DAY,
    NOW - 30 * DAY,
    NOW - 30 * DAY,
  )
  await query(app, "INSERT INTO notification_read_marks (user_key, risk_seq, health_seq) VALUES ('user:1', 1, 1), ('user:9999', 1, 1), ('token:gone', 1, 1)")
  const run = await app.retention.run(NOW)
  t.match(run.other, { commands: 2, healthNotifications: 1, readMarks: 2 })
  t.same(await queryColumn(app, 'SELECT status FROM agent_commands ORDER BY id'), ['Succeeded', 'Pending'], 'recent and open commands stay')
  t.same(await queryColumn(app, 'SELECT group_name FROM health_notifications'), ['Reports'], 'an open notification stays, whatever its age')
  t.same(await queryColumn(app, 'SELECT user_key FROM notification_read_marks'), ['user:1'], 'marks of accounts and tokens that are gone go')
})

t.test(
  'the disk-space check shows the data directory, its growth and the days until the disk is full',
  sqliteOnly("the DiskSpace check is of SQLite's file system (PostgreSQL's registry has none: tests/health-registry.test.ts)"),
  async (t) => {
    const app = await build(t)
    const disk = () => runHealthChecks(app).subsystems.find((s) => s.name === 'DiskSpace')!
    const first = disk()
    t.match(first.detail, /GiB free of .* in the data directory's file system; the data directory holds [\d.]+ (MiB|GiB); growth not known yet/)
    t.equal(app.db.prepare('SELECT count(*) FROM data_dir_samples').pluck().get(), 1, 'a sample is kept')
    t.equal(disk().status, first.status)
    t.equal(app.db.prepare('SELECT count(*) FROM data_dir_samples').pluck().get(), 1, 'at most one an hour')
    // A day ago the directory was smaller by a third of the free space: full in about 3 days.
    const free = fs.statfsSync(app.testConfig.dataDir).bavail * fs.statfsSync(app.testConfig.dataDir).bsize
    const now = dirBytes(app.testConfig.dataDir)
    app.db.prepare('DELETE FROM data_dir_samples').run()
    app.db.prepare('INSERT INTO data_dir_samples (sampled_ms, bytes, free_bytes) VALUES (?, ?, ?)').run(Date.now() - DAY, now - free / 3, free)
    const fast = disk()
    t.equal(fast.status, free < 100 * 1024 ** 2 ? 'Failed' : 'Warning', 'warned well before the disk fills')
    t.match(fast.detail, /growing [\d.]+ (MiB|GiB) a day over the last 1\.0 days; full in about [23]\.\d days at that rate/)
    await app.notifications.checkHealth()
    const open = app.db.prepare("SELECT title, description FROM health_notifications WHERE group_name = 'DiskSpace' AND resolved_ms IS NULL").get() as { description: string } | undefined
    t.ok(open, 'a health notification is raised')
    t.match(open!.description, /full in about/)
    app.db.prepare('UPDATE data_dir_samples SET bytes = ?').run(now)
    t.match(disk().detail, /growing 0\.0 MiB a day/, 'no growth, no end date')
  },
)

t.test('a bulk-loaded year in mixed id and time order: pruned by time to its rule; what the outbox waits for stays', async (t) => {
  // No run on the timer: its first, a minute after the start (this case may take longer on
  // a busy machine), would prune by today's date rather than NOW.
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '90', PRIME_RETENTION_AUDIT_DAYS: '90', PRIME_RETENTION_INTERVAL_SECONDS: '0' })
  const token = await login(app)
  // Young events first (low ids), then a year of older history loaded after them (high
  // ids, across blocks of the index), then more young ones.
  const young = await addEvents(app, 500, { now: NOW, days: 20, seed: 1 })
  const history = await addEvents(app, 3000, { now: NOW - 20 * DAY, days: 345, seed: 2, jumps: [1000] })
  const later = await addEvents(app, 200, { now: NOW, days: 1, seed: 3 })
  const rows = [...young, ...history, ...later]
  const cutoff = NOW - 90 * DAY
  const old = rows.filter((r) => r.created_ms < cutoff)
  t.ok(old.length > 2000 && old[0].id > young.at(-1)!.id, `${old.length} events past their retention, all after young ones in id order`)
  // Audit records the same way: the app's own (young) first, then old ones.
  const auditOld = await addAudits(
    app,
    Array.from({ length: 400 }, (_, i) => change(NOW - (300 - i / 2) * DAY, `old change ${i}`, 'bulk', '10.0.0.1')),
  )
  const [auditYoung] = await addAudits(app, [change(NOW - DAY, 'young change', 'bulk', '10.0.0.1')])
  indexEvents(app)
  const auditBefore = await queryColumn<number>(app, 'SELECT id FROM audit_trail WHERE created_ms < ? ORDER BY id', cutoff)

  // A destination still waits for an old event in the middle of the history, and for an old audit record.
  const held = old[Math.floor(old.length / 2)]
  const heldAudit = auditOld[300]
  const queue = (...values: unknown[]) => query(app, 'INSERT INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms) VALUES (?, ?, ?, ?, ?)', ...values)
  await queue('dest', 'events', held.id, 'd-1', NOW)
  await queue('dest', 'audit', heldAudit, 'd-2', NOW)
  const first = await app.retention.run(NOW)
  const goneFirst = old.filter((r) => r.id < held.id)
  t.equal(first.events.deleted, goneFirst.length, 'every event past its retention below the one the outbox holds')
  t.same(
    await queryColumn(app, 'SELECT id FROM events WHERE created_ms < ? ORDER BY id', cutoff),
    old.filter((r) => r.id >= held.id).map((r) => r.id),
    'old events from the held one on stay (the destination has not passed them)',
  )
  t.equal(await queryValue(app, 'SELECT count(*) FROM events WHERE created_ms >= ?', cutoff), rows.length - old.length, 'no event within its retention went')
  t.same(
    await queryColumn(app, "SELECT id FROM audit_trail WHERE created_ms < ? AND description LIKE 'old change%' ORDER BY id", cutoff),
    auditOld.filter((id) => id >= heldAudit),
    'audit records from the held one on stay',
  )
  t.ok(await queryValue(app, 'SELECT 1 FROM audit_trail WHERE id = ?', auditYoung), 'a young audit record stays')
  indexExact(t, app)
  await answers(
    t,
    app,
    token,
    rows.filter((r) => r.created_ms >= cutoff || r.id >= held.id),
    'after a held run',
  )

  await query(app, "UPDATE alarm_outbox SET status = 'delivered', done_ms = ?", NOW)
  const second = await app.retention.run(NOW)
  t.equal(first.events.deleted + second.events.deleted, old.length)
  t.equal(await queryValue(app, 'SELECT count(*) FROM events WHERE created_ms < ?', cutoff), 0, 'nothing older than the rule is left')
  t.equal(await queryValue(app, 'SELECT count(*) FROM audit_trail WHERE created_ms < ?', cutoff), 0, 'no audit record older than the rule either')
  t.equal(first.audit.deleted + second.audit.deleted, auditBefore.length)
  const kept = rows.filter((r) => r.created_ms >= cutoff)
  t.equal(await queryValue(app, 'SELECT count(*) FROM events'), kept.length)
  await answers(t, app, token, kept, 'after')
  indexExact(t, app)
  if (testBackend === 'postgres') {
    // Every whole day past the rule went as a partition, of both kinds.
    for (const table of ['events', 'audit_trail'] as const)
      t.ok(
        (await partitionDays(app, table)).every((d) => d >= dayOf(cutoff)),
        `${table}: no partition of a whole day past the rule`,
      )
  }
  await answers(t, app, token, kept, 'after, counts reloaded')

  // The archive holds exactly what was deleted: each event and audit record once, in the file of its day.
  const dir = path.join(app.testConfig.dataDir, 'archive')
  const files = fs.readdirSync(dir)
  const archived = (kind: string) => files.filter((f) => f.startsWith(`${kind}-`)).flatMap((f) => readArchive(path.join(dir, f)).map((e) => ({ ...e, file: f })))
  const events = archived('events')
  t.same(
    events.map((e) => e.eventID).sort((a, b) => a - b),
    old.map((r) => r.id),
    'each deleted event archived once',
  )
  t.ok(
    events.every((e) => e.file === `events-${e.creationTime.slice(0, 10)}.jsonl.gz`),
    'in the file of its UTC day',
  )
  t.same(
    archived('audit')
      .map((a) => a.auditTrailID)
      .sort((a, b) => a - b),
    auditBefore,
    'each deleted audit record archived once',
  )
})

t.test('two runs asked at once go one after the other: each record archived once, the second finds nothing left', async (t) => {
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: '30', PRIME_RETENTION_AUDIT_DAYS: '0', PRIME_RETENTION_INTERVAL_SECONDS: '0' })
  const rows = await addEvents(app, 400, { now: NOW, days: 60, seed: 7 })
  indexEvents(app)
  const old = rows.filter((r) => r.created_ms < NOW - 30 * DAY)
  const [a, b] = await Promise.all([app.retention.run(NOW), app.retention.run(NOW)])
  t.equal(a.events.deleted, old.length, 'the first run deleted every old event')
  t.equal(b.events.deleted, 0, 'the second, after it, found none')
  const dir = path.join(app.testConfig.dataDir, 'archive')
  const archived = fs.readdirSync(dir).flatMap((f) => readArchive(path.join(dir, f)).map((e) => e.eventID as number))
  t.same(
    archived.sort((x, y) => x - y),
    old.map((r) => r.id).sort((x, y) => x - y),
    'each old event archived once',
  )
})

t.test('PRIME_RETENTION_INTERVAL_SECONDS: 0 (no runs on a timer) or 10 to 86400', async (t) => {
  const base = { PRIME_DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'prime-ret-cfg-')) }
  t.teardown(() => fs.rmSync(base.PRIME_DATA_DIR, { recursive: true, force: true }))
  t.equal(loadConfig({ ...base, PRIME_RETENTION_INTERVAL_SECONDS: '0' }).retention.intervalSeconds, 0)
  t.equal(loadConfig({ ...base, PRIME_RETENTION_INTERVAL_SECONDS: '10' }).retention.intervalSeconds, 10)
  t.throws(() => loadConfig({ ...base, PRIME_RETENTION_INTERVAL_SECONDS: '5' }), /must be 0 \(no runs on a timer\) or from 10 to 86400, got "5"/)
})
