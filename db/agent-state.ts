// The one place that recomputes the stored flags, counters and severities of peripherals
// and agents (see migration 003 for why they are stored). Call it inside the transaction
// that changed peripherals, approvals, commands, the catalogue or an agent's mode.
import type { PeripheralsWritten } from '../lib/gateway/ports.js'
import type { DB } from './index.js'

const OPEN = `('Pending', 'Delivered')`

/**
 * `UPDATE table SET column = expression, ... WHERE where`, leaving out the rows it would
 * not change: most refreshes (a check-in's, above all) change nothing, and a rewritten
 * agent row bumps its revision (agents_rev_update) and index entries, a peripheral row its
 * indexes. The guard reads the row's old values, as the SET does.
 */
function changedOnly(table: string, where: string, set: Record<string, string>, also = ''): string {
  const columns = Object.entries(set)
  return `UPDATE ${table} SET ${columns.map(([c, e]) => `${c} = ${e}`).join(',\n')}${also}
    WHERE ${where} AND (${columns.map(([c, e]) => `${c} IS NOT (${e})`).join('\n OR ')})`
}

/** The two refresh statements of peripherals, over those `where` picks (a `peripherals` condition). */
function peripheralStatements(db: DB, peripheralAgentIs: string) {
  // Two statements: SQLite evaluates every SET expression on the row's old values.
  const peripheralsInputs = db.prepare(
    changedOnly('peripherals', peripheralAgentIs, {
      admin_status: `coalesce((SELECT a.status FROM approvals a
        WHERE a.agent_id = peripherals.agent_id AND a.vid = peripherals.vid AND a.pid = peripherals.pid), 'NotReviewed')`,
      is_attack_tool: `EXISTS (SELECT 1 FROM catalogue c WHERE c.vid = peripherals.vid AND c.pid = peripherals.pid AND c.kind = 'KnownAttackTool')`,
      is_vulnerable: `EXISTS (SELECT 1 FROM catalogue c WHERE c.vid = peripherals.vid AND c.pid = peripherals.pid AND c.kind = 'VulnerableDevice')`,
      vulnerability: `(SELECT group_concat(coalesce(c.vulnerability, c.name), ' ') FROM catalogue c
        WHERE c.vid = peripherals.vid AND c.pid = peripherals.pid)`,
    }),
  )
  const peripheralsDerived = db.prepare(
    changedOnly('peripherals', peripheralAgentIs, {
      approved: `admin_status = 'Approved'`,
      is_unapproved: `present AND admin_status <> 'Approved'`,
      severity: `min(
        coalesce((SELECT min(c.severity) FROM catalogue c WHERE c.vid = peripherals.vid AND c.pid = peripherals.pid), 6),
        CASE WHEN admin_status = 'Approved' THEN 6
             WHEN (SELECT operational_status FROM agents WHERE id = peripherals.agent_id) = 'Armed' THEN 4 ELSE 5 END)`,
      // An approval change waits for the agent while an UpdatePolicy issued after it is open.
      in_action: `EXISTS (SELECT 1 FROM agent_commands c JOIN approvals a
          ON a.agent_id = c.agent_id AND a.vid = peripherals.vid AND a.pid = peripherals.pid
        WHERE c.agent_id = peripherals.agent_id AND c.type = 'UpdatePolicy' AND c.status IN ${OPEN} AND c.created_ms >= a.changed_ms)`,
    }),
  )
  return { peripheralsInputs, peripheralsDerived }
}

/** An agent's counters over the agents `agentIs` picks (an `agents` condition on `id`). */
function agentCountersStatement(db: DB, agentIs: string) {
  return db.prepare(
    changedOnly('agents', agentIs, {
      approved_and_present: '(SELECT count(*) FROM peripherals p WHERE p.agent_id = agents.id AND p.present AND p.approved)',
      approved_and_disconnected: '(SELECT count(*) FROM peripherals p WHERE p.agent_id = agents.id AND NOT p.present AND p.approved)',
      not_approved: '(SELECT count(*) FROM peripherals p WHERE p.agent_id = agents.id AND p.present AND NOT p.approved)',
      has_unapproved: 'EXISTS (SELECT 1 FROM peripherals p WHERE p.agent_id = agents.id AND p.present AND NOT p.approved)',
      has_vulnerable: 'EXISTS (SELECT 1 FROM peripherals p WHERE p.agent_id = agents.id AND p.present AND p.is_vulnerable)',
      has_attack_tool: 'EXISTS (SELECT 1 FROM peripherals p WHERE p.agent_id = agents.id AND p.present AND p.is_attack_tool)',
      severity: 'coalesce((SELECT min(p.severity) FROM peripherals p WHERE p.agent_id = agents.id AND p.present), 6)',
      in_action: `EXISTS (SELECT 1 FROM agent_commands c WHERE c.agent_id = agents.id AND c.status IN ${OPEN})`,
    }),
  )
}

/** An agent's flags and display status from its counters, over the agents `agentIs` picks. */
function agentDerivedStatement(db: DB, agentIs: string, agentsAlso = '') {
  return db.prepare(
    changedOnly(
      'agents',
      agentIs,
      {
        vulnerable_or_wlv: `has_vulnerable OR (has_unapproved AND operational_status = 'Armed')`,
        display_status: `CASE
        WHEN connection_status <> 'Connected' THEN 'Disconnected'
        -- The latest open SetMode by max(id), not ORDER BY id DESC LIMIT 1: across two statuses
        -- the index gives no id order, and the sort that took its place cost more than the rest.
        WHEN (SELECT json_extract(c.parameters, '$.mode') FROM agent_commands c WHERE c.id = (SELECT max(o.id) FROM agent_commands o
              WHERE o.agent_id = agents.id AND o.type = 'SetMode' AND o.status IN ${OPEN})) = 'Armed' THEN 'Arming'
        WHEN EXISTS (SELECT 1 FROM agent_commands c WHERE c.agent_id = agents.id AND c.type = 'SetMode' AND c.status IN ${OPEN}) THEN 'Freeing'
        WHEN EXISTS (SELECT 1 FROM agent_commands c WHERE c.agent_id = agents.id AND c.type = 'UpdateAgent' AND c.status IN ${OPEN}) THEN 'Updating'
        WHEN in_action THEN 'Pending'
        ELSE operational_status END`,
      },
      agentsAlso,
    ),
  )
}

export function agentStateRepo(db: DB) {
  const one = { ...peripheralStatements(db, 'agent_id = ?'), agentCounters: agentCountersStatement(db, 'id = ?'), agentDerived: agentDerivedStatement(db, 'id = ?') }
  // Many agents at once (a group of check-ins): the same statements over a JSON array of ids
  // (their counters: countersMany below).
  // The agents a statement changes share one new rev (migration 032), drawn after it changed
  // any: the per-row trigger would write each row a second time and bump the counter per row.
  const many = {
    ...peripheralStatements(db, 'agent_id IN (SELECT value FROM json_each(?))'),
    agentDerived: agentDerivedStatement(db, 'id IN (SELECT value FROM json_each(?))', `, rev = (SELECT n + 1 FROM row_counts WHERE name = 'agents.rev')`),
  }
  // A group of check-ins' peripherals by their own ids (refreshCheckIns).
  const byIds = peripheralStatements(db, 'id IN (SELECT value FROM json_each(?))')
  // The counters of many agents, each from one pass over its peripherals (the same values as
  // agentCounters, whose seven subqueries read an agent's peripherals seven times, and seven
  // more for the SET of a row that changes: three quarters of a group's refresh).
  const counted = `(SELECT coalesce(sum(p.present AND p.approved), 0), coalesce(sum(NOT p.present AND p.approved), 0),
       coalesce(sum(p.present AND NOT p.approved), 0), coalesce(max(p.present AND NOT p.approved), 0),
       coalesce(max(p.present AND p.is_vulnerable), 0), coalesce(max(p.present AND p.is_attack_tool), 0),
       coalesce(min(CASE WHEN p.present THEN p.severity END), 6),
       EXISTS (SELECT 1 FROM agent_commands c WHERE c.agent_id = agents.id AND c.status IN ${OPEN})
     FROM peripherals p WHERE p.agent_id = agents.id)`
  const countersMany = db.prepare<[string]>(
    `UPDATE OR FAIL agents SET (approved_and_present, approved_and_disconnected, not_approved, has_unapproved, has_vulnerable,
       has_attack_tool, severity, in_action) = ${counted}, rev = (SELECT n + 1 FROM row_counts WHERE name = 'agents.rev')
     WHERE id IN (SELECT value FROM json_each(?)) AND (approved_and_present, approved_and_disconnected, not_approved, has_unapproved,
       has_vulnerable, has_attack_tool, severity, in_action) IS NOT ${counted}`,
  )
  const bumpRev = db.prepare(`UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev'`)
  const agentsWithModel = db.prepare<[string, string], { agent_id: number }>('SELECT DISTINCT agent_id FROM peripherals WHERE vid = ? AND pid = ?')

  /** Display status only: after a command or connection change that touched no peripheral. */
  function refreshStatus(agentId: number): void {
    one.agentCounters.run(agentId)
    one.agentDerived.run(agentId)
  }

  /** Everything of one agent: its peripherals' flags, then its own counters and flags. */
  function refreshAgent(agentId: number): void {
    for (const s of [one.peripheralsInputs, one.peripheralsDerived, one.agentCounters, one.agentDerived]) s.run(agentId)
  }

  /** refreshAgent for each of these agents, in one statement per step. */
  function refreshAgents(agentIds: number[]): void {
    // One agent: the statements on its id (no JSON to parse).
    if (agentIds.length === 1) refreshAgent(agentIds[0])
    if (agentIds.length <= 1) return
    const ids = JSON.stringify(agentIds)
    many.peripheralsInputs.run(ids)
    many.peripheralsDerived.run(ids)
    for (const s of [countersMany, many.agentDerived]) if (s.run(ids).changes > 0) bumpRev.run()
  }

  /**
   * refreshAgents after a group of check-ins, over what they changed only: a check-in changes
   * no approval, catalogue entry or open command, so a peripheral it left alone keeps its
   * flags, and so do its agent's counters, unless the agent's mode changed (`modeChanged`:
   * every peripheral's severity follows the mode). The same rows as refreshAgents(agentIds).
   */
  function refreshCheckIns(agentIds: number[], touched: PeripheralsWritten, modeChanged: number[]): void {
    if (touched.written.length) byIds.peripheralsInputs.run(JSON.stringify(touched.written))
    const moved = touched.written.length + touched.moved.length
    if (moved) byIds.peripheralsDerived.run(JSON.stringify(moved === touched.written.length ? touched.written : [...touched.written, ...touched.moved]))
    if (modeChanged.length) many.peripheralsDerived.run(JSON.stringify(modeChanged))
    const counted = modeChanged.length ? [...new Set([...touched.agents, ...modeChanged])] : touched.agents
    if (counted.length && countersMany.run(JSON.stringify(counted)).changes > 0) bumpRev.run()
    if (agentIds.length && many.agentDerived.run(JSON.stringify(agentIds)).changes > 0) bumpRev.run()
  }

  return {
    refreshAgent,
    refreshAgents,
    refreshCheckIns,
    refreshStatus,
    /** Every agent that reported a model (after a catalogue change); answers how many. */
    refreshModel(vid: string, pid: string): number {
      const ids = agentsWithModel.all(vid, pid)
      for (const { agent_id } of ids) refreshAgent(agent_id)
      return ids.length
    },
  }
}
export type AgentStateRepo = ReturnType<typeof agentStateRepo>
