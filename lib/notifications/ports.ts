// The storage the notification service needs; db/notifications.ts implements it on SQLite.
import type { Sort } from '../ports.js'
import type { Maybe } from '../platform/maybe.js'

/** Where the checks' results are recorded: each group's state and its notifications. */
export interface HealthRecords {
  /** Records a check's result; the group's `since` and change number move only when its state changes (or on its first check). */
  recordCheck(name: string, state: HealthState, detail: string, now: number): Promise<boolean>
  openHealth(group: string): Promise<HealthRow | undefined>
  openHealthNotification(group: string, severity: number, title: string, description: string, now: number): Promise<number>
  /** Another bad check of an open notification; `worse` makes it unread again (what the write answers is not read). */
  repeatHealthNotification(id: number, severity: number, title: string, description: string, now: number, worse: boolean): Promise<unknown>
  resolveHealthNotification(id: number, now: number): Promise<unknown>
}

export type HealthState = 'Healthy' | 'Warning' | 'Failed'

export interface RiskRow {
  id: number
  kind: string
  severity: number
  agent_uuid: string
  host_identifier: string
  host_ip: string | null
  vid: string | null
  pid: string | null
  serial_number: string | null
  device_id: string | null
  device_name: string | null
  vendor_name: string | null
  title: string
  description: string
  occurrences: number
  first_ms: number
  last_ms: number
  occurred_seq: number
  change_seq: number
  pinned_by: string | null
  pinned_ms: number | null
  dismissed_by: string | null
  dismissed_ms: number | null
}

export interface HealthRow {
  id: number
  group_name: string
  severity: number
  title: string
  description: string
  first_ms: number
  last_ms: number
  resolved_ms: number | null
  occurrences: number
  occurred_seq: number
  change_seq: number
  pinned_by: string | null
  pinned_ms: number | null
  dismissed_by: string | null
  dismissed_ms: number | null
}

export interface GroupRow {
  name: string
  muted: number
  muted_by: string | null
  muted_ms: number | null
  state: HealthState
  detail: string
  since_ms: number | null
  checked_ms: number | null
  change_seq: number
}

export interface GroupCounts {
  group_name: string
  total: number
  open: number
  unread: number
  pinned: number
}

export interface RiskFilter {
  kinds?: string[]
  severity?: number
  minimumSeverity?: number
  /** Case-insensitive "contains". */
  agentUuid?: string
  hostIdentifier?: string
  globalSearch?: string
  /** Exact, upper-case hex. */
  vid?: string
  pid?: string
  isRead?: boolean
  isPinned?: boolean
  /** Undefined: not dismissed. */
  isDismissed?: boolean
  /** Last seen at or after. */
  from?: number
  /** First seen before (exclusive). */
  toExclusive?: number
}

/**
 * Reads and changes of notifications, groups and read marks, each answering through a
 * Promise. A risk page comes with its related events in one call (`riskPage`): no call per row.
 */
export interface NotificationStore {
  /** The latest change number and the risk notifications not dismissed. */
  counter(): Promise<{ seq: number; risk_open: number }>
  risk(id: number): Promise<RiskRow | undefined>
  /** The same page with each notification's related events (read here, row by row, in one call). */
  riskPage(f: RiskFilter, s: Sort, readMark: number, limit: number, offset: number): Promise<{ filtered: number; rows: { row: RiskRow; related: number[] }[] }>
  /** Sets or clears the pin of a risk notification that is not dismissed; answers whether it changed. */
  pinRisk(id: number, by: string | null, ms: number | null): Promise<boolean>
  dismissRisk(id: number, by: string, ms: number): Promise<boolean>
  riskUnread(mark: number): Promise<number>
  riskPinned(): Promise<number>
  groups(): Promise<GroupRow[]>
  group(name: string): Promise<GroupRow | undefined>
  health(id: number): Promise<HealthRow | undefined>
  pinHealth(id: number, by: string | null, ms: number | null): Promise<boolean>
  dismissHealth(id: number, by: string, ms: number): Promise<boolean>
  healthOfGroup(name: string, limit: number): Promise<HealthRow[]>
  openHealthNotifications(limit: number): Promise<HealthRow[]>
  groupCounts(mark: number): Promise<GroupCounts[]>
  /** Unread counts outside muted groups, totals and pins (not dismissed). */
  healthCounts(mark: number): Promise<{ total: number; unread: number; pinned: number }>
  /** Unread for whoever read up to `mark`, muted groups included. */
  healthUnreadAll(mark: number): Promise<number>
  /** The caller's read marks (0: nothing read). */
  marks(userKey: string): Promise<{ risk_seq: number; health_seq: number }>
  /** Moves a reader's read mark of the risk or health notifications (what the write answers is not read). */
  setRiskMark(userKey: string, seq: number): Promise<unknown>
  setHealthMark(userKey: string, seq: number): Promise<unknown>
  /** Mutes or unmutes a group's notifications (what the write answers is not read). */
  setMuted(name: string, muted: boolean, by: string, now: number): Promise<unknown>
}

/**
 * The notifications as the stream's hub reads them (lib/notifications/stream.ts): the change
 * number a few times a second, and what changed when it moved.
 */
export interface NotificationFeed {
  /** The latest change number and the risk notifications not dismissed. */
  counter(): Promise<{ seq: number; risk_open: number }>
  /** The caller's read marks (0: nothing read). */
  marks(userKey: string): Promise<{ risk_seq: number; health_seq: number }>
  /** The latest 100 events behind a risk notification, oldest first. */
  relatedEvents(id: number): Promise<number[]>
  riskChangedSince(seq: number, limit: number): Promise<RiskRow[]>
  healthChangedSince(seq: number, limit: number): Promise<HealthRow[]>
  groupsChangedSince(seq: number): Promise<GroupRow[]>
  groups(): Promise<GroupRow[]>
  riskUnread(mark: number): Promise<number>
  riskPinned(): Promise<number>
  /** Unread counts outside muted groups, totals and pins (not dismissed). */
  healthCounts(mark: number): Promise<{ total: number; unread: number; pinned: number }>
  groupCounts(mark: number): Promise<GroupCounts[]>
  /** Risk notifications not dismissed that last occurred in (from, to], latest first. */
  riskBetween(from: number, to: number, limit: number): Promise<RiskRow[]>
  /** Health notifications of unmuted groups, not dismissed, that last occurred in (from, to], latest first. */
  healthBetween(from: number, to: number, limit: number): Promise<HealthRow[]>
  /** The latest change number alone: what the hub looks at, a few times a second. */
  changeSeq(): Promise<number>
}

/** What the notifications' loops read and write (`app.storage.notificationLoops`, one per backend). */
export interface NotificationLoopStore {
  feed: NotificationFeed
  /**
   * Runs `read` (reads of `feed`) as one snapshot, so that the rows and the change number
   * agree while another process writes: SQLite's unit of work, a REPEATABLE READ read-only
   * transaction on PostgreSQL.
   */
  snapshot<T>(read: () => Promise<T>): Promise<T>
  /** Where the health checks' results are recorded. */
  records: HealthRecords
  /** Agents by license status (the License check): at once on SQLite, whose checks answer at once. */
  licenseUse(): Maybe<{ activated: number; pending: number; invalid: number }>
  /** The credential-change counter: a bump ends the streams whose credential no longer works. */
  authVersion: { readonly value: number; onBump(fn: () => unknown): void }
}

/**
 * Risk notifications raised behind the writes of events, where a backend raises them so
 * (PostgreSQL: db/postgres/risk-feed.ts): a background loop keeps them caught up.
 */
export interface RiskFeed {
  /** Raises the notifications of every event written before the call; answers how many slices it took. */
  catchUp(): Promise<number>
}
