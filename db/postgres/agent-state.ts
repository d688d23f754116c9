// The stored flags, counters and severities of peripherals and agents on PostgreSQL, as
// db/agent-state.ts computes them on SQLite: a refresh is two statements whatever the
// number of agents, one over the peripherals and one over their agents (each counted in
// one pass over its peripherals). Rows whose values would not change are left alone: a
// rewritten agent row takes a new rev (agents_rev_update). Call inside the unit of work
// that changed peripherals, approvals, commands, the catalogue or an agent's mode.
import type { AgentStateRepo } from '../agent-state.js'
import type { PeripheralsWritten } from '../../lib/gateway/ports.js'
import type { Async } from '../unit-of-work.js'
import type { Postgres } from './connection.js'

const OPEN = `('Pending', 'Delivered')`

const PERIPHERAL_DERIVED = ['admin_status', 'is_attack_tool', 'is_vulnerable', 'vulnerability', 'approved', 'is_unapproved', 'severity', 'in_action']

/**
 * The peripherals picked by id ($1, $3) or agent ($2, $4): their approvals' and the
 * catalogue's inputs recomputed for those of $1 and $2 (the others keep theirs), then what
 * follows from them. SQLite's two statements in one: the inputs are computed in the FROM.
 */
const REFRESH_PERIPHERALS = `UPDATE peripherals p SET ${PERIPHERAL_DERIVED.map((c) => `${c} = x.${c}`).join(', ')}
FROM (
  SELECT q.id, q.admin_status, q.is_attack_tool, q.is_vulnerable, q.vulnerability,
    (q.admin_status = 'Approved')::int AS approved,
    (q.present <> 0 AND q.admin_status <> 'Approved')::int AS is_unapproved,
    least(coalesce(q.catalogue_severity, 6),
      CASE WHEN q.admin_status = 'Approved' THEN 6 WHEN ag.operational_status = 'Armed' THEN 4 ELSE 5 END) AS severity,
    -- An approval change waits for the agent while an UpdatePolicy issued after it is open.
    EXISTS (SELECT 1 FROM agent_commands c JOIN approvals a ON a.agent_id = c.agent_id AND a.vid = q.vid AND a.pid = q.pid
      WHERE c.agent_id = q.agent_id AND c.type = 'UpdatePolicy' AND c.status IN ${OPEN} AND c.created_ms >= a.changed_ms)::int AS in_action
  FROM (
    SELECT p.id, p.agent_id, p.vid, p.pid, p.present, cat.severity AS catalogue_severity,
      CASE WHEN s.inputs THEN coalesce(ap.status, 'NotReviewed') ELSE p.admin_status END AS admin_status,
      CASE WHEN s.inputs THEN cat.attack_tool ELSE p.is_attack_tool END AS is_attack_tool,
      CASE WHEN s.inputs THEN cat.vulnerable ELSE p.is_vulnerable END AS is_vulnerable,
      CASE WHEN s.inputs THEN cat.vulnerability ELSE p.vulnerability END AS vulnerability
    FROM peripherals p
    CROSS JOIN LATERAL (SELECT p.id = ANY($1::bigint[]) OR p.agent_id = ANY($2::bigint[]) AS inputs) s
    LEFT JOIN approvals ap ON ap.agent_id = p.agent_id AND ap.vid = p.vid AND ap.pid = p.pid
    CROSS JOIN LATERAL (
      SELECT coalesce(max((c.kind = 'KnownAttackTool')::int), 0) AS attack_tool, coalesce(max((c.kind = 'VulnerableDevice')::int), 0) AS vulnerable,
        string_agg(coalesce(c.vulnerability, c.name), ' ' ORDER BY c.created_ms, c.kind) AS vulnerability, min(c.severity) AS severity
      FROM catalogue c WHERE c.vid = p.vid AND c.pid = p.pid
    ) cat
    WHERE p.id = ANY($1::bigint[]) OR p.agent_id = ANY($2::bigint[]) OR p.id = ANY($3::bigint[]) OR p.agent_id = ANY($4::bigint[])
  ) q
  JOIN agents ag ON ag.id = q.agent_id
) x
WHERE p.id = x.id AND (${PERIPHERAL_DERIVED.map((c) => `p.${c}`).join(', ')}) IS DISTINCT FROM (${PERIPHERAL_DERIVED.map((c) => `x.${c}`).join(', ')})`

const AGENT_COUNTERS = ['approved_and_present', 'approved_and_disconnected', 'not_approved', 'has_unapproved', 'has_vulnerable', 'has_attack_tool', 'severity', 'in_action']
const AGENT_DERIVED = [...AGENT_COUNTERS, 'vulnerable_or_wlv', 'display_status']

/**
 * The agents of $1: the counters of those of $2 from one pass over their peripherals (the
 * others keep theirs), then their flags and display status from those counters.
 */
const REFRESH_AGENTS = `UPDATE agents a SET ${AGENT_DERIVED.map((c) => `${c} = x.${c}`).join(', ')}
FROM (
  SELECT k.*,
    (k.has_vulnerable <> 0 OR (k.has_unapproved <> 0 AND k.operational_status = 'Armed'))::int AS vulnerable_or_wlv,
    CASE
      WHEN k.connection_status <> 'Connected' THEN 'Disconnected'
      WHEN k.set_mode = 'Armed' THEN 'Arming'
      WHEN k.set_mode IS NOT NULL THEN 'Freeing'
      WHEN EXISTS (SELECT 1 FROM agent_commands c WHERE c.agent_id = k.id AND c.type = 'UpdateAgent' AND c.status IN ${OPEN}) THEN 'Updating'
      WHEN k.in_action <> 0 THEN 'Pending'
      ELSE k.operational_status END AS display_status
  FROM (
    SELECT g.id, g.operational_status, g.connection_status,
      ${AGENT_COUNTERS.map((c) => `CASE WHEN w.counted THEN n.${c} ELSE g.${c} END AS ${c}`).join(',\n      ')},
      -- The mode of the latest open SetMode ('' without one), NULL when none is open.
      (SELECT coalesce(c.parameters::jsonb ->> 'mode', '') FROM agent_commands c
        WHERE c.agent_id = g.id AND c.type = 'SetMode' AND c.status IN ${OPEN} ORDER BY c.id DESC LIMIT 1) AS set_mode
    FROM agents g
    CROSS JOIN LATERAL (SELECT g.id = ANY($2::bigint[]) AS counted) w
    CROSS JOIN LATERAL (
      SELECT count(*) FILTER (WHERE p.present <> 0 AND p.approved <> 0) AS approved_and_present,
        count(*) FILTER (WHERE p.present = 0 AND p.approved <> 0) AS approved_and_disconnected,
        count(*) FILTER (WHERE p.present <> 0 AND p.approved = 0) AS not_approved,
        (count(*) FILTER (WHERE p.present <> 0 AND p.approved = 0) > 0)::int AS has_unapproved,
        (count(*) FILTER (WHERE p.present <> 0 AND p.is_vulnerable <> 0) > 0)::int AS has_vulnerable,
        (count(*) FILTER (WHERE p.present <> 0 AND p.is_attack_tool <> 0) > 0)::int AS has_attack_tool,
        coalesce(min(p.severity) FILTER (WHERE p.present <> 0), 6) AS severity,
        EXISTS (SELECT 1 FROM agent_commands c WHERE c.agent_id = g.id AND c.status IN ${OPEN})::int AS in_action
      FROM peripherals p WHERE w.counted AND p.agent_id = g.id
    ) n
    WHERE g.id = ANY($1::bigint[])
  ) k
) x
WHERE a.id = x.id AND (${AGENT_DERIVED.map((c) => `a.${c}`).join(', ')}) IS DISTINCT FROM (${AGENT_DERIVED.map((c) => `x.${c}`).join(', ')})`

export function pgAgentStateRepo(db: Postgres) {
  const peripherals = (inputIds: number[], inputAgents: number[], derivedIds: number[], derivedAgents: number[]) => db.run(REFRESH_PERIPHERALS, [inputIds, inputAgents, derivedIds, derivedAgents])
  const agents = (ids: number[], counted: number[]) => db.run(REFRESH_AGENTS, [ids, counted])

  /** Everything of these agents: their peripherals' flags, then their own counters and flags. */
  async function refreshAgents(agentIds: number[]): Promise<void> {
    if (agentIds.length === 0) return
    await peripherals([], agentIds, [], [])
    await agents(agentIds, agentIds)
  }

  const port = {
    refreshAgent: (agentId: number) => refreshAgents([agentId]),
    /** refreshAgent for each of these agents, in one statement per step. */
    refreshAgents,
    /**
     * refreshAgents after a group of check-ins, over what they changed only (see
     * db/agent-state.ts): the inputs of the written peripherals, what follows for the moved
     * ones and every one of an agent whose mode changed, the counters of the agents that
     * wrote anything, and every agent's flags and display status.
     */
    async refreshCheckIns(agentIds: number[], touched: PeripheralsWritten, modeChanged: number[]): Promise<void> {
      if (touched.written.length + touched.moved.length + modeChanged.length) await peripherals(touched.written, [], touched.moved, modeChanged)
      const counted = modeChanged.length ? [...new Set([...touched.agents, ...modeChanged])] : touched.agents
      const ids = counted.length ? [...new Set([...agentIds, ...counted])] : agentIds
      if (ids.length) await agents(ids, counted)
    },
    /** Display status only: after a command or connection change that touched no peripheral. */
    refreshStatus: async (agentId: number) => {
      await agents([agentId], [agentId])
    },
    /** Every agent that reported a model (after a catalogue change); answers how many. */
    async refreshModel(vid: string, pid: string): Promise<number> {
      const ids = (await db.query<{ agent_id: number }>('SELECT DISTINCT agent_id FROM peripherals WHERE vid = $1 AND pid = $2', [vid, pid])).map((r) => r.agent_id)
      await refreshAgents(ids)
      return ids.length
    },
  }
  return port satisfies Async<AgentStateRepo>
}
export type PgAgentStateRepo = ReturnType<typeof pgAgentStateRepo>
