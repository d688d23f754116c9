// The agentless service without Fastify's routes: the ports of a test app's database
// (SQLite or PostgreSQL), a plain context. Connections and their credentials, the CSV import, the poller gateway, the
// sweep, the exports, and the unit of work rolling a change back with its audit record.
import crypto from 'node:crypto'
import t from 'tap'
import { agentlessService, RUN_GIVE_UP_MS } from '../lib/agentless/service.js'
import { agentlessSettings } from '../lib/agentless/settings.js'
import { LIMITS } from '../lib/agentless/rules.js'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { vault } from '../lib/vault.js'
import { build } from './helpers.js'
import { portsOf, query, queryOne, queryValue } from './seed.js'

const SECRET = 'enrollment-secret-0123456789'

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t)
  const ports = portsOf(app)
  const { uow } = app.storage
  const keys = vault(crypto.randomBytes(32))
  let failAudit = false
  const record = async (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    await recordAudit({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }, ctx, entry)
  }
  const warnings: object[] = []
  const deps = {
    store: ports.agentless,
    events: ports.eventRecorder,
    assets: ports.agentlessAssets,
    uow,
    audit: { record },
    log: { warn: (details: object) => void warnings.push(details) },
    vault: keys,
    settings: agentlessSettings({ PRIME_POLLER_ENROLLMENT_SECRET: SECRET }),
  }
  const service = agentlessService(deps)
  // Only what the service wrote from here on.
  const mark = (await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')) ?? 0
  const auditRows = () => query(app, 'SELECT user_name, source_ip, description, outcome FROM audit_trail WHERE id > ? ORDER BY id', mark)
  const count = (table: string) => queryValue<number>(app, `SELECT count(*) FROM ${table}`)
  return { app, service, deps, keys, warnings, auditRows, count, failAudit: (on: boolean) => (failAudit = on) }
}

const ctx = (over: Partial<Context> = {}) => systemContext({ actor: 'alice', profile: 30, sourceAddress: '192.0.2.7', requestId: 'req-1', ...over })
const host = (name: string, over: object = {}) => ({ name, address: '192.0.2.10', protocol: 'SSH' as const, userName: 'checker', password: 'pw-0123456789', ...over })

t.test('a connection is stored with its credentials sealed and an audit record named after the context', async (t) => {
  const { app, service, keys, auditRows } = await setup(t)
  const made = await service.create(ctx(), host('web-1'))
  t.match(made, { name: 'web-1', address: '192.0.2.10', protocol: 'SSH', port: 22, credentialType: 'Password', statusString: 'Pending', pollerId: null })
  t.equal(made.pollingIntervalSeconds, 300, 'the default interval when the connection does not override it')
  const row = (await queryOne<{ credentials: Buffer }>(app, 'SELECT credentials FROM agentless_connections WHERE id = ?', made.id))!
  t.notOk(row.credentials.toString('latin1').includes('pw-0123456789'), 'the password is not stored in the clear')
  t.equal(keys.open(row.credentials, made.id).password, 'pw-0123456789')
  t.match(await auditRows(), [{ user_name: 'alice', source_ip: '192.0.2.7', description: /Created agentless connection "web-1" \(SSH 192\.0\.2\.10:22\)/, outcome: 'Succeeded' }])
})

t.test('a name already used is refused, whatever its case, and nothing is written', async (t) => {
  const { service, auditRows, count } = await setup(t)
  await service.create(ctx(), host('web-1'))
  await t.rejects(service.create(ctx(), host('WEB-1')), { code: 'conflict', errors: [{ name: 'name' }] })
  await t.rejects(service.create(ctx(), host('web-2', { pollerId: crypto.randomUUID() })), { code: 'not-found', errors: [{ name: 'pollerId' }] })
  t.equal(await count('agentless_connections'), 1)
  t.equal((await auditRows()).length, 1)
})

t.test('when the audit record cannot be written, the change is rolled back', async (t) => {
  const { service, count, failAudit } = await setup(t)
  const made = await service.create(ctx(), host('web-1'))
  failAudit(true)
  await t.rejects(service.create(ctx(), host('web-2')), /audit trail is full/)
  await t.rejects(service.update(ctx(), { id: made.id, address: '192.0.2.99' }), /audit trail is full/)
  await t.rejects(service.remove(ctx(), [made.id]), /audit trail is full/)
  await t.rejects(service.importCsv(ctx(), 'hosts.csv', Buffer.from('name,address,protocol,userName,password\nweb-3,192.0.2.3,SSH,u,pw-0123456789\n')), /audit trail is full/)
  failAudit(false)
  t.equal(await count('agentless_connections'), 1, 'no connection was added or removed')
  const [kept] = (await service.statusPage({}, { field: 'computerName', direction: 'asc' }, 10, 0, 1000).then((p) => ('rows' in p ? p.rows : []))) as { address: string }[]
  t.equal(kept.address, '192.0.2.10', 'the update was rolled back')
})

t.test('an update says what changed; the same values change nothing', async (t) => {
  const { service, auditRows } = await setup(t)
  const made = await service.create(ctx(), host('web-1'))
  const changed = await service.update(ctx(), { id: made.id, address: 'web-1.example.net', password: 'pw-new-0123456789' })
  t.equal(changed.address, 'web-1.example.net')
  await service.update(ctx(), { id: made.id, address: 'web-1.example.net' })
  t.match((await auditRows()).slice(1), [{ description: 'Changed agentless connection "web-1": address, password' }, { description: /unchanged/ }])
  await t.rejects(service.update(ctx(), { id: made.id + 100, name: 'x' }), { code: 'not-found' })
})

t.test('the CSV import applies the valid rows in one unit of work and reports each row', async (t) => {
  const { service, auditRows, count } = await setup(t)
  await service.create(ctx(), host('web-1'))
  const csv = [
    'name,address,protocol,userName,password',
    'web-1,192.0.2.11,SSH,checker,',
    'web-2,192.0.2.12,SSH,checker,pw-0123456789',
    'web-3,,SSH,checker,pw-0123456789',
    'WEB-2,192.0.2.13,SSH,checker,pw-0123456789',
  ].join('\n')
  const answer = await service.importCsv(ctx(), 'hosts.csv', Buffer.from(csv))
  t.match(answer, { fileName: 'hosts.csv', totalRows: 4, imported: 1, updated: 1, unchanged: 0, rejected: 2 })
  t.match(answer.rows, [
    { line: 2, name: 'web-1', result: 'updated' },
    { line: 3, name: 'web-2', result: 'imported' },
    { line: 4, result: 'rejected', errors: [{ column: 'address' }] },
    { line: 5, result: 'rejected', errors: [{ column: 'name', reason: 'repeats the name of line 3' }] },
  ])
  t.equal(await count('agentless_connections'), 2)
  t.match((await auditRows()).at(-1), { description: 'Imported agentless connections from "hosts.csv": 1 imported, 1 updated, 0 unchanged, 2 rejected' })
  await t.rejects(service.importCsv(ctx(), null, Buffer.from('name,address\n')), { code: 'validation' }, 'a header without the required columns')
})

t.test('an import matches stored names as the database does (A-Z folded), moves connections between pollers and tells each poller once per change', async (t) => {
  const { app, service } = await setup(t)
  const p1 = await service.registerPoller(ctx({ actor: null }), { name: 'p1', version: '1.0', enrollmentSecret: SECRET })
  const p2 = await service.registerPoller(ctx({ actor: null }), { name: 'p2', version: '1.0', enrollmentSecret: SECRET })
  await service.create(ctx(), host('Web-Ä', { pollerId: p1.pollerId }))
  await service.create(ctx(), host('web-b', { pollerId: p1.pollerId }))
  const revision = (id: string) => queryValue<number>(app, 'SELECT assignments_revision FROM worker_pollers WHERE id = ?', id)
  const [r1, r2] = [await revision(p1.pollerId), await revision(p2.pollerId)]
  const csv = [
    'name,address,protocol,userName,password,pollerId',
    `web-ä,192.0.2.10,SSH,checker,pw-0123456789,${p2.pollerId}`, // not the stored Web-Ä: the database folds A-Z only
    `WEB-B,192.0.2.10,SSH,checker,,${p2.pollerId}`, // the stored web-b
    `web-c,192.0.2.10,SSH,checker,pw-0123456789,${p2.pollerId}`,
    `Web-C,192.0.2.10,SSH,checker,pw-0123456789,${p2.pollerId}`,
  ].join('\n')
  const answer = await service.importCsv(ctx(), 'hosts.csv', Buffer.from(csv))
  t.match(answer.rows, [
    { name: 'web-ä', result: 'imported' },
    { name: 'WEB-B', result: 'updated' },
    { name: 'web-c', result: 'imported' },
    { name: 'Web-C', result: 'rejected', errors: [{ column: 'name', reason: 'repeats the name of line 4' }] },
  ])
  t.same(await query(app, 'SELECT name, poller_id FROM agentless_connections ORDER BY id'), [
    { name: 'Web-Ä', poller_id: p1.pollerId },
    { name: 'WEB-B', poller_id: p2.pollerId },
    { name: 'web-ä', poller_id: p2.pollerId },
    { name: 'web-c', poller_id: p2.pollerId },
  ])
  t.same([(await revision(p1.pollerId)) - r1, (await revision(p2.pollerId)) - r2], [1, 3], 'one bump for each connection gained or lost')
})

t.test("a name stored by another request between the import's look-up and its write: that row updates it, as a name stored before, never a 500", async (t) => {
  const { app, service, deps } = await setup(t)
  // The other request starts from the test's own context (not the import's unit of work),
  // and runs once the import has read the stored names.
  let openGate!: () => void
  const gate = new Promise<void>((resolve) => (openGate = resolve))
  const other = gate.then(() => service.create(ctx(), host('web-2')))
  other.catch(() => {})
  const store = Object.create(deps.store)
  let raced = false
  store.connectionsByNames = async (names: readonly string[]) => {
    const rows = await deps.store.connectionsByNames(names)
    if (!raced) {
      raced = true
      openGate()
      // PostgreSQL: the create commits here. SQLite: it waits for the import's unit to end
      // (which must not wait for anything but its statements).
      if (app.storage.backend === 'postgres') await other.catch(() => {})
    }
    return rows
  }
  const importer = agentlessService({ ...deps, store })
  const csv = ['name,address,protocol,userName,password', 'web-2,192.0.2.12,SSH,checker,pw-0123456789', 'web-3,192.0.2.13,SSH,checker,pw-0123456789'].join('\n')
  const answer = await importer.importCsv(ctx(), 'hosts.csv', Buffer.from(csv))
  const created = await other.then(
    (made) => made.id,
    (err) => {
      t.match(err, { code: 'conflict', errors: [{ name: 'name' }] }, 'the create, after the import, is refused naming the name')
      return undefined
    },
  )
  if (created !== undefined) {
    // As for a name stored before the file came: its row updates that connection.
    t.match(answer, { totalRows: 2, imported: 1, updated: 1, rejected: 0 })
    t.match(answer.rows, [
      { line: 2, name: 'web-2', result: 'updated', connectionId: created, errors: [] },
      { line: 3, name: 'web-3', result: 'imported' },
    ])
  } else t.match(answer, { totalRows: 2, imported: 2, rejected: 0 })
  t.same(
    await query(app, "SELECT name, address FROM agentless_connections WHERE name IN ('web-2', 'web-3') ORDER BY name"),
    [
      { name: 'web-2', address: '192.0.2.12' },
      { name: 'web-3', address: '192.0.2.13' },
    ],
    'one web-2, with the values of the file, and the other row imported',
  )
  t.equal(await queryValue(app, "SELECT count(*) FROM audit_trail WHERE description LIKE 'Imported agentless connections%'"), 1, 'one audit record of the import')
})

t.test('a poller deleted while a connection is set to it: 404 naming pollerId, or set and then unregistered, never a 500', async (t) => {
  const { app, service, deps } = await setup(t)
  for (const how of ['create', 'update', 'register', 'import'] as const) {
    const reg = await service.registerPoller(ctx({ actor: null }), { name: `p-${how}`, version: '1.0', enrollmentSecret: SECRET })
    const existing = await service.create(ctx(), host(`stored-${how}`))
    // The deletion starts from the test's own context and runs once the poller was read.
    let openGate!: () => void
    const gate = new Promise<void>((resolve) => (openGate = resolve))
    const deleted = gate.then(() => service.deletePoller(ctx(), reg.pollerId))
    deleted.catch(() => {})
    const store = Object.create(deps.store)
    let raced = false
    store.poller = async (id: string, hold?: boolean) => {
      const row = await deps.store.poller(id, hold)
      if (!raced) {
        raced = true
        openGate()
        // PostgreSQL: the deletion commits here, unless the read holds the poller (then it
        // waits for this unit, which goes on after a while). SQLite: it waits for the unit.
        if (app.storage.backend === 'postgres') await Promise.race([deleted.catch(() => {}), new Promise((resolve) => setTimeout(resolve, 300))])
      }
      return row
    }
    const racing = agentlessService({ ...deps, store })
    const attempt =
      how === 'create'
        ? racing.create(ctx(), host(`new-${how}`, { pollerId: reg.pollerId }))
        : how === 'update'
          ? racing.update(ctx(), { id: existing.id, pollerId: reg.pollerId })
          : how === 'register'
            ? racing.register(ctx(), reg.pollerId, [existing.id])
            : racing.importCsv(ctx(), 'hosts.csv', Buffer.from(`name,address,protocol,userName,password,pollerId\nnew-${how},192.0.2.10,SSH,checker,pw-0123456789,${reg.pollerId}\n`))
    const outcome = await attempt.then(
      (answer) => ({ answer }),
      (err) => ({ err }),
    )
    if ('err' in outcome) t.match(outcome.err, { code: 'not-found', errors: [{ name: 'pollerId' }] }, `${how}: refused naming the poller`)
    else if (how === 'import') {
      const row = (outcome.answer as { rows: { result: string; errors: { column: string }[] }[] }).rows[0]
      t.ok(row.result === 'imported' || row.errors[0]?.column === 'pollerId', `${how}: the row imported or rejected naming pollerId (${JSON.stringify(row)})`)
    } else t.pass(`${how}: set before the deletion`)
    const set = !('err' in outcome) && (how !== 'import' || (outcome.answer as { imported: number }).imported === 1)
    t.match(await deleted, { poller: { id: reg.pollerId }, connectionsUnregistered: set ? 1 : 0 }, `${how}: the poller is deleted, the connection set to it counted as unregistered`)
    t.equal(await queryValue(app, 'SELECT count(*) FROM agentless_connections WHERE poller_id IS NOT NULL'), 0, `${how}: no connection is left on the deleted poller`)
  }
})

t.test('connections set to one poller at once near its limit: never more than the limit, the others 409 naming pollerId', async (t) => {
  const { app, service } = await setup(t)
  const limits = LIMITS as { connectionsPerPoller: number }
  const saved = limits.connectionsPerPoller
  limits.connectionsPerPoller = 5
  t.teardown(() => {
    limits.connectionsPerPoller = saved
  })
  const reg = await service.registerPoller(ctx({ actor: null }), { name: 'p1', version: '1.0', enrollmentSecret: SECRET })
  for (let i = 0; i < 3; i++) await service.create(ctx(), host(`on-${i}`, { pollerId: reg.pollerId }))
  const loose = [await service.create(ctx(), host('loose-1')), await service.create(ctx(), host('loose-2'))]
  const outcomes = await Promise.allSettled([
    ...Array.from({ length: 4 }, (_, i) => service.create(ctx(), host(`race-${i}`, { pollerId: reg.pollerId }))),
    service.update(ctx(), { id: loose[0].id, pollerId: reg.pollerId }),
    service.register(ctx(), reg.pollerId, [loose[1].id]),
  ])
  const refused = outcomes.filter((o) => o.status === 'rejected').map((o) => o.reason as { code?: string; errors?: { name: string }[]; message: string })
  t.ok(
    refused.every((e) => e.code === 'conflict' && e.errors?.[0]?.name === 'pollerId'),
    `every refusal is the limit's 409 naming pollerId (${refused.map((e) => e.message).join(' | ')})`,
  )
  const registered = outcomes.filter((o) => o.status === 'fulfilled' && (o.value as { failed?: number }).failed !== 1).length
  t.equal(registered, 2, 'only the two the limit left room for')
  t.equal(Number(await queryValue(app, 'SELECT count(*) FROM agentless_connections WHERE poller_id = ?', reg.pollerId)), 5, 'exactly the limit')
})

t.test('the poller gateway: registration, activation, heartbeats, assignments with credentials, runs and events', async (t) => {
  const { app, service, auditRows } = await setup(t)
  await t.rejects(service.registerPoller(ctx({ actor: null }), { name: 'p1', version: '1.0', enrollmentSecret: 'wrong-secret-0123456789' }), { code: 'unauthenticated' })
  t.match((await auditRows()).at(-1), { outcome: 'Refused', description: /refused: wrong enrollment secret/ })
  const reg = await service.registerPoller(ctx({ actor: null }), { name: 'p1', version: '1.0', enrollmentSecret: SECRET })
  t.match(reg, { name: 'p1', isActivated: false, heartbeatIntervalSeconds: 60 })
  t.ok(reg.credential.startsWith('ppl_'))
  await t.rejects(service.registerPoller(ctx({ actor: null }), { name: 'p1', version: '1.0', enrollmentSecret: SECRET }), { code: 'conflict' })

  const c = await service.create(ctx(), host('web-1', { pollerId: reg.pollerId }))
  const poller = ctx({ actor: 'poller:p1', sourceAddress: '192.0.2.50' })
  t.match(await service.heartbeat(poller, reg.pollerId, { version: '1.0' }), { instruction: 'StopChecking', isActivated: false })
  t.same((await service.assignments(poller, reg.pollerId)).connections, [], 'a poller not activated gets no connections')
  await t.rejects(service.reportRuns(poller, reg.pollerId, { runs: [] }), { code: 'poller-deactivated' })

  t.match(await service.setPollerActivated(ctx(), 'alice', { pollerId: reg.pollerId, isActivated: true }), { isActivated: true, activationChangedBy: 'alice', connectionsAssigned: 1 })
  const fetched = await service.assignments(poller, reg.pollerId)
  t.match(fetched.connections, [{ id: c.id, name: 'web-1', password: 'pw-0123456789', pollingIntervalSeconds: 300, timeoutSeconds: 10 }])

  const start = Date.now() - 5000
  const run = (status: 'Reachable' | 'Unreachable', error?: string) => ({
    runId: crypto.randomUUID(),
    connectionId: c.id,
    statusString: status,
    startTime: new Date(start).toISOString(),
    endTime: new Date(start + 1000).toISOString(),
    ...(error ? { statusErrorDescription: error } : {}),
  })
  t.match(await service.reportRuns(poller, reg.pollerId, { runs: [run('Reachable')] }), { succeeded: 1, failed: 0 })
  const down = await service.reportRuns(poller, reg.pollerId, { runs: [run('Unreachable', 'connection refused'), { ...run('Reachable'), connectionId: c.id + 100 }] })
  t.match(down, { succeeded: 1, failed: 1, results: [{ status: 'done' }, { status: 'failed', code: 'not-found' }] })
  t.match(await query(app, "SELECT details FROM events WHERE event_code = '0x210003'"), [{ details: /web-1 .* is Unreachable: connection refused/ }], 'one event when a reachable host stops answering')

  await t.rejects(service.heartbeat(poller, crypto.randomUUID(), { version: '1.0' }), { code: 'unauthenticated' }, 'a deleted or unknown poller')
  t.match(await service.deletePoller(ctx(), reg.pollerId), { connectionsUnregistered: 1, poller: { name: 'p1' } })
  await t.rejects(service.assignments(poller, reg.pollerId), { code: 'unauthenticated' })
})

t.test('in one report, each run sees the ones before it: a run started and ended, a late older run, a repeat, a host going down and up', async (t) => {
  const { app, service } = await setup(t)
  const reg = await service.registerPoller(ctx({ actor: null }), { name: 'p1', version: '1.0', enrollmentSecret: SECRET })
  await service.setPollerActivated(ctx(), 'alice', { pollerId: reg.pollerId, isActivated: true })
  const a = await service.create(ctx(), host('web-a', { pollerId: reg.pollerId }))
  const b = await service.create(ctx(), host('web-b', { pollerId: reg.pollerId }))
  const poller = ctx({ actor: 'poller:p1' })
  const t0 = Date.now() - 60_000
  const at = (ms: number) => new Date(t0 + ms).toISOString()
  const ended = (id: string, connectionId: number, status: 'Reachable' | 'Unreachable', start: number) => ({
    runId: id,
    connectionId,
    statusString: status,
    startTime: at(start),
    endTime: at(start + 1000),
    ...(status === 'Unreachable' ? { statusErrorDescription: `refused ${id.slice(0, 4)}` } : {}),
  })
  const [r1, r2, r3, r4, r5] = Array.from({ length: 5 }, () => crypto.randomUUID())
  await service.reportRuns(poller, reg.pollerId, { runs: [ended(r1, a.id, 'Reachable', 0)] })
  const answer = await service.reportRuns(poller, reg.pollerId, {
    runs: [
      { runId: r2, connectionId: a.id, statusString: 'Running', startTime: at(10_000) },
      ended(r2, a.id, 'Unreachable', 10_000), // the run just started ends: a goes down
      ended(r2, a.id, 'Reachable', 10_000), // told again otherwise: refused
      ended(r3, a.id, 'Reachable', 20_000), // a comes back
      ended(r4, b.id, 'Reachable', 30_000),
      ended(r5, b.id, 'Unreachable', 5_000), // older than b's latest: history only
      ended(r4, a.id, 'Reachable', 40_000), // r4 is b's
    ],
  })
  t.match(answer, {
    succeeded: 5,
    failed: 2,
    results: [{ status: 'done' }, { status: 'done' }, { status: 'failed', code: 'conflict' }, { status: 'done' }, { status: 'done' }, { status: 'done' }, { status: 'failed', code: 'conflict' }],
  })
  const latest = await query(app, 'SELECT id, run_id, status, last_result FROM agentless_connections ORDER BY id')
  t.same(latest, [
    { id: a.id, run_id: r3, status: 'Reachable', last_result: 'Reachable' },
    { id: b.id, run_id: r4, status: 'Reachable', last_result: 'Reachable' },
  ])
  t.same(await query(app, 'SELECT run_id, status FROM agentless_runs WHERE connection_id = ? ORDER BY start_ms', b.id), [
    { run_id: r5, status: 'Unreachable' },
    { run_id: r4, status: 'Reachable' },
  ])
  t.same(
    (await query(app, "SELECT event_code, details FROM events WHERE event_code IN ('0x210003', '0x210004') ORDER BY id")).map((e: any) => e.details.replace(/ \(.*?\)/, '')),
    ['web-a is Unreachable: refused ' + r2.slice(0, 4), 'web-a is reachable again.'],
    'a down, then up, in the order told; nothing for the late run of b',
  )
})

t.test('the sweep marks silent pollers offline once and fails runs that never ended', async (t) => {
  const { app, service } = await setup(t)
  const reg = await service.registerPoller(ctx({ actor: null }), { name: 'p1', version: '1.0', enrollmentSecret: SECRET })
  await service.setPollerActivated(ctx(), 'alice', { pollerId: reg.pollerId, isActivated: true })
  const c = await service.create(ctx(), host('web-1', { pollerId: reg.pollerId }))
  const poller = ctx({ actor: 'poller:p1' })
  await service.heartbeat(poller, reg.pollerId, { version: '1.0' })
  const started = Date.now() - 1000
  await service.reportRuns(poller, reg.pollerId, { runs: [{ runId: crypto.randomUUID(), connectionId: c.id, statusString: 'Running', startTime: new Date(started).toISOString() }] })
  t.same(await service.sweep(Date.now()), { offline: 0, abandoned: 0 }, 'nothing to do while heartbeats come')
  const later = started + RUN_GIVE_UP_MS + 181_000
  t.same(await service.sweep(later), { offline: 1, abandoned: 1 })
  t.same(await service.sweep(later), { offline: 0, abandoned: 0 }, 'once')
  t.equal(await queryValue(app, "SELECT count(*) FROM events WHERE event_code = '0x410002'"), 1, 'one poller offline event')
  const page = await service.statusPage({}, { field: 'computerName', direction: 'asc' }, 10, 0, 1000)
  t.match('rows' in page && page.rows[0], { status: 'Failed', status_error: /no end of this run/ })
})

t.test("a run's end reported after the sweep found it stale is kept: the sweep does not fail it", async (t) => {
  const { app, service, deps } = await setup(t)
  const reg = await service.registerPoller(ctx({ actor: null }), { name: 'p1', version: '1.0', enrollmentSecret: SECRET })
  await service.setPollerActivated(ctx(), 'alice', { pollerId: reg.pollerId, isActivated: true })
  const c = await service.create(ctx(), host('web-1', { pollerId: reg.pollerId }))
  const poller = ctx({ actor: 'poller:p1' })
  const runId = crypto.randomUUID()
  const started = Date.now() - RUN_GIVE_UP_MS - 1000
  await service.reportRuns(poller, reg.pollerId, { runs: [{ runId, connectionId: c.id, statusString: 'Running', startTime: new Date(started).toISOString() }] })
  // The poller's report of the end lands between the sweep's look for stale runs and its write.
  const store = Object.create(deps.store)
  store.staleRuns = async (before: number) => {
    const stale = await deps.store.staleRuns(before)
    await service.heartbeat(poller, reg.pollerId, { version: '1.0' })
    await service.reportRuns(poller, reg.pollerId, {
      runs: [{ runId, connectionId: c.id, statusString: 'Reachable', startTime: new Date(started).toISOString(), endTime: new Date().toISOString() }],
    })
    return stale
  }
  const sweeper = agentlessService({ ...deps, store })
  t.match(await sweeper.sweep(Date.now()), { abandoned: 0 })
  t.same(await query(app, 'SELECT status FROM agentless_runs WHERE run_id = ?', runId), [{ status: 'Reachable' }], 'the reported end stands')
  t.equal(await queryValue(app, 'SELECT status FROM agentless_connections WHERE id = ?', c.id), 'Reachable')
  t.equal(await queryValue(app, "SELECT count(*) FROM events WHERE event_code = '0x210003'"), 0, 'no unreachable event')
})

t.test('a very large page and the exports stream the connections in the order asked', async (t) => {
  const { service, auditRows } = await setup(t)
  for (const name of ['c-host', 'a-host', 'b-host']) await service.create(ctx(), host(name))
  const order = { field: 'computerName', direction: 'desc' as const }
  const page = await service.statusPage({}, order, 5000, 0, 1000)
  t.ok('stream' in page, 'above the threshold the rows are streamed')
  const names: string[] = []
  if ('stream' in page) for await (const r of page.stream) names.push(r.name)
  t.same(names, ['c-host', 'b-host', 'a-host'])
  t.match(page, { total: 3, filtered: 3 })

  const file = await service.exportConnections(ctx(), { filter: { computerName: 'b-' }, order, filters: [['ComputerName', 'b-']], sortGiven: false })
  t.match(file, { type: /text\/csv/, records: 1, fileName: /^agentless-connections-\d{8}T\d{6}Z\.csv$/ })
  let text = ''
  for await (const chunk of file.body) text += chunk.toString()
  t.match(text, /b-host,192\.0\.2\.10,SSH,22/)
  t.notMatch(text, /pw-0123456789/, 'no credentials in the file')
  t.match((await auditRows()).at(-1), { description: /Exported 1 agentless connection\(s\) in the import format/ })
})
