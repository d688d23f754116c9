// The app's services, made once from its storage, settings and outgoing channels. Handlers
// reach a feature's service here; services reach storage only through the ports given.
import type { FastifyInstance } from 'fastify'
import { asyncPort } from '../db/unit-of-work.js'
import { allowList } from './alarms/address.js'
import { sendRecord } from './alarms/deliver.js'
import { alarmDestinationService } from './alarms/service.js'
import { accountService } from './accounts/service.js'
import { sessionService } from './accounts/sessions.js'
import { auditDeps, auditTrail } from './audit.js'
import { dummyHash, hashPassword, verifyPassword } from './passwords.js'
import { integrationTokenService } from './integration-tokens/service.js'
import { exportColumns } from './events/exports.js'
import { eventService } from './events/service.js'
import { retentionJob } from './retention/job.js'
import type { AuditTrail } from './platform/ports.js'

export function createServices(app: FastifyInstance) {
  const { config, repos } = app
  const uow = repos.uow
  const audit: AuditTrail = auditTrail(auditDeps(app), uow)
  const mail = { mailer: app.mailer, publicUrl: config.publicUrl }
  return {
    uow,
    audit,
    accounts: accountService({
      accounts: asyncPort(repos.users, uow),
      uow,
      audit,
      passwords: { hash: hashPassword, verify: verifyPassword, dummy: dummyHash },
      lockout: { threshold: config.lockoutThreshold, ms: config.lockoutMs },
      startSession: (userId, now) => app.tokens.startSession(userId, now),
    }),
    sessions: sessionService({
      accounts: asyncPort(repos.users, uow),
      sessions: asyncPort(repos.sessions, uow),
      uow,
      audit,
      rotate: (refreshToken, now) => app.tokens.rotate(refreshToken, now),
    }),
    alarms: alarmDestinationService({
      destinations: asyncPort(repos.alarms, uow),
      uow,
      audit,
      log: app.log,
      allow: allowList(config.alarms.allowedHosts, config.alarms.denyPrivate),
      mailConfigured: () => app.mailer.configured(),
      send: (dest, record, ctx, t) => sendRecord(mail, dest, record, ctx, t),
      timeoutMs: config.alarms.timeoutMs,
    }),
    integrationTokens: integrationTokenService({ tokens: asyncPort(repos.integrationTokens, uow), uow, audit, newSecret: () => app.tokens.createIntegrationSecret() }),
    events: eventService({
      events: asyncPort(repos.eventQueries.events, uow),
      auditRecords: asyncPort(repos.eventQueries.audit, uow),
      audit,
      csvColumns: exportColumns(app.contract.spec.components.schemas),
    }),
    retention: retentionJob({
      retention: asyncPort(repos.retention, uow),
      index: asyncPort(repos.eventQueries.indexer, uow),
      applyPrune: (table, delta) => repos.eventQueries.indexer.applyPrune(table, delta),
      audit: asyncPort(repos.audit, uow),
      uow,
      settings: config.retention,
      dataDir: config.dataDir,
      log: app.log,
    }),
  }
}

export type Services = ReturnType<typeof createServices>
