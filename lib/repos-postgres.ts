// The services' ports on PostgreSQL (PRIME_DATABASE_URL), from db/postgres/. A part whose
// PostgreSQL implementation is not built yet answers every call with a 501 problem that
// names it, rather than pretending: its operations are unavailable on PostgreSQL.
import { AuthVersion } from '../db/auth-version.js'
import { pgIntegrationTokensRepo, pgSessionsRepo, pgUsersRepo } from '../db/postgres/accounts.js'
import type { Postgres } from '../db/postgres/index.js'
import { pgSystemRepo } from '../db/postgres/system.js'
import { pgAssetsRepo } from '../db/postgres/assets.js'
import { pgAgentlessRepo } from '../db/postgres/agentless.js'
import { pgAgentsRepo } from '../db/postgres/agents.js'
import { pgPeripheralsRepo } from '../db/postgres/peripherals.js'
import { pgExportsRepo } from '../db/postgres/exports.js'
import { pgInsightsRepo } from '../db/postgres/insights.js'
import { pgReportsRepo } from '../db/postgres/reports.js'
import { agentListView } from './agents/views.js'
import { assetView } from './assets/views.js'
import { eventCodes } from './event-codes.js'
import { pgEventParts } from '../db/postgres/events.js'
import { pgLatestEventTexts } from '../db/postgres/agent-texts.js'
import { alarmLeaseMs, pgAlarmsRepo } from '../db/postgres/alarms.js'
import { pgGatewayRepo } from '../db/postgres/gateway.js'
import { pgAgentStateRepo } from '../db/postgres/agent-state.js'
import { pgCommandsRepo } from '../db/postgres/commands.js'
import { pgCatalogueRepo } from '../db/postgres/catalogue.js'
import { pgNotificationsRepo, type PgNotificationsRepo } from '../db/postgres/notifications.js'
import { pgRiskRaiser } from '../db/postgres/risk.js'
import { pgRiskFeed, type PgRiskFeed } from '../db/postgres/risk-feed.js'
import { pgRetentionRepo } from '../db/postgres/retention.js'
import { pgEventQueue } from '../db/postgres/alarm-queue.js'
import type { CacheRegistry } from './platform/cache.js'
import type { Config } from './config.js'
import { settingsSealer } from './alarms/sealed-settings.js'
import { vault } from './vault.js'
import { problem } from './errors.js'
import type { CredentialStore } from './platform/ports.js'
import type { ServicePorts } from './services.js'
import type { NotificationLoopStore } from './notifications/ports.js'

/** A port whose every method answers 501: `part` is not built on PostgreSQL yet. */
export function notBuilt<T extends object>(part: string): T {
  return new Proxy({} as T, {
    get(_target, name) {
      // Not a thenable: a port may be awaited as a whole without becoming a rejection.
      if (name === 'then' || typeof name === 'symbol') return undefined
      return () => Promise.reject(problem('not-implemented', `${part} is not available on PostgreSQL yet (${String(name)}); run the server on its embedded SQLite database for it.`))
    },
  })
}

/** `caches`: the app's cache registry (lib/platform/cache.ts), where the repositories make their caches. */
export async function createPostgresPorts(pg: Postgres, config: Config, caches?: CacheRegistry) {
  const authVersion = new AuthVersion(undefined, pg.uow.afterCommit)
  const users = pgUsersRepo(pg, authVersion)
  const sessions = pgSessionsRepo(pg, authVersion)
  const integrationTokens = pgIntegrationTokensRepo(pg, authVersion)
  const system = pgSystemRepo(pg)
  const risk = pgRiskRaiser(pg)
  // The risk notifications are raised behind the writes (db/postgres/risk-feed.ts), not by the recorder.
  const records = pgEventParts(pg, { agentTexts: pgLatestEventTexts(pg) }, { countBudgetMs: config.pgCountBudgetMs })
  const riskFeed = pgRiskFeed(pg, risk)
  const alarms = pgAlarmsRepo(pg, settingsSealer(vault(config.agentlessKey)), { leaseMs: alarmLeaseMs(config.alarms.timeoutMs) })
  const audit = records.audit
  // The seats read at each activation, as the sweeper reads them (a license's terms may change while the app runs).
  const gateway = pgGatewayRepo(pg, {
    get seats() {
      return config.license.seats
    },
  })
  const agentState = pgAgentStateRepo(pg)
  const agentless = pgAgentlessRepo(pg)
  const assets = pgAssetsRepo(pg)
  const reports = pgReportsRepo(pg)
  const insights = pgInsightsRepo(pg, [eventCodes.whitelistViolation.code, eventCodes.unapprovedOnArmed.code])
  // The notifications' loops (lib/notifications/index.ts): the stream's feed and the health checks' records.
  const notifications = raisedFirst(pg, riskFeed, pgNotificationsRepo(pg))
  const notificationLoops: NotificationLoopStore = {
    feed: notifications,
    // A REPEATABLE READ read-only transaction: every read in it sees one snapshot (the risk notifications raised first).
    snapshot: async (read) => {
      if (pg.uow.inUnit()) return read()
      await riskFeed.catchUp()
      return pg.uow.run(async () => {
        await pg.run('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY')
        return read()
      })
    },
    records: notifications,
    licenseUse: () => notifications.licenseUse(),
    authVersion,
  }
  const credentials: CredentialStore = {
    agentByCredential: (hash) => gateway.byCredential(hash),
    heldAgentCredential: async (hash) => (await gateway.heldReEnrollmentByCredential(hash)) !== undefined,
    pollerByCredential: (hash) => agentless.pollerByCredential(hash),
    integrationToken: (hash) => integrationTokens.byHash(hash),
    touchIntegrationToken: (id, now) => integrationTokens.touch(id, now),
    sessionPrincipal: (sessionId) => sessions.principal(sessionId),
    createSession: (sessionId, userId, now) => sessions.create(sessionId, userId, now),
    addRefreshToken: (hash, sessionId, now, expiresMs) => sessions.addRefreshToken(hash, sessionId, now, expiresMs),
    refreshToken: (hash) => sessions.refreshToken(hash),
    useRefreshToken: (hash, now) => sessions.useRefreshToken(hash, now),
    revokeSession: (sessionId, reason, now) => sessions.revoke(sessionId, reason, now),
  }
  const ports: ServicePorts = {
    users,
    sessions,
    integrationTokens,
    system,
    accountCounts: { counts: () => users.counts() },
    alarmDestinations: alarms,
    gatewayStore: gateway,
    eventRecorder: records.events,
    agentState,
    agentless,
    agentlessAssets: alarms,
    assets: {
      total: () => assets.total(),
      summary: (rare, since) => assets.summary(rare, since),
      // biome-ignore lint/correctness/useYield: one statement, the server's work: nothing to yield between, a generator only as the port's shape
      async *switches(since) {
        return await assets.switches(since)
      },
      // One statement reads the page; its views are made here (no reader thread on PostgreSQL).
      async pageJson(q, sort, limit, offset, maxHosts) {
        const p = await assets.page(q, sort, limit, offset)
        return { filtered: p.filtered, json: JSON.stringify(p.rows.map((r) => assetView(r, maxHosts))) }
      },
    },
    insights,
    reports,
    catalogue: pgCatalogueRepo(pg),
    catalogueFollowers: { refreshModel: (vid, pid) => agentState.refreshModel(vid, pid), invalidateInsight: (name) => insights.invalidate(name) },
    notifications,
    agents: pgAgentsRepo(pg, agentListView, { countBudgetMs: config.pgCountBudgetMs, caches }),
    peripherals: pgPeripheralsRepo(pg, { countBudgetMs: config.pgCountBudgetMs, caches }),
    commands: pgCommandsRepo(pg),
    reEnrollments: gateway,
    exports: pgExportsRepo(pg),
    eventRecords: records.queries.events,
    auditRecords: records.queries.audit,
    retention: pgRetentionRepo(pg, records.retention, pgEventQueue(pg)),
    // Counts follow deletes by trigger (migration 004): no index to wait for, nothing held in memory.
    retentionIndex: { indexed: records.retention.indexed, prune: records.retention.prune },
    applyPrune: () => {},
    systemAudit: audit,
  }
  return { ports, credentials, audit, system, users, sessions, agentless, records, alarms, gateway, agentState, authVersion, notificationLoops, reports, riskFeed }
}

/**
 * The notifications repository whose reads of risk notifications first raise those of every
 * event written before them (they are raised behind the writes, db/postgres/risk-feed.ts), as
 * SQLite raises them in the writing transaction. Inside a unit of work nothing is raised (the
 * unit's own snapshot could not see them): the caller caught up before it began.
 */
function raisedFirst(pg: Postgres, feed: PgRiskFeed, repo: PgNotificationsRepo): PgNotificationsRepo {
  const first =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      if (!pg.uow.inUnit()) await feed.catchUp()
      return fn(...args)
    }
  return {
    ...repo,
    counter: first(repo.counter),
    changeSeq: first(repo.changeSeq),
    risk: first(repo.risk),
    relatedEvents: first(repo.relatedEvents),
    riskList: first(repo.riskList),
    pinRisk: first(repo.pinRisk),
    dismissRisk: first(repo.dismissRisk),
    riskChangedSince: first(repo.riskChangedSince),
    riskPinned: first(repo.riskPinned),
    riskBetween: first(repo.riskBetween),
    marks: first(repo.marks),
  }
}
