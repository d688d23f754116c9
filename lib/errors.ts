// The one catalogue of every problem the API can answer (RFC 9457).
export const catalogue = {
  validation: { status: 400, title: 'Invalid request' },
  'invalid-credentials': { status: 400, title: 'Login failed' },
  'bad-json': { status: 400, title: 'Malformed JSON body' },
  'malformed-request': { status: 400, title: 'Malformed HTTP request' },
  'no-agent-matched': { status: 400, title: 'No agent matched' },
  unauthenticated: { status: 401, title: 'Authentication required' },
  forbidden: { status: 403, title: 'Needs a user with a higher profile' },
  'not-found': { status: 404, title: 'Not found' },
  'route-not-found': { status: 404, title: 'No such operation' },
  'method-not-allowed': { status: 405, title: 'Method not allowed' },
  'not-acceptable': { status: 406, title: 'Not acceptable' },
  'request-timeout': { status: 408, title: 'Request not received in time' },
  conflict: { status: 409, title: 'Conflict' },
  'poller-deactivated': { status: 409, title: 'Worker poller deactivated' },
  'reenrollment-replaced': { status: 409, title: 'Held re-enrollment replaced' },
  'payload-too-large': { status: 413, title: 'Request body too large' },
  'uri-too-long': { status: 414, title: 'Path parameter too long' },
  'unsupported-media-type': { status: 415, title: 'Unsupported media type' },
  'mail-not-configured': { status: 409, title: 'Outgoing mail not configured' },
  'expectation-failed': { status: 417, title: 'Expectation not met' },
  'rate-limited': { status: 429, title: 'Too many requests' },
  'account-locked': { status: 429, title: 'Account locked' },
  'expensive-in-flight': { status: 429, title: 'An expensive request of this caller is still running' },
  'query-too-costly': { status: 422, title: 'Query stopped at its time budget' },
  'headers-too-large': { status: 431, title: 'Request line and headers too large' },
  internal: { status: 500, title: 'Internal server error' },
  'not-implemented': { status: 501, title: 'Not implemented' },
  'mail-not-sent': { status: 503, title: 'Mail not sent' },
  'not-ready': { status: 503, title: 'Not ready' },
  'readers-busy': { status: 503, title: 'Every reader thread is busy' },
} as const

export type ProblemCode = keyof typeof catalogue

export interface FieldError {
  location: 'body' | 'query' | 'path' | 'header'
  name: string
  reason: string
}

export class ProblemError extends Error {
  readonly code: ProblemCode
  readonly status: number
  readonly errors?: FieldError[]
  readonly headers?: Record<string, string>

  constructor(code: ProblemCode, detail: string, opts: { errors?: FieldError[]; headers?: Record<string, string> } = {}) {
    super(detail)
    this.code = code
    this.status = catalogue[code].status
    this.errors = opts.errors
    this.headers = opts.headers
  }
}

export const problem = (code: ProblemCode, detail: string, opts?: { errors?: FieldError[]; headers?: Record<string, string> }) => new ProblemError(code, detail, opts)

/** A 400 naming one field. */
export const invalidField = (location: FieldError['location'], name: string, reason: string) =>
  new ProblemError('validation', `${location}/${name} ${reason}`, { errors: [{ location, name, reason }] })

export interface ProblemBody {
  type: string
  title: string
  status: number
  detail: string
  instance: string
  requestId: string
  code: ProblemCode
  errors?: FieldError[]
}

export function problemBody(err: ProblemError, instance: string, requestId: string): ProblemBody {
  const body: ProblemBody = {
    type: `urn:prime:problem:${err.code}`,
    title: catalogue[err.code].title,
    status: err.status,
    detail: err.message,
    // The path as asked, cut to the contract's bound (a 414 path is longer).
    instance: instance.slice(0, 4096),
    requestId,
    code: err.code,
  }
  if (err.errors) body.errors = err.errors
  return body
}
