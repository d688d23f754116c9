// The storage the notification service needs; db/notifications.ts implements it on SQLite.
import type { Async } from '../../db/unit-of-work.js'
import type { NotificationsRepo } from '../../db/notifications.js'

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
