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
import type { Storage } from './storage.js'
import { threadTasks } from '../reader-thread.js'

export interface AppParts {
  config: Config
  db: DB
  repos: Repos
  storage: Storage
  spec: Record<string, any>
  ops: Map<string, Operation>
}

/** The settings, storage and contract, the request's slots, then the mailer and the features' services. */
export function decorateApp(app: FastifyInstance, { config, db, repos, storage, spec, ops }: AppParts): void {
  app.decorate('config', config)
  app.decorate('db', db)
  app.decorate('repos', repos)
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
  app.decorate('services', createServices(app, sqliteServicePorts(app)))
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
  app.addHook('onClose', async () => {
    app.mailer.close()
    // The phrase queries' thread holds a connection of its own: closed first.
    await app.repos.eventQueries.close()
    await app.readers.close()
    app.db.close()
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
