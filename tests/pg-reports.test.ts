// Reports on PostgreSQL (db/postgres/reports.ts) answer as on SQLite (db/reports.ts): the
// same operations on both, every answer compared (definitions, schedules, the run
// lifecycle, mail retries, the reads of a report's content over a seeded fleet). Then
// what only PostgreSQL has: the runs' files in the database, and two schedulers on two
// pools queuing one due time exactly once.
import { Readable } from 'node:stream'
import t, { type Test } from 'tap'
import { agentTexts } from '../db/agent-texts.js'
import { agentSearch } from '../db/filters.js'
import type { AgentFilter, PeripheralFilter } from '../lib/agents/ports.js'
import { connectPostgres } from '../db/postgres/index.js'
import { FILE_PART_BYTES, pgReportsRepo } from '../db/postgres/reports.js'
import { reportsRepo } from '../db/reports.js'
import type { ReportInsert, ReportRow } from '../lib/reports/ports.js'
import { ReportScheduler, type SchedulerDeps } from '../lib/reports/index.js'
import { tempDb } from './helpers.js'
import { copyTables, ensureForeignTables, FLEET_TABLES, seedFleet } from './pg-fleet.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const NOW = Date.UTC(2025, 5, 1, 12)
const DAY = 86_400_000
const HOUR = 3_600_000

const report = (id: string, name: string, partial: Partial<ReportInsert> = {}): ReportInsert => ({
  id,
  name,
  description: null,
  type: 'AgentsInventory',
  format: 'CSV',
  filters: '{}',
  schedule: JSON.stringify({ frequency: 'daily', timeOfDay: '06:00', date: null, dayOfWeek: null, dayOfMonth: null, timeZone: 'UTC' }),
  recipients: '[]',
  sender: null,
  is_active: 1,
  owner: 'admin',
  created_ms: NOW,
  updated_ms: NOW,
  next_run_ms: NOW + HOUR,
  retention_files: 30,
  retention_bytes: 536870912,
  ...partial,
})

const run = (id: string, reportId: string, dueMs: number, trigger: 'schedule' | 'request' | 'catchUp' = 'schedule') => ({
  id,
  report_id: reportId,
  trigger,
  requested_by: trigger === 'request' ? 'admin' : null,
  due_ms: dueMs,
  queued_ms: dueMs + 5,
  definition: '{}',
  format: 'CSV' as const,
})

const collect = async <T>(rows: AsyncIterable<T>) => {
  const out: T[] = []
  for await (const r of rows) out.push(r)
  return out
}

t.test('reports: the same answers on PostgreSQL as on SQLite', { skip: noPostgres }, async (t) => {
  const { db } = tempDb(t)
  const pg = await pgTestDatabase(t)
  await ensureForeignTables(pg)
  const sqlite = reportsRepo(db, agentSearch(db, agentTexts(db)))
  const postgres = pgReportsRepo(pg)
  type Repo = typeof postgres | typeof sqlite
  // The subtest that compares (each sets it).
  let current: Test = t
  /** Applies `fn` to both; answers SQLite's answer after checking PostgreSQL's is the same. */
  const both = async <T>(fn: (r: Repo) => T, what?: string) => {
    const [a, b] = [await fn(postgres), await fn(sqlite)]
    current.same(a, b, what)
    return b
  }

  await t.test('definitions', async (t) => {
    current = t
    await both((r) => r.count(), 'none')
    await both((r) => r.all())
    // Inserted out of name order; names differing in case only from others' keys.
    for (const [id, name, partial] of [
      ['r3', 'Weekly agents', { next_run_ms: NOW - HOUR }],
      ['r1', 'alpha', { next_run_ms: NOW - HOUR }],
      ['r2', 'Beta', { next_run_ms: NOW - 2 * HOUR }],
      ['r4', 'Inactive', { is_active: 0, next_run_ms: NOW - 3 * HOUR }],
      ['r5', 'On request', { schedule: null, next_run_ms: null }],
    ] as const)
      await both(async (r) => (await r.insert(report(id, name, partial))).changes)
    await both((r) => r.count())
    await both((r) => r.all())
    await both((r) => r.byId('r1'))
    await both((r) => r.byId('absent'))
    await both((r) => r.byName('  BETA '), 'by name: trimmed, without case')
    await both((r) => r.byName('gamma'))
    await both((r) => r.update('r2', { name: 'Gamma', description: 'changed', updated_ms: NOW + 1, recipients: '["a@example.com"]' }))
    await both((r) => r.update('r2', {}), 'nothing to change')
    await both((r) => r.update('absent', { description: 'x' }))
    await both((r) => r.byName('gamma'))
    await both((r) => r.byName('beta'))
    await both((r) => r.all())
  })

  await t.test('a duplicate name (whatever its case) is refused by both', async (t) => {
    t.throws(() => sqlite.insert(report('dup', 'ALPHA')))
    await t.rejects(postgres.insert(report('dup', 'ALPHA')), { code: 'duplicate-key' })
  })

  await t.test('schedules: due reports (ties by id), advancing a due time once, the earliest', async (t) => {
    current = t
    await both((r) => r.due(NOW))
    await both((r) => r.due(NOW - 90 * 60_000))
    await both((r) => r.earliestDue(), 'inactive reports do not count')
    await both((r) => r.advance('r1', NOW - HOUR, NOW + DAY), 'moved from the value read')
    await both((r) => r.advance('r1', NOW - HOUR, NOW + 2 * DAY), 'not again: it moved')
    await both((r) => r.advance('absent', NOW, NOW))
    await both((r) => r.advance('r3', NOW - HOUR, null), 'off the schedule')
    await both((r) => r.due(NOW))
    await both((r) => r.earliestDue())
  })

  await t.test('the run lifecycle', async (t) => {
    current = t
    await both((r) => r.lastRuns())
    await both((r) => r.queued(10))
    for (const [id, reportId, due, trigger] of [
      ['a1', 'r1', NOW - 3 * HOUR, 'schedule'],
      ['a2', 'r1', NOW - 2 * HOUR, 'catchUp'],
      ['b1', 'r2', NOW - 2 * HOUR, 'request'],
      ['a3', 'r1', NOW - HOUR, 'request'],
      ['c1', 'r3', NOW - HOUR, 'schedule'],
    ] as const)
      await both(async (r) => (await r.insertRun(run(id, reportId, due, trigger))).changes)
    await both((r) => r.queued(3))
    await both((r) => r.queued(100))
    await both((r) => r.openRunOf('r1'))
    await both((r) => r.openRunOf('r5'))
    await both((r) => r.start('a1', NOW))
    await both((r) => r.start('a1', NOW + 1), 'no longer queued')
    await both((r) => r.start('absent', NOW))
    await both((r) => r.start('b1', NOW))
    await both((r) => r.start('c1', NOW))
    await both((r) => r.requeue('c1'))
    await both((r) => r.requeue('c1'), 'no longer running')
    await both((r) => r.start('c1', NOW + 2))
    await both((r) =>
      r.succeed({
        id: 'a1',
        finished_ms: NOW + 10,
        file_name: 'alpha-20250601T120000Z.csv',
        file_path: 'reports/r1/a1.csv',
        size_bytes: 1234,
        row_count: 10,
        truncated: 0,
        email_status: 'pending',
        email_next_ms: NOW + 10,
        email_detail: null,
      }),
    )
    await both(
      (r) =>
        r.succeed({
          id: 'a1',
          finished_ms: NOW + 11,
          file_name: 'x',
          file_path: 'x',
          size_bytes: 1,
          row_count: 1,
          truncated: 1,
          email_status: 'none',
          email_next_ms: null,
          email_detail: null,
        }),
      'once only',
    )
    await both((r) => r.fail('b1', NOW + 20, 'x'.repeat(1500)), 'the reason cut at 1,000 characters')
    await both((r) => r.fail('b1', NOW + 21, 'again'))
    await both((r) => r.start('a2', NOW + 30))
    await both((r) => r.failInterrupted(NOW + 40, 'The server stopped.'), 'c1 and a2')
    await both((r) => r.failInterrupted(NOW + 41, 'again'))
    await both((r) => r.runById('a1'))
    await both((r) => r.runById('absent'))
    await both((r) => r.runsOf('r1', 2))
    await both((r) => r.runsOf('r1', 100))
    await both((r) => r.runsOf('absent', 10))
    await both((r) => r.lastRuns())
    await both((r) => r.lastRunOf('r1'))
    await both((r) => r.lastRunOf('r5'))
    await both((r) => r.openRunOf('r1'))
    await both((r) => r.health())
    await both((r) => r.failures())
  })

  await t.test('stored files, retention, pruning', async (t) => {
    current = t
    for (let i = 0; i < 6; i++) {
      const id = `f${i}`
      await both(async (r) => (await r.insertRun(run(id, 'r2', NOW + i * HOUR))).changes)
      await both((r) => r.start(id, NOW + i * HOUR))
      await both((r) =>
        r.succeed({
          id,
          finished_ms: NOW + i * HOUR + 1,
          file_name: `gamma-${i}.csv`,
          file_path: i === 2 ? null : `reports/r2/${id}.csv`,
          size_bytes: 100 * (i + 1),
          row_count: i,
          truncated: 0,
          email_status: 'none',
          email_next_ms: null,
          email_detail: null,
        }),
      )
    }
    await both((r) => r.storedFiles('r2'))
    await both((r) => r.newestFile('r2'))
    await both((r) => r.newestFile('r5'))
    await both((r) => r.fileDeleted('f5', NOW + DAY))
    await both((r) => r.fileDeleted('f5', NOW + DAY + 1), 'once')
    await both((r) => r.fileDeleted('absent', NOW))
    await both((r) => r.newestFile('r2'))
    await both((r) => r.fileDeleted('f0', NOW + DAY))
    await both((r) => r.pruneRuns('r2', 3), 'older records without a file go')
    await both((r) => r.runsOf('r2', 100))
    await both((r) => r.pruneRuns('r2', 0), 'keep nothing: nothing goes')
    await both((r) => r.pruneRuns('absent', 3))
    await both((r) => r.storedFiles('r2'))
  })

  await t.test('mail: due deliveries, retries with attempts, health and failures', async (t) => {
    current = t
    await both((r) => r.pendingMail(NOW, 10), 'not due yet')
    await both((r) => r.pendingMail(NOW + 10, 10))
    await both(async (r) => (await r.setMail({ id: 'a1', email_status: 'pending', email_detail: 'refused: 451', email_attempts: 1, email_next_ms: NOW + 60_000 })).changes)
    await both((r) => r.pendingMail(NOW + 10, 10), 'waiting for its retry')
    await both((r) => r.health(), 'one retrying')
    await both((r) => r.pendingMail(NOW + 60_000, 1))
    await both(async (r) => (await r.setMail({ id: 'a1', email_status: 'partial', email_detail: 'b@example.com refused', email_attempts: 2, email_next_ms: null })).changes)
    await both((r) => r.health())
    await both((r) => r.failures())
    await both(async (r) => (await r.setMail({ id: 'f4', email_status: 'failed', email_detail: 'no route', email_attempts: 5, email_next_ms: null })).changes)
    await both((r) => r.health())
    await both((r) => r.failures())
  })

  await t.test('removing a definition takes its runs', async (t) => {
    current = t
    await both((r) => r.remove('r1'))
    await both((r) => r.remove('r1'))
    await both((r) => r.runById('a1'))
    await both((r) => r.lastRuns())
    await both((r) => r.health())
    await both((r) => r.all())
  })

  await t.test('the reads of a report over a fleet', async (t) => {
    seedFleet(db, 250, 11)
    // Vendor and product texts, serials (the deviceID's last part) and audit records, which the fleet has not.
    db.exec(`INSERT INTO peripheral_texts (kind, text) VALUES ('vendor', 'kingston'), ('product', 'datatraveler'), ('vendor', 'logitech')`)
    db.exec(`UPDATE peripherals SET vendor_text_id = (SELECT id FROM peripheral_texts WHERE text = 'kingston'), product_text_id = (SELECT id FROM peripheral_texts WHERE text = 'datatraveler'),
      serial_number = 'SN' || id, device_id = 'USB\\VID_0951&PID_1666\\SN' || id WHERE vid = '0951'`)
    db.exec(`UPDATE peripherals SET vendor_text_id = (SELECT id FROM peripheral_texts WHERE text = 'logitech') WHERE vid = '046D'`)
    const audit = db.prepare(`INSERT INTO audit_trail (created_ms, severity, category, user_name, description, details, outcome, asset_key, asset_name)
      VALUES (?, ?, ?, ?, ?, '{}', ?, ?, ?)`)
    for (let i = 0; i < 1300; i++)
      audit.run(
        NOW - Math.floor(i / 3) * HOUR,
        i % 8,
        ['Users', 'Reports', 'Agents'][i % 3],
        i % 5 === 0 ? null : `user${i % 4}`,
        `did ${i}`,
        ['Succeeded', 'Failed', 'Refused'][i % 3],
        i % 2 ? `k${i % 9}` : null,
        `n${i}`,
      )
    await copyTables(db, pg, [...FLEET_TABLES, 'audit_trail'])
    t.ok((db.prepare('SELECT count(*) AS n FROM events').get() as { n: number }).n > 700)

    const ids = (db.prepare('SELECT id FROM agents ORDER BY host_identifier DESC, id').all() as { id: number }[]).map((r) => r.id)
    // Out of order, with ids of no agent, over several pages.
    const asked = [999_999, ...ids.slice(0, 120), -1, ...ids.slice(120).reverse()]
    t.same(await collect(postgres.agents(asked)), await collect(sqlite.agents(asked)), 'agents in the order asked')
    t.same(await collect(postgres.agents([])), [], 'no ids')

    const agentFilters: AgentFilter[] = [
      {},
      { hostIdentifier: 'alp' },
      { hostIdentifier: 'AL' },
      { uuid: '8000-0000000000A' },
      { ipAddress: '10.0.0.1' },
      { globalSearch: 'windows 1' },
      { globalSearch: 'lab' },
      { connectionStatus: ['Connected'], hasUnapprovedPeripherals: true },
      { operationalStatus: ['Armed'], licenseStatus: ['Activated', 'Expired'], runningMode: ['VDI'] },
      { hasVulnerablePeripherals: true },
      { hasKnownAttackTools: false, containsVulnerablePeripheralOrWLV: false },
      { lastUpdated: { from: NOW - 20_000, to: null } },
      { lastUpdated: { from: NOW - 40_000, to: NOW - 10_000 } },
      { severity: 6 },
      { osVersion: '11', version: '5.2' },
      { hashtags: '#LAB' },
      { hostIdentifier: 'nobody' },
    ]
    for (const f of agentFilters) t.same(await postgres.agentTotals(f), await sqlite.agentTotals(f), `agent totals ${JSON.stringify(f)}`)

    const peripheralFilters: [PeripheralFilter, { approved?: boolean; icons?: number[] }][] = [
      [{}, {}],
      [{ hostIdentifier: 'bravo' }, {}],
      [{ ipAddress: '10.0.0' }, { approved: true }],
      [{ hostUuid: '0000000000F' }, {}],
      [{ vendor: 'KING' }, {}],
      [{ productInfo: 'travel' }, { icons: [3, 7] }],
      [{ serialNumber: 'SN1' }, {}],
      [{ vid: '0951', pid: '1666' }, {}],
      [{ present: true, isUnapproved: true }, {}],
      [{ isVulnerable: true }, { approved: false }],
      [{ isAttackTool: true }, {}],
      [{ globalSearch: 'logi' }, {}],
      [{ globalSearch: 'old stick' }, {}],
      [{ globalSearch: '#vuln' }, {}],
      [{ globalSearch: 'charlie' }, {}],
      [{ globalSearch: 'vid_fe01' }, {}],
    ]
    for (const [f, extra] of peripheralFilters) {
      t.same(await postgres.peripheralTotals(f, extra), await sqlite.peripheralTotals(f, extra), `peripheral totals ${JSON.stringify([f, extra])}`)
      t.same(await collect(postgres.peripherals(asked, f, extra)), await collect(sqlite.peripherals(asked, f, extra)), `peripherals ${JSON.stringify([f, extra])}`)
    }

    const eventFilters = [
      { from: NOW - 40 * DAY, to: NOW + DAY },
      { from: NOW - 3 * DAY, to: NOW - DAY, maxSeverity: 4 },
      { from: NOW - 40 * DAY, to: NOW, categories: ['USB', 'Host'] },
      { from: NOW - 40 * DAY, to: NOW, source: '(10.0.0.1)' },
      { from: NOW - 40 * DAY, to: NOW, globalSearch: 'event 1' },
      { from: NOW - 40 * DAY, to: NOW, globalSearch: 'warn' },
      { from: NOW - 40 * DAY, to: NOW, globalSearch: 'name 3' },
      { from: NOW + DAY, to: NOW + 2 * DAY },
    ]
    for (const f of eventFilters) {
      t.same(await postgres.eventTotals(f), await sqlite.eventTotals(f), `event totals ${JSON.stringify(f)}`)
      t.same(await collect(postgres.events(f)), await collect(sqlite.events(f)), `events ${JSON.stringify(f)}`)
    }

    const auditFilters = [
      { from: NOW - 40 * DAY, to: NOW + DAY },
      { from: NOW - 10 * DAY, to: NOW - DAY, maxSeverity: 3, categories: ['Users', 'Agents'] },
      { from: NOW - 40 * DAY, to: NOW + DAY, user: 'USER1' },
      { from: NOW - 40 * DAY, to: NOW + DAY, outcomes: ['Failed', 'Refused'] },
      { from: NOW + DAY, to: NOW + 2 * DAY },
    ]
    for (const f of auditFilters) {
      t.same(await postgres.auditTotals(f), await sqlite.auditTotals(f), `audit totals ${JSON.stringify(f)}`)
      t.same(await collect(postgres.auditRecords(f)), await collect(sqlite.auditRecords(f)), `audit records ${JSON.stringify(f)}`)
    }
    t.equal((await collect(postgres.auditRecords(auditFilters[0]))).length, 1300, 'more than a page, with ties of times')
  })
})

t.test("PostgreSQL only: a run's file in the database", { skip: noPostgres }, async (t) => {
  const pg = await pgTestDatabase(t)
  const repo = pgReportsRepo(pg)
  await repo.insert(report('r1', 'files'))
  await repo.insertRun(run('x1', 'r1', NOW))
  await repo.insertRun(run('x2', 'r1', NOW + 1))

  // Two and a half parts, in chunks that do not line up with the parts.
  const size = Math.floor(FILE_PART_BYTES * 2.5)
  const content = Buffer.alloc(size)
  for (let i = 0; i < size; i++) content[i] = (i * 7919) & 255
  const chunks = Readable.from(Array.from({ length: Math.ceil(size / 65_521) }, (_, i) => content.subarray(i * 65_521, (i + 1) * 65_521)))
  t.equal(await repo.storeFile('x1', 'text/csv', chunks, NOW), true)
  t.same(await repo.fileOf('x1'), { media_type: 'text/csv', size_bytes: size, parts: 3 })
  const read = await collect(repo.fileContent('x1'))
  t.same(
    read.map((b) => b.length),
    [FILE_PART_BYTES, FILE_PART_BYTES, size - 2 * FILE_PART_BYTES],
  )
  t.ok(Buffer.concat(read).equals(content), 'the same bytes')
  t.ok((await repo.fileBytes('x1'))!.content.equals(content))

  t.equal(await repo.storeFile('x2', 'application/pdf', [Buffer.alloc(0)]), true, 'an empty file')
  t.same(await repo.fileOf('x2'), { media_type: 'application/pdf', size_bytes: 0, parts: 0 })
  t.same(await collect(repo.fileContent('x2')), [])
  t.equal(await repo.storeFile('x2', 'application/pdf', [Buffer.from('%PDF-1.7')]), true, 'stored again: replaced')
  t.same((await repo.fileBytes('x2'))!.content.toString(), '%PDF-1.7')

  t.equal(await repo.storeFile('absent', 'text/csv', [Buffer.from('a')]), false, 'no such run: nothing stored')
  t.equal(await repo.fileOf('absent'), undefined)
  t.equal(await repo.fileBytes('absent'), undefined)
  await t.rejects(collect(repo.fileContent('absent')), /no stored file/)

  await t.rejects(
    pg.uow.run(async () => {
      await repo.storeFile('x2', 'text/csv', [Buffer.from('half')])
      throw new Error('the unit failed')
    }),
    /the unit failed/,
  )
  t.same((await repo.fileBytes('x2'))!.content.toString(), '%PDF-1.7', "stored in the caller's unit: rolled back with it")

  // Removed while it is read: the read ends with an error, not with a short file.
  const reading = repo.fileContent('x1')
  await reading.next()
  t.equal(await repo.fileDeleted('x1', NOW + 1), true)
  t.equal(await repo.fileOf('x1'), undefined, 'the retention rule removes the content')
  t.equal(await pg.value("SELECT count(*) FROM report_file_parts WHERE run_id = 'x1'"), 0)
  await t.rejects(reading.next(), /removed while it was read/)

  t.equal(await repo.remove('r1'), true)
  t.equal(await pg.value('SELECT count(*) FROM report_files'), 0, "a deleted report's files go with it")
  t.equal(await pg.value('SELECT count(*) FROM report_file_parts'), 0)
})

t.test('PostgreSQL only: two schedulers on two pools queue each due time once', { skip: noPostgres }, async (t) => {
  const pg = await pgTestDatabase(t)
  const other = connectPostgres(pg.url, { max: 5 })
  t.teardown(() => other.close())
  const log = { info() {}, warn() {}, error() {}, debug() {} } as unknown as SchedulerDeps['log']
  const scheduler = (db: typeof pg) => new ReportScheduler({ reports: pgReportsRepo(db), uow: db.uow, log, dataDir: '/nonexistent', mailConfigured: () => false } as unknown as SchedulerDeps)
  const [a, b] = [scheduler(pg), scheduler(other)]
  const repo = pgReportsRepo(pg)
  const reports = 20
  for (let i = 0; i < reports; i++) await repo.insert(report(`r${i}`, `report ${i}`, { next_run_ms: NOW - HOUR }))

  // The scheduler's own step (queueDue: advance the due time, queue its run, in one unit),
  // by both at once, each from the due reports it read before the other queued anything.
  type Queue = { queueDue(r: ReportRow, now: number): Promise<string | null> }
  const [dueA, dueB] = await Promise.all([pgReportsRepo(pg).due(NOW), pgReportsRepo(other).due(NOW)])
  t.equal(dueA.length, reports)
  t.equal(dueB.length, reports)
  const queued = await Promise.all(dueA.flatMap((r, i) => [(a as unknown as Queue).queueDue(r, NOW), (b as unknown as Queue).queueDue(dueB[i], NOW)]))
  t.equal(queued.filter((id) => id !== null).length, reports, 'one run queued per report')
  t.same(await pg.query('SELECT report_id, count(*) AS n FROM report_runs GROUP BY report_id HAVING count(*) <> 1'), [], 'never two runs of one due time')
  t.equal(await pg.value('SELECT count(DISTINCT next_run_ms) FROM reports'), 1, 'every report moved to its next due time')
  t.same(await repo.due(NOW), [], 'nothing due any more')

  // A run queued once is started by one node only.
  const [run1] = await repo.queued(1)
  const started = await Promise.all([pgReportsRepo(pg).start(run1.id, NOW), pgReportsRepo(other).start(run1.id, NOW)])
  t.same(started.sort(), [false, true])
})
