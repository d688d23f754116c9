// The attack run's core: from the contract, a valid request and many invalid ones for each
// operation, sent with each credential kind and with none; every answer judged against the
// contract (5xx, a status the operation does not declare, a media type or body it does not
// describe) and searched for the marker an alarm target answers with (read-back). The
// sender is given: real HTTP in `npm run attack`, app.inject() in its test.
import { operations, type Operation } from '../lib/contract.js'
import { answerJudge } from '../lib/response-check.js'
import { bodyVariants, deref, GARBAGE, seededFaker } from './contract-requests.js'

type Json = Record<string, any>

export interface AttackRequest {
  method: string
  url: string
  headers: Record<string, string>
  body?: string
}
export interface AttackAnswer {
  status: number
  contentType: string
  body: string
}
export type Sender = (req: AttackRequest) => Promise<AttackAnswer>

export type CredentialKind = 'none' | 'garbage' | 'administrator' | 'manager' | 'user' | 'integration' | 'agent' | 'poller'
export type Credentials = Partial<Record<CredentialKind, string>>

export interface Finding {
  kind: '5xx' | 'undeclared-status' | 'undeclared-media-type' | 'body-not-as-declared' | 'read-back' | 'transport-error'
  operationId: string
  label: string
  status: number
  detail: string
}

export interface OperationStats {
  operationId: string
  requests: number
  statuses: Record<string, number>
  p50: number
  p99: number
  max: number
}

const SPECIAL_AUTH: Record<string, CredentialKind> = { agent: 'agent', poller: 'poller', public: 'none' }

const jsf = seededFaker(20261126, 'Attack-password-1234')

/** The statuses an operation declares (its own responses, which may point at components). */
export function declaredStatuses(spec: Json, op: Operation): Set<string> {
  return new Set(Object.keys(spec.paths[op.path][op.method.toLowerCase()].responses ?? {}))
}

/** Judges answers against the contract (lib/response-check.ts), and any 5xx. */
export function contractJudge(spec: Json) {
  // Very large answers (pages of a million rows) are judged by status and media type only.
  const judge = answerJudge(spec, { maxBodyChars: 5_000_000 })
  return (op: Operation, answer: AttackAnswer): Pick<Finding, 'kind' | 'detail'> | null => {
    if (answer.status >= 500) return { kind: '5xx', detail: answer.body.slice(0, 300) }
    const violation = judge(op, answer.status, answer.contentType, answer.body)
    return violation ? { kind: violation.kind, detail: `${violation.detail.slice(0, 300)}: ${answer.body.slice(0, 200)}` } : null
  }
}

export interface AttackOptions {
  /** Operations to attack (default: every one). */
  only?: (op: Operation) => boolean
  /** Requests in flight at once. */
  concurrency?: number
  /** Text an alarm target answers with: an answer that carries it is a read-back. */
  marker?: string
  /** Fresh credentials for a kind whose session a request ended (a fuzzed logout, say). */
  renew?: (kind: CredentialKind) => Promise<string | undefined>
  /** Called before each operation (progress). */
  progress?: (done: number, total: number, operationId: string) => void
  /** The longest URL and header sent (bytes); real HTTP tries parser limits, inject does not need them. */
  longUrl?: number
  longHeader?: number
}

export interface AttackResult {
  requests: number
  findings: Finding[]
  operations: OperationStats[]
  statuses: Record<string, number>
  ms: number
}

const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] : NaN)

/** Runs the contract-driven attack over the operations with the credentials given. */
export async function attack(spec: Json, send: Sender, credentials: Credentials, opts: AttackOptions = {}): Promise<AttackResult> {
  const judge = contractJudge(spec)
  const ops = [...operations(spec).values()].filter(opts.only ?? (() => true))
  const findings: Finding[] = []
  const stats: OperationStats[] = []
  const statuses: Record<string, number> = {}
  const creds = { ...credentials }
  const t0 = performance.now()
  let requests = 0
  let done = 0

  for (const op of ops) {
    opts.progress?.(done++, ops.length, op.operationId)
    const raw = deref(spec.paths[op.path][op.method.toLowerCase()], spec)
    const params: Json[] = raw.parameters ?? []
    const pathParams = params.filter((p) => p.in === 'path')
    const queryParams = params.filter((p) => p.in === 'query')
    const media = Object.keys(raw.requestBody?.content ?? {})
    const bodySchema = raw.requestBody?.content?.['application/json']?.schema
    const multipart = media.some((m) => m.startsWith('multipart/'))
    const validPath = () => Object.fromEntries(pathParams.map((p) => [p.name, String(jsf.generate(p.schema ?? { type: 'string' }))]))
    const validQuery = (): Json => {
      const q: Json = {}
      for (const p of queryParams) {
        const v = jsf.generate(p.schema ?? { type: 'string' })
        if (p.schema?.type === 'object') Object.assign(q, v)
        else q[p.name] = String(v)
      }
      return q
    }
    const url = (path: Json, query: Json = {}, raw = false) => {
      const p = op.path.replace(/\{(\w+)\}/g, (_, n) => (raw ? path[n] : encodeURIComponent(path[n])))
      const qs = Object.entries(query)
        .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`)
        .join('&')
      return qs ? `${p}?${qs}` : p
    }
    const own: CredentialKind = op.access.kind === 'user' ? 'administrator' : SPECIAL_AUTH[op.access.kind]
    const times: number[] = []
    const opStatuses: Record<string, number> = {}
    const cases: { label: string; kind: CredentialKind; req: Omit<AttackRequest, 'headers'> & { headers?: Record<string, string> } }[] = []
    const json = (b: unknown) => ({ body: JSON.stringify(b), headers: { 'content-type': 'application/json' } })
    const body = bodySchema ? jsf.generate(bodySchema) : undefined
    const validBody = () => (bodySchema ? json(jsf.generate(bodySchema)) : multipart ? { body: '', headers: { 'content-type': 'multipart/form-data; boundary=x' } } : {})

    // A valid request with every credential kind, and with none.
    for (const kind of Object.keys(creds) as CredentialKind[]) cases.push({ label: `valid as ${kind}`, kind, req: { method: op.method, url: url(validPath(), validQuery()), ...validBody() } })
    cases.push({ label: 'valid, no credential', kind: 'none', req: { method: op.method, url: url(validPath(), validQuery()), ...validBody() } })
    for (let i = 0; i < 2; i++) cases.push({ label: `valid #${i}`, kind: own, req: { method: op.method, url: url(validPath(), validQuery()), ...validBody() } })
    // Invalid query and path values.
    // Each query parameter gets a third of the garbage values, in turn, so that every value
    // is tried and the run stays bounded on operations with many parameters.
    queryParams.forEach((p, k) => {
      for (const g of GARBAGE.filter((_, i) => queryParams.length < 3 || i % 3 === k % 3))
        cases.push({
          label: `query ${p.name}=${JSON.stringify(g).slice(0, 20)}`,
          kind: own,
          req: { method: op.method, url: url(validPath(), { ...validQuery(), [p.name]: g }), ...(bodySchema ? json(body) : {}) },
        })
    })
    for (const p of pathParams) {
      for (const g of [...GARBAGE.filter(Boolean), 'x'.repeat(101)]) {
        cases.push({ label: `path ${p.name}=${JSON.stringify(g).slice(0, 20)}`, kind: own, req: { method: op.method, url: url({ ...validPath(), [p.name]: g }), ...(bodySchema ? json(body) : {}) } })
      }
      for (const odd of ['%2e%2e%2f', '..%2f..%2fetc%2fpasswd', '%E0%A4%A', '%ZZ', '%00', '%2F']) {
        cases.push({ label: `path ${p.name} raw ${odd}`, kind: own, req: { method: op.method, url: url({ ...validPath(), [p.name]: odd }, {}, true) } })
      }
    }
    // Bodies: variants, malformed, wrong media types.
    if (bodySchema) {
      for (const [label, v] of bodyVariants(body, bodySchema)) cases.push({ label: `body ${label}`, kind: own, req: { method: op.method, url: url(validPath()), ...json(v) } })
      for (const [label, payload, type] of [
        ['malformed JSON', '{"a":', 'application/json'],
        ['empty JSON', '', 'application/json'],
        ['deep JSON', '['.repeat(5000) + ']'.repeat(5000), 'application/json'],
        ['duplicate keys', '{"a":1,"a":2}', 'application/json'],
        ['proto pollution', '{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}', 'application/json'],
        ['XML', '<a/>', 'application/xml'],
        ['form', 'a=1', 'application/x-www-form-urlencoded'],
        ['JSON as text/plain', JSON.stringify(body), 'text/plain'],
        ['JSON as text/json', JSON.stringify(body), 'text/json; charset=utf-8'],
        ['JSON, odd charset', JSON.stringify(body), 'application/json; charset=utf-7'],
        ['multipart without boundary', 'x', 'multipart/form-data'],
      ] as const)
        cases.push({ label: `body ${label}`, kind: own, req: { method: op.method, url: url(validPath()), body: payload, headers: { 'content-type': type } } })
      cases.push({ label: 'body without content type', kind: own, req: { method: op.method, url: url(validPath()), body: JSON.stringify(body) } })
    } else if (multipart) {
      for (const [label, payload, type] of [
        ['multipart without boundary', 'x', 'multipart/form-data'],
        ['multipart, broken', '--x\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\nabc', 'multipart/form-data; boundary=x'],
        ['multipart, no file', '--x\r\nContent-Disposition: form-data; name="other"\r\n\r\nabc\r\n--x--\r\n', 'multipart/form-data; boundary=x'],
        ['JSON instead', '{}', 'application/json'],
      ] as const)
        cases.push({ label: `body ${label}`, kind: own, req: { method: op.method, url: url(validPath()), body: payload, headers: { 'content-type': type } } })
    } else if (op.method !== 'GET') {
      cases.push({ label: 'unexpected body', kind: own, req: { method: op.method, url: url(validPath()), ...json({ a: 1 }) } })
    }
    // The request line and headers.
    const base = url(validPath(), validQuery())
    cases.push({ label: 'trailing slash', kind: own, req: { method: op.method, url: base.replace(/(\?|$)/, '/$1'), ...validBody() } })
    cases.push({ label: 'upper-case path', kind: own, req: { method: op.method, url: base.replace(/^[^?]*/, (p) => p.toUpperCase()), ...validBody() } })
    cases.push({ label: 'odd Accept', kind: own, req: { method: op.method, url: base, headers: { accept: 'image/png' }, ...(bodySchema ? json(body) : {}) } })
    cases.push({ label: 'long query', kind: own, req: { method: op.method, url: `${base}${base.includes('?') ? '&' : '?'}pad=${'a'.repeat(opts.longUrl ?? 8000)}`, ...validBody() } })
    cases.push({ label: 'long header', kind: own, req: { method: op.method, url: base, headers: { 'x-pad': 'a'.repeat(opts.longHeader ?? 8000) }, ...(bodySchema ? json(body) : {}) } })
    cases.push({ label: 'control characters in a header', kind: own, req: { method: op.method, url: base, headers: { 'x-request-id': 'a\u0001b\u202e' }, ...(bodySchema ? json(body) : {}) } })
    cases.push({ label: 'wrong method', kind: own, req: { method: op.method === 'GET' ? 'DELETE' : 'PATCH', url: base } })

    const runCase = async (c: (typeof cases)[number]) => {
      const token = c.kind === 'none' ? undefined : c.kind === 'garbage' ? 'garbage.token.value' : creds[c.kind]
      const headers: Record<string, string> = { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(c.req.headers ?? {}) }
      const req: AttackRequest = { method: c.req.method, url: c.req.url, headers, body: c.req.body }
      let answer: AttackAnswer
      const started = performance.now()
      try {
        answer = await send(req)
      } catch (err) {
        requests++
        findings.push({ kind: 'transport-error', operationId: op.operationId, label: c.label, status: 0, detail: (err as Error).message })
        return
      }
      times.push(performance.now() - started)
      requests++
      opStatuses[answer.status] = (opStatuses[answer.status] ?? 0) + 1
      statuses[answer.status] = (statuses[answer.status] ?? 0) + 1
      const verdict = judge(op, answer)
      if (verdict) findings.push({ ...verdict, operationId: op.operationId, label: `${c.label} (as ${c.kind})`, status: answer.status })
      if (opts.marker && answer.body.includes(opts.marker))
        findings.push({ kind: 'read-back', operationId: op.operationId, label: `${c.label} (as ${c.kind})`, status: answer.status, detail: "the answer carries an alarm target's answer" })
      // A fuzzed logout, password change or deletion may have ended a session: renew it.
      const ownKind = c.kind === 'agent' ? op.access.kind === 'agent' : c.kind === 'poller' ? op.access.kind === 'poller' : op.access.kind === 'user'
      if (answer.status === 401 && token && c.kind !== 'garbage' && ownKind && opts.renew) {
        const fresh = await opts.renew(c.kind)
        if (fresh) creds[c.kind] = fresh
      }
    }
    const width = Math.max(1, opts.concurrency ?? 4)
    for (let i = 0; i < cases.length; i += width) await Promise.all(cases.slice(i, i + width).map(runCase))
    stats.push({ operationId: op.operationId, requests: times.length, statuses: opStatuses, p50: pct(times, 0.5), p99: pct(times, 0.99), max: Math.max(0, ...times) })
  }
  return { requests, findings, operations: stats, statuses, ms: performance.now() - t0 }
}

/** Findings grouped for a report: kind, operation and status, with a count and one example each. */
export function summarize(findings: Finding[]): { kind: string; operationId: string; status: number; count: number; example: string }[] {
  const groups = new Map<string, { kind: string; operationId: string; status: number; count: number; example: string }>()
  for (const f of findings) {
    const key = `${f.kind}|${f.operationId}|${f.status}`
    const g = groups.get(key)
    if (g) g.count++
    else groups.set(key, { kind: f.kind, operationId: f.operationId, status: f.status, count: 1, example: `${f.label}: ${f.detail}`.replace(/\s+/g, ' ').slice(0, 240) })
  }
  return [...groups.values()].sort((a, b) => a.kind.localeCompare(b.kind) || a.operationId.localeCompare(b.operationId) || a.status - b.status)
}
