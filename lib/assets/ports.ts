// The storage asset discovery needs: the assets (db/assets.ts) and the insight cache where
// the rare models and the counts are kept (db/insights.ts). Handlers that name a query's
// parts take their types from here.

export interface AssetStore {
  /** How many assets there are. */
  total(): Promise<number>
  /**
   * A page of the assets a query matches, with how many match: their views
   * (lib/assets/views.ts, `maxHosts` as there) as a JSON array, made where the page is read
   * (a reader thread), so that a page of 10,000 costs the event loop one copy of its text.
   */
  pageJson(q: AssetQuery, sort: AssetSort, limit: number, offset: number, maxHosts: number): Promise<{ filtered: number; json: string }>
  /**
   * The counts of every asset by type, risk level, online and new, read a range of rows at
   * a time: a generator that yields between ranges so that the caller lets other work run
   * in between (a walk over a million rows), not a promise per row. SQLite's is synchronous;
   * a database server's answers each range through a Promise.
   */
  summary(rare: string[], since: number): Generator<void, AssetCounts[]> | AsyncGenerator<void, AssetCounts[]>
  /**
   * Switches the agents report, and those first reported since `since`: a walk over every
   * agent, a generator as `summary` is.
   */
  switches(since: number): Generator<void, SwitchCounts> | AsyncGenerator<void, SwitchCounts>
}

/** The insight cache, and the rare peripheral models computed in slices. */
export type { UncommonRows } from '../insights/ports.js'
import type { UncommonRows } from '../insights/ports.js'

export interface SwitchCounts {
  n: number
  fresh: number
}

export interface AssetCounts {
  type: number
  risk_level: number
  is_online: number
  is_new: number
  n: number
}

/** Where the data stands, for the paging state kept (see `dataAt`). */
export interface DataAt {
  writes: number
  generation: string
}

// An asset's fields as SQL over each of its source tables (agents, agentless connections,
// peripherals), the codes and risks they are computed with, and the full row of a source.
/** Asset type codes (`type`). */
export const ASSET_TYPES = { Peripheral: 1, Workstation: 2, Server: 3, VirtualDesktop: 8, AgentlessHost: 10 } as const

/** Icon codes of hosts (`icon`); a peripheral's icon is its `devIcon` (0-14). */
export const HOST_ICONS = { Workstation: 100, Server: 101, VirtualDesktop: 102, AgentlessHost: 103 } as const

/** Hierarchy codes: a host, a hub between a host and its devices, a device plugged in. */
export const HIERARCHY = { Host: 0, Hub: 1, Device: 2 } as const

/** The risk (0-10) each indicator carries; an asset's risk level is the highest of these and its severity's. */
export const INDICATOR_RISK = {
  activeThreat: 9,
  inactiveThreat: 6,
  cve: 7,
  rare: 5,
  unapproved: 4,
  unsupervised: 4,
} as const

export type Source = 'agent' | 'host' | 'peripheral'

export type AssetField =
  | 'key'
  | 'name'
  | 'mac'
  | 'ipAddress'
  | 'model'
  | 'vendor'
  | 'statusDescription'
  | 'switchIp'
  | 'switchName'
  | 'portName'
  | 'type'
  | 'icon'
  | 'hierarchy'
  | 'riskLevel'
  | 'isOnline'
  | 'isRiskAccepted'
  | 'firstSeen'
  | 'lastSeen'

/** A condition on one field, as SQL operators: `like` patterns are escaped with `\`, dates are epoch ms. */
export type Condition =
  | { field: AssetField; op: 'in' | 'notIn'; values: (string | number)[] }
  | { field: AssetField; op: 'like' | 'notLike'; values: string[] }
  | { field: AssetField; op: 'gt' | 'ge' | 'lt' | 'le'; values: [number] }
  | { field: AssetField; op: 'range' | 'notRange'; values: [from: number, to: number] }

/** What a query asks: `filters` and `system` each an OR of AND-groups (empty: everything), both must hold. */
export interface AssetQuery {
  filters: Condition[][]
  system: Condition[][]
  /** A LIKE pattern matched against the asset's names, addresses and model. */
  search?: string
  /** `VID:PID` of the models that count as rare. */
  rare: string[]
}

export interface AssetSort {
  field: AssetField
  direction: 'asc' | 'desc'
}

/** Fields compared as text (case-insensitively); the others are numbers (booleans 1/0). */
export const TEXT_FIELDS: ReadonlySet<AssetField> = new Set(['key', 'name', 'mac', 'ipAddress', 'model', 'vendor', 'statusDescription', 'switchIp', 'switchName', 'portName'])

export interface AssetRow {
  source: Source
  rowid: number
  key: string
  name: string
  ip_address: string | null
  model: string | null
  vendor: string | null
  status: string
  type: number
  icon: number
  hierarchy: number
  risk_level: number
  is_online: number
  is_risk_accepted: number
  first_seen: number
  last_seen: number | null
  switch_ip: string | null
  switch_name: string | null
  port_id: string | null
  port_name: string | null
  host_identifier: string | null
  agent_uuid: string | null
  /** Agents: the adapters (JSON AgentNic[]); others null. */
  nics_json: string | null
  has_attack_tool: number
  attack_tool_present: number
  has_vulnerable: number
  vulnerability: string | null
  is_rare: number
  has_unapproved: number
  is_unsupervised: number
  vid: string | null
  pid: string | null
  host_status: string | null
}

export interface InsightCache {
  /** The kept result of an insight, however old, with the time it was computed. */
  peek(name: string): Promise<{ computedMs: number; result: object } | undefined>
  /** Keeps a result computed at `computedMs`; answers it with its computedTime. */
  store(name: string, computedMs: number, result: object): Promise<object>
  /** The peripheral models plugged into at most `maxHosts` hosts. */
  uncommonPeripheralsSliced(maxHosts: number): Promise<UncommonRows>
}
