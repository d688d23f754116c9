// The report service, the scheduler and the unit of work they run in, without Fastify's
// routes: plain context, the ports of a test app's database (SQLite or PostgreSQL), a
// mailer of the test's own, files in a temporary folder (SQLite) or the database (PostgreSQL).
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { buffer, text } from 'node:stream/consumers'
import t from 'tap'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import type { MailResult } from '../lib/mail.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { ReportScheduler } from '../lib/reports/index.js'
import { runFiles } from '../lib/reports/files.js'
import { reportService, TEST_MAILS_PER_MINUTE, type ReportServiceDeps } from '../lib/reports/service.js'
import { build } from './helpers.js'
import { portsOf, query, queryValue } from './seed.js'

type Sent = { from?: unknown; to?: unknown; subject?: unknown }

async function setup(t: Tap.Test, over: Partial<ReportServiceDeps> = {}, mail: { configured?: boolean; answer?: (m: Sent) => MailResult } = {}) {
  const app = await build(t, { PRIME_KEPT_LIST_ANSWERS: '0' })
  const ports = portsOf(app)
  const { uow } = app.storage
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-reports-service-'))
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  // The data directory's files on SQLite, the database's on PostgreSQL (as the app keeps them).
  const files = runFiles(app.storage.reportRuns, dataDir)
  let failAudit = false
  const record = async (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    await recordAudit({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }, ctx, entry)
  }
  const sent: Sent[] = []
  const mailer = {
    configured: () => mail.configured ?? true,
    from: () => 'prime@example.com',
    send: async (m: Sent): Promise<MailResult> => {
      sent.push(m)
      return mail.answer ? mail.answer(m) : { response: '250 2.0.0 Ok: queued', messageId: '<1@example.com>', accepted: [String(m.to)], rejected: [] }
    },
  }
  const kicks: number[] = []
  const aborted: string[] = []
  const store = ports.reports
  const deps: ReportServiceDeps = {
    reports: store,
    uow,
    audit: { record },
    dataDir,
    files,
    mail: { mailer, smtpUrl: 'smtp://mail.example.com:2525', publicUrl: null, dataDir, files },
    runs: { kick: () => kicks.push(1), abortRunsOf: (id) => aborted.push(id) },
    ...over,
  }
  const service = reportService(deps)
  // Only what the service wrote from here on.
  const mark = (await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')) ?? 0
  const auditRows = () => query(app, 'SELECT user_name, source_ip, request_id, description, outcome FROM audit_trail WHERE id > ? ORDER BY id', mark)
  const reportCount = async () => ({ n: await queryValue<number>(app, 'SELECT count(*) FROM reports') })
  const log = { warn: () => {}, error: () => {} }
  const scheduler = () =>
    new ReportScheduler({
      reports: store,
      uow,
      dataDir,
      files,
      sources: { reports: app.storage.reportRuns.reads, exports: ports.exports, insights: ports.insights, agentColumns: ['hostIdentifier'], peripheralColumns: [] },
      mailConfigured: () => mailer.configured(),
      log,
      leases: app.storage.reportRuns.leases,
      mail: deps.mail,
    })
  return { app, service, deps, dataDir, sent, kicks, aborted, auditRows, reportCount, scheduler, failAudit: (on: boolean) => (failAudit = on) }
}

const ctx = (over: Partial<Context> = {}) => systemContext({ actor: 'alice', profile: 30, sourceAddress: '192.0.2.7', requestId: 'req-1', ...over })
const daily = { frequency: 'daily', timeOfDay: '06:30', timeZone: 'UTC' }

t.test('a definition is created with its audit record, named after the context; a second of the same name is refused', async (t) => {
  const { service, auditRows, reportCount } = await setup(t)
  const view = await service.create(ctx(), 'alice', { name: ' Fleet ', type: 'agentsInventory', format: 'CSV', schedule: daily as never, recipients: ['soc@example.com'] })
  t.match(view, { name: 'Fleet', owner: 'alice', isActive: true, recipients: ['soc@example.com'], retention: { maxFiles: 30 } })
  t.ok(Date.parse(view.nextRunTime!) > Date.now(), 'an active schedule has its next due time')
  t.notOk(view.warnings, 'mail is configured: no warning')
  t.match(await auditRows(), [{ user_name: 'alice', source_ip: '192.0.2.7', request_id: 'req-1', description: 'Created report "Fleet" (agentsInventory, CSV)', outcome: 'Succeeded' }])
  await t.rejects(service.create(ctx(), 'bob', { name: 'FLEET', type: 'eventsDigest', format: 'PDF' }), { code: 'conflict', errors: [{ name: 'name' }] })
  t.equal((await reportCount()).n, 1)
  t.equal((await auditRows()).length, 1, 'nothing written for the refusal here (the request records it)')
})

t.test('a body with several faults is refused naming each, and nothing is written', async (t) => {
  const { service, reportCount, auditRows } = await setup(t)
  const err = await service.create(ctx(), 'alice', { name: '  ', type: 'agentsInventory', format: 'CSV', recipients: ['a@example.com', 'A@example.com'] }).catch((e) => e)
  t.equal(err.code, 'validation')
  t.same(
    err.errors.map((e: { name: string }) => e.name),
    ['name', 'recipients/1'],
  )
  t.equal((await reportCount()).n, 0)
  t.same(await auditRows(), [])
})

t.test('without outgoing mail a definition with recipients says the files are only stored', async (t) => {
  const { service } = await setup(t, {}, { configured: false })
  const view = await service.create(ctx(), 'alice', { name: 'Mailed', type: 'agentsInventory', format: 'CSV', recipients: ['soc@example.com'] })
  t.match(view.warnings, [/not configured/])
})

t.test('the unit of work rolls back: a change whose audit record fails is not kept', async (t) => {
  const { service, reportCount, failAudit, auditRows } = await setup(t)
  failAudit(true)
  await t.rejects(service.create(ctx(), 'alice', { name: 'Lost', type: 'agentsInventory', format: 'CSV' }), /audit trail is full/)
  t.equal((await reportCount()).n, 0, 'the definition went with it')
  failAudit(false)
  const r = await service.create(ctx(), 'alice', { name: 'Kept', type: 'agentsInventory', format: 'CSV' })
  failAudit(true)
  await t.rejects(service.update(ctx(), { id: r.id, name: 'Renamed' }), /audit trail is full/)
  await t.rejects(service.remove(ctx(), [r.id]), /audit trail is full/)
  failAudit(false)
  t.match((await service.get(r.id)).report, { name: 'Kept' }, 'neither the rename nor the delete stayed')
  t.equal((await auditRows()).length, 1)
})

t.test('update changes what is sent and records what differed; a stored filter foreign to a new type is named', async (t) => {
  const { service, auditRows } = await setup(t)
  const r = await service.create(ctx(), 'alice', { name: 'Fleet', type: 'agentsInventory', format: 'CSV', filters: { hostIdentifier: 'WS-' } })
  const after = await service.update(ctx(), { id: r.id.toUpperCase(), format: 'PDF', isActive: false })
  t.match(after, { id: r.id, format: 'PDF', isActive: false, nextRunTime: null, filters: { hostIdentifier: 'WS-' } })
  t.match((await auditRows()).at(-1), { description: 'Changed report "Fleet": format, isActive' })
  await t.rejects(service.update(ctx(), { id: r.id, type: 'auditTrailDigest' }), { code: 'validation', errors: [{ name: 'filters/hostIdentifier', reason: /a stored filter/ }] })
  await t.rejects(service.update(ctx(), { id: '00000000-0000-4000-8000-000000000000', name: 'x' }), { code: 'not-found' })
})

t.test('activate, deactivate, run now and delete answer per item, audit once, and reach the scheduler', async (t) => {
  const { app, service, auditRows, kicks, aborted, dataDir } = await setup(t)
  const a = await service.create(ctx(), 'alice', { name: 'A', type: 'agentsInventory', format: 'CSV', isActive: false })
  const b = await service.create(ctx(), 'alice', { name: 'B', type: 'agentsInventory', format: 'CSV', schedule: daily as never })
  const missing = '00000000-0000-4000-8000-000000000000'

  const on = await service.setActive(ctx(), [a.id, a.id.toUpperCase(), missing], true)
  t.match(on, { succeeded: 2, failed: 1, results: [{ id: a.id, status: 'done' }, { status: 'done' }, { id: missing, status: 'failed', code: 'not-found' }] })
  t.match((await auditRows()).at(-1), { description: 'Activated report(s) "A"', outcome: 'Succeeded' })
  t.equal((await service.get(a.id)).report.is_active, 1)

  const runs = await service.requestRuns(ctx(), 'alice', [a.id, b.id])
  t.match(runs, { succeeded: 2, failed: 0 })
  t.equal(runs.runIds.length, 2)
  t.equal(kicks.length, 1, 'the scheduler is told')
  t.match(await portsOf(app).reports.runById(runs.runIds[0]), { trigger: 'request', requested_by: 'alice', status: 'queued' })
  const again = await service.requestRuns(ctx(), 'alice', [a.id])
  t.match(again, { succeeded: 0, failed: 1, results: [{ code: 'conflict', reason: /already queued/, runId: null }] })
  t.match((await auditRows()).at(-1), { description: 'Requested no report run', outcome: 'Failed' })

  fs.mkdirSync(path.join(dataDir, 'reports', b.id), { recursive: true })
  fs.writeFileSync(path.join(dataDir, 'reports', b.id, 'x.csv'), 'a')
  const removed = await service.remove(ctx(), [b.id, missing])
  t.match(removed, { succeeded: 1, failed: 1 })
  t.same(aborted, [b.id], 'its running runs are stopped')
  if (app.storage.backend === 'sqlite') t.notOk(fs.existsSync(path.join(dataDir, 'reports', b.id)), 'its files are gone')
  t.match((await auditRows()).at(-1), { description: 'Deleted report(s) "B"' })
  t.same(
    (await service.list()).map((x) => [x.report.name, x.last?.status]),
    [['A', 'queued']],
  )
})

t.test('a run made by the scheduler is downloaded alone and in an archive, each download recorded', async (t) => {
  const { app, service, scheduler, auditRows } = await setup(t)
  const r = await service.create(ctx(), 'alice', { name: 'Fleet', type: 'agentsInventory', format: 'CSV' })
  const none = await service.file(ctx(), { reportId: r.id }, () => true).catch((e) => e)
  t.match(none, { code: 'not-found', errors: [{ name: 'fileId', reason: /has no stored file/ }] })

  const { runIds } = await service.requestRuns(ctx(), 'alice', [r.id])
  const s = scheduler()
  await s.start()
  await s.idle()
  await s.close()
  t.match(await portsOf(app).reports.runById(runIds[0]), { status: 'succeeded', row_count: 0, email_status: 'none' })

  await t.rejects(
    service.file(ctx(), { reportId: r.id }, () => false),
    { code: 'not-acceptable' },
  )
  const f = await service.file(ctx(), { reportId: r.id.toUpperCase(), fileId: runIds[0] }, (type) => type === 'text/csv')
  t.match(f, { mediaType: 'text/csv', fileName: /^Fleet-\d{8}T\d{6}Z\.csv$/, rowCount: 0, truncated: false })
  t.equal(await text(f.stream), 'hostIdentifier\r\n')
  t.match((await auditRows()).at(-1), { description: `Downloaded report file ${f.fileName} of "Fleet"` })

  const bad = await service.archive(ctx(), [{ reportId: r.id }, { reportId: '00000000-0000-4000-8000-000000000000' }]).catch((e) => e)
  t.match(bad, { code: 'not-found', errors: [{ name: 'items/1/reportId' }] })
  const zip = await service.archive(ctx(), [{ reportId: r.id }, { reportId: r.id, fileId: runIds[0] }])
  t.match(zip.fileName, /^reports-\d{8}T\d{6}Z\.zip$/)
  const bytes = await buffer(zip.stream)
  t.equal(bytes.readUInt32LE(0), 0x04034b50, 'a ZIP archive')
  t.match((await auditRows()).at(-1), { description: `Downloaded 1 report file(s) as ${zip.fileName}` })
})

t.test('test messages: refused without mail, at most ten a minute per caller, a refusal is a problem with its audit record', async (t) => {
  const off = await setup(t, {}, { configured: false })
  await t.rejects(off.service.testMail(ctx(), 'alice', 'soc@example.com', undefined), { code: 'mail-not-configured' })
  t.same(off.sent, [])

  const { service, sent, auditRows } = await setup(t)
  const now = Date.now()
  for (let i = 0; i < TEST_MAILS_PER_MINUTE; i++)
    t.match(await service.testMail(ctx(), 'alice', 'soc@example.com', undefined, now + i), { accepted: true, smtpServer: 'mail.example.com:2525', smtpCode: 250 })
  const limited = await service.testMail(ctx(), 'alice', 'soc@example.com', undefined, now + 30_000).catch((e) => e)
  t.match(limited, { code: 'rate-limited', headers: { 'retry-after': '30' } })
  t.equal(sent.length, TEST_MAILS_PER_MINUTE, 'the eleventh is not sent')
  t.match(await service.testMail(ctx({ actor: 'bob' }), 'bob', 'soc@example.com', 'ops@example.com', now + 30_000), { accepted: true, sender: 'ops@example.com' }, 'another caller has his own count')
  t.match(await service.testMail(ctx(), 'alice', 'soc@example.com', undefined, now + 60_001), { accepted: true }, 'a minute later alice may again')
  t.equal((await auditRows()).length, TEST_MAILS_PER_MINUTE + 2)

  const refusing = await setup(t, {}, { answer: () => ({ response: '250 Ok', messageId: '', accepted: [], rejected: ['soc@example.com'] }) })
  await t.rejects(refusing.service.testMail(ctx(), 'alice', 'soc@example.com', undefined), { code: 'mail-not-sent', message: /refused the recipient/ })
  t.match(await refusing.auditRows(), [{ description: 'Sent a test report e-mail to soc@example.com: not accepted', outcome: 'Failed' }])
})
