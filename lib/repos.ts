import type { DB } from '../db/index.js'
import { usersRepo } from '../db/users.js'
import { sessionsRepo } from '../db/sessions.js'
import { integrationTokensRepo } from '../db/integration-tokens.js'
import { auditRepo } from '../db/audit.js'
import { systemRepo } from '../db/system.js'
import { AuthVersion, otherConnectionsCommits } from '../db/auth-version.js'
import { CheckInTimeWrites } from '../db/answer-cache.js'
import type { CacheRegistry } from './platform/cache.js'
import { agentStateRepo } from '../db/agent-state.js'
import { gatewayRepo } from '../db/gateway.js'
import { eventsRepo } from '../db/events.js'
import { agentsRepo } from '../db/agents.js'
import { agentSearch } from '../db/filters.js'
import { agentTexts } from '../db/agent-texts.js'
import { peripheralsRepo } from '../db/peripherals.js'
import { commandsRepo } from '../db/commands.js'
import { catalogueRepo } from '../db/catalogue.js'
import { insightsRepo } from '../db/insights.js'
import { exportsRepo } from '../db/exports.js'
import { eventQueriesRepo } from '../db/event-engine/index.js'
import { retentionRepo } from '../db/retention.js'
import { alarmsRepo } from '../db/alarms.js'
import { settingsSealer } from './alarms/sealed-settings.js'
import { vault } from './vault.js'
import { reportsRepo } from '../db/reports.js'
import { notificationsRepo } from '../db/notifications.js'
import { agentlessRepo } from '../db/agentless.js'
import { ftsUpkeep } from '../db/fts-upkeep.js'
import { assetsRepo } from '../db/assets.js'
import { sqliteUnitOfWork } from '../db/unit-of-work.js'
import { eventCodes } from './event-codes.js'
import { agentListView } from './agents/views.js'

/**
 * `keptAnswers`: list answers kept while the database is unchanged (0: none). `sealingKey`:
 * the key that seals alarm destinations' secrets at rest (the server always gives one);
 * the sealer is chosen here, in the wiring, so that the platform's storage names no feature.
 * `caches`: the app's cache registry (lib/platform/cache.ts), where the repositories make their caches.
 */
export function createRepos(db: DB, keptAnswers = 64, sealingKey?: Buffer, caches?: CacheRegistry) {
  const sealer = sealingKey !== undefined ? settingsSealer(vault(sealingKey)) : undefined
  const uow = sqliteUnitOfWork(db)
  const authVersion = new AuthVersion(otherConnectionsCommits(db), uow.afterCommit)
  const checkInTimes = new CheckInTimeWrites()
  const search = agentSearch(db, agentTexts(db))
  return {
    users: usersRepo(db, authVersion, caches),
    sessions: sessionsRepo(db, authVersion),
    integrationTokens: integrationTokensRepo(db, authVersion),
    audit: auditRepo(db),
    system: systemRepo(db),
    agentState: agentStateRepo(db),
    gateway: gatewayRepo(db, checkInTimes),
    events: eventsRepo(db),
    agents: agentsRepo(db, checkInTimes, search, agentListView, keptAnswers, caches),
    peripherals: peripheralsRepo(db, checkInTimes, search, keptAnswers, caches),
    commands: commandsRepo(db),
    catalogue: catalogueRepo(db),
    insights: insightsRepo(db, [eventCodes.whitelistViolation.code, eventCodes.unapprovedOnArmed.code]),
    exports: exportsRepo(db, search),
    eventQueries: eventQueriesRepo(db, { caches }),
    alarms: alarmsRepo(db, sealer),
    reports: reportsRepo(db, search),
    agentTexts: search.texts,
    notifications: notificationsRepo(db),
    agentless: agentlessRepo(db),
    ftsUpkeep: ftsUpkeep(db),
    assets: assetsRepo(db, checkInTimes),
    /** Moves with every write that may end a credential (see db/auth-version.ts). */
    authVersion,
    retention: retentionRepo(db),
    /** The one unit of work over this connection: services' transactions (db/unit-of-work.ts). */
    uow,
  }
}
export type Repos = ReturnType<typeof createRepos>
