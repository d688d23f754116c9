// System-health notifications from the periodic health checks: a check that turns bad
// opens its group's notification, each further bad check adds an occurrence, and the
// first good check resolves it.
import type { UnitOfWork } from '../platform/ports.js'
import type { HealthResult, HealthStatus } from '../health.js'
import type { HealthRecords } from './ports.js'
import { healthGroups, healthSeverity } from './views.js'

export type { HealthResult } from '../health.js'

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
