import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ValidateFunction } from 'ajv'
import { compileResponseSchema } from './validation.js'

/**
 * Checks an answer against the contract: its status must be declared, its media type
 * offered, and a JSON body must match the schema. Answers the violation, or undefined.
 */
export function responseChecker() {
  const cache = new WeakMap<object, ValidateFunction>()
  return (req: FastifyRequest, reply: FastifyReply, payload: unknown): string | undefined => {
    const op = req.routeOptions.config.op!
    const responses = (req.routeOptions.schema as any)?.response ?? {}
    const status = String(reply.statusCode)
    const declared = responses[status]
    if (!declared) return `${op.operationId} answered ${status}, which the contract does not declare`
    const type = String(reply.getHeader('content-type') ?? '').split(';')[0].trim()
    const media = declared.content?.[type]
    if (!media) return `${op.operationId} answered ${status} as "${type}", which the contract does not offer`
    if (!/json|text\/plain/.test(type) || typeof payload !== 'string') return undefined
    let body: unknown
    try {
      body = JSON.parse(payload)
    } catch {
      return `${op.operationId} answered ${status} with a body that is not JSON`
    }
    let validate = cache.get(media.schema)
    if (!validate) {
      validate = compileResponseSchema(media.schema)
      cache.set(media.schema, validate)
    }
    if (validate(body)) return undefined
    return `${op.operationId} ${status}: ` + (validate.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message}`).join('; ')
  }
}
