// The one place that recomputes the stored flags, counters and severities of peripherals
// and agents (see migration 003 for why they are stored). Call it inside the transaction
// that changed peripherals, approvals, commands, the catalogue or an agent's mode.
import type { DB } from './index.js'

const OPEN = `('Pending', 'Delivered')`

/**
 * `UPDATE table SET column = expression, ... WHERE where`, leaving out the rows it would
 * not change: most refreshes (a check-in's, above all) change nothing, and a rewritten
 * agent row bumps its revision (agents_rev_update) and index entries, a peripheral row its
 * indexes. The guard reads the row's old values, as the SET does.
 */
function changedOnly(table: string, where: string, set: Record<string, string>): string {
  const columns = Object.entries(set)
  return `UPDATE ${table} SET ${columns.map(([c, e]) => `${c} = ${e}`).join(',\n')}
    WHERE ${where} AND (${columns.map(([c, e]) => `${c} IS NOT (${e})`).join('\n OR ')})`
}

export function agentStateRepo(db: DB) {
  // Two statements: SQLite evaluates every SET expression on the row's old values.
  const peripheralsInputs = db.prepare<[number]>(
    changedOnly('peripherals', 'agent_id = ?', {
      admin_status: `coalesce((SELECT a.status FROM approvals a
        WHERE a.agent_id = peripherals.agent_id AND a.vid = peripherals.vid AND a.pid = peripherals.pid), 'NotReviewed')`,
      is_attack_tool: `EXISTS (SELECT 1 FROM catalogue c WHERE c.vid = peripherals.vid AND c.pid = peripherals.pid AND c.kind = 'KnownAttackTool')`,
      is_vulnerable: `EXISTS (SELECT 1 FROM catalogue c WHERE c.vid = peripherals.vid AND c.pid = peripherals.pid AND c.kind = 'VulnerableDevice')`,
      vulnerability: `(SELECT group_concat(coalesce(c.vulnerability, c.name), ' ') FROM catalogue c
        WHERE c.vid = peripherals.vid AND c.pid = peripherals.pid)`,
    }),
  )
  const peripheralsDerived = db.prepare<{ agent: number }>(
    changedOnly('peripherals', 'agent_id = :agent', {
      approved: `admin_status = 'Approved'`,
      is_unapproved: `present AND admin_status <> 'Approved'`,
      severity: `min(
        coalesce((SELECT min(c.severity) FROM catalogue c WHERE c.vid = peripherals.vid AND c.pid = peripherals.pid), 6),
        CASE WHEN admin_status = 'Approved' THEN 6
             WHEN (SELECT operational_status FROM agents WHERE id = :agent) = 'Armed' THEN 4 ELSE 5 END)`,
      // An approval change waits for the agent while an UpdatePolicy issued after it is open.
      in_action: `EXISTS (SELECT 1 FROM agent_commands c JOIN approvals a
          ON a.agent_id = c.agent_id AND a.vid = peripherals.vid AND a.pid = peripherals.pid
        WHERE c.agent_id = :agent AND c.type = 'UpdatePolicy' AND c.status IN ${OPEN} AND c.created_ms >= a.changed_ms)`,
    }),
  )
  const agentCounters = db.prepare<[number]>(
    changedOnly('agents', 'id = ?', {
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
  const agentDerived = db.prepare<[number]>(
    changedOnly('agents', 'id = ?', {
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
    }),
  )
  const agentsWithModel = db.prepare<[string, string], { agent_id: number }>('SELECT DISTINCT agent_id FROM peripherals WHERE vid = ? AND pid = ?')

  /** Display status only: after a command or connection change that touched no peripheral. */
  function refreshStatus(agentId: number): void {
    agentCounters.run(agentId)
    agentDerived.run(agentId)
  }

  /** Everything of one agent: its peripherals' flags, then its own counters and flags. */
  function refreshAgent(agentId: number): void {
    peripheralsInputs.run(agentId)
    peripheralsDerived.run({ agent: agentId })
    refreshStatus(agentId)
  }

  return {
    refreshAgent,
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
