// Query and body names in the contract's spelling (lib/names.ts), before Fastify validates
// them with the contract's schemas; the deprecated inputs a request used are named in its
// answer's headers.
import type { FastifyReply, FastifyRequest } from 'fastify'
import { problem } from '../errors.js'
import { canonicalize, canonicalizeQuery } from '../names.js'
import { usedDeprecatedInputs } from '../deprecation.js'

const MULTIPART = /^multipart\/form-data/i

/** Query and body names in the contract's spelling; a required body is there. */
export function canonicalRequest(req: FastifyRequest, reply: FastifyReply) {
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
