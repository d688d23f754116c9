// The storage the agent and peripheral services need; db/agents.ts, db/peripherals.ts,
// db/commands.ts, db/agent-state.ts, db/gateway.ts and db/exports.ts implement it on SQLite.
//
// Streamed reads (very large list pages, exports) answer an async iterable once: the rows
// are read synchronously inside db/, a chunk or page at a time with other requests served
// between them, so no Promise is made per row.
import type { DateRange, Sort } from '../ports.js'

export type { Sort } from '../ports.js'

/** A re-enrollment awaiting an Administrator's approval. */
export interface HeldReEnrollment {
  agent_id: number
  /** A random UUID, new with each enrollment held (a replacement gets its own). */
  id: string
  credential_hash: string
  host_identifier: string
  source_ip: string | null
  requested_ms: number
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

export interface PeripheralRow {
  id: number
  agent_id: number
  agent_uuid: string
  device_id: string
  vid: string
  pid: string
  serial_number: string | null
  description: string | null
  status: string | null
  manufacturer: string | null
  caption: string | null
  gui_vid: string | null
  gui_pid: string | null
  gui_serial: string | null
  dev_icon: number
  class_code: string | null
  subclass_code: string | null
  protocol_code: string | null
  hierarchy: string | null
  parent_device_id: string | null
  is_disabled: number
  present: number
  approved: number
  admin_status: 'NotReviewed' | 'Approved' | 'Disapproved'
  is_unapproved: number
  is_vulnerable: number
  is_attack_tool: number
  vulnerability: string | null
  severity: number
  in_action: number
  vendor_text_id: number | null
  product_text_id: number | null
  first_seen_ms: number
  last_seen_ms: number
}

/** A peripheral row with the fields of its agent that the view shows. */
export interface PeripheralListRow extends PeripheralRow {
  host_identifier: string
  host_ip: string | null
  agent_hashtags: string | null
}

// As the CHECK constraints of agent_commands (migration 003) allow.
export type CommandType = 'SetMode' | 'UpdatePolicy' | 'UpdateAgent' | 'FetchDebugLogs'

export type CommandStatus = 'Pending' | 'Delivered' | 'Succeeded' | 'Failed' | 'Cancelled'

/** The parameters as stored (JSON of the contract's AgentCommandParameters). */
export type CommandParameters = Record<string, unknown>

export interface CommandRow {
  id: number
  agent_id: number
  type: CommandType
  parameters: string
  status: CommandStatus
  created_ms: number
  created_by: string
  delivered_ms: number | null
  completed_ms: number | null
  result_message: string | null
  has_output: number
}

// As the CHECK constraints of the agents table allow.
export type AgentDisplayStatus = 'Armed' | 'Free' | 'Arming' | 'Freeing' | 'Updating' | 'Pending' | 'Disconnected'

export type AgentLicenseStatus = 'Activated' | 'Pending' | 'Expired' | 'Invalid'

export type AgentRunningMode = 'Standard' | 'VDI' | 'Server' | null

export interface AgentRow {
  id: number
  uuid: string
  machine_id: string
  credential_hash: string | null
  enrolled_ms: number
  host_identifier: string
  local_ip_address: string | null
  os_version: string | null
  manufacturer: string | null
  pc_model: string | null
  nics_json: string
  nics_text: string | null
  ip_addresses: string | null
  operational_status: 'Armed' | 'Free'
  is_system_locked: number
  connection_status: 'Connected' | 'Disconnected'
  display_status: AgentDisplayStatus
  approved_and_present: number
  approved_and_disconnected: number
  not_approved: number
  latest_event_text: string | null
  latest_minus1_event_text: string | null
  latest_minus2_event_text: string | null
  service_version: string | null
  kb_driver_version: string | null
  last_updated_ms: number | null
  last_configured_ms: number | null
  license_status: AgentLicenseStatus
  expiration_ms: number | null
  license_account_id: string | null
  license_account_name: string | null
  severity: number
  has_unapproved: number
  has_vulnerable: number
  has_attack_tool: number
  vulnerable_or_wlv: number
  in_action: number
  model_tooltip: string | null
  running_mode: AgentRunningMode
  switch_ip: string | null
  switch_name: string | null
  port_id: string | null
  port_name: string | null
  ethernets_count: number
  hashtags: string | null
  logged_on_users: string
  check_in_interval_s: number
  state_digest: string | null
  /** Changes with every write of the columns a list shows, the check-in time aside (migrations 020, 021). */
  rev: number
}

/** The columns an agent of a list needs (those lib/agents/views.ts agentView reads, and the id). */
export const VIEW_COLUMNS = [
  'id',
  'uuid',
  'host_identifier',
  'local_ip_address',
  'os_version',
  'pc_model',
  'nics_text',
  'operational_status',
  'connection_status',
  'display_status',
  'approved_and_present',
  'approved_and_disconnected',
  'not_approved',
  'latest_event_text',
  'latest_minus1_event_text',
  'latest_minus2_event_text',
  'service_version',
  'kb_driver_version',
  'last_updated_ms',
  'last_configured_ms',
  'license_status',
  'expiration_ms',
  'license_account_id',
  'license_account_name',
  'severity',
  'has_unapproved',
  'has_vulnerable',
  'has_attack_tool',
  'vulnerable_or_wlv',
  'in_action',
  'model_tooltip',
  'running_mode',
  'switch_ip',
  'switch_name',
  'port_id',
  'port_name',
  'ethernets_count',
  'hashtags',
] as const satisfies readonly (keyof AgentRow)[]

/** An agent as a list reads it. */
export type AgentListRow = Pick<AgentRow, (typeof VIEW_COLUMNS)[number]>

/**
 * An agent of a list page: its id, the rev of its row as the page read it (migrations 020, 021),
 * and its check-in time, which writes leave out of the rev.
 */
export interface AgentRef {
  id: number
  rev: number
  last_updated_ms: number | null
}

/**
 * How a list shows an agent (lib/agents/views.ts): its AgentViewResource object, and the
 * JSON value of its check-in time alone (`lastUpdated`, put into kept JSON per page).
 */
export interface AgentListView {
  view(row: AgentListRow): { lastUpdated: string | null }
  lastUpdated(ms: number | null): string
}

/** The identifiers an item of agents/configuration or peripherals/command names an agent by. */
export interface AgentIdentifiers {
  uuid?: string | null
  hostIdentifier?: string | null
  ipAddress?: string | null
}

/** One peripheral model in the aggregated export. */
export interface PeripheralModelRow {
  vid: string
  pid: string
  gui_vid: string | null
  gui_pid: string | null
  dev_icon: number
  hosts: number
  present: number
  approved: number
  not_approved: number
  is_attack_tool: number
  is_vulnerable: number
  vulnerability: string | null
  severity: number
}

/**
 * A page's counts: every row, the matching ones. `filteredExact` false: `filtered` is an
 * estimate (PostgreSQL, a text filter whose count ran past its budget); SQLite's are exact.
 */
export interface Counts {
  total: number
  filtered: number
  filteredExact?: false
}

export interface AgentStore {
  byUuid(uuid: string): Promise<AgentRow | undefined>
  /** A page of the list as refs (id, rev, check-in time), kept while the data is unchanged. */
  list(f: AgentFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { rows: AgentRef[] }>
  /** A page's agents as the JSON array the list answers (kept per row and rev in db/agents.ts). */
  views(refs: readonly AgentRef[]): Promise<string>
  /** A page of the list with its agents as that JSON array, in one call. */
  page(f: AgentFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { json: string }>
  /** A large page as the ids of its agents in order. */
  pageIds(f: AgentFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { ids: number[] }>
  /** These agents as JSON objects joined by commas, in chunks (a streamed page: read synchronously in db/, a chunk at a time). */
  viewChunks(ids: readonly number[]): Promise<AsyncIterable<string>>
  /**
   * At most two agents whose identifiers equal every one given (case-insensitively); with
   * `hold`, they are held against other changes to the end of the unit of work.
   */
  matching(ids: AgentIdentifiers, hold?: boolean): Promise<AgentRow[]>
  /** Deletes the agent with its peripherals, approvals and commands; answers whether it was there. */
  remove(id: number): Promise<boolean>
}

export interface PeripheralStore {
  list(f: PeripheralFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { rows: PeripheralListRow[] }>
  pageIds(f: PeripheralFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { ids: number[] }>
  /** These peripherals as JSON objects of `view` joined by commas, in chunks (a streamed page, as AgentStore.viewChunks). */
  viewChunks(ids: readonly number[], view: (r: PeripheralListRow) => unknown): Promise<AsyncIterable<string>>
  ofAgent(agentId: number): Promise<PeripheralListRow[]>
  presentModels(agentId: number): Promise<{ vid: string; pid: string }[]>
  hasModel(agentId: number, vid: string, pid: string): Promise<boolean>
  attackToolName(vid: string, pid: string): Promise<string | undefined>
  /** Records a decision on a model for an agent; answers whether it changed anything. */
  setApproval(agentId: number, vid: string, pid: string, status: 'Approved' | 'Disapproved', now: number, by: string): Promise<boolean>
  whitelist(agentId: number): Promise<{ vid: string; pid: string }[]>
}

export interface CommandStore {
  queue(agentId: number, type: CommandType, parameters: CommandParameters, now: number, by: string): Promise<number>
  /** The agent's commands of a type still Pending or Delivered, newest first. */
  open(agentId: number, type: CommandType): Promise<CommandRow[]>
  /** Cancels the agent's Pending commands (of one type, or all); answers their ids. */
  cancelPending(agentId: number, now: number, reason: string, type?: CommandType): Promise<number[]>
  ofAgent(agentId: number): Promise<CommandRow[]>
  latestDebugLogs(agentId: number): Promise<{ created_ms: number; content: string } | undefined>
}

/** The agent's derived state (display status, counters) recomputed from its commands and peripherals. */
export interface AgentStateStore {
  refreshAgent(agentId: number): Promise<void>
  refreshStatus(agentId: number): Promise<void>
}

export interface ReEnrollmentStore {
  heldReEnrollment(agentId: number): Promise<HeldReEnrollment | undefined>
}

export interface ExportStore {
  /** The ids of the agents matching the filter, in the export's order. */
  agentIds(f: AgentFilter, sort: Sort): Promise<number[]>
  /** The agents of `ids` in order, read a page at a time (rows deleted meanwhile are left out). */
  agents(ids: readonly number[]): Promise<AsyncIterable<AgentRow>>
  /** The matching peripherals aggregated by model, most hosts first. */
  peripheralModels(f: PeripheralFilter): Promise<PeripheralModelRow[]>
}
