// The app's services, made once from its storage, settings and outgoing channels. Handlers
// reach a feature's service here; services reach storage only through the ports given.
import type { FastifyInstance } from 'fastify'
import { asyncPort } from '../db/unit-of-work.js'
import { allowList } from './alarms/address.js'
import { sendRecord } from './alarms/deliver.js'
import { alarmDestinationService } from './alarms/service.js'
import { accountService } from './accounts/service.js'
import { agentlessService } from './agentless/service.js'
import { assetService } from './assets/service.js'
import { sessionService } from './accounts/sessions.js'
import { auditDeps, auditTrail } from './audit.js'
import { catalogueService } from './catalogue/service.js'
import { dummyHash, hashPassword, verifyPassword } from './passwords.js'
import { insightService } from './insights/service.js'
import { integrationTokenService } from './integration-tokens/service.js'
import { agentGateway } from './gateway/service.js'
import { notificationService } from './notifications/service.js'
import { groupNames } from './notifications/views.js'
import { agentService } from './agents/service.js'
import { exportColumns } from './events/exports.js'
import { eventService } from './events/service.js'
import { retentionJob } from './retention/job.js'
import type { AuditTrail } from './platform/ports.js'
import { vault } from './vault.js'
import { reportService } from './reports/service.js'
import { runFiles } from './reports/files.js'
import { systemService } from './system/service.js'
import fs from 'node:fs'
import type { PlannedRead } from '../db/sql.js'
import type { PruneDelta } from '../db/event-engine/index.js'

type DepsOf<F extends (deps: any) => unknown> = Parameters<F>[0]

/**
 * The storage ports the services are made of, one set per backend: SQLite's over its
 * repositories (below), PostgreSQL's in lib/platform/storage.ts.
 */
export interface ServicePorts {
  users: DepsOf<typeof accountService>['accounts']
  sessions: DepsOf<typeof sessionService>['sessions']
  alarmDestinations: DepsOf<typeof alarmDestinationService>['destinations']
  gatewayStore: DepsOf<typeof agentGateway>['store']
  eventRecorder: DepsOf<typeof agentGateway>['events']
  agentState: DepsOf<typeof agentGateway>['agentState']
  agentless: DepsOf<typeof agentlessService>['store']
  agentlessAssets: DepsOf<typeof agentlessService>['assets']
  assets: DepsOf<typeof assetService>['assets']
  insights: DepsOf<typeof insightService>['insights'] & DepsOf<typeof assetService>['insights']
  reports: DepsOf<typeof reportService>['reports']
  integrationTokens: DepsOf<typeof integrationTokenService>['tokens']
  catalogue: DepsOf<typeof catalogueService>['catalogue']
  catalogueFollowers: DepsOf<typeof catalogueService>['followers']
  notifications: DepsOf<typeof notificationService>['notifications']
  system: DepsOf<typeof systemService>['system']
  accountCounts: DepsOf<typeof systemService>['accounts']
  agents: DepsOf<typeof agentService>['agents']
  peripherals: DepsOf<typeof agentService>['peripherals']
  commands: DepsOf<typeof agentService>['commands']
  reEnrollments: DepsOf<typeof agentService>['reEnrollments']
  exports: DepsOf<typeof agentService>['exports']
  eventRecords: DepsOf<typeof eventService>['events']
  auditRecords: DepsOf<typeof eventService>['auditRecords']
  retention: DepsOf<typeof retentionJob>['retention']
  retentionIndex: DepsOf<typeof retentionJob>['index']
  applyPrune: DepsOf<typeof retentionJob>['applyPrune']
  systemAudit: DepsOf<typeof retentionJob>['audit']
}

/** The budget of a batch of check-ins on SQLite (ms), its commit included. */
const GATEWAY_BATCH_MS = 12

/** SQLite's ports: its repositories made Promise-returning (asyncPort), large reads in reader threads. */
export function sqliteServicePorts(app: FastifyInstance): ServicePorts {
  const { repos } = app
  const uow = repos.uow
  /** A large page's ids: planned on the server's connection, read in a reader thread under the read budget. */
  const idsInThread =
    <A extends unknown[]>(plan: (...args: A) => { total: number; filtered: number; read: PlannedRead | null }) =>
    async (...args: A) => {
      const { total, filtered, read } = plan(...args)
      return { total, filtered, ids: read ? await app.readers.run('column', [read.sql, read.params]) : [] }
    }
  const assetsPort = asyncPort(repos.assets, uow)
  return {
    users: asyncPort(repos.users, uow),
    sessions: asyncPort(repos.sessions, uow),
    alarmDestinations: asyncPort(repos.alarms, uow),
    gatewayStore: asyncPort(repos.gateway, uow),
    eventRecorder: asyncPort(repos.events, uow),
    agentState: asyncPort(repos.agentState, uow),
    // The connections stream a page at a time: that method stays as the repository gives it.
    agentless: { ...asyncPort(repos.agentless, uow), connectionsInPages: repos.agentless.connectionsInPages },
    agentlessAssets: asyncPort(repos.alarms, uow),
    assets: {
      // The counts are read a range of rows at a time: that method stays as the repository gives it.
      // A page is read in a reader thread, under the read budget (lib/platform/readers.ts).
      ...assetsPort,
      summary: repos.assets.summary,
      switches: repos.assets.switches,
      // The thread keeps its paging state by where the server's connection says the data
      // stands (asked through the port: never inside another context's open unit of work).
      pageJson: async (q, sort, limit, offset, maxHosts) => app.readers.run('assetsPageJson', [q, sort, limit, offset, maxHosts, await assetsPort.dataAt()]),
    },
    insights: asyncPort(repos.insights, uow),
    reports: asyncPort(repos.reports, uow),
    integrationTokens: asyncPort(repos.integrationTokens, uow),
    catalogue: asyncPort(repos.catalogue, uow),
    catalogueFollowers: asyncPort({ refreshModel: repos.agentState.refreshModel, invalidateInsight: repos.insights.invalidate }, uow),
    notifications: asyncPort(repos.notifications, uow),
    system: asyncPort(repos.system, uow),
    accountCounts: asyncPort({ counts: repos.users.counts }, uow),
    // A large page's ids are planned here (counts, in-memory searches) and read in a reader thread.
    agents: { ...asyncPort(repos.agents, uow), pageIds: idsInThread(repos.agents.pageIdsRead) },
    peripherals: { ...asyncPort(repos.peripherals, uow), pageIds: idsInThread(repos.peripherals.pageIdsRead) },
    commands: asyncPort(repos.commands, uow),
    reEnrollments: asyncPort(repos.gateway, uow),
    exports: asyncPort(repos.exports, uow),
    eventRecords: asyncPort(repos.eventQueries.events, uow),
    auditRecords: asyncPort(repos.eventQueries.audit, uow),
    retention: asyncPort(repos.retention, uow),
    retentionIndex: asyncPort(repos.eventQueries.indexer, uow),
    // The delta is the one this indexer's prune answered: the port names only its id range.
    applyPrune: (table, delta) => repos.eventQueries.indexer.applyPrune(table, delta as PruneDelta),
    systemAudit: asyncPort(repos.audit, uow),
  }
}

export function createServices(app: FastifyInstance, ports: ServicePorts) {
  const { config } = app
  const uow = app.storage.uow
  const audit: AuditTrail = auditTrail(auditDeps(app))
  const mail = { mailer: app.mailer, publicUrl: config.publicUrl }
  return {
    uow,
    audit,
    accounts: accountService({
      accounts: ports.users,
      uow,
      audit,
      passwords: { hash: hashPassword, verify: verifyPassword, dummy: dummyHash },
      lockout: { threshold: config.lockoutThreshold, ms: config.lockoutMs },
      startSession: (userId, now) => app.tokens.startSession(userId, now),
    }),
    sessions: sessionService({
      accounts: ports.users,
      sessions: ports.sessions,
      uow,
      audit,
      rotate: (refreshToken, now) => app.tokens.rotate(refreshToken, now),
    }),
    alarms: alarmDestinationService({
      destinations: ports.alarmDestinations,
      uow,
      audit,
      log: app.log,
      allow: allowList(config.alarms.allowedHosts, config.alarms.denyPrivate),
      mailConfigured: () => app.mailer.configured(),
      send: (dest, record, ctx, t) => sendRecord(mail, dest, record, ctx, t),
      timeoutMs: config.alarms.timeoutMs,
    }),
    gateway: agentGateway({
      store: ports.gatewayStore,
      events: ports.eventRecorder,
      agentState: ports.agentState,
      uow,
      checkIns: config.agents.groupCommit ? { run: uow.runGrouped } : uow,
      batchCheckIns: config.agents.groupCommit,
      // A batch's statements hold the event loop on SQLite, and its answers are written in the
      // same turn: 12 ms, below an idle slice's 20. At 100,000 agents, 2,000 first check-ins
      // 10 at a time: turns over 35 ms 11-13 times instead of 44-52, the longest 42-50 ms
      // instead of 57-59, for 145-149 first check-ins a second instead of 157-166.
      batchBudgetMs: app.storage.backend === 'sqlite' ? GATEWAY_BATCH_MS : undefined,
      audit,
      log: app.log,
      settings: { agents: config.agents, license: config.license, rateLimitWindowMs: config.rateLimitWindowMs, agentRequests: config.credentialRateLimits.agent },
    }),
    agentless: agentlessService({
      store: ports.agentless,
      events: ports.eventRecorder,
      assets: ports.agentlessAssets,
      uow,
      audit,
      log: app.log,
      vault: vault(config.agentlessKey),
      settings: config.agentless,
    }),
    assets: assetService({
      assets: ports.assets,
      insights: ports.insights,
      uncommonMaxHosts: config.agents.uncommonPeripheralMaxHosts,
      newHours: config.assets.newHours,
    }),
    reports: reportService({
      reports: ports.reports,
      uow,
      audit,
      dataDir: config.dataDir,
      files: runFiles(app.storage.reportRuns, config.dataDir),
      mail: { mailer: app.mailer, smtpUrl: config.smtp.url, publicUrl: config.publicUrl, dataDir: config.dataDir },
      // The scheduler is the app's loop, made after the services.
      runs: { kick: () => void app.reportScheduler.kick().catch((err) => app.log.error({ err }, 'report runs could not be started')), abortRunsOf: (id) => app.reportScheduler.abortRunsOf(id) },
    }),
    integrationTokens: integrationTokenService({ tokens: ports.integrationTokens, uow, audit, newSecret: () => app.tokens.createIntegrationSecret() }),
    catalogue: catalogueService({
      catalogue: ports.catalogue,
      followers: ports.catalogueFollowers,
      uow,
      audit,
    }),
    insights: insightService({
      insights: ports.insights,
      uow,
      disconnectSeconds: config.agents.disconnectSeconds,
      uncommonMaxHosts: config.agents.uncommonPeripheralMaxHosts,
    }),
    notifications: notificationService({
      notifications: ports.notifications,
      uow,
      audit,
      groupNames: groupNames(app.contract.spec),
      keptAnswers: config.keptListAnswers,
      caches: app.caches,
      // The health checks' runner and the streams' hub are made with the app's loops (lib/notifications/index.ts).
      ensureChecked: async () => {
        if (app.notifications.checkedMs === 0) await app.notifications.checkHealth()
      },
      markedRead: (key, kind, from, to) => void app.notifications.hub.markedRead(key, kind, from, to),
    }),
    system: systemService({
      system: ports.system,
      accounts: ports.accountCounts,
      license: config.license,
      startedAt: () => app.startedAt,
      walSizeBytes: () => (fs.existsSync(`${config.dbFile}-wal`) ? fs.statSync(`${config.dbFile}-wal`).size : 0),
    }),
    agents: agentService({
      agents: ports.agents,
      peripherals: ports.peripherals,
      commands: ports.commands,
      agentState: ports.agentState,
      reEnrollments: ports.reEnrollments,
      exports: ports.exports,
      uow,
      audit,
      publicAddress: config.agents.publicAddress,
    }),
    events: eventService({
      events: ports.eventRecords,
      auditRecords: ports.auditRecords,
      audit,
      csvColumns: exportColumns(app.contract.spec.components.schemas),
      keptAnswers: config.keptListAnswers,
      caches: app.caches,
    }),
    retention: retentionJob({
      retention: ports.retention,
      index: ports.retentionIndex,
      applyPrune: ports.applyPrune,
      audit: ports.systemAudit,
      uow,
      settings: config.retention,
      dataDir: config.dataDir,
      log: app.log,
    }),
  }
}

export type Services = ReturnType<typeof createServices>
