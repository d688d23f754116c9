// The data directory, the database and its repositories, as the app opens them.
import crypto from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { latestSchemaVersion, openDatabase, type DB } from '../../db/index.js'
import { createRepos, type Repos } from '../repos.js'
import { secureDataDir } from '../data-dir.js'
import { sqliteCredentials } from '../../db/credentials.js'
import { quickCheck } from '../../db/integrity.js'
import { asyncPort } from '../../db/unit-of-work.js'
import { openPostgres, pgMigrationFiles, type Postgres } from '../../db/postgres/index.js'
import { createPostgresPorts } from '../repos-postgres.js'
import { sharedSecret } from '../../db/postgres/secrets.js'
import type { ServicePorts } from '../services.js'
import type { AuditStore, CredentialStore, UnitOfWork } from './ports.js'
import type { NotificationLoopStore, RiskFeed } from '../notifications/ports.js'
import type { CoreHealthStore } from '../health.js'
import type { ReportRunStorage } from '../reports/ports.js'
import type { AlarmDeliveryStore } from '../alarms/ports.js'
import type { TextIndexUpkeep } from '../events/ports.js'
import type { LoopLeases } from './loops.js'
import type { CacheRegistry } from './cache.js'
import { pgLoopLeases } from '../../db/postgres/loop-leases.js'
import { pgEventTextDays } from '../../db/postgres/events-text-days.js'

/** The unit of work every backend gives: transactions, group commits, work after a commit. */
export interface StorageUnitOfWork extends UnitOfWork {
  /** The same as `run`, where units arriving together may share one transaction (check-ins). */
  runGrouped<T>(work: () => Promise<T>): Promise<T>
  /** Runs `fn` once the caller's unit of work has committed; false when the caller is in none. */
  afterCommit(fn: () => void): boolean
}

/** What the app reads and writes through, whichever database stands behind it. */
export interface Storage {
  readonly backend: 'sqlite' | 'postgres'
  readonly uow: StorageUnitOfWork
  /** The per-request credential lookups of authentication. */
  readonly credentials: CredentialStore
  readonly audit: AuditStore
  /** The services' ports (SQLite's are made once the reader threads are: lib/platform/decorators.ts). */
  ports?: ServicePorts
  /** What the notifications' loops read and write: the stream's feed, the health checks' records (lib/notifications/index.ts). */
  readonly notificationLoops: NotificationLoopStore
  /** What the platform's health checks read (lib/health.ts). */
  readonly health: CoreHealthStore
  /** What the report scheduler's runs read, and where their files are kept (lib/reports/index.ts). */
  readonly reportRuns: ReportRunStorage
  /** The alarm delivery loop's outbox, failure events and health figures (lib/alarms/index.ts). */
  readonly alarmDelivery: AlarmDeliveryStore
  /**
   * Runs a request's handler as an expensive read where the backend budgets them itself
   * (PostgreSQL: a pool of its own with the budget as statement_timeout); absent where the
   * reader threads do it (SQLite).
   */
  readonly budgeted?: (work: () => void) => void
  /** The database pools' clients now, where there are pools (PostgreSQL): the metrics read them. */
  readonly poolStats?: () => { pool: string; total: number; idle: number; waiting: number }[]
  /** Leases on the singleton loops, where several processes may share the database (lib/platform/loops.ts). */
  readonly loopLeases?: LoopLeases
  /** Text indexes built behind the writes, where the backend keeps some (PostgreSQL: each ended day's of events): a background loop builds them. */
  readonly textIndexUpkeep?: TextIndexUpkeep
  /** Risk notifications raised behind the writes of events, where the backend raises them so (PostgreSQL): a background loop keeps them caught up. */
  readonly riskFeed?: RiskFeed
  /** Resolves when the database takes a write and its schema is this server's; rejects saying why not. */
  ready(): Promise<void>
  /** Closes the database (after the loops and requests are done with it). */
  close(): Promise<void>
}

export type OpenedStorage = { backend: 'sqlite'; db: DB; repos: Repos; storage: Storage; sealed: number } | { backend: 'postgres'; pg: Postgres; storage: Storage; sealed: number }

/**
 * Makes the data directory private, opens the database (PostgreSQL when
 * PRIME_DATABASE_URL is set, else the embedded SQLite file) and its ports, and tidies what
 * an earlier version or run left: `sealed` is what `sealStored` sealed, logged once the app
 * is built.
 */
export async function openStorage(app: FastifyInstance, config: Config): Promise<OpenedStorage> {
  const tightened = secureDataDir(config.dataDir)
  if (tightened.length > 0) {
    app.log.warn({ dataDir: config.dataDir, tightened: tightened.slice(0, 20), count: tightened.length }, 'the data directory was readable by other users: made private (files 0600, folders 0700)')
  }
  if (config.databaseUrl) return openPostgresStorage(config.databaseUrl, config, app.caches)
  const db = openDatabase(config.dbFile, { cacheMb: config.dbCacheMb })
  const repos = createRepos(db, config.keptListAnswers, config.agentlessKey, app.caches)
  // Webhook secrets stored in the clear by an earlier version are sealed now.
  const sealed = repos.alarms.sealStored()
  // Revoked sessions, and those whose refresh tokens have all expired, can never be used again.
  repos.sessions.purge(Date.now())
  const expected = latestSchemaVersion()
  const storage: Storage = {
    backend: 'sqlite',
    uow: repos.uow,
    credentials: sqliteCredentials(repos),
    audit: asyncPort(repos.audit, repos.uow),
    notificationLoops: {
      feed: asyncPort({ ...repos.notifications, changeSeq: () => repos.notifications.counter().seq }, repos.uow),
      // A unit of work, taken only when the change number moved: no other context's statement runs between the reads.
      snapshot: (read) => repos.uow.run(read),
      records: asyncPort(repos.notifications, repos.uow),
      // Synchronous, as SQLite's health checks are.
      licenseUse: repos.notifications.licenseUse,
      authVersion: repos.authVersion,
    },
    health: { system: repos.system, users: repos.users, samples: repos.retention, quickCheck },
    // The files in the data directory.
    reportRuns: { reads: repos.reports, health: repos.reports },
    // The health figures at once, as SQLite's health checks read.
    alarmDelivery: { outbox: asyncPort(repos.alarms, repos.uow), events: asyncPort(repos.events, repos.uow), health: (now) => repos.alarms.health(now), backlog: () => repos.alarms.backlog() },
    async ready() {
      try {
        repos.system.probe()
      } catch {
        throw new Error('The database does not take writes.')
      }
      if (repos.system.schemaVersion() !== expected) throw new Error('The database schema is not at the version of this server.')
    },
    async close() {
      db.close()
    },
  }
  return { backend: 'sqlite', db, repos, storage, sealed }
}

/** The secrets the settings left to the database, shared by every node (db/postgres/secrets.ts). */
async function shareSecrets(pg: Postgres, config: Config): Promise<void> {
  const wanted = config.secretsFromDatabase
  if (wanted.includes('jwt')) config.jwtSecret = (await sharedSecret(pg, 'jwt', () => crypto.randomBytes(48).toString('base64url'))).value
  if (wanted.includes('enrollment')) {
    const s = await sharedSecret(pg, 'agent-enrollment', () => `pes_${crypto.randomBytes(24).toString('base64url')}`)
    config.agents.enrollmentSecret = s.value
    // Announced once, by the node that made it (lib/gateway/index.ts).
    config.agents.enrollmentSecretGenerated = s.made
  }
  if (wanted.includes('agentless')) config.agentlessKey = Buffer.from((await sharedSecret(pg, 'agentless-key', () => crypto.randomBytes(32).toString('base64'))).value, 'base64')
}

/**
 * Connections for expensive reads on PostgreSQL: half the request pool's, so that a burst of
 * them leaves every cheap request its own pool, and enough that a console's concurrent
 * lists (every event list is an expensive operation) do not queue behind one another.
 */
const expensiveClients = (config: Config) => Math.max(1, Math.ceil(config.databasePool / 2))

async function openPostgresStorage(url: string, config: Config, caches: CacheRegistry): Promise<OpenedStorage> {
  const pg = await openPostgres(url, {
    max: config.databasePool,
    budget: { clients: expensiveClients(config), budgetMs: config.readers.deadlineMs },
    commitDelayMs: config.faultCommitDelayMs,
  })
  await shareSecrets(pg, config)
  const made = await createPostgresPorts(pg, config, caches)
  await made.sessions.purge(Date.now())
  // Webhook secrets stored in the clear by an earlier version are sealed now, as on SQLite.
  const sealed = await made.alarms.sealStored()
  const expected = pgMigrationFiles().length
  const storage: Storage = {
    backend: 'postgres',
    uow: pg.uow,
    budgeted: pg.budgeted,
    poolStats: pg.poolStats,
    credentials: made.credentials,
    audit: made.audit,
    ports: made.ports,
    notificationLoops: made.notificationLoops,
    health: { system: made.system, users: made.users },
    // The files in the database (any node serves them); runs under leases (several nodes).
    reportRuns: { reads: made.reports, files: made.reports, leases: made.reports, health: made.reports },
    alarmDelivery: { outbox: made.alarms, events: made.records.events, health: (now) => made.alarms.health(now), backlog: () => made.alarms.backlog() },
    loopLeases: pgLoopLeases(pg),
    textIndexUpkeep: pgEventTextDays(pg),
    riskFeed: made.riskFeed,
    async ready() {
      try {
        await made.system.probe()
      } catch {
        throw new Error('The database does not take writes.')
      }
      if ((await made.system.schemaVersion()) !== expected) throw new Error('The database schema is not at the version of this server.')
    },
    close: () => pg.close(),
  }
  return { backend: 'postgres', pg, storage, sealed }
}
