// Account and session security: revocation reaches refresh tokens, state checked before an
// await is checked again after it, the lockout holds under parallel guesses, integration
// tokens never outlive what their creator may do, and the audit trail takes no forged text.
import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { build, login, userWithProfile, call, USER_PASSWORD } from './helpers.js'
import { latestAudit, queryOne } from './seed.js'

const userNamed = (app: FastifyInstance, name: string) => queryOne<{ id: number }>(app, 'SELECT * FROM users WHERE user_name = ?', name)

const LOGIN = '/prime/webui/Auth/LocalLogin'
const REFRESH = '/prime/webui/auth/refresh'
const ME = '/prime/webui/admin/getuserdetails'
const ALL = '/prime/webui/admin/all'
const UPDATE = '/prime/webui/admin/updateuser'
const UPDATE_OWN = '/prime/webui/admin/updateuserdetails'
const DELETE = '/prime/webui/admin/deleteUsers'
const TOKENS = '/prime/webui/admin/integrationTokens'

const signIn = (app: FastifyInstance, username: string, password: string) => app.inject({ method: 'POST', url: LOGIN, payload: { username, password } })
const refresh = (app: FastifyInstance, refreshToken: string) => app.inject({ method: 'POST', url: REFRESH, payload: { refreshToken } })

t.test('F1a own password change revokes the refresh tokens issued before it', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'olga', 10)
  const stolen = (await signIn(app, 'olga', USER_PASSWORD)).json()
  const own = await login(app, 'olga', USER_PASSWORD)
  const ch = await call(app, own, { method: 'POST', url: UPDATE_OWN, payload: { currentPassword: USER_PASSWORD, newPassword: 'Brand-new-pass-123' } })
  t.equal(ch.statusCode, 200, ch.body)
  const r = await refresh(app, stolen.refreshToken)
  t.equal(r.statusCode, 401, 'the pre-change refresh token must not mint a new access token')
  if (r.statusCode === 200) t.equal((await call(app, r.json().token, { url: ME })).statusCode, 401, 'and the access token it minted is refused')
})

t.test('F1b an Administrator password reset revokes the refresh tokens of the account', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'pete', 20)
  const s = (await signIn(app, 'pete', USER_PASSWORD)).json()
  const up = await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'pete', password: 'Reset-by-admin-77' } })
  t.equal(up.statusCode, 200, up.body)
  t.equal((await refresh(app, s.refreshToken)).statusCode, 401)
})

t.test('F2a a login racing the deletion of its account does not answer 500', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'quinn', 10)
  const pending = signIn(app, 'quinn', USER_PASSWORD)
  await sleep(10) // the login is now inside verifyPassword (scrypt)
  const del = await call(app, admin, { method: 'POST', url: DELETE, payload: ['quinn'] })
  t.equal(del.json().succeeded, 1)
  const res = await pending
  // Whichever finished first, the answer is a clean one: 400 if the deletion won the race.
  t.ok([200, 400].includes(res.statusCode), `a clean answer, got ${res.statusCode} ${res.body}`)
  t.equal((await latestAudit(app, 5)).filter((r) => r.operation_id === 'localLogin').length >= 1, true, 'the login is audited')
})

t.test('F2b an own-account change racing the deletion of the account does not answer 500', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const me = await userWithProfile(app, admin, 'rita', 10)
  const pending = call(app, me, { method: 'POST', url: UPDATE_OWN, payload: { currentPassword: USER_PASSWORD, newPassword: 'Another-pass-778' } })
  await sleep(10)
  const del = await call(app, admin, { method: 'POST', url: DELETE, payload: ['rita'] })
  t.equal(del.json().succeeded, 1)
  const res = await pending
  t.ok([200, 401, 404].includes(res.statusCode), `200 if the change won the race, else 401 or 404; got ${res.statusCode} ${res.body}`)
})

t.test('F2c an in-flight own password change cannot undo an Administrator reset', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const attacker = await userWithProfile(app, admin, 'vic', 10) // session of a compromised account
  const pending = call(app, attacker, { method: 'POST', url: UPDATE_OWN, payload: { currentPassword: USER_PASSWORD, newPassword: 'Attacker-chosen-55' } })
  await sleep(10)
  const reset = await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'vic', password: 'Admin-reset-pass-66' } })
  t.equal(reset.statusCode, 200)
  await pending
  t.equal((await signIn(app, 'vic', 'Admin-reset-pass-66')).statusCode, 200, "the Administrator's reset password is in force")
  t.equal((await signIn(app, 'vic', 'Attacker-chosen-55')).statusCode, 400, "the revoked session's password is not")
})

t.test('F2e an Administrator reset wins over an own password change at every interleaving', async (t) => {
  // The reset may commit while the own change is hashing, reading the account or writing
  // it: whichever way they interleave, the reset's password is the one in force after both.
  const app = await build(t, { PRIME_LOGIN_RATE_LIMIT_MAX: '1000' }) // each round signs in once with a refused password
  const admin = await login(app)
  // The own change hashes twice (the current password checked, the new one hashed), the reset
  // once: the reset's write overlaps the own change's when it starts about one hash later.
  const timer = await userWithProfile(app, admin, 'clock', 10)
  const started = Date.now()
  const timed = await call(app, timer, { method: 'POST', url: UPDATE_OWN, payload: { currentPassword: USER_PASSWORD, newPassword: 'Timer-pass-4242' } })
  t.equal(timed.statusCode, 200, timed.body)
  const hashMs = (Date.now() - started) / 2
  const delays = Array.from({ length: 40 }, (_, k) => Math.round((hashMs * k) / 20))
  for (const [i, delay] of delays.entries()) {
    const name = `wes${i}`
    const own = await userWithProfile(app, admin, name, 10)
    const pending = call(app, own, { method: 'POST', url: UPDATE_OWN, payload: { currentPassword: USER_PASSWORD, newPassword: `Own-choice-${i}-55` } })
    await sleep(delay)
    const reset = await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: name, password: `Admin-reset-${i}-66` } })
    t.equal(reset.statusCode, 200)
    await pending
    t.equal((await signIn(app, name, `Admin-reset-${i}-66`)).statusCode, 200, `after ${delay} ms: the reset's password is in force`)
    t.equal((await signIn(app, name, `Own-choice-${i}-55`)).statusCode, 400, `after ${delay} ms: the own change's password is not`)
  }
})

t.test('F2d a login with the old password in flight during a reset yields no usable session', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'xena', 10)
  const pending = signIn(app, 'xena', USER_PASSWORD)
  await sleep(10)
  await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'xena', password: 'Admin-reset-pass-67' } })
  const res = await pending
  if (res.statusCode === 200) {
    const r = await refresh(app, res.json().refreshToken)
    const access = r.statusCode === 200 ? (await call(app, r.json().token, { url: ME })).statusCode : 401
    t.equal(access, 401, 'the old password must not lead to a working access token after the reset')
  } else {
    t.equal(res.statusCode, 400)
  }
})

t.test('F3 concurrent wrong passwords get no more verified answers than the lockout threshold', async (t) => {
  const app = await build(t, { PRIME_LOCKOUT_THRESHOLD: '3' })
  const res = await Promise.all(Array.from({ length: 10 }, (_, i) => signIn(app, 'admin', `Wrong-password-${i}`)))
  const answered = res.filter((r) => r.statusCode === 400).length
  t.ok(answered <= 3, `at most 3 guesses answered 400 before the lock, got ${answered}`)
  t.ok(res.filter((r) => r.statusCode === 429).length >= 7, 'the rest answered 429 (account locked)')
})

t.test('F3b two Administrators demoting or deleting each other at once leave one active Administrator', async (t) => {
  const app = await build(t)
  const tokens = new Map([['admin', await login(app)]])
  let survivor = 'admin'
  for (const [i, kind] of ['demote', 'disable', 'delete', 'demote', 'delete', 'disable'].entries()) {
    const other = `ada${i}`
    tokens.set(other, await userWithProfile(app, tokens.get(survivor)!, other, 30))
    const against = (token: string, name: string) =>
      kind === 'delete'
        ? call(app, token, { method: 'POST', url: DELETE, payload: [name] })
        : call(app, token, { method: 'POST', url: UPDATE, payload: kind === 'demote' ? { userName: name, userProfile: 10 } : { userName: name, isActive: false } })
    await Promise.all([against(tokens.get(survivor)!, other), against(tokens.get(other)!, survivor)])
    const left = await queryOne<{ n: number; name: string }>(app, 'SELECT count(*) AS n, min(user_name) AS name FROM users WHERE profile = 30 AND is_active = 1')
    t.ok(Number(left!.n) >= 1, `round ${i} (${kind}): an active Administrator is left, ${left!.n}`)
    if (!left!.name) break
    survivor = left!.name
  }
})

t.test('F4 an Administrator demoted or deleted keeps no Administrator access through tokens it minted', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const sam = await userWithProfile(app, admin, 'sam', 30)
  const created = await call(app, sam, { method: 'POST', url: TOKENS, payload: { name: 'sam-backdoor', userProfile: 30 } })
  t.equal(created.statusCode, 200)
  const secret = created.json().token
  await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'sam', userProfile: 10 } })
  const afterDemotion = (await call(app, secret, { url: ALL })).statusCode
  t.ok(afterDemotion === 401 || afterDemotion === 403, `demoted creator's token refused, got ${afterDemotion}`)
  await call(app, admin, { method: 'POST', url: DELETE, payload: ['sam'] })
  t.equal((await call(app, secret, { url: ALL })).statusCode, 401, "deleted creator's token refused")
})

t.test('F5 deleteUsers with a user name made of digits deletes that account, not the one with that id', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'bob', 10)
  await userWithProfile(app, admin, 'carl', 20)
  await userWithProfile(app, admin, '2', 10)
  const bob = (await userNamed(app, 'bob'))!
  const named2 = (await userNamed(app, '2'))!
  t.equal(bob.id, 2, 'bob has id 2')
  t.not(named2.id, 2, 'the account named "2" has another id')
  await call(app, admin, { method: 'POST', url: DELETE, payload: ['2'] })
  t.ok(await userNamed(app, 'bob'), 'bob must not be deleted')
  t.equal(await userNamed(app, '2'), undefined, 'the account named "2" is the one deleted (or the request is refused as ambiguous)')
})

t.test('F6 an access token issued in the same millisecond before a password reset is revoked', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'uma', 20)
  const real = Date.now
  const frozen = real() + 1000
  Date.now = () => frozen
  try {
    const token = await login(app, 'uma', USER_PASSWORD)
    const reset = await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'uma', password: 'Reset-same-ms-42' } })
    t.equal(reset.statusCode, 200)
    t.equal((await call(app, token, { url: ME })).statusCode, 401, 'the token predates the reset')
  } finally {
    Date.now = real
  }
})

// ---------------------------------------------------------------------------------------
t.test('F8 a failed login cannot write control characters or a forged actor into the audit trail', async (t) => {
  const app = await build(t)
  const res = await signIn(app, 'nobody\r\nSucceeded: Login of "admin"', 'whatever-x1')
  t.equal(res.statusCode, 400)
  const row = (await latestAudit(app))[0]
  t.notMatch(row.description, /[\r\n]/, 'no CR/LF in the description')
  t.notMatch(String(row.user_name), /[\r\n]/, 'no CR/LF in the user column')
})

t.test('F9 a refused refresh is audited as refused and answers a proper 401', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'wes', 10)
  const s = (await signIn(app, 'wes', USER_PASSWORD)).json()
  await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'wes', isActive: false } })
  const r = await refresh(app, s.refreshToken)
  t.equal(r.statusCode, 401)
  t.match(String(r.headers['www-authenticate']), /^Bearer/, 'WWW-Authenticate: Bearer')
  const row = (await latestAudit(app))[0]
  t.not(row.outcome, 'Succeeded', `audited as ${row.outcome}: ${row.description}`)
})

t.test('F10 a wrong method on a known path answers 405 with Allow', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: LOGIN })
  t.equal(res.statusCode, 405, res.body)
  t.match(String(res.headers.allow), /POST/)
})
