// What the app carries for the hooks, handlers and features (typed in lib/app.ts), in the
// order they are decorated, and what it closes with it.
import fs from 'node:fs'
import type { FastifyInstance } from 'fastify'
import jwt from '@fastify/jwt'
import type { Config } from '../config.js'
import type { Operation } from '../contract.js'
import type { DB } from '../../db/index.js'
import type { Repos } from '../repos.js'
import { ISSUER, tokenService } from '../auth.js'
import { createMailer } from '../mail.js'
import { createServices, sqliteServicePorts } from '../services.js'
import { readerPool } from './readers.js'
import type { OpenedStorage } from './storage.js'
import { threadTasks, type ThreadTasks } from '../reader-thread.js'

export interface AppParts {
  config: Config
  opened: OpenedStorage
  spec: Record<string, any>
  ops: Map<string, Operation>
}

/** The settings, storage and contract, the request's slots, then the mailer and the features' services. */
export function decorateApp(app: FastifyInstance, { config, opened, spec, ops }: AppParts): void {
  const { storage } = opened
  app.decorate('config', config)
  // SQLite's connection and repositories, for what only SQLite has (its loops, its reader
  // threads); on PostgreSQL everything goes through `storage`.
  app.decorate('db', opened.backend === 'sqlite' ? opened.db : (undefined as unknown as DB))
  app.decorate('repos', opened.backend === 'sqlite' ? opened.repos : (undefined as unknown as Repos))
  app.decorate('storage', storage)
  app.decorate('contract', { spec, operations: ops })
  app.decorate('startedAt', Date.now())
  app.decorateRequest('principal', undefined)
  app.decorateRequest('agent', undefined)
  app.decorateRequest('poller', undefined)
  app.decorateRequest('responseType', undefined)
  app.decorateRequest('op', undefined)
  app.decorateRequest('routine', false)
  app.decorateRequest('primeContext', null)
  app.decorate('mailer', createMailer(config))
  if (opened.backend === 'sqlite') {
    const { db, repos } = opened
    app.decorate(
      'readers',
      readerPool({
        file: config.dbFile,
        cacheMb: config.dbCacheMb,
        settings: config.readers,
        thread: readerThreadModule(),
        // With no threads, the reads run on the server's own connection.
        local: threadTasks(db, { assets: repos.assets }),
        onWarn: (msg) => app.log.warn(msg),
      }),
    )
    // An export's or a large page's ids in a computed order are sorted in a reader thread.
    repos.eventQueries.readIdsWith((sql, params) => app.readers.run('column', [sql, params]))
    storage.ports = sqliteServicePorts(app)
  } else {
    // PostgreSQL's server runs the queries: no reader threads here (the budgets and shares
    // of expensive reads still hold, with no thread to hand a read to).
    app.decorate('readers', readerPool({ file: '', cacheMb: 0, settings: { ...config.readers, threads: 0 }, thread: '', local: {} as ThreadTasks }))
  }
  app.decorate('services', createServices(app, storage.ports!))
}

/**
 * The reader threads' module: the compiled one. Run from the sources (tests), the build in
 * dist/ when there is one (`npm test` builds it first), since a thread compiling the
 * TypeScript of its imports took seconds of CPU at every start; else the source itself.
 */
function readerThreadModule(): string {
  const compiled = new URL(import.meta.url.endsWith('.ts') ? '../../dist/lib/reader-thread.js' : '../reader-thread.js', import.meta.url)
  return fs.existsSync(compiled) ? compiled.href : new URL('../reader-thread.ts', import.meta.url).href
}

/** The mailer and the database close with the app. */
export function closeWithApp(app: FastifyInstance): void {
  // Before the server waits for its in-flight requests (onClose comes after that wait): the
  // expensive reads they wait on are interrupted and answered 503 now, rather than at the end
  // of their budgets.
  app.addHook('preClose', async () => {
    await app.readers.close()
  })
  app.addHook('onClose', async () => {
    app.mailer.close()
    // The phrase queries' thread holds a connection of its own: closed first.
    if (app.storage.backend === 'sqlite') await app.repos.eventQueries.close()
    await app.storage.close()
  })
}

/** JWT signing and verification, and the token service made on it (`app.tokens`). */
export async function registerTokens(app: FastifyInstance): Promise<void> {
  const { config, storage } = app
  await app.register(jwt, {
    secret: config.jwtSecret,
    sign: { algorithm: 'HS256', expiresIn: config.accessTokenTtlSec, iss: ISSUER },
    // Verified tokens are cached by the token service (lib/auth.ts).
    verify: { algorithms: ['HS256'], allowedIss: ISSUER, requiredClaims: ['exp', 'iat', 'iss'] },
  })
  app.decorate('tokens', tokenService(app, config, storage.credentials))
}
