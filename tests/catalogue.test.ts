// Pins the catalogue of known attack tools and vulnerable devices: its order, the rules of
// adding (upper-case ids, default severities, 409s) and removing, that the flags of the
// matching peripherals and agents follow at once, and that every change is audited.
import crypto from 'node:crypto'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, login, call, userWithProfile } from './helpers.js'
import { auditSince, insertRows, lastAuditId, portsOf, query, queryOne } from './seed.js'

const URL = '/prime/webui/agents/catalogue'

/** An agent with one present, unapproved peripheral of the model, flags computed. */
async function agentWithModel(app: FastifyInstance, vid: string, pid: string) {
  const uuid = crypto.randomUUID()
  const now = Date.now()
  const [{ id }] = await query<{ id: number }>(
    app,
    `INSERT INTO agents (uuid, machine_id, enrolled_ms, host_identifier, connection_status, last_updated_ms) VALUES (?, ?, ?, ?, 'Connected', ?) RETURNING id`,
    uuid,
    crypto.randomUUID(),
    now,
    `HOST-${uuid.slice(0, 6)}`,
    now,
  )
  await query(
    app,
    `INSERT INTO peripherals (agent_id, agent_uuid, device_id, vid, pid, dev_icon, first_seen_ms, last_seen_ms) VALUES (?, ?, ?, ?, ?, 1, ?, ?)`,
    id,
    uuid,
    `USB\\VID_${vid}&PID_${pid}\\1`,
    vid,
    pid,
    now,
    now,
  )
  await portsOf(app).agentState.refreshAgent(id)
  return id
}

const flags = async (app: FastifyInstance, agentId: number) => ({
  peripheral: (await queryOne(app, 'SELECT is_attack_tool, is_vulnerable, severity, vulnerability FROM peripherals WHERE agent_id = ?', agentId)) as Record<string, unknown>,
  agent: (await queryOne(app, 'SELECT has_attack_tool, has_vulnerable, severity FROM agents WHERE id = ?', agentId)) as Record<string, unknown>,
})

t.test('the catalogue lists the built-in entries ordered by kind, vid, pid, to a plain User', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'reader', 10)
  const res = await call(app, user, { method: 'GET', url: URL })
  t.equal(res.statusCode, 200, res.body)
  const list = res.json()
  t.ok(list.length >= 5)
  const keys = list.map((e: any) => `${e.kind}|${e.vid}|${e.pid}`)
  t.same(keys, [...keys].sort(), 'ordered by kind, vid, pid')
  const builtIn = list.find((e: any) => e.vid === '0483' && e.pid === '5740')
  t.match(builtIn, { kind: 'KnownAttackTool', builtIn: true, createdBy: 'system', severity: 2, creationTimeEpoch: 1730419200000 })
  t.equal(builtIn.creationTime, '2024-11-01T00:00:00.000Z')
})

t.test('adding an entry: upper-case ids, default severity, flags follow at once, audited', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const agent = await agentWithModel(app, '0951', '1666')
  t.same((await flags(app, agent)).peripheral, { is_attack_tool: 0, is_vulnerable: 0, severity: 5, vulnerability: null }, 'not risky before')
  const before = await lastAuditId(app)

  const res = await call(app, admin, {
    method: 'POST',
    url: URL,
    payload: { kind: 'VulnerableDevice', vid: '0951', pid: '1666', name: 'Stick with a weak controller', vulnerability: 'BadUSB-capable firmware.' },
  })
  t.equal(res.statusCode, 200, res.body)
  const entry = res.json()
  t.match(entry, { kind: 'VulnerableDevice', vid: '0951', pid: '1666', severity: 3, builtIn: false, createdBy: 'admin', reference: null })
  t.match(entry.id, /^[0-9a-f-]{36}$/)
  t.same((await flags(app, agent)).peripheral, { is_attack_tool: 0, is_vulnerable: 1, severity: 3, vulnerability: 'BadUSB-capable firmware.' })
  t.match((await flags(app, agent)).agent, { has_vulnerable: 1, severity: 3 })

  const lower = await call(app, admin, { method: 'POST', url: URL, payload: { kind: 'KnownAttackTool', vid: 'abcd', pid: 'ef01', name: 'Implant' } })
  t.equal(lower.statusCode, 200, lower.body)
  t.match(lower.json(), { vid: 'ABCD', pid: 'EF01', severity: 2 }, 'stored upper-case; attack tools default to Critical')
  const explicit = await call(app, admin, { method: 'POST', url: URL, payload: { kind: 'KnownAttackTool', vid: 'ABCE', pid: 'EF01', name: 'Other', severity: 0 } })
  t.equal(explicit.json().severity, 0, 'a given severity is kept')

  const rows = await auditSince(app, before)
  t.equal(rows.length, 3, 'one record per change')
  t.match(rows[0], { category: 'Peripherals', operation_id: 'addCatalogueEntry', outcome: 'Succeeded', user_name: 'admin', asset_key: entry.id })
  t.match(rows[0].description, /0951:1666/)
  t.match(JSON.parse(rows[0].details), { kind: 'VulnerableDevice', vid: '0951', agentsRecomputed: 1 })

  const listed = (await call(app, admin, { method: 'GET', url: URL })).json()
  t.ok(
    listed.some((e: any) => e.id === entry.id),
    'listed',
  )
})

t.test('a duplicate kind/vid/pid answers 409; the same model as the other kind is allowed', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const dup = await call(app, admin, { method: 'POST', url: URL, payload: { kind: 'KnownAttackTool', vid: '0483', pid: '5740', name: 'Again' } })
  t.equal(dup.statusCode, 409, dup.body)
  t.equal(dup.json().code, 'conflict')
  const dupLower = await call(app, admin, { method: 'POST', url: URL, payload: { kind: 'VulnerableDevice', vid: '046d', pid: 'c52b', name: 'Again' } })
  t.equal(dupLower.statusCode, 409, 'case does not make it another entry')
  const other = await call(app, admin, { method: 'POST', url: URL, payload: { kind: 'VulnerableDevice', vid: '0483', pid: '5740', name: 'Also vulnerable' } })
  t.equal(other.statusCode, 200, other.body)
  const failed = (await query(app, "SELECT outcome FROM audit_trail WHERE operation_id = 'addCatalogueEntry' ORDER BY id")) as { outcome: string }[]
  t.same(
    failed.map((r) => r.outcome),
    ['Failed', 'Failed', 'Succeeded'],
    'refused adds are audited as failed',
  )
})

t.test('a full catalogue (10000 entries) answers 409', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const existing = ((await queryOne(app, 'SELECT count(*) AS n FROM catalogue')) as { n: number }).n
  const rows = Array.from({ length: 10_000 - existing }, (_, i) => ({
    id: crypto.randomUUID(),
    kind: 'VulnerableDevice',
    vid: 'F' + i.toString(16).toUpperCase().padStart(3, '0').slice(-3),
    pid: i.toString(16).toUpperCase().padStart(4, '0'),
    name: 'bulk',
    severity: 3,
    created_ms: 0,
    created_by: 'test',
  }))
  await insertRows(app, 'catalogue', rows)
  const res = await call(app, admin, { method: 'POST', url: URL, payload: { kind: 'KnownAttackTool', vid: '1234', pid: '5678', name: 'One too many' } })
  t.equal(res.statusCode, 409, res.body)
  t.match(res.json().detail, /full/)
  const list = await call(app, admin, { method: 'GET', url: URL })
  t.equal(list.statusCode, 200, list.body.slice(0, 500))
  t.equal(list.json().length, 10_000, 'the whole catalogue is listed')
})

t.test('removing an entry answers it, clears the flags it caused and is audited; unknown ids answer 404', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const agent = await agentWithModel(app, '16C0', '0486')
  t.match(await flags(app, agent), { peripheral: { is_attack_tool: 1, severity: 2 }, agent: { has_attack_tool: 1, severity: 2 } }, 'a built-in entry flags it')
  const before = await lastAuditId(app)
  const res = await call(app, admin, { method: 'DELETE', url: `${URL}/c2a9e4d7-5f3b-4a18-8e6c-9d1b7f2a0c54` })
  t.equal(res.statusCode, 200, res.body)
  t.match(res.json(), { id: 'c2a9e4d7-5f3b-4a18-8e6c-9d1b7f2a0c54', vid: '16C0', pid: '0486', builtIn: true })
  t.match(await flags(app, agent), { peripheral: { is_attack_tool: 0, severity: 5, vulnerability: null }, agent: { has_attack_tool: 0, severity: 5 } })
  const rows = await auditSince(app, before)
  t.equal(rows.length, 1)
  t.match(rows[0], { operation_id: 'deleteCatalogueEntry', outcome: 'Succeeded', category: 'Peripherals' })

  const again = await call(app, admin, { method: 'DELETE', url: `${URL}/c2a9e4d7-5f3b-4a18-8e6c-9d1b7f2a0c54` })
  t.equal(again.statusCode, 404, again.body)
  const unknown = await call(app, admin, { method: 'DELETE', url: `${URL}/${crypto.randomUUID()}` })
  t.equal(unknown.statusCode, 404)
  const upper = await call(app, admin, { method: 'DELETE', url: `${URL}/${'9D3F6A2E-1B7C-4C5D-8E0F-2A4B6C8D0E1F'}` })
  t.equal(upper.statusCode, 200, 'ids match in any case')
  const bad = await call(app, admin, { method: 'DELETE', url: `${URL}/not-a-uuid` })
  t.equal(bad.statusCode, 400)
})

t.test('only an Administrator changes the catalogue; invalid entries answer 400', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'manager', 20)
  const add = await call(app, manager, { method: 'POST', url: URL, payload: { kind: 'KnownAttackTool', vid: '1234', pid: '5678', name: 'x' } })
  t.equal(add.statusCode, 403)
  const del = await call(app, manager, { method: 'DELETE', url: `${URL}/9d3f6a2e-1b7c-4c5d-8e0f-2a4b6c8d0e1f` })
  t.equal(del.statusCode, 403)
  for (const payload of [
    { kind: 'KnownAttackTool', vid: '12345', pid: '5678', name: 'x' },
    { kind: 'KnownAttackTool', vid: 'XYZW', pid: '5678', name: 'x' },
    { kind: 'Gadget', vid: '1234', pid: '5678', name: 'x' },
    { kind: 'KnownAttackTool', vid: '1234', pid: '5678', name: '' },
    { kind: 'KnownAttackTool', vid: '1234', pid: '5678', name: 'x', severity: 8 },
    { kind: 'KnownAttackTool', vid: '1234', pid: '5678' },
  ]) {
    const res = await call(app, admin, { method: 'POST', url: URL, payload })
    t.equal(res.statusCode, 400, JSON.stringify(payload))
  }
})

t.test('a catalogue change drops the cached vulnerable-peripherals insight', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await agentWithModel(app, '0951', '1666')
  const first = await call(app, admin, { method: 'GET', url: '/prime/webui/agents/RiskInsights/VulnerablePeripherals' })
  t.equal(first.statusCode, 200, first.body)
  t.notOk(first.json().data.some((m: any) => m.vid === '0951'))
  await call(app, admin, { method: 'POST', url: URL, payload: { kind: 'VulnerableDevice', vid: '0951', pid: '1666', name: 'Weak stick' } })
  const second = await call(app, admin, { method: 'GET', url: '/prime/webui/agents/RiskInsights/VulnerablePeripherals' })
  t.match(
    second.json().data.find((m: any) => m.vid === '0951'),
    { pid: '1666', kind: 'VulnerableDevice', hostsCount: 1, presentCount: 1 },
  )
})

t.test('the same entry added twice at once: one is added, the other answers 409', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  for (let round = 0; round < 6; round++) {
    const pid = `9A0${round}`
    const add = () => call(app, admin, { method: 'POST', url: URL, payload: { kind: 'VulnerableDevice', vid: '1D6B', pid, name: `Race ${round}` } })
    const answers = await Promise.all([add(), add(), add()])
    t.same(answers.map((a) => a.statusCode).sort(), [200, 409, 409], `round ${round}: one added, the others refused as duplicates`)
    t.equal(Number((await queryOne<{ n: number }>(app, "SELECT count(*) AS n FROM catalogue WHERE vid = '1D6B' AND pid = ?", pid))!.n), 1)
  }
})
