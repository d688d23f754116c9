// Pins what report runs store and how files come back: the content of each type in CSV
// and PDF (filters applied, formula-safe cells, cover, counts, page numbers, the PDF row
// cap), the download of one file (media type, name, Accept, 404 and 409), archives of
// several, the retention rule, and that deleting a report deletes its files.
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { agentView } from '../lib/agents/views.js'
import { build, call, login } from './helpers.js'
import { addAuditRecords, auditSince, lastAuditId, portsOf, query, queryColumn, recordEventIds } from './seed.js'
import { addAgent, addPeripheral } from './fixtures/fleet.js'
import { createReport, download, REPORTS, runNow, unzip } from './reports-support.js'
import { parseCsv, pdfPages } from './fixtures/documents.js'

const DAY = 86_400_000
const UNKNOWN = '0e8f7d6c-5b4a-4392-8170-6f5e4d3c2b1a'

/** The names of a report's stored files: in the data directory on SQLite, in the database on PostgreSQL. */
async function storedFiles(app: FastifyInstance, reportId: string): Promise<string[]> {
  if (app.storage.backend === 'sqlite') {
    const dir = path.join(app.config.dataDir, 'reports', reportId)
    return fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []
  }
  const runs = await queryColumn<string>(app, 'SELECT f.run_id FROM report_files f JOIN report_runs r ON r.id = f.run_id WHERE r.report_id = ?', reportId)
  return runs.map((id) => `${id}.csv`).sort()
}

async function fileOf(app: FastifyInstance, token: string, reportId: string, fileId: string): Promise<Buffer> {
  const res = await download(app, token, reportId, fileId)
  if (res.statusCode !== 200) throw new Error(`download: ${res.statusCode} ${res.body}`)
  return res.rawPayload
}

t.test('agents inventory: CSV and PDF', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await addAgent(app, { host_identifier: 'FIN-LT-001', operational_status: 'Armed', has_attack_tool: 1 })
  await addAgent(app, { host_identifier: '=HYPERLINK("http://evil.example","x")', operational_status: 'Armed' })
  await addAgent(app, { host_identifier: 'HR-PC-7', operational_status: 'Free' })
  const csv = await createReport(app, token, { name: 'Armed agents', type: 'agentsInventory', format: 'CSV', filters: { operationalStatus: 'Armed' } })
  const run = await runNow(app, token, csv.id)
  t.match(run, { status: 'succeeded', trigger: 'request', requestedBy: 'admin', rowCount: 2, truncated: false, mediaType: 'text/csv', emailStatus: 'none', fileId: run.runId })
  t.match(run.fileName, /^Armed_agents-\d{8}T\d{6}Z\.csv$/)
  const res = await download(app, token, csv.id, run.fileId)
  t.equal(res.headers['content-type'], 'text/csv; charset=utf-8')
  t.equal(res.headers['content-disposition'], `attachment; filename="${run.fileName}"`)
  t.equal(Number(res.headers['content-length']), run.sizeBytes)
  t.match(res.headers, { 'x-records-filtered': '2', 'x-export-truncated': 'false' }, 'how many records it holds, as every export says')
  const rows = parseCsv(res.body)
  t.same(rows[0], Object.keys(app.contract.spec.components.schemas.AgentViewResource.properties), 'the columns of the agent list')
  const host = rows[0].indexOf('hostIdentifier')
  t.same(
    rows
      .slice(1)
      .map((r) => r[host])
      .sort(),
    [`'=HYPERLINK("http://evil.example","x")`, 'FIN-LT-001'],
    'the filter applied; a formula is defused',
  )
  t.equal(rows[1][rows[0].indexOf('operationalStatus')], 'Armed')
  // Reports read only the columns the view shows: the view of such a row is the view of the whole row.
  const agents = await query<{ id: number; uuid: string }>(app, 'SELECT id, uuid FROM agents ORDER BY id DESC')
  const read: unknown[] = []
  for await (const row of app.storage.reportRuns.reads.agents(agents.map((a) => a.id))) read.push(agentView(row))
  const whole: unknown[] = []
  for (const a of agents) whole.push(agentView((await portsOf(app).agents.byUuid(a.uuid))!))
  t.same(read, whole, 'in the order asked')

  const pdf = await createReport(app, token, {
    name: 'All agents',
    type: 'agentsInventory',
    format: 'PDF',
    description: 'For the auditors.',
    schedule: { frequency: 'weekly', dayOfWeek: 'Monday', timeOfDay: '07:30', timeZone: 'Europe/Paris' },
  })
  const prun = await runNow(app, token, pdf.id)
  t.match(prun, { status: 'succeeded', rowCount: 3, mediaType: 'application/pdf' })
  const file = await download(app, token, pdf.id, prun.fileId)
  t.equal(file.headers['content-type'], 'application/pdf')
  t.match(file.headers, { 'x-records-filtered': '3', 'x-export-truncated': 'false' })
  t.equal(file.rawPayload.subarray(0, 5).toString(), '%PDF-')
  const pages = pdfPages(file.rawPayload)
  t.equal(pages.length, 1)
  const text = pages[0]
  for (const s of [
    'All agents',
    'Agents inventory report',
    'For the auditors.',
    'Filters',
    'None',
    'Every Monday at 07:30 (Europe/Paris)',
    'Generated',
    'Requested by admin',
    'Europe/Paris',
    'Agents, by host name',
    '3 agents',
    'FIN-LT-001',
    'HR-PC-7',
    'Page 1 of 1',
    'With known attack tools',
  ]) {
    t.ok(text.includes(s), `the PDF says "${s}"`)
  }
})

t.test('peripherals inventory: filters of its own', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const a = await addAgent(app, { host_identifier: 'ALPHA' })
  const b = await addAgent(app, { host_identifier: 'BRAVO' })
  await addPeripheral(app, a.id, { vid: '046D', pid: 'C077', approved: 0, dev_icon: 2 })
  await addPeripheral(app, a.id, { vid: '0781', pid: '5567', approved: 0, dev_icon: 3 })
  await addPeripheral(app, b.id, { vid: '0781', pid: '5567', dev_icon: 3 })
  await addPeripheral(app, b.id, { vid: '413C', pid: '2113', dev_icon: 1 })
  await portsOf(app).peripherals.setApproval(b.id, '0781', '5567', 'Approved', Date.now(), 'test')
  await portsOf(app).agentState.refreshAgent(b.id)
  const r = await createReport(app, token, { name: 'Unapproved storage', type: 'peripheralsInventory', format: 'CSV', filters: { approved: false, peripheralIcons: [3, 1] } })
  const run = await runNow(app, token, r.id)
  const rows = parseCsv((await fileOf(app, token, r.id, run.fileId)).toString('utf8'))
  const col = (name: string) => rows[0].indexOf(name)
  t.ok(col('deviceID') >= 0 && col('lastSeen') >= 0)
  t.same(
    rows.slice(1).map((x) => `${x[col('hostIdentifier')]} ${x[col('vid')]}:${x[col('pid')]} ${x[col('approved')]}`),
    ['ALPHA 0781:5567 false', 'BRAVO 413C:2113 false'],
    'host by host, only the classes and approval asked for',
  )

  const p = await createReport(app, token, { name: 'Peripherals on ALPHA', type: 'peripheralsInventory', format: 'PDF', filters: { hostIdentifier: 'alph' } })
  const prun = await runNow(app, token, p.id)
  t.equal(prun.rowCount, 2)
  const text = pdfPages(await fileOf(app, token, p.id, prun.fileId)).join('\n')
  t.ok(text.includes('Host name contains: "alph"'), 'the filter on the cover')
  t.ok(text.includes('2 peripherals'))
  t.notOk(text.includes('BRAVO'))
})

t.test('events and audit digests: the period, severity and the counts', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  const ev = async (ms: number, severity: number, category: 'USB' | 'Host', source: string, description: string) =>
    await recordEventIds(app, ms, [{ code: '0x110001', severity, category, entityId: source, description, details: `${description} details` }])
  await ev(now - 2 * DAY, 2, 'USB', 'DESKTOP-A (10.0.0.1)', 'Known attack tool connected')
  await ev(now - 3 * DAY, 4, 'Host', 'DESKTOP-B (10.0.0.2)', 'Agent disconnected')
  await ev(now - 1 * DAY, 6, 'USB', 'Офис-ПК (10.0.0.4)', 'New USB peripheral detected')
  await ev(now - 10 * DAY, 1, 'USB', 'DESKTOP-C (10.0.0.3)', 'Outside the period')
  const r = await createReport(app, token, {
    name: 'Weekly warnings',
    type: 'eventsDigest',
    format: 'CSV',
    filters: { minimumSeverity: 'Warning' },
    schedule: { frequency: 'weekly', dayOfWeek: 'Friday', timeOfDay: '17:00' },
  })
  const run = await runNow(app, token, r.id)
  const rows = parseCsv((await fileOf(app, token, r.id, run.fileId)).toString('utf8'))
  t.same(rows[0].slice(0, 4), ['eventID', 'creationTime', 'creationTimeEpoch', 'eventCode'])
  t.same(
    rows.slice(1).map((x) => x[rows[0].indexOf('description')]),
    ['Known attack tool connected', 'Agent disconnected'],
    'Warning or worse, of the last 7 days (weekly), newest first',
  )

  const pdf = await createReport(app, token, { name: 'USB digest', type: 'eventsDigest', format: 'PDF', filters: { period: 'last30Days', categories: ['USB'] } })
  const prun = await runNow(app, token, pdf.id)
  t.equal(prun.rowCount, 3, 'the events listed (the count tables are not rows)')
  const text = pdfPages(await fileOf(app, token, pdf.id, prun.fileId)).join('\n')
  for (const s of [
    'Period',
    'Last 30 days',
    'Categories: USB',
    'By severity',
    '1 Alert',
    'By category',
    'Top sources',
    'DESKTOP-A (10.0.0.1)',
    'Офис-ПК (10.0.0.4)',
    'Events, newest first',
    '3 events',
    'Outside the period',
  ])
    t.ok(text.includes(s), `says "${s}"`)

  // Audit: every operation so far left records; a digest of the failed ones by admin.
  await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: 'bad', type: 'agentsInventory', format: 'PDF', filters: { vendor: 'x' } } })
  const audit = await createReport(app, token, { name: 'Failures', type: 'auditTrailDigest', format: 'CSV', filters: { outcomes: ['Failed'], user: 'adm', auditCategories: ['Reports'] } })
  const arun = await runNow(app, token, audit.id)
  const arows = parseCsv((await fileOf(app, token, audit.id, arun.fileId)).toString('utf8'))
  t.equal(arows.length, 2, 'one failed Reports operation by admin')
  t.match(arows[1][arows[0].indexOf('description')], /createReport/)
  t.equal(arows[1][arows[0].indexOf('outcome')], 'Failed')
})

t.test('risk insights summary', async (t) => {
  const app = await build(t)
  const token = await login(app)
  for (let i = 0; i < 5; i++) {
    const a = await addAgent(app, { host_identifier: `HOST-${i}` })
    await addPeripheral(app, a.id, { vid: '046D', pid: 'C077' })
  }
  const rare = await addAgent(app, { host_identifier: 'LONELY' })
  await addPeripheral(app, rare.id, { vid: '1234', pid: 'ABCD', gui_vid: 'Rare Vendor', gui_pid: 'Odd Gadget', dev_icon: 14 })
  const csv = await createReport(app, token, {
    name: 'Risks',
    type: 'riskInsightsSummary',
    format: 'CSV',
    filters: { sections: ['classificationSummary', 'uncommonPeripherals'], uncommonMaxHosts: 2 },
  })
  const run = await runNow(app, token, csv.id)
  const rows = parseCsv((await fileOf(app, token, csv.id, run.fileId)).toString('utf8'))
  t.same(rows[0], ['section', 'item', 'vid', 'pid', 'vendor', 'product', 'deviceClass', 'hosts', 'count', 'firstSeen', 'lastSeen', 'detail'])
  t.same([...new Set(rows.slice(1).map((r) => r[0]))], ['classificationSummary', 'uncommonPeripherals'], 'the sections asked for')
  const uncommon = rows.filter((r) => r[0] === 'uncommonPeripherals')
  t.same(
    uncommon.map((r) => `${r[2]}:${r[3]} ${r[7]} ${r[11]}`),
    ['1234:ABCD 1 LONELY'],
  )
  t.ok(rows.some((r) => r[1] === 'Connection: Connected' && r[8] === '6'))

  const pdf = await createReport(app, token, { name: 'Risk overview', type: 'riskInsightsSummary', format: 'PDF' })
  const prun = await runNow(app, token, pdf.id)
  t.equal(prun.status, 'succeeded')
  const text = pdfPages(await fileOf(app, token, pdf.id, prun.fileId)).join('\n')
  for (const s of ['Classification of the agents', 'Vulnerable peripherals and known attack tools', 'Uncommon peripherals', 'Whitelist violations', 'Errors by agent', 'Last 7 days'])
    t.ok(text.includes(s), `says "${s}"`)
})

t.test('the PDF row cap', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  await addAuditRecords(
    app,
    Array.from({ length: 5003 }, (_, i) => ({
      createdMs: now - i * 1000,
      severity: 5,
      category: 'Agents',
      user: 'bulk',
      sourceIp: '10.0.0.9',
      description: `Record ${i}`,
      details: '{}',
      operationId: 'x',
      outcome: 'Succeeded',
    })),
  )
  const r = await createReport(app, token, { name: 'Bulk', type: 'auditTrailDigest', format: 'PDF', filters: { user: 'bulk' } })
  const run = await runNow(app, token, r.id)
  t.match(run, { status: 'succeeded', rowCount: 5000, truncated: true })
  const capped = await download(app, token, r.id, run.fileId)
  t.match(capped.headers, { 'x-records-filtered': '5000', 'x-export-truncated': 'true' }, 'the records it holds, and that the cap cut it')
  const pages = pdfPages(await fileOf(app, token, r.id, run.fileId))
  t.ok(pages.length > 100)
  t.ok(
    pages.every((p, i) => p.includes(`Page ${i + 1} of ${pages.length}`)),
    'every page numbered',
  )
  t.ok(
    pages.slice(1).every((p) => p.includes('Audit records, newest first (continued)') && p.includes('Description')),
    'the table header on every page',
  )
  t.ok(pages[pages.length - 1].includes('3 more audit records not listed here; a CSV report holds every one.'))
  t.ok(pages[0].includes('5,003 audit records, the first 5,000 listed'))

  const csv = await createReport(app, token, { name: 'Bulk CSV', type: 'auditTrailDigest', format: 'CSV', filters: { user: 'bulk' } })
  const crun = await runNow(app, token, csv.id)
  t.match(crun, { rowCount: 5003, truncated: false }, 'CSV holds every row')
})

t.test('downloads: one file, several as an archive, and what cannot be downloaded', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await addAgent(app)
  const r = await createReport(app, token, { name: 'Überblick / Q1', type: 'agentsInventory', format: 'CSV' })
  const first = await runNow(app, token, r.id)
  const second = await runNow(app, token, r.id)
  t.match(first.fileName, /^Überblick_Q1-\d{8}T\d{6}Z\.csv$/, 'a slash is not part of a file name')

  const newest = await download(app, token, r.id)
  t.equal(newest.statusCode, 200, 'without fileId: the newest file')
  t.match(newest.headers['content-disposition'], /^attachment; filename="_berblick_Q1-[^"]+\.csv"; filename\*=UTF-8''%C3%9Cberblick_Q1-/, 'a non-ASCII name in filename*')
  t.ok(newest.headers['content-disposition']!.toString().includes(encodeURIComponent(second.fileName)))

  t.equal((await download(app, token, r.id, first.fileId, 'application/pdf')).statusCode, 406, 'Accept allows only PDF; the file is CSV')
  t.equal((await download(app, token, r.id, first.fileId, 'text/csv')).statusCode, 200)
  t.equal((await download(app, token, r.id, first.fileId, '*/*')).statusCode, 200)
  const unknown = await download(app, token, r.id, UNKNOWN)
  t.equal(unknown.statusCode, 404)
  t.match(unknown.json().errors, [{ name: 'fileId' }])
  t.equal((await download(app, token, UNKNOWN)).statusCode, 404, 'an unknown report')
  const other = await createReport(app, token, { name: 'Never ran', type: 'agentsInventory', format: 'CSV' })
  t.equal((await download(app, token, other.id)).statusCode, 404, 'a report without files')
  t.equal((await download(app, token, other.id, first.fileId)).statusCode, 404, 'a file of another report')
  // A run that failed, and one still queued, have no file: 409 saying which.
  const insert = (...values: unknown[]) =>
    query(app, "INSERT INTO report_runs (id, report_id, trigger, due_ms, queued_ms, status, reason, definition, format) VALUES (?, ?, 'request', 1, 1, ?, ?, '{}', 'CSV')", ...values)
  await insert('2f4e6a8c-0b1d-4e3f-8a5b-7c9d1e2f3a41', r.id, 'failed', 'The disk was full.')
  await insert('2f4e6a8c-0b1d-4e3f-8a5b-7c9d1e2f3a42', other.id, 'running', null)
  const failed = await download(app, token, r.id, '2f4e6a8c-0b1d-4e3f-8a5b-7c9d1e2f3a41')
  t.equal(failed.statusCode, 409)
  t.match(failed.json().detail, /failed and has no file: The disk was full\./)
  const running = await download(app, token, other.id)
  t.equal(running.statusCode, 409)
  t.match(running.json().detail, /is running/)

  const before = await lastAuditId(app)
  const zip = await call(app, token, {
    method: 'POST',
    url: `${REPORTS}/GetReportFileList`,
    payload: [
      { reportId: r.id, fileId: first.fileId },
      { reportId: r.id, fileId: second.fileId },
      { reportId: r.id, fileId: first.fileId.toUpperCase() },
    ],
  })
  t.equal(zip.statusCode, 200)
  t.equal(zip.headers['content-type'], 'application/zip')
  t.match(zip.headers['content-disposition'], /^attachment; filename="reports-\d{8}T\d{6}Z\.zip"$/)
  const entries = unzip(zip.rawPayload)
  t.equal(entries.length, 2, 'the same file named twice is included once')
  const firstFile = await fileOf(app, token, r.id, first.fileId)
  t.same(
    entries.map((e) => e.name),
    first.fileName === second.fileName ? [first.fileName, first.fileName.replace(/\.csv$/, ' (2).csv')] : [first.fileName, second.fileName],
  )
  t.ok(entries[0].data.equals(firstFile), 'the file as stored')
  const rec = (await auditSince(app, before)).find((a) => a.operation_id === 'getReportFileList')!
  t.match(rec, { category: 'Reports', outcome: 'Succeeded', description: /Downloaded 2 report file\(s\)/ })

  // Names that repeat get (2), (3) before the extension.
  await query(app, 'UPDATE report_runs SET file_name = ? WHERE id = ?', first.fileName, second.fileId)
  const repeated = unzip(
    (
      await call(app, token, {
        method: 'POST',
        url: `${REPORTS}/GetReportFileList`,
        payload: [
          { reportId: r.id, fileId: first.fileId },
          { reportId: r.id, fileId: second.fileId },
        ],
      })
    ).rawPayload,
  )
  t.same(
    repeated.map((e) => e.name),
    [first.fileName, first.fileName.replace(/\.csv$/, ' (2).csv')],
  )

  const bad = await call(app, token, {
    method: 'POST',
    url: `${REPORTS}/GetReportFileList`,
    payload: [
      { reportId: r.id, fileId: first.fileId },
      { reportId: r.id, fileId: UNKNOWN },
      { reportId: r.id, fileId: '2f4e6a8c-0b1d-4e3f-8a5b-7c9d1e2f3a41' },
    ],
  })
  t.equal(bad.statusCode, 404, 'an unknown item: nothing is sent')
  t.match(bad.json().errors, [{ name: 'items/1/fileId' }, { name: 'items/2/fileId' }])
  const conflict = await call(app, token, { method: 'POST', url: `${REPORTS}/GetReportFileList`, payload: [{ reportId: other.id }] })
  t.equal(conflict.statusCode, 409, 'only a run without a file yet: 409')
  t.equal((await call(app, token, { method: 'POST', url: `${REPORTS}/GetReportFileList`, payload: [] })).statusCode, 400)
  const tooMany = Array.from({ length: 101 }, () => ({ reportId: r.id }))
  t.equal((await call(app, token, { method: 'POST', url: `${REPORTS}/GetReportFileList`, payload: tooMany })).statusCode, 400, 'at most 100 items')
})

t.test('control, format and bidi characters of a report name never reach a file name', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await addAgent(app)
  const invisible = ['\u202e', '\u202a', '\u2066', '\u2069', '\u200e', '\u200f', '\u200b', '\ufeff', '\u0085', '\u2028', '\u2029', '\u00ad']
  const unsafe = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u
  // U+202E would show "invoice_fdp.exe" as "invoice_exe.pdf".
  const r = await createReport(app, token, { name: `invoice\u202efdp.exe ${invisible.join('')}Q1`, type: 'agentsInventory', format: 'CSV' })
  const run = await runNow(app, token, r.id)
  t.match(run.fileName, /^invoicefdp\.exe_Q1-\d{8}T\d{6}Z\.csv$/, `stored and listed without them: ${JSON.stringify(run.fileName)}`)
  const file = await download(app, token, r.id, run.fileId)
  t.equal(file.headers['content-disposition'], `attachment; filename="${run.fileName}"`, 'ASCII once they are gone')

  // A name stored before, with them in it, is cleaned where it is used.
  const stored = `R\u00e9sum\u00e9\u202egpj.exe_2025-01-01T000000Z.csv`
  await query(app, 'UPDATE report_runs SET file_name = ? WHERE id = ?', stored, run.fileId)
  const old = await download(app, token, r.id, run.fileId)
  const header = String(old.headers['content-disposition'])
  t.equal(header, `attachment; filename="R_sum_gpj.exe_2025-01-01T000000Z.csv"; filename*=UTF-8''R%C3%A9sum%C3%A9gpj.exe_2025-01-01T000000Z.csv`)
  t.notOk(unsafe.test(decodeURIComponent(header.split("''")[1])), 'filename* decodes without them')
  const listed = await call(app, token, { method: 'GET', url: `${REPORTS}/get/${r.id}` })
  t.equal(listed.json().runs.find((x: any) => x.runId === run.runId).fileName, 'R\u00e9sum\u00e9gpj.exe_2025-01-01T000000Z.csv', 'the listed name is the downloaded one')
  const zip = await call(app, token, { method: 'POST', url: `${REPORTS}/GetReportFileList`, payload: [{ reportId: r.id, fileId: run.fileId }] })
  t.equal(zip.statusCode, 200)
  t.same(
    unzip(zip.rawPayload).map((e) => e.name),
    ['R\u00e9sum\u00e9gpj.exe_2025-01-01T000000Z.csv'],
    'the ZIP entry too',
  )
})

t.test('retention, and deleting a report deletes its files', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await addAgent(app)
  const r = await createReport(app, token, { name: 'Kept', type: 'agentsInventory', format: 'CSV', retention: { maxFiles: 2 } })
  const runs = [await runNow(app, token, r.id), await runNow(app, token, r.id), await runNow(app, token, r.id)]
  const dir = path.join(app.config.dataDir, 'reports', r.id)
  t.same(await storedFiles(app, r.id), [`${runs[1].runId}.csv`, `${runs[2].runId}.csv`].sort(), 'two files kept on disk')
  let view = (await call(app, token, { method: 'GET', url: `${REPORTS}/get/${r.id}` })).json()
  t.equal(view.runs.length, 3, 'every run keeps its record')
  t.match(view.runs[2], { runId: runs[0].runId, fileId: null, status: 'succeeded' })
  t.ok(view.runs[2].fileDeletedTime)
  const gone = await download(app, token, r.id, runs[0].runId)
  t.equal(gone.statusCode, 404)
  t.match(gone.json().detail, /removed by the retention rule/)

  const upd = await call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { id: r.id, retention: { maxFiles: 1 } } })
  t.equal(upd.statusCode, 200)
  t.same(await storedFiles(app, r.id), [`${runs[2].runId}.csv`], 'a lower retention applies at once; the newest is kept')
  view = (await call(app, token, { method: 'GET', url: `${REPORTS}/get/${r.id}` })).json()
  t.equal(view.lastRun.fileId, runs[2].runId)

  // By size: 1 MiB holds one small file at least (the newest is always kept).
  await query(app, 'UPDATE reports SET retention_files = 10, retention_bytes = 1048576 WHERE id = ?', r.id)
  await query(app, 'UPDATE report_runs SET size_bytes = 1048000 WHERE id = ?', runs[2].runId)
  const fourth = await runNow(app, token, r.id)
  t.same(await storedFiles(app, r.id), [`${fourth.runId}.csv`], 'the older file did not fit in the total size')

  const del = await call(app, token, { method: 'POST', url: `${REPORTS}/delete`, payload: [r.id] })
  t.equal(del.json().succeeded, 1)
  if (app.storage.backend === 'sqlite') t.notOk(fs.existsSync(dir), 'its folder is gone')
  t.same(await storedFiles(app, r.id), [], 'its files are gone')
  t.equal((await download(app, token, r.id)).statusCode, 404)
})

t.test('other requests are answered while a report runs', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  await addAuditRecords(
    app,
    Array.from({ length: 50_000 }, (_, i) => ({
      createdMs: now - i * 10,
      severity: 5,
      category: 'Agents',
      user: 'bulk',
      sourceIp: '10.0.0.9',
      description: `Record ${i}`,
      details: '{"n":1}',
      operationId: 'x',
      outcome: 'Succeeded',
    })),
  )
  const r = await createReport(app, token, { name: 'Big', type: 'auditTrailDigest', format: 'CSV', filters: { user: 'bulk' } })
  const queued = await call(app, token, { method: 'POST', url: `${REPORTS}/RequestForRun`, payload: [r.id] })
  const runId = queued.json().runIds[0]
  const status = async () => (await portsOf(app).reports.runById(runId))!.status
  // On PostgreSQL the run starts a moment after the answer (its lease is taken through the pool).
  for (const until = Date.now() + 5000; (await status()) === 'queued' && Date.now() < until; ) await new Promise((r) => setTimeout(r, 10))
  t.equal(await status(), 'running', 'it started at once')
  const read = await call(app, token, { method: 'GET', url: `${REPORTS}/getall` })
  t.equal(read.statusCode, 200)
  t.equal(await status(), 'running', 'a read is answered before the run ends: it yields between pages')
  await app.reportScheduler.idle()
  t.match(await portsOf(app).reports.runById(runId), { status: 'succeeded', row_count: 50_000 })
})

t.test('a digest counts each agent once as a source, named as its latest events name it', async (t) => {
  const app = await build(t)
  const now = Date.now()
  const uuid = '5b0c1a9e-2f3d-4e5a-8b7c-0d1e2f3a4b5c'
  const ev = (entityId: string, assetKey: string | null, details: string) => ({
    code: '0x310004',
    severity: 6,
    category: 'Host' as const,
    description: 'Agent enrolled',
    entityId,
    details,
    assetKey,
    assetName: assetKey ? 'DESKTOP-A' : null,
  })
  // Enrolled before its address was known, then checking in from it.
  await recordEventIds(app, now - 3000, [await ev('DESKTOP-A', uuid, 'enrolled')])
  await recordEventIds(app, now - 2000, [await ev('DESKTOP-A (10.0.0.1)', uuid, 'checked in')])
  await recordEventIds(app, now - 1000, [await ev('Prime server', null, 'server event'), await ev('Prime server', null, 'another')])
  const totals = await app.storage.reportRuns.reads.eventTotals({ from: now - 60_000, to: now + 1000 })
  t.equal(totals.total, 4)
  t.same(
    [...totals.byKey].sort(),
    [
      ['DESKTOP-A (10.0.0.1)', 2],
      ['Prime server', 2],
    ],
    'one source per agent, by its latest name',
  )
})
