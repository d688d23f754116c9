// The app, composed of the platform's parts (lib/platform/) in the order they must be
// registered: the instance, storage, decorators, tokens, the background loops and health
// checks, the request pipeline, the GraphQL executor, the routes, the documentation.
// Only this module imports handlers/ (the routes' handlers, through fastify-openapi-glue).
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import openapiGlue from 'fastify-openapi-glue'
import multipart from '@fastify/multipart'
import type { Config } from './config.js'
import { loadSpec, operations, routingView, takesMultipart, type Operation } from './contract.js'
import type { DB } from '../db/index.js'
import { CacheRegistry } from './platform/cache.js'
import type { Repos } from './repos.js'
import type { Principal, TokenService } from './auth.js'
import { refusalFlushLoop } from './audit.js'
import { resolveHandler } from '../handlers/index.js'
import { bootstrapAdmin } from './accounts/index.js'
import { registerDocs } from './docs.js'
import type { LineBatcher } from './log.js'
import { announceEnrollmentSecret, gatewaySweeperLoop } from './gateway/index.js'
import { agentSearchLoop, searchUpkeepLoop } from './search-upkeep.js'
import { textIndexLoop } from './events/text-index.js'
import { eventIndexLoop } from './events/indexing.js'
import type { Mailer } from './mail.js'
import { alarmDeliveryLoop } from './alarms/index.js'
import { reportSchedulerLoop } from './reports/index.js'
import { notificationLoops, riskFeedLoop } from './notifications/index.js'
import { agentlessLoop } from './agentless/index.js'
import { registerAssetGraph } from './assets/index.js'
import { registerLifecycle } from './probes.js'
import { retentionLoop } from './retention/index.js'
import { registerLoops } from './platform/loops.js'
import { checkpointerLoop } from './platform/checkpointer.js'
import { registerHealthChecks } from './platform/health.js'
import { registerCoreHealthChecks } from './health.js'
import type { Services } from './services.js'
import type { Readers } from './platform/readers.js'
import type { ThreadTasks } from './reader-thread.js'
import type { GatewayAgent } from './gateway/ports.js'
import type { PollerRow } from './agentless/ports.js'
import { createInstance, registerOnListen } from './platform/instance.js'
import { openStorage, type Storage } from './platform/storage.js'
import { closeWithApp, decorateApp, registerTokens } from './platform/decorators.js'
import { registerMetrics } from './platform/metrics.js'
import { errorHandler } from './platform/errors-handler.js'
import { registerCompilers, registerPipeline } from './platform/pipeline.js'

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    db: DB
    repos: Repos
    /** What the app reads and writes through, whichever database stands behind it (lib/platform/storage.ts). */
    storage: Storage
    tokens: TokenService
    contract: { spec: Record<string, any>; operations: Map<string, Operation> }
    startedAt: number
    /** Outgoing mail (alarm e-mails, reports), from the SMTP settings. */
    mailer: Mailer
    /** The reader threads of expensive reads (lib/platform/readers.ts). */
    readers: Readers<ThreadTasks>
    /** The features' services (lib/services.ts). */
    services: Services
    /** This app's caches (lib/platform/cache.ts): every cache of the storage and the services is made here. */
    caches: CacheRegistry
  }
  interface FastifyRequest {
    principal?: Principal
    /** The agent whose credential an agent gateway call carries. */
    agent?: GatewayAgent
    /** The worker poller whose credential a poller gateway call carries. */
    poller?: PollerRow
    responseType?: string
    /** The operation the request was routed to (read once: `routeOptions` is built per read). */
    op?: Operation
    /** Routine agent traffic that succeeded: summarised in the log instead of a line (RoutineSummary). */
    routine: boolean
  }
  interface FastifyContextConfig {
    op?: Operation
  }
}

export interface BuildOptions {
  config: Config
  logger?: FastifyServerOptions['logger']
  /** Check every answer against the contract and turn a violation into a 500 (tests). */
  validateResponses?: boolean
  /** A parsed spec to serve instead of spec/openapi.yaml. */
  spec?: Record<string, any>
  /** Where the logger configured here writes, instead of standard output (tests). */
  logStream?: LineBatcher
}

export async function buildApp(opts: BuildOptions): Promise<FastifyInstance> {
  const { config } = opts
  const spec = opts.spec ?? loadSpec()
  const ops = operations(spec)

  const { app, logStream } = createInstance(config, opts)
  // Before the storage: its repositories make their caches in it.
  app.decorate('caches', new CacheRegistry({ on: config.caches.on, maxBytes: config.caches.maxMb * 1024 * 1024 }))
  const opened = await openStorage(app, config)
  const { sealed } = opened
  decorateApp(app, { config, opened, spec, ops })
  registerLifecycle(app)
  closeWithApp(app)
  registerCompilers(app)
  app.setErrorHandler(errorHandler)
  await registerTokens(app)
  announceEnrollmentSecret(app)
  registerBackground(app)
  const counted = registerMetrics(app)
  registerPipeline(app, { spec, ops, validateResponses: opts.validateResponses, counted })
  // The GraphQL executor of POST /sepio-data, without routes of its own.
  await registerAssetGraph(app, { introspection: config.graphqlIntrospection })
  await registerRoutes(app, spec)
  registerOnListen(app, logStream)
  await registerDocs(app, spec)

  if (sealed) app.log.info({ destinations: sealed }, 'sealed the webhook secrets stored in the clear')
  try {
    await bootstrapAdmin(app)
  } catch (err) {
    await app.close()
    throw err
  }
  return app
}

/**
 * Every background loop, here and nowhere else: started when the app is ready, in this
 * order, and stopped in reverse order when it closes (lib/platform/loops.ts). The features
 * add their health checks as they are wired, after the platform's: this order is the order
 * of admin/SubsystemHealth's subsystems.
 */
function registerBackground(app: FastifyInstance): void {
  registerHealthChecks(app)
  // Several processes may share a PostgreSQL database: its singleton loops run under leases.
  const { loopLeases } = app.storage
  const loops = registerLoops(app, undefined, loopLeases ? { store: loopLeases, ms: app.config.loopLeaseSeconds * 1000 } : undefined)
  if (app.storage.backend === 'postgres') {
    // SQLite's loops but its own upkeep (checkpoints, its search structures and the event
    // index), which has no counterpart there.
    registerCoreHealthChecks(app)
    loops.add(gatewaySweeperLoop(app))
    loops.add(alarmDeliveryLoop(app))
    loops.add(reportSchedulerLoop(app))
    loops.add(agentlessLoop(app))
    for (const loop of notificationLoops(app)) loops.add(loop)
    loops.add(retentionLoop(app))
    loops.add(refusalFlushLoop(app))
    if (app.storage.textIndexUpkeep) loops.add(textIndexLoop({ upkeep: app.storage.textIndexUpkeep, log: app.log }))
    const riskFeed = riskFeedLoop(app)
    if (riskFeed) loops.add(riskFeed)
    return
  }
  registerCoreHealthChecks(app)
  // First: it stops last, once the others have written what they write.
  const { wal } = app.config
  loops.add(checkpointerLoop({ db: app.db, file: app.config.dbFile, settings: { thread: wal.checkpointThread, intervalMs: wal.checkpointMs, restartBytes: wal.restartMb * 1048576 }, log: app.log }))
  loops.add(gatewaySweeperLoop(app))
  loops.add(eventIndexLoop(app.repos.eventQueries, loops.sliceMs))
  loops.add(agentSearchLoop({ texts: app.repos.agentTexts, log: app.log }))
  loops.add(searchUpkeepLoop({ upkeep: app.repos.ftsUpkeep, log: app.log }))
  loops.add(alarmDeliveryLoop(app))
  loops.add(reportSchedulerLoop(app))
  loops.add(agentlessLoop(app))
  for (const loop of notificationLoops(app)) loops.add(loop)
  loops.add(retentionLoop(app))
  loops.add(refusalFlushLoop(app))
}

/**
 * The contract's operations, each routed by fastify-openapi-glue to its handler. The
 * operations that take multipart bodies are routed in a scope of their own with
 * @fastify/multipart: the plugin adds two promise hooks and a 'close' listener to every
 * request of its scope, which no other operation needs.
 */
async function registerRoutes(app: FastifyInstance, spec: Record<string, any>): Promise<void> {
  const operationResolver = (operationId: string) => resolveHandler(operationId)
  await app.register(async (scope) => {
    await scope.register(multipart, { limits: { fileSize: 10 * 1024 * 1024, files: 1, fields: 10, parts: 11 } })
    await scope.register(openapiGlue, { specification: routingView(spec, takesMultipart), operationResolver })
  })
  await app.register(openapiGlue, { specification: routingView(spec, (op) => !takesMultipart(op)), operationResolver })
}
