import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ValidateFunction } from 'ajv'
import { makeAjv } from './validation.js'

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')

/**
 * Checks answers against the full contract: the status must be declared, the media type
 * offered, and a JSON body must match its schema. Answers the violation, or undefined.
 */
export function responseChecker(spec: Record<string, any>) {
  // The contract itself is the schema document, so its $refs resolve as written.
  const ajv = makeAjv(false)
  ajv.addSchema(spec, 'contract')
  const cache = new Map<string, ValidateFunction>()
  return (req: FastifyRequest, reply: FastifyReply, payload: unknown): string | undefined => {
    const op = req.routeOptions.config.op!
    const method = op.method.toLowerCase()
    const status = String(reply.statusCode)
    const declared = spec.paths[op.path][method].responses?.[status]
    if (!declared) return `${op.operationId} answered ${status}, which the contract does not declare`
    const response = declared.$ref ? declared.$ref.slice(2).split('/').reduce((o: any, k: string) => o[k], spec) : declared
    const type = String(reply.getHeader('content-type') ?? '').split(';')[0].trim()
    const media = response.content?.[type]
    if (!media) return `${op.operationId} answered ${status} as "${type}", which the contract does not offer`
    if (!/json|text\/plain/.test(type) || typeof payload !== 'string') return undefined
    // A text/plain answer is JSON text unless its schema is a plain string (a log file).
    let body: unknown = payload
    if (media.schema?.type !== 'string') {
      try {
        body = JSON.parse(payload)
      } catch {
        return `${op.operationId} answered ${status} with a body that is not JSON`
      }
    }
    const where = declared.$ref
      ? `contract#/${pointer(...declared.$ref.slice(2).split('/'), 'content', type, 'schema')}`
      : `contract#/${pointer('paths', op.path, method, 'responses', status, 'content', type, 'schema')}`
    let validate = cache.get(where)
    if (!validate) {
      validate = ajv.compile({ $ref: where })
      cache.set(where, validate)
    }
    if (validate(body)) return undefined
    return `${op.operationId} ${status}: ` + (validate.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message}`).join('; ')
  }
}
