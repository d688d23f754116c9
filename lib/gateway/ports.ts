// The storage the gateway needs; db/gateway.ts, db/events.ts and db/agent-state.ts implement
// it on SQLite. Each check-in is a few calls (its peripherals are written in one).
import type { EventBatch, EventInput } from '../events/ports.js'
import type { HeldReEnrollment, PeripheralRow } from '../agents/ports.js'

export type { EventBatch, EventInput } from '../events/ports.js'

// ---- enrollment ----
/** What an agent's credential resolves to on every gateway call (one indexed lookup). */
export interface GatewayAgent {
  id: number
  uuid: string
  host_identifier: string
  local_ip_address: string | null
  connection_status: 'Connected' | 'Disconnected'
  state_digest: string | null
  /**
   * Whether commands waited for it when it was read, where the backend reads that with the
   * agent (PostgreSQL: one statement, in the check-in's own request); absent: asked apart.
   */
  has_pending?: boolean
}

export interface AgentRow extends GatewayAgent {
  machine_id: string
  os_version: string | null
  manufacturer: string | null
  pc_model: string | null
  operational_status: 'Armed' | 'Free'
  service_version: string | null
  kb_driver_version: string | null
  last_updated_ms: number | null
  license_status: 'Activated' | 'Pending' | 'Expired' | 'Invalid'
  license_account_id: string | null
  running_mode: string | null
  switch_ip: string | null
  switch_name: string | null
  port_id: string | null
  port_name: string | null
}

export interface NewAgent {
  uuid: string
  machineId: string
  credentialHash: string
  enrolledMs: number
  hostIdentifier: string
  licenseStatus: AgentRow['license_status']
  expirationMs: number | null
  licenseAccountName: string
  checkInSeconds: number
}

// ---- check-ins ----
/** Everything a check-in sets on the agent row. */
export interface AgentState {
  hostIdentifier: string
  localIpAddress: string | null
  osVersion: string | null
  manufacturer: string | null
  pcModel: string | null
  nicsJson: string
  nicsText: string | null
  ipAddresses: string | null
  operationalStatus: 'Armed' | 'Free'
  isSystemLocked: number
  serviceVersion: string | null
  kbDriverVersion: string | null
  licenseStatus: AgentRow['license_status']
  licenseAccountId: string | null
  modelTooltip: string | null
  runningMode: string | null
  switchIp: string | null
  switchName: string | null
  portId: string | null
  portName: string | null
  ethernetsCount: number
  hashtags: string | null
  loggedOnUsers: string
  checkInSeconds: number
  lastUpdatedMs: number
  stateDigest: string
}

/** A check-in's state for its agent, and the agent's row as read before it (every column). */
export interface StateWrite {
  id: number
  before: AgentRow
  state: AgentState
}

// ---- peripherals ----
/** A stored peripheral of an agent, enough to compare it and to describe it in an event. */
export interface KnownPeripheral {
  id: number
  device_id: string
  present: number
  vid: string
  pid: string
  gui_vid: string | null
  gui_pid: string | null
  serial_number: string | null
  gui_serial: string | null
  dev_icon: number
}

/** A stored peripheral with every column a report sets (to skip writes that change nothing). */
export interface StoredPeripheral
  extends KnownPeripheral,
    Pick<PeripheralRow, 'description' | 'status' | 'manufacturer' | 'caption' | 'class_code' | 'subclass_code' | 'protocol_code' | 'hierarchy' | 'parent_device_id' | 'is_disabled'> {
  /** The columns a report sets bar the device id and presence, as SIGNATURE writes them (when read so). */
  signature?: string
}

/** A peripheral as stored from a report, with what the server derives from it. */
export interface PeripheralValues {
  deviceId: string
  vid: string
  pid: string
  serialNumber: string | null
  description: string | null
  status: string | null
  manufacturer: string | null
  caption: string | null
  guiVid: string | null
  guiPid: string | null
  guiSerial: string | null
  devIcon: number
  classCode: string | null
  subclassCode: string | null
  protocolCode: string | null
  hierarchy: string | null
  parentDeviceId: string | null
  isDisabled: number
  present: number
  vendorTextId: number | null
  productTextId: number | null
}

/** A reported peripheral and what the server derives from it, before its texts are interned. */
export type ReportedPeripheral = Omit<PeripheralValues, 'vendorTextId' | 'productTextId'>

/** The writes that make an agent's stored peripherals what its check-in reported. */
export interface PeripheralChanges {
  /** In the report's order: a stored one's id and row, or null for one new to the agent. */
  reported: { id: number | null; values: ReportedPeripheral; stored?: StoredPeripheral }[]
  /** Stored ones present before and left out of the report. */
  absent: number[]
}

/** A present peripheral with its flags, as events describe it. */
export interface PresentPeripheral extends Omit<KnownPeripheral, 'id' | 'present'> {
  approved: number
  is_attack_tool: number
  is_vulnerable: number
  catalogue_name: string | null
}

/** What applyPeripheralsMany changed beyond seen times: peripheral ids, and the agents they belong to. */
export interface PeripheralsWritten {
  /** Inserted, or rewritten with what the agent reported. */
  written: number[]
  /** Present again, or no longer present; nothing else changed. */
  moved: number[]
  agents: number[]
}

/** A check-in's peripheral writes for its agent (applyPeripheralsMany's items). */
export interface PeripheralWrite {
  agentId: number
  agentUuid: string
  changes: PeripheralChanges
  now: number
  previousMs: number
}

// ---- commands ----
export interface CommandRow {
  id: number
  agent_id: number
  type: 'SetMode' | 'UpdatePolicy' | 'UpdateAgent' | 'FetchDebugLogs'
  parameters: string
  status: 'Pending' | 'Delivered' | 'Succeeded' | 'Failed' | 'Cancelled'
  created_ms: number
  created_by: string
  result_message: string | null
}

// ---- the sweeper ----
export interface SweptAgent {
  id: number
  uuid: string
  host_identifier: string
  local_ip_address: string | null
  last_updated_ms: number
}

export interface OverdueCommand {
  id: number
  type: CommandRow['type']
  agent_id: number
  uuid: string
  host_identifier: string
  local_ip_address: string | null
}

/** Agents, their peripherals, commands, errors, held re-enrollments and license seats. */
export interface GatewayStore {
  // ---- enrollment ----
  /**
   * The agent enrolled with this machine id, whatever its case. With `hold`, the machine id
   * (enrolled or not yet) is held to the end of the unit of work: another enrollment of it
   * waits, then finds what this one wrote.
   */
  byMachineId(machineId: string, hold?: boolean): Promise<{ id: number; uuid: string; credential_hash: string | null } | undefined>
  agentByUuid(uuid: string): Promise<AgentRow | undefined>
  /** Keeps a re-enrollment aside for an Administrator (the latest per agent). */
  holdReEnrollment(h: { agentId: number; id: string; credentialHash: string; hostIdentifier: string; sourceIp: string | null; requestedMs: number }): Promise<unknown>
  heldReEnrollment(agentId: number): Promise<HeldReEnrollment | undefined>
  heldReEnrollmentByCredential(hash: string): Promise<HeldReEnrollment | undefined>
  dropReEnrollment(agentId: number): Promise<unknown>
  activatedCount(): Promise<number>
  insertAgent(a: NewAgent): Promise<number>
  rotateCredential(id: number, hash: string, hostIdentifier: string): Promise<unknown>

  // ---- check-ins ----
  agent(id: number): Promise<AgentRow | undefined>
  /** Each check-in's state on its agent (one each), one statement per set of changed columns. */
  updateStates(writes: StateWrite[]): Promise<void>
  /** These agents' rows (every column), in no order. */
  agents(ids: number[]): Promise<AgentRow[]>
  /** Check-in times noted in memory, written in one go. */
  heartbeats(times: Iterable<[number, number]>): Promise<void>
  addErrors(agentId: number, errors: { time: number; code: string | null; message: string }[]): Promise<void>

  // ---- peripherals ----
  /** knownPeripherals of several agents, by agent (those without any left out). */
  knownPeripheralsOf(agentIds: number[]): Promise<Map<number, StoredPeripheral[]>>
  /**
   * Writes the peripherals of several check-ins (one per agent; texts interned; the writes of
   * a presence alone in one statement each), then keeps at most `max` per agent by forgetting
   * the absent ones seen longest ago. `previousMs`: an agent's check-in before this one (a
   * peripheral present then and gone now was last seen then).
   */
  applyPeripheralsMany(writes: PeripheralWrite[], max: number): Promise<PeripheralsWritten>
  presentPeripherals(agentId: number): Promise<PresentPeripheral[]>
  /** presentPeripherals of several agents, by agent (those without any left out). */
  presentPeripheralsOf(agentIds: number[]): Promise<Map<number, PresentPeripheral[]>>

  // ---- commands ----
  hasPendingCommands(agentId: number): Promise<boolean>
  /** Those of these agents with a pending command. */
  withPendingCommands(agentIds: number[]): Promise<number[]>
  /** Hands the oldest `limit` pending commands over; `more`: others wait after them. */
  deliverPending(agentId: number, limit: number, now: number): Promise<{ commands: CommandRow[]; more: boolean }>
  command(id: number): Promise<CommandRow | undefined>
  completeCommand(c: { id: number; status: 'Succeeded' | 'Failed'; now: number; message: string | null; hasOutput: number }): Promise<unknown>
  /** Who asked for the mode an agent now reports, when a SetMode command did. */
  modeRequestedBy(agentId: number, mode: string): Promise<string | undefined>
  setMode(agentId: number, mode: string, now: number): Promise<unknown>
  setConfigured(agentId: number, now: number): Promise<unknown>
  addDebugLog(agentId: number, commandId: number, now: number, content: string, keep: number): Promise<void>

  // ---- the sweeper: quiet agents, overdue commands, seats and licenses ----
  staleAgents(before: number, limit: number): Promise<SweptAgent[]>
  /**
   * disconnectMany for the first `limit` agents quiet since `before` with ids in (after, upTo],
   * in id order (a mass disconnect's pass): answers them.
   */
  disconnectRange(after: number, upTo: number, before: number, limit: number, latestText: string): Promise<SweptAgent[]>
  /** The highest agent id (0 without agents). */
  lastAgentId(): Promise<number>
  disconnect(id: number, before: number): Promise<boolean>
  /**
   * Disconnects those of these agents still connected and quiet since before `before`;
   * answers them, in the order given. Their display status becomes Disconnected, and
   * `latestText` (the text of the disconnect event the caller records for each, without
   * an agent for its texts) becomes their latest event text, the others moving down.
   */
  disconnectMany(ids: number[], before: number, latestText: string): Promise<SweptAgent[]>
  overdueCommands(before: number, limit: number): Promise<OverdueCommand[]>
  timeOutCommand(id: number, now: number, message: string): Promise<boolean>
  waitingForSeat(limit: number): Promise<number[]>
  /** Gives a waiting agent a seat; answers the rows changed (0: it no longer waited). */
  activate(id: number): Promise<{ changes: number }>
  /** Licenses whose expiration date has passed become Expired; answers how many. */
  expireLicenses(now: number): Promise<number>
}

/** Where the gateway records the events it raises (with their outbox, counters and notifications). */
export interface EventRecorder {
  record(createdMs: number, events: EventInput[], agentId?: number): Promise<unknown>
  /** Several callers' events in one go (one statement per 64 rows, one text update, one risk pass). */
  recordMany(items: EventBatch[]): Promise<unknown>
}

/** The derived per-agent state the lists read (status, counts, latest event). */
export interface AgentStatus {
  refreshAgent(agentId: number): Promise<void>
  /** refreshAgent for several agents at once. */
  refreshAgents(agentIds: number[]): Promise<void>
  /** refreshAgents after check-ins, over what they changed (the peripherals' writes, the agents whose mode changed). */
  refreshCheckIns(agentIds: number[], touched: PeripheralsWritten, modeChanged: number[]): Promise<void>
  refreshStatus(agentId: number): Promise<void>
}
