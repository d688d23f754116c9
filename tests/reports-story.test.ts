// The reports story end to end, as a new Manager lives it: a weekly PDF agents report is
// created, run now, downloaded (and reads as a report), received by e-mail at a local
// SMTP server, two runs are downloaded as one archive, and once deactivated the
// scheduler skips it.
import t from 'tap'
import { build, call, login, userWithProfile } from './helpers.js'
import { queryColumn } from './seed.js'
import { addAgent, addPeripheral } from './fixtures/fleet.js'
import { download, REPORTS, smtp, unzip } from './reports-support.js'
import { pdfPages } from './fixtures/documents.js'

t.test('a weekly PDF agents report, from creation to the scheduler skipping it', async (t) => {
  const server = await smtp(t)
  const app = await build(t, { PRIME_SMTP_URL: server.url, PRIME_SMTP_FROM: 'Prime Reports <prime-reports@example.com>' })
  const admin = await login(app)
  const alice = await userWithProfile(app, admin, 'alice', 20)
  for (let i = 0; i < 40; i++) {
    const a = await addAgent(app, { host_identifier: `FIN-LT-${String(i).padStart(3, '0')}`, operational_status: i % 4 ? 'Armed' : 'Free' })
    await addPeripheral(app, a.id, { vid: '046D', pid: 'C077' })
  }

  // The form comes from ReportsArguments.
  const args = (await call(app, alice, { method: 'GET', url: `${REPORTS}/ReportsArguments` })).json()
  t.ok(args.types.some((x: { type: string }) => x.type === 'agentsInventory'))
  t.ok(args.frequencies.some((f: { frequency: string }) => f.frequency === 'weekly'))
  t.equal(args.smtpConfigured, true)

  const created = await call(app, alice, {
    method: 'POST',
    url: `${REPORTS}/create`,
    payload: {
      name: 'Weekly fleet',
      description: 'Every agent, for the Monday review.',
      type: 'agentsInventory',
      format: 'PDF',
      schedule: { frequency: 'weekly', dayOfWeek: 'Monday', timeOfDay: '07:30', timeZone: 'Europe/Paris' },
      recipients: ['secops@example.com'],
    },
  })
  t.equal(created.statusCode, 200)
  const report = created.json()
  t.match(report, { owner: 'alice', isActive: true, lastRun: null })
  const next = Date.parse(report.nextRunTime)
  t.ok(next > Date.now(), 'scheduled for next Monday')

  // Run now, then follow the run.
  const queued = await call(app, alice, { method: 'POST', url: `${REPORTS}/RequestForRun`, payload: [report.id] })
  t.match(queued.json(), { succeeded: 1, failed: 0 })
  const firstRun = queued.json().runIds[0]
  await app.reportScheduler.idle()
  const view = (await call(app, alice, { method: 'GET', url: `${REPORTS}/get/${report.id}` })).json()
  t.match(view.lastRun, { runId: firstRun, status: 'succeeded', fileId: firstRun })
  t.match(view.runs[0], { runId: firstRun, trigger: 'request', requestedBy: 'alice', status: 'succeeded', rowCount: 40, emailStatus: 'sent', mediaType: 'application/pdf' })

  // Download it: a report a person can hand on.
  const file = await download(app, alice, report.id, firstRun)
  t.equal(file.statusCode, 200)
  t.equal(file.headers['content-type'], 'application/pdf')
  t.match(file.headers['content-disposition'], /^attachment; filename="Weekly_fleet-\d{8}T\d{6}Z\.pdf"$/)
  const pages = pdfPages(file.rawPayload)
  t.equal(pages.length, 2)
  const cover = pages[0]
  for (const s of [
    'Weekly fleet',
    'Agents inventory report',
    'Every agent, for the Monday review.',
    'Every Monday at 07:30 (Europe/Paris)',
    'Requested by alice',
    '40 agents',
    'Armed',
    'FIN-LT-000',
    'Page 1 of 2',
  ])
    t.ok(cover.includes(s), `the cover says "${s}"`)
  t.ok(pages[1].includes('Agents, by host name (continued)') && pages[1].includes('Page 2 of 2'), 'the table goes on with its header')

  // It arrived by e-mail, attached.
  t.equal(server.messages.length, 1)
  const mail = server.messages[0]
  t.same(mail.envelopeTo, ['secops@example.com'])
  t.equal(mail.from.address, 'prime-reports@example.com')
  t.equal(mail.attachments[0].filename, view.runs[0].fileName)
  t.ok(Buffer.from(mail.attachments[0].content as ArrayBuffer).equals(file.rawPayload))

  // The scheduled run on Monday, then both files as one archive.
  t.equal((await app.reportScheduler.tick(next + 500)).length, 1)
  await app.reportScheduler.idle()
  const runs = (await call(app, alice, { method: 'GET', url: `${REPORTS}/get/${report.id}` })).json().runs
  t.equal(runs.length, 2)
  t.match(runs[0], { trigger: 'schedule', status: 'succeeded', dueTime: new Date(next).toISOString(), emailStatus: 'sent' })
  t.match(runs[0].fileName, /-\d{8}T0[56]3000Z\.pdf$/, 'named after its due time (07:30 Paris)')
  t.equal(server.messages.length, 2)
  const zip = await call(app, alice, { method: 'POST', url: `${REPORTS}/GetReportFileList`, payload: runs.map((r: { runId: string }) => ({ reportId: report.id, fileId: r.runId })) })
  t.equal(zip.statusCode, 200)
  const entries = unzip(zip.rawPayload)
  t.same(
    entries.map((e) => e.name),
    runs.map((r: { fileName: string }) => r.fileName),
  )
  t.ok(entries[1].data.equals(file.rawPayload), 'the first run, as downloaded before')
  t.equal(entries[0].data.subarray(0, 5).toString(), '%PDF-')

  // Deactivated, the scheduler skips it.
  const off = await call(app, alice, { method: 'POST', url: `${REPORTS}/deactivateReport`, payload: [report.id] })
  t.match(off.json(), { succeeded: 1 })
  t.same(await app.reportScheduler.tick(next + 7 * 86_400_000 + 500), [], 'next Monday: nothing queued')
  await app.reportScheduler.idle()
  const after = (await call(app, alice, { method: 'GET', url: `${REPORTS}/get/${report.id}` })).json()
  t.match(after, { isActive: false, nextRunTime: null })
  t.equal(after.runs.length, 2)
  t.equal(server.messages.length, 2, 'and nothing was mailed')

  // Every change left its audit record.
  const ops = await queryColumn(app, "SELECT operation_id FROM audit_trail WHERE category = 'Reports' AND user_name = 'alice' ORDER BY id")
  t.same(ops, ['createReport', 'requestReportRun', 'getReportFile', 'getReportFileList', 'deactivateReports'])
})
