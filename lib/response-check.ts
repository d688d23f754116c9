import type { FastifyReply, FastifyRequest } from 'fastify'
import type { ValidateFunction } from 'ajv'
import { makeAjv } from './validation.js'

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')

export type ViolationKind = 'undeclared-status' | 'undeclared-media-type' | 'body-not-as-declared'

/** The operation an answer came from, as the contract names it. */
export interface AnsweredOperation {
  operationId: string
  method: string
  path: string
}

/**
 * Judges answers against the full contract: the status must be declared, the media type
 * offered, and a JSON body must match its schema. Answers the violation, or undefined. One
 * judge serves the test app's response check, the fuzz test and the attack run.
 */
export function answerJudge(spec: Record<string, any>, opts: { maxBodyChars?: number } = {}) {
  // The contract itself is the schema document, so its $refs resolve as written.
  const ajv = makeAjv(false)
  ajv.addSchema(spec, 'contract')
  const cache = new Map<string, ValidateFunction>()
  const maxBodyChars = opts.maxBodyChars ?? Infinity
  return (op: AnsweredOperation, statusCode: number, contentType: string, payload: unknown): { kind: ViolationKind; detail: string } | undefined => {
    const method = op.method.toLowerCase()
    const status = String(statusCode)
    const declared = spec.paths[op.path][method].responses?.[status]
    if (!declared) return { kind: 'undeclared-status', detail: `answered ${status}, which the contract does not declare` }
    const response = declared.$ref
      ? declared.$ref
          .slice(2)
          .split('/')
          .reduce((o: any, k: string) => o[k], spec)
      : declared
    const type = contentType.split(';')[0].trim()
    const media = response.content?.[type]
    if (!media) return { kind: 'undeclared-media-type', detail: `answered ${status} as "${type}", which the contract does not offer` }
    if (!/json|text\/plain/.test(type) || typeof payload !== 'string' || payload.length > maxBodyChars) return undefined
    // A text/plain answer is JSON text unless its schema is a plain string (a log file).
    let body: unknown = payload
    if (media.schema?.type !== 'string') {
      try {
        body = JSON.parse(payload)
      } catch {
        return { kind: 'body-not-as-declared', detail: `answered ${status} with a body that is not JSON` }
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
    return { kind: 'body-not-as-declared', detail: `${status}: ` + (validate.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message}`).join('; ') }
  }
}

/** The test app's check of every answer: the violation as one line, or undefined. */
export function responseChecker(spec: Record<string, any>) {
  const judge = answerJudge(spec)
  return (req: FastifyRequest, reply: FastifyReply, payload: unknown): string | undefined => {
    const op = req.routeOptions.config.op!
    const violation = judge(op, reply.statusCode, String(reply.getHeader('content-type') ?? ''), payload)
    return violation ? `${op.operationId} ${violation.detail}` : undefined
  }
}
