// Pins the rules of report definitions: defaults, the filters each type takes, schedule
// and address validation (every problem named, nothing half-saved), unique names, the
// partial update, per-item answers of the array operations, profiles, the audit record
// of every change, and ReportsArguments describing exactly what is enforced.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { auditSince, insertRows, lastAuditId, query, queryOne } from './seed.js'
import { createReport, REPORTS } from './reports-support.js'

const UNKNOWN = '0e8f7d6c-5b4a-4392-8170-6f5e4d3c2b1a'
const count = async (app: FastifyInstance) => (await queryOne(app, 'SELECT count(*) AS n FROM reports')) as { n: number }
const names = (errors: { name: string }[]) => errors.map((e) => e.name).sort()

/** `n` report definitions as rows, for filling the table up to near its limit. */
function storedReports(n: number) {
  return Array.from({ length: n }, (_, i) => ({
    id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
    name: `r${i}`,
    name_key: `r${i}`,
    type: 'agentsInventory',
    format: 'CSV',
    owner: 'admin',
    created_ms: 0,
    updated_ms: 0,
  }))
}

t.test('create: defaults, owner, audit', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const before = await lastAuditId(app)
  const r = await createReport(app, token, { name: '  Fleet overview  ', type: 'agentsInventory', format: 'PDF' })
  t.match(r, {
    name: 'Fleet overview',
    description: null,
    type: 'agentsInventory',
    format: 'PDF',
    filters: {},
    schedule: null,
    recipients: [],
    sender: null,
    isActive: true,
    owner: 'admin',
    lastRun: null,
    nextRunTime: null,
    retention: { maxFiles: 30, maxTotalBytes: 536870912 },
  })
  t.match(r.id, /^[0-9a-f-]{36}$/)
  t.equal(r.creationTimeEpoch, Date.parse(r.createdTime))
  const [rec] = await auditSince(app, before)
  t.match(rec, {
    category: 'Reports',
    outcome: 'Succeeded',
    user_name: 'admin',
    operation_id: 'createReport',
    asset_key: r.id,
    asset_name: 'Fleet overview',
    asset_type: 'Report',
    asset_detail: 'ReportDefinition',
  })
  t.match(JSON.parse(rec.details), { name: 'Fleet overview', type: 'agentsInventory' })

  const scheduled = await createReport(app, token, {
    name: 'Daily attack tools',
    type: 'agentsInventory',
    format: 'CSV',
    filters: { hasKnownAttackTools: true, licenseStatus: ['Activated', 'Expired'] },
    schedule: { frequency: 'daily', timeOfDay: '06:00', timeZone: 'america/new_york' },
    recipients: ['secops@example.com', 'soc-lead@example.com'],
    retention: { maxFiles: 5 },
    description: 'For the morning shift.',
    id: UNKNOWN,
    owner: 'mallory',
    nextRunTime: '2000-01-01T00:00:00.000Z',
  })
  t.not(scheduled.id, UNKNOWN, 'a sent id is ignored')
  t.equal(scheduled.owner, 'admin', 'read-only properties are ignored')
  t.equal(scheduled.schedule.timeZone, 'America/New_York', 'the zone in its canonical spelling')
  t.same(scheduled.schedule, { frequency: 'daily', timeOfDay: '06:00', date: null, dayOfWeek: null, dayOfMonth: null, timeZone: 'America/New_York' })
  t.same(scheduled.retention, { maxFiles: 5, maxTotalBytes: 536870912 }, 'a retention key left out gets its default')
  const next = Date.parse(scheduled.nextRunTime)
  t.ok(next > Date.now() && next <= Date.now() + 86_400_000, 'next run within a day')
  t.equal(new Date(next).getUTCMinutes(), 0)

  const list = await call(app, token, { method: 'GET', url: `${REPORTS}/getall` })
  t.same(
    list.json().map((x: { name: string }) => x.name),
    ['Daily attack tools', 'Fleet overview'],
    'ordered by name',
  )
})

t.test('create: every invalid field is named, nothing is saved', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const bad = async (body: Record<string, unknown>, expected: string[], what: string) => {
    const res = await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: 'X', type: 'agentsInventory', format: 'PDF', ...body } })
    t.equal(res.statusCode, 400, what)
    t.same(names(res.json().errors ?? []), expected.sort(), `${what}: ${res.json().detail}`)
  }
  await bad({ filters: { vendor: 'Logitech' } }, ['filters/vendor'], 'a filter of another type')
  await bad({ type: 'eventsDigest', filters: { hostIdentifier: 'x', period: 'last7Days' } }, ['filters/hostIdentifier'], 'an agent filter on a digest')
  await bad({ filters: { colour: 'red' } }, ['filters/colour'], 'an unknown filter')
  await bad({ filters: { operationalStatus: 'Sleeping' } }, ['filters/operationalStatus'], 'a value outside the allowed ones')
  await bad({ filters: { hostIdentifier: 'a\u0000b' } }, ['filters/hostIdentifier'], 'a NUL in a text filter')
  await bad({ schedule: { frequency: 'once', date: '2031-02-31', timeOfDay: '09:00' } }, ['schedule/date'], '31 February')
  await bad({ schedule: { frequency: 'once', date: '2020-01-01', timeOfDay: '09:00' } }, ['schedule/date'], 'a once moment in the past')
  await bad({ schedule: { frequency: 'daily', timeOfDay: '09:00', timeZone: 'Mars/Olympus_Mons' } }, ['schedule/timeZone'], 'an unknown zone')
  await bad({ schedule: { frequency: 'daily', timeOfDay: '24:00' } }, ['schedule/timeOfDay'], 'hour 24')
  await bad({ schedule: { frequency: 'weekly', timeOfDay: '09:00' } }, ['schedule/dayOfWeek'], 'weekly without its day')
  await bad({ schedule: { frequency: 'monthly', timeOfDay: '09:00', dayOfMonth: 32 } }, ['schedule/dayOfMonth'], 'day 32')
  await bad({ schedule: { frequency: 'daily', timeOfDay: '09:00', dayOfWeek: 'Monday', date: '2031-01-01' } }, ['schedule/date', 'schedule/dayOfWeek'], 'fields the frequency does not use')
  await bad({ schedule: { frequency: 'hourly', timeOfDay: '09:00' } }, ['schedule/frequency'], 'an unknown frequency')
  await bad({ recipients: ['not-an-address'] }, ['recipients/0'], 'an invalid recipient')
  await bad({ recipients: ['a@example.com', 'b@example.com', 'A@Example.com'] }, ['recipients/2'], 'a recipient twice (case-insensitive)')
  await bad({ sender: 'prime at example.com' }, ['sender'], 'an invalid sender')
  await bad({ name: '   ' }, ['name'], 'a blank name')
  await bad({ name: 'tab\there' }, ['name'], 'a control character in the name')
  await bad({ retention: { maxFiles: 0 } }, ['retention/maxFiles'], 'retention below its minimum')
  await bad(
    { filters: { vendor: 'x' }, schedule: { frequency: 'weekly', timeOfDay: '09:00', timeZone: 'Nowhere/City' }, recipients: ['a@example.com', 'A@example.com'] },
    ['filters/vendor', 'recipients/1', 'schedule/dayOfWeek', 'schedule/timeZone'],
    'several problems at once, each named',
  )
  const missing = await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: 'X' } })
  t.equal(missing.statusCode, 400)
  t.same(names(missing.json().errors), ['format', 'type'], 'type and format are required')
  t.equal((await count(app)).n, 0, 'nothing was saved')
})

t.test('names are unique ignoring case; at most 1000 definitions', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await createReport(app, token, { name: 'Weekly Review', type: 'agentsInventory', format: 'PDF' })
  const dup = await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: ' weekly review', type: 'eventsDigest', format: 'CSV' } })
  t.equal(dup.statusCode, 409)
  t.match(dup.json().detail, /"Weekly Review" already exists/)
  const unicode = await createReport(app, token, { name: 'Übersicht', type: 'agentsInventory', format: 'PDF' })
  const dupUnicode = await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: 'ÜBERSICHT', type: 'agentsInventory', format: 'PDF' } })
  t.equal(dupUnicode.statusCode, 409, 'case-insensitive beyond ASCII')
  t.ok(unicode.id)
  t.equal((await count(app)).n, 2)

  const rows = storedReports(998)
  await insertRows(app, 'reports', rows)
  const over = await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: 'One too many', type: 'agentsInventory', format: 'PDF' } })
  t.equal(over.statusCode, 409)
  t.match(over.json().detail, /1000/)
  t.equal((await count(app)).n, 1000)
})

t.test('update: only what is sent changes', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const r = await createReport(app, token, {
    name: 'Peripherals',
    type: 'peripheralsInventory',
    format: 'PDF',
    description: 'Monday review',
    filters: { approved: false, vendor: 'logi' },
    schedule: { frequency: 'weekly', dayOfWeek: 'Monday', timeOfDay: '07:30', timeZone: 'Europe/Paris' },
    recipients: ['a@example.com'],
    sender: 'reports@example.com',
  })
  await createReport(app, token, { name: 'Other', type: 'agentsInventory', format: 'PDF' })
  const update = (body: Record<string, unknown>) => call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { id: r.id, ...body } })

  let res = await update({ format: 'CSV' })
  t.equal(res.statusCode, 200)
  t.match(res.json(), {
    format: 'CSV',
    description: 'Monday review',
    filters: { approved: false, vendor: 'logi' },
    recipients: ['a@example.com'],
    sender: 'reports@example.com',
    nextRunTime: r.nextRunTime,
  })
  t.ok(Date.parse(res.json().updatedTime) >= Date.parse(r.updatedTime))

  res = await update({ description: null, sender: null })
  t.match(res.json(), { description: null, sender: null, schedule: r.schedule }, 'null clears')

  res = await update({ type: 'agentsInventory' })
  t.equal(res.statusCode, 400, 'the stored filters do not fit the new type')
  t.same(names(res.json().errors), ['filters/approved', 'filters/vendor'])
  res = await update({ type: 'agentsInventory', filters: { hostIdentifier: 'fin' } })
  t.equal(res.statusCode, 200)
  t.match(res.json(), { type: 'agentsInventory', filters: { hostIdentifier: 'fin' } })

  res = await update({ schedule: { frequency: 'monthly', dayOfMonth: 31, timeOfDay: '08:00', timeZone: 'Europe/Paris' } })
  t.equal(res.statusCode, 200)
  t.not(res.json().nextRunTime, r.nextRunTime, 'a new schedule, a new next run')
  t.equal(new Date(res.json().nextRunTime).getUTCMinutes(), 0)

  res = await update({ isActive: false })
  t.match(res.json(), { isActive: false, nextRunTime: null })
  res = await update({ isActive: true })
  t.match(res.json(), { isActive: true })
  t.ok(res.json().nextRunTime)
  res = await update({ schedule: null })
  t.match(res.json(), { schedule: null, nextRunTime: null }, 'no schedule: runs on request only')

  res = await update({ name: 'OTHER' })
  t.equal(res.statusCode, 409, 'a name another report uses')
  res = await update({ name: 'peripherals' })
  t.equal(res.statusCode, 200, 'its own name in another case is fine')
  t.equal(res.json().name, 'peripherals')

  res = await update({ recipients: ['x@example.com', 'X@example.com'], schedule: { frequency: 'weekly', timeOfDay: '07:00' } })
  t.equal(res.statusCode, 400)
  t.same(names(res.json().errors), ['recipients/1', 'schedule/dayOfWeek'])
  const now = (await call(app, token, { method: 'GET', url: `${REPORTS}/get/${r.id}` })).json()
  t.same(now.recipients, ['a@example.com'], 'nothing of a refused update was saved')
  t.equal(now.schedule, null)

  res = await call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { id: UNKNOWN, name: 'x' } })
  t.equal(res.statusCode, 404)
  res = await call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { name: 'x' } })
  t.equal(res.statusCode, 400, 'id is required')

  const before = await lastAuditId(app)
  res = await update({ description: 'Changed', recipients: [] })
  const [rec] = await auditSince(app, before)
  t.match(rec, { category: 'Reports', operation_id: 'updateReport', asset_key: r.id, description: /description, recipients/ })
  t.same(JSON.parse(rec.details), { description: { from: null, to: 'Changed' }, recipients: { from: ['a@example.com'], to: [] } }, 'what changed, from and to')
})

t.test('get, array operations, profiles', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'viewer', 10)
  const manager = await userWithProfile(app, admin, 'manager', 20)
  const a = await createReport(app, manager, { name: 'A', type: 'agentsInventory', format: 'PDF', schedule: { frequency: 'daily', timeOfDay: '05:00' } })
  const b = await createReport(app, manager, { name: 'B', type: 'auditTrailDigest', format: 'CSV' })
  t.equal(a.owner, 'manager')

  t.equal((await call(app, user, { method: 'GET', url: `${REPORTS}/getall` })).statusCode, 200, 'a User reads')
  t.equal((await call(app, user, { method: 'GET', url: `${REPORTS}/get/${a.id}` })).json().runs.length, 0, 'with its runs')
  t.equal((await call(app, user, { method: 'POST', url: `${REPORTS}/create`, payload: { name: 'C', type: 'agentsInventory', format: 'PDF' } })).statusCode, 403, 'a User cannot create')
  t.equal((await call(app, user, { method: 'POST', url: `${REPORTS}/RequestForRun`, payload: [a.id] })).statusCode, 403, 'nor run')
  t.equal((await call(app, admin, { method: 'GET', url: `${REPORTS}/get/not-a-uuid` })).statusCode, 400)
  t.equal((await call(app, admin, { method: 'GET', url: `${REPORTS}/get/${UNKNOWN}` })).statusCode, 404)
  t.equal((await call(app, admin, { method: 'GET', url: `${REPORTS}/get/${a.id.toUpperCase()}` })).statusCode, 200, 'an id in capitals')

  for (const op of ['activateReport', 'deactivateReport', 'delete', 'RequestForRun']) {
    t.equal((await call(app, manager, { method: 'POST', url: `${REPORTS}/${op}`, payload: [] })).statusCode, 400, `${op}: an empty list`)
    t.equal((await call(app, manager, { method: 'POST', url: `${REPORTS}/${op}`, payload: 'null', headers: { 'content-type': 'application/json' } })).statusCode, 400, `${op}: null`)
    t.equal((await call(app, manager, { method: 'POST', url: `${REPORTS}/${op}`, payload: ['nope'] })).statusCode, 400, `${op}: not a uuid`)
  }

  let res = await call(app, manager, { method: 'POST', url: `${REPORTS}/deactivateReport`, payload: [a.id, UNKNOWN, b.id] })
  t.same(res.json(), {
    succeeded: 2,
    failed: 1,
    results: [
      { id: a.id, status: 'done', reason: null, code: null },
      { id: UNKNOWN, status: 'failed', reason: 'No report with this id.', code: 'not-found' },
      { id: b.id, status: 'done', reason: null, code: null },
    ],
  })
  t.match((await call(app, admin, { method: 'GET', url: `${REPORTS}/get/${a.id}` })).json(), { isActive: false, nextRunTime: null })
  res = await call(app, manager, { method: 'POST', url: `${REPORTS}/activateReport`, payload: [a.id] })
  t.equal(res.json().succeeded, 1)
  t.ok((await call(app, admin, { method: 'GET', url: `${REPORTS}/get/${a.id}` })).json().nextRunTime)

  // A run already open (here: one a server left running) makes RequestForRun conflict for that report.
  const open = '1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f'
  await query(app, "INSERT INTO report_runs (id, report_id, trigger, due_ms, queued_ms, started_ms, status, definition, format) VALUES (?, ?, 'request', 1, 1, 1, 'running', '{}', 'PDF')", open, a.id)
  const before = await lastAuditId(app)
  res = await call(app, manager, { method: 'POST', url: `${REPORTS}/RequestForRun`, payload: [a.id, b.id, UNKNOWN, b.id] })
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.match(body, {
    succeeded: 2,
    failed: 2,
    results: [
      { id: a.id, status: 'failed', code: 'conflict', reason: `Run ${open} is already running.`, runId: null },
      { id: b.id, status: 'done', code: null },
      { id: UNKNOWN, status: 'failed', code: 'not-found', runId: null },
      { id: b.id, status: 'done', code: null },
    ],
  })
  t.equal(body.runIds.length, 1, 'the same id twice is run once')
  t.equal(body.results[1].runId, body.runIds[0])
  t.equal(body.results[3].runId, body.runIds[0])
  const [rec] = await auditSince(app, before)
  t.match(rec, { category: 'Reports', operation_id: 'requestReportRun', asset_key: b.id })
  t.match(JSON.parse(rec.details), { runs: [{ reportId: b.id, runId: body.runIds[0] }], failed: [{ id: a.id }, { id: UNKNOWN }] })
  await app.reportScheduler.idle()
  const runB = (await call(app, admin, { method: 'GET', url: `${REPORTS}/get/${b.id}` })).json()
  t.match(runB.runs, [{ runId: body.runIds[0], trigger: 'request', requestedBy: 'manager', status: 'succeeded' }])

  res = await call(app, manager, { method: 'POST', url: `${REPORTS}/delete`, payload: [b.id, UNKNOWN] })
  t.match(res.json(), {
    succeeded: 1,
    failed: 1,
    results: [
      { id: b.id, status: 'done' },
      { id: UNKNOWN, status: 'failed', code: 'not-found' },
    ],
  })
  t.equal((await call(app, admin, { method: 'GET', url: `${REPORTS}/get/${b.id}` })).statusCode, 404)
  t.equal((await queryOne(app, 'SELECT count(*) AS n FROM report_runs WHERE report_id = ?', b.id))!.n, 0, 'its runs went with it')
  const deleted = (await auditSince(app, before)).find((x) => x.operation_id === 'deleteReports')!
  t.match(deleted, { asset_key: b.id, asset_name: 'B', description: 'Deleted report(s) "B"' }, 'the audit record names it (and stays)')
})

t.test('ReportsArguments describes what is enforced', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const res = await call(app, token, { method: 'GET', url: `${REPORTS}/ReportsArguments` })
  t.equal(res.statusCode, 200)
  const args = res.json()
  t.same(
    args.types.map((x: { type: string }) => x.type),
    ['agentsInventory', 'peripheralsInventory', 'riskInsightsSummary', 'eventsDigest', 'auditTrailDigest'],
  )
  const filtersOf = (type: string) => args.types.find((x: { type: string }) => x.type === type).filters.map((f: { name: string }) => f.name)
  const spec = app.contract.spec.components.schemas.ReportFilters
  const all = new Set(args.types.flatMap((x: { filters: { name: string }[] }) => x.filters.map((f) => f.name)))
  t.same([...all].sort(), Object.keys(spec.properties).sort(), 'every filter of the contract belongs to a type, and no other')
  t.same(filtersOf('eventsDigest'), ['period', 'minimumSeverity', 'categories', 'source', 'globalSearch'])
  t.match(
    args.types[0].filters.find((f: { name: string }) => f.name === 'operationalStatus'),
    { valueType: 'choice', allowedValues: ['Armed', 'Free'] },
  )
  t.same(args.formats, [
    { format: 'PDF', mediaType: 'application/pdf', fileExtension: 'pdf' },
    { format: 'CSV', mediaType: 'text/csv', fileExtension: 'csv' },
  ])
  t.same(args.frequencies.find((f: { frequency: string }) => f.frequency === 'weekly').fields, ['dayOfWeek', 'timeOfDay', 'timeZone'])
  t.equal(args.timeZones[0], 'UTC')
  t.ok(args.timeZones.includes('Europe/Paris') && args.timeZones.includes('Asia/Jerusalem'))
  t.match(args, { smtpConfigured: false, defaults: { timeZone: 'UTC', sender: null, retention: { maxFiles: 30, maxTotalBytes: 536870912 } }, limits: { pdfMaxRows: 5000, maxReports: 1000 } })

  // Every filter it lists is accepted on its type, and refused on the others.
  for (const type of args.types) {
    for (const f of type.filters) {
      const value = { text: 'x', boolean: true, integer: 2, choice: f.allowedValues?.[0], multiChoice: f.allowedValues?.slice(0, 1), integerList: [1] }[f.valueType as string]
      const ok = await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: `${type.type}-${f.name}`, type: type.type, format: 'CSV', filters: { [f.name]: value } } })
      t.equal(ok.statusCode, 200, `${type.type} takes ${f.name}`)
      const other = args.types.find((x: { type: string; filters: { name: string }[] }) => !x.filters.some((g) => g.name === f.name))
      const no = await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: `${other.type}-${f.name}`, type: other.type, format: 'CSV', filters: { [f.name]: value } } })
      t.equal(no.statusCode, 400, `${other.type} refuses ${f.name}`)
    }
  }
  const smtp = await build(t, { PRIME_SMTP_URL: 'smtp://127.0.0.1:2525', PRIME_SMTP_FROM: 'reports@example.com' })
  const withSmtp = (await call(smtp, await login(smtp), { method: 'GET', url: `${REPORTS}/ReportsArguments` })).json()
  t.match(withSmtp, { smtpConfigured: true, defaults: { sender: 'reports@example.com' } })
})

t.test('RequestForRun: two requests at once for one report queue one run', async (t) => {
  // One open run per report: the second of two requests at once sees the first's run and
  // answers conflict for it, whichever way they interleave.
  const app = await build(t)
  const token = await login(app)
  // Runs are not started meanwhile: a run finished before the second request looks would
  // rightly let it queue another.
  const scheduler = app.reportScheduler
  const kick = scheduler.kick
  scheduler.kick = async () => {}
  t.teardown(() => {
    scheduler.kick = kick
  })
  for (let round = 0; round < 10; round++) {
    const r = await createReport(app, token, { name: `Race ${round}`, type: 'agentsInventory', format: 'CSV' })
    const ask = () => call(app, token, { method: 'POST', url: `${REPORTS}/RequestForRun`, payload: [r.id] })
    const answers = await Promise.all([ask(), ask()])
    t.same(
      answers.map((a) => a.statusCode),
      [200, 200],
    )
    t.same(answers.map((a) => a.json().succeeded).sort(), [0, 1], `round ${round}: one request queued a run, the other conflicted`)
    t.equal(Number((await queryOne<{ n: number }>(app, 'SELECT count(*) AS n FROM report_runs WHERE report_id = ?', r.id))!.n), 1, `round ${round}: one run`)
  }
  scheduler.kick = kick
  await scheduler.kick()
  await scheduler.idle()
})

t.test('the same name given twice at once: one report, the other answers 409', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const other = await createReport(app, token, { name: 'Renamed from', type: 'agentsInventory', format: 'CSV' })
  const create = (name: string) => call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name, type: 'agentsInventory', format: 'CSV' } })
  for (let round = 0; round < 6; round++) {
    const name = `Same ${round}`
    const rename = call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { id: other.id, name: name.toUpperCase() } })
    const answers = await Promise.all([create(name), create(name.toLowerCase()), rename])
    t.same(answers.map((a) => a.statusCode).sort(), [200, 409, 409], `round ${round}: one took the name, the others were refused: ${answers.map((a) => a.body.slice(0, 100)).join(' | ')}`)
  }
})

t.test('creates at once near the limit: never more than 1000 definitions, the others 409', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const rows = storedReports(997)
  await insertRows(app, 'reports', rows)
  const answers = await Promise.all(
    Array.from({ length: 8 }, (_, i) => call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: { name: `Race ${i}`, type: 'agentsInventory', format: 'CSV' } })),
  )
  t.same(answers.map((a) => a.statusCode).sort(), [200, 200, 200, 409, 409, 409, 409, 409], `only the creates the limit left room for: ${answers.map((a) => a.body.slice(0, 100)).join(' | ')}`)
  t.ok(
    answers.filter((a) => a.statusCode === 409).every((a) => /1000/.test(a.json().detail)),
    'the refusals name the limit',
  )
  t.equal(Number((await count(app)).n), 1000)
})
