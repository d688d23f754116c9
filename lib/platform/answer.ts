// What every answer gets on its way out (the onSend hook): the login limit's refund, the
// media type the caller chose, an audit record when the handler wrote none, and in tests
// the check against the contract.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { auditFallback } from '../audit.js'
import { problem, problemBody } from '../errors.js'
import { limitKey } from '../rate-limit.js'
import { responseChecker } from '../response-check.js'
import type { Admission } from './admission.js'
import type { Maybe } from './maybe.js'

/** The answer to send: at once, or once the audit fallback has written its record. */
export type Finish = (req: FastifyRequest, reply: FastifyReply, payload: unknown) => Maybe<unknown>

/** `validateResponses`: a violation of the contract is answered as a 500 (tests). */
export function createFinish(spec: Record<string, any>, validateResponses: boolean | undefined, loginLimit: Admission['loginLimit']): Finish {
  const checkResponse = validateResponses ? responseChecker(spec) : undefined
  /** The answer's media type, its audit record when the handler wrote none, its contract check. */
  return (req, reply, payload) => {
    const op = req.op
    // Only failures count toward the login limit: every attempt is counted when it arrives
    // (parallel guesses cannot outrun the limit), and a success is taken back before it is
    // answered (a client that logs in before each call is never cut off).
    if (op?.rateLimit === 'login' && reply.statusCode < 300) loginLimit.refund(limitKey(req.ip), Date.now())
    if (reply.statusCode < 400 && req.responseType && isJsonAnswer(reply)) {
      reply.header('content-type', `${req.responseType}; charset=utf-8`)
    }
    const written = op || reply.statusCode === 401 || reply.statusCode === 403 ? auditFallback(req, reply, reply.statusCode >= 400 ? problemDetail(payload) : undefined) : undefined
    if (written) return written.then(() => checked(req, reply, payload))
    return checked(req, reply, payload)
  }

  function checked(req: FastifyRequest, reply: FastifyReply, payload: unknown): unknown {
    if (checkResponse && req.op) {
      const violation = checkResponse(req, reply, payload)
      if (violation) {
        req.log.error({ violation }, 'answer violates the contract')
        reply.code(500).header('content-type', 'application/problem+json')
        return JSON.stringify(problemBody(problem('internal', `Answer violates the contract: ${violation}`), req.url, req.id))
      }
    }
    return payload
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
