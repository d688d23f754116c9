// Agentless connections as users manage them: the rules of creation and change, per-item
// answers of bulk operations, credentials sealed at rest and never answered or audited,
// and the status list's filters, order and paging.
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { build, call, login, userWithProfile } from './helpers.js'
import { query, queryOne, queryValue } from './seed.js'

const POLLER_SECRET = 'pes_connections-test-secret'
const API = '/prime/webui/agents/agentless'
const PASSWORD = 'Hunter2-correct-horse'
const KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n'

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t, { PRIME_POLLER_ENROLLMENT_SECRET: POLLER_SECRET })
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'manager', 20)
  const user = await userWithProfile(app, admin, 'reader', 10)
  const create = (body: Record<string, unknown>, token = manager) => call(app, token, { method: 'POST', url: `${API}/connectiondetails`, payload: body })
  const update = (body: Record<string, unknown>) => call(app, manager, { method: 'PUT', url: `${API}/connectiondetails`, payload: body })
  const registerPoller = async (name: string) => {
    const r = await app.inject({ method: 'POST', url: `${API}/poller/register`, payload: { enrollmentSecret: POLLER_SECRET, name, version: '1.0.0' } })
    return r.json() as { pollerId: string; credential: string }
  }
  return { app, admin, manager, user, create, update, registerPoller }
}

t.test('creation rules: each broken rule answers 400 naming the field', async (t) => {
  const { create } = await setup(t)
  const base = { name: 'db-01', address: '10.20.0.15', protocol: 'SSH', userName: 'svc-prime', password: PASSWORD }
  const cases: [string, Record<string, unknown>, string][] = [
    ['unspecified address', { address: '0.0.0.0' }, 'address'],
    ['IPv6 unspecified', { address: '::' }, 'address'],
    ['broadcast', { address: '255.255.255.255' }, 'address'],
    ['multicast', { address: '224.0.0.251' }, 'address'],
    ['link-local (cloud metadata)', { address: '169.254.169.254' }, 'address'],
    ['IPv4-mapped metadata', { address: '::ffff:169.254.169.254' }, 'address'],
    ['IPv6 link-local', { address: 'fe80::1' }, 'address'],
    ['metadata host name', { address: 'metadata.google.internal' }, 'address'],
    ['not an IPv4 address', { address: '10.300.1.1' }, 'address'],
    ['bad host name', { address: 'db-.corp' }, 'address'],
    ['TLS on SSH', { useTls: true }, 'useTls'],
    ['both credentials', { privateKey: KEY }, 'privateKey'],
    ['no credential', { password: undefined }, 'password'],
    ['WinRM with a key', { protocol: 'WinRM', password: undefined, privateKey: KEY }, 'privateKey'],
    ['passphrase without key', { privateKeyPassphrase: 'secret-phrase' }, 'privateKeyPassphrase'],
    ['override without options', { isOverrideDefaults: true }, 'pollingIntervalSeconds'],
    ['timeout not below interval', { isOverrideDefaults: true, pollingIntervalSeconds: 60, timeoutSeconds: 60 }, 'timeoutSeconds'],
    ['options without override', { pollingIntervalSeconds: 120 }, 'pollingIntervalSeconds'],
  ]
  for (const [what, change, field] of cases) {
    const res = await create({ ...base, ...change })
    t.equal(res.statusCode, 400, `${what}: ${res.body}`)
    t.ok(
      res.json().errors?.some((e: any) => e.name === field),
      `${what} names ${field}`,
    )
  }
  const unknownPoller = await create({ ...base, pollerId: '4d3c2b1a-0f9e-4a8b-9c7d-6e5f4a3b2c1d' })
  t.equal(unknownPoller.statusCode, 404, 'an unknown poller answers 404')

  const ok = await create({ ...base, address: '127.0.0.1' })
  t.equal(ok.statusCode, 200, ok.body)
  t.match(ok.json(), { port: 22, useTls: false, credentialType: 'Password', isOverrideDefaults: false, pollingIntervalSeconds: 300, timeoutSeconds: 10, statusString: 'Pending', pollerId: null })
  t.equal((await create({ ...base, name: 'DB-01' })).statusCode, 409, 'names are unique whatever their case')
  const winrm = await create({ ...base, name: 'win-01', protocol: 'WinRM', userName: 'CORP\\svc' })
  t.match(winrm.json(), { port: 5986, useTls: true })
  const plain = await create({ ...base, name: 'win-02', protocol: 'WinRM', useTls: false })
  t.match(plain.json(), { port: 5985, useTls: false })
  const keyed = await create({
    ...base,
    name: 'key-01',
    password: undefined,
    privateKey: KEY,
    privateKeyPassphrase: 'key-passphrase',
    isOverrideDefaults: true,
    pollingIntervalSeconds: 120,
    timeoutSeconds: 15,
  })
  t.match(keyed.json(), { credentialType: 'PrivateKey', pollingIntervalSeconds: 120, timeoutSeconds: 15 })
})

t.test('credentials are sealed at rest, never answered, masked in the audit trail', async (t) => {
  const { app, create, update } = await setup(t)
  const res = await create({ name: 'db-02', address: 'db-02.corp.example', protocol: 'SSH', userName: 'svc', password: PASSWORD })
  t.notOk(res.body.includes(PASSWORD), 'the answer holds no password')
  const id = res.json().id
  if (app.config.secretsFromDatabase.includes('agentless')) {
    // Several nodes share PostgreSQL's key (db/postgres/secrets.ts): no file of its own.
    t.equal(await queryValue(app, "SELECT count(*) FROM secrets WHERE name = 'agentless-key'"), 1, 'the key is kept in the database, shared by the nodes')
  } else {
    const keyFile = path.join(app.testConfig.dataDir, 'agentless-key')
    t.equal(fs.statSync(keyFile).mode & 0o777, 0o600, 'the key file is readable by the server only')
  }
  const row = (await queryOne<{ credentials: Buffer }>(app, 'SELECT credentials FROM agentless_connections WHERE id = ?', id))!
  t.notOk(row.credentials.toString('latin1').includes(PASSWORD), 'the stored value is not the password')
  t.same(app.agentless.vault.open(row.credentials, id).password, PASSWORD, 'it opens with the key')
  t.throws(() => app.agentless.vault.open(row.credentials, id + 1), 'a sealed value moved to another connection does not open')
  await update({ id, password: 'Another-secret-99' })
  await create({ name: 'db-04', address: '0.0.0.0', protocol: 'SSH', userName: 'svc', password: PASSWORD })
  const audits = await query<{ description: string; details: string }>(app, "SELECT description, details FROM audit_trail WHERE category = 'Agentless'")
  t.ok(audits.length >= 3, 'creation, change and refusal are audited')
  for (const a of audits) t.notOk(a.details.includes(PASSWORD) || a.details.includes('Another-secret-99'), `no secret in "${a.description}"`)
  t.ok(
    audits.some((a) => a.details.includes('"password":"***"')),
    'a secret given shows as ***',
  )
  t.ok(
    audits.some((a) => a.description.endsWith('": password') && a.details.includes('"password":"***"')),
    'a changed secret is named, its value masked',
  )
  // SQLite's file and its write-ahead log hold no plain password either.
  if (app.storage.backend === 'sqlite') {
    app.db.pragma('wal_checkpoint(TRUNCATE)')
    const files = fs.readdirSync(app.testConfig.dataDir).filter((f) => f.startsWith('prime.sqlite'))
    for (const f of files) {
      const bytes = fs.readFileSync(path.join(app.testConfig.dataDir, f))
      t.notOk(bytes.includes(PASSWORD) || bytes.includes('Another-secret-99'), `${f} holds no plain password`)
    }
  }
})

t.test('changes: only what is sent, with null back to the default', async (t) => {
  const { app, create, update, registerPoller } = await setup(t)
  const made = (
    await create({ name: 'web-01', address: '10.0.0.1', protocol: 'WinRM', userName: 'svc', password: PASSWORD, isOverrideDefaults: true, pollingIntervalSeconds: 600, timeoutSeconds: 20 })
  ).json()
  let res = await update({ id: made.id, port: 15986 })
  t.match(res.json(), { port: 15986, name: 'web-01', pollingIntervalSeconds: 600, credentialType: 'Password' })
  res = await update({ id: made.id, port: null, useTls: false })
  t.match(res.json(), { port: 5985, useTls: false }, 'null port: the default of the protocol as it is now')
  res = await update({ id: made.id, isOverrideDefaults: false })
  t.match(res.json(), { isOverrideDefaults: false, pollingIntervalSeconds: 300, timeoutSeconds: 10 }, 'turning the override off drops the own options')
  res = await update({ id: made.id, isOverrideDefaults: false, timeoutSeconds: 5 })
  t.equal(res.statusCode, 400, 'options without override are refused')
  res = await update({ id: made.id, protocol: 'SSH' })
  t.match(res.json(), { protocol: 'SSH', port: 22, useTls: false }, 'a default port follows the protocol')
  res = await update({ id: made.id, privateKey: KEY })
  t.match(res.json(), { credentialType: 'PrivateKey' }, 'a new key replaces the password')
  t.equal(app.agentless.vault.open((await queryOne(app, 'SELECT credentials FROM agentless_connections WHERE id = ?', made.id))!.credentials, made.id).password, null)
  res = await update({ id: made.id, protocol: 'WinRM' })
  t.equal(res.statusCode, 400, 'WinRM cannot keep a private key')
  res = await update({ id: made.id, name: 'web-01-renamed' })
  t.equal(res.json().credentialType, 'PrivateKey', 'credentials left out are kept')
  t.equal((await update({ id: 999, name: 'x' })).statusCode, 404)
  await create({ name: 'other', address: '10.0.0.2', protocol: 'SSH', userName: 'svc', password: PASSWORD })
  t.equal((await update({ id: made.id, name: 'OTHER' })).statusCode, 409)
  const p = await registerPoller('poller-a')
  res = await update({ id: made.id, pollerId: p.pollerId })
  t.match(res.json(), { pollerId: p.pollerId, pollerName: 'poller-a' })
  res = await update({ id: made.id, pollerId: null })
  t.match(res.json(), { pollerId: null, pollerName: null })
})

t.test('delete, register and unregister answer per item', async (t) => {
  const { manager, app, create, registerPoller } = await setup(t)
  const ids: number[] = []
  for (let i = 1; i <= 3; i++) ids.push((await create({ name: `h-${i}`, address: `10.1.0.${i}`, protocol: 'SSH', userName: 'svc', password: PASSWORD })).json().id)
  const a = await registerPoller('poller-a')
  const b = await registerPoller('poller-b')
  const post = (url: string, payload: unknown) => call(app, manager, { method: 'POST', url: `${API}/${url}`, payload })
  let res = await post('registration', { pollerId: a.pollerId, connectionIds: [ids[0], ids[1], 999] })
  t.match(res.json(), { succeeded: 2, failed: 1, results: [{ status: 'done' }, { status: 'done' }, { id: '999', code: 'not-found' }] })
  t.equal((await post('registration', { pollerId: '00000000-0000-4000-8000-000000000000', connectionIds: [ids[0]] })).statusCode, 404)
  t.equal((await post('registration', { connectionIds: [ids[0]] })).statusCode, 400, 'registering needs a poller')
  res = await post('registration', { pollerId: b.pollerId, connectionIds: [ids[1]] })
  t.match(res.json(), { succeeded: 1 }, 'a connection moves between pollers')
  res = await post('unregistration', { pollerId: a.pollerId, connectionIds: [ids[0], ids[1], ids[2]] })
  t.match(res.json(), { succeeded: 2, failed: 1, results: [{ status: 'done' }, { code: 'not-allowed' }, { status: 'done' }] })
  res = await post('unregistration', { connectionIds: [ids[1]] })
  t.match(res.json(), { succeeded: 1 })
  const del = await call(app, manager, { method: 'DELETE', url: `${API}/connectiondetails`, payload: [ids[0], 12345] })
  t.match(del.json(), {
    succeeded: 1,
    failed: 1,
    results: [
      { id: String(ids[0]), status: 'done' },
      { id: '12345', code: 'not-found' },
    ],
  })
  t.equal((await call(app, manager, { method: 'DELETE', url: `${API}/connectiondetails`, payload: [] })).statusCode, 400, 'an empty list answers 400')
})

t.test('profiles: a User reads, a Manager changes, an Administrator deletes pollers', async (t) => {
  const { app, user, manager, create, registerPoller } = await setup(t)
  t.equal((await create({ name: 'x', address: '10.0.0.9', protocol: 'SSH', userName: 'svc', password: PASSWORD }, user)).statusCode, 403)
  t.equal((await call(app, user, { method: 'GET', url: `${API}/connectiondetailsstatus` })).statusCode, 200)
  const p = await registerPoller('poller-x')
  t.equal((await call(app, manager, { method: 'DELETE', url: `${API}/workerpollerdetails?PollerId=${p.pollerId}` })).statusCode, 403)
  t.equal((await call(app, user, { method: 'PUT', url: `${API}/workerpollerdetails/activatedstatus`, payload: { pollerId: p.pollerId, isActivated: true } })).statusCode, 403)
})

t.test('status list: filters, order and paging', async (t) => {
  const { app, manager, create, registerPoller } = await setup(t)
  const p = await registerPoller('poller-list')
  await call(app, manager, { method: 'PUT', url: `${API}/workerpollerdetails/activatedstatus`, payload: { pollerId: p.pollerId, isActivated: true } })
  const names = ['alpha', 'Bravo', 'charlie', 'delta', 'echo-Überhost']
  const ids: number[] = []
  for (const [i, name] of names.entries()) {
    const override = i % 2 === 0 ? { isOverrideDefaults: true, pollingIntervalSeconds: 60 + i * 60, timeoutSeconds: 5 } : {}
    ids.push((await create({ name, address: `10.2.0.${i + 1}`, protocol: 'SSH', userName: 'svc', password: PASSWORD, pollerId: p.pollerId, ...override })).json().id)
  }
  const runs = (list: object[]) => app.inject({ method: 'POST', url: `${API}/poller/runs`, headers: { authorization: `Bearer ${p.credential}` }, payload: { runs: list } })
  const run = (n: number, id: number, status: string, start: string, end: string | null, error?: string) => ({
    runId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    connectionId: id,
    statusString: status,
    startTime: start,
    endTime: end,
    statusDescription: status === 'Reachable' ? 'SSH banner SSH-2.0-OpenSSH_9.6' : null,
    statusErrorDescription: error ?? null,
  })
  const r = await runs([
    run(1, ids[0], 'Unreachable', '2025-01-01T10:00:00Z', '2025-01-01T10:00:10Z', 'Connection refused'),
    run(2, ids[0], 'Reachable', '2025-01-02T10:00:00Z', '2025-01-02T10:00:01Z'),
    run(3, ids[1], 'Failed', '2025-01-02T23:59:00Z', '2025-01-03T00:00:05Z', 'No SSH banner within 10 s.'),
    run(4, ids[2], 'Running', '2025-01-03T08:00:00Z', null),
  ])
  t.match(r.json(), { succeeded: 4, failed: 0 })
  const list = async (query: string) => {
    const res = await call(app, manager, { method: 'GET', url: `${API}/connectiondetailsstatus?${query}` })
    t.equal(res.statusCode, 200, `${query}: ${res.body}`)
    return res.json() as { recordsTotal: number; recordsFiltered: number; data: any[] }
  }
  const namesOf = (a: { data: any[] }) => a.data.map((d) => d.computerName)
  t.same(namesOf(await list('')), ['alpha', 'Bravo', 'charlie', 'delta', 'echo-Überhost'], 'by name, whatever the case')
  t.same(namesOf(await list(`computername=${encodeURIComponent('ÜBERHOST')}`)), ['echo-Überhost'], 'contains, folding all of Unicode')
  t.same(namesOf(await list('StatusString=reach')), ['alpha'], 'the latest run only (alpha was Unreachable before)')
  t.same(namesOf(await list('StatusErrorDescription=banner')), ['Bravo'])
  t.same(namesOf(await list('StatusDescription=openssh')), ['alpha'])
  t.same(namesOf(await list('PrevRunningErrors=refused')), ['alpha'], 'errors of earlier runs')
  t.same(namesOf(await list('StartTime=2025-01-02T18:00:00Z')), ['alpha', 'Bravo'], 'a start on that UTC day')
  t.same(namesOf(await list('EndTime=2025-01-03')), ['Bravo'], 'an end on that UTC day; a running one never matches')
  t.same(namesOf(await list('FromTimeStart=2025-01-02%2023:00:00&ToTimeStart=2025-01-03T09:00:00Z')), ['Bravo', 'charlie'])
  t.same(namesOf(await list('FromTimeEnd=2025-01-02T10:00:01Z&ToTimeEnd=2025-01-02T10:00:01Z')), ['alpha'], 'bounds are inclusive')
  t.same(namesOf(await list('IsOverrideDefaults=True')), ['alpha', 'charlie', 'echo-Überhost'])
  t.same(namesOf(await list('isoverridedefaults=0')), ['Bravo', 'delta'])
  t.same(namesOf(await list('GlobalSearch=poller-list&PageSize=2&PageNumber=2')), ['charlie', 'delta'], 'a second page of two')
  t.same(namesOf(await list('GlobalSearch=refused')), ['alpha'], 'GlobalSearch looks in the previous errors')
  t.same(namesOf(await list('SortBy=startTime_desc')), ['charlie', 'Bravo', 'alpha', 'echo-Überhost', 'delta'], 'never run last, ties by id in the same direction')
  t.same(namesOf(await list('SortBy=pollingIntervalSeconds_asc')), ['alpha', 'charlie', 'Bravo', 'delta', 'echo-Überhost'], 'the interval in use, ties by id')
  const alpha = (await list('ComputerName=alpha')).data[0]
  t.match(alpha, {
    statusString: 'Reachable',
    durationMs: 1000,
    lastReachableTime: '2025-01-02T10:00:01.000Z',
    prevRunningErrors: [{ statusString: 'Unreachable', errorDescription: 'Connection refused', startTime: '2025-01-01T10:00:00.000Z' }],
  })
  t.match((await list('ComputerName=charlie')).data[0], { statusString: 'Running', endTime: null, durationMs: null })
  for (const bad of ['SortBy=password_asc', 'StartTime=yesterday', 'IsOverrideDefaults=maybe', 'PageSize=1000001']) {
    const res = await call(app, manager, { method: 'GET', url: `${API}/connectiondetailsstatus?${bad}` })
    t.equal(res.statusCode, 400, `${bad} answers 400`)
  }
})

t.test('two changes of one connection at once each keep the other (no lost update)', async (t) => {
  // A change rewrites the whole row from what it read: the second of two at once must read
  // the first's outcome, else the first's field goes back to what it was.
  const { app, create, update } = await setup(t)
  for (let round = 0; round < 10; round++) {
    const made = (await create({ name: `race-${round}`, address: '10.0.1.1', protocol: 'SSH', userName: 'svc', password: PASSWORD })).json()
    const [a, b] = await Promise.all([update({ id: made.id, address: `10.0.2.${round + 1}` }), update({ id: made.id, port: 2200 + round })])
    t.equal(a.statusCode, 200, a.body)
    t.equal(b.statusCode, 200, b.body)
    const row = (await queryOne<{ address: string; port: number }>(app, 'SELECT address, port FROM agentless_connections WHERE id = ?', made.id))!
    t.same({ address: row.address, port: Number(row.port) }, { address: `10.0.2.${round + 1}`, port: 2200 + round }, `round ${round}: both changes kept`)
  }
})

t.test('the same name given twice at once: one connection, the other answers 409', async (t) => {
  const { create } = await setup(t)
  for (let round = 0; round < 6; round++) {
    const body = { name: `twin-${round}`, address: '10.0.3.1', protocol: 'SSH', userName: 'svc', password: PASSWORD }
    const answers = await Promise.all([create(body), create({ ...body, name: body.name.toUpperCase() }), create(body)])
    t.same(answers.map((a) => a.statusCode).sort(), [200, 409, 409], `round ${round}: ${answers.map((a) => a.body.slice(0, 100)).join(' | ')}`)
    t.ok(
      answers.filter((a) => a.statusCode === 409).every((a) => a.json().errors?.[0]?.name === 'name'),
      'the refusals name the field',
    )
  }
})
