// Pins GetAuditTrails and GetAuditsIntegration: every filter (the AssetReference ones
// included) and sort against a brute-force model of the stored records, before and after
// indexing; the audit feed's polling rule with records written by real operations while
// a poller reads; bad values answer 400 naming the parameter.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call, ADMIN_PASSWORD } from './helpers.js'
import { sortedBy, DAY } from './fixtures/events.js'
import { holdIndexing, indexEvents, query, stepIndex } from './seed.js'
import type { AuditTrailRow } from '../lib/events/ports.js'

const URL = '/prime/webui/Events/GetAuditTrails'
const FEED = '/prime/webui/Events/GetAuditsIntegration'
const severityNames = ['Emergency', 'Alert', 'Critical', 'Error', 'Warning', 'Notice', 'Informational', 'Debug']

/** Varied records through the audit repository (as every operation writes them). */
async function writeAudit(app: FastifyInstance, count: number, now: number) {
  const users = ['alice', 'bob', 'token:siem', 'agent:3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b', null]
  const cats = ['Authentication', 'Users', 'Agents', 'Peripherals', 'Reports', 'AlarmDestinations', 'System']
  const assets = [
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
  ]
  for (let i = 0; i < count; i++) {
    await app.storage.audit.insert({
      createdMs: now - 2 * DAY + Math.floor((i / count) * 2 * DAY),
      severity: [5, 4, 6, 3, 2][i % 5],
      category: cats[i % cats.length],
      user: users[i % users.length],
      sourceIp: i % 4 === 0 ? null : `10.1.2.${i % 9}`,
      description: i % 11 === 0 ? `=cmd|' /C calc'!A0 record ${i}` : `Changed thing ${i} (${cats[i % cats.length]})`,
      details: JSON.stringify({ n: i, webhook: { secret: '***' }, note: i % 3 ? 'plain' : 'Zürich' }),
      operationId: ['addUser', 'localLogin', 'setAgentsConfiguration', null][i % 4],
      outcome: (['Succeeded', 'Failed', 'Refused'] as const)[i % 3],
      asset: assets[i % assets.length],
    })
  }
}

const rowsOf = async (app: FastifyInstance) => (await query(app, 'SELECT * FROM audit_trail ORDER BY id')) as AuditTrailRow[]
const asciiLower = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase())
const has = (v: string | null, term: string) =>
  v !== null && ([...term].length >= 3 && /[^\u0000-\u007f]/.test(term) ? v.toLowerCase().includes(term.toLowerCase()) : asciiLower(v).includes(asciiLower(term)))
const sev = (v: string) => (/^[0-7]$/.test(v) ? Number(v) : severityNames.findIndex((n) => n.toLowerCase() === v.toLowerCase()))
const dayStart = (v: string) => Date.UTC(+v.slice(0, 4), +v.slice(5, 7) - 1, +v.slice(8, 10))

function expected(rows: AuditTrailRow[], q: Record<string, string>): AuditTrailRow[] {
  return rows.filter((r) => {
    if (q.Severity !== undefined && r.severity !== sev(q.Severity)) return false
    if (q.MinimumSeverity !== undefined && r.severity > sev(q.MinimumSeverity)) return false
    if (q.Category !== undefined && !q.Category.split(',').some((c) => c.trim().toLowerCase() === r.category.toLowerCase())) return false
    if (q.User !== undefined && !has(r.user_name, q.User)) return false
    if (q.Description !== undefined && !has(r.description, q.Description)) return false
    if (q.Details !== undefined && !has(r.details, q.Details)) return false
    if (q.Asset !== undefined && ![r.asset_key, r.asset_name, r.asset_ip].some((v) => has(v, q.Asset))) return false
    if (q['AssetReference.Key'] !== undefined && !has(r.asset_key, q['AssetReference.Key'])) return false
    if (q['AssetReference.Name'] !== undefined && !has(r.asset_name, q['AssetReference.Name'])) return false
    if (q['AssetReference.ParentID'] !== undefined && !has(r.asset_parent_id, q['AssetReference.ParentID'])) return false
    if (q['AssetReference.IpAddress'] !== undefined && !has(r.asset_ip, q['AssetReference.IpAddress'])) return false
    if (q['AssetReference.Type'] !== undefined && r.asset_type !== q['AssetReference.Type']) return false
    if (q['AssetReference.SubType'] !== undefined && r.asset_sub_type !== q['AssetReference.SubType']) return false
    if (q['AssetReference.AllAssetTypeDetail'] !== undefined && r.asset_detail !== q['AssetReference.AllAssetTypeDetail']) return false
    if (q['AssetReference.Icon'] !== undefined && r.asset_icon !== Number(q['AssetReference.Icon'])) return false
    if (q.GlobalSearch !== undefined && ![r.description, r.details, r.user_name, r.source_ip, r.category, r.operation_id, r.asset_key, r.asset_name, r.asset_ip].some((v) => has(v, q.GlobalSearch)))
      return false
    if (q.Date !== undefined && (r.created_ms < dayStart(q.Date) || r.created_ms >= dayStart(q.Date) + DAY)) return false
    if (q.FromDate !== undefined && r.created_ms < Date.parse(q.FromDate)) return false
    if (q.ToDate !== undefined && r.created_ms > (/^\d{4}-\d{2}-\d{2}$/.test(q.ToDate) ? dayStart(q.ToDate) + DAY - 1 : Date.parse(q.ToDate))) return false
    if (q.FromAuditTrailId !== undefined && r.id < Number(q.FromAuditTrailId)) return false
    if (q.ToAuditTrailId !== undefined && r.id > Number(q.ToAuditTrailId)) return false
    return true
  })
}

type Key = string | number | null
const keys: Record<string, (r: AuditTrailRow) => Key> = {
  auditTrailID: (r) => r.id,
  date: (r) => r.created_ms,
  creationTime: (r) => r.created_ms,
  creationTimeEpoch: (r) => r.created_ms,
  severity: (r) => r.severity,
  severityString: (r) => severityNames[r.severity],
  category: (r) => r.category,
  user: (r) => (r.user_name === null ? null : asciiLower(r.user_name)),
  sourceIp: (r) => r.source_ip,
  description: (r) => asciiLower(r.description),
  details: (r) => asciiLower(r.details),
  operationId: (r) => r.operation_id,
  outcome: (r) => r.outcome,
  'assetReference.key': (r) => r.asset_key,
  'assetReference.name': (r) => (r.asset_name === null ? null : asciiLower(r.asset_name)),
  'assetReference.ipAddress': (r) => r.asset_ip,
  'assetReference.type': (r) => r.asset_type,
}

async function get(app: FastifyInstance, token: string, url: string, q: Record<string, string>) {
  const res = await call(app, token, { method: 'GET', url: `${url}?${new URLSearchParams(q)}` })
  if (res.statusCode !== 200) throw new Error(`${JSON.stringify(q)}: ${res.statusCode} ${res.body}`)
  return res.json() as { recordsTotal: number; recordsFiltered: number; data: { auditTrailID: number; assetReference: Record<string, unknown> }[] }
}

t.test('every audit filter and sort matches the model, before and after indexing', async (t) => {
  const app = await build(t)
  holdIndexing(app, true)
  const token = await login(app)
  const now = Date.now()
  await writeAudit(app, 300, now)
  const rows = await rowsOf(app)
  const mid = rows[Math.floor(rows.length / 2)].id
  const iso = (ms: number) => new Date(ms).toISOString()
  const queries: Record<string, string>[] = [
    {},
    { Severity: 'Warning' },
    { MinimumSeverity: 'Error' },
    { Category: 'users,Authentication' },
    { User: 'TOKEN:' },
    { User: 'b' },
    { Description: 'calc' },
    { Details: 'zürich' },
    { Details: '"n":1' },
    { Asset: '192.168' },
    { Asset: 'bob' },
    { 'AssetReference.Key': '3f2b' },
    { 'AssetReference.Name': 'kingston' },
    { 'AssetReference.ParentID': '8a4d' },
    { 'AssetReference.IpAddress': '10.1.2.9' },
    { 'AssetReference.Type': 'Agent' },
    { 'AssetReference.SubType': 'MassStorage' },
    { 'AssetReference.AllAssetTypeDetail': 'Account' },
    { 'AssetReference.Icon': '3' },
    { 'AssetReference.Icon': '-1' },
    { GlobalSearch: 'adduser' },
    { GlobalSearch: 'alarmdest' },
    { GlobalSearch: '10.1.2.3' },
    { GlobalSearch: 'desktop-9' },
    { Date: iso(now - DAY).slice(0, 10) },
    { FromDate: iso(now - DAY) },
    { ToDate: iso(now - DAY) },
    { FromAuditTrailId: String(mid) },
    { ToAuditTrailId: String(mid) },
    { MinimumSeverity: 'Warning', Category: 'Agents', FromDate: iso(now - 1.5 * DAY), 'AssetReference.Type': 'Agent' },
    { User: 'alice', Severity: '5', GlobalSearch: 'thing' },
  ]
  for (const stage of ['nothing indexed', 'all indexed']) {
    if (stage === 'all indexed') indexEvents(app)
    for (const q of queries) {
      const want = sortedBy(expected(rows, q), 'auditTrailID_desc', keys)
      const body = await get(app, token, URL, { ...q, PageSize: '1000' })
      t.same(
        { total: body.recordsTotal, filtered: body.recordsFiltered, ids: body.data.map((r) => r.auditTrailID) },
        { total: rows.length, filtered: want.length, ids: want.map((r) => r.id) },
        `${stage}: ${JSON.stringify(q)}`,
      )
    }
    for (const field of Object.keys(keys)) {
      for (const dir of ['asc', 'desc']) {
        const want = sortedBy(rows, `${field}_${dir}`, keys)
        const body = await get(app, token, URL, { SortBy: `${field}_${dir}`, PageSize: '25', PageNumber: '4' })
        t.same(
          body.data.map((r) => r.auditTrailID),
          want.slice(75, 100).map((r) => r.id),
          `${stage}: SortBy=${field}_${dir}`,
        )
      }
    }
  }
})

t.test('an audit record carries its asset reference', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await writeAudit(app, 3, Date.now())
  const body = await get(app, token, URL, { 'AssetReference.Type': 'Peripheral' })
  t.match(body.data[0], {
    assetReference: {
      key: 'USB\\VID_0951&PID_1666\\001',
      name: 'Kingston DataTraveler',
      parentID: '3f2b6c1e-8a4d-4f0e-9b7a-2c1d5e6f7a8b',
      ipAddress: null,
      type: 'Peripheral',
      subType: 'MassStorage',
      allAssetTypeDetail: 'UsbMassStorage',
      icon: 3,
    },
  })
})

t.test('an audit poller receives every record exactly once while operations keep writing them', async (t) => {
  const app = await build(t, { PRIME_LOGIN_RATE_LIMIT_MAX: '10000' })
  holdIndexing(app, true)
  const token = await login(app)
  await writeAudit(app, 420, Date.now())
  for (const filter of [{}, { MinimumSeverity: 'Warning' }] as Record<string, string>[]) {
    const received: number[] = []
    let next = 1
    let polls = 0
    for (let empty = 0; empty < 2 && polls < 100; polls++) {
      const page = await get(app, token, FEED, { ...filter, FromAuditTrailId: String(next), PageSize: '50' })
      const ids = page.data.map((r) => r.auditTrailID)
      t.same(
        ids,
        [...ids].sort((a, b) => b - a),
        'newest first',
      )
      received.push(...ids)
      if (ids.length) {
        next = ids[0] + 1
        empty = 0
      } else empty++
      if (polls < 6) {
        // Real audited operations in between: an account created, a failed login, a refused call.
        await call(app, token, {
          method: 'POST',
          url: '/prime/webui/admin/adduser',
          payload: { userName: `u${filter.MinimumSeverity ?? 'x'}${polls}`, email: `u${polls}@example.com`, userProfile: 10, password: 'Long-enough-pass-1' },
        })
        await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: ADMIN_PASSWORD + 'x' } })
        await app.inject({ method: 'GET', url: URL })
      }
      if (polls % 4 === 0) stepIndex(app, 'audit_trail', 90)
    }
    const want = expected(await rowsOf(app), filter).map((r) => r.id)
    t.equal(new Set(received).size, received.length, `${JSON.stringify(filter)}: no record twice`)
    t.same(
      [...received].sort((a, b) => a - b),
      want,
      `${JSON.stringify(filter)}: every record (${want.length}) once in ${polls} polls`,
    )
  }
})

t.test('bad audit filter values answer 400 naming the parameter', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const bad: [string, string, string][] = [
    [URL, 'Category=Users,Cats', 'Category'],
    [URL, 'AssetReference.Type=Robot', 'AssetReference.Type'],
    [URL, 'AssetReference.Icon=256', 'AssetReference.Icon'],
    [URL, 'MinimumSeverity=loud', 'MinimumSeverity'],
    [URL, 'ToDate=2024-02-30', 'ToDate'],
    [URL, 'SortBy=assetReference.colour_asc', 'SortBy'],
    [URL, 'FromAuditTrailId=-3', 'FromAuditTrailId'],
    [URL, 'User=a%00', 'User'],
    [FEED, 'PageSize=1000001', 'PageSize'],
    [FEED, 'MinimumSeverity=9', 'MinimumSeverity'],
    [FEED, 'FromDate=soon', 'FromDate'],
    [FEED, 'FromAuditTrailId=x', 'FromAuditTrailId'],
  ]
  for (const [url, q, name] of bad) {
    const res = await call(app, token, { method: 'GET', url: `${url}?${q}` })
    t.equal(res.statusCode, 400, q)
    t.ok(
      res.json().errors?.some((e: { name: string }) => e.name === name),
      `${q} names ${name}: ${res.json().detail}`,
    )
  }
})
