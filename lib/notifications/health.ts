// System-health notifications from the periodic health checks: a check that turns bad
// opens its group's notification, each further bad check adds an occurrence, and the
// first good check resolves it.
import type { FastifyInstance } from 'fastify'
import { runHealthChecks, type HealthStatus } from '../health.js'
import { groupNames, healthGroups, healthSeverity } from './views.js'

export type HealthResult = ReturnType<typeof runHealthChecks>

/** Records the checks' results in one transaction: group states and their notifications. */
export function recordHealth(app: FastifyInstance, result: HealthResult, now = Date.now()): void {
  const repo = app.repos.notifications
  const groups = new Set<string>(groupNames(app.contract.spec))
  app.db.transaction(() => {
    for (const s of result.subsystems) {
      // A check the contract names no group for is answered by admin/SubsystemHealth only.
      if (!groups.has(s.name)) continue
      const detail = s.detail.slice(0, 1000)
      repo.recordCheck(s.name, s.status, detail, now)
      const open = repo.openHealth(s.name)
      if (s.status === 'Healthy') {
        if (open) repo.resolveHealthNotification(open.id, now)
        continue
      }
      const severity = healthSeverity[s.status as Exclude<HealthStatus, 'Healthy'>]
      const title = s.status === 'Failed' ? healthGroups[s.name].failed : healthGroups[s.name].warning
      // Lower numbers are more severe: a worse state makes it unread again.
      if (!open) repo.openHealthNotification(s.name, severity, title, detail, now)
      else repo.repeatHealthNotification(open.id, severity, title, detail, now, severity < open.severity)
    }
  })()
}

/** Runs every health check and records the results; answers them. */
export function checkHealth(app: FastifyInstance): HealthResult {
  const result = runHealthChecks(app)
  recordHealth(app, result)
  return result
}
