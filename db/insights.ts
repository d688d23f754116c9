// Risk insights: aggregates over agents, peripherals, commands and events. Each one is a
// few GROUP BY queries over indexed columns, so that it stays fast at 100,000 agents and
// a million peripherals; per-item detail (hosts, findings) is fetched only for the rows
// that are answered. Answers rows: lib/insights/views.ts gives them the contract's shape.
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { DB } from './index.js'

const DAY_MS = 86_400_000
/** Models (and agents with errors) answered at most. */
export const MAX_MODELS = 1000
const UNCOMMON_HOSTS = 20
const VULNERABLE_HOSTS = 100
const VIOLATION_HOSTS = 20
/** Ids of events above the index's mark read at a time (a level 0 block of the index). */
const RANGE_SLICE = 4096
const MAX_AGENTS = 10_000
const MAX_FINDINGS = 512
const POLICY_STEP = 500

// Hubs are infrastructure, not devices someone plugged in: never "uncommon".
const HUB = 4

export interface HostRow {
  uuid: string
  host_identifier: string
  local_ip_address: string | null
}
export type LoggedAgentRow = HostRow & { operational_status: string; display_status: string; checked_in_ms: number; logged_on_users: string }
export type PolicyAgentRow = HostRow & { id: number; operational_status: 'Armed' | 'Free'; connection_status: 'Connected' | 'Disconnected' }
export interface FindingRow {
  device_id: string
  vid: string
  pid: string
  gui_vid: string | null
  gui_pid: string | null
  dev_icon: number
  approved: number
  is_attack_tool: number
  is_vulnerable: number
  vulnerability: string | null
}
export interface PolicyTestRows {
  counts: { would_block: number; attack: number; vulnerable: number; agents: number }
  /** Agents counted in all. */
  total: number
  /** The agents listed that still have findings, in host order. */
  agents: { agent: PolicyAgentRow; findings: FindingRow[] }[]
}
export type ErrorAgentRow = HostRow & { id: number; total: number; reported: number; last: number; agents: number; text: string }
export interface ErrorTotalsRows {
  byDay: { day: number; reported: number; total: number }[]
  agents: ErrorAgentRow[]
}
export interface UncommonModel {
  vid: string
  pid: string
  gui_vid: string | null
  gui_pid: string | null
  dev_icon: number
  hosts: number
  peripherals: number
  present: number
  first_seen: number
  last_seen: number
}
export interface UncommonRows {
  maxHosts: number
  agentsConsidered: number
  /** Rare models in all; `models` holds the first MAX_MODELS. */
  total: number
  models: { model: UncommonModel; hosts: HostRow[] }[]
}
export interface VulnerableModel {
  id: string
  kind: 'KnownAttackTool' | 'VulnerableDevice'
  vid: string
  pid: string
  name: string
  vulnerability: string | null
  severity: number
  gui_vid: string | null
  gui_pid: string | null
  dev_icon: number
  hosts: number
  present: number
  approved: number
}
export interface VulnerableRows {
  total: number
  models: { model: VulnerableModel; hosts: HostRow[] }[]
}
export interface ViolationModel {
  vid: string
  pid: string
  /** What a peripheral of the model says of it, when one is known. */
  known: { gui_vid: string | null; gui_pid: string | null; dev_icon: number } | undefined
  icon: number
  n: number
  first: number
  last: number
  hostsCount: number
  /** Up to 20, by asset key; a host whose agent is gone is named as its events named it. */
  hosts: HostRow[]
}
export interface ViolationRows {
  total: number
  models: ViolationModel[]
}
export const classColumns = {
  byConnectionStatus: 'connection_status',
  byOperationalStatus: 'operational_status',
  byDisplayStatus: 'display_status',
  byLicenseStatus: 'license_status',
  byRunningMode: 'running_mode',
  byOsVersion: 'os_version',
  byServiceVersion: 'service_version',
} as const
export const riskColumns = {
  withUnapprovedPeripherals: 'has_unapproved',
  withVulnerablePeripherals: 'has_vulnerable',
  withKnownAttackTools: 'has_attack_tool',
  withVulnerablePeripheralOrWLV: 'vulnerable_or_wlv',
  inAction: 'in_action',
} as const
export interface ClassificationRows {
  totalAgents: number
  /** Per list, each value (null included) with its count. */
  counts: Record<keyof typeof classColumns, Map<string | null, number>>
  severities: Map<number, number>
  risk: Record<keyof typeof riskColumns, number>
  peripheralsByClass: { dev_icon: number; present: number; approved: number }[]
}

/**
 * `whitelistViolationCodes`: the event codes of whitelist violations (plugged in while
 * Armed, or present when the agent was armed), from the event-code catalogue.
 */
export function insightsRepo(db: DB, whitelistViolationCodes: readonly string[]) {
  for (const c of whitelistViolationCodes) if (!/^0x[0-9A-F]{6}$/.test(c)) throw new Error(`not an event code: ${c}`)
  const WHITELIST_VIOLATIONS = whitelistViolationCodes.map((c) => `'${c}'`).join(', ')
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

  // ---- uncommon peripherals ----
  // Rare models are found model by model (each a seek into the covering index of present
  // peripherals, migration 004) rather than by one GROUP BY over every present peripheral:
  // a model's hosts are counted only up to maxHosts + 1, so a model on every host costs no
  // more than a rare one, and the walk can stop between models to let other work run.
  const nextModel = db.prepare<{ vid: string; pid: string }, { vid: string; pid: string }>('SELECT vid, pid FROM peripherals WHERE present = 1 AND (vid, pid) > (@vid, @pid) ORDER BY vid, pid LIMIT 1')
  const modelHosts = db
    .prepare<{ vid: string; pid: string; limit: number }, number>('SELECT count(*) FROM (SELECT DISTINCT agent_id FROM peripherals WHERE present = 1 AND vid = @vid AND pid = @pid LIMIT @limit)')
    .pluck()
  // Every peripheral of the model on the hosts where it is present, among them those of
  // hubs, which are then left out.
  const modelDetail = db.prepare<
    { vid: string; pid: string },
    {
      gui_vid: string | null
      gui_pid: string | null
      dev_icon: number
      hub: number
      peripherals: number
      present: number
      first_seen: number
      last_seen: number
    }
  >(
    `SELECT max(p.gui_vid) AS gui_vid, max(p.gui_pid) AS gui_pid, max(p.dev_icon) AS dev_icon, max(p.dev_icon = ${HUB}) AS hub,
       count(*) AS peripherals, sum(p.present) AS present, min(p.first_seen_ms) AS first_seen, max(p.last_seen_ms) AS last_seen
     FROM peripherals p WHERE p.vid = @vid AND p.pid = @pid
       AND p.agent_id IN (SELECT agent_id FROM peripherals q WHERE q.vid = @vid AND q.pid = @pid AND q.present = 1)`,
  )
  /**
   * The rare models (on at most `maxHosts` hosts, hubs left out), fewest hosts first, then
   * the latest seen. Yields after each model, so that a caller can spread the walk over
   * several turns of the event loop.
   */
  function* uncommonModels(maxHosts: number): Generator<void, UncommonModel[]> {
    const found: UncommonModel[] = []
    // ('', '') sorts first and is no model counted (nor is any of vid '').
    let at: { vid: string; pid: string } | undefined = { vid: '', pid: '' }
    for (;;) {
      at = nextModel.get(at)
      if (!at) break
      if (at.vid !== '' && at.vid !== '0000') {
        const hosts = modelHosts.get({ ...at, limit: maxHosts + 1 })!
        if (hosts <= maxHosts) {
          const d = modelDetail.get(at)!
          if (!d.hub)
            found.push({
              vid: at.vid,
              pid: at.pid,
              gui_vid: d.gui_vid,
              gui_pid: d.gui_pid,
              dev_icon: d.dev_icon,
              hosts,
              peripherals: d.peripherals,
              present: d.present,
              first_seen: d.first_seen,
              last_seen: d.last_seen,
            })
        }
      }
      yield
    }
    const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0)
    return found.sort((x, y) => x.hosts - y.hosts || y.last_seen - x.last_seen || cmp(x.vid, y.vid) || cmp(x.pid, y.pid))
  }
  const presentHosts = db.prepare<[string, string, number], HostRow>(
    `SELECT a.uuid, a.host_identifier, a.local_ip_address FROM agents a
     WHERE a.id IN (SELECT agent_id FROM peripherals WHERE vid = ? AND pid = ? AND present = 1)
     ORDER BY a.host_identifier COLLATE NOCASE, a.uuid LIMIT ?`,
  )
  function* uncommonSteps(maxHosts: number): Generator<void, UncommonRows> {
    const agentsConsidered = agentsTotal.get()!.n
    // In a fleet this small every model is on few hosts: nothing is uncommon.
    const models = agentsConsidered > maxHosts ? yield* uncommonModels(maxHosts) : []
    const listed: UncommonRows['models'] = []
    for (const m of models.slice(0, MAX_MODELS)) {
      listed.push({ model: m, hosts: presentHosts.all(m.vid, m.pid, UNCOMMON_HOSTS) })
      yield
    }
    return { maxHosts, agentsConsidered, total: models.length, models: listed }
  }

  // ---- vulnerable peripherals ----
  const vulnerableModels = db.prepare<[], VulnerableModel>(
    `SELECT c.id, c.kind, c.vid, c.pid, c.name, c.vulnerability, c.severity,
       max(p.gui_vid) AS gui_vid, max(p.gui_pid) AS gui_pid, max(p.dev_icon) AS dev_icon,
       count(DISTINCT p.agent_id) AS hosts, sum(p.present) AS present, sum(p.approved) AS approved
     FROM catalogue c JOIN peripherals p ON p.vid = c.vid AND p.pid = c.pid
     GROUP BY c.id
     ORDER BY c.severity, hosts DESC, c.kind, c.vid, c.pid`,
  )
  const reportingHosts = db.prepare<[string, string, number], HostRow>(
    `SELECT a.uuid, a.host_identifier, a.local_ip_address FROM agents a
     WHERE a.id IN (SELECT agent_id FROM peripherals WHERE vid = ? AND pid = ?)
     ORDER BY a.host_identifier COLLATE NOCASE, a.uuid LIMIT ?`,
  )

  // ---- whitelist violations ----
  // One row per model and host, summed over slices of the events, with other requests
  // answered between slices (at 5 million events the window held 450,000 violations: one
  // statement over all of them held the server for 4.5 s). The indexed violations are found
  // through the event index (migration 012): the level 0 blocks (2^12 ids) whose cells of
  // the violation kinds meet the window, their events from event_kind_ids; the events above the
  // indexer's mark (all of them while it starts over) are read a range of ids at a time.
  type ViolationRow = { vid: string; pid: string; asset_key: string | null; asset_name: string | null; icon: number; n: number; first: number; last: number }
  const violationKinds = `SELECT id FROM event_kinds WHERE event_code IN (${WHITELIST_VIOLATIONS})`
  const violationGroups = (ids: string) =>
    `SELECT upper(peripheral_vid) AS vid, upper(peripheral_pid) AS pid, asset_key, max(asset_name) AS asset_name,
       max(peripheral_icon) AS icon, count(*) AS n, min(created_ms) AS first, max(created_ms) AS last
     FROM events ${ids}
       AND event_code IN (${WHITELIST_VIOLATIONS}) AND created_ms BETWEEN @from AND @to
       AND peripheral_vid IS NOT NULL AND peripheral_pid IS NOT NULL
     GROUP BY 1, 2, 3`
  const violationMark = db.prepare<[], number>("SELECT CASE WHEN stale THEN 0 ELSE indexed END FROM record_index_state WHERE name = 'events'").pluck()
  const eventsTop = db.prepare<[], number | null>('SELECT max(id) FROM events').pluck()
  const violationBlocks = db
    .prepare<{ from: number; to: number }, number>(
      `SELECT DISTINCT block FROM event_rollup
     WHERE level = 0 AND kind IN (${violationKinds}) AND max_ms >= @from AND min_ms <= @to ORDER BY block`,
    )
    .pluck()
  const violationsInBlock = db.prepare<{ from: number; to: number; block: number; mark: number }, ViolationRow>(
    violationGroups(`WHERE id IN (SELECT id FROM event_kind_ids WHERE blk = @block >> 4 AND kind IN (${violationKinds})
       AND id BETWEEN @block << 12 AND min(@mark, (@block << 12) + 4095))`),
  )
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const violationsInRange = db.prepare<{ from: number; to: number; lo: number; hi: number }, ViolationRow>(violationGroups('NOT INDEXED WHERE id > @lo AND id <= @hi'))
  const agentByUuid = db.prepare<[string], HostRow>('SELECT uuid, host_identifier, local_ip_address FROM agents WHERE uuid = ?')
  const modelLook = db.prepare<[string, string], { gui_vid: string | null; gui_pid: string | null; dev_icon: number }>(
    'SELECT gui_vid, gui_pid, dev_icon FROM peripherals WHERE vid = ? AND pid = ? LIMIT 1',
  )

  // ---- classification ----
  // Every combination of the counted columns with its count, in one scan of the covering
  // index agents_classes (migrations 004, 036); the combinations are few, and summed up below.
  // The connection and display statuses are not in it (a mass disconnect would move every
  // entry): the connected agents are counted by display status from agents_connected, and
  // the others are Disconnected (db/agent-state.ts decides that before anything else).
  const CLASS_KEY = `in_action, operational_status, license_status, running_mode,
    severity, has_unapproved, has_vulnerable, has_attack_tool, vulnerable_or_wlv, os_version, service_version`
  const keyColumns = Object.entries(classColumns).filter(([list]) => list !== 'byConnectionStatus' && list !== 'byDisplayStatus') as [keyof typeof classColumns, keyof ClassRow][]
  type ClassRow = Record<(typeof classColumns)[keyof typeof classColumns], string | null> & Record<(typeof riskColumns)[keyof typeof riskColumns], number> & { severity: number; n: number }
  const classes = db.prepare<[], ClassRow>(`SELECT ${CLASS_KEY}, count(*) AS n FROM agents GROUP BY ${CLASS_KEY}`)
  const connectedByDisplay = db.prepare<[], { display_status: string; n: number }>("SELECT display_status, count(*) AS n FROM agents WHERE connection_status = 'Connected' GROUP BY display_status")
  const peripheralsByClass = db.prepare<[], { dev_icon: number; present: number; approved: number }>(
    'SELECT dev_icon, count(*) AS present, sum(approved) AS approved FROM peripherals WHERE present = 1 GROUP BY dev_icon ORDER BY dev_icon',
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

    uncommonPeripherals(maxHosts: number): UncommonRows {
      const steps = uncommonSteps(maxHosts)
      for (;;) {
        const r = steps.next()
        if (r.done) return r.value
      }
    },

    /**
     * The same, computed in slices of about `sliceMs` of work, each in its own turn of the
     * event loop, so that no request waits behind it for longer than that.
     */
    async uncommonPeripheralsSliced(maxHosts: number, sliceMs = 20): Promise<UncommonRows> {
      const steps = uncommonSteps(maxHosts)
      let since = performance.now()
      for (;;) {
        const r = steps.next()
        if (r.done) return r.value
        if (performance.now() - since >= sliceMs) {
          await nextTurn()
          if (!db.open) throw new Error('The database was closed while the rare models were being computed.')
          since = performance.now()
        }
      }
    },

    /** The catalogue's models that peripherals report, with up to 100 of their hosts each (the first 1,000 models). */
    vulnerablePeripherals(): VulnerableRows {
      const models = vulnerableModels.all()
      return { total: models.length, models: models.slice(0, MAX_MODELS).map((model) => ({ model, hosts: reportingHosts.all(model.vid, model.pid, VULNERABLE_HOSTS) })) }
    },

    /**
     * The whitelist violations between two times, by model: their count, first and last
     * time, hosts (up to 20 listed, by asset key). Read a slice at a time, awaiting `pause`
     * once slices have run for `turnMs`; the records of the moment it starts (the index up
     * to its mark then, and the events above it up to the newest then).
     */
    async whitelistViolations(from: number, to: number, pause: () => Promise<unknown> = nextTurn, turnMs = 20): Promise<ViolationRows> {
      type Model = { vid: string; pid: string; icon: number; n: number; first: number; last: number; hosts: Map<string, string | null> }
      const models = new Map<string, Model>()
      const add = (rows: ViolationRow[]) => {
        for (const r of rows) {
          const key = `${r.vid}:${r.pid}`
          let m = models.get(key)
          if (!m) models.set(key, (m = { vid: r.vid, pid: r.pid, icon: r.icon, n: 0, first: r.first, last: r.last, hosts: new Map() }))
          m.n += r.n
          m.first = Math.min(m.first, r.first)
          m.last = Math.max(m.last, r.last)
          m.icon = Math.max(m.icon, r.icon)
          // A host is its asset key (events without one count as one host); its name is the greatest its events gave.
          const hostKey = r.asset_key ?? ''
          const name = m.hosts.get(hostKey)
          m.hosts.set(hostKey, name == null || (r.asset_name !== null && r.asset_name > name) ? r.asset_name : name)
        }
      }
      const { mark, top, blocks } = db.transaction(() => ({ mark: violationMark.get() ?? 0, top: eventsTop.get() ?? 0, blocks: violationBlocks.all({ from, to }) }))()
      // Slices for about 20 ms, then other work: a pause after each slice (a few ms) let
      // the other work of a busy server stretch the whole to minutes.
      let turn = performance.now()
      const next = async () => {
        if (performance.now() - turn < turnMs) return
        await pause()
        turn = performance.now()
      }
      for (const block of blocks) {
        add(violationsInBlock.all({ from, to, block, mark }))
        await next()
      }
      for (let lo = mark; lo < top; lo += RANGE_SLICE) {
        add(violationsInRange.all({ from, to, lo, hi: Math.min(top, lo + RANGE_SLICE) }))
        await next()
      }
      const sorted = [...models.values()].sort((a, b) => b.n - a.n || b.last - a.last || a.vid.localeCompare(b.vid) || a.pid.localeCompare(b.pid))
      return {
        total: sorted.length,
        models: sorted.slice(0, MAX_MODELS).map((m) => ({
          vid: m.vid,
          pid: m.pid,
          known: modelLook.get(m.vid, m.pid),
          icon: m.icon,
          n: m.n,
          first: m.first,
          last: m.last,
          hostsCount: m.hosts.size,
          // Events outlive deleted agents: such a host is named as the event named it.
          hosts: [...m.hosts.keys()]
            .filter((k) => k !== '')
            .sort()
            .slice(0, VIOLATION_HOSTS)
            .map((uuid) => agentByUuid.get(uuid) ?? { uuid, host_identifier: m.hosts.get(uuid) ?? uuid, local_ip_address: null }),
        })),
      }
    },

    /** The agents counted by each classifying column's values, by severity and by risk, and the present peripherals by class. */
    classification(): ClassificationRows {
      return db.transaction(() => {
        const counts = Object.fromEntries(Object.keys(classColumns).map((k) => [k, new Map<string | null, number>()])) as ClassificationRows['counts']
        const severities = new Map<number, number>()
        const risk = Object.fromEntries(Object.keys(riskColumns).map((k) => [k, 0])) as ClassificationRows['risk']
        let totalAgents = 0
        for (const row of classes.iterate()) {
          totalAgents += row.n
          for (const [list, column] of keyColumns) {
            const value = row[column] as string | null
            counts[list].set(value, (counts[list].get(value) ?? 0) + row.n)
          }
          for (const [name, column] of Object.entries(riskColumns) as [keyof typeof riskColumns, keyof ClassRow][]) if (row[column]) risk[name] += row.n
          severities.set(row.severity, (severities.get(row.severity) ?? 0) + row.n)
        }
        let connected = 0
        for (const { display_status, n } of connectedByDisplay.iterate()) {
          connected += n
          counts.byDisplayStatus.set(display_status, (counts.byDisplayStatus.get(display_status) ?? 0) + n)
        }
        if (connected) counts.byConnectionStatus.set('Connected', connected)
        if (totalAgents > connected) {
          counts.byConnectionStatus.set('Disconnected', totalAgents - connected)
          counts.byDisplayStatus.set('Disconnected', (counts.byDisplayStatus.get('Disconnected') ?? 0) + totalAgents - connected)
        }
        return { totalAgents, counts, severities, risk, peripheralsByClass: peripheralsByClass.all() }
      })()
    },
  }
}
export type InsightsRepo = ReturnType<typeof insightsRepo>
