import t from 'tap'
import { build, login, userWithProfile, bearer, USER_PASSWORD, ADMIN_PASSWORD, testDatabaseEnv } from './helpers.js'
import { closeQueries, otherConnection, portsOf, queryValue } from './seed.js'

const LOGIN = '/prime/webui/Auth/LocalLogin'

t.test('LocalLogin and signin answer what clients read', async (t) => {
  const app = await build(t)
  for (const url of [LOGIN, '/prime/webui/auth/signin', '/prime/webui/Auth/signin']) {
    const res = await app.inject({ method: 'POST', url, payload: { Username: 'admin', Password: ADMIN_PASSWORD } })
    t.equal(res.statusCode, 200, url)
    const body = res.json()
    t.match(body.expiresAt, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'expiresAt has milliseconds and Z')
    const ttl = Date.parse(body.expiresAt) - Date.now()
    t.ok(ttl > 14 * 60_000 && ttl <= 15 * 60_000, 'the access token lives 15 minutes')
    t.match(body, {
      token: String,
      refreshToken: /^prt_/,
      user: { userName: 'admin', userProfile: 30, password: null, firstName: null, lastName: null, phone: null, image: null },
      license: { primeAccountName: String, licenseStatus: 'Activated' },
      navigation: { startPage: String },
    })
  }
})

t.test('a failed login answers 400 with a readable detail', async (t) => {
  const app = await build(t)
  for (const payload of [
    { username: 'admin', password: 'wrong-password-1' },
    { username: 'nobody', password: 'whatever-it-is' },
  ]) {
    const res = await app.inject({ method: 'POST', url: LOGIN, payload })
    t.equal(res.statusCode, 400)
    t.equal(res.json().detail, 'The user name or password is incorrect.')
    t.match(res.headers['content-type'], /^application\/problem\+json/)
  }
})

t.test('refresh tokens rotate, and a reused one revokes its whole session', async (t) => {
  const app = await build(t)
  const first = (await app.inject({ method: 'POST', url: LOGIN, payload: { username: 'admin', password: ADMIN_PASSWORD } })).json()
  const r1 = await app.inject({ method: 'POST', url: '/prime/webui/auth/refresh', payload: { refreshToken: first.refreshToken } })
  t.equal(r1.statusCode, 200)
  const second = r1.json()
  t.not(second.refreshToken, first.refreshToken)
  t.equal((await app.inject({ url: '/prime/webui/admin/getuserdetails', headers: bearer(second.token) })).statusCode, 200)

  const replay = await app.inject({ method: 'POST', url: '/prime/webui/auth/refresh', payload: { refreshToken: first.refreshToken } })
  t.equal(replay.statusCode, 401, 'the used token is refused')
  t.equal((await app.inject({ method: 'POST', url: '/prime/webui/auth/refresh', payload: { refreshToken: second.refreshToken } })).statusCode, 401, 'the family is revoked')
  t.equal((await app.inject({ url: '/prime/webui/admin/getuserdetails', headers: bearer(second.token) })).statusCode, 401, 'and its access tokens')
  t.equal((await app.inject({ method: 'POST', url: '/prime/webui/auth/refresh', payload: { refreshToken: 'prt_unknown' } })).statusCode, 401)
})

t.test('logout revokes the session at once, and only that session', async (t) => {
  const app = await build(t)
  const a = (await app.inject({ method: 'POST', url: LOGIN, payload: { username: 'admin', password: ADMIN_PASSWORD } })).json()
  const other = await login(app)
  const res = await app.inject({ method: 'POST', url: '/prime/webui/auth/logout', headers: bearer(a.token) })
  t.equal(res.statusCode, 200)
  t.same(res.json(), { loggedOut: true, revokedRefreshTokens: 1 })
  t.equal((await app.inject({ url: '/prime/webui/admin/all', headers: bearer(a.token) })).statusCode, 401)
  t.equal((await app.inject({ method: 'POST', url: '/prime/webui/auth/refresh', payload: { refreshToken: a.refreshToken } })).statusCode, 401)
  t.equal((await app.inject({ url: '/prime/webui/admin/all', headers: bearer(other) })).statusCode, 200, 'other sessions live on')
})

t.test('password change, disabling, demotion and deletion revoke tokens at once', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const check = async (token: string) => (await app.inject({ url: '/prime/webui/admin/getuserdetails', headers: bearer(token) })).statusCode

  const own = await userWithProfile(app, admin, 'carol', 10)
  const change = await app.inject({
    method: 'POST',
    url: '/prime/webui/admin/updateuserdetails',
    headers: bearer(own),
    payload: { currentPassword: USER_PASSWORD, newPassword: 'A-new-passphrase-2' },
  })
  t.equal(change.statusCode, 200, change.body)
  t.equal(await check(own), 401, 'own password change')
  t.equal((await app.inject({ method: 'POST', url: LOGIN, payload: { username: 'carol', password: 'A-new-passphrase-2' } })).statusCode, 200, 'the new password works')

  const dave = await userWithProfile(app, admin, 'dave', 20)
  t.equal(await check(dave), 200)
  await app.inject({ method: 'POST', url: '/prime/webui/admin/updateuser', headers: bearer(admin), payload: { userName: 'dave', isActive: false } })
  t.equal(await check(dave), 401, 'disabled')
  t.equal((await app.inject({ method: 'POST', url: LOGIN, payload: { username: 'dave', password: USER_PASSWORD } })).statusCode, 400, 'a disabled account cannot log in')

  const erin = await userWithProfile(app, admin, 'erin', 20)
  await app.inject({ method: 'POST', url: '/prime/webui/admin/updateuser', headers: bearer(admin), payload: { userName: 'erin', userProfile: 10 } })
  t.equal(await check(erin), 401, 'demoted')

  const frank = await userWithProfile(app, admin, 'frank', 20)
  const del = await app.inject({ method: 'POST', url: '/prime/webui/admin/deleteUsers', headers: bearer(admin), payload: ['frank'] })
  t.equal(del.json().succeeded, 1)
  t.equal(await check(frank), 401, 'deleted')
})

t.test('a token issued in the same millisecond as a revocation but before it stays void', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'gina', 10)
  const { id } = (await portsOf(app).users.byName('gina'))!
  await portsOf(app).users.revokeTokens(id, Date.now() + 1)
  t.equal((await app.inject({ url: '/prime/webui/admin/getuserdetails', headers: bearer(user) })).statusCode, 401)
})

t.test('a restart drops the sessions that can no longer be used, and keeps the live ones', async (t) => {
  const { default: fs } = await import('node:fs')
  const { default: os } = await import('node:os')
  const { default: path } = await import('node:path')
  const { buildApp } = await import('../lib/app.js')
  const { loadConfig } = await import('../lib/config.js')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-restart-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent', ...(await testDatabaseEnv(t)) })

  const first = await buildApp({ config, logger: false })
  const ended = await login(first)
  const live = (await first.inject({ method: 'POST', url: LOGIN, payload: { username: 'admin', password: ADMIN_PASSWORD } })).json()
  await first.inject({ method: 'POST', url: '/prime/webui/auth/logout', headers: bearer(ended) })
  t.equal(await queryValue(first, 'SELECT count(*) AS n FROM sessions'), 2)
  await closeQueries(first)
  await first.close()

  const second = await buildApp({ config, logger: false })
  t.teardown(async () => {
    await closeQueries(second)
    await second.close()
  })
  t.equal(await queryValue(second, 'SELECT count(*) AS n FROM sessions'), 1, 'the logged-out session is gone')
  t.equal((await second.inject({ url: '/prime/webui/admin/getuserdetails', headers: bearer(ended) })).statusCode, 401)
  t.equal((await second.inject({ url: '/prime/webui/admin/getuserdetails', headers: bearer(live.token) })).statusCode, 200, 'a live session survives the restart')
  t.equal((await second.inject({ method: 'POST', url: '/prime/webui/auth/refresh', payload: { refreshToken: live.refreshToken } })).statusCode, 200)
})

t.test('a revocation written by another connection ends the session within a millisecond', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'hana', 10)
  const me = { url: '/prime/webui/admin/getuserdetails' }
  t.equal((await app.inject({ ...me, headers: bearer(user) })).statusCode, 200, 'the session is looked up, and kept')
  t.equal((await app.inject({ ...me, headers: bearer(admin) })).statusCode, 200)

  // Another process on the same data dir (an operator's tool, a second server) writes.
  const write = otherConnection(app, t)
  await write("UPDATE users SET is_active = 0 WHERE user_name = 'hana'")
  await new Promise((resolve) => setTimeout(resolve, 2))
  const disabled = await app.inject({ ...me, headers: bearer(user) })
  t.equal(disabled.statusCode, 401)
  t.match(disabled.json().detail, /disabled/)

  await write("UPDATE sessions SET revoked_ms = ?, revoked_reason = 'operator' WHERE user_id = (SELECT id FROM users WHERE user_name = 'admin')", Date.now())
  await new Promise((resolve) => setTimeout(resolve, 2))
  const revoked = await app.inject({ ...me, headers: bearer(admin) })
  t.equal(revoked.statusCode, 401)
  t.match(revoked.json().detail, /revoked/)
})
