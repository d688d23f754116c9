// The Fastify instance: its logger, router, body and connection limits, request ids, and
// the answer to a request the router cannot read.
import crypto from 'node:crypto'
import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { Config } from '../config.js'
import { problem, type ProblemCode } from '../errors.js'
import { lazyChildLogger, logTimestamp, stdoutLines, type LineBatcher } from '../log.js'
import { capConnections, refuseExpectations, serverOptions } from '../connections.js'
import { warmValidators } from '../validation.js'
import { sendProblem } from './errors-handler.js'

/**
 * A request id a trusted proxy may give: 16 to 64 letters, digits, `.`, `_` or `-` (a UUID,
 * a W3C trace id, a ULID), a form long enough to be unique. Any other caller's id, or a
 * shorter one, could repeat another request's id in the logs and the audit trail: the
 * server makes its own then, and the request's log line keeps the caller's as
 * `clientRequestId`.
 */
const REQUEST_ID = /^[A-Za-z0-9._-]{16,64}$/

/**
 * The server's own request ids: UUIDs of version 8 (RFC 9562's layout of the implementer's
 * choosing), 74 random bits drawn once per process and a 48-bit count. As unique across
 * processes, nodes and restarts as random UUIDs (two processes share a prefix with odds of
 * 2^-74), and ordered within a process; a random UUID per request cost a small request
 * more than its rate limits. An id names a request in logs and audit records and
 * authorizes nothing, so being guessable costs nothing.
 */
export function requestIds(): () => string {
  const hex = crypto.randomBytes(10).toString('hex')
  // xxxxxxxx-xxxx-8xxx-Vxxx-cccccccccccc: V carries the variant bits (10xx), c the count.
  const variant = ((parseInt(hex[15], 16) & 0x3) | 0x8).toString(16)
  const prefix = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(12, 15)}-${variant}${hex.slice(16, 19)}-`
  let count = 0
  return () => prefix + (count++).toString(16).padStart(12, '0')
}

export interface InstanceOptions {
  logger?: FastifyServerOptions['logger']
  logStream?: LineBatcher
}

/** The instance, and the stream its own logger writes to (none when a logger is given). */
export function createInstance(config: Config, opts: InstanceOptions): { app: FastifyInstance; logStream: LineBatcher | undefined } {
  const logStream = opts.logger === undefined ? (opts.logStream ?? stdoutLines()) : undefined
  const newRequestId = requestIds()
  const app = Fastify({
    logger: opts.logger ?? {
      level: config.logLevel,
      stream: logStream,
      timestamp: logTimestamp,
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
    // One line per request, written when it completes (see lib/platform/request-log.ts).
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: lazyChildLogger,
    // Behind a trusted proxy (PRIME_TRUST_PROXY) every request arrives through it, and its id
    // ties the proxy's log to ours; nobody else chooses the id a request is known by.
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return config.trustProxy && typeof given === 'string' && REQUEST_ID.test(given) ? given : newRequestId()
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
  return { app, logStream }
}

/** Once listening: what the logger holds is written, and the validators are compiled in the background. */
export function registerOnListen(app: FastifyInstance, logStream: LineBatcher | undefined): void {
  app.addHook('onListen', async () => {
    logStream?.flushSync()
    void warmValidators()
  })
}
