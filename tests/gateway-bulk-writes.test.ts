// backend: sqlite-only — SQLite's bulk statements of the gateway (db/gateway.ts, db/agent-state.ts)
// A group's writes of many agents at once (db/gateway-check-ins.ts updateStates; db/gateway-peripherals.ts applyPeripheralsMany,
// knownPeripheralsOf; db/agent-state.ts refreshAgents) run as a few statements of bound rows
// (64 states, 128 peripherals a statement): across those statements' boundaries they leave
// what the same writes one agent at a time leave, and a failed call leaves nothing.
import t from 'tap'
import { signatureOf } from '../db/gateway.js'
import type { AgentRow, AgentState, PeripheralWrite, StateWrite, StoredPeripheral } from '../lib/gateway/ports.js'
import type { DB } from '../db/index.js'
import { createRepos } from '../lib/repos.js'
import { seedFleet } from '../scripts/seed.js'
import { tempDb } from './helpers.js'

// Past two statements of states (64 each) and of peripherals' presence (128 each).
const AGENTS = 200
const NOW = Date.UTC(2026, 0, 15)

async function fleet(t: Parameters<typeof tempDb>[0]) {
  const { db } = tempDb(t)
  await seedFleet(db, { agents: AGENTS, peripheralsPerAgent: 3, seed: 7, now: NOW })
  return { db, repos: createRepos(db) }
}

/** Every row of a table, its revision left out (it counts statements, not what they wrote). */
const rows = (db: DB, table: string) => (db.prepare(`SELECT * FROM ${table} ORDER BY id`).all() as Record<string, unknown>[]).map(({ rev: _rev, ...rest }) => rest)

/** The state an agent's row holds, as a check-in would send it again. */
function stateOf(a: AgentRow): AgentState {
  const r = a as unknown as Record<string, unknown>
  return {
    hostIdentifier: a.host_identifier,
    localIpAddress: a.local_ip_address,
    osVersion: a.os_version,
    manufacturer: a.manufacturer,
    pcModel: a.pc_model,
    nicsJson: r.nics_json as string,
    nicsText: r.nics_text as string | null,
    ipAddresses: r.ip_addresses as string | null,
    operationalStatus: a.operational_status,
    isSystemLocked: r.is_system_locked as number,
    serviceVersion: a.service_version,
    kbDriverVersion: a.kb_driver_version,
    licenseStatus: a.license_status,
    licenseAccountId: a.license_account_id,
    modelTooltip: r.model_tooltip as string | null,
    runningMode: a.running_mode,
    switchIp: a.switch_ip,
    switchName: a.switch_name,
    portId: a.port_id,
    portName: a.port_name,
    ethernetsCount: r.ethernets_count as number,
    hashtags: r.hashtags as string | null,
    loggedOnUsers: r.logged_on_users as string,
    checkInSeconds: r.check_in_interval_s as number,
    lastUpdatedMs: a.last_updated_ms ?? 0,
    stateDigest: a.state_digest ?? '',
  }
}

/** Each agent's check-in: several sets of changed columns, times before and after the stored one. */
function stateWrites(db: DB, repos: ReturnType<typeof createRepos>): StateWrite[] {
  const ids = db.prepare('SELECT id FROM agents ORDER BY id').pluck().all() as number[]
  return ids.map((id, i) => {
    const before = repos.gateway.agent(id)!
    const state = { ...stateOf(before), lastUpdatedMs: i % 4 === 0 ? 1 : NOW + i, stateDigest: `digest-${i}` }
    if (i % 10 === 1) Object.assign(state, { hostIdentifier: `RENAMED-${i}`, osVersion: 'Windows 11 Pro', isSystemLocked: 1 })
    if (i % 10 === 2) Object.assign(state, { operationalStatus: before.operational_status === 'Armed' ? 'Free' : 'Armed', hashtags: null, switchIp: '10.9.9.9' })
    if (i % 10 === 3) Object.assign(state, { licenseAccountId: 'ACME-1', ethernetsCount: 3, loggedOnUsers: '["ACME\\\\u1"]' })
    return { id, before, state }
  })
}

t.test("many agents' states written together equal the same states written one at a time", async (t) => {
  const [a, b] = [await fleet(t), await fleet(t)]
  // A tenth disconnected: their check-in connects them. Most agents change nothing but the
  // time and digest: one set of columns past two statements.
  for (const { db } of [a, b]) db.exec(`UPDATE agents SET connection_status = CASE WHEN id % 10 = 0 THEN 'Disconnected' ELSE 'Connected' END, last_updated_ms = ${NOW}`)
  const together = stateWrites(a.db, a.repos)
  t.ok(new Set(together.map((w) => JSON.stringify(w.state))).size === AGENTS, 'every agent its own state')
  a.db.transaction(() => a.repos.gateway.updateStates(together))()
  for (const w of stateWrites(b.db, b.repos)) b.db.transaction(() => b.repos.gateway.updateStates([w]))()
  t.same(rows(a.db, 'agents'), rows(b.db, 'agents'))
  const row = a.repos.gateway.agent(together[1].id)!
  t.equal(row.host_identifier, 'RENAMED-1', 'a changed column is written')
  t.equal(row.last_updated_ms, NOW + 1, 'a later check-in time is taken')
  t.equal(a.repos.gateway.agent(together[0].id)!.last_updated_ms, NOW, 'an earlier one is not')
  t.equal(a.repos.gateway.agent(together[0].id)!.connection_status, 'Connected')
})

t.test('a failed call of many states leaves every agent as it was', async (t) => {
  const { db, repos } = await fleet(t)
  const writes = stateWrites(db, repos)
  // Past the first statement: its rows were written when the bad one fails.
  ;(writes[100].state as unknown as Record<string, unknown>).operationalStatus = 'Bogus'
  const before = rows(db, 'agents')
  t.throws(() => repos.gateway.updateStates(writes), /CHECK constraint failed/)
  t.same(rows(db, 'agents'), before, 'outside a transaction: nothing written')
  const savepoint = db.transaction(() => {
    db.prepare(`UPDATE agents SET hashtags = 'kept' WHERE id = ?`).run(writes[0].id)
    repos.gateway.updateStates(writes)
  })
  t.throws(() => savepoint())
  t.same(rows(db, 'agents'), before, "inside one: undone with the caller's transaction")
})

const STORED_COLUMNS = [
  'id',
  'device_id',
  'present',
  'vid',
  'pid',
  'gui_vid',
  'gui_pid',
  'serial_number',
  'gui_serial',
  'dev_icon',
  'description',
  'status',
  'manufacturer',
  'caption',
  'class_code',
  'subclass_code',
  'protocol_code',
  'hierarchy',
  'parent_device_id',
  'is_disabled',
] as const

t.test('knownPeripheralsOf answers the stored columns of each agent', async (t) => {
  const { db, repos } = await fleet(t)
  // Texts JSON escapes, and none at all.
  db.exec(`UPDATE peripherals SET description = 'a "quoted" \\ back' || char(9, 1, 10) || 'é ✓ 𝄞', caption = NULL, hierarchy = '' WHERE id % 5 = 0`)
  const ids = db.prepare('SELECT id FROM agents ORDER BY id').pluck().all() as number[]
  const known = repos.gateway.knownPeripheralsOf([...ids, 999_999])
  const stored = db.prepare('SELECT * FROM peripherals ORDER BY id').all() as (StoredPeripheral & { agent_id: number })[]
  t.equal([...known.values()].flat().length, stored.length, 'every peripheral, once')
  t.notOk(known.has(999_999))
  const byId = new Map([...known].flatMap(([agentId, list]) => list.map((p) => [p.id, { agentId, p }] as const)))
  let differ = 0
  for (const s of stored) {
    const { agentId, p } = byId.get(s.id)!
    if (agentId !== s.agent_id) t.fail(`peripheral ${s.id} under agent ${agentId}`)
    for (const column of STORED_COLUMNS) if (s[column] !== p[column]) t.fail(`peripheral ${s.id}: ${column} ${p[column]}`)
    // A report of the same values has the same signature: it is written as unchanged.
    const report = {
      deviceId: s.device_id,
      vid: s.vid,
      pid: s.pid,
      serialNumber: s.serial_number,
      description: s.description,
      status: s.status,
      manufacturer: s.manufacturer,
      caption: s.caption,
      guiVid: s.gui_vid,
      guiPid: s.gui_pid,
      guiSerial: s.gui_serial,
      devIcon: s.dev_icon,
      classCode: s.class_code,
      subclassCode: s.subclass_code,
      protocolCode: s.protocol_code,
      hierarchy: s.hierarchy,
      parentDeviceId: s.parent_device_id,
      isDisabled: s.is_disabled,
      present: 1,
    }
    if (p.signature !== signatureOf(report)) differ++
    if (p.signature === signatureOf({ ...report, caption: `${s.caption ?? ''}x` })) t.fail(`peripheral ${s.id}: a changed report has its signature`)
  }
  t.equal(differ, 0, "each stored peripheral's signature is its report's")
})

/** Each agent's peripherals reported as stored, the presence of the first one turned around. */
function presenceWrites(repos: ReturnType<typeof createRepos>, ids: number[], now: number): PeripheralWrite[] {
  const known = repos.gateway.knownPeripheralsOf(ids)
  return ids.map((agentId, i) => {
    const list = known.get(agentId) ?? []
    const reported = list.map((p, j) => ({
      id: p.id,
      stored: p,
      values: {
        deviceId: p.device_id,
        vid: p.vid,
        pid: p.pid,
        serialNumber: p.serial_number,
        description: p.description,
        status: p.status,
        manufacturer: p.manufacturer,
        caption: p.caption,
        guiVid: p.gui_vid,
        guiPid: p.gui_pid,
        guiSerial: p.gui_serial,
        devIcon: p.dev_icon,
        classCode: p.class_code,
        subclassCode: p.subclass_code,
        protocolCode: p.protocol_code,
        hierarchy: p.hierarchy,
        parentDeviceId: p.parent_device_id,
        isDisabled: p.is_disabled,
        present: j === 0 ? 1 - p.present : p.present,
      },
    }))
    // Every third agent leaves its last peripheral out of the report.
    const absent = i % 3 === 0 && reported.length > 1 ? [reported.pop()!.id!].filter((id) => list.find((p) => p.id === id)!.present) : []
    return { agentId, agentUuid: '', changes: { reported, absent }, now, previousMs: now - (i % 2 ? 60_000 : 10 * 86_400_000) }
  })
}

t.test("many agents' peripherals' presence written together equals the same one agent at a time", async (t) => {
  const [a, b] = [await fleet(t), await fleet(t)]
  const ids = a.db.prepare('SELECT id FROM agents ORDER BY id').pluck().all() as number[]
  for (const round of [1, 2]) {
    const now = NOW + round * 60_000
    const writes = presenceWrites(a.repos, ids, now)
    const seen = (db: DB) => db.prepare('SELECT id, present, last_seen_ms FROM peripherals').raw().all() as [number, number, number][]
    const before = new Map(seen(a.db).map((r) => [r[0], r]))
    // What each write means: present now, seen now; gone since, last seen at the check-in before (or later).
    const expected = new Map<number, [number, number]>()
    for (const w of writes) {
      for (const r of w.changes.reported) {
        const [, wasPresent, lastSeen] = before.get(r.id!)!
        if (r.values.present) expected.set(r.id!, [1, now])
        else expected.set(r.id!, [0, wasPresent ? Math.max(lastSeen, w.previousMs) : lastSeen])
      }
      for (const id of w.changes.absent) expected.set(id, [0, Math.max(before.get(id)![2], w.previousMs)])
    }
    a.repos.gateway.applyPeripheralsMany(writes, 2048)
    for (const w of presenceWrites(b.repos, ids, now)) b.repos.gateway.applyPeripheralsMany([w], 2048)
    t.same(rows(a.db, 'peripherals'), rows(b.db, 'peripherals'), `round ${round}: together as one at a time`)
    const wrong = seen(a.db).filter(([id, present, lastSeen]) => expected.has(id) && (expected.get(id)![0] !== present || expected.get(id)![1] !== lastSeen))
    t.same(wrong.slice(0, 3), [], `round ${round}: presence and last sight as reported`)
  }
  const changed = a.db.prepare(`SELECT count(*) FROM peripherals WHERE last_seen_ms > ?`).pluck().get(NOW) as number
  t.ok(changed > 256, `past two statements of presence (${changed} written)`)
})

t.test('a refresh of many agents leaves what refreshing each alone leaves', async (t) => {
  const [a, b] = [await fleet(t), await fleet(t)]
  for (const { db } of [a, b]) {
    // Presence, approvals and risk of every kind, agents without peripherals, open commands.
    db.exec(`UPDATE peripherals SET present = (id % 3 <> 0), approved = (id % 4 = 1), admin_status = CASE WHEN id % 4 = 1 THEN 'Approved' ELSE 'NotReviewed' END,
      is_vulnerable = (id % 11 = 0), is_attack_tool = (id % 13 = 0), severity = id % 7`)
    db.exec('DELETE FROM peripherals WHERE agent_id % 10 = 0')
    db.exec(`UPDATE agents SET approved_and_present = 99, not_approved = 99, has_unapproved = 1 - has_unapproved, severity = 0, in_action = 1 WHERE id % 2 = 0`)
    db.exec(`INSERT INTO agent_commands (agent_id, type, parameters, status, created_ms, created_by)
      SELECT id, 'UpdatePolicy', '{}', 'Pending', ${NOW}, 'admin' FROM agents WHERE id % 6 = 1`)
  }
  const ids = a.db.prepare('SELECT id FROM agents ORDER BY id').pluck().all() as number[]
  a.repos.agentState.refreshAgents([...ids, ids[3], ids[4]])
  for (const id of ids) b.repos.agentState.refreshAgent(id)
  t.same(rows(a.db, 'agents'), rows(b.db, 'agents'), 'the agents')
  t.same(rows(a.db, 'peripherals'), rows(b.db, 'peripherals'), 'their peripherals')
  const counts = (db: DB) => db.prepare(`SELECT * FROM row_counts WHERE name LIKE 'agents.%' AND name <> 'agents.rev' ORDER BY name`).all()
  t.same(counts(a.db), counts(b.db), "the flags' counts")
  t.ok((a.db.prepare('SELECT count(*) FROM agents WHERE approved_and_present = 99').pluck().get() as number) === 0, 'every stale counter refreshed')
})
