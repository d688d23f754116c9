// Pins the agent and peripheral exports: the same filters and order as the lists, the
// CSV rules (header, CRLF, true/false, empty nulls, formula injection), the file names,
// PDF reports (page count, header and "Page n of m" on every page, the row cap), that
// the files stream, and that each export leaves one audit record naming its filters.
import { Readable } from 'node:stream'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call, userWithProfile } from './helpers.js'
import { parseCsv, pdfPages } from './fixtures/documents.js'
import { addAgent, addPeripheral } from './fixtures/fleet.js'
import { auditSince, lastAuditId, portsOf, query } from './seed.js'
import { csvStream } from '../lib/csv.js'
import { pdfStream } from '../lib/pdf.js'

const BASE = '/prime/webui/agents'
const FILE_STAMP = /^attachment; filename="(agents|peripherals-aggregated)-\d{8}T\d{6}Z\.(csv|pdf)"$/

const pageObjects = (pdf: Buffer) => (pdf.toString('latin1').match(/\/Type \/Page\b/g) ?? []).length

async function fleet(app: FastifyInstance) {
  const a = await addAgent(app, { host_identifier: 'alpha', local_ip_address: '10.0.0.1', os_version: null, hashtags: '#kiosk' })
  const b = await addAgent(app, { host_identifier: "=cmd|' /C calc'!A0", local_ip_address: '10.0.0.2' })
  const c = await addAgent(app, { host_identifier: 'charlie, "the third"', local_ip_address: '-10.0.0.3', operational_status: 'Armed' })
  await addPeripheral(app, b.id, { vid: '0951', pid: '1666', class_code: '08', subclass_code: '06', protocol_code: '50' })
  await addPeripheral(app, c.id, { vid: '0951', pid: '1666', class_code: '08', subclass_code: '06', protocol_code: '50' })
  await addPeripheral(app, c.id, { vid: '046D', pid: 'C077' })
  return { a, b, c }
}

t.test('CSV export: every agent field in order, CRLF, true/false, empty nulls, formula cells defused, audited', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'reader', 10)
  const { a, b, c } = await fleet(app)
  const before = await lastAuditId(app)
  const res = await call(app, user, { method: 'POST', url: `${BASE}/exportagentcsv`, payload: { sortBy: 'hostIdentifier_desc', pageSize: 1, pageNumber: 3 } })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.headers['content-type'], 'text/csv; charset=utf-8')
  t.match(res.headers['content-disposition'], FILE_STAMP)
  t.match(res.headers['content-disposition'], /agents-\d{8}T\d{6}Z\.csv/)
  t.equal(res.headers['x-records-filtered'], '3', 'every export says how many records matched')
  const rows = parseCsv(res.body)
  const fields = Object.keys(app.contract.spec.components.schemas.AgentViewResource.properties)
  t.same(rows[0], fields, 'the header row: AgentViewResource field names in order')
  t.equal(rows.length, 4, 'paging ignored: every agent')
  const col = (name: string) => fields.indexOf(name)
  t.same(
    rows.slice(1).map((r) => r[col('uuid')]),
    [c.uuid, a.uuid, b.uuid],
    'sortBy applied (hostIdentifier_desc)',
  )
  const [charlie, alpha, injected] = rows.slice(1)
  t.equal(injected[col('hostIdentifier')], "'=cmd|' /C calc'!A0", 'a formula is prefixed with a quote')
  t.equal(charlie[col('localIpAddress')], "'-10.0.0.3", 'so is a cell starting with -')
  t.equal(charlie[col('hostIdentifier')], 'charlie, "the third"', 'commas and quotes are quoted')
  t.equal(alpha[col('osVersion')], '', 'null is an empty cell')
  t.equal(alpha[col('hasUnapprovedPeripherals')], 'false')
  t.equal(charlie[col('hasUnapprovedPeripherals')], 'true')
  t.equal(charlie[col('operationalStatus')], 'Armed')
  t.match(alpha[col('lastUpdated')], /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'UTC ISO 8601')
  t.equal(charlie[col('notApproved')], '2')
  t.ok(res.body.endsWith('\r\n'))

  const records = await auditSince(app, before)
  t.equal(records.length, 1, 'one audit record')
  t.match(records[0], { category: 'Agents', operation_id: 'exportAgentCsv', outcome: 'Succeeded', user_name: 'reader' })
  t.match(JSON.parse(records[0].details), { format: 'csv', records: 3, sortBy: 'hostIdentifier_desc', filters: {} })
})

t.test('CSV export: the filters of GET agents, in the body, case-insensitive names; empty and null bodies export all', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const { b, c } = await fleet(app)
  const before = await lastAuditId(app)
  const filtered = await call(app, admin, { method: 'POST', url: `${BASE}/exportagentcsv`, payload: { HasUnapprovedPeripherals: 'True', status: 'Armed' } })
  t.equal(filtered.statusCode, 200, filtered.body)
  const rows = parseCsv(filtered.body)
  t.equal(rows.length, 2)
  t.equal(rows[1][0], c.uuid)
  t.match(JSON.parse((await auditSince(app, before))[0].details), { records: 1, filters: { hasUnapprovedPeripherals: 'True', status: 'Armed' } })

  const booleans = await call(app, admin, { method: 'POST', url: `${BASE}/exportagentcsv`, payload: { hasUnapprovedPeripherals: true, sortBy: 'hostIdentifier_asc' } })
  t.same(
    parseCsv(booleans.body)
      .slice(1)
      .map((r) => r[0]),
    [b.uuid, c.uuid],
    'JSON booleans work too',
  )
  for (const payload of [undefined, {}, null]) {
    const res = await call(app, admin, {
      method: 'POST',
      url: `${BASE}/exportagentcsv`,
      ...(payload === undefined ? {} : { payload: JSON.stringify(payload), headers: { 'content-type': 'application/json' } }),
    })
    t.equal(res.statusCode, 200, `${JSON.stringify(payload)}: ${res.body}`)
    t.equal(parseCsv(res.body).length, 4)
  }
  const none = await call(app, admin, { method: 'POST', url: `${BASE}/exportagentcsv`, payload: { hostIdentifier: 'no such host' } })
  t.equal(none.body.split('\r\n').length, 2, 'no match: the header row only')

  const bad = await call(app, admin, { method: 'POST', url: `${BASE}/exportagentcsv`, payload: { sortBy: 'password_asc' } })
  t.equal(bad.statusCode, 400)
  const badStatus = await call(app, admin, { method: 'POST', url: `${BASE}/exportagentcsv`, payload: { status: 'Sleeping' } })
  t.equal(badStatus.statusCode, 400)
  const notAcceptable = await call(app, admin, { method: 'POST', url: `${BASE}/exportagentcsv`, payload: {}, headers: { accept: 'application/json' } })
  t.equal(notAcceptable.statusCode, 406)
})

t.test('AgentExportFile: query filters, Format csv (default) or pdf in any case, Accept respected', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const { a } = await fleet(app)
  const csv = await call(app, admin, { method: 'GET', url: `${BASE}/AgentExportFile?hostIdentifier=ALPH&Hashtags=kiosk` })
  t.equal(csv.statusCode, 200, csv.body)
  t.equal(csv.headers['content-type'], 'text/csv; charset=utf-8')
  t.match(csv.headers['content-disposition'], FILE_STAMP)
  t.equal(csv.headers['x-records-filtered'], '1')
  const rows = parseCsv(csv.body)
  t.same(
    rows.slice(1).map((r) => r[0]),
    [a.uuid],
  )

  const pdf = await call(app, admin, { method: 'GET', url: `${BASE}/agentexportfile?format=PDF&SortBy=hostIdentifier_desc` })
  t.equal(pdf.statusCode, 200)
  t.equal(pdf.headers['content-type'], 'application/pdf')
  t.match(pdf.headers['content-disposition'], /agents-\d{8}T\d{6}Z\.pdf"$/)
  t.equal(pdf.headers['x-records-filtered'], '3')
  t.equal(pdf.rawPayload.subarray(0, 5).toString(), '%PDF-')

  const refused = await call(app, admin, { method: 'GET', url: `${BASE}/AgentExportFile?Format=csv`, headers: { accept: 'application/pdf' } })
  t.equal(refused.statusCode, 406, 'Accept must allow the type Format asks for')
  const accepted = await call(app, admin, { method: 'GET', url: `${BASE}/AgentExportFile?Format=pdf`, headers: { accept: 'application/pdf' } })
  t.equal(accepted.statusCode, 200)
  t.equal((await call(app, admin, { method: 'GET', url: `${BASE}/AgentExportFile?Format=xls` })).statusCode, 400)
  t.equal((await call(app, admin, { method: 'GET', url: `${BASE}/AgentExportFile?SortBy=nope_asc` })).statusCode, 400)
  t.equal((await call(app, admin, { method: 'GET', url: `${BASE}/AgentExportFile?LastUpdated=yesterday` })).statusCode, 400)
})

t.test('PDF export: a readable report, the header and "Page n of m" on every page', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  for (let i = 0; i < 300; i++) await addAgent(app, { host_identifier: `WS-${String(i).padStart(4, '0')}`, operational_status: i % 3 ? 'Free' : 'Armed' })
  const res = await call(app, admin, { method: 'POST', url: `${BASE}/exportagentpdf/exportpdf`, payload: { status: 'Free', sortBy: 'hostIdentifier_asc' } })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.headers['content-type'], 'application/pdf')
  t.match(res.headers['content-disposition'], /^attachment; filename="agents-\d{8}T\d{6}Z\.pdf"$/)
  const pdf = res.rawPayload
  t.equal(pdf.subarray(0, 5).toString(), '%PDF-')
  t.match(pdf.subarray(-6).toString(), /%%EOF/)
  // 200 rows of at least 12 pt (long cells wrap): 34 at most under the title block of the
  // first page, 41 on each further page.
  const pages = pageObjects(pdf)
  t.ok(pages >= 6, `${pages} pages`)
  const text = pdfPages(pdf)
  t.equal(text.length, pages, 'one content stream per page')
  t.match(text[0], /Agents/)
  t.match(text[0], /Generated:\n\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC/)
  t.match(text[0], 'Records:\n200 agents')
  t.match(text[0], 'Sorted by:\nhostIdentifier_asc')
  t.match(text[0], 'Filters:\nstatus: Free')
  text.forEach((page, i) => {
    t.match(page, `Page ${i + 1} of ${pages}`, `page ${i + 1} is numbered`)
    t.match(page, /Host\nIP address\nConnection/, `page ${i + 1} repeats the table header`)
  })
  t.match(text[0], 'WS-0001')
  t.notMatch(text.join('\n'), 'WS-0000', 'the filter applies (WS-0000 is armed)')
  t.match(text[pages - 1], 'WS-0299')
})

t.test('PDF report: rows beyond the cap are left out, and the last line says how many', async (t) => {
  const rows = Array.from({ length: 8 }, (_, i) => ({ name: `row ${i}`, n: i, flag: i % 2 === 0, empty: null }))
  const stream = pdfStream({
    title: 'Capped',
    filters: [],
    generatedMs: Date.UTC(2025, 0, 1, 12),
    total: rows.length,
    noun: 'things',
    maxRows: 5,
    columns: [
      { header: 'Name', width: 2, value: (r) => r.name },
      { header: 'N', width: 1, align: 'right', value: (r) => r.n },
      { header: 'Flag', width: 1, value: (r) => r.flag },
      { header: 'Empty', width: 1, value: (r) => r.empty },
    ],
    rows,
  })
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk)
  const [page] = pdfPages(Buffer.concat(chunks))
  t.match(page, 'Generated:\n2025-01-01 12:00:00 UTC')
  t.match(page, 'Records:\n8 things (the first 5 are listed)')
  t.match(page, 'Filters:\nNone (every thing)')
  t.match(page, 'row 4')
  t.notMatch(page, 'row 5')
  t.match(page, '3 more things were left out; the CSV export holds every one.')
  t.match(page, 'Page 1 of 1')
  t.match(page, /\nYes\n/)

  const empty = pdfStream({ title: 'Nothing', filters: [['a', 'b']], generatedMs: 0, total: 0, noun: 'things', columns: [{ header: 'X', width: 1, value: () => 'x' }], rows: [] })
  const parts: Buffer[] = []
  for await (const chunk of empty) parts.push(chunk)
  t.match(pdfPages(Buffer.concat(parts))[0], 'No things match these filters.')

  const single = pdfStream({ title: 'One', filters: [], generatedMs: 0, total: 1, noun: 'things', columns: [{ header: 'X', width: 1, value: () => 'x' }], rows: ['a'] })
  const one: Buffer[] = []
  for await (const chunk of single) one.push(chunk)
  t.match(pdfPages(Buffer.concat(one))[0], 'Records:\n1 thing\n', 'one record: the noun in the singular')
})

t.test('PDF report: text beyond WinAnsi is drawn (an embedded font), characters no font has print as "?"', async (t) => {
  const names = ['Łódź-Biuro-PC01', 'Офис-ПК-07', 'Αθήνα-ΛΤ-3', 'zÜrich-ws', 'plain-host', '工作站-1 ☃', 'tab\there\u0007']
  const stream = pdfStream({
    title: 'Hosts in Łódź',
    filters: [['Hashtags', '#łódź']],
    generatedMs: Date.UTC(2025, 0, 1, 12),
    total: names.length,
    noun: 'hosts',
    columns: [
      { header: 'Host', width: 3, value: (r: string) => r },
      { header: 'Długość', width: 1, align: 'right', value: (r: string) => r.length },
    ],
    rows: names,
  })
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(chunk)
  const pdf = Buffer.concat(chunks)
  const [page] = pdfPages(pdf)
  for (const name of ['Łódź-Biuro-PC01', 'Офис-ПК-07', 'Αθήνα-ΛΤ-3', 'zÜrich-ws', 'plain-host']) t.match(page, `\n${name}\n`, name)
  t.match(page, 'Hosts in Łódź', 'the title')
  t.match(page, 'Hashtags: #łódź', 'a filter')
  t.match(page, 'Długość', 'a column header (bold)')
  t.match(page, '\n???-1 ☃\n', 'no glyph: "?" (the snowman is in the font)')
  t.match(page, '\ntab here?\n', 'a tab as a space, a control character as "?"')
  t.match(pdf.toString('latin1'), /\/BaseFont \/[A-Z]{6}\+DejaVuSansCondensed\b/, 'the regular face embedded as a subset')
  t.match(pdf.toString('latin1'), /\/BaseFont \/[A-Z]{6}\+DejaVuSansCondensed-Bold\b/, 'and the bold one')
  t.match(pdf.toString('latin1'), /\/BaseFont \/Helvetica\b/, 'WinAnsi text stays in Helvetica')
})

t.test('CSV writer: pulls rows only as the reader takes them', async (t) => {
  let pulled = 0
  function* rows() {
    for (let i = 0; i < 1_000_000; i++) {
      pulled++
      yield { i, text: 'x'.repeat(100) }
    }
  }
  const stream = csvStream(['i', 'text'], rows())
  // Read until the first rows are in, then leave the stream alone for a while.
  let head = ''
  while (!/\r\n1,x{100}\r\n/.test(head)) {
    const chunk = stream.read()
    if (chunk === null) await new Promise((resolve) => stream.once('readable', resolve))
    else head += chunk
  }
  t.match(head, /^i,text\r\n0,x{100}\r\n1,x{100}\r\n/)
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.ok(pulled < 2_000, `only ${pulled} of 1,000,000 rows were read ahead of a reader that took one chunk`)
  stream.destroy()

  const small = csvStream(
    ['a', 'b', 'c'],
    Readable.from([
      { a: '@SUM(A1)', b: '\tx', c: '+1' },
      { a: 'ok', b: -5, c: '\rcr' },
      { a: 'ＡＢ', b: '＝1', c: undefined },
    ]),
  )
  let text = ''
  for await (const chunk of small) text += chunk
  t.same(
    parseCsv(text),
    [
      ['a', 'b', 'c'],
      ["'@SUM(A1)", "'\tx", "'+1"],
      ['ok', '-5', "'\rcr"],
      ['ＡＢ', "'＝1", ''],
    ],
    'negative numbers stay numbers; text formulas are defused',
  )
})

t.test('peripherals aggregated by model: CSV and PDF, with the filters of GET peripherals, audited', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const { a, b, c } = await fleet(app)
  await addPeripheral(app, a.id, { vid: '0951', pid: '1666', class_code: '08', subclass_code: '06', protocol_code: '50', present: 0 })
  await addPeripheral(app, a.id, { vid: '16C0', pid: '0486', class_code: '03', subclass_code: '00', protocol_code: '00' })
  await query(app, "INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, '0951', '1666', 'Approved', 0, 'test')", b.id)
  await portsOf(app).agentState.refreshAgent(b.id)
  const before = await lastAuditId(app)

  const res = await call(app, admin, { method: 'POST', url: `${BASE}/peripheralsAggExport`, payload: { sortBy: 'whatever', pageSize: 5 } })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.headers['content-type'], 'text/csv; charset=utf-8')
  t.match(res.headers['content-disposition'], /^attachment; filename="peripherals-aggregated-\d{8}T\d{6}Z\.csv"$/)
  t.equal(res.headers['x-records-filtered'], '3', 'models matched')
  const rows = parseCsv(res.body)
  t.same(rows[0], [
    'vid',
    'pid',
    'guiVid',
    'guiPid',
    'devIcon',
    'devIconDescription',
    'hosts',
    'present',
    'approved',
    'notApproved',
    'isKnownAttackTool',
    'isVulnerablePeripheral',
    'vulnerability',
    'severity',
  ])
  t.same(
    rows.slice(1).map((r) => `${r[0]}:${r[1]}`),
    ['0951:1666', '046D:C077', '16C0:0486'],
    'most hosts first',
  )
  t.same(rows[1], ['0951', '1666', 'Kingston Technology', 'DataTraveler 100 G3/G4/SE9 G2/50', '3', 'Mass Storage', '3', '2', '1', '1', 'false', 'false', '', '4'])
  t.match(rows[3], ['16C0', '0486', String, String, '14', 'HID', '1', '1', '0', '1', 'true', 'false', /keyboard/, '2'])
  t.match(JSON.parse((await auditSince(app, before))[0].details), { format: 'csv', records: 3 })
  t.equal((await auditSince(app, before))[0].category, 'Peripherals')

  const filtered = await call(app, admin, { method: 'POST', url: `${BASE}/peripheralsAggExport`, payload: { Vendor: 'kingston', isUnapprovedPeripheral: 'true' } })
  const f = parseCsv(filtered.body)
  t.same(
    f.slice(1).map((r) => [r[0], r[6], r[7], r[9]]),
    [['0951', '1', '1', '1']],
    'filters apply to the peripherals before aggregation',
  )
  t.equal((await call(app, admin, { method: 'POST', url: `${BASE}/peripheralsAggExport`, payload: { vid: 'XYZ1' } })).statusCode, 400)

  const pdf = await call(app, admin, { method: 'POST', url: `${BASE}/peripheralsAggExportpdf/exportpdf`, payload: { hostIdentifier: 'charlie' } })
  t.equal(pdf.statusCode, 200, pdf.body)
  t.equal(pdf.headers['content-type'], 'application/pdf')
  t.match(pdf.headers['content-disposition'], /peripherals-aggregated-\d{8}T\d{6}Z\.pdf"$/)
  t.match(pdf.headers['x-records-filtered'], /^\d+$/)
  const [page] = pdfPages(pdf.rawPayload)
  t.match(page, 'Peripherals by model')
  t.match(page, 'Filters:\nhostIdentifier: charlie')
  t.match(page, 'Records:\n2 peripheral models')
  t.match(page, 'Kingston Technology')
  t.notMatch(page, '16C0')
  t.equal(c.uuid.length, 36)
})
