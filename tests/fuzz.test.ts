// On PostgreSQL its database's commits skip the fsync (synchronous_commit off, as in tests/fixtures/pg-records.ts): each of its ~10,700 requests commits at least once, and at ~17 ms a durable commit on a busy machine the file ran into tap's 600 s.
// Generated from the contract: valid and invalid requests to every operation. Fails on any
// 5xx (other than an operation's declared 501) and, since the test app checks every
// answer against the contract, on any answer the contract does not describe.
import t from 'tap'
import type { FastifyInstance, InjectOptions } from 'fastify'
import { build, login, testBackend } from './helpers.js'
import { pgTestDatabaseUrl } from './pg.js'
import { bodyVariants, deref, GARBAGE, seededFaker } from '../scripts/contract-requests.js'

const jsf = seededFaker(20261121, 'Fuzz-password-1234')
type Json = Record<string, any>

t.test('fuzzing every operation of the contract', async (t) => {
  const database: Record<string, string> = {}
  if (testBackend === 'postgres') {
    // What is fuzzed is the answers, not durability: commits need not wait for the disk.
    const url = new URL(await pgTestDatabaseUrl(t))
    url.searchParams.set('options', '-c synchronous_commit=off')
    database.PRIME_DATABASE_URL = url.toString()
  }
  const app: FastifyInstance = await build(t, { PRIME_LOGIN_RATE_LIMIT_MAX: '100000', PRIME_LOCKOUT_THRESHOLD: '1000', ...database })
  const { spec, operations } = app.contract
  let token = await login(app)
  let requests = 0

  for (const op of operations.values()) {
    const raw = deref(spec.paths[op.path][op.method.toLowerCase()], spec)
    const params: Json[] = raw.parameters ?? []
    const pathParams = params.filter((p) => p.in === 'path')
    const queryParams = params.filter((p) => p.in === 'query')
    const bodySchema = raw.requestBody?.content?.['application/json']?.schema
    const validPath = () => Object.fromEntries(pathParams.map((p) => [p.name, String(jsf.generate(p.schema))]))
    const validQuery = () => {
      const q: Json = {}
      for (const p of queryParams) {
        const v = p.schema?.type === 'object' ? jsf.generate(p.schema) : jsf.generate(p.schema ?? { type: 'string' })
        if (p.schema?.type === 'object') Object.assign(q, v)
        else q[p.name] = String(v)
      }
      return q
    }
    const url = (path: Json) => op.path.replace(/\{(\w+)\}/g, (_, n) => encodeURIComponent(path[n]))
    const failures: string[] = []

    const send = async (label: string, opts: Partial<InjectOptions>) => {
      requests++
      let res = await app.inject({ method: op.method as any, url: url(validPath()), ...opts, headers: { authorization: `Bearer ${token}`, ...(opts.headers ?? {}) } })
      if (res.statusCode === 401 && op.access.kind === 'user') {
        // A fuzzed logout or password change may have ended the session: log in again.
        token = await login(app)
        res = await app.inject({ method: op.method as any, url: url(validPath()), ...opts, headers: { authorization: `Bearer ${token}`, ...(opts.headers ?? {}) } })
      }
      const declared501 = res.statusCode === 501 && raw.responses['501']
      if (res.statusCode >= 500 && !declared501) failures.push(`${label}: ${res.statusCode} ${res.body.slice(0, 300)}`)
    }

    const body = bodySchema ? jsf.generate(bodySchema) : undefined
    const json = (b: any) => ({ payload: JSON.stringify(b), headers: { 'content-type': 'application/json' } })
    for (let i = 0; i < 3; i++) await send(`valid #${i}`, { query: validQuery(), ...(bodySchema ? json(jsf.generate(bodySchema)) : {}) })
    for (const p of queryParams) {
      for (const g of GARBAGE) await send(`query ${p.name}=${JSON.stringify(g).slice(0, 20)}`, { query: { ...validQuery(), [p.name]: g }, ...(bodySchema ? json(body) : {}) })
    }
    for (const p of pathParams) {
      for (const g of [...GARBAGE.filter(Boolean), 'x'.repeat(101), '%2e%2e%2f']) {
        const path = { ...validPath(), [p.name]: g }
        requests++
        const res = await app.inject({
          method: op.method as any,
          url: op.path.replace(/\{(\w+)\}/g, (_, n) => (n === p.name ? encodeURIComponent(g) : path[n])),
          headers: { authorization: `Bearer ${token}` },
        })
        if (res.statusCode >= 500 && !(res.statusCode === 501 && raw.responses['501'])) failures.push(`path ${p.name}=${g.slice(0, 20)}: ${res.statusCode} ${res.body.slice(0, 200)}`)
      }
    }
    if (bodySchema) {
      for (const [label, v] of bodyVariants(body, bodySchema)) await send(`body ${label}`, json(v))
      await send('malformed JSON', { payload: '{"a":', headers: { 'content-type': 'application/json' } })
      await send('empty JSON', { payload: '', headers: { 'content-type': 'application/json' } })
      await send('XML', { payload: '<a/>', headers: { 'content-type': 'application/xml' } })
      await send('JSON as text/json', { payload: JSON.stringify(body), headers: { 'content-type': 'text/json; charset=utf-8' } })
      await send('proto pollution', { payload: '{"__proto__":{"admin":true},"constructor":{"prototype":{"x":1}}}', headers: { 'content-type': 'application/json' } })
    } else if (op.method !== 'GET') {
      await send('unexpected body', json({ a: 1 }))
    }
    await send('odd Accept', { headers: { accept: 'image/png' } })
    t.same(failures, [], `${op.operationId}: no 5xx, answers as the contract says`)
  }
  t.ok(requests > operations.size * 10, `${requests} requests sent`)
})
