// Risk insights: aggregates over agents, peripherals, commands and events. Each one is a
// few GROUP BY queries over indexed columns, so that it stays fast at 100,000 agents and
// a million peripherals; per-item detail (hosts, findings) is fetched only for the rows
// that are answered. Answers rows: lib/insights/views.ts gives them the contract's shape.
// The rare and risky models (insights-models.ts), whitelist violations
// (insights-violations.ts) and the classification (insights-classification.ts) are modules
// of their own; the kept answers, logged agents, policy test and error totals are here.
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { DB } from './index.js'
import { MAX_MODELS, modelStore } from './insights-models.js'
import { violationStore } from './insights-violations.js'
import { classificationStore } from './insights-classification.js'
import type { ErrorAgentRow, ErrorTotalsRows, FindingRow, LoggedAgentRow, PolicyAgentRow, PolicyTestRows } from '../lib/insights/ports.js'

export { MAX_MODELS } from './insights-models.js'

export { classColumns, riskColumns } from './insights-classification.js'

const DAY_MS = 86_400_000
const MAX_AGENTS = 10_000
const MAX_FINDINGS = 512
const POLICY_STEP = 500

/**
 * `whitelistViolationCodes`: the event codes of whitelist violations (plugged in while
 * Armed, or present when the agent was armed), from the event-code catalogue.
 */
export function insightsRepo(db: DB, whitelistViolationCodes: readonly string[]) {
  for (const c of whitelistViolationCodes) if (!/^0x[0-9A-F]{6}$/.test(c)) throw new Error(`not an event code: ${c}`)
  // ---- cache ----
  const cacheGet = db.prepare<[string], { computed_ms: number; result: string }>('SELECT computed_ms, result FROM insight_cache WHERE name = ?')
  const cachePut = db.prepare<[string, number, string]>(
    'INSERT INTO insight_cache (name, computed_ms, result) VALUES (?, ?, ?) ON CONFLICT (name) DO UPDATE SET computed_ms = excluded.computed_ms, result = excluded.result',
  )
  const cacheDrop = db.prepare<[string, string]>("DELETE FROM insight_cache WHERE name = ? OR name LIKE ? || ':%'")

  const agentsTotal = db.prepare<[], { n: number }>("SELECT n FROM row_counts WHERE name = 'agents'")

  // ---- logged agents ----
  const connectedCount = db.prepare<[], { n: number }>("SELECT count(*) AS n FROM agents WHERE connection_status = 'Connected'")
  const connected = db.prepare<[number], LoggedAgentRow>(
    `SELECT uuid, host_identifier, local_ip_address, operational_status, display_status,
       coalesce(last_updated_ms, enrolled_ms) AS checked_in_ms, logged_on_users
     FROM agents WHERE connection_status = 'Connected'
     ORDER BY agents.last_updated_ms DESC, uuid LIMIT ?`,
  )

  // ---- policy test ----
  // Peripheral counts from the two partial indexes (not approved, risky); the agents with
  // a finding are those whose stored flags say so (has_unapproved: a present peripheral
  // not approved; has_vulnerable / has_attack_tool: a present risky one).
  const policyCounts = db.prepare<[], { would_block: number; attack: number; vulnerable: number; agents: number }>(
    `SELECT
       (SELECT count(*) FROM peripherals WHERE is_unapproved = 1) AS would_block,
       (SELECT count(*) FROM peripherals WHERE (is_attack_tool = 1 OR is_vulnerable = 1) AND present = 1 AND is_attack_tool = 1) AS attack,
       (SELECT count(*) FROM peripherals WHERE (is_attack_tool = 1 OR is_vulnerable = 1) AND present = 1 AND is_vulnerable = 1) AS vulnerable,
       (SELECT count(*) FROM agents WHERE has_unapproved = 1 OR has_vulnerable = 1 OR has_attack_tool = 1) AS agents`,
  )
  const policyAgents = db.prepare<[number], PolicyAgentRow>(
    // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
    // Walked in the host order (unary plus: the flags' own indexes would find every flagged
    // agent and sort them all, 28 ms at 100,000 agents against 0.4).
    `SELECT id, uuid, host_identifier, local_ip_address, operational_status, connection_status
     FROM agents WHERE +has_unapproved = 1 OR +has_vulnerable = 1 OR +has_attack_tool = 1
     ORDER BY host_identifier COLLATE NOCASE, uuid LIMIT ?`,
  )
  const policyFindings = db.prepare<[number, number], FindingRow>(
    `SELECT device_id, vid, pid, gui_vid, gui_pid, dev_icon, approved, is_attack_tool, is_vulnerable, vulnerability
     FROM peripherals
     WHERE agent_id = ? AND present = 1 AND (approved = 0 OR is_attack_tool = 1 OR is_vulnerable = 1)
     ORDER BY device_id LIMIT ?`,
  )

  // ---- error totals ----
  // One row per error: reported at check-in, or a command that ended Failed. Both read
  // only covering indexes (migration 004); texts are fetched for the answered agents only.
  const ERRORS = `
    SELECT agent_id, time_ms AS t, 1 AS reported FROM agent_errors WHERE time_ms BETWEEN @from AND @to
    UNION ALL
    SELECT agent_id, completed_ms, 0 FROM agent_commands WHERE status = 'Failed' AND completed_ms BETWEEN @from AND @to`
  const errorsByDay = db.prepare<{ from: number; to: number }, { day: number; reported: number; total: number }>(
    `SELECT t / ${DAY_MS} AS day, sum(reported) AS reported, count(*) AS total FROM (${ERRORS}) GROUP BY day ORDER BY day`,
  )
  // `agents` (a window over the groups) counts every agent with errors, beyond the limit.
  const errorsByAgent = db.prepare<{ from: number; to: number; limit: number }, Omit<ErrorAgentRow, 'text'>>(
    `SELECT a.id, a.uuid, a.host_identifier, a.local_ip_address, e.total, e.reported, e.last, e.agents
     FROM (SELECT agent_id, count(*) AS total, sum(reported) AS reported, max(t) AS last, count(*) OVER () AS agents
           FROM (${ERRORS}) GROUP BY agent_id) e
     JOIN agents a ON a.id = e.agent_id
     ORDER BY e.total DESC, a.host_identifier COLLATE NOCASE, a.uuid LIMIT @limit`,
  )
  const errorText = db.prepare<{ agent: number; t: number }, { text: string }>(
    `SELECT message AS text FROM agent_errors WHERE time_ms = @t AND agent_id = @agent
     UNION ALL
     SELECT type || ' failed' || coalesce(': ' || result_message, '') FROM agent_commands
     WHERE status = 'Failed' AND completed_ms = @t AND agent_id = @agent
     LIMIT 1`,
  )

  return {
    /** A kept insight: when it was computed and its answer as JSON. */
    cacheGet: (name: string) => cacheGet.get(name),
    /** Keeps an insight's answer (JSON) computed at `computedMs`. */
    cachePut(name: string, computedMs: number, json: string): void {
      cachePut.run(name, computedMs, json)
    },

    /** The cached result of an insight as it is, however old, with the time it was computed. */
    peek<T>(name: string): { computedMs: number; result: T & { computedTime: string } } | undefined {
      const hit = cacheGet.get(name)
      return hit ? { computedMs: hit.computed_ms, result: JSON.parse(hit.result) } : undefined
    },

    /** Stores an insight computed at `computedMs` (outside a unit of work, e.g. in slices). */
    store<T extends object>(name: string, computedMs: number, result: T): T & { computedTime: string } {
      const out = { computedTime: new Date(computedMs).toISOString(), ...result }
      cachePut.run(name, computedMs, JSON.stringify(out))
      return out
    },

    /** Drops a cached insight (and its variants `name:...`), after a change that makes it stale. */
    invalidate(name: string): void {
      cacheDrop.run(name, name)
    },

    /** Up to 10,000 connected agents, the latest checked in first. */
    loggedAgents: (): LoggedAgentRow[] => connected.all(MAX_AGENTS),
    connectedCount: () => connectedCount.get()!.n,

    /**
     * Up to 10,000 agents with their findings: the findings are read 500 agents at a time,
     * letting other requests run in between (an agent's findings come from one query, so
     * each agent is consistent in itself). Paced here, row by row, rather than by a port
     * call per agent.
     */
    async policyTest(): Promise<PolicyTestRows> {
      const { counts, agents, total } = db.transaction(() => ({ counts: policyCounts.get()!, agents: policyAgents.all(MAX_AGENTS), total: agentsTotal.get()!.n }))()
      const listed: PolicyTestRows['agents'] = []
      for (const [i, agent] of agents.entries()) {
        if (i > 0 && i % POLICY_STEP === 0) await nextTurn()
        const findings = policyFindings.all(agent.id, MAX_FINDINGS)
        // Its peripherals changed since the agents were listed: nothing left to report.
        if (findings.length > 0) listed.push({ agent, findings })
      }
      return { counts, total, agents: listed }
    },

    /** Errors a day and the agents with the most (up to 1,000) between two times, in one snapshot. */
    errorTotals(from: number, to: number): ErrorTotalsRows {
      return db.transaction(() => {
        const range = { from, to }
        const byDay = errorsByDay.all(range)
        const agents = errorsByAgent.all({ ...range, limit: MAX_MODELS }).map((r) => ({ ...r, text: errorText.get({ agent: r.id, t: r.last })?.text ?? '' }))
        return { byDay, agents }
      })()
    },

    ...modelStore(db, agentsTotal),
    ...violationStore(db, whitelistViolationCodes),
    ...classificationStore(db),
  }
}
export type InsightsRepo = ReturnType<typeof insightsRepo>
