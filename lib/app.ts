import { isUtf8 } from 'node:buffer'
import crypto from 'node:crypto'
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import openapiGlue from 'fastify-openapi-glue'
import jwt from '@fastify/jwt'
import helmet from 'helmet'
import multipart from '@fastify/multipart'
import type { Config } from './config.js'
import { loadSpec, operations, routingView, takesMultipart, type Operation } from './contract.js'
import { openDatabase, type DB } from '../db/index.js'
import { createRepos, type Repos } from './repos.js'
import { ISSUER, tokenService, bearerToken, authenticateAgent, authenticatePoller, unauthenticated, type Principal, type TokenService } from './auth.js'
import { problem, problemBody, ProblemError, type ProblemCode } from './errors.js'
import { fieldErrors, validatorCompiler, warmValidators } from './validation.js'
import { canonicalize, canonicalizeQuery } from './names.js'
import { chooseResponseType, isJsonMediaType } from './negotiate.js'
import { usedDeprecatedInputs } from './deprecation.js'
import { auditFallback, refusalFlushLoop } from './audit.js'
import { fixedWindowLimiter, limitKey } from './rate-limit.js'
import { resolveHandler } from '../handlers/index.js'
import { bootstrapAdmin } from './accounts/index.js'
import { registerDocs } from './docs.js'
import { responseChecker } from './response-check.js'
import { lazyChildLogger, requestLineWriter, RoutineSummary, stdoutLines, type LineBatcher } from './log.js'
import { announceEnrollmentSecret, gatewaySweeperLoop, isHeldCredential } from './gateway/index.js'
import { agentSearchLoop, searchUpkeepLoop } from './search-upkeep.js'
import { eventIndexLoop } from './events/indexing.js'
import { createMailer, type Mailer } from './mail.js'
import { alarmDeliveryLoop } from './alarms/index.js'
import { reportSchedulerLoop } from './reports/index.js'
import { notificationLoops } from './notifications/index.js'
import { agentlessLoop } from './agentless/index.js'
import { registerAssetGraph } from './assets/index.js'
import { vault } from './vault.js'
import { settingsSealer } from './alarms/sealed-settings.js'
import { registerLifecycle } from './probes.js'
import { capConnections, refuseExpectations, serverOptions } from './connections.js'
import { retentionLoop } from './retention/index.js'
import { registerLoops } from './platform/loops.js'
import { registerHealthChecks } from './platform/health.js'
import { registerCoreHealthChecks } from './health.js'
import { createServices, type Services } from './services.js'
import { secureDataDir } from './data-dir.js'
import type { GatewayAgent } from '../db/gateway.js'
import type { PollerRow } from '../db/agentless.js'

declare module 'fastify' {
  interface FastifyInstance {
    config: Config
    db: DB
    repos: Repos
    tokens: TokenService
    contract: { spec: Record<string, any>; operations: Map<string, Operation> }
    startedAt: number
    /** Outgoing mail (alarm e-mails, reports), from the SMTP settings. */
    mailer: Mailer
    /** The features' services (lib/services.ts). */
    services: Services
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

const REQUEST_ID = /^[\w.:-]{1,64}$/
const IGNORED_BODY = 'application/x-prime-ignored-body'
const MAX_FIELD_ERRORS = 20
const MULTIPART = /^multipart\/form-data/i
/**
 * The operations' answers (JSON, CSV, PDF) carry the security headers the OWASP REST
 * Security Cheat Sheet lists for APIs; the rest of helmet's set concerns HTML documents,
 * and goes with the documentation pages and unknown paths.
 */
const API_HEADERS: Record<string, string> = {
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'cross-origin-resource-policy': 'same-origin',
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
}

export async function buildApp(opts: BuildOptions): Promise<FastifyInstance> {
  const { config } = opts
  const spec = opts.spec ?? loadSpec()
  const ops = operations(spec)

  const logStream = opts.logger === undefined ? (opts.logStream ?? stdoutLines()) : undefined
  const app = Fastify({
    logger: opts.logger ?? {
      level: config.logLevel,
      stream: logStream,
      // Warnings and errors are written at once; request lines within a second.
      hooks: {
        logMethod(args, method, level) {
          method.apply(this, args)
          if (level >= 40) this.flush()
        },
      },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie', 'res.headers["set-cookie"]'], censor: '***' },
    },
    // Clients built on ASP.NET conventions add a trailing slash: it names the same operation.
    routerOptions: { caseSensitive: false, maxParamLength: 100, ignoreTrailingSlash: true },
    // No implicit HEAD twins: some GET operations act (send a test mail, hand out work).
    exposeHeadRoutes: false,
    bodyLimit: config.bodyLimit,
    ...serverOptions(config.connections),
    trustProxy: config.trustProxy,
    return503OnClosing: true,
    // One line per request, written when it completes (see the onResponse hook).
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : crypto.randomUUID()
    },
    frameworkErrors: (err, req, reply) => {
      const code: ProblemCode = err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'uri-too-long' : 'validation'
      const detail = code === 'uri-too-long' ? 'A path parameter is longer than 100 characters.' : 'The request URL is malformed.'
      reply.header('x-request-id', req.id).header('x-content-type-options', 'nosniff')
      sendProblem(req, reply, problem(code, detail))
    },
  })

  capConnections(app.server, config.connections.maxPerAddress, app.log)
  refuseExpectations(app.server)
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
  app.decorate('config', config)
  app.decorate('db', db)
  app.decorate('repos', repos)
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
  app.decorate('services', createServices(app))
  registerLifecycle(app)
  app.addHook('onClose', async () => {
    app.mailer.close()
    db.close()
  })

  app.setValidatorCompiler(validatorCompiler)
  // Answers are plain JSON.stringify: the contract is checked in tests, never by silently
  // dropping or coercing fields on the way out.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data))
  app.setErrorHandler(errorHandler)

  const securityHeaders = staticHeaders(
    helmet({
      contentSecurityPolicy: {
        directives: { defaultSrc: ["'self'"], scriptSrc: ["'self'"], styleSrc: ["'self'", "'unsafe-inline'"], imgSrc: ["'self'", 'data:'] },
      },
    }),
  )
  await app.register(jwt, {
    secret: config.jwtSecret,
    sign: { algorithm: 'HS256', expiresIn: config.accessTokenTtlSec, iss: ISSUER },
    // Verified tokens are cached by the token service (lib/auth.ts).
    verify: { algorithms: ['HS256'], allowedIss: ISSUER, requiredClaims: ['exp', 'iat', 'iss'] },
  })
  app.decorate('tokens', tokenService(app, config, repos))
  announceEnrollmentSecret(app)
  // Every background loop, here and nowhere else: started when the app is ready, in this
  // order, and stopped in reverse order when it closes (lib/platform/loops.ts). The features
  // add their health checks as they are wired, after the platform's: this order is the order
  // of admin/SubsystemHealth's subsystems.
  registerHealthChecks(app)
  registerCoreHealthChecks(app)
  const loops = registerLoops(app)
  loops.add(gatewaySweeperLoop(app))
  loops.add(eventIndexLoop(app.repos.eventQueries))
  loops.add(agentSearchLoop({ texts: app.repos.agentTexts, log: app.log }))
  loops.add(searchUpkeepLoop({ upkeep: app.repos.ftsUpkeep, log: app.log }))
  loops.add(alarmDeliveryLoop(app))
  loops.add(reportSchedulerLoop(app))
  loops.add(agentlessLoop(app))
  for (const loop of notificationLoops(app)) loops.add(loop)
  loops.add(retentionLoop(app))
  loops.add(refusalFlushLoop(app))

  const canonicalHook = (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => done(thrown(() => canonicalRequest(req, reply)))
  // Each route carries its operation's metadata from the contract, for the hooks below.
  app.addHook('onRoute', (route) => {
    const id = (route.schema as { operationId?: string } | undefined)?.operationId
    const op = id ? ops.get(id) : undefined
    if (!op) return
    route.config = { ...(route.config ?? {}), op }
    // Names are put in the contract's spelling where there are any: an operation with
    // neither query parameters nor a body skips the hook.
    if ((route.schema as { querystring?: unknown }).querystring || op.requestTypes.length > 0 || op.deprecatedInputs) {
      const given = route.preValidation
      route.preValidation = [...(given === undefined ? [] : Array.isArray(given) ? given : [given]), canonicalHook]
    }
  })
  // Limits are checked first thing, per source address, before any authentication work:
  // refused and unknown requests count too, so floods cannot reach the token checks or
  // the audit log unthrottled.
  const requestLimit = fixedWindowLimiter(config.rateLimitMax, config.rateLimitWindowMs)
  const loginLimit = fixedWindowLimiter(config.loginRateLimitMax, 60_000)
  /** Counts the request; `headers` says whether this limit is the one the answer reports. */
  const limit = (req: FastifyRequest, reply: FastifyReply, limiter: typeof requestLimit, what: string, headers: boolean) => {
    const r = limiter.hit(limitKey(req.ip), Date.now())
    if (headers) reply.header('x-ratelimit-limit', r.max).header('x-ratelimit-remaining', r.remaining).header('x-ratelimit-reset', r.resetSeconds)
    if (r.exceeded) {
      throw problem('rate-limited', `Too many ${what} from this address; retry in ${r.resetSeconds} seconds.`, { headers: { 'retry-after': String(r.resetSeconds) } })
    }
  }
  // Each credential has its own budget too, wherever it calls from (agents': the gateway's).
  const budgets = {
    session: fixedWindowLimiter(config.credentialRateLimits.user, config.rateLimitWindowMs),
    integration: fixedWindowLimiter(config.credentialRateLimits.token, config.rateLimitWindowMs),
    poller: fixedWindowLimiter(config.credentialRateLimits.poller, config.rateLimitWindowMs),
  }
  const credentialLimit = (req: FastifyRequest) => {
    const p = req.principal
    const limiter = p ? (p.kind === 'session' ? budgets.session : budgets.integration) : req.poller ? budgets.poller : undefined
    if (!limiter) return
    const what = p ? (p.kind === 'session' ? 'account' : 'integration token') : 'worker poller'
    const r = limiter.hit(p ? String(p.id) : req.poller!.id, Date.now())
    if (r.exceeded) {
      throw problem('rate-limited', `Too many requests from this ${what} (${r.max} per window); retry in ${r.resetSeconds} seconds.`, { headers: { 'retry-after': String(r.resetSeconds) } })
    }
  }
  // A known path with another method answers 405 with the methods it has.
  const pathMethods = new Map<RegExp, string[]>()
  for (const op of ops.values()) {
    const re = new RegExp('^' + op.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\\?\{\w+\\?\}/g, '[^/]+') + '/?$', 'i')
    const known = [...pathMethods.keys()].find((k) => k.source === re.source)
    if (known) pathMethods.get(known)!.push(op.method)
    else pathMethods.set(re, [op.method])
  }
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]
    for (const [re, methods] of pathMethods) {
      // A path the router did not take with a method it has is no known operation: never
      // answer "answers GET, not GET".
      if (re.test(path) && !methods.includes(req.method)) {
        reply.header('allow', methods.join(', '))
        return sendProblem(req, reply, problem('method-not-allowed', `${path} answers ${methods.join(', ')}, not ${req.method}.`))
      }
    }
    sendProblem(req, reply, problem('route-not-found', `No operation ${req.method} ${path}.`))
  })
  app.addContentTypeParser(IGNORED_BODY, { parseAs: 'buffer' }, (_req, _body, done) => done(null, undefined))
  // JSON is UTF-8 (RFC 8259): a body that is not answers 400 rather than being read with
  // U+FFFD in place of its bad bytes.
  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    if (!isUtf8(body as Buffer)) return done(problem('bad-json', 'The body is not valid UTF-8.'), undefined)
    parseJson(req, (body as Buffer).toString('utf8'), done)
  })

  // The hooks take callbacks rather than being async: a request went through four of them,
  // and their promises cost more than the work most of them do.
  app.addHook('onRequest', (req, reply, done) => done(thrown(() => admit(req, reply))))
  /** Limits, the caller, media types: what every request passes before anything is read. */
  function admit(req: FastifyRequest, reply: FastifyReply) {
    const op = (req.op = req.routeOptions.config.op)
    reply.headers(op ? API_HEADERS : securityHeaders).header('x-request-id', req.id)
    if (op?.deprecation) reply.headers(op.deprecation)
    // Thousands of agents may share one address (NAT): calls with a valid agent credential
    // and enrollments have the gateway's own limits instead (refused agent calls count
    // here; failed enrollments are counted when answered, below).
    if (op?.access.kind === 'agent') req.agent = authenticateAgent(repos, bearerToken(req))
    if (req.agent || op?.gatewayLimit === 'enrollment') app.services.gateway.admit({ address: req.ip, agentId: req.agent?.id, bytes: Number(req.headers['content-length'] ?? 0) || 0 }, op!, Date.now())
    // A load balancer's probes come every few seconds from the same addresses as the clients.
    else if (!op?.probe) limit(req, reply, requestLimit, 'requests', true)
    // The operations that check a password or secret (`x-rate-limit: login`).
    if (op?.rateLimit === 'login') limit(req, reply, loginLimit, 'failed login attempts', false)
    if (!op) return
    // The caller first: a refused one learns nothing more (401/403 before 415/406), and a
    // request that fails on its media types is audited with its actor.
    authorize(req, op)
    credentialLimit(req)
    gateMediaType(req, op)
    const type = chooseResponseType(req, op.responseTypes)
    if (op.responseTypes.length > 0 && !type) {
      throw problem('not-acceptable', `This operation answers ${op.responseTypes.join(', ')}; Accept allows none of them.`)
    }
    req.responseType = type
  }

  /** Query and body names in the contract's spelling; a required body is there. */
  function canonicalRequest(req: FastifyRequest, reply: FastifyReply) {
    const op = req.op!
    const schema = req.routeOptions.schema as Record<string, any>
    if (req.query && typeof req.query === 'object') canonicalizeQuery(req.query as Record<string, unknown>, schema.querystring)
    // A multipart body is read by its handler as a stream, so it is never parsed here.
    if (op.bodyRequired && (req.body === undefined || req.body === '') && !MULTIPART.test(req.headers['content-type'] ?? '')) {
      throw problem('validation', 'A request body is required.', { errors: [{ location: 'body', name: '(root)', reason: 'is required' }] })
    }
    const media = req.headers['content-type']?.split(';')[0].trim() ?? ''
    if (req.body !== undefined) canonicalize(req.body, schema.body?.content?.[media]?.schema)
    const deprecated = op.deprecatedInputs && usedDeprecatedInputs(op.deprecatedInputs, req.query, req.body)
    if (deprecated) reply.headers(deprecated)
  }

  const requestLine = requestLineWriter(app.log)
  const routine = config.logRoutineSeconds > 0 ? new RoutineSummary(app.log, config.logRoutineSeconds * 1000) : null
  app.addHook('onClose', async () => routine?.close())
  app.addHook('onResponse', (req, reply, done) => {
    if (req.op?.gatewayLimit === 'enrollment' && reply.statusCode >= 400 && reply.statusCode !== 429) {
      app.services.gateway.enrollmentFailed(req.ip, Date.now())
    }
    // A probe that passes is not worth a line every few seconds; one that fails is.
    if (routine && req.routine && reply.statusCode < 400) routine.add(req, reply)
    else if (!(req.op?.probe && reply.statusCode < 400)) requestLine(req, reply)
    done()
  })

  const checkResponse = opts.validateResponses ? responseChecker(spec) : undefined
  app.addHook('onSend', (req, reply, payload, done) => {
    let answer = payload
    const failed = thrown(() => {
      answer = finish(req, reply, payload)
    })
    if (failed) done(failed)
    else done(null, answer)
  })
  /** The answer's media type, its audit record when the handler wrote none, its contract check. */
  function finish(req: FastifyRequest, reply: FastifyReply, payload: unknown): unknown {
    const op = req.op
    // Only failures count toward the login limit: every attempt is counted when it arrives
    // (parallel guesses cannot outrun the limit), and a success is taken back before it is
    // answered (a client that logs in before each call is never cut off).
    if (op?.rateLimit === 'login' && reply.statusCode < 300) loginLimit.refund(limitKey(req.ip), Date.now())
    if (reply.statusCode < 400 && req.responseType && isJsonAnswer(reply)) {
      reply.header('content-type', `${req.responseType}; charset=utf-8`)
    }
    if (op || reply.statusCode === 401 || reply.statusCode === 403) {
      auditFallback(req, reply, reply.statusCode >= 400 ? problemDetail(payload) : undefined)
    }
    if (checkResponse && op) {
      const violation = checkResponse(req, reply, payload)
      if (violation) {
        req.log.error({ violation }, 'answer violates the contract')
        reply.code(500).header('content-type', 'application/problem+json')
        return JSON.stringify(problemBody(problem('internal', `Answer violates the contract: ${violation}`), req.url, req.id))
      }
    }
    return payload
  }

  // The operations that take multipart bodies are routed in a scope of their own with
  // @fastify/multipart: the plugin adds two promise hooks and a 'close' listener to every
  // request of its scope, which no other operation needs.
  const operationResolver = (operationId: string) => resolveHandler(operationId)
  // The GraphQL executor of POST /sepio-data, without routes of its own.
  await registerAssetGraph(app)
  await app.register(async (scope) => {
    await scope.register(multipart, { limits: { fileSize: 10 * 1024 * 1024, files: 1, fields: 10, parts: 11 } })
    await scope.register(openapiGlue, { specification: routingView(spec, takesMultipart), operationResolver })
  })
  await app.register(openapiGlue, { specification: routingView(spec, (op) => !takesMultipart(op)), operationResolver })
  app.addHook('onListen', async () => {
    logStream?.flushSync()
    void warmValidators()
  })
  await registerDocs(app, spec)

  if (sealed) app.log.info({ destinations: sealed }, 'sealed the webhook secrets stored in the clear')
  try {
    await bootstrapAdmin(app)
  } catch (err) {
    await app.close()
    throw err
  }
  return app

  function gateMediaType(req: FastifyRequest, op: Operation) {
    const header = req.headers['content-type']
    const hasBody = header !== undefined || (req.headers['content-length'] ?? '0') !== '0' || req.headers['transfer-encoding'] !== undefined
    if (!hasBody || req.method === 'GET') return
    const type = (header ?? '').split(';')[0].trim().toLowerCase()
    if (op.requestTypes.length === 0) {
      // An operation that takes no body ignores one (clients send `{}` to such POSTs).
      req.headers['content-type'] = IGNORED_BODY
      return
    }
    if (!op.bodyRequired && (req.headers['content-length'] ?? '') === '0') {
      req.headers['content-type'] = IGNORED_BODY
      return
    }
    // Bodies are read as sent: a compressed one would be misread (RFC 9110: 415). Node
    // undoes only the chunked transfer coding, so any other (gzip, chunked) is refused too.
    const coding = req.headers['content-encoding']
    if (coding !== undefined && !/^\s*(identity\s*)?$/i.test(coding)) {
      throw problem('unsupported-media-type', `Content-Encoding ${coding.slice(0, 40)} is not accepted: send the body uncompressed.`, { headers: { 'accept-encoding': 'identity' } })
    }
    const transfer = req.headers['transfer-encoding']
    if (transfer !== undefined && !/^\s*chunked\s*$/i.test(transfer)) {
      throw problem('unsupported-media-type', `Transfer-Encoding ${transfer.slice(0, 40)} is not accepted: send the body as it is, or chunked.`)
    }
    const wantsJson = op.requestTypes.some(isJsonMediaType)
    if (wantsJson && isJsonMediaType(type)) {
      // Every JSON media type is parsed and validated as application/json.
      req.headers['content-type'] = 'application/json' + (header!.includes(';') ? header!.slice(header!.indexOf(';')) : '')
      return
    }
    if (type !== '' && op.requestTypes.includes(type)) return
    throw problem('unsupported-media-type', `Content-Type must be one of ${op.requestTypes.join(', ')}${type ? `, not ${type}` : ''}.`)
  }

  function authorize(req: FastifyRequest, op: Operation) {
    const access = op.access
    if (access.kind === 'public') return
    if (access.kind === 'agent') {
      if (req.agent) return
      if (!bearerToken(req)) throw problem('unauthenticated', 'An agent credential is required.', { headers: { 'www-authenticate': 'Bearer realm="prime"' } })
      if (isHeldCredential(repos, bearerToken(req))) throw unauthenticated("This credential awaits an Administrator's approval of the re-enrollment; retry later.")
      throw unauthenticated('The agent credential is unknown or was rotated, or the agent was deleted; enroll again.')
    }
    if (access.kind === 'poller') {
      if (!bearerToken(req)) throw problem('unauthenticated', 'A worker poller credential is required.', { headers: { 'www-authenticate': 'Bearer realm="prime"' } })
      req.poller = authenticatePoller(repos, bearerToken(req))
      if (req.poller) return
      throw unauthenticated('The worker poller credential is unknown, or the poller was deleted; register again.')
    }
    req.principal = app.tokens.authenticate(bearerToken(req), Date.now())
    if (req.principal.profile < access.minProfile) {
      const names: Record<number, string> = { 10: 'User', 20: 'Manager', 30: 'Administrator' }
      throw problem('forbidden', `${op.operationId} needs the ${names[access.minProfile]} profile or higher.`)
    }
  }
}

/**
 * The headers a helmet middleware sets, computed once: with these options they are the same
 * for every answer, and running the middleware per request cost more than the rest of a
 * simple request's hooks together.
 */
function staticHeaders(middleware: ReturnType<typeof helmet>): Record<string, string> {
  const headers: Record<string, string> = {}
  const res = {
    setHeader: (name: string, value: unknown) => {
      headers[name.toLowerCase()] = String(value)
    },
    removeHeader: (name: string) => {
      delete headers[name.toLowerCase()]
    },
  }
  let failed: unknown
  middleware({} as never, res as never, (err?: unknown) => {
    failed = err
  })
  if (failed) throw failed
  return headers
}

/** What `work` throws, as the error a callback hook passes on; undefined when it returns. */
function thrown(work: () => void): Error | undefined {
  try {
    work()
    return undefined
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err))
  }
}

function isJsonAnswer(reply: FastifyReply): boolean {
  const type = String(reply.getHeader('content-type') ?? '')
  return type === '' || type.startsWith('application/json')
}

function problemDetail(payload: unknown): string | undefined {
  if (typeof payload !== 'string' || !payload.startsWith('{')) return undefined
  try {
    return JSON.parse(payload).detail
  } catch {
    return undefined
  }
}

function sendProblem(req: FastifyRequest, reply: FastifyReply, err: ProblemError) {
  if (err.headers) reply.headers(err.headers)
  reply
    .code(err.status)
    .header('content-type', 'application/problem+json')
    .send(problemBody(err, req.url.split('?')[0], String(req.id)))
}

// Fastify's own errors, by code, in the catalogue's terms.
const fastifyCodes: Record<string, ProblemCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported-media-type',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'validation',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'validation',
  FST_ERR_CTP_INVALID_JSON_BODY: 'bad-json',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload-too-large',
  FST_ERR_CTP_INVALID_TYPE: 'unsupported-media-type',
  FST_REQ_FILE_TOO_LARGE: 'payload-too-large',
  FST_PARTS_LIMIT: 'payload-too-large',
  FST_FILES_LIMIT: 'payload-too-large',
  FST_FIELDS_LIMIT: 'payload-too-large',
  FST_INVALID_MULTIPART_CONTENT_TYPE: 'unsupported-media-type',
  FST_ERR_VALIDATION: 'validation',
}

function errorHandler(this: FastifyInstance, error: unknown, req: FastifyRequest, reply: FastifyReply) {
  const err = error as Error & { code?: string; statusCode?: number; validation?: any[]; validationContext?: string }
  if (err instanceof ProblemError) return sendProblem(req, reply, err)
  if (err.validation) {
    // Name the first few problems; a huge invalid array should not echo thousands back.
    const all = fieldErrors(err.validation, err.validationContext ?? 'body')
    const errors = all.slice(0, MAX_FIELD_ERRORS)
    const more = all.length > errors.length ? ` (and ${all.length - errors.length} more)` : ''
    const detail = errors.map((e) => `${e.location}/${e.name} ${e.reason}`.slice(0, 150)).join('; ') + more
    return sendProblem(req, reply, problem('validation', detail, { errors }))
  }
  if (err instanceof SyntaxError || err.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return sendProblem(req, reply, problem('bad-json', 'The body is not valid JSON.'))
  }
  const mapped = err.code ? fastifyCodes[err.code] : undefined
  if (mapped) return sendProblem(req, reply, problem(mapped, err.message))
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
    // Another client error from a plugin: keep its status, name it plainly.
    const code: ProblemCode = err.statusCode === 413 ? 'payload-too-large' : err.statusCode === 415 ? 'unsupported-media-type' : 'validation'
    return sendProblem(req, reply, problem(code, err.message))
  }
  req.log.error({ err }, 'unhandled error')
  return sendProblem(req, reply, problem('internal', 'An unexpected error occurred; it has been logged with this request id.'))
}
