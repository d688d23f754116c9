// The storage agentless checking needs; db/agentless.ts implements it on SQLite. Handlers
// that name a row take its type from here.
import type { EventInput } from '../events/ports.js'
import type { Sort } from '../ports.js'

export type { EventInput } from '../events/ports.js'
export type { Sort } from '../ports.js'

export type AgentlessStatus = 'Pending' | 'Running' | 'Reachable' | 'Unreachable' | 'Failed'

export type Protocol = 'SSH' | 'WinRM'

export interface PollerRow {
  id: string
  name: string
  credential_hash: string
  host_name: string | null
  ip_address: string | null
  version: string | null
  is_activated: number
  activation_changed_ms: number | null
  activation_changed_by: string | null
  last_heartbeat_ms: number | null
  started_ms: number | null
  active_checks: number | null
  offline_since_ms: number | null
  created_ms: number
  assignments_revision: number
}

export interface PollerWithCounts extends PollerRow {
  assigned: number
  reachable: number
  failing: number
  pending: number
}

export interface ConnectionRow {
  id: number
  name: string
  address: string
  protocol: Protocol
  port: number
  use_tls: number
  user_name: string
  credential_type: 'Password' | 'PrivateKey'
  credentials: Buffer
  credentials_updated_ms: number
  is_override_defaults: number
  polling_interval_s: number | null
  timeout_s: number | null
  poller_id: string | null
  created_ms: number
  updated_ms: number
  status: AgentlessStatus
  status_description: string | null
  status_error: string | null
  run_id: string | null
  start_ms: number | null
  end_ms: number | null
  last_reachable_ms: number | null
  last_result: AgentlessStatus | null
  prev_errors: string
  poller_name: string | null
}

/** A connection's settings as written (credentials apart). */
export interface ConnectionValues {
  name: string
  address: string
  protocol: Protocol
  port: number
  useTls: boolean
  userName: string
  isOverrideDefaults: boolean
  pollingIntervalSeconds: number | null
  timeoutSeconds: number | null
}

export interface RunRow {
  run_id: string
  connection_id: number
  poller_id: string | null
  status: Exclude<AgentlessStatus, 'Pending'>
  start_ms: number
  end_ms: number | null
  description: string | null
  error: string | null
  recorded_ms: number
}

export interface PreviousError {
  startTime: string
  endTime: string
  statusString: 'Unreachable' | 'Failed'
  errorDescription: string
}

/** The filters of the status list (and its exports); every one given must hold. */
export interface AgentlessFilter {
  computerName?: string
  statusString?: string
  statusDescription?: string
  statusErrorDescription?: string
  prevRunningErrors?: string
  globalSearch?: string
  /** UTC day (start, end exclusive) of the latest run's start or end. */
  startDay?: [number, number]
  endDay?: [number, number]
  fromStart?: number
  toStart?: number
  fromEnd?: number
  toEnd?: number
  isOverrideDefaults?: boolean
}

/** The system's polling options, which apply to connections that do not override them. */
export interface PollingDefaults {
  intervalSeconds: number
  timeoutSeconds: number
}

export type AssetType = 'Agent' | 'Peripheral' | 'AgentlessHost'

export interface AgentAssetRow {
  id: number
  uuid: string
  host_identifier: string
  local_ip_address: string | null
  switch_ip: string | null
  switch_name: string | null
  port_id: string | null
  port_name: string | null
  operational_status: 'Armed' | 'Free'
  connection_status: string
}

export interface PeripheralAssetRow {
  agent_id: number
  agent_uuid: string
  device_id: string
  vid: string
  pid: string
  serial_number: string | null
  gui_vid: string | null
  gui_pid: string | null
  caption: string | null
  dev_icon: number
  approved: number
  present: number
  is_attack_tool: number
  is_vulnerable: number
}

export interface ConnectionAssetRow {
  id: number
  name: string
  address: string
  status: AgentlessStatus
}

export interface RunValues {
  runId: string
  status: string
  startMs: number
  endMs: number | null
  description: string | null
  error: string | null
}

export interface AgentlessStore {
  /**
   * With `hold`, the poller is held against its deletion to the end of the unit of work (on
   * PostgreSQL; SQLite's units run one at a time), so that a connection set to it next
   * cannot point to a poller deleted meanwhile.
   */
  poller(id: string, hold?: boolean): Promise<PollerRow | undefined>
  pollerByName(name: string): Promise<PollerRow | undefined>
  /** Every poller with its connection counts, by name. */
  pollers(): Promise<PollerWithCounts[]>
  pollerWithCounts(id: string): Promise<PollerWithCounts | undefined>
  /** Rejects with an error of code `duplicate-key` when another poller took the name meanwhile (another unit of work). */
  insertPoller(p: { id: string; name: string; hash: string; hostName: string | null; ip: string | null; version: string; now: number }): Promise<void>
  setActivated(id: string, on: boolean, now: number, by: string | null): Promise<number>
  heartbeat(p: { id: string; now: number; version: string; hostName: string | null; ip: string | null; startedMs: number | null; activeChecks: number | null }): Promise<void>
  /** The source address of the poller's latest call. */
  touch(id: string, ip: string): Promise<unknown>
  /** Deletes the poller; its connections stay, unregistered. Answers how many were registered to it. */
  deletePoller(id: string, now: number): Promise<number>
  /** Tells the poller its assignments changed, `by` times (a null poller: nothing to tell). */
  bumpRevision(pollerId: string | null, by?: number): Promise<void>
  /** How many connections the poller holds. With `hold`, inside a unit of work: counted to add some, other units counting this poller's with `hold` wait for this one to end (PostgreSQL; SQLite's units run one at a time). */
  pollerLoad(pollerId: string, hold?: boolean): Promise<number>
  /** Pollers whose last sign of life is older than `before` and that are not marked offline yet. */
  goneQuiet(before: number): Promise<PollerRow[]>
  setOffline(id: string, since: number): Promise<number>

  /** With `hold`, the connection is held against other changes to the end of the unit of work. */
  connection(id: number, hold?: boolean): Promise<ConnectionRow | undefined>
  /** By name, whatever its case. */
  connectionByName(name: string): Promise<ConnectionRow | undefined>
  /** The connections of these names, whatever their case (as SQLite's NOCASE folds it: A-Z only). */
  connectionsByNames(names: readonly string[]): Promise<ConnectionRow[]>
  connectionsByIds(ids: readonly number[]): Promise<ConnectionRow[]>
  /**
   * The connections of `ids` in that order, a page at a time with other work let in
   * between. A synchronous read per page, not a promise per row: it streams exports and
   * very large pages.
   */
  connectionsInPages(ids: readonly number[]): AsyncIterable<ConnectionRow>
  /** Inserts a connection; its credentials are set next (they are sealed with its id). */
  /** Both reject with an error of code `duplicate-key` when another connection took the name meanwhile (another unit of work). */
  insertConnection(v: ConnectionValues, credentialType: 'Password' | 'PrivateKey', pollerId: string | null, now: number): Promise<number>
  updateConnection(id: number, v: ConnectionValues, pollerId: string | null, now: number): Promise<void>
  setCredentials(id: number, type: 'Password' | 'PrivateKey', sealed: Buffer, now: number): Promise<unknown>
  setPoller(id: number, pollerId: string | null, now: number): Promise<unknown>
  deleteConnection(id: number): Promise<number>
  /** The connections registered to a poller, by id. */
  assigned(pollerId: string): Promise<ConnectionRow[]>

  /** A page of the status list, with the counts. */
  list(f: AgentlessFilter, sort: Sort, defaults: PollingDefaults, limit: number, offset: number): Promise<{ total: number; filtered: number; rows: ConnectionRow[] }>
  /** The ids of the matching connections, in order (limit -1: all). */
  ids(f: AgentlessFilter, sort: Sort, defaults: PollingDefaults, limit?: number, offset?: number): Promise<number[]>
  counts(f: AgentlessFilter): Promise<{ total: number; filtered: number }>

  runsByIds(runIds: readonly string[]): Promise<RunRow[]>
  /** Writes a reported run, new or the end of one Running, and when `latest` makes it the connection's latest (see setLatest). */
  storeRun(r: RunValues & { connectionId: number; pollerId: string; now: number }, isNew: boolean, latest: boolean): Promise<void>
  /**
   * Ends a run the poller never reported the end of, if it is still Running; answers whether
   * it was (the poller's report, committed meanwhile, wins over the sweeper's give-up).
   */
  abandonRun(r: RunValues & { now: number }): Promise<boolean>
  /** Makes the run the connection's latest, with the failed runs before it. */
  setLatest(r: RunValues & { connectionId: number }): Promise<void>
  /** Connections whose latest run has been Running since before `before`. */
  staleRuns(before: number): Promise<ConnectionRow[]>

  agentsAfter(afterId: number, limit: number): Promise<AgentAssetRow[]>
  peripheralsOf(agentIds: readonly number[]): Promise<PeripheralAssetRow[]>
  connectionsAfter(afterId: number, limit: number): Promise<ConnectionAssetRow[]>
  /** The locations last published, by asset key. */
  locations(type: AssetType, keys: readonly string[]): Promise<Map<string, string>>
  putLocation(type: AssetType, key: string, location: string, now: number): Promise<unknown>
}

/** The event log: agentless checking raises host and poller events. */
export interface AgentlessEvents {
  record(createdMs: number, events: EventInput[]): Promise<unknown>
}

/** The asset feed of the alarm outbox. */
export interface AssetFeed {
  /** How many alarm destinations are subscribed to assets. */
  assetSubscribers(): Promise<number>
  /** Queues the messages for every subscribed destination; answers how many deliveries were queued. */
  publishAssets(createdMs: number, messages: object[]): Promise<number>
}
