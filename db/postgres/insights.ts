// Risk insights on PostgreSQL: the same answers as db/insights.ts, each aggregate one
// statement (its detail rows gathered in it as JSON), so that it sees one snapshot and
// costs one round trip. SQLite walks some of them in slices so as not to hold its only
// connection; here they run on a connection of their own, off the event loop.
//
// The kept answers stay in insight_cache (migration 007), shared by every node: a node
// that computes an insight keeps it for all, and `invalidate` deletes the row, which every
// node sees at once. Nothing is kept in a process's memory.
import type {
  ClassificationRows,
  ErrorTotalsRows,
  FindingRow,
  HostRow,
  InsightStore,
  LoggedAgentRow,
  PolicyAgentRow,
  PolicyTestRows,
  UncommonModel,
  UncommonRows,
  ViolationRows,
  VulnerableRows,
} from '../../lib/insights/ports.js'
import { classColumns, MAX_MODELS, riskColumns } from '../insights.js'
import type { Postgres } from './connection.js'

const DAY_MS = 86_400_000
const UNCOMMON_HOSTS = 20
const VULNERABLE_HOSTS = 100
const VIOLATION_HOSTS = 20
const MAX_AGENTS = 10_000
const MAX_FINDINGS = 512
/** Agents whose findings are read by one statement. */
const POLICY_STEP = 1000
// Hubs are infrastructure, not devices someone plugged in: never "uncommon".
const HUB = 4

/** Hosts in SQLite's order: host name without case (COLLATE NOCASE), then uuid. */
const HOST_ORDER = (a: string) => `lower(${a}.host_identifier) COLLATE "C", ${a}.uuid COLLATE "C"`
const HOST_JSON = (a: string) => `json_build_object('uuid', ${a}.uuid, 'host_identifier', ${a}.host_identifier, 'local_ip_address', ${a}.local_ip_address)`

/**
 * `whitelistViolationCodes`: the event codes of whitelist violations (plugged in while
 * Armed, or present when the agent was armed), from the event-code catalogue.
 */
export function pgInsightsRepo(db: Postgres, whitelistViolationCodes: readonly string[]) {
  for (const c of whitelistViolationCodes) if (!/^0x[0-9A-F]{6}$/.test(c)) throw new Error(`not an event code: ${c}`)
  const codes = [...whitelistViolationCodes]
  const get = <T>(sql: string, params?: unknown[]) => db.one(sql, params) as Promise<unknown> as Promise<T | undefined>
  const all = <T>(sql: string, params?: unknown[]) => db.query(sql, params) as Promise<unknown> as Promise<T[]>

  const cacheGet = (name: string) => get<{ computed_ms: number; result: string }>('SELECT computed_ms, result FROM insight_cache WHERE name = $1', [name])
  const cachePut = async (name: string, computedMs: number, json: string) => {
    await db.run('INSERT INTO insight_cache (name, computed_ms, result) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET computed_ms = excluded.computed_ms, result = excluded.result', [
      name,
      computedMs,
      json,
    ])
  }

  async function uncommonPeripherals(maxHosts: number): Promise<UncommonRows> {
    // Every present model's hosts counted in one GROUP BY (the index of present models
    // serves it), the rare ones described, hubs left out; the hosts of the first 1,000.
    const r = (await get<{ considered: number; total: number; models: { model: UncommonModel; hosts: HostRow[] }[] }>(
      `WITH considered AS (SELECT count(*) AS n FROM agents),
       rare AS (
         SELECT vid, pid, count(DISTINCT agent_id) AS hosts FROM peripherals
         WHERE present = 1 AND vid <> '' AND vid <> '0000' AND (SELECT n FROM considered) > $1
         GROUP BY vid, pid HAVING count(DISTINCT agent_id) <= $1),
       described AS (
         SELECT m.vid, m.pid, max(p.gui_vid COLLATE "C") AS gui_vid, max(p.gui_pid COLLATE "C") AS gui_pid, max(p.dev_icon) AS dev_icon,
           m.hosts, count(*) AS peripherals, sum(p.present) AS present, min(p.first_seen_ms) AS first_seen, max(p.last_seen_ms) AS last_seen,
           bool_or(p.dev_icon = ${HUB}) AS hub
         FROM rare m JOIN peripherals p ON p.vid = m.vid AND p.pid = m.pid
           AND p.agent_id IN (SELECT q.agent_id FROM peripherals q WHERE q.vid = m.vid AND q.pid = m.pid AND q.present = 1)
         GROUP BY m.vid, m.pid, m.hosts),
       ranked AS (
         SELECT d.*, row_number() OVER (ORDER BY d.hosts, d.last_seen DESC, d.vid COLLATE "C", d.pid COLLATE "C") AS k, count(*) OVER () AS total
         FROM described d WHERE NOT d.hub)
       SELECT (SELECT n FROM considered) AS considered, coalesce(max(total), 0) AS total,
         coalesce(json_agg(json_build_object(
           'model', json_build_object('vid', vid, 'pid', pid, 'gui_vid', gui_vid, 'gui_pid', gui_pid, 'dev_icon', dev_icon, 'hosts', hosts,
             'peripherals', peripherals, 'present', present, 'first_seen', first_seen, 'last_seen', last_seen),
           'hosts', (SELECT coalesce(json_agg(h.j ORDER BY h.k), '[]') FROM (
              SELECT ${HOST_JSON('a')} AS j, row_number() OVER (ORDER BY ${HOST_ORDER('a')}) AS k FROM agents a
              WHERE a.id IN (SELECT agent_id FROM peripherals WHERE vid = ranked.vid AND pid = ranked.pid AND present = 1)
              ORDER BY ${HOST_ORDER('a')} LIMIT ${UNCOMMON_HOSTS}) h)
         ) ORDER BY k) FILTER (WHERE k <= ${MAX_MODELS}), '[]') AS models
       FROM ranked`,
      [maxHosts],
    ))!
    return { maxHosts, agentsConsidered: r.considered, total: r.total, models: r.models }
  }

  const repo = {
    /** A kept insight: when it was computed and its answer as JSON. */
    cacheGet,
    /** Keeps an insight's answer (JSON) computed at `computedMs`. */
    cachePut,

    /** The kept result of an insight as it is, however old, with the time it was computed. */
    async peek<T>(name: string): Promise<{ computedMs: number; result: T & { computedTime: string } } | undefined> {
      const hit = await cacheGet(name)
      return hit ? { computedMs: hit.computed_ms, result: JSON.parse(hit.result) } : undefined
    },

    /** Stores an insight computed at `computedMs`. */
    async store<T extends object>(name: string, computedMs: number, result: T): Promise<T & { computedTime: string }> {
      const out = { computedTime: new Date(computedMs).toISOString(), ...result }
      await cachePut(name, computedMs, JSON.stringify(out))
      return out
    },

    /** Drops a kept insight (and its variants `name:...`), after a change that makes it stale: for every node. */
    async invalidate(name: string): Promise<void> {
      await db.run("DELETE FROM insight_cache WHERE name = $1 OR starts_with(name, $1 || ':')", [name])
    },

    /** Up to 10,000 connected agents, the latest checked in first. */
    loggedAgents: () =>
      all<LoggedAgentRow>(
        // Through the connected agents' check-in times (agent_checkins, migration 011), latest first.
        `SELECT a.uuid, a.host_identifier, a.local_ip_address, a.operational_status, a.display_status,
           coalesce(a.last_updated_ms, a.enrolled_ms) AS checked_in_ms, a.logged_on_users
         FROM agent_checkins c JOIN agents a ON a.id = c.agent_id WHERE c.connected AND a.connection_status = 'Connected'
         ORDER BY c.last_updated_ms DESC NULLS LAST, a.uuid COLLATE "C" LIMIT $1`,
        [MAX_AGENTS],
      ),
    connectedCount: async () => (await db.value<number>("SELECT count(*) FROM agents WHERE connection_status = 'Connected'")) ?? 0,

    /**
     * Up to 10,000 agents with their findings (up to 512 each): the counts and the agents
     * in one statement, the findings a thousand agents at a time (an agent's findings come
     * from one statement, so each agent is consistent in itself).
     */
    async policyTest(): Promise<PolicyTestRows> {
      const head = (await get<{ counts: PolicyTestRows['counts']; total: number; agents: PolicyAgentRow[] }>(
        `SELECT json_build_object(
             'would_block', (SELECT count(*) FROM peripherals WHERE is_unapproved = 1),
             'attack', (SELECT count(*) FROM peripherals WHERE is_attack_tool = 1 AND present = 1),
             'vulnerable', (SELECT count(*) FROM peripherals WHERE is_vulnerable = 1 AND present = 1),
             'agents', (SELECT count(*) FROM agents WHERE has_unapproved = 1 OR has_vulnerable = 1 OR has_attack_tool = 1)) AS counts,
           (SELECT count(*) FROM agents) AS total,
           (SELECT coalesce(json_agg(l ORDER BY l.k), '[]') FROM (
              SELECT id, uuid, host_identifier, local_ip_address, operational_status, connection_status, row_number() OVER (ORDER BY ${HOST_ORDER('a')}) AS k
              FROM agents a WHERE has_unapproved = 1 OR has_vulnerable = 1 OR has_attack_tool = 1
              ORDER BY ${HOST_ORDER('a')} LIMIT $1) l) AS agents`,
        [MAX_AGENTS],
      ))!
      const agents = head.agents.map(({ k: _, ...agent }: PolicyAgentRow & { k?: number }) => agent)
      const listed: PolicyTestRows['agents'] = []
      for (let i = 0; i < agents.length; i += POLICY_STEP) {
        const page = agents.slice(i, i + POLICY_STEP)
        const rows = await all<FindingRow & { agent_id: number }>(
          `SELECT agent_id, device_id, vid, pid, gui_vid, gui_pid, dev_icon, approved, is_attack_tool, is_vulnerable, vulnerability
           FROM (SELECT p.*, row_number() OVER (PARTITION BY agent_id ORDER BY device_id COLLATE "C") AS k
                 FROM peripherals p
                 WHERE agent_id = ANY($1::bigint[]) AND present = 1 AND (approved = 0 OR is_attack_tool = 1 OR is_vulnerable = 1)) f
           WHERE k <= ${MAX_FINDINGS} ORDER BY agent_id, k`,
          [page.map((a) => a.id)],
        )
        const byAgent = new Map<number, FindingRow[]>()
        for (const { agent_id, ...finding } of rows) {
          let list = byAgent.get(agent_id)
          if (!list) byAgent.set(agent_id, (list = []))
          list.push(finding)
        }
        for (const agent of page) {
          const findings = byAgent.get(agent.id)
          // Its peripherals changed since the agents were listed: nothing left to report.
          if (findings) listed.push({ agent, findings })
        }
      }
      return { counts: head.counts, total: head.total, agents: listed }
    },

    /** Errors a day and the agents with the most (up to 1,000) between two times, in one statement. */
    async errorTotals(from: number, to: number): Promise<ErrorTotalsRows> {
      // One row per error: reported at check-in, or a command that ended Failed.
      return (await get<ErrorTotalsRows>(
        `WITH errors AS (
           SELECT agent_id, time_ms AS t, 1 AS reported FROM agent_errors WHERE time_ms BETWEEN $1 AND $2
           UNION ALL
           SELECT agent_id, completed_ms, 0 FROM agent_commands WHERE status = 'Failed' AND completed_ms BETWEEN $1 AND $2),
         per AS (SELECT agent_id, count(*) AS total, sum(reported) AS reported, max(t) AS last, count(*) OVER () AS agents FROM errors GROUP BY agent_id),
         top AS (
           SELECT a.id, a.uuid, a.host_identifier, a.local_ip_address, e.total, e.reported, e.last, e.agents,
             row_number() OVER (ORDER BY e.total DESC, ${HOST_ORDER('a')}) AS k
           FROM per e JOIN agents a ON a.id = e.agent_id
           ORDER BY k LIMIT $3)
         SELECT
           (SELECT coalesce(json_agg(d ORDER BY d.day), '[]') FROM (SELECT t / ${DAY_MS} AS day, sum(reported) AS reported, count(*) AS total FROM errors GROUP BY 1) d) AS "byDay",
           (SELECT coalesce(json_agg(json_build_object('id', id, 'uuid', uuid, 'host_identifier', host_identifier, 'local_ip_address', local_ip_address,
              'total', total, 'reported', reported, 'last', last, 'agents', agents, 'text', coalesce(x.text, '')) ORDER BY k), '[]')
            FROM top LEFT JOIN LATERAL (
              SELECT text FROM (
                SELECT 0 AS src, id AS n, message AS text FROM agent_errors WHERE time_ms = top.last AND agent_id = top.id
                UNION ALL
                SELECT 1, id, type || ' failed' || coalesce(': ' || result_message, '') FROM agent_commands
                WHERE status = 'Failed' AND completed_ms = top.last AND agent_id = top.id) texts
              ORDER BY src, n LIMIT 1) x ON true) AS agents`,
        [from, to, MAX_MODELS],
      ))!
    },

    uncommonPeripherals,
    /** The same: computed by the server, it needs no slicing to leave the event loop free. */
    uncommonPeripheralsSliced: (maxHosts: number, _sliceMs = 20) => uncommonPeripherals(maxHosts),

    /** The catalogue's models that peripherals report, with up to 100 of their hosts each (the first 1,000 models). */
    async vulnerablePeripherals(): Promise<VulnerableRows> {
      return (await get<VulnerableRows>(
        `WITH models AS (
           SELECT c.id, c.kind, c.vid, c.pid, c.name, c.vulnerability, c.severity,
             max(p.gui_vid COLLATE "C") AS gui_vid, max(p.gui_pid COLLATE "C") AS gui_pid, max(p.dev_icon) AS dev_icon,
             count(DISTINCT p.agent_id) AS hosts, sum(p.present) AS present, sum(p.approved) AS approved
           FROM catalogue c JOIN peripherals p ON p.vid = c.vid AND p.pid = c.pid
           GROUP BY c.id),
         ranked AS (SELECT m.*, row_number() OVER (ORDER BY m.severity, m.hosts DESC, m.kind COLLATE "C", m.vid COLLATE "C", m.pid COLLATE "C") AS k, count(*) OVER () AS total FROM models m)
         SELECT coalesce(max(total), 0) AS total,
           coalesce(json_agg(json_build_object(
             'model', json_build_object('id', id, 'kind', kind, 'vid', vid, 'pid', pid, 'name', name, 'vulnerability', vulnerability, 'severity', severity,
               'gui_vid', gui_vid, 'gui_pid', gui_pid, 'dev_icon', dev_icon, 'hosts', hosts, 'present', present, 'approved', approved),
             'hosts', (SELECT coalesce(json_agg(h.j ORDER BY h.k), '[]') FROM (
                SELECT ${HOST_JSON('a')} AS j, row_number() OVER (ORDER BY ${HOST_ORDER('a')}) AS k FROM agents a
                WHERE a.id IN (SELECT agent_id FROM peripherals WHERE vid = ranked.vid AND pid = ranked.pid)
                ORDER BY ${HOST_ORDER('a')} LIMIT ${VULNERABLE_HOSTS}) h)
           ) ORDER BY k) FILTER (WHERE k <= ${MAX_MODELS}), '[]') AS models
         FROM ranked`,
      ))!
    },

    /**
     * The whitelist violations between two times, by model: their count, first and last
     * time, hosts (up to 20 listed, by asset key; events without one count as one host,
     * not listed). One statement (an index of events by code and time serves it); the
     * pacing arguments of the SQLite repository are taken and not needed.
     */
    async whitelistViolations(from: number, to: number, _pause?: () => Promise<unknown>, _turnMs?: number): Promise<ViolationRows> {
      type Model = Omit<ViolationRows['models'][number], 'known' | 'hosts'> & {
        known: ViolationRows['models'][number]['known'] | null
        hosts: { key: string; name: string | null; agent: HostRow | null }[]
      }
      const r = (await get<{ total: number; models: Model[] }>(
        `WITH v AS (
           SELECT upper(peripheral_vid) AS vid, upper(peripheral_pid) AS pid, asset_key, max(asset_name COLLATE "C") AS asset_name,
             max(peripheral_icon) AS icon, count(*) AS n, min(created_ms) AS first, max(created_ms) AS last
           FROM events
           WHERE event_code = ANY($1::text[]) AND created_ms BETWEEN $2 AND $3 AND peripheral_vid IS NOT NULL AND peripheral_pid IS NOT NULL
           GROUP BY 1, 2, 3),
         m AS (
           SELECT vid, pid, max(icon) AS icon, sum(n) AS n, min(first) AS first, max(last) AS last, count(*) AS "hostsCount",
             row_number() OVER (ORDER BY sum(n) DESC, max(last) DESC, vid COLLATE "C", pid COLLATE "C") AS k, count(*) OVER () AS total
           FROM (SELECT vid, pid, coalesce(asset_key, '') AS host, max(icon) AS icon, sum(n) AS n, min(first) AS first, max(last) AS last FROM v GROUP BY 1, 2, 3) h
           GROUP BY vid, pid),
         -- The first 20 hosts of each model, ranked in one pass over the groups.
         listed AS (
           SELECT vid, pid, asset_key, asset_name, row_number() OVER (PARTITION BY vid, pid ORDER BY asset_key COLLATE "C") AS r
           FROM v WHERE asset_key IS NOT NULL AND asset_key <> ''),
         hosts AS (
           SELECT l.vid, l.pid, json_agg(json_build_object('key', l.asset_key, 'name', l.asset_name, 'agent', CASE WHEN a.id IS NOT NULL THEN ${HOST_JSON('a')} END) ORDER BY l.r) AS hosts
           FROM listed l LEFT JOIN agents a ON a.uuid = l.asset_key
           WHERE l.r <= ${VIOLATION_HOSTS} GROUP BY l.vid, l.pid)
         SELECT coalesce(max(total), 0) AS total,
           coalesce(json_agg(json_build_object('vid', m.vid, 'pid', m.pid, 'icon', icon, 'n', n, 'first', first, 'last', last, 'hostsCount', "hostsCount",
             'known', (SELECT json_build_object('gui_vid', gui_vid, 'gui_pid', gui_pid, 'dev_icon', dev_icon) FROM peripherals p
                       WHERE p.vid = m.vid AND p.pid = m.pid ORDER BY p.id LIMIT 1),
             'hosts', coalesce(h.hosts, '[]')
           ) ORDER BY k) FILTER (WHERE k <= ${MAX_MODELS}), '[]') AS models
         FROM m LEFT JOIN hosts h ON h.vid = m.vid AND h.pid = m.pid`,
        [codes, from, to],
      ))!
      return {
        total: r.total,
        models: r.models.map((m) => ({
          ...m,
          known: m.known ?? undefined,
          // Events outlive deleted agents: such a host is named as the event named it.
          hosts: m.hosts.map((h) => h.agent ?? { uuid: h.key, host_identifier: h.name ?? h.key, local_ip_address: null }),
        })),
      }
    },

    /** The agents counted by each classifying column's values, by severity and by risk, and the present peripherals by class. */
    async classification(): Promise<ClassificationRows> {
      // Each agent's value of each list, counted per list and value; the risk flags summed.
      // An agent not connected counts as Disconnected in the display statuses too (db/agent-state.ts decides that first).
      const lists = Object.entries(classColumns).map(([list, column]) =>
        list === 'byDisplayStatus' ? `('${list}', CASE WHEN connection_status = 'Connected' THEN ${column} ELSE 'Disconnected' END)` : `('${list}', ${column})`,
      )
      const risks = Object.entries(riskColumns).map(([name, column]) => `'${name}', count(*) FILTER (WHERE ${column} <> 0)`)
      const r = (await get<{
        total: number
        values: { list: keyof ClassificationRows['counts']; value: string | null; n: number }[]
        severities: { severity: number; n: number }[]
        risk: ClassificationRows['risk']
        peripherals: ClassificationRows['peripheralsByClass']
      }>(
        `SELECT (SELECT count(*) FROM agents) AS total,
           (SELECT coalesce(json_agg(json_build_object('list', list, 'value', value, 'n', n)), '[]') FROM (
              SELECT x.list, x.value, count(*) AS n FROM agents, LATERAL (VALUES ${lists.join(', ')}) x(list, value) GROUP BY 1, 2) c) AS values,
           (SELECT coalesce(json_agg(json_build_object('severity', severity, 'n', n)), '[]') FROM (SELECT severity, count(*) AS n FROM agents GROUP BY 1) s) AS severities,
           (SELECT json_build_object(${risks.join(', ')}) FROM agents) AS risk,
           (SELECT coalesce(json_agg(json_build_object('dev_icon', dev_icon, 'present', present, 'approved', approved) ORDER BY dev_icon), '[]') FROM (
              SELECT dev_icon, count(*) AS present, sum(approved) AS approved FROM peripherals WHERE present = 1 GROUP BY dev_icon) p) AS peripherals`,
      ))!
      const counts = Object.fromEntries(Object.keys(classColumns).map((k) => [k, new Map<string | null, number>()])) as ClassificationRows['counts']
      for (const { list, value, n } of r.values) counts[list].set(value, n)
      return {
        totalAgents: r.total,
        counts,
        severities: new Map(r.severities.map((s) => [s.severity, s.n])),
        risk: r.risk,
        peripheralsByClass: r.peripherals,
      }
    },
  }
  return repo satisfies InsightStore
}
export type PgInsightsRepo = ReturnType<typeof pgInsightsRepo>
