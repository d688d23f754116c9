// Pins the wire conventions of spec/openapi.yaml (info.description) and compatibility.md,
// through app.inject() only.
import t, { type Test } from 'tap'
import type { LightMyRequestResponse } from 'fastify'
import { build, login, bearer, call, userWithProfile, ADMIN_PASSWORD } from './helpers.js'
import { lastAuditId, latestAudit, queryOne, queryValue } from './seed.js'
import { canonicalizeQuery, canonicalize } from '../lib/names.js'
import { validatorCompiler } from '../lib/validation.js'

const LOGIN = '/prime/webui/Auth/LocalLogin'
const creds = { username: 'admin', password: ADMIN_PASSWORD }
// Many logins per file: the login limit is pinned in rate-limits.test.ts.
const env = { PRIME_LOGIN_RATE_LIMIT_MAX: '10000' }
/** Asserts an RFC 9457 problem answer with the given status; answers its body. */
function isProblem(t: Test, res: LightMyRequestResponse, status: number, type?: string) {
  t.equal(res.statusCode, status, `status ${status}: ${res.body.slice(0, 300)}`)
  t.match(res.headers['content-type'], /^application\/problem\+json(;|$)/, 'problem media type')
  const body = res.json()
  for (const field of ['type', 'title', 'status', 'detail', 'instance', 'requestId']) t.ok(field in body, `problem has ${field}`)
  t.equal(body.status, status, 'status field matches')
  t.type(body.title, 'string')
  t.type(body.detail, 'string')
  t.match(body.type, /^urn:prime:problem:[a-z-]+$/)
  if (type) t.equal(body.type, `urn:prime:problem:${type}`)
  t.equal(body.requestId, res.headers['x-request-id'], 'requestId equals the x-request-id header')
  t.notMatch(res.body, /at .*\.(ts|js):\d+/, 'no stack trace')
  return body
}

t.test('paths match case-insensitively', async (t) => {
  const app = await build(t, env)
  const lower = await app.inject({ method: 'POST', url: '/prime/webui/auth/locallogin', payload: creds })
  t.equal(lower.statusCode, 200, lower.body)
  const upper = await app.inject({ method: 'POST', url: '/PRIME/WEBUI/AUTH/LOCALLOGIN', payload: creds })
  t.equal(upper.statusCode, 200, upper.body)
  const signin = await app.inject({ method: 'POST', url: '/prime/webui/Auth/signin', payload: creds })
  t.equal(signin.statusCode, 200, 'auth/signin also as Auth/signin')
  const token = lower.json().token
  const all = await call(app, token, { url: '/PRIME/WEBUI/ADMIN/ALL' })
  t.equal(all.statusCode, 200, all.body)
  t.equal(all.json()[0].userName, 'admin')
  const mixed = await call(app, token, { url: '/Prime/WebUI/Admin/primeversion' })
  t.equal(mixed.statusCode, 200)
})

t.test('query parameter names are case-insensitive', async (t) => {
  // No operation of this version of the contract takes query parameters, so this pins the
  // function the preValidation hook applies to every query string.
  const schema = {
    type: 'object',
    properties: { PageNumber: { type: 'integer' }, PageSize: { type: 'integer' }, GlobalSearch: { type: 'string' }, FromEventId: { type: 'integer' }, minimumSeverity: { type: 'string' } },
  }
  const q: Record<string, unknown> = { pageSize: '50', PAGENUMBER: '2', globalsearch: 'usb', fromeventid: '7', MinimumSeverity: 'Warning', unknownParam: 'x' }
  canonicalizeQuery(q, schema)
  t.same(
    q,
    { PageSize: '50', PageNumber: '2', GlobalSearch: 'usb', FromEventId: '7', minimumSeverity: 'Warning', unknownParam: 'x' },
    'renamed to the contract spelling; unknown names stay (and fail validation)',
  )

  const exact: Record<string, unknown> = { PageSize: '10', pagesize: '20' }
  canonicalizeQuery(exact, schema)
  t.same(exact, { PageSize: '10', pagesize: '20' }, 'a name given in both spellings is not silently merged')

  const empty: Record<string, unknown> = { pageSize: '', GlobalSearch: '', sortBy: ['', ''], PageNumber: '1' }
  canonicalizeQuery(empty, schema)
  t.same(empty, { PageNumber: '1' }, 'parameters given empty are dropped')

  canonicalizeQuery({ a: '1' }, undefined)
  t.pass('no schema: nothing to rename, no crash')
})

t.test('query and path values are coerced, bodies are not', async (t) => {
  const querySchema = { type: 'object', properties: { PageSize: { type: 'integer' }, isActive: { type: 'boolean' } } }
  const validateQuery = validatorCompiler({ schema: querySchema, httpPart: 'querystring', method: 'GET', url: '/' }) as any
  const q = { PageSize: '50', isActive: 'true' }
  t.ok(validateQuery(q), 'strings in a query are valid integers and booleans')
  t.same(q, { PageSize: 50, isActive: true }, 'and coerced')
  t.notOk(validateQuery({ PageSize: 'many' }), 'but not anything')

  const validateParams = validatorCompiler({ schema: { type: 'object', properties: { id: { type: 'integer' } } }, httpPart: 'params', method: 'GET', url: '/' }) as any
  const p = { id: '12' }
  t.ok(validateParams(p))
  t.same(p, { id: 12 }, 'path values are coerced')

  const validateBody = validatorCompiler({ schema: querySchema, httpPart: 'body', method: 'POST', url: '/' }) as any
  const b = { PageSize: '50' }
  t.notOk(validateBody(b), 'a string is not an integer in a body')
  t.same(b, { PageSize: '50' }, 'and it is left as sent')
})

t.test('body property names are case-insensitive', async (t) => {
  const app = await build(t, env)
  for (const payload of [
    { username: 'admin', password: ADMIN_PASSWORD },
    { Username: 'admin', Password: ADMIN_PASSWORD },
    { USERNAME: 'admin', PASSWORD: ADMIN_PASSWORD },
    { userName: 'ADMIN', passWord: ADMIN_PASSWORD },
  ]) {
    const res = await app.inject({ method: 'POST', url: LOGIN, payload })
    t.equal(res.statusCode, 200, `${Object.keys(payload).join(',')}: ${res.body.slice(0, 200)}`)
    t.equal(res.json().user.userName, 'admin', 'answers use the documented camelCase')
  }
  // The names of a schema built with allOf (AccountCreateRequest) are found too.
  const token = await login(app)
  const res = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { USERNAME: 'carol', Email: 'carol@example.com', userprofile: 10, PASSWORD: 'Long-enough-123' } })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().userName, 'carol')

  const nested = { outer: { inner: 1, Other: 2 } }
  canonicalize(nested, { type: 'object', properties: { Outer: { type: 'object', properties: { Inner: {}, other: {} } } } })
  t.same(nested, { Outer: { Inner: 1, other: 2 } }, 'nested objects follow their schema')
  const list = [{ USERNAME: 'a' }, { username: 'b' }]
  canonicalize(list, { type: 'array', items: { type: 'object', properties: { userName: {} } } })
  t.same(list, [{ userName: 'a' }, { userName: 'b' }], 'array items follow the items schema')

  const both = await app.inject({ method: 'POST', url: LOGIN, payload: { username: 'admin', Username: 'admin', password: ADMIN_PASSWORD } })
  const body = isProblem(t, both, 400, 'validation')
  t.same(body.errors, [{ location: 'body', name: 'Username', reason: 'is not a known property' }], 'the same name twice in two spellings is refused, not merged')
})

t.test('request media types', async (t) => {
  const app = await build(t, env)
  for (const type of ['application/json', 'text/json', 'application/vnd.prime+json', 'application/json-patch+json', 'APPLICATION/JSON', 'application/json; charset=utf-8', 'text/json;charset=UTF-8']) {
    const res = await app.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': type }, payload: JSON.stringify(creds) })
    t.equal(res.statusCode, 200, `${type} is parsed as JSON: ${res.body.slice(0, 200)}`)
  }
  for (const [type, payload] of [
    ['application/xml', '<login><username>admin</username></login>'],
    ['text/plain', JSON.stringify(creds)],
    ['application/x-www-form-urlencoded', 'username=admin&password=x'],
    ['multipart/form-data; boundary=x', '--x--'],
    ['application/jsonx', JSON.stringify(creds)],
  ]) {
    const res = await app.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': type }, payload })
    const body = isProblem(t, res, 415, 'unsupported-media-type')
    t.match(body.detail, 'application/json', `${type}: the detail names what is accepted`)
  }
})

t.test('a body sent to an operation that takes none is ignored', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const res = await call(app, token, { method: 'POST', url: '/prime/webui/auth/logout', headers: { 'content-type': 'application/json' }, payload: '{}' })
  t.equal(res.statusCode, 200, res.body)
  t.equal(res.json().loggedOut, true)
  const del = await call(app, await login(app), {
    method: 'DELETE',
    url: '/prime/webui/admin/integrationTokens/0b9e3f5c-7f7e-4d0a-9d6c-55c8a7c9e1a2',
    headers: { 'content-type': 'application/json' },
    payload: '{"a":1}',
  })
  isProblem(t, del, 404, 'not-found')
})

t.test('Accept negotiation', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const url = '/prime/webui/admin/PrimeVersion'
  const plain = await call(app, token, { url })
  t.equal(plain.statusCode, 200)
  t.match(plain.headers['content-type'], /^application\/json; charset=utf-8$/, 'no Accept: application/json')
  const expected = plain.json()
  for (const [accept, type] of [
    ['application/json', 'application/json'],
    ['text/json', 'text/json'],
    ['text/plain', 'text/plain'],
    ['*/*', 'application/json'],
    ['text/plain;q=0.5, text/json;q=0.9', 'text/json'],
    ['image/png, text/plain', 'text/plain'],
  ]) {
    const res = await call(app, token, { url, headers: { accept } })
    t.equal(res.statusCode, 200, accept)
    t.equal(res.headers['content-type'], `${type}; charset=utf-8`, `Accept: ${accept} answers ${type}`)
    t.same(JSON.parse(res.body), expected, 'the same JSON')
  }
  for (const accept of ['image/png', 'application/xml', 'application/problem+json']) {
    const res = await call(app, token, { url, headers: { accept } })
    const body = isProblem(t, res, 406, 'not-acceptable')
    t.match(body.detail, 'application/json, text/json, text/plain', 'names what it can answer')
  }
  const list = await call(app, token, { url: '/prime/webui/admin/all', headers: { accept: 'text/plain' } })
  t.equal(list.headers['content-type'], 'text/plain; charset=utf-8')
  t.equal(list.json()[0].userName, 'admin')
  const loginPlain = await app.inject({ method: 'POST', url: LOGIN, headers: { accept: 'text/json' }, payload: creds })
  t.equal(loginPlain.headers['content-type'], 'text/json; charset=utf-8', 'negotiated on a POST too')
})

t.test('malformed and unexpected bodies answer 400, never 500', async (t) => {
  const app = await build(t, env)
  const post = (payload: string) => app.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': 'application/json' }, payload })
  for (const payload of ['{', '{"username":', "{'username':'admin'}", '{"username":"admin",}', 'undefined', '\u0000']) {
    isProblem(t, await post(payload), 400, 'bad-json')
  }
  for (const payload of ['{"__proto__":{"isAdmin":true},"username":"a","password":"b"}', '{"constructor":{"prototype":{"x":1}}}']) {
    const res = await post(payload)
    isProblem(t, res, 400)
  }
  for (const payload of ['null', '[]', '123', '"admin"', 'true']) {
    const body = isProblem(t, await post(payload), 400, 'validation')
    t.same(body.errors, [{ location: 'body', name: '(root)', reason: 'must be object' }], `${payload}: names the root`)
  }
  const empty = isProblem(t, await post(''), 400, 'validation')
  t.ok(empty.detail, 'an empty JSON body')
  const none = isProblem(t, await app.inject({ method: 'POST', url: LOGIN }), 400, 'validation')
  t.same(none.errors, [{ location: 'body', name: '(root)', reason: 'is required' }], 'no body at all')
  const inherited = isProblem(t, await post('{"toString":1,"username":"a","password":"b"}'), 400, 'validation')
  t.same(inherited.errors, [{ location: 'body', name: 'toString', reason: 'is not a known property' }], 'Object.prototype names are unknown properties too')
})

t.test('a deeply nested body answers a problem and is audited', async (t) => {
  const app = await build(t, env)
  const before = await lastAuditId(app)
  const depth = 5000
  const res = await app.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': 'application/json' }, payload: '['.repeat(depth) + ']'.repeat(depth) })
  isProblem(t, res, 400)
  t.ok((await lastAuditId(app)) > before, 'the failed login is audited')
})

t.test('bodies are validated strictly', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const unknown = await app.inject({ method: 'POST', url: LOGIN, payload: { ...creds, rememberMe: true } })
  const u = isProblem(t, unknown, 400, 'validation')
  t.same(u.errors, [{ location: 'body', name: 'rememberMe', reason: 'is not a known property' }], 'names the unknown property')
  t.match(u.detail, 'rememberMe')

  const adduser = (payload: unknown) => call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: payload as object })
  const wrongType = isProblem(t, await adduser({ userName: 'bob', email: 'bob@example.com', userProfile: '20', password: 'Long-enough-123' }), 400, 'validation')
  t.ok(
    wrongType.errors.some((e: any) => e.location === 'body' && e.name === 'userProfile' && /integer/.test(e.reason)),
    'userProfile "20" is not coerced to 20',
  )
  const all = await call(app, token, { url: '/prime/webui/admin/all' })
  t.notOk(
    all.json().some((u: any) => u.userName === 'bob'),
    'and nothing was created',
  )

  const wrongBool = isProblem(t, await adduser({ userName: 'bob', email: 'bob@example.com', userProfile: 20, password: 'Long-enough-123', isActive: 'true' }), 400, 'validation')
  t.ok(
    wrongBool.errors.some((e: any) => e.name === 'isActive'),
    'isActive "true" is not coerced',
  )

  const missing = isProblem(t, await adduser({ userName: 'bob', userProfile: 20 }), 400, 'validation')
  t.same(missing.errors.map((e: any) => e.name).sort(), ['email', 'password'], 'each missing field is named')
  t.ok(missing.errors.every((e: any) => e.reason === 'is required'))

  const tooLong = isProblem(t, await adduser({ userName: 'b'.repeat(65), email: 'bob@example.com', userProfile: 20, password: 'Long-enough-123' }), 400, 'validation')
  t.same(tooLong.errors, [{ location: 'body', name: 'userName', reason: 'must NOT have more than 64 characters' }])
})

t.test('limits', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const MiB = 1024 * 1024
  const sized = (n: number) => {
    const prefix = '{"username":"admin","password":"'
    return prefix + 'x'.repeat(n - prefix.length - 2) + '"}'
  }
  t.equal(sized(MiB).length, MiB)
  const atLimit = await app.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': 'application/json' }, payload: sized(MiB) })
  t.equal(atLimit.statusCode, 400, 'exactly 1 MiB is read (and then fails validation)')
  t.match(atLimit.json().errors, [{ name: 'password' }])
  const over = await app.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': 'application/json' }, payload: sized(MiB + 1) })
  isProblem(t, over, 413, 'payload-too-large')

  const id100 = 'a'.repeat(100)
  const at100 = await call(app, token, { method: 'DELETE', url: `/prime/webui/admin/integrationTokens/${id100}` })
  isProblem(t, at100, 400, 'validation')
  const long = await call(app, token, { method: 'DELETE', url: `/prime/webui/admin/integrationTokens/${'a'.repeat(101)}` })
  t.equal(long.statusCode, 414)
  t.match(long.headers['content-type'], /^application\/problem\+json/)
  const body = long.json()
  t.equal(body.type, 'urn:prime:problem:uri-too-long')
  t.match(body.detail, '100 characters')
  for (const field of ['type', 'title', 'status', 'detail', 'instance', 'requestId']) t.ok(field in body, `problem has ${field}`)
})

t.test('a 414 carries the request id', async (t) => {
  // Through a trusted proxy, so that the id it names the request by reaches this answer too.
  const app = await build(t, { ...env, PRIME_TRUST_PROXY: 'true' })
  const res = await app.inject({ method: 'DELETE', url: `/prime/webui/admin/integrationTokens/${'a'.repeat(101)}`, headers: { 'x-request-id': 'long-path-request-1' } })
  t.equal(res.statusCode, 414)
  t.equal(res.headers['x-request-id'], 'long-path-request-1')
  t.equal(res.json().requestId, 'long-path-request-1')
  t.equal(res.headers['x-content-type-options'], 'nosniff')
})

t.test('unknown paths and methods', async (t) => {
  const app = await build(t, env)
  const body = isProblem(t, await app.inject({ url: '/prime/webui/nothing/here' }), 404, 'route-not-found')
  t.equal(body.instance, '/prime/webui/nothing/here')
  t.match(body.detail, 'GET /prime/webui/nothing/here')
  const withQuery = isProblem(t, await app.inject({ url: '/prime/webui/nothing?x=1' }), 404)
  t.equal(withQuery.instance, '/prime/webui/nothing', 'instance is the path, without the query')
  const wrongMethod = await app.inject({ method: 'GET', url: LOGIN })
  isProblem(t, wrongMethod, 405, 'method-not-allowed')
  t.equal(wrongMethod.headers.allow, 'POST')
  isProblem(t, await app.inject({ url: '/' }), 404)
})

t.test('problem documents and request ids', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const user = await userWithProfile(app, token, 'ursula', 10)

  // Only a trusted proxy's id is kept (tests/log.test.ts); a caller's own never names the request.
  const given = await app.inject({ url: '/prime/webui/admin/all', headers: { 'x-request-id': 'client-abc.123-4_5' } })
  const b = isProblem(t, given, 401, 'unauthenticated')
  t.match(given.headers['x-request-id'], /^[0-9a-f-]{36}$/, "a caller's well-formed x-request-id is replaced without a trusted proxy")
  t.equal(b.requestId, given.headers['x-request-id'])
  t.equal(b.instance, '/prime/webui/admin/all')

  for (const bad of ['has space', '<script>', 'x'.repeat(65), 'ünïcode']) {
    const res = await app.inject({ url: '/prime/webui/nothing', headers: { 'x-request-id': bad } })
    t.not(res.headers['x-request-id'], bad, `${JSON.stringify(bad.slice(0, 20))} is replaced`)
    t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'by a uuid')
    t.equal(res.json().requestId, res.headers['x-request-id'])
  }

  const ok = await call(app, token, { url: '/prime/webui/admin/all' })
  t.match(ok.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'successful answers carry an id too')
  const twice = await call(app, token, { url: '/prime/webui/admin/all' })
  t.not(twice.headers['x-request-id'], ok.headers['x-request-id'], 'a new id per request')

  isProblem(
    t,
    await call(app, user, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'x', email: 'x@example.com', userProfile: 10, password: 'Long-enough-123' } }),
    403,
    'forbidden',
  )
  isProblem(
    t,
    await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'ursula', email: 'u@example.com', userProfile: 10, password: 'Long-enough-123' } }),
    409,
    'conflict',
  )
  isProblem(t, await call(app, token, { method: 'DELETE', url: '/prime/webui/admin/integrationTokens/0b9e3f5c-7f7e-4d0a-9d6c-55c8a7c9e1a2' }), 404, 'not-found')
  const failed = isProblem(t, await app.inject({ method: 'POST', url: LOGIN, payload: { username: 'admin', password: 'wrong-password-1' } }), 400, 'invalid-credentials')
  t.equal(failed.detail, 'The user name or password is incorrect.', 'a readable login failure')
})

t.test('security headers', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  // Operations' answers, served and refused: the OWASP REST Security Cheat Sheet's set.
  const answers = [
    await call(app, token, { url: '/prime/webui/admin/all' }),
    await app.inject({ url: '/prime/webui/admin/all' }),
    await call(app, token, { method: 'POST', url: '/prime/webui/agents/exportagentcsv', payload: {} }),
  ]
  t.same(
    answers.map((res) => res.statusCode),
    [200, 401, 200],
  )
  for (const res of answers) {
    t.equal(res.headers['cache-control'], 'no-store')
    t.equal(res.headers['content-security-policy'], "default-src 'none'; frame-ancestors 'none'")
    t.equal(res.headers['cross-origin-resource-policy'], 'same-origin')
    t.match(res.headers['strict-transport-security'], /^max-age=\d+; includeSubDomains$/)
    t.equal(res.headers['x-content-type-options'], 'nosniff')
    t.equal(res.headers['x-frame-options'], 'DENY')
    t.equal(res.headers['x-powered-by'], undefined, 'no server fingerprint')
  }
  // HTML (the documentation pages) and unknown paths: helmet's whole set.
  const pages = [await app.inject({ url: '/prime/webui/docs' }), await app.inject({ url: '/prime/webui/nothing' })]
  t.same(
    pages.map((res) => res.statusCode),
    [200, 404],
  )
  t.match(pages[0].headers['content-type'], /^text\/html/)
  for (const res of pages) {
    t.equal(res.headers['x-content-type-options'], 'nosniff')
    t.equal(res.headers['x-frame-options'], 'SAMEORIGIN')
    t.equal(res.headers['referrer-policy'], 'no-referrer')
    t.match(res.headers['strict-transport-security'], /max-age=\d+/)
    t.match(res.headers['content-security-policy'], /default-src 'self'/)
    t.equal(res.headers['cross-origin-opener-policy'], 'same-origin')
    t.equal(res.headers['x-powered-by'], undefined, 'no server fingerprint')
  }
})

t.test('rate-limit headers on answers', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const limit = app.testConfig.rateLimitMax
  const a = await call(app, token, { url: '/prime/webui/admin/all' })
  const b = await call(app, token, { url: '/prime/webui/admin/all' })
  for (const res of [a, b]) {
    t.equal(res.headers['x-ratelimit-limit'], String(limit))
    t.match(res.headers['x-ratelimit-remaining'], /^\d+$/)
    t.match(res.headers['x-ratelimit-reset'], /^\d+$/)
  }
  t.equal(Number(b.headers['x-ratelimit-remaining']), Number(a.headers['x-ratelimit-remaining']) - 1, 'remaining counts down')
  const notFound = await app.inject({ url: '/prime/webui/nothing' })
  t.ok(notFound.headers['x-ratelimit-limit'], 'on a 404')
  const invalid = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'x' } })
  t.equal(invalid.statusCode, 400)
  t.ok(invalid.headers['x-ratelimit-limit'], 'on a 400')
  const loginRes = await app.inject({ method: 'POST', url: LOGIN, payload: creds })
  t.ok(loginRes.headers['x-ratelimit-limit'], 'on a login')
})

t.test('rate-limit headers on refused answers', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const user = await userWithProfile(app, token, 'ursula', 10)
  const answers = {
    401: await app.inject({ url: '/prime/webui/admin/all' }),
    403: await call(app, user, { url: '/prime/webui/admin/all' }),
    406: await call(app, token, { url: '/prime/webui/admin/all', headers: { accept: 'image/png' } }),
    415: await app.inject({ method: 'POST', url: LOGIN, headers: { 'content-type': 'text/plain' }, payload: 'x' }),
  }
  for (const [status, res] of Object.entries(answers)) {
    t.equal(res.statusCode, Number(status))
    t.ok(res.headers['x-ratelimit-limit'], `x-ratelimit-limit on the ${status}`)
    t.ok(res.headers['x-ratelimit-remaining'], `x-ratelimit-remaining on the ${status}`)
  }
})

t.test('401 carries WWW-Authenticate: Bearer', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const cases: Array<[string, Record<string, string>]> = [
    ['no credential', {}],
    ['a garbage token', bearer('not-a-jwt')],
    ['another scheme', { authorization: 'Basic YWRtaW46cGFzc3dvcmQ=' }],
    ['a tampered token', bearer(token.slice(0, -4) + 'AAAA')],
    ['an unknown integration token', bearer('pit_doesnotexist')],
  ]
  for (const [what, headers] of cases) {
    const res = await app.inject({ url: '/prime/webui/admin/all', headers })
    isProblem(t, res, 401, 'unauthenticated')
    t.match(res.headers['www-authenticate'], /^Bearer realm="prime"/, `${what}: WWW-Authenticate: Bearer`)
  }
  const logout = await call(app, token, { method: 'POST', url: '/prime/webui/auth/logout' })
  t.equal(logout.statusCode, 200)
  const revoked = await call(app, token, { url: '/prime/webui/admin/all' })
  isProblem(t, revoked, 401)
  t.match(revoked.headers['www-authenticate'], /^Bearer .*error="invalid_token"/, 'a revoked token says invalid_token')
})

t.test('a trailing slash names the same operation', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const list = await call(app, token, { url: '/prime/webui/agents/?PageSize=5' })
  t.equal(list.statusCode, 200, list.body)
  t.same(list.json(), { recordsTotal: 0, recordsFiltered: 0, data: [] })
  const all = await call(app, token, { url: '/PRIME/webui/Admin/All/' })
  t.equal(all.statusCode, 200, 'with the case-insensitive router')
  t.equal(all.json()[0].userName, 'admin')
  const logged = await app.inject({ method: 'POST', url: `${LOGIN}/`, payload: creds })
  t.equal(logged.statusCode, 200, 'a POST with a body')
  const issued = await call(app, token, { method: 'POST', url: '/prime/webui/admin/integrationTokens/', payload: { name: 'slashed', userProfile: 10 } })
  t.equal(issued.statusCode, 200, issued.body)
  const id = issued.json().id
  const revoked = await call(app, token, { method: 'DELETE', url: `/prime/webui/admin/integrationTokens/${id}/` })
  t.equal(revoked.statusCode, 200, `a path parameter before the slash: ${revoked.body}`)
  t.equal((await latestAudit(app, 1))[0].operation_id, 'revokeIntegrationToken', 'audited as the operation')
  const upload = await call(app, token, { method: 'POST', url: '/prime/webui/agents/agentless/uploadconnectiondetailsfile/', headers: { 'content-type': 'application/json' }, payload: '{}' })
  isProblem(t, upload, 415, 'unsupported-media-type')
  const wrong = isProblem(t, await app.inject({ method: 'GET', url: `${LOGIN}/` }), 405, 'method-not-allowed')
  t.match(wrong.detail, 'answers POST, not GET')
  isProblem(t, await app.inject({ method: 'GET', url: '/prime/webui/admin/all//' }), 404, 'route-not-found')
})

t.test('bodies are UTF-8 and sent uncompressed', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const post = (payload: string | Buffer, headers: Record<string, string> = {}) =>
    call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', headers: { 'content-type': 'application/json', ...headers }, payload })
  const user = (name: string) => ({ userName: 'juergen', firstName: name, email: 'ute@example.com', userProfile: 10, password: 'Long-enough-123' })
  const latin1 = Buffer.from(JSON.stringify(user('J\u00fcrgen')), 'latin1')
  const bad = isProblem(t, await post(latin1), 400, 'bad-json')
  t.match(bad.detail, 'not valid UTF-8')
  t.notOk(await queryOne(app, "SELECT 1 FROM users WHERE user_name = 'juergen'"), 'nothing was written with U+FFFD in it')
  const coded = isProblem(t, await post(JSON.stringify(user('gzipped')), { 'content-encoding': 'gzip' }), 415, 'unsupported-media-type')
  t.match(coded.detail, 'Content-Encoding gzip')
  const both = await post(Buffer.from([0x1f, 0x8b, 0x08, 0x00]), { 'content-encoding': 'deflate, gzip' })
  isProblem(t, both, 415, 'unsupported-media-type')
  t.equal(both.headers['accept-encoding'], 'identity')
  const plain = await post(Buffer.from(JSON.stringify(user('J\u00fcrgen')), 'utf8'), { 'content-encoding': 'identity' })
  t.equal(plain.statusCode, 200, `UTF-8, and the identity coding: ${plain.body}`)
  t.equal(await queryValue(app, "SELECT first_name FROM users WHERE user_name = 'juergen'"), 'J\u00fcrgen')
})
