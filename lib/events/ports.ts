// The storage the event and audit-trail queries need; db/event-engine/event-queries.ts implements it on
// SQLite (made Promise-returning by asyncPort in lib/services.ts).
import type { Sort } from '../ports.js'

/**
 * The events list's free-text sort fields (the contract's EventsSortBy names them): no index
 * holds their order, so a sort by one reads and sorts every match, and the list limits it
 * (lib/events/service.ts SORT_ROWS_MAX). The event engine's sorts agree (tests/events-free-text-sort.test.ts).
 */
export const EVENT_ROW_SORTS: readonly string[] = ['eventEntityID', 'details', 'assetKey', 'assetName', 'peripheralAssetId']

/**
 * A row read as an array, as an object of these fields. Rows are read raw: better-sqlite3
 * builds an object row through the engine's API, about 2.5 µs for an event's 13 columns
 * and 6 µs for an agent's 46, most of the cost of reading a page; this costs a tenth of it.
 * The object is one literal of the fields (generated once per column list; the names are
 * our columns, quoted as JSON): adding 38 fields one by one through a computed key cost
 * 1.4 µs a row, the literal a tenth of that.
 */
export function rowOf<F extends readonly string[]>(fields: F): (r: unknown[]) => Record<string, unknown> {
  return new Function('r', `return { ${fields.map((f, i) => `${JSON.stringify(f)}: r[${i}]`).join(', ')} }`) as (r: unknown[]) => Record<string, unknown>
}

export type RecordTable = 'events' | 'audit_trail'

export interface ListAnswer<R> {
  total: number
  filtered: number
  rows: R[]
  /** The sort orders every match (a free text) and the matches were more than the page's sortMax: no rows read. */
  tooManyToSort?: boolean
  /** False: `filtered` is an estimate (PostgreSQL, a text filter whose count ran past its budget); absent: exact. */
  filteredExact?: boolean
}

export interface EventRow {
  id: number
  created_ms: number
  event_code: string
  severity: number
  category: EventCategory
  entity_id: string
  description: string
  details: string
  hashtags: string | null
  peripheral_icon: number
  asset_key: string | null
  asset_name: string | null
  peripheral_asset_id: string | null
}

export interface AuditTrailRow {
  id: number
  created_ms: number
  severity: number
  category: (typeof auditCategories)[number]
  user_name: string | null
  source_ip: string | null
  description: string
  details: string
  operation_id: string | null
  outcome: 'Succeeded' | 'Failed' | 'Refused'
  asset_key: string | null
  asset_name: string | null
  asset_parent_id: string | null
  asset_ip: string | null
  // Values of the contract's ElementType, NetworkElementSubType and AllAssetTypeDetail, as
  // lib/audit.ts writes them (lib/events/views.ts maps them into AssetReference).
  asset_type: string
  asset_sub_type: string
  asset_detail: string
  asset_icon: number
  request_id: string | null
}

/** The columns every read returns, in this order (rows as arrays follow it). */
export const EVENT_FIELDS = [
  'id',
  'created_ms',
  'event_code',
  'severity',
  'category',
  'entity_id',
  'description',
  'details',
  'hashtags',
  'peripheral_icon',
  'asset_key',
  'asset_name',
  'peripheral_asset_id',
] as const

export const AUDIT_FIELDS = [
  'id',
  'created_ms',
  'severity',
  'category',
  'user_name',
  'source_ip',
  'description',
  'details',
  'operation_id',
  'outcome',
  'asset_key',
  'asset_name',
  'asset_parent_id',
  'asset_ip',
  'asset_type',
  'asset_sub_type',
  'asset_detail',
  'asset_icon',
  'request_id',
] as const

export type EventCategory = 'USB' | 'Network' | 'System' | 'Host' | 'General'

export interface EventInput {
  code: string
  severity: number
  category: EventCategory
  /** The source as clients filter it: `<host> (<ip>)`. */
  entityId: string
  description: string
  details: string
  hashtags?: string | null
  peripheralIcon?: number
  assetKey?: string | null
  assetName?: string | null
  peripheralAssetId?: string | null
  peripheralVid?: string | null
  peripheralPid?: string | null
  /** For alarm-delivery failures: the destination the event is about (it is not delivered there). */
  alarmDestinationId?: string | null
}

/** One caller's events in a batch: its time, its events in order, the agent whose texts follow them. */
export interface EventBatch {
  createdMs: number
  events: EventInput[]
  agentId?: number
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

/** A page too large to build whole: the counts, and the rows as arrays of the fields, a chunk at a time. */
export type PageChunks = ListAnswer<never> & { chunks: AsyncIterable<unknown[]> }

/**
 * The events or the audit records. A streamed page or an export is one call: its chunks are
 * read synchronously inside the implementation (a statement per chunk, no Promise per row),
 * with other work served between chunks.
 */
export interface RecordStore<F, R> {
  /**
   * A page of the list, rows as arrays of the fields (EVENT_FIELDS, AUDIT_FIELDS: the answer
   * is written from them, no object per row). `feed`: the integration feed's page, the
   * oldest `limit` matches after `offset`, in the sort's order. `sortMax`: a list sorted by
   * a free text (every match read and sorted) of more matches reads no row and answers
   * `tooManyToSort`, with the count.
   */
  pageRows(f: F, s: Sort, limit: number, offset: number, feed?: boolean, sortMax?: number): Promise<ListAnswer<unknown[]>>
  /** A large page of the list (or of the feed), rows as arrays of the fields, in chunks. */
  pageChunks(f: F, s: Sort, limit: number, offset: number, feed?: boolean): Promise<PageChunks>
  count(f: F): Promise<number>
  /** Every match in order, up to `cap`, as rows (the PDF export). */
  iterate(f: F, s: Sort, cap: number): Promise<AsyncIterable<R>>
  /** The same as arrays of the fields, in chunks (the CSV export). */
  rawChunks(f: F, s: Sort, cap: number): Promise<AsyncIterable<unknown[]>>
  /** The newest record's id (0: none). */
  lastId(): Promise<number>
  /** Moves whenever a list answer could change: a record added or pruned, a commit by another process. */
  version(): Promise<string>
  /** A page of the feed sorted by its id field, as the ids of its rows, with the counts. */
  feedIds(f: F, s: Sort, limit: number, offset: number): Promise<ListAnswer<number>>
  /** The rows of these ids that exist, as arrays of the fields, in any order. */
  rowsByIds(ids: number[]): Promise<unknown[][]>
}

export interface EventStore extends RecordStore<EventFilter, EventRow> {
  /**
   * Resolves once what the filter needs is in memory: the index's texts, read on the first
   * text query after a start a slice at a time, so that no other request is held up.
   */
  ready(f: EventFilter): Promise<void>
}

export type AuditRecordStore = RecordStore<AuditFilter, AuditTrailRow>

/**
 * The index catch-up the background loop drives (lib/events/indexing.ts). Synchronous: a
 * slice is measured in milliseconds of work done in one turn, and a timer's turn never
 * falls inside a unit of work (those that wait for I/O are refused).
 */
export interface IndexCatchUp {
  /** One slice of about `budgetMs`; answers whether more is waiting. */
  indexSlice(budgetMs?: number): boolean
  /** `fn` is called when indexing becomes wanted (the first list wants it). */
  onIndexWanted(fn: (() => void) | undefined): void
  /**
   * Reads what the first list would otherwise read on the event loop (the index's counts:
   * 260 ms at 5,000,000 events): called when the loop starts, before the server listens.
   */
  warm(): void
}

/**
 * A text index that a backend builds behind the writes rather than in them (PostgreSQL: the
 * trigram index of each day of events, once the day has ended), driven by a background loop
 * (lib/events/text-index.ts). Until it is built, the records it would serve are read without it.
 */
export interface TextIndexUpkeep {
  /** Builds the next index wanted (the newest day first); what it built and how long it took, or null when none is wanted. */
  buildNext(now: number): Promise<{ partition: string; ms: number } | null>
  /** Stops a build under way (closing): it is made again, from the start, by a later one. */
  cancel(): Promise<void>
}
