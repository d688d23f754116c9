// Notifications at run time: the periodic health checks that open and resolve
// system-health notifications, and the hub of the live stream.
import type { FastifyInstance } from 'fastify'
import { registerHealthCheck, type HealthStatus } from '../platform/health.js'
import { recordHealth, type HealthResult } from './health.js'
import { runHealthChecks } from '../health.js'
import { groupNames } from './views.js'
import { notificationHub, type NotificationHub } from './stream.js'
import { everyInterval, type Loop } from '../platform/loops.js'
import { then, type Maybe } from '../platform/maybe.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The notification stream's hub and the health checks' runner. */
    notifications: NotificationService
  }
}

export interface NotificationService {
  hub: NotificationHub
  /** Runs the health checks now and records their results (as the periodic run does). */
  checkHealth(): Promise<HealthResult>
  /** When the health checks last ran in this process (0: not yet). */
  readonly checkedMs: number
}

const DAY = 86_400_000
/** A license expiring within this many days is a warning. */
const EXPIRY_WARNING_DAYS = 30
/** Seat use at or above this share is a warning. */
const SEAT_WARNING = 0.9

/**
 * The health checks (every PRIME_HEALTH_CHECK_SECONDS) and the stream's hub, as the app's
 * loops, and the license's health check; both stop as closing begins, open streams first so
 * that the server can close. The same on both backends, over `app.storage.notificationLoops`.
 */
export function notificationLoops(app: FastifyInstance): Loop[] {
  const intervalMs = app.config.healthCheckSeconds * 1000
  const store = app.storage.notificationLoops
  const hub = notificationHub({
    feed: store.feed,
    snapshot: store.snapshot,
    authVersion: store.authVersion,
    authenticate: (token, now) => app.tokens.authenticate(token, now),
    tokenExpiry: (token) => (app.jwt.decode<{ exp?: number }>(token)?.exp ?? 0) * 1000,
    log: app.log,
  })
  let checkedMs = 0
  const recorder = { records: store.records, uow: app.storage.uow, groups: new Set(groupNames(app.contract.spec)) }
  const service: NotificationService = {
    hub,
    async checkHealth() {
      const result = await runHealthChecks(app)
      await recordHealth(recorder, result)
      checkedMs = Date.now()
      // The changes reach the streams now rather than at the next look.
      await hub.poll().catch((err) => app.log.error({ err }, 'notification stream poll failed'))
      return result
    },
    get checkedMs() {
      return checkedMs
    },
  }
  app.decorate('notifications', service)
  const license = { license: app.config.license, use: () => store.licenseUse() }
  registerHealthCheck(app, { name: 'License', check: () => licenseHealth(license) })
  return [
    // Each process serves its own streams.
    { name: 'notification-stream', singleton: false, stopsFirst: true, start: () => hub.start(), stop: () => hub.stop() },
    // The notifications it opens and resolves are shared: one process at a time (two at once
    // record a check twice at worst: each group's row is locked while its result is recorded).
    { ...everyInterval(app.log, { name: 'health-checks', singleton: true, intervalMs, what: 'recording the health checks' }, () => service.checkHealth()), stopsFirst: true },
  ]
}

/** What the license check reads: the license's terms (PRIME_LICENSE_*) and the seats in use. */
export interface LicenseHealthDeps {
  license: { seats: number; expirationDate: string | null }
  /** At once on SQLite, through a Promise on PostgreSQL. */
  use(): Maybe<{ activated: number; pending: number; invalid: number }>
}

/** The license's health: expiry and seats (at once when the seats in use are read at once). */
export function licenseHealth(deps: LicenseHealthDeps): Maybe<{ status: HealthStatus; detail: string }> {
  return then(deps.use(), (use) => licenseVerdict(deps.license, use))
}

function licenseVerdict({ seats, expirationDate }: LicenseHealthDeps['license'], use: { activated: number; pending: number; invalid: number }): { status: HealthStatus; detail: string } {
  const now = Date.now()
  const pct = seats > 0 ? Math.round((use.activated / seats) * 1000) / 10 : 0
  const parts = [`${use.activated} of ${seats} seats used (${pct} %)`]
  const warnings: string[] = []
  let status: HealthStatus = 'Healthy'
  if (expirationDate !== null) {
    const expires = Date.parse(expirationDate)
    const days = Math.ceil((expires - now) / DAY)
    if (expires <= now) {
      status = 'Failed'
      parts.unshift(`License expired on ${expirationDate}; agents are no longer protected`)
    } else {
      parts.push(`expires ${expirationDate} (in ${days} day${days === 1 ? '' : 's'})`)
      if (days <= EXPIRY_WARNING_DAYS) warnings.push(`expires within ${EXPIRY_WARNING_DAYS} days`)
    }
  } else {
    parts.push('no expiry date')
  }
  if (use.pending > 0) warnings.push(`${use.pending} agent${use.pending === 1 ? ' waits' : 's wait'} for a free seat`)
  else if (seats > 0 && use.activated / seats >= SEAT_WARNING) warnings.push(`${Math.round(SEAT_WARNING * 100)} % of the seats or more are in use`)
  if (use.invalid > 0) warnings.push(`${use.invalid} agent${use.invalid === 1 ? ' reports' : 's report'} another license account`)
  if (status === 'Healthy' && warnings.length) status = 'Warning'
  const detail = [parts.join('; '), ...warnings].join('; ')
  return { status, detail: detail + '.' }
}

/** How often the risk feed looks for events whose notifications are not raised yet (PostgreSQL). */
const RISK_FEED_MS = 100

/**
 * Raises the risk notifications of new events where the backend raises them behind the
 * writes (PostgreSQL), every RISK_FEED_MS: the stream and the console see them within about
 * that (a read of the notifications raises what is left first). One process at a time.
 */
export function riskFeedLoop(app: FastifyInstance): Loop | undefined {
  const feed = app.storage.riskFeed
  if (!feed) return undefined
  return everyInterval(app.log, { name: 'risk-feed', singleton: true, intervalMs: RISK_FEED_MS, what: 'raising risk notifications' }, () => feed.catchUp())
}
