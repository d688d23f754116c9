// Pins the event and audit-trail exports: the filters of the lists in the body (names in
// any case), their order, the CSV rules (byte-order mark, header in schema order, CRLF,
// quoting, empty nulls, formula cells defused, numbers left alone), PDF reports (title,
// filters, header and "Page n of m" on every page), the row caps with
// x-records-filtered / x-export-truncated, and one audit record per export.
import t from 'tap'
import { build, login, call, userWithProfile } from './helpers.js'
import { auditSince, lastAuditId, queryColumn, recordEvents } from './seed.js'
import { parseCsv, pdfPages } from './fixtures/documents.js'
import { addEvents, expectedEvents, sortEvents } from './fixtures/events.js'
import { exportLimits } from '../handlers/events.js'

const BASE = '/prime/webui/Events'

const FILE = (prefix: string, ext: string) => new RegExp(`^attachment; filename="${prefix}-\\d{8}T\\d{6}Z\\.${ext}"$`)

t.test("CSV of events: the list's filters and order, every field in schema order, safe to open, audited", async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'reader', 10)
  const rows = await addEvents(app, 200, { now: Date.now(), days: 2 })
  const before = await lastAuditId(app)
  const res = await call(app, user, {
    method: 'POST',
    url: `${BASE}/ExportGetEvents`,
    payload: { minimumseverity: 'Warning', CATEGORY: 'usb,network', SortBy: 'date_asc', PageSize: 5, PageNumber: 2, GlobalSearch: null },
  })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.headers['content-type'], 'text/csv; charset=utf-8')
  t.match(res.headers['content-disposition'], FILE('events', 'csv'))
  const want = sortEvents(expectedEvents(rows, { MinimumSeverity: 'Warning', Category: 'usb,network' }), 'date_asc')
  t.equal(res.headers['x-records-filtered'], String(want.length))
  t.equal(res.headers['x-export-truncated'], 'false')
  t.equal(res.body.charCodeAt(0), 0xfeff, 'starts with a byte-order mark')
  const [header, ...data] = parseCsv(res.body.slice(1))
  t.same(header, Object.keys(app.contract.spec.components.schemas.PrimeEventView.properties), 'header: the fields of PrimeEventView in schema order')
  t.same(
    data.map((r) => Number(r[0])),
    want.map((e) => e.id),
    'every matching event (PageSize and PageNumber ignored), in the requested order',
  )
  const col = (name: string) => header.indexOf(name)
  for (const [i, e] of want.entries()) {
    const r = data[i]
    const details = /^[=+\-@\t\r]/.test(e.details) ? `'${e.details}` : e.details
    t.same(
      [r[col('creationTime')], r[col('severityString')], r[col('details')], r[col('hashtags')], r[col('peripheralIcon')], r[col('peripheralAssetId')]],
      [new Date(e.created_ms).toISOString(), ['Emergency', 'Alert', 'Critical', 'Error', 'Warning'][e.severity], details, e.hashtags ?? '', String(e.peripheral_icon), e.peripheral_asset_id ?? ''],
    )
  }
  t.ok(
    data.some((r) => r[col('details')].startsWith("'=HYPERLINK")),
    'a formula is defused with a leading quote',
  )
  t.ok(
    data.some((r) => r[col('details')].startsWith("'-")),
    'so is text starting with -',
  )
  t.ok(
    data.some((r) => r[col('peripheralIcon')] === '-1'),
    'the number -1 stays a number',
  )
  t.match(res.body, /,"'=HYPERLINK\(""http:\/\/x""/, 'a defused formula is quoted, its quotes doubled')
  t.match(res.body, /,"'-[^"]*",/, 'so is a defused cell without quotes or commas')
  const [record] = await auditSince(app, before)
  t.match(record, { category: 'System', operation_id: 'exportGetEvents', outcome: 'Succeeded', user_name: 'reader' })
  t.match(JSON.parse(record.details), {
    format: 'csv',
    records: want.length,
    matched: want.length,
    truncated: false,
    filters: { MinimumSeverity: 'Warning', Category: 'usb,network' },
    sortBy: 'date_asc',
  })
})

t.test('an empty or null body exports every event, newest first; bad filters answer 400 naming them', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const rows = await addEvents(app, 30, { now: Date.now(), days: 1 })
  for (const payload of [undefined, 'null', '{}']) {
    const res = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetEvents`, ...(payload ? { payload, headers: { 'content-type': 'application/json' } } : {}) })
    t.equal(res.statusCode, 200, `${payload}: ${res.body.slice(0, 200)}`)
    t.same(
      parseCsv(res.body.slice(1))
        .slice(1)
        .map((r) => Number(r[0])),
      rows.map((e) => e.id).reverse(),
    )
  }
  for (const [payload, name] of [
    [{ Severity: 'Loud' }, 'Severity'],
    [{ category: 'Printer' }, 'Category'],
    [{ SortBy: 'colour_asc' }, 'SortBy'],
    [{ FromEventId: -1 }, 'FromEventId'],
    [{ Nonsense: 1 }, 'Nonsense'],
    [{ ToDate: '2024-02-30' }, 'ToDate'],
  ] as const) {
    for (const op of ['ExportGetEvents', 'ExportGetEventsPDF/exportpdf']) {
      const res = await call(app, token, { method: 'POST', url: `${BASE}/${op}`, payload })
      t.equal(res.statusCode, 400, `${op} ${JSON.stringify(payload)}`)
      t.ok(
        res.json().errors?.some((e: { name: string }) => e.name === name),
        `names ${name}: ${res.json().detail}`,
      )
    }
  }
})

t.test('row caps: the first rows in the requested order, the count of all, and the truncation flag', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const rows = await addEvents(app, 40, { now: Date.now(), days: 1 })
  const saved = { ...exportLimits }
  t.teardown(() => Object.assign(exportLimits, saved))
  exportLimits.csv = 10
  exportLimits.pdf = 7
  const csv = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetEvents`, payload: { SortBy: 'eventID_asc' } })
  t.equal(csv.headers['x-records-filtered'], '40')
  t.equal(csv.headers['x-export-truncated'], 'true')
  t.same(
    parseCsv(csv.body.slice(1))
      .slice(1)
      .map((r) => Number(r[0])),
    rows.slice(0, 10).map((e) => e.id),
  )
  const pdf = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetEventsPDF/exportpdf`, payload: {} })
  t.equal(pdf.headers['x-export-truncated'], 'true')
  const text = pdfPages(pdf.rawPayload).join('\n')
  t.match(text, /40 events \(the first 7 are listed\)/, 'the first page says how many are listed')
  t.match(text, /33 more events were left out/)
  const all = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetEvents`, payload: { FromEventId: rows[35].id } })
  t.equal(all.headers['x-export-truncated'], 'false', 'within the cap: not truncated')
})

t.test('PDF of events: title and exporter, filters, the table with its header and "Page n of m" on every page', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await addEvents(app, 160, { now: Date.now(), days: 2 })
  const res = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetEventsPDF/exportpdf`, payload: { Category: 'USB', SortBy: 'severity_asc' } })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'application/pdf')
  t.match(res.headers['content-disposition'], FILE('events', 'pdf'))
  t.equal(res.rawPayload.subarray(0, 5).toString(), '%PDF-')
  const pages = pdfPages(res.rawPayload)
  t.ok(pages.length >= 2, `${pages.length} pages`)
  t.match(pages[0], /Events - exported by admin/)
  t.match(pages[0], /Category: USB/)
  t.match(pages[0], /severity_asc/)
  pages.forEach((p, i) => {
    t.match(p, /Time \(UTC\)[\s\S]*Code[\s\S]*Severity[\s\S]*Category[\s\S]*Source[\s\S]*Description[\s\S]*Details/, `page ${i + 1} has the table header`)
    t.match(p, new RegExp(`Page ${i + 1} of ${pages.length}`))
  })
})

t.test('audit trail exports: CSV with the asset flattened and secrets masked, PDF, filters in the body', async (t) => {
  const app = await build(t)
  const token = await login(app)
  // Real audited operations: accounts created (the password masked), a refused call.
  for (const name of ['carol', 'dave']) {
    await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: name, email: `${name}@example.com`, userProfile: 20, password: 'Secret-Sauce-4711' } })
  }
  await app.inject({ method: 'GET', url: `${BASE}/GetAuditTrails` })
  const res = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetAudit`, payload: { category: 'Users', assetreference: { type: 'User' }, SortBy: 'auditTrailID_asc' } })
  t.equal(res.statusCode, 200, res.body)
  t.match(res.headers['content-disposition'], FILE('audit-trails', 'csv'))
  const [header, ...data] = parseCsv(res.body.slice(1))
  t.same(header, [
    'auditTrailID',
    'creationTime',
    'creationTimeEpoch',
    'severity',
    'severityString',
    'category',
    'user',
    'sourceIp',
    'description',
    'details',
    'operationId',
    'outcome',
    'assetReference.key',
    'assetReference.name',
    'assetReference.parentID',
    'assetReference.ipAddress',
    'assetReference.type',
    'assetReference.subType',
    'assetReference.allAssetTypeDetail',
    'assetReference.icon',
    'requestId',
  ])
  // The first account, created at first start, then the two created here.
  t.same(
    data.map((r) => r[header.indexOf('assetReference.name')]),
    ['admin', 'carol', 'dave'],
  )
  t.same(
    data.map((r) => r[header.indexOf('operationId')]),
    ['', 'addUser', 'addUser'],
    'null is an empty cell',
  )
  t.notMatch(res.body, 'Secret-Sauce-4711', 'no password in the file')
  t.equal(res.headers['x-records-filtered'], '3')
  const pdf = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetAuditPDF/exportpdf`, payload: null })
  t.equal(pdf.statusCode, 200)
  const pages = pdfPages(pdf.rawPayload)
  t.match(pages[0], /Audit trail - exported by admin/)
  t.match(pages[0], /Time \(UTC\)[\s\S]*Severity[\s\S]*Category[\s\S]*User[\s\S]*Source address[\s\S]*Outcome[\s\S]*Asset[\s\S]*Description/)
  t.match(pages[0], /User: carol|carol/)
  const bad = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetAudit`, payload: { AssetReference: { Type: 'Robot' } } })
  t.equal(bad.statusCode, 400)
  const everything = await call(app, token, { method: 'POST', url: `${BASE}/ExportGetAudit` })
  const lines = parseCsv(everything.body.slice(1)).slice(1)
  t.equal(String(lines.length), everything.headers['x-records-filtered'], "the count is the file's")
  const own = await lastAuditId(app)
  t.ok(Math.max(...lines.map((r) => Number(r[0]))) < own, 'an export holds the records written before it started, not its own record')
  const exports = await queryColumn(app, "SELECT operation_id FROM audit_trail WHERE operation_id LIKE 'exportGetAudit%' AND outcome = 'Succeeded'")
  t.same(exports, ['exportGetAudit', 'exportGetAuditPdf', 'exportGetAudit'], 'each export is audited')
})

t.test('PDF cells wrap: long sources and details are printed whole, rows grow, pages break between rows', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const now = Date.now()
  const details = (i: number) => `Kingston DataTraveler 3.0 (VID 0951, PID 1666, serial 60A44C413A8EF1A0B9A1BE27) was connected while armed and blocked; row ${i} ends here.`
  await recordEvents(
    app,
    now,
    Array.from({ length: 80 }, (_, i) => ({
      code: '0x110002',
      severity: 4,
      category: 'USB' as const,
      description: 'Unapproved peripheral connected on an armed agent',
      entityId: `DESKTOP-WITH-A-RATHER-LONG-HOST-NAME-${i} (192.168.100.${i})`,
      details: details(i),
    })),
  )
  const res = await call(app, token, { method: 'POST', url: '/prime/webui/Events/ExportGetEventsPDF/exportpdf', payload: {} })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['x-records-filtered'], '80')
  const pages = pdfPages(res.rawPayload)
  const text = pages.join('\n').replace(/\n/g, ' ')
  // A word longer than its column is broken inside it (compared without spaces).
  const unbroken = pages.join('').replace(/\s/g, '')
  t.notMatch(text, '…', 'nothing is cut')
  for (const i of [0, 41, 79]) {
    t.match(text, `row ${i} ends here.`, `the details of row ${i} are whole`)
    t.match(unbroken, `DESKTOP-WITH-A-RATHER-LONG-HOST-NAME-${i}(192.168.100.${i})`, `its source too`)
  }
  t.ok(pages.length >= 3, `${pages.length} pages: taller rows need more of them`)
  pages.forEach((p, i) => t.match(p, `Page ${i + 1} of ${pages.length}`, `page ${i + 1} of ${pages.length}`))
})
