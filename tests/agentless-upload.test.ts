// The CSV import of agentless connections: the file's format, per-row answers with their
// lines, updates by name, limits, and the exports that write the same format.
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { build, call, login } from './helpers.js'
import { latestAudit, query, queryOne, queryValue } from './seed.js'

const API = '/prime/webui/agents/agentless'
const KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----'

function multipart(csv: string | Buffer, opts: { field?: string; type?: string; name?: string } = {}) {
  const boundary = '----prime-upload-boundary'
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="${opts.field ?? 'file'}"; filename="${opts.name ?? 'connections.csv'}"\r\nContent-Type: ${opts.type ?? 'text/csv'}\r\n\r\n`,
  )
  return {
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    payload: Buffer.concat([head, Buffer.isBuffer(csv) ? csv : Buffer.from(csv), Buffer.from(`\r\n--${boundary}--\r\n`)]),
  }
}

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t, { PRIME_POLLER_ENROLLMENT_SECRET: 'pes_upload-test-poller-secret' })
  const admin = await login(app)
  const upload = (csv: string | Buffer, opts?: Parameters<typeof multipart>[1]) => call(app, admin, { method: 'POST', url: `${API}/uploadconnectiondetailsfile`, ...multipart(csv, opts) })
  const count = async () => (await queryValue(app, 'SELECT count(*) FROM agentless_connections')) as number
  return { app, admin, upload, count }
}

t.test('the format: BOM, any column order and case, quoted fields over lines, blank lines', async (t) => {
  const { upload, app } = await setup(t)
  const csv =
    '\uFEFFUserName,NAME,address,Protocol,privateKey,isOverrideDefaults,pollingIntervalSeconds,timeoutSeconds\n' +
    'svc,db-01,10.0.0.1,ssh,"' +
    KEY.replace(/\n/g, '\r\n') +
    '",true,120,15\n' +
    '\n' +
    '"CORP\\svc, the ""service""",db-02,db-02.corp.example,SSH,"' +
    KEY +
    '",,,\n'
  const res = await upload(csv)
  t.equal(res.statusCode, 200, res.body)
  t.match(res.json(), { fileName: 'connections.csv', totalRows: 2, imported: 2, rejected: 0 })
  t.same(
    res.json().rows.map((r: any) => r.line),
    [2, 6],
    'a row is reported at the line it starts on; blank lines count as lines',
  )
  const row = (await queryOne(app, "SELECT * FROM agentless_connections WHERE name = 'db-02'")) as any
  t.equal(row.user_name, 'CORP\\svc, the "service"', 'quotes and commas inside a quoted field')
  t.equal(app.agentless.vault.open(row.credentials, row.id).privateKey, KEY, 'line breaks inside the key are kept')
})

t.test('per row: every reason, the line, names repeated in the file', async (t) => {
  const { upload, count } = await setup(t)
  const csv = [
    'name,address,protocol,port,useTls,userName,password,isOverrideDefaults,pollingIntervalSeconds,timeoutSeconds,pollerId',
    'ok-1,10.0.0.1,SSH,,,svc,pw-one-secret,,,,',
    'file-server,10.0.0.2,RDP,70000,maybe,svc,,,,,',
    'ok-1,10.0.0.3,SSH,,,svc,pw-two-secret,,,,',
    'ok-2,10.0.0.4,SSH,22,true,svc,pw-three-secret,true,60,60,',
    ',10.0.0.5,SSH,,,svc,pw,,,,',
    'ok-3,10.0.0.6,SSH,,,svc,pw-four-secret,,,,4d3c2b1a-0f9e-4a8b-9c7d-6e5f4a3b2c1d',
    'ok-4,10.0.0.7,SSH',
    'ok-5,10.0.0.8,WinRM,,false,svc,pw-five-secret,,,,',
  ].join('\r\n')
  const res = await upload(csv)
  t.equal(res.statusCode, 200, res.body)
  const body = res.json()
  t.match(body, { totalRows: 8, imported: 2, rejected: 6 })
  const byLine = new Map(body.rows.map((r: any) => [r.line, r]))
  const columns = (line: number) => (byLine.get(line) as any).errors.map((e: any) => e.column)
  t.match(byLine.get(2), { result: 'imported', name: 'ok-1', connectionId: Number })
  t.same(columns(3).sort(), ['password', 'port', 'protocol', 'useTls'], 'every reason of line 3')
  t.match(byLine.get(4), { result: 'rejected', errors: [{ column: 'name', reason: /line 2/ }] }, 'a repeated name is rejected after the first')
  t.ok(columns(5).includes('useTls') && columns(5).includes('timeoutSeconds'), 'TLS on SSH, timeout not below the interval')
  t.match(byLine.get(6), { name: null, errors: [{ column: 'name', reason: 'is required' }] })
  t.match(byLine.get(7), { errors: [{ column: 'pollerId', reason: /no worker poller/ }] })
  t.match(byLine.get(8), { errors: [{ column: null, reason: /3 cell/ }] })
  t.match(byLine.get(9), { result: 'imported' })
  t.equal(await count(), 2)
})

t.test('the uploaded file name is answered and audited without control, format or bidi characters', async (t) => {
  const { upload, app } = await setup(t)
  const res = await upload('name,address,protocol,userName,password\nok,10.0.0.1,SSH,svc,pw-one-secret\n', { name: 'hosts\u202evsc.exe\u200b\u2066.csv' })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().fileName, 'hostsvsc.exe.csv')
  const audited = (await latestAudit(app))[0]
  t.match(audited.description, 'from "hostsvsc.exe.csv"')
  t.notMatch(audited.details, /\\u202e|\u202e/i)
  const hidden = await upload('name,address,protocol,userName,password\n', { name: '\u202e\u200f' })
  t.equal(hidden.json().fileName, null, 'a name of nothing but them is no name')
})

t.test('updates by name: updated, unchanged, credentials kept when empty', async (t) => {
  const { upload, app } = await setup(t)
  const header = 'name,address,protocol,userName,password'
  await upload(`${header}\nweb-1,10.0.0.1,SSH,svc,first-secret-1\nweb-2,10.0.0.2,SSH,svc,second-secret-2\n`)
  const res = await upload(`${header}\nWEB-1,10.0.0.1,SSH,svc,\nweb-2,10.0.0.22,SSH,svc,\nweb-3,10.0.0.3,SSH,svc,third-secret-3\n`)
  t.match(res.json(), { imported: 1, updated: 2, unchanged: 0 }, 'a name in another case renames, another address updates')
  const again = await upload(`${header}\nWEB-1,10.0.0.1,SSH,svc,\nweb-2,10.0.0.22,SSH,svc,second-secret-2\n`)
  t.match(again.json(), { updated: 0, unchanged: 2 }, 'the same credential again changes nothing')
  const row = (await queryOne(app, "SELECT * FROM agentless_connections WHERE name = 'WEB-1'")) as any
  t.equal(app.agentless.vault.open(row.credentials, row.id).password, 'first-secret-1', 'an empty cell keeps the stored credential')
  const audit = (await query(app, "SELECT details FROM audit_trail WHERE description LIKE 'Imported agentless%'")) as { details: string }[]
  t.equal(audit.length, 3)
  for (const a of audit) t.notOk(/first-secret|second-secret|third-secret/.test(a.details), 'no credential in the audit record')
})

t.test('the whole file is refused: header, encoding, syntax, limits, media types', async (t) => {
  const { upload, count, app, admin } = await setup(t)
  const refused = async (what: string, csv: string | Buffer, status: number, detail: RegExp, opts?: Parameters<typeof multipart>[1]) => {
    const res = await upload(csv, opts)
    t.equal(res.statusCode, status, `${what}: ${res.body}`)
    t.match(res.json().detail, detail, what)
  }
  await refused('unknown column', 'name,address,protocol,userName,colour\n', 400, /unknown column "colour"/)
  await refused('repeated column', 'name,address,protocol,userName,Name\n', 400, /names the column name twice/)
  await refused('missing column', 'name,address,protocol\nx,10.0.0.1,SSH\n', 400, /lacks the required column\(s\) userName/)
  await refused('empty file', '', 400, /empty/)
  await refused(
    'not UTF-8',
    Buffer.concat([Buffer.from('name,address,protocol,userName,password\nok,10.0.0.1,SSH,svc,pw\nbad,10.0.0.2,SSH,'), Buffer.from([0xff, 0xfe]), Buffer.from(',pw\n')]),
    400,
    /not valid UTF-8 \(line 3\)/,
  )
  await refused('unclosed quote', 'name,address,protocol,userName,password\nok,10.0.0.1,SSH,svc,pw\nbad,"10.0.0.2,SSH,svc,pw\n', 400, /line 3: a quoted field is never closed/)
  await refused('stray quote', 'name,address,protocol,userName,password\nbad,10.0"0.2,SSH,svc,pw\n', 400, /line 2: a quote inside an unquoted field/)
  const rows = ['name,address,protocol,userName,password']
  for (let i = 0; i <= 10_000; i++) rows.push(`host-${i},10.0.${i >> 8}.${i & 255},SSH,svc,pw-${i}`)
  await refused('more than 10000 rows', rows.join('\n'), 400, /more than 10000 data rows; nothing was imported/)
  await refused('over 5 MiB', 'name,address,protocol,userName,password\n' + 'x'.repeat(5 * 1024 * 1024), 413, /.+/)
  await refused('another part name', 'name,address,protocol,userName\n', 400, /named file/, { field: 'upload' })
  await refused('not CSV', 'name,address,protocol,userName\n', 415, /must be CSV/, { type: 'image/png' })
  // Bodies that are not multipart at all, under a multipart media type: 400, never 500.
  const raw = (contentType: string, payload: string) => call(app, admin, { method: 'POST', url: `${API}/uploadconnectiondetailsfile`, headers: { 'content-type': contentType }, payload })
  for (const [what, contentType, payload] of [
    ['not multipart', 'multipart/form-data; boundary=x', 'not multipart'],
    ['a lone boundary', 'multipart/form-data; boundary=x', '--x'],
    ['a part never closed', 'multipart/form-data; boundary=x', '--x\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nname,address'],
    ['no boundary', 'multipart/form-data', '--x\r\n'],
    ['an empty boundary', 'multipart/form-data; boundary=', '--\r\n'],
  ]) {
    const res = await raw(contentType, payload)
    t.equal(res.statusCode, 400, `${what}: ${res.body}`)
    t.match(res.headers['content-type'], /^application\/problem\+json/)
    t.match(res.json(), { code: 'validation', detail: /not valid multipart\/form-data/, errors: [{ location: 'body', name: 'file' }] }, what)
  }
  const json = await call(app, admin, { method: 'POST', url: `${API}/uploadconnectiondetailsfile`, payload: { file: 'x' } })
  t.equal(json.statusCode, 415, 'JSON is not accepted here')
  t.equal(await count(), 0, 'nothing was imported')
})

t.test('exports: the status as CSV and PDF, the connections in the import format', async (t) => {
  const { upload, app, admin } = await setup(t)
  const lines = ['name,address,protocol,port,useTls,userName,password,isOverrideDefaults,pollingIntervalSeconds,timeoutSeconds']
  for (let i = 1; i <= 60; i++) lines.push(`host-${String(i).padStart(2, '0')},10.3.0.${i},${i % 4 ? 'SSH' : 'WinRM'},,,svc,pw-${i}-secret,${i % 3 === 0},${i % 3 === 0 ? '600,30' : ','}`)
  t.match((await upload(lines.join('\n'))).json(), { imported: 60 })
  const post = (what: string, payload?: object) => call(app, admin, { method: 'POST', url: `${API}/${what}`, ...(payload ? { payload } : {}) })

  const csv = await post('exportagentlesscsv', { ComputerName: 'host-0', SortBy: 'computerName_desc' })
  t.equal(csv.statusCode, 200)
  t.match(csv.headers['content-disposition'], /attachment; filename="agentless-status-\d{8}T\d{6}Z\.csv"/)
  t.equal(csv.headers['x-records-filtered'], String(csv.body.trim().split('\r\n').length - 1), 'says how many matched')
  const rows = csv.body.trim().split('\r\n')
  t.equal(
    rows[0],
    'id,computerName,address,protocol,port,userName,isOverrideDefaults,pollingIntervalSeconds,timeoutSeconds,pollerName,statusString,statusDescription,statusErrorDescription,startTime,endTime,durationMs,lastReachableTime,prevRunningErrors',
  )
  t.equal(rows.length, 10, 'host-01 to host-09')
  t.match(rows[1], /^9,host-09,10\.3\.0\.9,SSH,22,svc,true,600,30,,Pending,/)
  t.notOk(csv.body.includes('-secret'))
  t.equal((await post('exportagentlesscsv', { SortBy: 'password_asc' })).statusCode, 400)

  const pdf = await post('exportagentlesspdf', { IsOverrideDefaults: true })
  t.equal(pdf.statusCode, 200)
  t.equal(pdf.headers['content-type'], 'application/pdf')
  t.equal(pdf.rawPayload.subarray(0, 5).toString(), '%PDF-')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'agentless-pdf-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.writeFileSync(path.join(dir, 'status.pdf'), pdf.rawPayload)
  try {
    const text = execFileSync('pdftotext', ['-layout', path.join(dir, 'status.pdf'), '-'], { encoding: 'utf8' })
    t.match(text, /Agentless connections status/)
    t.match(text, /IsOverrideDefaults: true/)
    t.match(text, /host-03/)
    t.notOk(text.includes('host-01'), 'only the filtered rows')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    t.comment('pdftotext is not installed: the PDF text was not checked')
  }

  const exported = await post('exportcsvconnections')
  t.equal(exported.statusCode, 200)
  const out = exported.body.split('\r\n')
  t.equal(out[0], 'name,address,protocol,port,useTls,userName,password,privateKey,privateKeyPassphrase,isOverrideDefaults,pollingIntervalSeconds,timeoutSeconds,pollerId')
  t.equal(out[3], 'host-03,10.3.0.3,SSH,22,false,svc,,,,true,600,30,')
  t.equal(out[4], 'host-04,10.3.0.4,WinRM,5986,true,svc,,,,false,,,')
  const again = await upload(exported.body, { name: 'exported.csv' })
  t.match(again.json(), { totalRows: 60, imported: 0, updated: 0, unchanged: 60, rejected: 0 }, 'the export uploads again unchanged')
})
