// Access tokens signed with the server's own key are still refused unless they carry what
// this server always issues: `exp`, `iat` and `iss`, an issue time that is not in the
// future (beyond a small clock skew) and a lifetime no longer than an access token's.
import t from 'tap'
import crypto from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { build, login, call } from './helpers.js'
import { CLOCK_SKEW_MS, ISSUER } from '../lib/auth.js'

const ME = '/prime/webui/admin/getuserdetails'
const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url')

/** An HS256 JWT with exactly these claims, signed with the server's key. */
function signed(app: FastifyInstance & { testConfig: { jwtSecret: string } }, claims: Record<string, unknown>) {
  const body = `${b64({ alg: 'HS256', typ: 'JWT' })}.${b64(claims)}`
  return `${body}.${crypto.createHmac('sha256', app.testConfig.jwtSecret).update(body).digest('base64url')}`
}

t.test('an access token must carry exp, iat and iss', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const now = Date.now()
  const { id, sessionId } = await app.tokens.authenticate(admin, now)
  const sec = Math.floor(now / 1000)
  const full = { sub: String(id), sid: sessionId, ims: now, iat: sec, exp: sec + 900, iss: ISSUER }

  const ok = await call(app, signed(app, full), { url: ME })
  t.equal(ok.statusCode, 200, 'sanity: the complete token, signed by hand, is accepted')

  for (const claim of ['exp', 'iat', 'iss'] as const) {
    const { [claim]: _dropped, ...rest } = full
    const res = await call(app, signed(app, rest), { url: ME })
    t.equal(res.statusCode, 401, `without ${claim}: ${res.body}`)
    t.equal(res.json().detail, `The access token is invalid: the ${claim} claim is required.`)
    t.match(String(res.headers['www-authenticate']), /^Bearer .*error="invalid_token"/)
  }
  t.equal((await call(app, signed(app, { ...full, iss: 'someone-else' }), { url: ME })).statusCode, 401, 'another issuer')
  t.equal((await call(app, signed(app, { ...full, iat: String(sec) }), { url: ME })).statusCode, 401, 'an iat that is not a number')
  t.equal((await call(app, signed(app, { ...full, ims: undefined }), { url: ME })).statusCode, 401, 'no issue time in ms')
})

t.test('an access token issued in the future, or living longer than access tokens do, is refused', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const now = Date.now()
  const { id, sessionId } = await app.tokens.authenticate(admin, now)
  const sec = Math.floor(now / 1000)
  const skew = CLOCK_SKEW_MS / 1000
  const at = (iatSec: number, imsMs = iatSec * 1000, life = 900) => signed(app, { sub: String(id), sid: sessionId, ims: imsMs, iat: iatSec, exp: iatSec + life, iss: ISSUER })

  const ahead = await call(app, at(sec + skew + 60), { url: ME })
  t.equal(ahead.statusCode, 401, ahead.body)
  t.equal(ahead.json().detail, 'The access token is invalid: it was issued in the future.')
  t.equal((await call(app, at(sec, now + CLOCK_SKEW_MS + 60_000), { url: ME })).statusCode, 401, 'ims in the future (it would outlive revocations)')
  t.equal((await call(app, at(sec + skew - 5), { url: ME })).statusCode, 200, 'a clock a little ahead is tolerated')

  const long = await call(app, at(sec, now, 86_400 * 365), { url: ME })
  t.equal(long.statusCode, 401, long.body)
  t.equal(long.json().detail, 'The access token is invalid: it lives longer than access tokens do.')
})

t.test('the tokens the server issues carry exp, iat and iss', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const claims = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString())
  t.equal(claims.iss, ISSUER)
  t.equal(claims.exp - claims.iat, app.testConfig.accessTokenTtlSec)
})
