// The filter shapes the repositories take, as lib/agent-filter.ts and lib/events/filter.ts
// read them from requests (they re-export them), and the small rules about them.

export interface DateRange {
  from: number
  to: number | null
}

export const connectionStatuses = ['Connected', 'Disconnected'] as const
export const operationalStatuses = ['Armed', 'Free'] as const
export const workStatuses = ['Arming', 'Freeing', 'Updating', 'Pending'] as const
export const licenseStatuses = ['Activated', 'Pending', 'Expired', 'Invalid'] as const
export const runningModes = ['Standard', 'VDI', 'Server'] as const

export interface AgentFilter {
  /** Case-insensitive "contains". */
  uuid?: string
  hostIdentifier?: string
  ipAddress?: string
  version?: string
  osVersion?: string
  hashtags?: string
  globalSearch?: string
  /** Any of (each list); the lists are AND-ed. */
  connectionStatus?: (typeof connectionStatuses)[number][]
  operationalStatus?: (typeof operationalStatuses)[number][]
  displayStatus?: (typeof workStatuses)[number][]
  licenseStatus?: (typeof licenseStatuses)[number][]
  runningMode?: (typeof runningModes)[number][]
  containsVulnerablePeripheralOrWLV?: boolean
  hasUnapprovedPeripherals?: boolean
  hasVulnerablePeripherals?: boolean
  hasKnownAttackTools?: boolean
  lastConfiguration?: DateRange
  lastUpdated?: DateRange
  expirationDate?: DateRange
  severity?: number
}

export interface PeripheralFilter {
  /** Case-insensitive "contains" on the agent's fields. */
  hostIdentifier?: string
  ipAddress?: string
  hostUuid?: string
  /** Case-insensitive "contains" on the peripheral's fields. */
  vendor?: string
  productInfo?: string
  serialNumber?: string
  /** Exact, upper-case hex. */
  vid?: string
  pid?: string
  isUnapproved?: boolean
  isVulnerable?: boolean
  isAttackTool?: boolean
  present?: boolean
  globalSearch?: string
}

/** The one field a filter sets, when it sets exactly one (lists count some of these from kept totals). */
export function soleField(f: AgentFilter | PeripheralFilter): [string, unknown] | null {
  const given = Object.entries(f).filter(([, v]) => v !== undefined)
  return given.length === 1 ? given[0] : null
}

export const eventCategories = ['USB', 'Network', 'System', 'Host', 'General'] as const
export const auditCategories = ['Authentication', 'Users', 'Agents', 'Peripherals', 'Agentless', 'Reports', 'Notifications', 'AlarmDestinations', 'System'] as const

export const MAX_ID = Number.MAX_SAFE_INTEGER

/** Bounds common to both lists: ids and creation times, inclusive; `empty` when they exclude everything. */
export interface Bounds {
  idFrom: number
  idTo: number
  /** Epoch ms, inclusive; null: unbounded. */
  timeFrom: number | null
  timeTo: number | null
  severity?: number
  /** Severity or worse: numbers up to this one. */
  minSeverity?: number
  empty: boolean
}

export interface EventFilter extends Bounds {
  categories?: (typeof eventCategories)[number][]
  icons?: number[]
  /** Case-insensitive "contains". */
  source?: string
  description?: string
  details?: string
  assetKey?: string
  assetName?: string
  peripheralAssetId?: string
  globalSearch?: string
}

export interface AuditFilter extends Bounds {
  categories?: (typeof auditCategories)[number][]
  /** Case-insensitive "contains". */
  user?: string
  description?: string
  details?: string
  /** Key, name or address of the asset contains. */
  asset?: string
  assetKey?: string
  assetName?: string
  assetParentId?: string
  assetIp?: string
  /** Exact. */
  assetType?: string
  assetSubType?: string
  assetDetail?: string
  assetIcon?: number
  globalSearch?: string
}
