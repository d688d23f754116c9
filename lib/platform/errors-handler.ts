// Every error a request meets is answered as a problem document from the catalogue
// (lib/errors.ts): the problems the code throws, Fastify's own errors by code, schema
// validation failures with the fields they name, and unknown paths and methods.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Operation } from '../contract.js'
import { problem, problemBody, ProblemError, type ProblemCode } from '../errors.js'
import { fieldErrors } from '../validation.js'

const MAX_FIELD_ERRORS = 20

export function sendProblem(req: FastifyRequest, reply: FastifyReply, err: ProblemError) {
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

/** Error codes of a full disk: SQLite's, the file system's, PostgreSQL's SQLSTATE disk_full. */
const DISK_FULL = new Set(['SQLITE_FULL', 'ENOSPC', '53100'])

export function errorHandler(this: FastifyInstance, error: unknown, req: FastifyRequest, reply: FastifyReply) {
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
  // Text a database server cannot hold (db/postgres/connection.ts UnstorableText).
  if (err.code === 'unstorable-text') return sendProblem(req, reply, problem('validation', err.message))
  // An expensive read on PostgreSQL past its budget, or waiting a whole budget for a connection (db/postgres/connection.ts).
  if (err.code === 'statement-past-budget') return sendProblem(req, reply, problem('query-too-costly', err.message))
  if (err.code === 'expensive-reads-busy') return sendProblem(req, reply, problem('readers-busy', `${err.message}: try again in a moment`, { headers: { 'retry-after': '1' } }))
  // PostgreSQL's connection lost (restarted, or the connection ended): the node connects again by itself.
  if (err.code === 'database-unavailable') return sendProblem(req, reply, problem('not-ready', 'The database cannot be reached just now: try again in a moment.', { headers: { 'retry-after': '1' } }))
  // The disk under the database is full (SQLite, a file, PostgreSQL's disk_full): nothing of the
  // request was kept. The client may try again once an operator has made room, who must hear of it.
  if (err.code !== undefined && DISK_FULL.has(err.code)) {
    req.log.error({ err }, 'the disk is full: a write was refused')
    return sendProblem(
      req,
      reply,
      problem('not-ready', 'The server cannot store anything just now (its disk is full): nothing of this request was kept; try again later.', { headers: { 'retry-after': '60' } }),
    )
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

/** A known path with another method answers 405 with the methods it has; any other, 404. */
export function registerNotFound(app: FastifyInstance, ops: Map<string, Operation>): void {
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
}
