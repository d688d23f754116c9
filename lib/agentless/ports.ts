// The storage agentless checking needs; db/agentless.ts implements it on SQLite. Handlers
// that name a row take its type from here.
import type {
  AgentAssetRow,
  AgentlessFilter,
  AssetType,
  ConnectionAssetRow,
  ConnectionRow,
  ConnectionValues,
  PeripheralAssetRow,
  PollerRow,
  PollerWithCounts,
  PollingDefaults,
  RunRow,
} from '../../db/agentless.js'
import type { EventInput } from '../../db/events.js'
import type { Sort } from '../../db/sql.js'

export type {
  AgentAssetRow,
  AgentlessFilter,
  AssetType,
  ConnectionAssetRow,
  ConnectionRow,
  ConnectionValues,
  PeripheralAssetRow,
  PollerRow,
  PollerWithCounts,
  PollingDefaults,
  PreviousError,
  RunRow,
} from '../../db/agentless.js'
export type { EventInput } from '../../db/events.js'
export type { Sort } from '../../db/sql.js'

export interface RunValues {
  runId: string
  status: string
  startMs: number
  endMs: number | null
  description: string | null
  error: string | null
}

export interface AgentlessStore {
  poller(id: string): Promise<PollerRow | undefined>
  pollerByName(name: string): Promise<PollerRow | undefined>
  /** Every poller with its connection counts, by name. */
  pollers(): Promise<PollerWithCounts[]>
  pollerWithCounts(id: string): Promise<PollerWithCounts | undefined>
  insertPoller(p: { id: string; name: string; hash: string; hostName: string | null; ip: string | null; version: string; now: number }): Promise<void>
  setActivated(id: string, on: boolean, now: number, by: string | null): Promise<number>
  heartbeat(p: { id: string; now: number; version: string; hostName: string | null; ip: string | null; startedMs: number | null; activeChecks: number | null }): Promise<void>
  /** The source address of the poller's latest call. */
  touch(id: string, ip: string): Promise<unknown>
  /** Deletes the poller; its connections stay, unregistered. Answers how many were registered to it. */
  deletePoller(id: string, now: number): Promise<number>
  /** Tells the poller its assignments changed, `by` times (a null poller: nothing to tell). */
  bumpRevision(pollerId: string | null, by?: number): Promise<void>
  pollerLoad(pollerId: string): Promise<number>
  /** Pollers whose last sign of life is older than `before` and that are not marked offline yet. */
  goneQuiet(before: number): Promise<PollerRow[]>
  setOffline(id: string, since: number): Promise<number>

  connection(id: number): Promise<ConnectionRow | undefined>
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
  finishRun(r: RunValues & { now: number }): Promise<void>
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
