// The data directory, the database and its repositories, as the app opens them.
import type { FastifyInstance } from 'fastify'
import type { Config } from '../config.js'
import { openDatabase, type DB } from '../../db/index.js'
import { createRepos, type Repos } from '../repos.js'
import { vault } from '../vault.js'
import { settingsSealer } from '../alarms/sealed-settings.js'
import { secureDataDir } from '../data-dir.js'
import { sqliteCredentials } from '../../db/credentials.js'
import { asyncPort } from '../../db/unit-of-work.js'
import type { AuditStore, CredentialStore, UnitOfWork } from './ports.js'

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
}

/**
 * Makes the data directory private, opens the database and its repositories, and tidies
 * what an earlier version or run left: `sealed` is what `sealStored` sealed, logged once
 * the app is built.
 */
export function openStorage(app: FastifyInstance, config: Config): { db: DB; repos: Repos; storage: Storage; sealed: number } {
  const tightened = secureDataDir(config.dataDir)
  if (tightened.length > 0) {
    app.log.warn({ dataDir: config.dataDir, tightened: tightened.slice(0, 20), count: tightened.length }, 'the data directory was readable by other users: made private (files 0600, folders 0700)')
  }
  const db = openDatabase(config.dbFile, { cacheMb: config.dbCacheMb })
  const repos = createRepos(db, config.keptListAnswers, settingsSealer(vault(config.agentlessKey)))
  // Webhook secrets stored in the clear by an earlier version are sealed now.
  const sealed = repos.alarms.sealStored()
  // Revoked sessions, and those whose refresh tokens have all expired, can never be used again.
  repos.sessions.purge(Date.now())
  const storage: Storage = { backend: 'sqlite', uow: repos.uow, credentials: sqliteCredentials(repos), audit: asyncPort(repos.audit, repos.uow) }
  return { db, repos, storage, sealed }
}
