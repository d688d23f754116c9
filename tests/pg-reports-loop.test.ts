// The report scheduler on PostgreSQL, end to end through the routes: a report created, a
// run requested and produced, its file downloaded (from this node and from another one on
// the same database) and mailed, kept in the database and never in a data directory; the
// retention rule removes a file's content from the database. Then what several nodes need:
// a run another live node holds is left alone, one whose node is gone is failed, a due
// e-mail is taken by one node only.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { connectPostgres } from '../db/postgres/index.js'
import { pgReportsRepo } from '../db/postgres/reports.js'
import type { ReportInsert } from '../lib/reports/ports.js'
import { build, call, login } from './helpers.js'
import { noPostgres, pgTestDatabase, pgTestDatabaseUrl } from './pg.js'
import { createReport, download, REPORTS, runNow, smtp, unzip } from './reports-support.js'

/** Every file under `dir`, relative to it. */
function filesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).flatMap((e) => (e.isFile() ? [path.relative(dir, path.join(e.parentPath, e.name))] : []))
}
const tempFilesOf = (runId: string) => fs.readdirSync(os.tmpdir()).filter((d) => d.startsWith('prime-report-') && fs.existsSync(path.join(os.tmpdir(), d, `${runId}.csv`)))

t.test('a report run on PostgreSQL: its file in the database, served by any node, mailed', { skip: noPostgres }, async (t) => {
  const server = await smtp(t)
  const url = await pgTestDatabaseUrl(t)
  const env = { PRIME_DATABASE_URL: url, PRIME_SMTP_URL: server.url, PRIME_SMTP_FROM: 'prime-reports@example.com' }
  const app = await build(t, env)
  t.equal(app.storage.backend, 'postgres')
  const token = await login(app)
  t.ok(
    app.loops.list().some((l) => l.name === 'report-scheduler' && l.running && !l.singleton),
    'the scheduler runs on PostgreSQL (any number of nodes at once)',
  )

  const report = await createReport(app, token, { name: 'Audit digest', type: 'auditTrailDigest', format: 'CSV', recipients: ['soc@example.com'] })
  const run = await runNow(app, token, report.id)
  t.match(run, { status: 'succeeded', fileName: /^Audit_digest-\d{8}T\d{6}Z\.csv$/, emailStatus: 'sent' })
  t.ok(run.rowCount > 0, 'the login is in the digest')

  const file = await download(app, token, report.id)
  t.equal(file.statusCode, 200, file.body)
  t.match(file.headers['content-type'], /^text\/csv/)
  t.match(file.headers['content-disposition'], run.fileName)
  t.match(file.body, /^"?auditTrailID"?,/)
  t.match(file.body, /LocalLogin|Login/, 'a row of the audit trail')
  t.equal(Number(file.headers['content-length'] ?? file.rawPayload.length), file.rawPayload.length)

  // Kept in the database, nowhere on disk.
  const pg = connectPostgres(url, { max: 2 })
  t.teardown(() => pg.close())
  t.match(await pg.one('SELECT media_type, size_bytes FROM report_files WHERE run_id = $1', [run.runId]), { media_type: 'text/csv', size_bytes: file.rawPayload.length })
  t.same(
    filesUnder(app.config.dataDir).filter((f) => f.startsWith('reports') || /\.(csv|pdf|part)$/.test(f)),
    [],
    'the data directory holds no report file',
  )
  t.same(tempFilesOf(run.runId), [], 'nor is the file the run wrote left in the temporary folder')

  // The e-mail's attachment is the file, read from the database.
  t.equal(server.messages.length, 1)
  const [attachment] = server.messages[0].attachments
  t.equal(attachment.filename, run.fileName)
  t.same(Buffer.from(attachment.content as ArrayBuffer), file.rawPayload)

  // The Reports health check reads the database.
  const health = await call(app, token, { method: 'GET', url: '/prime/webui/admin/SubsystemHealth' })
  t.match(
    health.json().subsystems.find((s: { name: string }) => s.name === 'Reports'),
    { status: 'Healthy', detail: '1 report(s), 1 active; latest runs and e-mails succeeded' },
  )

  // Another node on the same database serves it.
  const other = await build(t, env)
  const otherToken = await login(other)
  const there = await download(other, otherToken, report.id, run.runId)
  t.equal(there.statusCode, 200, there.body)
  t.same(there.rawPayload, file.rawPayload, 'the same bytes from the other node')
  const zip = await call(other, otherToken, { method: 'POST', url: `${REPORTS}/GetReportFileList`, payload: [{ reportId: report.id, fileId: run.runId }] })
  t.equal(zip.statusCode, 200, zip.body)
  t.same(
    unzip(zip.rawPayload).map((e) => [e.name, e.data]),
    [[run.fileName, file.rawPayload]],
    'and archives it',
  )

  // A lower retention removes the older file's content with its record.
  const second = await runNow(app, token, report.id)
  t.equal(second.status, 'succeeded')
  const edit = await call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { id: report.id, retention: { maxFiles: 1 } } })
  t.equal(edit.statusCode, 200, edit.body)
  t.same(
    (await pg.query('SELECT run_id FROM report_files')).map((r) => r.run_id),
    [second.runId],
    'only the newest file is stored',
  )
  t.equal(await pg.value('SELECT count(*) FROM report_file_parts WHERE run_id = $1', [run.runId]), 0)
  const gone = await download(app, token, report.id, run.runId)
  t.equal(gone.statusCode, 404)
  t.match(gone.json().detail, /removed by the retention rule/)

  // Deleting the report removes its files from the database.
  const removed = await call(app, token, { method: 'POST', url: `${REPORTS}/delete`, payload: [report.id] })
  t.equal(removed.statusCode, 200, removed.body)
  t.equal(await pg.value('SELECT count(*) FROM report_files'), 0)
  t.equal(await pg.value('SELECT count(*) FROM report_file_parts'), 0)
})

t.test('a node starting fails the runs no live node holds, and leaves the others running', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const first = await build(t, { PRIME_DATABASE_URL: url })
  const token = await login(first)
  const a = await createReport(first, token, { name: 'Left behind', type: 'auditTrailDigest', format: 'CSV' })
  const b = await createReport(first, token, { name: 'Held elsewhere', type: 'auditTrailDigest', format: 'CSV' })
  const pg = connectPostgres(url, { max: 2 })
  t.teardown(() => pg.close())
  const insert = "INSERT INTO report_runs (id, report_id, trigger, due_ms, queued_ms, started_ms, status, definition, format) VALUES ($1, $2, 'request', 1, 1, 1, 'running', '{}', 'CSV')"
  // One left running by a node that stopped (no lease), one that a live node holds.
  await pg.run(insert, ['00000000-0000-4000-8000-00000000000a', a.id])
  await pg.run(insert, ['00000000-0000-4000-8000-00000000000b', b.id])
  await pg.run("INSERT INTO leases (name, holder, fence, expires_at) VALUES ($1, 'elsewhere', 1, now() + interval '1 minute')", ['report-run:00000000-0000-4000-8000-00000000000b'])

  const second = await build(t, { PRIME_DATABASE_URL: url })
  await second.ready()
  const status = async (id: string) => pg.one('SELECT status, reason FROM report_runs WHERE id = $1', [id])
  t.match(await status('00000000-0000-4000-8000-00000000000a'), { status: 'failed', reason: /server stopped/ })
  t.match(await status('00000000-0000-4000-8000-00000000000b'), { status: 'running' }, 'held by a live node')
  const open = await call(second, await login(second), { method: 'POST', url: `${REPORTS}/RequestForRun`, payload: [b.id] })
  t.match(open.json(), { failed: 1, results: [{ code: 'conflict' }] }, 'its report still has a run in progress')
})

t.test('every report type runs on PostgreSQL, as PDF and as CSV', { skip: noPostgres }, async (t) => {
  const app = await build(t, { PRIME_DATABASE_URL: await pgTestDatabaseUrl(t) })
  const token = await login(app)
  for (const type of ['agentsInventory', 'peripheralsInventory', 'riskInsightsSummary', 'eventsDigest', 'auditTrailDigest']) {
    for (const format of ['PDF', 'CSV']) {
      const r = await createReport(app, token, { name: `${type} ${format}`, type, format })
      const run = await runNow(app, token, r.id)
      t.match(run, { status: 'succeeded' }, `${type} ${format}: ${run.reason ?? ''}`)
      const file = await download(app, token, r.id)
      t.equal(file.statusCode, 200)
      if (format === 'PDF') t.equal(file.rawPayload.subarray(0, 5).toString(), '%PDF-')
    }
  }
})

const NOW = Date.UTC(2025, 5, 1, 12)
const report = (id: string): ReportInsert => ({
  id,
  name: id,
  description: null,
  type: 'auditTrailDigest',
  format: 'CSV',
  filters: '{}',
  schedule: null,
  recipients: '[]',
  sender: null,
  is_active: 1,
  owner: 'admin',
  created_ms: NOW,
  updated_ms: NOW,
  next_run_ms: null,
  retention_files: 30,
  retention_bytes: 536870912,
})
const queuedRun = (id: string, reportId: string) => ({
  id,
  report_id: reportId,
  trigger: 'request' as const,
  requested_by: 'admin',
  due_ms: NOW,
  queued_ms: NOW,
  definition: '{}',
  format: 'CSV' as const,
})

t.test('leases on runs: renewed by their holder, lapsed when it is gone; a due e-mail taken once', { skip: noPostgres }, async (t) => {
  const pg = await pgTestDatabase(t)
  const one = pgReportsRepo(pg, undefined, 'node-1')
  const two = pgReportsRepo(pg, undefined, 'node-2')
  await one.insert(report('r1'))
  for (const id of ['x1', 'x2', 'x3']) await one.insertRun(queuedRun(id, 'r1'))
  t.same(await Promise.all([one.start('x1', NOW), two.start('x1', NOW)]).then((s) => s.sort()), [false, true], 'started by one node')
  const holderOf = async (id: string) => pg.value<string>('SELECT holder FROM leases WHERE name = $1', [`report-run:${id}`])
  const winner = (await holderOf('x1')) === 'node-1' ? one : two
  t.ok(await two.start('x2', NOW))
  t.equal(await holderOf('x2'), 'node-2')
  t.equal(await one.failOrphaned(NOW, 'gone'), 0, 'both runs are held')

  // node-2 stops renewing: its lease lapses; node-1 renews its own.
  await pg.run("UPDATE leases SET expires_at = now() - interval '1 second'")
  await winner.hold(['x1'])
  t.equal(await one.failOrphaned(NOW + 1, 'gone'), winner === one ? 1 : 2)
  t.match(await one.runById('x2'), { status: 'failed', reason: 'gone' })
  if (winner === one) t.match(await one.runById('x1'), { status: 'running' }, 'the renewed lease keeps its run')
  t.equal(await holderOf('x2'), undefined, 'the lapsed lease is let go')

  // A finished run's lease goes at the next sweep.
  if (winner === one) {
    t.ok(await one.fail('x1', NOW + 2, 'done'))
    await two.failOrphaned(NOW + 3, 'gone')
    t.equal(await holderOf('x1'), undefined)
  }

  // A due e-mail: of two nodes taking it, one does; the other reads it no longer due.
  t.ok(await one.start('x3', NOW))
  t.ok(
    await one.succeed({
      id: 'x3',
      finished_ms: NOW,
      file_name: 'f.csv',
      file_path: 'reports/r1/x3.csv',
      size_bytes: 1,
      row_count: 1,
      truncated: 0,
      email_status: 'pending',
      email_next_ms: NOW,
      email_detail: null,
    }),
  )
  const [due] = await two.pendingMail(NOW, 10)
  const taken = await Promise.all([one.claimMail('x3', due.email_next_ms!, NOW + 600_000), two.claimMail('x3', due.email_next_ms!, NOW + 600_000)])
  t.same(taken.sort(), [false, true])
  t.same(await one.pendingMail(NOW + 1, 10), [], 'taken: no longer due until the claim lapses')
  t.equal((await one.pendingMail(NOW + 600_000, 10)).length, 1, 'due again if its taker never records an outcome')
})
