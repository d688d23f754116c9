// The derived state of peripherals and agents on PostgreSQL (db/postgres/agent-state.ts)
// against SQLite's (db/agent-state.ts): the same rows, written on both, refreshed by the
// same calls, leave the same flags, counters, severities and display statuses, and move
// the revs of the same agents.
import t from 'tap'
import { agentStateRepo } from '../db/agent-state.js'
import type { DB } from '../db/index.js'
import { pgAgentStateRepo } from '../db/postgres/agent-state.js'
import type { Postgres } from '../db/postgres/index.js'
import type { PeripheralsWritten } from '../lib/gateway/ports.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

type Row = Record<string, unknown>

interface Side {
  state: {
    refreshAgent(id: number): Promise<void>
    refreshAgents(ids: number[]): Promise<void>
    refreshCheckIns(ids: number[], touched: PeripheralsWritten, modeChanged: number[]): Promise<void>
    refreshStatus(id: number): Promise<void>
    refreshModel(vid: string, pid: string): Promise<number>
  }
  rows(sql: string): Promise<Row[]>
  exec(sql: string, params?: unknown[]): Promise<void>
}

function sqliteSide(db: DB): Side {
  const repo = agentStateRepo(db)
  return {
    // Each call in a transaction of its own, as the services call them.
    state: {
      refreshAgent: async (id) => db.transaction(() => repo.refreshAgent(id))(),
      refreshAgents: async (ids) => db.transaction(() => repo.refreshAgents(ids))(),
      refreshCheckIns: async (ids, touched, modeChanged) => db.transaction(() => repo.refreshCheckIns(ids, touched, modeChanged))(),
      refreshStatus: async (id) => db.transaction(() => repo.refreshStatus(id))(),
      refreshModel: async (vid, pid) => db.transaction(() => repo.refreshModel(vid, pid))(),
    },
    rows: async (sql) => db.prepare(sql).all() as Row[],
    exec: async (sql, params = []) => void db.prepare(sql.replace(/\$\d+/g, '?')).run(...params),
  }
}

function pgSide(pg: Postgres): Side {
  const repo = pgAgentStateRepo(pg)
  return {
    state: {
      refreshAgent: (id) => pg.uow.run(() => repo.refreshAgent(id)),
      refreshAgents: (ids) => pg.uow.run(() => repo.refreshAgents(ids)),
      refreshCheckIns: (ids, touched, modeChanged) => pg.uow.run(() => repo.refreshCheckIns(ids, touched, modeChanged)),
      refreshStatus: (id) => pg.uow.run(() => repo.refreshStatus(id)),
      refreshModel: (vid, pid) => pg.uow.run(() => repo.refreshModel(vid, pid)),
    },
    rows: (sql) => pg.query(sql),
    exec: async (sql, params = []) => void (await pg.run(sql, params)),
  }
}

const DERIVED = {
  agents: `SELECT id, operational_status, connection_status, display_status, approved_and_present, approved_and_disconnected, not_approved,
    severity, has_unapproved, has_vulnerable, has_attack_tool, vulnerable_or_wlv, in_action FROM agents ORDER BY id`,
  peripherals: `SELECT id, agent_id, vid, pid, present, approved, admin_status, is_unapproved, is_vulnerable, is_attack_tool, vulnerability,
    severity, in_action FROM peripherals ORDER BY id`,
}

t.test('derived state on both backends', { skip: noPostgres }, async (t) => {
  const sides = [sqliteSide(tempDb(t).db), pgSide(await pgTestDatabase(t))]
  const revs = async (s: Side) => new Map((await s.rows('SELECT id, rev FROM agents ORDER BY id')).map((r) => [r.id as number, r.rev as number]))

  /** A step on both sides: answers, derived rows and the agents whose rev moved compared. */
  async function both(step: string, fn: (s: Side) => Promise<unknown>) {
    const answers: unknown[] = []
    const moved: number[][] = []
    for (const s of sides) {
      const before = await revs(s)
      answers.push(await fn(s))
      moved.push([...(await revs(s))].filter(([id, rev]) => before.get(id) !== rev).map(([id]) => id))
    }
    t.same(answers[1], answers[0], `${step}: answers`)
    for (const [name, sql] of Object.entries(DERIVED)) t.same(await sides[1].rows(sql), await sides[0].rows(sql), `${step}: ${name}`)
    t.same(moved[1], moved[0], `${step}: the same agents took a new rev`)
  }

  const agent = (id: number, status = 'Free', connection = 'Connected') =>
    `INSERT INTO agents (id, uuid, machine_id, enrolled_ms, host_identifier, operational_status, connection_status) VALUES (${id}, 'u${id}', 'm${id}', 1, 'H${id}', '${status}', '${connection}')`
  let nextPeripheral = 1
  const peripheral = (agentId: number, vid: string, pid: string, present = 1) =>
    `INSERT INTO peripherals (id, agent_id, agent_uuid, device_id, vid, pid, present, first_seen_ms, last_seen_ms)
     VALUES (${nextPeripheral}, ${agentId}, 'u${agentId}', 'D${nextPeripheral++}', '${vid}', '${pid}', ${present}, 1, 1)`
  const setup = [agent(1), agent(2, 'Armed'), agent(3, 'Free', 'Disconnected'), agent(4), agent(5)]
  const peripherals = [
    [1, '046D', 'C077', 1],
    [1, '0951', '1666', 1],
    [1, '0483', '5740', 0], // an attack tool, absent
    [2, '0483', '5740', 1], // an attack tool, present on an Armed agent
    [2, '046D', 'C52B', 1], // vulnerable
    [2, '046D', 'C077', 1],
    [3, '1915', '0102', 1],
    [4, '0951', '1666', 0],
  ] as const
  for (const s of sides) {
    nextPeripheral = 1
    for (const sql of setup) await s.exec(sql)
    for (const [a, vid, pid, present] of peripherals) await s.exec(peripheral(a, vid, pid, present))
  }

  await both('refreshAgents of every agent', (s) => s.state.refreshAgents([1, 2, 3, 4, 5]))
  await both('refreshAgents of none, and of unknown ids', async (s) => {
    await s.state.refreshAgents([])
    await s.state.refreshAgents([98, 99])
    await s.state.refreshAgent(97)
  })

  await both('approvals: one approved, one disapproved; refreshAgent', async (s) => {
    await s.exec(`INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (1, '046D', 'C077', 'Approved', 10, 'alice'), (2, '0483', '5740', 'Disapproved', 10, 'alice')`)
    await s.state.refreshAgent(1)
    await s.state.refreshAgent(2)
  })

  await both('an UpdatePolicy issued after the approval: in action, Pending', async (s) => {
    await s.exec(`INSERT INTO agent_commands (id, agent_id, type, parameters, status, created_ms, created_by) VALUES (1, 1, 'UpdatePolicy', '{}', 'Pending', 20, 'alice')`)
    await s.state.refreshAgent(1)
  })
  await both('delivered: still open', async (s) => {
    await s.exec(`UPDATE agent_commands SET status = 'Delivered', delivered_ms = 21 WHERE id = 1`)
    await s.state.refreshAgent(1)
  })
  await both('succeeded: no longer in action', async (s) => {
    await s.exec(`UPDATE agent_commands SET status = 'Succeeded', completed_ms = 22 WHERE id = 1`)
    await s.state.refreshAgent(1)
  })

  await both('SetMode Armed open: Arming (refreshStatus)', async (s) => {
    await s.exec(`INSERT INTO agent_commands (id, agent_id, type, parameters, status, created_ms, created_by) VALUES (2, 4, 'SetMode', '{"mode":"Armed"}', 'Pending', 30, 'bob')`)
    await s.state.refreshStatus(4)
  })
  await both('a later SetMode Free: Freeing', async (s) => {
    await s.exec(`INSERT INTO agent_commands (id, agent_id, type, parameters, status, created_ms, created_by) VALUES (3, 4, 'SetMode', '{"mode":"Free"}', 'Delivered', 31, 'bob')`)
    await s.state.refreshStatus(4)
  })
  await both('a SetMode without a mode: Freeing; an UpdateAgent on another: Updating', async (s) => {
    await s.exec(`UPDATE agent_commands SET status = 'Cancelled' WHERE id IN (2, 3)`)
    await s.exec(
      `INSERT INTO agent_commands (id, agent_id, type, parameters, status, created_ms, created_by) VALUES (4, 4, 'SetMode', '{}', 'Pending', 32, 'bob'), (5, 5, 'UpdateAgent', '{}', 'Pending', 32, 'bob')`,
    )
    await s.state.refreshAgents([4, 5])
  })
  await both('every command done', async (s) => {
    await s.exec(`UPDATE agent_commands SET status = 'Succeeded' WHERE id IN (4, 5)`)
    await s.state.refreshAgents([4, 5])
  })

  await both('the catalogue: a model both vulnerable and an attack tool; refreshModel', async (s) => {
    await s.exec(`INSERT INTO catalogue (id, kind, vid, pid, name, vulnerability, severity, reference, built_in, created_ms, created_by)
      VALUES ('x1', 'VulnerableDevice', '0951', '1666', 'Stick', 'Leaky firmware', 4, NULL, 0, 40, 'alice'),
             ('x2', 'KnownAttackTool', '0951', '1666', 'Stick tool', NULL, 1, NULL, 0, 41, 'alice')`)
    return [await s.state.refreshModel('0951', '1666'), await s.state.refreshModel('FFFF', 'FFFF')]
  })
  await both('an entry removed', async (s) => {
    await s.exec(`DELETE FROM catalogue WHERE id = 'x2'`)
    return s.state.refreshModel('0951', '1666')
  })

  // A check-in's refresh: only what it touched is read again.
  await both('refreshCheckIns: a peripheral written, one moved, a mode changed', async (s) => {
    await s.exec(`UPDATE peripherals SET vid = '1D6B', pid = '0104' WHERE id = 2`)
    await s.exec(`UPDATE peripherals SET present = 1 WHERE id = 3`)
    await s.exec(`UPDATE agents SET operational_status = 'Armed' WHERE id = 4`)
    await s.state.refreshCheckIns([1, 4], { written: [2], moved: [3], agents: [1] }, [4])
  })
  await both('refreshCheckIns: nothing touched, a reconnect', async (s) => {
    await s.exec(`UPDATE agents SET connection_status = 'Connected' WHERE id = 3`)
    await s.state.refreshCheckIns([3], { written: [], moved: [], agents: [] }, [])
    await s.state.refreshCheckIns([], { written: [], moved: [], agents: [] }, [])
  })
  await both('refreshCheckIns: a peripheral moved alone keeps its inputs', async (s) => {
    // An approval not yet refreshed: a move alone does not read it (as on SQLite).
    await s.exec(`INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (2, '046D', 'C52B', 'Approved', 50, 'alice')`)
    await s.exec(`UPDATE peripherals SET present = 0 WHERE id = 5`)
    await s.state.refreshCheckIns([2], { written: [], moved: [5], agents: [2] }, [])
  })
  await both('and refreshAgent reads it', (s) => s.state.refreshAgent(2))
})
