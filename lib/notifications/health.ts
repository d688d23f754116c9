// System-health notifications from the periodic health checks: a check that turns bad
// opens its group's notification, each further bad check adds an occurrence, and the
// first good check resolves it.
import type { NotificationsRepo } from '../../db/notifications.js'
import type { Async } from '../../db/unit-of-work.js'
import type { UnitOfWork } from '../platform/ports.js'
import type { HealthResult, HealthStatus } from '../health.js'
import { healthGroups, healthSeverity } from './views.js'

export type { HealthResult } from '../health.js'

/** Where the checks' results are recorded: each group's state and its notifications. */
export type HealthRecords = Async<Pick<NotificationsRepo, 'recordCheck' | 'openHealth' | 'openHealthNotification'>> & {
  /** Another bad check of an open notification; `worse` makes it unread again (what the write answers is not read). */
  repeatHealthNotification(id: number, severity: number, title: string, description: string, now: number, worse: boolean): Promise<unknown>
  resolveHealthNotification(id: number, now: number): Promise<unknown>
}

export interface HealthRecorderDeps {
  records: HealthRecords
  uow: UnitOfWork
  /** The contract's health groups: a check it names no group for is answered by admin/SubsystemHealth only. */
  groups: ReadonlySet<string>
}

/** Records the checks' results in one unit of work: group states and their notifications. */
export async function recordHealth(deps: HealthRecorderDeps, result: HealthResult, now = Date.now()): Promise<void> {
  const { records, groups } = deps
  await deps.uow.run(async () => {
    for (const s of result.subsystems) {
      if (!groups.has(s.name)) continue
      const detail = s.detail.slice(0, 1000)
      await records.recordCheck(s.name, s.status, detail, now)
      const open = await records.openHealth(s.name)
      if (s.status === 'Healthy') {
        if (open) await records.resolveHealthNotification(open.id, now)
        continue
      }
      const severity = healthSeverity[s.status as Exclude<HealthStatus, 'Healthy'>]
      const title = s.status === 'Failed' ? healthGroups[s.name].failed : healthGroups[s.name].warning
      // Lower numbers are more severe: a worse state makes it unread again.
      if (!open) await records.openHealthNotification(s.name, severity, title, detail, now)
      else await records.repeatHealthNotification(open.id, severity, title, detail, now, severity < open.severity)
    }
  })
}
