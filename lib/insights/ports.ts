// The storage the insight service needs; db/insights.ts implements it on SQLite.

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

/** The lists agents are classified into, each by the values of one of their fields. */
export type ClassificationList = 'byConnectionStatus' | 'byOperationalStatus' | 'byDisplayStatus' | 'byLicenseStatus' | 'byRunningMode' | 'byOsVersion' | 'byServiceVersion'
/** The risks agents are counted by. */
export type RiskCount = 'withUnapprovedPeripherals' | 'withVulnerablePeripherals' | 'withKnownAttackTools' | 'withVulnerablePeripheralOrWLV' | 'inAction'

export interface ClassificationRows {
  totalAgents: number
  /** Per list, each value (null included) with its count. */
  counts: Record<ClassificationList, Map<string | null, number>>
  severities: Map<number, number>
  risk: Record<RiskCount, number>
  peripheralsByClass: { dev_icon: number; present: number; approved: number }[]
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

export interface HostRow {
  uuid: string
  host_identifier: string
  local_ip_address: string | null
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

/**
 * The aggregates behind the insights, each one call answering rows, and the kept answers
 * (`cacheGet`, `cachePut`, `invalidate`). The long ones (`policyTest`, `whitelistViolations`)
 * pace themselves inside the implementation, a slice of rows at a time between turns of the
 * event loop, rather than by a call per row; they run outside any unit of work.
 */
export interface InsightStore {
  /** A kept insight: when it was computed and its answer as JSON. */
  cacheGet(name: string): Promise<{ computed_ms: number; result: string } | undefined>
  /** Keeps an insight's answer (JSON) computed at `computedMs`. */
  cachePut(name: string, computedMs: number, json: string): Promise<void>
  /** Drops a cached insight (and its variants `name:...`), after a change that makes it stale. */
  invalidate(name: string): Promise<void>
  /** Up to 10,000 connected agents, the latest checked in first. */
  loggedAgents(): Promise<LoggedAgentRow[]>
  connectedCount(): Promise<number>
  /**
   * Up to 10,000 agents with their findings: the findings are read 500 agents at a time,
   * letting other requests run in between (an agent's findings come from one query, so
   * each agent is consistent in itself). Paced here, row by row, rather than by a port
   * call per agent.
   */
  policyTest(): Promise<PolicyTestRows>
  /** Errors a day and the agents with the most (up to 1,000) between two times, in one snapshot. */
  errorTotals(from: number, to: number): Promise<ErrorTotalsRows>
  uncommonPeripherals(maxHosts: number): Promise<UncommonRows>
  /** The catalogue's models that peripherals report, with up to 100 of their hosts each (the first 1,000 models). */
  vulnerablePeripherals(): Promise<VulnerableRows>
  /**
   * The whitelist violations between two times, by model: their count, first and last
   * time, hosts (up to 20 listed, by asset key). Read a slice at a time, awaiting `pause`
   * once slices have run for `turnMs`; the records of the moment it starts (the index up
   * to its mark then, and the events above it up to the newest then).
   */
  whitelistViolations(from: number, to: number, pause?: () => Promise<unknown>, turnMs?: number): Promise<ViolationRows>
  /** The agents counted by each classifying column's values, by severity and by risk, and the present peripherals by class. */
  classification(): Promise<ClassificationRows>
}
