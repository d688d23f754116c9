// The poller gateway: registration with the enrollment secret, the poller's own
// credential, heartbeats and instructions, assignments with credentials only for the
// poller they belong to, run reports answered per run, events on reachability changes,
// and the upkeep of quiet pollers and abandoned runs.
import t from 'tap'
import { build, call, login } from './helpers.js'
import { query, queryOne, queryValue } from './seed.js'
import { sweepAgentless, RUN_GIVE_UP_MS, workerPollerHealth } from '../lib/agentless/index.js'

const SECRET = 'pes_gateway-test-poller-secret'
const API = '/prime/webui/agents/agentless'
const PASSWORD = 'Correct-horse-battery'
let n = 0
const runId = () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`

async function setup(t: Parameters<typeof build>[0], secret: string | null = SECRET) {
  const app = await build(t, secret === null ? {} : { PRIME_POLLER_ENROLLMENT_SECRET: secret })
  const admin = await login(app)
  const register = (name: string, enrollmentSecret = SECRET) =>
    app.inject({ method: 'POST', url: `${API}/poller/register`, payload: { enrollmentSecret, name, hostName: 'poller-vm', version: '1.0.0' } })
  const as = (credential: string) => ({
    heartbeat: (body: object = { version: '1.0.0' }) => app.inject({ method: 'POST', url: `${API}/poller/heartbeat`, headers: { authorization: `Bearer ${credential}` }, payload: body }),
    connections: () => app.inject({ method: 'GET', url: `${API}/poller/connections`, headers: { authorization: `Bearer ${credential}` } }),
    runs: (runs: object[]) => app.inject({ method: 'POST', url: `${API}/poller/runs`, headers: { authorization: `Bearer ${credential}` }, payload: { runs } }),
  })
  const activate = (pollerId: string, isActivated = true) => call(app, admin, { method: 'PUT', url: `${API}/workerpollerdetails/activatedstatus`, payload: { pollerId, isActivated } })
  const connection = async (name: string, pollerId: string | null) =>
    (await call(app, admin, { method: 'POST', url: `${API}/connectiondetails`, payload: { name, address: '10.9.0.1', protocol: 'SSH', userName: 'svc', password: PASSWORD, pollerId } })).json()
  return { app, admin, register, as, activate, connection }
}

t.test('registration is disabled without a secret on the server', async (t) => {
  const { register } = await setup(t, null)
  const res = await register('poller-a')
  t.equal(res.statusCode, 401)
  t.match(res.json().detail, /disabled/)
})

t.test('registration: wrong secret, duplicate name, and the credential it issues', async (t) => {
  const { app, register, as } = await setup(t)
  const wrong = await register('poller-a', 'pes_not-the-right-secret')
  t.equal(wrong.statusCode, 401)
  const refused = (await queryOne(app, "SELECT outcome, details FROM audit_trail WHERE description LIKE 'Registration of worker poller%'")) as { outcome: string; details: string }
  t.match(refused, { outcome: 'Refused' }, 'a refused registration is audited')
  t.notOk(refused.details.includes('pes_not-the-right-secret'), 'without the secret')
  const ok = await register('poller-a')
  t.equal(ok.statusCode, 200, ok.body)
  t.match(ok.json(), { name: 'poller-a', credential: /^ppl_/, isActivated: false, heartbeatIntervalSeconds: 60 })
  t.equal((await register('POLLER-A')).statusCode, 409, 'names are unique whatever their case')
  const stored = (await queryValue(app, 'SELECT credential_hash FROM worker_pollers')) as string
  t.not(stored, ok.json().credential, 'the server keeps a hash, not the credential')

  // The credential works only on the poller gateway, and only a poller credential works there.
  const admin = await login(app)
  t.equal((await as(admin).heartbeat()).statusCode, 401, 'a user token is no poller credential')
  t.equal((await as('ppl_forged-credential').heartbeat()).statusCode, 401)
  t.equal((await call(app, ok.json().credential, { method: 'GET', url: `${API}/connectiondetailsstatus` })).statusCode, 401, 'a poller credential is no user token')
})

t.test('heartbeats, instructions and assignments', async (t) => {
  const { app, register, as, activate, connection } = await setup(t)
  const a = (await register('poller-a')).json()
  const b = (await register('poller-b')).json()
  const pa = as(a.credential)
  let beat = await pa.heartbeat({ version: '1.0.1', hostName: 'vm-a', activeChecks: 0, assignmentsRevision: null, startedTime: '2025-01-01T08:00:00Z' })
  t.match(beat.json(), { pollerId: a.pollerId, isActivated: false, instruction: 'StopChecking', heartbeatIntervalSeconds: 60 })
  const mine = await connection('mine', a.pollerId)
  await connection('theirs', b.pollerId)
  let assigned = await pa.connections()
  t.match(assigned.json(), { instruction: 'StopChecking', connections: [] }, 'no connection, and no credential, before activation')
  t.equal(assigned.headers['cache-control'], 'no-store')
  await activate(a.pollerId)
  beat = await pa.heartbeat()
  t.match(beat.json(), { isActivated: true, instruction: 'Check' })
  const revision = beat.json().assignmentsRevision
  assigned = await pa.connections()
  t.equal(assigned.json().connections.length, 1, 'only its own connections')
  t.match(assigned.json().connections[0], { id: mine.id, password: PASSWORD, privateKey: null, pollingIntervalSeconds: 300, timeoutSeconds: 10, lastStartTime: null })
  t.equal(assigned.json().assignmentsRevision, revision)
  const fetchAudit = (await queryOne(app, "SELECT user_name, details FROM audit_trail WHERE description LIKE '%fetched its 1 connection%'")) as { user_name: string; details: string }
  t.match(fetchAudit, { user_name: 'poller:poller-a' }, 'every fetch is audited')
  t.notOk(fetchAudit.details.includes(PASSWORD), 'without the secrets')
  await call(app, await login(app), { method: 'PUT', url: `${API}/connectiondetails`, payload: { id: mine.id, port: 2222 } })
  t.ok((await pa.heartbeat()).json().assignmentsRevision > revision, 'a changed connection changes the revision')
  const view = (await call(app, await login(app), { method: 'GET', url: `${API}/workerpollerdetails` })).json()
  t.match(view, { recordsTotal: 2, heartbeatIntervalSeconds: 60, offlineAfterSeconds: 180 })
  t.match(view.data[0], {
    name: 'poller-a',
    hostName: 'vm-a',
    version: '1.0.0',
    isActivated: true,
    connectionStatus: 'Online',
    activationChangedBy: 'admin',
    connectionsAssigned: 1,
    connectionsPending: 1,
  })
  t.match(view.data[1], { name: 'poller-b', connectionStatus: 'Offline', lastHeartbeatTime: null })
  t.equal((await pa.heartbeat({ version: 'bad version!' })).statusCode, 400)
})

t.test('run reports: per run, the latest wins, errors kept, events on change', async (t) => {
  const { app, register, as, activate, connection } = await setup(t)
  const a = (await register('poller-a')).json()
  const b = (await register('poller-b')).json()
  await activate(a.pollerId)
  const pa = as(a.credential)
  const c = await connection('host-1', a.pollerId)
  const other = await connection('host-2', b.pollerId)
  const t0 = Date.now() - 3_600_000
  const at = (s: number) => new Date(t0 + s * 1000).toISOString()
  const reachable = (id: string, s: number) => ({ runId: id, connectionId: c.id, statusString: 'Reachable', startTime: at(s), endTime: at(s + 1), statusDescription: 'SSH banner' })
  const unreachable = (id: string, s: number, error = 'Connection refused.') => ({
    runId: id,
    connectionId: c.id,
    statusString: 'Unreachable',
    startTime: at(s),
    endTime: at(s + 2),
    statusErrorDescription: error,
  })

  const r1 = runId()
  let res = await pa.runs([
    { runId: r1, connectionId: c.id, statusString: 'Running', startTime: at(0), endTime: null },
    { runId: runId(), connectionId: 999, statusString: 'Running', startTime: at(0) },
    { runId: runId(), connectionId: other.id, statusString: 'Running', startTime: at(0) },
    { runId: runId(), connectionId: c.id, statusString: 'Running', startTime: new Date(Date.now() + 600_000).toISOString() },
    { runId: runId(), connectionId: c.id, statusString: 'Reachable', startTime: at(10), endTime: at(5) },
    { runId: runId(), connectionId: c.id, statusString: 'Failed', startTime: at(10), endTime: at(11) },
  ])
  t.match(res.json(), {
    succeeded: 1,
    failed: 5,
    results: [{ status: 'done' }, { code: 'not-found' }, { code: 'not-allowed' }, { code: 'invalid' }, { code: 'invalid' }, { code: 'invalid' }],
  })
  const status = async () => (await call(app, await login(app), { method: 'GET', url: `${API}/connectiondetailsstatus?ComputerName=host-1` })).json().data[0]
  t.match(await status(), { statusString: 'Running', endTime: null })
  res = await pa.runs([reachable(r1, 0)])
  t.match(await status(), { statusString: 'Reachable', durationMs: 1000 })
  t.match((await pa.runs([reachable(r1, 0)])).json(), { succeeded: 1 }, 'the same result again is done')
  t.match((await pa.runs([unreachable(r1, 0)])).json(), { failed: 1, results: [{ code: 'conflict' }] }, 'another result for a finished run conflicts')

  // Twelve failures: the last one is the latest, the ten before it its previous errors.
  const events = async () => (await query(app, "SELECT event_code, description FROM events WHERE event_code IN ('0x210003', '0x210004') ORDER BY id")) as { event_code: string }[]
  res = await pa.runs(Array.from({ length: 12 }, (_, i) => unreachable(runId(), 100 + i * 10, `error ${i}`)))
  t.match(res.json(), { succeeded: 12 })
  let s = await status()
  t.match(s, { statusString: 'Unreachable', statusErrorDescription: 'error 11' })
  t.same(
    s.prevRunningErrors.map((e: any) => e.errorDescription),
    ['error 10', 'error 9', 'error 8', 'error 7', 'error 6', 'error 5', 'error 4', 'error 3', 'error 2', 'error 1'],
  )
  t.same(
    (await events()).map((e) => e.event_code),
    ['0x210003'],
    'reachable to unreachable: one event',
  )
  // A late report of an older run joins the history without becoming the latest.
  await pa.runs([reachable(runId(), 50)])
  t.match(await status(), { statusString: 'Unreachable', statusErrorDescription: 'error 11' })
  await pa.runs([reachable(runId(), 500)])
  s = await status()
  t.match(s, { statusString: 'Reachable', lastReachableTime: at(501) })
  t.equal(s.prevRunningErrors[0].errorDescription, 'error 11')
  t.same(
    (await events()).map((e) => e.event_code),
    ['0x210003', '0x210004'],
    'and back: one event',
  )
  const kept = (await queryValue(app, 'SELECT count(*) FROM agentless_runs WHERE connection_id = ?', c.id)) as number
  t.ok(kept <= 22, `the run history is bounded (${kept} kept)`)

  // Deactivated: the reports are refused and nothing is recorded.
  await activate(a.pollerId, false)
  res = await pa.runs([unreachable(runId(), 600)])
  t.equal(res.statusCode, 409)
  t.match(res.json(), { type: /^urn:prime:problem:poller-deactivated$/ })
  t.match(await status(), { statusString: 'Reachable' })
  t.match((await pa.connections()).json(), { instruction: 'StopChecking', connections: [] })

  // Deleted: the credential is refused at once; the connections stay, unregistered.
  const admin = await login(app)
  const del = await call(app, admin, { method: 'DELETE', url: `${API}/workerpollerdetails?PollerId=${a.pollerId}` })
  t.match(del.json(), { poller: { id: a.pollerId, name: 'poller-a' }, connectionsUnregistered: 1 })
  t.equal((await pa.heartbeat()).statusCode, 401)
  t.match(await status(), { pollerId: null, statusString: 'Reachable' })
  t.equal((await call(app, admin, { method: 'DELETE', url: `${API}/workerpollerdetails?PollerId=${a.pollerId}` })).statusCode, 404)
})

t.test('upkeep: quiet pollers go offline, abandoned runs fail, health says so', async (t) => {
  const { app, register, as, activate, connection } = await setup(t)
  t.match(await workerPollerHealth(app), { status: 'Healthy', detail: /No worker pollers/ })
  const a = (await register('poller-a')).json()
  await activate(a.pollerId)
  const c = await connection('host-1', a.pollerId)
  const pa = as(a.credential)
  await pa.heartbeat()
  t.match(await workerPollerHealth(app), { status: 'Healthy' })
  const started = Date.now() - 60_000
  await pa.runs([{ runId: runId(), connectionId: c.id, statusString: 'Running', startTime: new Date(started).toISOString() }])

  const later = Date.now() + 181_000
  t.match(await sweepAgentless(app, later), { offline: 1, abandoned: 0 })
  t.match(await sweepAgentless(app, later), { offline: 0 }, 'offline once')
  const offline = await query(app, "SELECT description FROM events WHERE event_code = '0x410002'")
  t.equal(offline.length, 1, 'one event when heartbeats stop')
  await query(app, 'UPDATE worker_pollers SET last_heartbeat_ms = ?', Date.now() - 200_000)
  t.match(await workerPollerHealth(app), { status: 'Failed', detail: /poller-a/ })
  await pa.heartbeat()
  t.equal(await queryValue(app, "SELECT count(*) FROM events WHERE event_code = '0x410003'"), 1, 'one event when they come back')

  t.match(await sweepAgentless(app, started + RUN_GIVE_UP_MS + 1), { abandoned: 1 })
  const s = (await call(app, await login(app), { method: 'GET', url: `${API}/connectiondetailsstatus` })).json().data[0]
  t.match(s, { statusString: 'Failed', statusErrorDescription: /no end of this run/ })
})

t.test('one poller name registered twice at once: one poller, the other answers 409', async (t) => {
  const { app, register } = await setup(t)
  for (let round = 0; round < 6; round++) {
    const name = `twin-poller-${round}`
    const answers = await Promise.all([register(name), register(name.toUpperCase()), register(name)])
    t.same(answers.map((a) => a.statusCode).sort(), [200, 409, 409], `round ${round}: ${answers.map((a) => a.body.slice(0, 100)).join(' | ')}`)
    t.equal(Number(await queryValue(app, 'SELECT count(*) FROM worker_pollers WHERE lower(name) = ?', name)), 1)
  }
})
