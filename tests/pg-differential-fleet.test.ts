// Randomized differential test of the agent, peripheral and audit lists across the two
// backends: the same fleet and audit trail written into an app on SQLite and an app on
// PostgreSQL (same ids, same texts, same times), then 2,100 random questions (every filter
// alone and in twos and threes, every sort of the contract in both directions, global
// searches, pages at random depths and sizes, the audit feed's id bounds) asked of both, with
// writes interleaved (new agents and peripherals, renames, address and status changes, new
// audit records) and the last questions asked again after each change. The answers (status,
// ids, order, counts, every field) must be the same. The events' lists have their own
// differential test against a model (tests/events-differential.test.ts).
import fs from 'node:fs'
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import YAML from 'yaml'
import { addAgent, addPeripheral } from './fixtures/fleet.js'
import { rand } from './fixtures/events.js'
import { build, call, login } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'
import { portsOf, query } from './seed.js'

const QUESTIONS = Number(process.env.PRIME_DIFF_QUESTIONS ?? 2_100)
const SEED = Number(process.env.PRIME_DIFF_SEED ?? 20261205)
const DAY = 86_400_000
// The apps' own clocks run (the agent sweeper, licence expiry): the data is placed around
// the moment the test starts, within the sweeper's day, so that both see the same states.
const NOW = Math.floor(Date.now() / 1000) * 1000
const HOUR = 3_600_000
const iso = (ms: number) => new Date(ms).toISOString()

const spec = YAML.parse(fs.readFileSync(new URL('../spec/openapi.yaml', import.meta.url), 'utf8'))
const sortFields = (path: string): string[] => spec.paths[path].get['x-sort-fields']

interface Lists {
  url: string
  sortParam: string
  sorts: string[]
  filters: Record<string, () => string>
}

/** A deterministic uuid from the generator (both apps get the same). */
const uuidOf = (r: () => number) => {
  const hex = Array.from({ length: 32 }, () => Math.floor(r() * 16).toString(16)).join('')
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`
}

const HOSTS = ['DESKTOP-9LR722S', 'desktop-a1', 'Büro-PC', 'lon-eng-ws', 'SRV-db01', 'nyc-fin-Laptop', 'zÜrich-ops', 'kiosk_7', 'ws0', 'Ws0-b']
const OSES = ['Windows 11 Pro 23H2 (10.0.22631)', 'Windows 10 Pro 22H2 (10.0.19045)', 'Windows Server 2022 (10.0.20348)', null]
const VERSIONS = ['4.2.1.118', '4.2.0.90', '4.1.9.3', null]
const MODELS = ['0951:1666', '046D:C077', '413C:2113', '8087:0A2B', '16C0:0486', '046D:C52B', '1A86:7523', '05AC:12A8']

/** The values of one agent, all chosen here (the times around the test's start): the same in both apps. */
function agentPartial(r: () => number, i: number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]
  const ip = r() < 0.1 ? null : `10.${Math.floor(r() * 3)}.${Math.floor(r() * 250)}.${1 + Math.floor(r() * 250)}`
  // A licence past its expiry is Expired, as the sweeper leaves it (it expires them, and
  // gives waiting agents free seats, on its rounds, at another moment in each app: the
  // test's data is never in between, and no agent waits for a seat).
  const expiration = NOW + Math.floor(r() * 400 - 30) * DAY
  const mac = `00-1A-2B-00-${(i >> 8).toString(16).padStart(2, '0')}-${(i & 255).toString(16).padStart(2, '0')}`.toUpperCase()
  const partial = {
    nics_json: JSON.stringify([{ name: 'Ethernet', macAddress: mac, ipAddresses: ip ? [ip] : [], status: 'Up', isEthernet: true }]),
    nics_text: `Ethernet||${mac}||${ip ?? ''}||Up`,
    uuid: uuidOf(r),
    machine_id: uuidOf(r),
    host_identifier: `${pick(HOSTS)}${r() < 0.5 ? '' : `-${i % 17}`}`,
    local_ip_address: ip,
    ip_addresses: ip,
    os_version: pick(OSES),
    manufacturer: pick(['Dell Inc.', 'LENOVO', 'HP', null]),
    pc_model: pick(['OptiPlex 7090', 'ThinkPad T14', 'EliteBook 840', null]),
    operational_status: pick(['Armed', 'Free']),
    connection_status: pick(['Connected', 'Disconnected']),
    service_version: pick(VERSIONS),
    kb_driver_version: pick(VERSIONS),
    license_status: pick(['Activated', 'Expired', 'Activated']),
    license_account_name: pick(['Acme Corp', 'acme corp', 'Zürich AG']),
    enrolled_ms: NOW - Math.floor(r() * 90) * DAY,
    expiration_ms: expiration,
    last_updated_ms: NOW - Math.floor(r() * 12 * HOUR),
    last_configured_ms: NOW - Math.floor(r() * 40 * DAY),
    hashtags: pick([null, '#kiosk', '#finance #vip', '#łódź', '#Kiosk']),
    running_mode: pick(['Standard', 'Server', 'VDI']),
    ethernets_count: Math.floor(r() * 3),
  }
  if (expiration <= NOW && partial.license_status !== 'Expired') partial.license_status = 'Expired'
  return partial
}

function peripheralPartial(r: () => number, i: number) {
  const [vid, pid] = MODELS[Math.floor(r() * MODELS.length)].split(':')
  const serial =
    r() < 0.1
      ? null
      : `5&${Math.floor(r() * 0xffffffff)
          .toString(16)
          .toUpperCase()}&0&${i % 10}`
  return {
    vid,
    pid,
    serial_number: serial,
    device_id: `USB\\VID_${vid}&PID_${pid}\\${serial ?? `7&${i}`}`,
    hierarchy: `USB Root Hub (USB 3.0) > Port_#000${(i % 8) + 1}.Hub_#0001`,
    present: r() < 0.8 ? 1 : 0,
    first_seen_ms: NOW - Math.floor(r() * 30 * DAY),
    last_seen_ms: NOW - Math.floor(r() * 5 * DAY),
  }
}

/** One audit record's input, its time given. */
function auditEntry(r: () => number, i: number) {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]
  const asset = pick([
    { key: '7', name: 'bob', type: 'User', subType: 'None', detail: 'Account', ipAddress: '10.1.2.9' },
    { key: '3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b', name: 'DESKTOP-9LR722S', type: 'Agent', subType: 'Workstation', detail: 'WindowsHost', ipAddress: '192.168.100.128' },
    {
      key: 'USB\\VID_0951&PID_1666\\001',
      name: 'Kingston DataTraveler',
      parentId: '3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b',
      type: 'Peripheral',
      subType: 'MassStorage',
      detail: 'UsbMassStorage',
      icon: 3,
    },
    undefined,
  ])
  return {
    createdMs: NOW - 3 * DAY + Math.floor(r() * 3 * DAY),
    severity: pick([2, 3, 4, 5, 6]),
    category: pick(['Authentication', 'Users', 'Agents', 'Peripherals', 'Reports', 'AlarmDestinations', 'System']),
    user: pick(['alice', 'Bob', 'token:siem', null]),
    sourceIp: r() < 0.3 ? null : `10.1.2.${i % 9}`,
    description: pick([`Changed thing ${i}`, `Logged in ${i % 5}`, `Zürich update ${i % 3}`, `=cmd|' /C calc'!A0 ${i % 4}`]),
    details: JSON.stringify({ n: i, note: pick(['plain', 'Zürich', 'kingston']) }),
    operationId: pick(['addUser', 'localLogin', 'setAgentsConfiguration', null]),
    outcome: pick(['Succeeded', 'Failed', 'Refused'] as const),
    asset,
  }
}

function lists(r: () => number): Lists[] {
  const pick = (xs: string[]) => () => xs[Math.floor(r() * xs.length)]
  const bool = pick(['true', 'false', 'TRUE', '0', '1'])
  const day = () => iso(NOW - Math.floor(r() * 40 * DAY)).slice(0, 10)
  const moment = () => iso(NOW - Math.floor(r() * 40 * DAY))
  const text = (xs: string[]) => pick(xs)
  return [
    {
      url: '/prime/webui/agents',
      sortParam: 'SortBy',
      sorts: sortFields('/prime/webui/agents'),
      filters: {
        Uuid: text(['a', '4', '-4', 'ab', '0000', 'zz']),
        HostIdentifier: text(['desktop', 'DESKTOP', 'büro', 'BÜRO', 'ws0', '-1', 'srv', '_7', 'x']),
        IpAddress: text(['10.1', '.2', '10.0.', '255', '1']),
        Status: pick(['Armed', 'Free', 'armed,free', 'Connected', 'Disconnected', 'Armed,Disconnected']),
        ContainsVulnerablePeripheralOrWLV: bool,
        LastConfiguration: r() < 0.5 ? day : moment,
        Version: text(['4.2', '4.1.9', '.118', '3']),
        License: pick(['Activated', 'Expired', 'activated,expired']),
        OsVersion: text(['windows 11', 'Server', '22H2', '10.0', 'x']),
        LastUpdated: day,
        Hashtags: text(['#kiosk', 'KIOSK', 'łódź', 'vip', '#']),
        ExpirationDate: day,
        Severity: pick(['Warning', '4', 'info', 'Critical', '6', 'Notice']),
        HasUnapprovedPeripherals: bool,
        HasVulnerablePeripherals: bool,
        HasKnownAttackTools: bool,
        DeploymentMode: pick(['Standard', 'Server', 'VDI', 'server,vdi']),
        GlobalSearch: text(['desktop', 'kiosk', '10.1', 'dell', 'zürich', 'optiplex', 'a', 'ws', '4.2']),
      },
    },
    {
      url: '/prime/webui/peripherals',
      sortParam: 'sortBy',
      sorts: sortFields('/prime/webui/peripherals'),
      filters: {
        hostIdentifier: text(['desktop', 'büro', 'ws0', 'srv']),
        ipAddress: text(['10.1', '.2', '10.0.']),
        hostUuid: text(['a', '4', 'ab0']),
        vendor: text(['kingston', 'Logitech', 'dell', 'intel', 'x']),
        productInfo: text(['mouse', 'DataTraveler', 'keyboard', 'receiver', 'usb']),
        serialNumber: text(['5&', '&0&1', 'A', 'ff']),
        vid: pick(['0951', '046d', '413C', '1A86', 'FFFF']),
        pid: pick(['1666', 'c077', 'C52B', '0000']),
        isUnapprovedPeripheral: bool,
        isVulnerablePeripheral: bool,
        isKnownAttackTool: bool,
        present: bool,
        GlobalSearch: text(['kingston', 'usb', 'vid_046d', '10.1', 'mouse', 'desktop', 'k', '&0&']),
      },
    },
    {
      url: '/prime/webui/Events/GetAuditTrails',
      sortParam: 'SortBy',
      sorts: sortFields('/prime/webui/Events/GetAuditTrails'),
      filters: {
        'AssetReference.Key': text(['7', '3f2b', 'vid_0951', 'x']),
        'AssetReference.Name': text(['bob', 'desktop', 'kingston']),
        'AssetReference.IpAddress': text(['10.1', '192.168']),
        'AssetReference.Type': pick(['User', 'Agent', 'Peripheral']),
        Severity: pick(['Warning', '4', 'Notice', 'critical', '6']),
        MinimumSeverity: pick(['Warning', '3', 'info', 'Error']),
        Category: pick(['Users', 'Agents', 'Authentication', 'System']),
        User: text(['alice', 'BOB', 'token', 'x']),
        Description: text(['changed', 'ZÜRICH', 'logged in 3', '=cmd']),
        Details: text(['kingston', 'zürich', '"n":1', 'plain']),
        Asset: text(['bob', 'desktop', 'kingston']),
        GlobalSearch: text(['alice', 'zürich', 'changed', 'kingston', 'x']),
        Date: () => iso(NOW - Math.floor(r() * 3) * DAY).slice(0, 10),
        FromDate: () => iso(NOW - Math.floor(r() * 3 * DAY)),
        ToDate: () => iso(NOW - Math.floor(r() * 3 * DAY)),
        FromAuditTrailId: () => String(Math.floor(r() * 500)),
        ToAuditTrailId: () => String(Math.floor(r() * 500)),
      },
    },
  ]
}

/**
 * An answer as compared: the records the apps wrote themselves before the test wrote any (the
 * first Administrator's creation and the login: each app at its own moment, with its own
 * request id) without their times and request ids; everything else as it is.
 */
function comparable(body: string, ownRecords: number): string {
  if (!body.includes('"auditTrailID"')) return body
  return JSON.stringify(JSON.parse(body), (_k, v) =>
    v && typeof v === 'object' && typeof v.auditTrailID === 'number' && v.auditTrailID <= ownRecords ? { ...v, creationTime: 0, creationTimeEpoch: 0, requestId: 0 } : v,
  )
}

/** The first place two answers differ: the status, the counts, or the first row that differs (both rows). */
function whereTheyDiffer(sa: number, a: string, sb: number, b: string): string {
  const both = (x: unknown, y: unknown) => `  SQLite     ${JSON.stringify(x)?.slice(0, 900)}\n  PostgreSQL ${JSON.stringify(y)?.slice(0, 900)}`
  if (sa !== sb || sa !== 200) return both(`${sa} ${a.slice(0, 300)}`, `${sb} ${b.slice(0, 300)}`)
  const [x, y] = [JSON.parse(a), JSON.parse(b)]
  const rows = (v: any): unknown[] => v.data ?? []
  const i = rows(x).findIndex((row, k) => JSON.stringify(row) !== JSON.stringify(rows(y)[k]))
  if (i < 0) return both({ ...x, data: undefined }, { ...y, data: undefined })
  return `  row ${i} of ${rows(x).length} and ${rows(y).length}\n${both(rows(x)[i], rows(y)[i])}`
}

interface Question {
  url: string
}

function questionMaker(r: () => number): () => Question {
  const all = lists(r)
  let n = 0
  return () => {
    const l = all[n++ % all.length]
    const names = Object.keys(l.filters)
    const q: Record<string, string> = {}
    const k = r() < 0.25 ? 0 : r() < 0.6 ? 1 : r() < 0.85 ? 2 : 3
    for (let i = 0; i < k; i++) {
      const name = names[Math.floor(r() * names.length)]
      q[name] = l.filters[name]()
    }
    if (r() < 0.85) q[l.sortParam] = `${l.sorts[Math.floor(r() * l.sorts.length)]}_${r() < 0.5 ? 'asc' : 'desc'}`
    const size = [1, 5, 20, 100][Math.floor(r() * 4)]
    q.PageSize = String(size)
    q.PageNumber = String(r() < 0.6 ? 1 : 1 + Math.floor(r() * (r() < 0.8 ? 5 : 60)))
    return { url: `${l.url}?${new URLSearchParams(q)}` }
  }
}

t.test('agents, peripherals and audit lists: the same answers from SQLite and PostgreSQL', { skip: noPostgres, timeout: 900_000 }, async (t) => {
  const sqlite = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  const pg = await build(t, { PRIME_DATABASE_URL: await pgTestDatabaseUrl(t), PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  const apps: [FastifyInstance, FastifyInstance] = [sqlite, pg]
  const tokens = [await login(sqlite), await login(pg)]
  t.equal(sqlite.storage.backend, 'sqlite')
  t.equal(pg.storage.backend, 'postgres')

  const [ownRecords, ownOnPg] = await Promise.all(apps.map(async (app) => Number((await query(app, 'SELECT max(id) AS n FROM audit_trail'))[0].n)))
  t.equal(ownRecords, ownOnPg, 'both apps wrote the same records of their own')
  const r = rand(SEED)
  const agents: number[] = []
  const both = async <T>(f: (app: FastifyInstance) => Promise<T>): Promise<[T, T]> => [await f(sqlite), await f(pg)]

  let serial = 0
  const newAgent = async () => {
    const partial = agentPartial(r, serial++)
    const [a, b] = await both((app) => addAgent(app, partial))
    if (a.id !== b.id) throw new Error(`agent ids differ: ${a.id} and ${b.id}`)
    agents.push(a.id)
    for (let k = Math.floor(r() * 4); k > 0; k--) await newPeripheral(a.id)
    if (r() < 0.3) {
      const [vid, pid] = MODELS[Math.floor(r() * MODELS.length)].split(':')
      await both((app) => query(app, `INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, ?, ?, 'Approved', ?, 'test') ON CONFLICT DO NOTHING`, a.id, vid, pid, NOW))
      await both((app) => portsOf(app).agentState.refreshAgent(a.id))
    }
  }
  const newPeripheral = async (agentId: number) => {
    const partial = peripheralPartial(r, serial++)
    const [a, b] = await both((app) => addPeripheral(app, agentId, partial))
    if (a.id !== b.id) throw new Error(`peripheral ids differ: ${a.id} and ${b.id}`)
  }
  const newAudit = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const entry = auditEntry(r, serial++)
      await both((app) => Promise.resolve(app.storage.audit.insert(entry)))
    }
  }
  // A change to an agent's own columns, as the gateway makes them (then its state refreshed).
  const changeAgent = async () => {
    const id = agents[Math.floor(r() * agents.length)]
    const change = [
      ['host_identifier', `${HOSTS[Math.floor(r() * HOSTS.length)]}-r${serial++}`],
      ['local_ip_address', `10.${Math.floor(r() * 3)}.9.${1 + Math.floor(r() * 250)}`],
      ['operational_status', r() < 0.5 ? 'Armed' : 'Free'],
      ['connection_status', r() < 0.5 ? 'Connected' : 'Disconnected'],
      ['hashtags', r() < 0.5 ? '#moved' : null],
    ][Math.floor(r() * 5)]
    await both((app) => query(app, `UPDATE agents SET ${change[0]} = ? WHERE id = ?`, change[1], id))
    await both((app) => portsOf(app).agentState.refreshAgent(id))
  }

  for (let i = 0; i < 120; i++) await newAgent()
  await newAudit(300)

  const next = questionMaker(r)
  const recent: Question[] = []
  const mismatches: string[] = []
  let asked = 0
  let nonEmpty = 0
  const ask = async (q: Question) => {
    asked++
    const [a, b] = await Promise.all(apps.map((app, i) => call(app, tokens[i], { method: 'GET', url: q.url })))
    if (a.statusCode === 200 && (a.json().data?.length ?? a.json().auditTrails?.length ?? 0) > 0) nonEmpty++
    if (a.statusCode !== b.statusCode || comparable(a.body, ownRecords) !== comparable(b.body, ownRecords)) {
      if (mismatches.length < 10) mismatches.push(`${q.url}\n${whereTheyDiffer(a.statusCode, a.body, b.statusCode, b.body)}`)
      else mismatches.push(q.url)
    }
  }
  for (let i = 0; i < QUESTIONS; i++) {
    const q = next()
    await ask(q)
    recent.push(q)
    if (recent.length > 6) recent.shift()
    if (i % 150 === 149) {
      const w = r()
      if (w < 0.35) await newAgent()
      else if (w < 0.6) await newPeripheral(agents[Math.floor(r() * agents.length)])
      else if (w < 0.85) await changeAgent()
      else await newAudit(20)
      for (const again of recent) await ask(again)
    }
  }
  t.ok(asked >= QUESTIONS, `${asked} questions asked of both`)
  t.ok(nonEmpty > asked / 3, `${nonEmpty} of them with rows`)
  t.equal(mismatches.length, 0, 'no answer differs')
  if (mismatches.length) t.comment(`${mismatches.length} differ; the first:\n${mismatches.slice(0, 10).join('\n')}`)
})
