// Pins when reports run: due times in their time zone (daylight-saving gaps and repeats,
// short months), and the scheduler driven through tick(now): each due time queued
// exactly once, one catch-up run after downtime, inactive reports skipped, and a restart
// on the same data directory neither re-running nor losing anything.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { IANAZone } from 'luxon'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { latestDue, localInstant, nextDue, type Schedule } from '../lib/reports/schedule.js'
import { ADMIN_PASSWORD, build, call, login, testBackend, testDatabaseEnv } from './helpers.js'
import { query } from './seed.js'
import { addAgent } from './fixtures/fleet.js'
import { createReport, REPORTS } from './reports-support.js'

const at = (s: string) => Date.parse(s)
const sched = (s: Partial<Schedule>): Schedule => ({ frequency: 'daily', timeOfDay: '00:00', date: null, dayOfWeek: null, dayOfMonth: null, timeZone: 'UTC', ...s })
const next = (s: Partial<Schedule>, after: string) => {
  const due = nextDue(sched(s), at(after))
  return due === null ? null : new Date(due).toISOString()
}
const DAY = 86_400_000

t.test("due times in the schedule's time zone", async (t) => {
  t.equal(next({ timeOfDay: '06:00', timeZone: 'America/New_York' }, '2025-01-13T12:00:00Z'), '2025-01-14T11:00:00.000Z', 'daily, New York in winter (UTC-5)')
  t.equal(next({ timeOfDay: '06:00', timeZone: 'America/New_York' }, '2025-07-13T12:00:00Z'), '2025-07-14T10:00:00.000Z', 'daily, New York in summer (UTC-4)')
  t.equal(next({ timeOfDay: '06:00', timeZone: 'UTC' }, '2025-01-13T06:00:00Z'), '2025-01-14T06:00:00.000Z', 'strictly after: a due time equal to "after" is not next')
  t.equal(next({ frequency: 'weekly', dayOfWeek: 'Monday', timeOfDay: '07:30', timeZone: 'Europe/Paris' }, '2025-01-12T10:00:00Z'), '2025-01-13T06:30:00.000Z', 'weekly Monday 07:30 Paris')
  t.equal(next({ frequency: 'weekly', dayOfWeek: 'Monday', timeOfDay: '07:30', timeZone: 'Europe/Paris' }, '2025-01-13T06:30:00Z'), '2025-01-20T06:30:00.000Z', 'then a week later')
  t.equal(
    next({ frequency: 'weekly', dayOfWeek: 'Sunday', timeOfDay: '23:30', timeZone: 'Pacific/Kiritimati' }, '2025-01-11T00:00:00Z'),
    '2025-01-12T09:30:00.000Z',
    'a zone 14 hours ahead: its Sunday 23:30 is 09:30 UTC',
  )
  t.equal(next({ timeOfDay: '01:00', timeZone: 'Pacific/Pago_Pago' }, '2025-01-13T11:00:00Z'), '2025-01-13T12:00:00.000Z', 'a zone 11 hours behind')
  t.equal(next({ timeOfDay: '09:15', timeZone: 'Asia/Kolkata' }, '2025-01-13T00:00:00Z'), '2025-01-13T03:45:00.000Z', 'a half-hour offset')

  t.equal(next({ frequency: 'monthly', dayOfMonth: 31, timeOfDay: '08:00', timeZone: 'Europe/Paris' }, '2025-02-01T00:00:00Z'), '2025-02-28T07:00:00.000Z', 'day 31 runs on the last day of February')
  t.equal(next({ frequency: 'monthly', dayOfMonth: 31, timeOfDay: '08:00', timeZone: 'UTC' }, '2024-02-01T00:00:00Z'), '2024-02-29T08:00:00.000Z', 'and on the 29th in a leap year')
  t.equal(next({ frequency: 'monthly', dayOfMonth: 31, timeOfDay: '08:00', timeZone: 'UTC' }, '2025-02-28T08:00:00Z'), '2025-03-31T08:00:00.000Z', 'then on the 31st of March')
  t.equal(next({ frequency: 'monthly', dayOfMonth: 15, timeOfDay: '08:00', timeZone: 'UTC' }, '2025-12-20T00:00:00Z'), '2026-01-15T08:00:00.000Z', 'across the year end')

  t.equal(next({ frequency: 'once', date: '2025-03-01', timeOfDay: '09:00', timeZone: 'Europe/Paris' }, '2025-02-01T00:00:00Z'), '2025-03-01T08:00:00.000Z', 'once, ahead')
  t.equal(next({ frequency: 'once', date: '2025-03-01', timeOfDay: '09:00', timeZone: 'Europe/Paris' }, '2025-03-01T08:00:00Z'), null, 'once, passed: no next time')
})

t.test('daylight-saving changes', async (t) => {
  // Paris skips 02:00-03:00 on 2025-03-30 and repeats 02:00-03:00 on 2025-10-26.
  t.equal(next({ timeOfDay: '02:30', timeZone: 'Europe/Paris' }, '2025-03-29T12:00:00Z'), '2025-03-30T01:00:00.000Z', 'a skipped time runs at the first instant after the gap (03:00 CEST)')
  t.equal(next({ timeOfDay: '02:30', timeZone: 'Europe/Paris' }, '2025-03-30T01:00:00Z'), '2025-03-31T00:30:00.000Z', 'the next day is normal again')
  t.equal(next({ timeOfDay: '02:30', timeZone: 'Europe/Paris' }, '2025-10-25T12:00:00Z'), '2025-10-26T00:30:00.000Z', 'a repeated time runs at its first occurrence (CEST)')
  t.equal(next({ timeOfDay: '02:30', timeZone: 'Europe/Paris' }, '2025-10-26T00:30:00Z'), '2025-10-27T01:30:00.000Z', 'and only once that day: the second occurrence is not a due time')
  t.equal(next({ timeOfDay: '02:00', timeZone: 'America/New_York' }, '2025-03-08T12:00:00Z'), '2025-03-09T07:00:00.000Z', 'New York: 02:00 does not exist on 2025-03-09; 03:00 EDT')
  t.equal(next({ timeOfDay: '01:30', timeZone: 'America/New_York' }, '2025-11-01T12:00:00Z'), '2025-11-02T05:30:00.000Z', 'New York: 01:30 happens twice on 2025-11-02; the EDT one')
  const zone = IANAZone.create('Europe/London')
  t.equal(new Date(localInstant(zone, 2025, 3, 30, 1, 15)).toISOString(), '2025-03-30T01:00:00.000Z', 'London 01:15 in the gap: 02:00 BST')
})

t.test('the latest due time after downtime', async (t) => {
  const s = sched({ timeOfDay: '06:00' })
  const first = at('2025-01-10T06:00:00Z')
  t.same(latestDue(s, first, at('2025-01-10T07:00:00Z')), { due: first, missed: 0 }, 'on time: nothing missed')
  t.same(latestDue(s, first, at('2025-01-13T07:00:00Z')), { due: at('2025-01-13T06:00:00Z'), missed: 3 }, 'three days later: the latest of four')
  t.same(latestDue(s, first, at('2025-01-13T05:59:59Z')), { due: at('2025-01-12T06:00:00Z'), missed: 2 }, 'a second before the next one')
})

/** An app on a given data directory (to stop it and start another on the same data). */
async function appOn(dir: string, database: Record<string, string>) {
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent', PRIME_RATE_LIMIT_MAX: '100000', ...database })
  return buildApp({ config, logger: false, validateResponses: true })
}

const runsOf = async (app: Awaited<ReturnType<typeof appOn>>, token: string, id: string) => (await call(app, token, { method: 'GET', url: `${REPORTS}/get/${id}` })).json()

t.test('the scheduler: exactly once per due time, catch-up, inactive, restart', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-reports-sched-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const database = await testDatabaseEnv(t)
  let app = await appOn(dir, database)
  t.teardown(() => app.close())
  let token = await login(app)
  await addAgent(app)
  const weekly = await createReport(app, token, {
    name: 'Weekly',
    type: 'agentsInventory',
    format: 'CSV',
    schedule: { frequency: 'weekly', dayOfWeek: 'Wednesday', timeOfDay: '09:00', timeZone: 'Europe/Paris' },
  })
  const daily = await createReport(app, token, { name: 'Daily', type: 'agentsInventory', format: 'CSV', schedule: { frequency: 'daily', timeOfDay: '06:00' } })
  const N = Date.parse(weekly.nextRunTime)
  t.ok(N > Date.now(), 'the next run is ahead')
  t.equal(new Date(N).getUTCDay(), 3, 'on a Wednesday')
  const scheduler = () => app.reportScheduler

  // The daily report may fall due before the weekly one: only the weekly one is counted here.
  await scheduler().tick(N - 1)
  await scheduler().idle()
  t.same((await runsOf(app, token, weekly.id)).runs, [], 'nothing before the due time')
  const first = await scheduler().tick(N + 1000)
  t.ok(first.length >= 1, 'queued at the due time')
  t.same(await scheduler().tick(N + 2000), [], 'not again for the same due time')
  t.same(await scheduler().tick(N + 3000), [], 'nor on any later tick before the next one')
  await scheduler().idle()
  let w = await runsOf(app, token, weekly.id)
  t.equal(w.runs.length, 1, 'one run')
  t.match(w.runs[0], { trigger: 'schedule', status: 'succeeded', dueTime: new Date(N).toISOString(), requestedBy: null })
  t.equal(w.nextRunTime, new Date(N + 7 * DAY).toISOString(), 'the next one a week later')

  // Three weeks of downtime: one catch-up run for the latest missed time, not three.
  const late = N + 21 * DAY + 3_600_000
  await scheduler().tick(late)
  await scheduler().idle()
  w = await runsOf(app, token, weekly.id)
  t.equal(w.runs.length, 2, 'one more run, not a burst')
  t.match(w.runs[0], { trigger: 'catchUp', status: 'succeeded', dueTime: new Date(N + 21 * DAY).toISOString() })
  t.equal(w.nextRunTime, new Date(N + 28 * DAY).toISOString())
  const d = await runsOf(app, token, daily.id)
  // Its first due time came with the ticks around N or not, depending on today's date.
  const dailyOnTime = Date.parse(daily.nextRunTime) <= N + 3000 ? 1 : 0
  t.equal(d.runs.length, dailyOnTime + 1, 'the daily report: one catch-up run for three weeks of due times')
  t.equal(d.runs[0].trigger, 'catchUp')
  t.ok(late - Date.parse(d.runs[0].dueTime) < DAY && Date.parse(d.runs[0].dueTime) <= late, 'the latest due time at or before the tick')

  // Inactive reports are skipped and have no next time.
  const off = await call(app, token, { method: 'POST', url: `${REPORTS}/deactivateReport`, payload: [weekly.id] })
  t.equal(off.json().succeeded, 1)
  t.equal((await runsOf(app, token, weekly.id)).nextRunTime, null, 'no next run while inactive')
  await scheduler().tick(N + 60 * DAY)
  await scheduler().idle()
  t.equal((await runsOf(app, token, weekly.id)).runs.length, 2, 'no run while inactive')

  // Restart on the same data: nothing due is queued twice; queued and finished runs stay.
  const dailyRuns = (await runsOf(app, token, daily.id)).runs.length
  const dailyNext = Date.parse((await runsOf(app, token, daily.id)).nextRunTime)
  await app.close()
  app = await appOn(dir, database)
  token = await login(app)
  t.same(await scheduler().tick(dailyNext - 1), [], 'after a restart, nothing already run runs again')
  await scheduler().idle()
  t.equal((await runsOf(app, token, daily.id)).runs.length, dailyRuns, 'the same runs')
  t.equal((await scheduler().tick(dailyNext + 1000)).length, 1, 'the next due time runs once')
  await scheduler().idle()
  const after = await runsOf(app, token, daily.id)
  t.equal(after.runs.length, dailyRuns + 1)
  t.equal(after.runs[0].trigger, 'schedule')

  // Activated again: the next time counts from now; due times while inactive are not caught up.
  const on = await call(app, token, { method: 'POST', url: `${REPORTS}/activateReport`, payload: [weekly.id, weekly.id] })
  t.match(on.json(), { succeeded: 2, failed: 0 })
  const again = await runsOf(app, token, weekly.id)
  t.ok(Date.parse(again.nextRunTime) > Date.now() && Date.parse(again.nextRunTime) <= Date.now() + 7 * DAY, 'the next Wednesday 09:00 from now')
})

t.test('a run the server stopped in the middle of', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-reports-sched-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const database = await testDatabaseEnv(t)
  let app = await appOn(dir, database)
  let token = await login(app)
  const r = await createReport(app, token, { name: 'Interrupted', type: 'agentsInventory', format: 'CSV' })
  // What a crash leaves behind: a run marked running, and one still queued.
  const now = Date.now()
  const insert = (...values: unknown[]) =>
    query(app, "INSERT INTO report_runs (id, report_id, trigger, due_ms, queued_ms, started_ms, status, definition, format) VALUES (?, ?, 'request', ?, ?, ?, ?, ?, 'CSV')", ...values)
  const definition = JSON.stringify({ id: r.id, name: r.name, description: null, type: r.type, format: r.format, filters: {}, schedule: null, recipients: [], sender: null })
  await insert('0f3c2b1a-0000-4000-8000-000000000001', r.id, now - 2000, now - 2000, now - 1900, 'running', definition)
  await insert('0f3c2b1a-0000-4000-8000-000000000002', r.id, now - 1000, now - 1000, null, 'queued', definition)
  const part = path.join(dir, 'reports', r.id, '0f3c2b1a-0000-4000-8000-000000000001.csv.part')
  fs.mkdirSync(path.dirname(part), { recursive: true })
  fs.writeFileSync(part, 'hostIdentifier\r\nhalf a fi')
  await app.close()
  app = await appOn(dir, database)
  t.teardown(() => app.close())
  token = await login(app)
  await app.reportScheduler.idle()
  const runs = (await runsOf(app, token, r.id)).runs
  t.match(
    runs.find((x: { runId: string }) => x.runId.endsWith('1')),
    { status: 'failed', reason: /server stopped/ },
    'the one running is failed, with the reason',
  )
  t.match(
    runs.find((x: { runId: string }) => x.runId.endsWith('2')),
    { status: 'succeeded' },
    'the one queued runs after the restart',
  )
  // PostgreSQL keeps report files in the database (report_files): no file in the data dir to clean.
  if (testBackend === 'sqlite') t.notOk(fs.existsSync(part), 'the half-written file is gone')
})

t.test('a once schedule runs once and then has no next time', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const tomorrow = new Date(Date.now() + DAY).toISOString().slice(0, 10)
  const r = await createReport(app, token, { name: 'One-off', type: 'auditTrailDigest', format: 'CSV', schedule: { frequency: 'once', date: tomorrow, timeOfDay: '12:00' } })
  const due = Date.parse(r.nextRunTime)
  t.equal(r.nextRunTime, `${tomorrow}T12:00:00.000Z`)
  t.equal((await app.reportScheduler.tick(due + 10)).length, 1)
  await app.reportScheduler.idle()
  const after = (await call(app, token, { method: 'GET', url: `${REPORTS}/get/${r.id}` })).json()
  t.equal(after.nextRunTime, null, 'no next time')
  t.equal(after.isActive, true, 'still active (activation was not asked to change)')
  t.same(await app.reportScheduler.tick(due + 7 * DAY), [], 'never again')
  // Once its moment has passed (here: the stored date moved back), activating it fails for that item.
  await query(app, 'UPDATE reports SET schedule = ? WHERE id = ?', JSON.stringify({ ...after.schedule, date: '2020-01-01' }), r.id)
  await call(app, token, { method: 'POST', url: `${REPORTS}/deactivateReport`, payload: [r.id] })
  const on = await call(app, token, { method: 'POST', url: `${REPORTS}/activateReport`, payload: [r.id, '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d'] })
  t.match(on.json(), {
    succeeded: 0,
    failed: 2,
    results: [
      { id: r.id, status: 'failed', code: 'invalid', reason: /has passed/ },
      { id: '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', status: 'failed', code: 'not-found' },
    ],
  })
  const upd = await call(app, token, { method: 'POST', url: `${REPORTS}/update`, payload: { id: r.id, isActive: true } })
  t.equal(upd.statusCode, 400, 'update cannot activate it either without a new date')
  t.match(upd.json().errors, [{ name: 'isActive' }])
})

t.test('a schedule that cannot be computed is taken off the schedule, not retried in a loop', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const r = await createReport(app, token, { name: 'Odd zone', type: 'agentsInventory', format: 'CSV', schedule: { frequency: 'daily', timeOfDay: '06:00' } })
  // What a time zone database without this zone would leave.
  await query(app, 'UPDATE reports SET schedule = ?, next_run_ms = ? WHERE id = ?', JSON.stringify({ ...r.schedule, timeZone: 'Atlantis/Poseidonia' }), Date.now() - 1000, r.id)
  t.same(await app.reportScheduler.tick(), [])
  const after = (await call(app, token, { method: 'GET', url: `${REPORTS}/get/${r.id}` })).json()
  t.equal(after.nextRunTime, null)
  t.same(await app.reportScheduler.tick(Date.now() + 2 * DAY), [], 'and it stays off')
})
