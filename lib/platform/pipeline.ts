// The request pipeline, registered in this order:
//   onRoute       each route carries its operation from the contract (req.op); those with
//                 query parameters or a body get the canonicalize step in preValidation
//                 (lib/platform/canonical.ts), before Fastify's schema validation
//   404/405 and body parsers (lib/platform/errors-handler.ts, lib/platform/media-types.ts)
//   onRequest     the request counts as in flight (lib/platform/loops.ts), then admit: limits,
//                 the caller, media types (lib/platform/admission.ts)
//   onResponse    the enrollment failure count and the request log (lib/platform/request-log.ts),
//                 then the metrics (lib/platform/metrics.ts)
//   onSend        the request is no longer in flight; the answer's media type, audit
//                 fallback, contract check (lib/platform/answer.ts)
// The error handler (lib/platform/errors-handler.ts) is set by buildApp, before these.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Operation } from '../contract.js'
import { validatorCompiler } from '../validation.js'
import { createAdmission } from './admission.js'
import { isPromise } from './maybe.js'
import { createFinish } from './answer.js'
import { canonicalRequest } from './canonical.js'
import { registerNotFound } from './errors-handler.js'
import { registerBodyParsers } from './media-types.js'
import { requestLog } from './request-log.js'
import { readerScope } from './readers.js'

/** The contract's validators for requests; answers are plain JSON.stringify. */
export function registerCompilers(app: FastifyInstance): void {
  app.setValidatorCompiler(validatorCompiler)
  // Answers are plain JSON.stringify: the contract is checked in tests, never by silently
  // dropping or coercing fields on the way out.
  app.setSerializerCompiler(() => (data) => JSON.stringify(data))
}

export interface PipelineOptions {
  spec: Record<string, any>
  ops: Map<string, Operation>
  /** Check every answer against the contract and turn a violation into a 500 (tests). */
  validateResponses?: boolean
  /** Counts a request once it is answered, after its log line (the metrics: registerMetrics). */
  counted: (req: FastifyRequest, reply: FastifyReply) => void
}

export function registerPipeline(app: FastifyInstance, { spec, ops, validateResponses, counted }: PipelineOptions): void {
  const canonicalHook = (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => done(thrown(() => canonicalRequest(req, reply)))
  // Each route carries its operation's metadata from the contract, for the hooks below.
  app.addHook('onRoute', (route) => {
    const id = (route.schema as { operationId?: string } | undefined)?.operationId
    const op = id ? ops.get(id) : undefined
    if (!op) return
    route.config = { ...(route.config ?? {}), op }
    // Names are put in the contract's spelling where there are any: an operation with
    // neither query parameters nor a body skips the hook.
    // An expensive operation's handler runs with its caller's credential known to the reader
    // threads' shares (run inside the scope: a callback hook calls the handler synchronously).
    if (op.expensive) {
      const given = route.preHandler
      route.preHandler = [...(given === undefined ? [] : Array.isArray(given) ? given : [given]), expensiveHook]
    }
    if ((route.schema as { querystring?: unknown }).querystring || op.requestTypes.length > 0 || op.deprecatedInputs) {
      const given = route.preValidation
      route.preValidation = [...(given === undefined ? [] : Array.isArray(given) ? given : [given]), canonicalHook]
    }
  })
  const { admit, loginLimit } = createAdmission(app)
  registerNotFound(app, ops)
  registerBodyParsers(app)

  // The hooks take callbacks rather than being async: a request went through four of them,
  // and their promises cost more than the work most of them do. The count of requests in
  // flight rides on them rather than on hooks of its own: each hook costs a request its call.
  const flights = app.loops.requests
  app.addHook('onRequest', (req, reply, done) => {
    // Before admission: refused requests count too.
    flights.begin(req)
    let later: Promise<void> | undefined
    const failed = thrown(() => {
      const r = admit(req, reply)
      if (isPromise(r)) later = r
    })
    if (later) later.then(() => done(), done)
    else done(failed)
  })
  const logged = requestLog(app)
  app.addHook('onResponse', (req, reply, done) => {
    logged(req, reply)
    counted(req, reply)
    done()
  })
  const finish = createFinish(spec, validateResponses, loginLimit)
  app.addHook('onSend', (req, reply, payload, done) => {
    // Handed over: a stream's answer too (the notification stream), which nobody waits for.
    flights.end(req)
    let answer: unknown = payload
    const failed = thrown(() => {
      answer = finish(req, reply, payload)
    })
    if (failed) done(failed)
    else if (isPromise(answer)) answer.then((a) => done(null, a), done)
    else done(null, answer)
  })
}

/**
 * An expensive operation's handler runs with its caller (the user or token, else the
 * address) known to the reader threads' shares (SQLite: only its reads that go to a thread
 * count). Where the backend budgets expensive reads itself (PostgreSQL), the handler runs
 * budgeted: its statements go to the expensive reads' own pool, under the read budget.
 */
function expensiveHook(this: FastifyInstance, req: FastifyRequest, _reply: FastifyReply, done: () => void): void {
  const p = req.principal
  const key = p ? `${p.kind}:${p.id}` : `address:${req.ip}`
  const { budgeted } = this.storage
  if (budgeted) budgeted(() => readerScope.run(key, done))
  else readerScope.run(key, done)
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
