// Agentless checking's storage on PostgreSQL answers what SQLite's repository answers: the
// same pollers, connections, runs and published locations written through both, every read
// compared (the status list over every filter and sort, in pages).
import t from 'tap'
import { agentlessRepo, type RunWrite } from '../db/agentless.js'
import type { AgentlessFilter, ConnectionValues } from '../lib/agentless/ports.js'
import { pgAgentlessRepo } from '../db/postgres/agentless.js'
import type { Sort } from '../lib/ports.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const BASE = Date.UTC(2024, 4, 1, 8)
const MIN = 60_000
const DEFAULTS = { intervalSeconds: 300, timeoutSeconds: 30 }
const SORT_FIELDS = [
  'id',
  'computerName',
  'address',
  'protocol',
  'port',
  'userName',
  'isOverrideDefaults',
  'pollingIntervalSeconds',
  'timeoutSeconds',
  'pollerName',
  'statusString',
  'statusDescription',
  'statusErrorDescription',
  'startTime',
  'endTime',
  'durationMs',
  'lastReachableTime',
  'createdTime',
  'updatedTime',
]

const values = (i: number, over: Partial<ConnectionValues> = {}): ConnectionValues => ({
  name: `${['db-finance', 'Web', 'NYC-file', 'Éclair'][i % 4]}-${i}`,
  address: i % 3 ? `10.44.8.${i}` : `host${i}.corp.example`,
  protocol: i % 2 ? 'SSH' : 'WinRM',
  port: i % 2 ? 22 : 5986,
  useTls: i % 5 === 0,
  userName: ['root', 'Administrator', 'svc_scan'][i % 3],
  isOverrideDefaults: i % 4 === 0,
  pollingIntervalSeconds: i % 4 === 0 ? 60 * (i % 7) + 60 : null,
  timeoutSeconds: i % 6 === 0 ? 10 : null,
  ...over,
})

t.test('pollers, connections, runs and locations: PostgreSQL answers as SQLite', { skip: noPostgres }, async (t) => {
  const { db: sqlite } = tempDb(t)
  const pg = await pgTestDatabase(t)
  const lite = agentlessRepo(sqlite)
  const repo = pgAgentlessRepo(pg)
  const same = async (label: string, expected: unknown, got: Promise<unknown>) => t.same(await got, expected, label)
  /** A write through both; its answer compared unless it is SQLite's statement info. */
  const write = async <T>(label: string, a: () => T, b: () => Promise<unknown>, compare = true) => {
    const expected = a()
    const got = await b()
    if (compare) t.same(got, expected, label)
  }

  // Pollers.
  const pollers = [
    { id: '0b0e5f6c-1111-4222-8333-000000000001', name: 'Poller-East', hash: 'h1', hostName: 'east.corp', ip: '10.0.0.5', version: '1.2.0', now: BASE },
    { id: '0b0e5f6c-1111-4222-8333-000000000002', name: 'poller-west', hash: 'h2', hostName: null, ip: null, version: '1.2.1', now: BASE + MIN },
    { id: '0b0e5f6c-1111-4222-8333-000000000003', name: 'Édge', hash: 'h3', hostName: 'edge', ip: '10.0.0.7', version: '1.1.0', now: BASE + 2 * MIN },
  ]
  for (const p of pollers)
    await write(
      `insert poller ${p.name}`,
      () => lite.insertPoller(p),
      () => repo.insertPoller(p),
    )
  t.throws(() => lite.insertPoller({ ...pollers[0], id: 'x1', hash: 'hx', name: 'POLLER-EAST' }), 'SQLite: a name taken in another case')
  await t.rejects(repo.insertPoller({ ...pollers[0], id: 'x1', hash: 'hx', name: 'POLLER-EAST' }), { code: 'duplicate-key' }, 'PostgreSQL: a name taken in another case')
  await same('poller by name, other case', lite.pollerByName('POLLER-west'), repo.pollerByName('POLLER-west'))
  await same('poller by name, non-ASCII folded by neither', lite.pollerByName('édge'), repo.pollerByName('édge'))
  await same('poller by upper-case id', lite.poller(pollers[0].id.toUpperCase()), repo.poller(pollers[0].id.toUpperCase()))
  await same('poller absent', lite.poller('nope'), repo.poller('nope'))
  await same('poller by credential', lite.pollerByCredential('h2'), repo.pollerByCredential('h2'))
  await same('poller by unknown credential', lite.pollerByCredential('zz'), repo.pollerByCredential('zz'))
  await write(
    'activate',
    () => lite.setActivated(pollers[0].id, true, BASE + 3 * MIN, 'admin@acme'),
    () => repo.setActivated(pollers[0].id, true, BASE + 3 * MIN, 'admin@acme'),
  )
  await write(
    'activate absent',
    () => lite.setActivated('nope', true, BASE, null),
    () => repo.setActivated('nope', true, BASE, null),
  )
  const beat = { id: pollers[1].id, now: BASE + 4 * MIN, version: '1.3.0', hostName: null, ip: '10.0.0.9', startedMs: BASE, activeChecks: 3 }
  await write(
    'heartbeat',
    () => lite.heartbeat(beat),
    () => repo.heartbeat(beat),
  )
  await write(
    'touch',
    () => lite.touch(pollers[2].id, '10.9.9.9'),
    () => repo.touch(pollers[2].id, '10.9.9.9'),
    false,
  )
  await same('gone quiet', lite.goneQuiet(BASE + 3 * MIN), repo.goneQuiet(BASE + 3 * MIN))
  await write(
    'offline',
    () => lite.setOffline(pollers[0].id, BASE + 5 * MIN),
    () => repo.setOffline(pollers[0].id, BASE + 5 * MIN),
  )
  await write(
    'offline again: unchanged',
    () => lite.setOffline(pollers[0].id, BASE + 6 * MIN),
    () => repo.setOffline(pollers[0].id, BASE + 6 * MIN),
  )
  await same('gone quiet after', lite.goneQuiet(BASE + 10 * MIN), repo.goneQuiet(BASE + 10 * MIN))

  // Connections.
  const ids: number[] = []
  for (let i = 1; i <= 30; i++) {
    const v = values(i)
    const poller = i % 3 === 0 ? null : pollers[i % 3].id
    const now = BASE + i * MIN
    const id = lite.insertConnection(v, i % 2 ? 'Password' : 'PrivateKey', poller, now)
    t.equal(await repo.insertConnection(v, i % 2 ? 'Password' : 'PrivateKey', poller, now), id, `connection ${i}'s id`)
    ids.push(id)
    if (i % 4) {
      const sealed = Buffer.from(`sealed-${i}`)
      lite.setCredentials(id, 'Password', sealed, now + 1)
      await repo.setCredentials(id, 'Password', sealed, now + 1)
    }
  }
  t.throws(() => lite.insertConnection(values(1, { name: 'WEB-1' }), 'Password', null, BASE), 'SQLite: a connection name taken')
  await t.rejects(repo.insertConnection(values(1, { name: 'WEB-1' }), 'Password', null, BASE), { code: 'duplicate-key' }, 'PostgreSQL: a connection name taken')
  await write(
    'update',
    () => lite.updateConnection(ids[4], values(5, { port: 2222, useTls: true }), pollers[2].id, BASE + 40 * MIN),
    () => repo.updateConnection(ids[4], values(5, { port: 2222, useTls: true }), pollers[2].id, BASE + 40 * MIN),
  )
  await write(
    'set poller',
    () => lite.setPoller(ids[5], null, BASE + 41 * MIN),
    () => repo.setPoller(ids[5], null, BASE + 41 * MIN),
    false,
  )
  for (const by of [1, 3])
    await write(
      `bump ${by}`,
      () => lite.bumpRevision(pollers[1].id, by),
      () => repo.bumpRevision(pollers[1].id, by),
    )
  await write(
    'bump none',
    () => lite.bumpRevision(null),
    () => repo.bumpRevision(null),
  )
  await same('connection', lite.connection(ids[4]), repo.connection(ids[4]))
  await same('connection absent', lite.connection(999), repo.connection(999))
  await same('connection by name, other case', lite.connectionByName('WEB-1'), repo.connectionByName('WEB-1'))
  await same('connection by name, non-ASCII other case', lite.connectionByName('éclair-4'), repo.connectionByName('éclair-4'))
  const byId = <T extends { id: number }>(rows: T[]) => [...rows].sort((a, b) => a.id - b.id)
  // Rows by names and ids in any order: the services key them.
  t.same(byId(await repo.connectionsByNames(['web-1', 'NYC-FILE-2', 'Éclair-4', 'none', 'web-1'])), byId(lite.connectionsByNames(['web-1', 'NYC-FILE-2', 'Éclair-4', 'none', 'web-1'])), 'by names')
  await same('by names: none', lite.connectionsByNames([]), repo.connectionsByNames([]))
  t.same(byId(await repo.connectionsByIds([ids[3], ids[1], 999, ids[3]])), byId(lite.connectionsByIds([ids[3], ids[1], 999, ids[3]])), 'by ids')
  const streamed = async (it: AsyncIterable<unknown>) => {
    const out: unknown[] = []
    for await (const r of it) out.push(r)
    return out
  }
  const order = [...ids].reverse().concat([999, ids[0]])
  t.same(await streamed(repo.connectionsInPages(order)), await streamed(lite.connectionsInPages(order)), 'in pages, in the order asked')
  await same('in pages: none', await streamed(lite.connectionsInPages([])), streamed(repo.connectionsInPages([])))
  for (const p of pollers) {
    await same(`load of ${p.name}`, lite.pollerLoad(p.id), repo.pollerLoad(p.id))
    await same(`assigned to ${p.name}`, lite.assigned(p.id), repo.assigned(p.id))
    await same(`with counts ${p.name}`, lite.pollerWithCounts(p.id.toUpperCase()), repo.pollerWithCounts(p.id.toUpperCase()))
  }
  await same('count', lite.countAll(), repo.countAll())

  // Runs: new, finished, reported again, each made the latest or not; history pruned.
  let run = 0
  const store = async (connection: number, status: string, startMs: number, endMs: number | null, isNew: boolean, latest: boolean, error: string | null = null, runId?: string) => {
    const r: RunWrite = {
      runId: runId ?? `run-${++run}`,
      connectionId: connection,
      pollerId: pollers[1].id,
      status,
      startMs,
      endMs,
      description: status === 'Reachable' ? 'OpenSSH_9.6' : null,
      error,
      now: startMs + 500,
    }
    lite.storeRun(r, isNew, latest)
    await repo.storeRun(r, isNew, latest)
    return r.runId
  }
  for (let k = 0; k < 25; k++) {
    const c = ids[k % 6]
    const start = BASE + k * 10 * MIN
    const status = ['Reachable', 'Unreachable', 'Failed', 'Failed', 'Unreachable'][k % 5]
    const id = await store(c, 'Running', start, null, true, k % 7 !== 0)
    await store(c, status, start, start + 3000 + k, false, k % 7 !== 0, status === 'Reachable' ? null : `timed out ${k} ${'é'.repeat(k % 3)}`, id)
  }
  // A Reachable run without an end; a run still Running (the sweeper gives up on it).
  await store(ids[7], 'Reachable', BASE + 300 * MIN, null, true, true)
  const stuck = await store(ids[8], 'Running', BASE + 310 * MIN, null, true, true)
  await same('stale runs', lite.staleRuns(BASE + 400 * MIN), repo.staleRuns(BASE + 400 * MIN))
  const given = { runId: stuck, status: 'Failed', startMs: BASE + 310 * MIN, endMs: BASE + 420 * MIN, description: null, error: 'gave up', now: BASE + 420 * MIN }
  t.equal(lite.abandonRun(given), true, 'SQLite: the run was still Running')
  t.equal(await repo.abandonRun(given), true, 'PostgreSQL: the run was still Running')
  t.equal(lite.abandonRun(given), false, 'SQLite: a run no longer Running is left')
  t.equal(await repo.abandonRun(given), false, 'PostgreSQL: a run no longer Running is left')
  lite.setLatest({ ...given, connectionId: ids[8] })
  await repo.setLatest({ ...given, connectionId: ids[8] })
  const runIds = Array.from({ length: run + 2 }, (_, i) => `run-${i}`)
  t.same(
    (await repo.runsByIds(runIds)).sort((a, b) => a.run_id.localeCompare(b.run_id)),
    lite.runsByIds(runIds).sort((a, b) => a.run_id.localeCompare(b.run_id)),
    'runs kept',
  )
  t.same(await pg.value('SELECT count(*) FROM agentless_runs'), sqlite.prepare('SELECT count(*) FROM agentless_runs').pluck().get(), 'as many runs kept')
  await same('connections after runs', lite.connectionsByIds(ids), repo.connectionsByIds(ids))
  await same('pollers with counts', lite.pollers(), repo.pollers())

  // The status list: every filter and sort, in pages.
  const filters: AgentlessFilter[] = [
    {},
    { computerName: 'WEB' },
    { computerName: 'éclair' },
    { computerName: 'ÉCLAIR' },
    { statusString: 'reach' },
    { statusDescription: 'openssh' },
    { statusErrorDescription: 'TIMED' },
    { statusErrorDescription: 'é' },
    { prevRunningErrors: 'out 1' },
    { prevRunningErrors: 'É' },
    { globalSearch: 'west' },
    { globalSearch: 'corp.example' },
    { globalSearch: 'timed out 2' },
    { globalSearch: '%' },
    { globalSearch: 'svc_' },
    { startDay: [BASE, BASE + 86_400_000] },
    { endDay: [BASE + 60 * MIN, BASE + 86_400_000] },
    { fromStart: BASE + 50 * MIN, toStart: BASE + 200 * MIN },
    { fromEnd: BASE + 100 * MIN },
    { toEnd: BASE + 100 * MIN },
    { isOverrideDefaults: true },
    { isOverrideDefaults: false, computerName: 'nyc' },
  ]
  let lists = 0
  let matching = 0
  for (const f of filters) {
    await same(`counts ${JSON.stringify(f)}`, lite.counts(f), repo.counts(f))
    if (lite.counts(f).filtered > 0) matching++
    for (const field of SORT_FIELDS) {
      for (const direction of ['asc', 'desc'] as const) {
        const sort: Sort = { field, direction }
        await same(`ids ${field} ${direction} ${JSON.stringify(f)}`, lite.ids(f, sort, DEFAULTS), repo.ids(f, sort, DEFAULTS))
        lists++
      }
    }
    for (const [limit, offset] of [
      [5, 0],
      [5, 5],
      [7, 20],
      [100, 0],
      [3, 40],
    ]) {
      const sort: Sort = { field: SORT_FIELDS[(limit + offset) % SORT_FIELDS.length], direction: offset % 2 ? 'desc' : 'asc' }
      await same(`list ${sort.field} ${limit}@${offset} ${JSON.stringify(f)}`, lite.list(f, sort, DEFAULTS, limit, offset), repo.list(f, sort, DEFAULTS, limit, offset))
      await same(`ids ${limit}@${offset}`, lite.ids(f, sort, DEFAULTS, limit, offset), repo.ids(f, sort, DEFAULTS, limit, offset))
    }
  }
  t.ok(lists > 800, `${lists} orders compared`)
  t.ok(matching >= filters.length - 3, `${matching} of ${filters.length} filters match some connections`)

  // The asset feed's sources and the locations it published.
  for (let i = 1; i <= 5; i++) {
    const agent = [i, `u-${i}`, `m-${i}`, BASE, `HOST-${i}`, i % 2 ? `10.1.1.${i}` : null, i % 2 ? 'sw1' : null, i === 3 ? 'Connected' : 'Disconnected']
    sqlite.prepare('INSERT INTO agents (id, uuid, machine_id, enrolled_ms, host_identifier, local_ip_address, switch_name, connection_status) VALUES (?, ?, ?, ?, ?, ?, ?, ?)').run(...agent)
    await pg.run('INSERT INTO agents (id, uuid, machine_id, enrolled_ms, host_identifier, local_ip_address, switch_name, connection_status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)', agent)
    for (let k = 0; k < i % 3; k++) {
      const p = [i * 10 + k, i, `u-${i}`, `USB\\VID_046D&PID_C52B\\${k}`, '046D', 'C52B', k ? 'Logi' : null, k, BASE, BASE]
      sqlite.prepare('INSERT INTO peripherals (id, agent_id, agent_uuid, device_id, vid, pid, gui_vid, approved, first_seen_ms, last_seen_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').run(...p)
      await pg.run('INSERT INTO peripherals (id, agent_id, agent_uuid, device_id, vid, pid, gui_vid, approved, first_seen_ms, last_seen_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)', p)
    }
  }
  for (const [after, limit] of [
    [0, 2],
    [2, 10],
    [5, 10],
  ])
    await same(`agents after ${after}`, lite.agentsAfter(after, limit), repo.agentsAfter(after, limit))
  await same('peripherals of', lite.peripheralsOf([5, 1, 2, 99]), repo.peripheralsOf([5, 1, 2, 99]))
  await same('peripherals of none', lite.peripheralsOf([]), repo.peripheralsOf([]))
  await same('connections after', lite.connectionsAfter(10, 7), repo.connectionsAfter(10, 7))
  for (const [type, key, location, now] of [
    ['Agent', 'u-1', '{"a":1}', BASE],
    ['Peripheral', 'u-1/x', '{"p":1}', BASE],
    ['Agent', 'u-1', '{"a":2}', BASE + 1],
    ['AgentlessHost', '3', '{"h":1}', BASE + 2],
  ] as const) {
    lite.putLocation(type, key, location, now)
    await repo.putLocation(type, key, location, now)
  }
  await same('locations', lite.locations('Agent', ['u-1', 'u-2']), repo.locations('Agent', ['u-1', 'u-2']))
  await same('locations none', lite.locations('Peripheral', []), repo.locations('Peripheral', []))
  t.same(await pg.query('SELECT * FROM asset_locations ORDER BY asset_type, asset_key'), sqlite.prepare('SELECT * FROM asset_locations ORDER BY asset_type, asset_key').all(), 'locations as written')

  // Deletes: a connection (its runs go with it), a poller (its connections stay, unregistered).
  await write(
    'delete connection',
    () => lite.deleteConnection(ids[0]),
    () => repo.deleteConnection(ids[0]),
  )
  await write(
    'delete connection again',
    () => lite.deleteConnection(ids[0]),
    () => repo.deleteConnection(ids[0]),
  )
  await write(
    'delete poller',
    () => lite.deletePoller(pollers[1].id, BASE + 500 * MIN),
    () => repo.deletePoller(pollers[1].id, BASE + 500 * MIN),
  )
  await write(
    'delete poller again',
    () => lite.deletePoller(pollers[1].id, BASE + 500 * MIN),
    () => repo.deletePoller(pollers[1].id, BASE + 500 * MIN),
  )
  await same('pollers after deletes', lite.pollers(), repo.pollers())
  await same('connections after deletes', lite.list({}, { field: 'id', direction: 'asc' }, DEFAULTS, 100, 0), repo.list({}, { field: 'id', direction: 'asc' }, DEFAULTS, 100, 0))
  t.same(await pg.value('SELECT count(*) FROM agentless_runs'), sqlite.prepare('SELECT count(*) FROM agentless_runs').pluck().get(), 'runs of the deleted connection gone')
})
