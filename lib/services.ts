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
import type { AuditTrail } from './platform/ports.js'
import { reportService } from './reports/service.js'

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
    reports: reportService({
      reports: asyncPort(repos.reports, uow),
      uow,
      audit,
      dataDir: config.dataDir,
      mail: { mailer: app.mailer, smtpUrl: config.smtp.url, publicUrl: config.publicUrl, dataDir: config.dataDir },
      // The scheduler is the app's loop, made after the services.
      runs: { kick: () => void app.reportScheduler.kick().catch((err) => app.log.error({ err }, 'report runs could not be started')), abortRunsOf: (id) => app.reportScheduler.abortRunsOf(id) },
    }),
    integrationTokens: integrationTokenService({ tokens: asyncPort(repos.integrationTokens, uow), uow, audit, newSecret: () => app.tokens.createIntegrationSecret() }),
  }
}

export type Services = ReturnType<typeof createServices>
