// Asset discovery on PostgreSQL answers what SQLite's repository answers: one fleet of agents,
// peripherals and agentless hosts written into both databases, then hundreds of random
// queries over every filter, sort, global search and page compared row for row.
import t from 'tap'
import { assetsRepo } from '../db/assets.js'
import type { AssetQuery, AssetSort } from '../lib/assets/ports.js'
import { internPeripheralTexts } from '../db/gateway.js'
import type { DB } from '../db/index.js'
import { pgAssetsRepo } from '../db/postgres/assets.js'
import type { Postgres } from '../db/postgres/index.js'
import { conditionGroups, FILTER_FIELDS, searchPattern, type FilterInput } from '../lib/assets/query.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const DAY = 86_400_000
const BASE = Date.UTC(2024, 4, 1, 8)

/** A seeded generator, so that every run asks the same queries. */
function random(seed: number) {
  let s = seed >>> 0
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0
    let x = s
    x = Math.imul(x ^ (x >>> 15), x | 1)
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61)
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
  const int = (n: number) => Math.floor(next() * n)
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]
  return { next, int, pick, chance: (p: number) => next() < p }
}

type Values = Record<string, unknown>

/** The same row into both databases, with SQLite's columns. */
async function insertBoth(sqlite: DB, pg: Postgres, table: string, row: Values, sqliteOnly: Values = {}) {
  const columns = Object.keys(row)
  const all = { ...row, ...sqliteOnly }
  sqlite
    .prepare(
      `INSERT INTO ${table} (${Object.keys(all).join(', ')}) VALUES (${Object.keys(all)
        .map((c) => '@' + c)
        .join(', ')})`,
    )
    .run(all)
  await pg.run(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map((_, i) => `$${i + 1}`).join(', ')})`, Object.values(row))
}

const HOSTS = ['NYC-Finance-WS00017', 'LDN-HR-LT00002', 'DESKTOP-Q7XZ1AB', 'srv-db-01', 'Ékran-Poste', 'build_agent%01', 'VDI-POOL-7', 'nyc-finance-ws00018']
const MODELS = ['OptiPlex 7090', 'ThinkPad T14', 'EliteBook 840', null]
const VENDORS = ['Dell Inc.', 'LENOVO', 'HP', null]
const MODES = ['Standard', 'VDI', 'Server', null]
const SWITCHES: [string | null, string | null][] = [
  ['10.0.0.1', 'core-sw-1'],
  ['10.0.0.2', null],
  [null, 'Edge-SW'],
  [null, 'edge-sw'],
  [null, null],
]
const MODELS_USB = [
  ['046D', 'C52B', 'Unifying Receiver', 'Logitech'],
  ['0483', '5740', 'STM32 Virtual COM Port', 'STMicroelectronics'],
  ['1D6B', '0104', null, null],
  ['1915', '0102', 'nRF52 Dongle', 'Nordic Semiconductor'],
  ['05AC', '12A8', 'iPhone', 'Apple Inc.'],
] as const

async function seed(sqlite: DB, pg: Postgres) {
  const r = random(7)
  const texts = internPeripheralTexts(sqlite)
  const agents: { id: number; uuid: string }[] = []
  for (let i = 1; i <= 40; i++) {
    const uuid = `${(i * 2654435761).toString(16).padStart(8, '0').slice(0, 8)}-1111-4222-8333-${String(i).padStart(12, '0')}`
    const ip = r.chance(0.15) ? null : `10.${r.int(3)}.${r.int(4)}.${i}`
    const macs = [`00-1A-2B-3C-4D-${i.toString(16).toUpperCase().padStart(2, '0')}`, `F4:26:79:AA:BB:${i.toString(16).padStart(2, '0')}`]
    const nics = r.chance(0.1)
      ? []
      : [
          { name: 'Wi-Fi', macAddress: r.chance(0.2) ? '' : macs[1], ipAddresses: ['192.168.1.5'] },
          { name: 'Ethernet', macAddress: macs[0], ipAddresses: ip && r.chance(0.7) ? [ip] : [] },
        ]
    const [switchIp, switchName] = r.pick(SWITCHES)
    const connected = r.chance(0.6)
    const row = {
      id: i,
      uuid,
      machine_id: `machine-${i}`,
      enrolled_ms: BASE + r.int(20) * DAY + (r.chance(0.3) ? 0 : r.int(DAY)),
      host_identifier: `${r.pick(HOSTS)}${r.chance(0.5) ? '' : `-${i}`}`,
      local_ip_address: ip,
      manufacturer: r.pick(VENDORS),
      pc_model: r.pick(MODELS),
      nics_json: JSON.stringify(nics),
      nics_text: nics.map((n) => `${n.name}||${n.macAddress}||${n.ipAddresses.join(' ')}||Up`).join(' ') || null,
      connection_status: connected ? 'Connected' : 'Disconnected',
      display_status: connected ? r.pick(['Connected', 'Armed']) : 'Disconnected',
      last_updated_ms: r.chance(0.1) ? null : BASE + r.int(30) * DAY,
      severity: r.int(8),
      has_unapproved: r.int(2),
      has_vulnerable: r.chance(0.2) ? 1 : 0,
      has_attack_tool: r.chance(0.15) ? 1 : 0,
      running_mode: r.pick(MODES),
      switch_ip: switchIp,
      switch_name: switchName,
      port_id: r.chance(0.5) ? `Gi1/0/${r.int(48)}` : null,
      port_name: r.chance(0.3) ? `Port ${r.int(48)}` : null,
    }
    await insertBoth(sqlite, pg, 'agents', row)
    agents.push({ id: i, uuid })
  }
  let pid = 0
  for (const a of agents) {
    for (let k = r.int(7); k > 0; k--) {
      pid++
      const [vid, product, guiPid, guiVid] = r.pick(MODELS_USB)
      const present = r.chance(0.75) ? 1 : 0
      const approved = r.chance(0.4) ? 1 : 0
      const row = {
        id: pid,
        agent_id: a.id,
        agent_uuid: a.uuid,
        device_id: `USB\\VID_${vid}&PID_${product}\\${r.chance(0.2) ? 'SER%_' : ''}${pid}`,
        vid,
        pid: product,
        serial_number: `S${pid}`,
        description: r.chance(0.7) ? 'USB Input Device' : null,
        manufacturer: guiVid ? guiVid.split(' ')[0] : r.chance(0.5) ? '(Standard system devices)' : null,
        caption: r.chance(0.6) ? (guiPid ?? 'USB Composite Device') : null,
        gui_vid: r.chance(0.8) ? guiVid : null,
        gui_pid: r.chance(0.8) ? guiPid : null,
        dev_icon: r.pick([0, 1, 4, 4, 7, 12]),
        present,
        approved,
        admin_status: approved ? 'Approved' : r.pick(['NotReviewed', 'Disapproved']),
        is_unapproved: approved ? 0 : r.int(2),
        is_vulnerable: r.chance(0.15) ? 1 : 0,
        is_attack_tool: r.chance(0.1) ? 1 : 0,
        vulnerability: r.chance(0.2) ? 'CVE-2024-0001' : null,
        severity: r.int(8),
        first_seen_ms: BASE + r.int(25) * DAY + (r.chance(0.3) ? 0 : r.int(DAY)),
        last_seen_ms: BASE + r.int(30) * DAY,
      }
      const t = texts({ guiVid: row.gui_vid, manufacturer: row.manufacturer, guiPid: row.gui_pid, description: row.description, caption: row.caption })
      // The interned texts are SQLite's search structure only.
      await insertBoth(sqlite, pg, 'peripherals', row, { vendor_text_id: t.vendorTextId, product_text_id: t.productTextId })
    }
  }
  for (let i = 1; i <= 8; i++) {
    const status = r.pick(['Pending', 'Reachable', 'Unreachable', 'Failed'])
    await insertBoth(sqlite, pg, 'agentless_connections', {
      id: i,
      name: `${r.pick(['db-finance', 'Web', 'NYC-file'])}-${i}`,
      address: r.chance(0.5) ? `10.44.8.${i}` : `host${i}.corp.example`,
      protocol: r.pick(['SSH', 'WinRM']),
      port: 22,
      user_name: 'root',
      credential_type: 'Password',
      credentials: Buffer.from([0]),
      credentials_updated_ms: 1,
      created_ms: BASE + r.int(20) * DAY,
      updated_ms: 1,
      status,
      last_reachable_ms: status === 'Reachable' || r.chance(0.3) ? BASE + r.int(30) * DAY : null,
    })
  }
  // Identity columns go on after the ids written here.
  for (const table of ['agents', 'peripherals', 'agentless_connections']) await pg.run(`SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT max(id) FROM ${table}))`)
}

const TEXT_VALUES: Record<string, string[]> = {
  key: ['-1111-', '0000000000', '/usb', '4222-8333-000000000012', '3', 'VID_046D'],
  name: ['finance', 'NYC', 'ékran', 'Ékran', 'build_agent%', 'srv', 'iPhone', 'usb input', 'Unifying', '_', '%'],
  mac: ['001a2b3c4d', '00-1A-2B-3C-4D-0A', 'f4:26:79', 'dormant', 'dormant device', 'aa'],
  ipAddress: ['10.', '10.1', '192.168', '.5', '10.44.8.3'],
  model: ['optiplex', 'ThinkPad T14', 'STM32', 'iphone'],
  vendor: ['dell', 'LENOVO', 'Logitech', 'Apple', 'standard'],
  statusDescription: ['Connected', 'armed', 'Disconnected', 'Approved', 'Not approved', 'Disapproved', 'Reachable', 'pending'],
  switchIp: ['10.0.0.1', '10.0.0'],
  switchName: ['core', 'EDGE-SW', 'edge-sw'],
  portName: ['Gi1/0', 'Port 1', 'port'],
}
const TEXT_EXPRESSIONS = ['Exact', 'NotExact', 'Contains', 'NotContains', 'StartsWith', 'EndsWith']
const NUMBER_VALUES: Record<string, number[]> = {
  type: [1, 2, 3, 8, 10],
  icon: [0, 1, 4, 7, 12, 100, 101, 102, 103],
  hierarchy: [0, 1, 2],
  riskLevel: [0, 1, 3, 4, 5, 6, 7, 8, 9, 10],
}
const NUMBER_EXPRESSIONS = ['Exact', 'NotExact', 'GreaterThan', 'GreaterThanOrEqual', 'LessThan', 'LessThanOrEqual']

function randomFilter(r: ReturnType<typeof random>, field: string): FilterInput {
  const op = r.chance(0.3) ? 'OR' : 'AND'
  if (field in TEXT_VALUES) {
    const multiple = r.chance(0.25)
    const value = multiple ? [r.pick(TEXT_VALUES[field]), r.pick(TEXT_VALUES[field])].join(',') : r.pick(TEXT_VALUES[field])
    return { field, expression: r.pick(TEXT_EXPRESSIONS), value, op, conditionTypeValue: multiple ? 'multiple' : null }
  }
  if (field in NUMBER_VALUES) {
    const expression = r.pick(NUMBER_EXPRESSIONS)
    const list = expression.endsWith('Exact') && r.chance(0.4)
    const value = list ? [r.pick(NUMBER_VALUES[field]), r.pick(NUMBER_VALUES[field])].join(',') : String(r.pick(NUMBER_VALUES[field]))
    return { field, expression, value, op }
  }
  if (field === 'isOnline' || field === 'isRiskAccepted') return { field, expression: r.pick(['Exact', 'NotExact']), value: r.pick(['true', 'false', '1', '0']), op }
  const ms = BASE + r.int(30) * DAY + (r.chance(0.5) ? 0 : r.int(DAY))
  const value = r.chance(0.5) ? new Date(ms).toISOString().slice(0, 10) : new Date(ms).toISOString()
  return { field, expression: r.pick(NUMBER_EXPRESSIONS), value, op }
}

t.test('asset pages, counts and summaries: PostgreSQL answers as SQLite', { skip: noPostgres }, async (t) => {
  const { db: sqlite } = tempDb(t)
  const pg = await pgTestDatabase(t)
  await seed(sqlite, pg)
  const lite = assetsRepo(sqlite)
  const repo = pgAssetsRepo(pg)

  t.equal(await repo.total(), lite.total(), 'every asset counted')

  const rareSets = [[], ['0483:5740'], ['0483:5740', '1915:0102', '05AC:12A8'], ['FFFF:0000']]
  for (const rare of rareSets) {
    for (const since of [0, BASE + 10 * DAY, BASE + 40 * DAY]) {
      const steps = lite.summary(rare, since)
      let s = steps.next()
      while (!s.done) s = steps.next()
      const key = (c: { type: number; risk_level: number; is_online: number; is_new: number }) => `${c.type}:${c.risk_level}:${c.is_online}:${c.is_new}`
      const sorted = <T extends { type: number; risk_level: number; is_online: number; is_new: number }>(xs: T[]) => [...xs].sort((x, y) => key(x).localeCompare(key(y)))
      const pgSteps = repo.summary(rare, since)
      let p = await pgSteps.next()
      while (!p.done) p = await pgSteps.next()
      // Counts in any order: SQLite's come in the order its ranges met them.
      t.same(sorted(p.value), sorted(s.value), `summary, rare ${rare.length}, since ${since}`)
    }
  }
  for (const since of [0, BASE + 5 * DAY, BASE + 15 * DAY, BASE + 40 * DAY]) {
    const steps = lite.switches(since)
    let s = steps.next()
    while (!s.done) s = steps.next()
    t.same(await repo.switches(since), s.value, `switches since ${since}`)
  }

  const r = random(42)
  const searches = [
    'finance',
    'NYC-fin',
    '10.1',
    '.168.1',
    'optiplex',
    'lenovo',
    'f4:26:79',
    'stm32 virtual',
    'STMICRO',
    'vid_1d6b',
    'SER%_',
    '-8333-0000000000',
    'ab',
    'c',
    'é',
    'Ékran',
    '/usb',
    'db-finance',
    'corp.example',
    'no such text',
    '3',
  ]
  const sorts: AssetSort[] = FILTER_FIELDS.flatMap((field) => [
    { field, direction: 'asc' as const },
    { field, direction: 'desc' as const },
  ])
  let compared = 0
  let matched = 0
  for (let n = 0; n < 320; n++) {
    const filters = Array.from({ length: r.pick([0, 0, 1, 1, 2, 3]) }, () => randomFilter(r, r.pick(FILTER_FIELDS)))
    const system = Array.from({ length: r.pick([0, 0, 0, 1, 2]) }, () => randomFilter(r, r.pick(FILTER_FIELDS)))
    const q: AssetQuery = {
      filters: conditionGroups(filters, 'filters'),
      system: conditionGroups(system, 'systemFilters'),
      search: r.chance(0.3) ? searchPattern(r.pick(searches), 'globalSearch') : undefined,
      rare: r.pick(rareSets),
    }
    const sort = r.pick(sorts)
    const limit = r.pick([1, 5, 10, 25, 1000])
    const first = lite.page(q, sort, limit, 0)
    const offsets = [0, r.int(Math.max(1, first.filtered + 2)), limit]
    for (const offset of offsets) {
      const expected = lite.page(q, sort, limit, offset)
      const got = await repo.page(q, sort, limit, offset)
      compared++
      if (expected.rows.length > 0) matched++
      // Stop at the first difference, with the query that made it.
      if (!t.same(got, expected, `query ${n} at ${offset}`)) {
        t.comment(JSON.stringify({ q, sort, limit, offset }))
        return
      }
    }
  }
  t.ok(compared >= 960, `${compared} pages compared`)
  t.ok(matched > compared / 3, `${matched} pages held rows`)

  // Paging through a whole result, a page after another (SQLite reads these from where the last ended).
  for (const sort of [
    { field: 'riskLevel', direction: 'desc' },
    { field: 'firstSeen', direction: 'asc' },
    { field: 'name', direction: 'asc' },
    { field: 'lastSeen', direction: 'desc' },
  ] as AssetSort[]) {
    const q: AssetQuery = { filters: [], system: [], rare: ['0483:5740', '1915:0102'] }
    const total = lite.page(q, sort, 1, 0).filtered
    for (let offset = 0; offset < total + 7; offset += 7) t.same(await repo.page(q, sort, 7, offset), lite.page(q, sort, 7, offset), `${sort.field} ${sort.direction} at ${offset}`)
  }

  // A query that rules every source out reads nothing.
  const none: AssetQuery = { filters: [[{ field: 'type', op: 'in', values: [99] }]], system: [], rare: [] }
  t.same(await repo.page(none, { field: 'name', direction: 'asc' }, 10, 0), lite.page(none, { field: 'name', direction: 'asc' }, 10, 0))
})

t.test('an asset message is queued for every enabled destination fed assets', { skip: noPostgres }, async (t) => {
  const pg = await pgTestDatabase(t)
  const destination = (id: string, enabled: number, feedAssets: number) =>
    pg.run(
      `INSERT INTO alarm_destinations (id, name, name_key, type, enabled, feed_assets, settings, created_ms, updated_ms)
       VALUES ($1, $1, $1, 'webhook', $2, $3, '{}', 1, 1)`,
      [id, enabled, feedAssets],
    )
  await destination('b-dest', 1, 1)
  await destination('a-dest', 1, 1)
  await destination('c-off', 0, 1)
  await destination('d-events', 1, 0)
  const ids = await pg.query<{ id: number }>(`INSERT INTO asset_messages (created_ms, kind, asset_key, body) VALUES (1, 'AssetUpdated', 'k1', '{}'), (2, 'AssetUpdated', 'k2', '{}') RETURNING id`)
  const queued = await pg.query<{ destination_id: string; feed: string; record_id: number; delivery_id: string; status: string; queued_ms: number }>(
    'SELECT destination_id, feed, record_id, delivery_id, status, queued_ms FROM alarm_outbox ORDER BY id',
  )
  t.same(
    queued.map((q) => [q.destination_id, q.feed, q.record_id, q.status]),
    [
      ['a-dest', 'assets', ids[0].id, 'pending'],
      ['b-dest', 'assets', ids[0].id, 'pending'],
      ['a-dest', 'assets', ids[1].id, 'pending'],
      ['b-dest', 'assets', ids[1].id, 'pending'],
    ],
    'each message for each subscribed destination, in order',
  )
  t.equal(new Set(queued.map((q) => q.delivery_id)).size, 4, 'a delivery id each')
  t.ok(
    queued.every((q) => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(q.delivery_id)),
    'uuids',
  )
  t.ok(
    queued.every((q) => Math.abs(q.queued_ms - Date.now()) < 60_000),
    'queued now',
  )
  await pg.run('DELETE FROM alarm_destinations')
  await pg.run(`INSERT INTO asset_messages (created_ms, kind, body) VALUES (3, 'AssetUpdated', '{}')`)
  t.equal(await pg.value('SELECT count(*) FROM alarm_outbox'), 4, 'no destination: nothing queued')
})
