import t from 'tap'
import { build, login, userWithProfile, call } from './helpers.js'
import { query, queryOne, queryValue } from './seed.js'

const URL = '/prime/webui/admin/integrationTokens'

t.test('integration tokens: created once, stored hashed, usable, revocable', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const created = await call(app, admin, { method: 'POST', url: URL, payload: { name: 'splunk', userProfile: 10 } })
  t.equal(created.statusCode, 200)
  const { token, id } = created.json()
  t.match(token, /^pit_/)
  const row = (await queryOne<{ token_hash: string }>(app, 'SELECT token_hash FROM integration_tokens WHERE id = ?', id))!
  t.not(row.token_hash, token, 'only a hash is stored')
  t.notOk(JSON.stringify((await call(app, admin, { url: URL })).json()).includes(token), 'the list never shows the secret')

  const profile = await call(app, token, { url: '/prime/webui/admin/profile' })
  t.match(profile.json(), { userName: 'token:splunk', userProfile: 10, tokenKind: 'integration' })
  t.equal((await call(app, token, { url: '/prime/webui/admin/all' })).statusCode, 403, 'bound to its profile')
  t.equal((await call(app, token, { url: '/prime/webui/admin/getuserdetails' })).statusCode, 404, 'has no account of its own')
  t.equal((await call(app, token, { method: 'POST', url: '/prime/webui/auth/logout' })).statusCode, 400)
  t.ok(await queryValue(app, 'SELECT last_used_ms FROM integration_tokens WHERE id = ?', id), 'its use is recorded')

  t.equal((await call(app, admin, { method: 'POST', url: URL, payload: { name: 'SPLUNK', userProfile: 10 } })).statusCode, 409)
  t.equal((await call(app, admin, { method: 'POST', url: URL, payload: { name: 'old', userProfile: 10, expiresAt: '2001-01-01T00:00:00Z' } })).statusCode, 400)

  const revoked = await call(app, admin, { method: 'DELETE', url: `${URL}/${id}` })
  t.equal(revoked.statusCode, 200)
  t.ok(revoked.json().revokedTime)
  t.equal((await call(app, token, { url: '/prime/webui/admin/profile' })).statusCode, 401, 'stops working at once')
  t.equal((await call(app, admin, { method: 'DELETE', url: `${URL}/${id}` })).statusCode, 404, 'revoking twice')
  t.equal((await call(app, admin, { method: 'DELETE', url: `${URL}/not-a-uuid` })).statusCode, 400)
})

t.test('an expired integration token is refused', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const { token, id } = (await call(app, admin, { method: 'POST', url: URL, payload: { name: 'soon', userProfile: 10, expiresAt: new Date(Date.now() + 60_000).toISOString() } })).json()
  t.equal((await call(app, token, { url: '/prime/webui/admin/profile' })).statusCode, 200)
  await query(app, 'UPDATE integration_tokens SET expires_ms = ? WHERE id = ?', Date.now() - 1, id)
  const res = await call(app, token, { url: '/prime/webui/admin/profile' })
  t.equal(res.statusCode, 401)
  t.equal(res.json().detail, 'The integration token has expired.')
})

t.test('only Administrators manage integration tokens, and not above their own profile', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'nina', 20)
  t.equal((await call(app, manager, { method: 'POST', url: URL, payload: { name: 'x', userProfile: 10 } })).statusCode, 403)
  t.equal((await call(app, manager, { url: URL })).statusCode, 403)
})
