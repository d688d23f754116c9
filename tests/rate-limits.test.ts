// Pins the limits of the contract's "Limits" section: the per-caller request limit, the
// failed-login limit per source address, and the lock of a user name from a source address
// after consecutive failed logins.
import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { build, login, call, userWithProfile, ADMIN_PASSWORD } from './helpers.js'
import { latestAudit, query, queryOne, queryValue } from './seed.js'

const LOGIN = '/prime/webui/Auth/LocalLogin'

function isTooMany(t: Test, res: LightMyRequestResponse, type: 'rate-limited' | 'account-locked') {
  t.equal(res.statusCode, 429, res.body.slice(0, 300))
  t.match(res.headers['content-type'], /^application\/problem\+json/)
  const body = res.json()
  t.equal(body.type, `urn:prime:problem:${type}`)
  t.equal(body.status, 429)
  t.equal(body.requestId, res.headers['x-request-id'])
  t.match(res.headers['retry-after'], /^[1-9]\d*$/, 'Retry-After in whole seconds')
  return body
}

const attempt = (app: FastifyInstance, password: string, username = 'admin', url = LOGIN) => app.inject({ method: 'POST', url, payload: { username, password } })

t.test('requests are limited per window', async (t) => {
  const app = await build(t, { PRIME_RATE_LIMIT_MAX: '6' })
  const token = await login(app) // every request counts, logging in too
  const remaining: number[] = []
  for (let i = 1; i <= 5; i++) {
    const res = await call(app, token, { url: '/prime/webui/admin/PrimeVersion' })
    t.equal(res.statusCode, 200, `request ${i} is served`)
    t.equal(res.headers['x-ratelimit-limit'], '6')
    remaining.push(Number(res.headers['x-ratelimit-remaining']))
  }
  t.same(remaining, [4, 3, 2, 1, 0], 'x-ratelimit-remaining counts down to 0')
  const sixth = await call(app, token, { url: '/prime/webui/admin/PrimeVersion' })
  const body = isTooMany(t, sixth, 'rate-limited')
  t.match(body.detail, /retry in \d+ seconds/)
  t.ok(Number(sixth.headers['retry-after']) <= 60, 'Retry-After within the window')
  t.equal(sixth.headers['x-ratelimit-remaining'], '0')
  t.ok(sixth.headers['x-ratelimit-reset'], 'x-ratelimit-reset on the 429')

  const other = await call(app, token, { url: '/prime/webui/admin/all' })
  t.equal(other.statusCode, 429, 'the limit is per caller, not per operation')
  const unknown = await app.inject({ url: '/prime/webui/nothing' })
  t.equal(unknown.statusCode, 429, 'unknown paths are limited too')
  t.equal(unknown.json().type, 'urn:prime:problem:rate-limited')
})

t.test('the limit counts unknown paths', async (t) => {
  const app = await build(t, { PRIME_RATE_LIMIT_MAX: '3' })
  for (let i = 0; i < 3; i++) t.equal((await app.inject({ url: `/prime/webui/probe${i}` })).statusCode, 404)
  isTooMany(t, await app.inject({ url: '/prime/webui/probe9' }), 'rate-limited')
})

t.test('unauthenticated and refused requests are limited too', async (t) => {
  const app = await build(t, { PRIME_RATE_LIMIT_MAX: '5' })
  const answers: number[] = []
  for (let i = 0; i < 8; i++) answers.push((await app.inject({ url: '/prime/webui/admin/all', headers: { authorization: `Bearer guess-${i}` } })).statusCode)
  t.same(answers, [401, 401, 401, 401, 401, 429, 429, 429], 'the 6th guess is refused with 429')
})

t.test('the limit is per source address, shared by every caller there', async (t) => {
  const app = await build(t, { PRIME_RATE_LIMIT_MAX: '6' })
  const admin = await login(app) // 1
  const user = await userWithProfile(app, admin, 'ursula', 10) // 2 and 3 (adduser, login)
  for (let i = 0; i < 3; i++) t.equal((await call(app, admin, { url: '/prime/webui/admin/PrimeVersion' })).statusCode, 200)
  t.equal((await call(app, user, { url: '/prime/webui/admin/PrimeVersion' })).statusCode, 429, 'another account from the same address shares the budget')
  const other = await app.inject({ url: '/prime/webui/admin/PrimeVersion', headers: { authorization: `Bearer ${admin}` }, remoteAddress: '127.0.0.2' })
  t.equal(other.statusCode, 200, 'another address has its own')
})

t.test('IPv6 clients are limited per /64 network', async (t) => {
  const app = await build(t, { PRIME_RATE_LIMIT_MAX: '3' })
  const from = (remoteAddress: string) => app.inject({ url: '/prime/webui/admin/PrimeVersion', remoteAddress })
  const answers = [await from('2001:db8:7:1::10'), await from('2001:db8:7:1::11'), await from('2001:db8:7:1:ffff::1'), await from('2001:db8:7:1::12')]
  t.same(
    answers.map((res) => res.statusCode),
    [401, 401, 401, 429],
    'every address of the /64 shares one budget',
  )
  t.same(
    answers.map((res) => res.headers['x-ratelimit-remaining']),
    ['2', '1', '0', '0'],
  )
  t.equal((await from('2001:db8:7:2::10')).statusCode, 401, 'the next /64 has its own')
})

t.test('failed logins are limited per source address', async (t) => {
  const app = await build(t, { PRIME_LOGIN_RATE_LIMIT_MAX: '3' })
  const first = await attempt(app, 'wrong-password-1')
  t.equal(first.statusCode, 400)
  t.equal((await attempt(app, 'wrong-password-2', 'nobody')).statusCode, 400, 'any user name counts')
  t.equal((await attempt(app, ADMIN_PASSWORD)).statusCode, 200, 'a success is served')
  t.equal((await attempt(app, 'wrong-password-3')).statusCode, 400, 'and did not count: the 3rd failure is served')
  const fourth = await attempt(app, ADMIN_PASSWORD)
  const body = isTooMany(t, fourth, 'rate-limited')
  t.match(body.detail, /failed login attempts/)
  const lower = await attempt(app, ADMIN_PASSWORD, 'admin', '/prime/webui/auth/locallogin')
  t.equal(lower.statusCode, 429, 'another spelling of the path is the same route')

  const audited = (await latestAudit(app))[0]
  t.match(audited.description, /^Login failed/, 'rate-limited attempts are not audited one by one: the last record is the 3rd failure')

  const token = await login(app).catch(() => undefined)
  t.equal(token, undefined, 'logging in stays refused for the window')
})

t.test('successful logins count against the general limit', async (t) => {
  const app = await build(t, { PRIME_RATE_LIMIT_MAX: '4', PRIME_LOGIN_RATE_LIMIT_MAX: '10' })
  for (let i = 0; i < 3; i++) t.equal((await attempt(app, ADMIN_PASSWORD)).statusCode, 200, `login ${i + 1}`)
  const token = await login(app)
  t.equal((await call(app, token, { url: '/prime/webui/admin/PrimeVersion' })).statusCode, 429, 'the 5th request of the window')
})

t.test('Auth/LocalLogin and auth/signin share one login limit', async (t) => {
  const app = await build(t, { PRIME_LOGIN_RATE_LIMIT_MAX: '3' })
  const answers: number[] = []
  for (const url of [LOGIN, LOGIN, '/prime/webui/auth/signin', '/prime/webui/auth/signin']) answers.push((await attempt(app, 'wrong-password-1', 'admin', url)).statusCode)
  t.same(answers, [400, 400, 400, 429], 'the 4th attempt is refused whichever path it uses')
})

t.test('lockout of a user name from a source address', async (t) => {
  const app = await build(t, { PRIME_LOCKOUT_THRESHOLD: '3', PRIME_LOGIN_RATE_LIMIT_MAX: '1000' })
  const state = async () =>
    (await queryOne(app, 'SELECT failures, locked_until_ms FROM login_failures WHERE user_name = ? AND source = ?', 'admin', '127.0.0.1')) as { failures: number; locked_until_ms: number } | undefined

  t.equal((await attempt(app, 'wrong-password-1')).statusCode, 400)
  t.equal((await attempt(app, 'wrong-password-2')).statusCode, 400)
  t.equal((await state())?.failures, 2)
  t.equal((await attempt(app, ADMIN_PASSWORD)).statusCode, 200, 'a success below the threshold')
  t.equal(await state(), undefined, 'resets the count')

  t.equal((await attempt(app, 'wrong-password-3')).statusCode, 400)
  t.equal((await attempt(app, 'wrong-password-4')).statusCode, 400)
  const before = Date.now()
  const third = await attempt(app, 'wrong-password-5')
  t.equal(third.statusCode, 400, 'the failure that reaches the threshold is still a plain failed login')
  t.equal(third.json().type, 'urn:prime:problem:invalid-credentials')
  const lockedUntil = (await state())!.locked_until_ms
  t.ok(lockedUntil >= before + 900_000 && lockedUntil <= Date.now() + 900_000, 'locked for PRIME_LOCKOUT_SECONDS (default 15 minutes)')

  const right = await attempt(app, ADMIN_PASSWORD)
  const body = isTooMany(t, right, 'account-locked')
  t.match(body.detail, /^Too many failed logins with this user name from this address; try again in \d+ seconds\.$/)
  const retry = Number(right.headers['retry-after'])
  t.ok(retry > 890 && retry <= 900, `Retry-After is the time left: ${retry}`)
  t.equal((await attempt(app, ADMIN_PASSWORD, 'ADMIN')).statusCode, 429, 'whatever the spelling of the user name')
  t.equal((await attempt(app, 'wrong-password-6')).statusCode, 429, 'a wrong password while locked is refused the same way')
  t.equal((await state())!.locked_until_ms, lockedUntil, 'attempts while locked do not extend the lock')

  const locked = (await latestAudit(app))[0]
  t.equal(locked.outcome, 'Failed', 'the refused login is audited (Refused is kept for 401 and 403)')
  t.equal(locked.user_name, 'admin')
  t.match(locked.description, /locked/)

  const other = await app.inject({ method: 'POST', url: '/prime/webui/admin/adduser' })
  t.equal(other.statusCode, 401, 'sanity: other routes unaffected')

  // The lock expires (moved into the past rather than waited for).
  await query(app, 'UPDATE login_failures SET locked_until_ms = ?, last_ms = ?', Date.now() - 1, Date.now() - 900_001)
  t.equal((await attempt(app, ADMIN_PASSWORD)).statusCode, 200, 'after the lock, the right password works')
  t.equal(await state(), undefined)
})

t.test('lockout is per user name', async (t) => {
  const app = await build(t, { PRIME_LOCKOUT_THRESHOLD: '2', PRIME_LOGIN_RATE_LIMIT_MAX: '1000' })
  const admin = await login(app)
  await userWithProfile(app, admin, 'ursula', 10)
  for (let i = 0; i < 2; i++) await attempt(app, 'wrong-password-1', 'ursula')
  t.equal((await attempt(app, 'Battery-staple-97', 'ursula')).statusCode, 429, 'ursula is locked')
  t.equal((await attempt(app, ADMIN_PASSWORD)).statusCode, 200, 'admin is not')
})

t.test('after a lock expires, counting starts again', async (t) => {
  const app = await build(t, { PRIME_LOCKOUT_THRESHOLD: '3', PRIME_LOGIN_RATE_LIMIT_MAX: '1000' })
  for (let i = 0; i < 3; i++) await attempt(app, 'wrong-password-1')
  await query(app, 'UPDATE login_failures SET locked_until_ms = ?, last_ms = ?', Date.now() - 1, Date.now() - 900_001)
  t.equal((await attempt(app, 'wrong-password-2')).statusCode, 400)
  t.equal((await attempt(app, ADMIN_PASSWORD)).statusCode, 200, 'one failure after the lock does not lock again')
})

t.test('failures a lock period apart do not add up', async (t) => {
  const app = await build(t, { PRIME_LOCKOUT_THRESHOLD: '2', PRIME_LOGIN_RATE_LIMIT_MAX: '1000' })
  t.equal((await attempt(app, 'wrong-password-1')).statusCode, 400)
  await query(app, 'UPDATE login_failures SET last_ms = ?', Date.now() - 900_000)
  t.equal((await attempt(app, 'wrong-password-2')).statusCode, 400)
  t.equal((await attempt(app, ADMIN_PASSWORD)).statusCode, 200, 'the first failure had run out: no lock')
  const rows = await queryValue(app, 'SELECT count(*) FROM login_failures')
  t.equal(rows, 0, 'counts that ran out are dropped, not kept')
})
