// The storage the notification service needs; db/notifications.ts implements it on SQLite.
import type { Async } from '../../db/unit-of-work.js'
import type { NotificationsRepo } from '../../db/notifications.js'
import type { Maybe } from '../platform/maybe.js'
import type { HealthRecords } from './health.js'

export type { GroupCounts, GroupRow, HealthRow, HealthState, RiskFilter, RiskRow } from '../../db/notifications.js'

/**
 * Reads and changes of notifications, groups and read marks, each answering through a
 * Promise. A risk page comes with its related events in one call (`riskPage`): no call per row.
 */
export type NotificationStore = Async<
  Pick<
    NotificationsRepo,
    | 'counter'
    | 'risk'
    | 'riskPage'
    | 'pinRisk'
    | 'dismissRisk'
    | 'riskUnread'
    | 'riskPinned'
    | 'groups'
    | 'group'
    | 'health'
    | 'pinHealth'
    | 'dismissHealth'
    | 'healthOfGroup'
    | 'openHealthNotifications'
    | 'groupCounts'
    | 'healthCounts'
    | 'healthUnreadAll'
    | 'marks'
  >
> & {
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
export type NotificationFeed = Async<
  Pick<
    NotificationsRepo,
    | 'counter'
    | 'marks'
    | 'relatedEvents'
    | 'riskChangedSince'
    | 'healthChangedSince'
    | 'groupsChangedSince'
    | 'groups'
    | 'riskUnread'
    | 'riskPinned'
    | 'healthCounts'
    | 'groupCounts'
    | 'riskBetween'
    | 'healthBetween'
  >
> & {
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
