// The media types and codings a request's body may come in, and the body parsers: bodies
// are read as sent, JSON in any of its media types as application/json, and only as UTF-8.
import { isUtf8 } from 'node:buffer'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Operation } from '../contract.js'
import { problem } from '../errors.js'
import { isJsonMediaType } from '../negotiate.js'

/** The content type a body is given when its operation ignores it: parsed as nothing. */
const IGNORED_BODY = 'application/x-prime-ignored-body'

/** Refuses a body its operation does not take in that media type or coding (415). */
export function gateMediaType(req: FastifyRequest, op: Operation) {
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

/** The ignored body is parsed as nothing; JSON must be UTF-8. */
export function registerBodyParsers(app: FastifyInstance): void {
  app.addContentTypeParser(IGNORED_BODY, { parseAs: 'buffer' }, (_req, _body, done) => done(null, undefined))
  // JSON is UTF-8 (RFC 8259): a body that is not answers 400 rather than being read with
  // U+FFFD in place of its bad bytes.
  const parseJson = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    if (!isUtf8(body as Buffer)) return done(problem('bad-json', 'The body is not valid UTF-8.'), undefined)
    parseJson(req, (body as Buffer).toString('utf8'), done)
  })
}
