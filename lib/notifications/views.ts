// Notifications and groups as the contract shows them.
import type { components } from '../../generated/openapi.js'
import type { GroupCounts, GroupRow, HealthRow, RiskRow } from './ports.js'
import { severityNames } from '../listing.js'
import { iso } from '../time.js'

type Schemas = components['schemas']
export type RiskView = Schemas['RiskNotifications']
export type HealthView = Schemas['HealthNotification']
export type GroupView = Schemas['NotificationGroupDataViewResource']
export type GroupName = Schemas['NotificationGroupName']
export type CountsView = Schemas['NotificationsViewResource']

export const riskKinds = ['KnownAttackTool', 'VulnerablePeripheral', 'WhitelistViolation', 'UnapprovedPeripheralOnArmedAgent', 'AgentReEnrollmentHeld'] as const

interface GroupMeta {
  title: string
  description: string
  warning: string
  failed: string
}

/** The health groups, one per health check of lib/health.ts. */
export const healthGroups: Record<string, GroupMeta> = {
  Database: {
    title: 'Database',
    description: 'The database answers reads and writes and passes its integrity check.',
    warning: 'Database needs attention',
    failed: 'Database check failed',
  },
  Authentication: {
    title: 'Authentication',
    description: 'Accounts can sign in: an active Administrator exists and tokens can be signed.',
    warning: 'Authentication needs attention',
    failed: 'No administrator can sign in',
  },
  DiskSpace: { title: 'Disk space', description: 'Free space in the data directory.', warning: 'Disk space is low', failed: 'Disk space is nearly exhausted' },
  AlarmDelivery: {
    title: 'Alarm delivery',
    description: 'The alarm outbox: its backlog and the deliveries that failed.',
    warning: 'Alarm delivery is degraded',
    failed: 'Alarm delivery is failing',
  },
  Reports: { title: 'Reports', description: 'Report runs and the e-mails that deliver them.', warning: 'Report runs need attention', failed: 'Report runs are failing' },
  WorkerPoller: {
    title: 'Worker pollers',
    description: 'Heartbeats of the worker pollers that check agentless hosts.',
    warning: 'A worker poller needs attention',
    failed: 'A worker poller is down',
  },
  License: { title: 'License', description: 'The license: its expiry and the seats in use.', warning: 'License needs attention', failed: 'License is not valid' },
}
/**
 * The groups the contract names (NotificationGroupName), in its order: a health check
 * becomes a group of notifications once the contract lists it.
 */
export function groupNames(spec: Record<string, any>): GroupName[] {
  const names: string[] = spec.components?.schemas?.NotificationGroupName?.enum ?? []
  return names.filter((n) => n in healthGroups) as GroupName[]
}

/** Severity of a health notification by the check's state. */
export const healthSeverity = { Warning: 4, Failed: 3 } as const

const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms))
const truncate = (s: string | null, n: number) => (s === null ? null : s.slice(0, n))
const hex4 = (s: string | null) => (s !== null && /^[0-9A-F]{4}$/.test(s) ? s : null)

export function riskView(r: RiskRow, isRead: boolean, relatedEventIds: number[]): RiskView {
  return {
    id: r.id,
    kind: r.kind as RiskView['kind'],
    severity: r.severity,
    severityString: severityNames[r.severity],
    title: r.title.slice(0, 300),
    description: r.description.slice(0, 2000),
    agentUuid: r.agent_uuid.slice(0, 64),
    hostIdentifier: r.host_identifier.slice(0, 256),
    hostIp: truncate(r.host_ip, 64),
    vid: hex4(r.vid),
    pid: hex4(r.pid),
    deviceName: truncate(r.device_name, 256),
    vendorName: truncate(r.vendor_name, 256),
    serialNumber: truncate(r.serial_number, 256),
    deviceID: truncate(r.device_id, 512),
    occurrences: r.occurrences,
    firstSeen: iso(r.first_ms),
    creationTimeEpoch: r.first_ms,
    lastSeen: iso(r.last_ms),
    isRead,
    isPinned: r.pinned_ms !== null,
    pinnedBy: r.pinned_by,
    pinnedTime: isoOrNull(r.pinned_ms),
    isDismissed: r.dismissed_ms !== null,
    dismissedBy: r.dismissed_by,
    dismissedTime: isoOrNull(r.dismissed_ms),
    relatedEventIds,
  }
}

export function healthView(h: HealthRow, isRead: boolean): HealthView {
  return {
    id: h.id,
    group: h.group_name as GroupName,
    severity: h.severity,
    severityString: severityNames[h.severity],
    title: h.title.slice(0, 300),
    description: h.description.slice(0, 2000),
    state: h.resolved_ms === null ? 'Open' : 'Resolved',
    firstSeen: iso(h.first_ms),
    creationTimeEpoch: h.first_ms,
    lastSeen: iso(h.last_ms),
    resolvedTime: isoOrNull(h.resolved_ms),
    occurrences: h.occurrences,
    isRead,
    isPinned: h.pinned_ms !== null,
    pinnedBy: h.pinned_by,
    pinnedTime: isoOrNull(h.pinned_ms),
    isDismissed: h.dismissed_ms !== null,
    dismissedBy: h.dismissed_by,
    dismissedTime: isoOrNull(h.dismissed_ms),
  }
}

/** A group without its notifications (the stream's `group` event). */
export function groupView(g: GroupRow, counts: Omit<GroupCounts, 'group_name'> | undefined): GroupView {
  const meta = healthGroups[g.name]
  const c = counts ?? { total: 0, open: 0, unread: 0, pinned: 0 }
  return {
    name: g.name as GroupName,
    title: meta.title,
    description: meta.description,
    state: g.state,
    muted: g.muted === 1,
    mutedBy: g.muted_by,
    mutedTime: isoOrNull(g.muted_ms),
    counts: { total: c.total, open: c.open, unread: g.muted ? 0 : c.unread, pinned: c.pinned },
  }
}

export function countsView(risk: { unread: number; pinned: number; total: number }, health: { unread: number; pinned: number; total: number }): CountsView {
  return {
    riskUnread: risk.unread,
    riskPinned: risk.pinned,
    riskTotal: risk.total,
    healthUnread: health.unread,
    healthPinned: health.pinned,
    healthTotal: health.total,
    unread: risk.unread + health.unread,
    pinned: risk.pinned + health.pinned,
  }
}
