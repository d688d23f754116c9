// Pins "tokens cannot make accounts or tokens": an integration token, whatever its profile,
// is refused (403) on every operation the contract marks `x-no-integration-token` (those
// that create, change or delete accounts, their passwords and profiles, or integration
// tokens), so an Administrator-profile token can neither add an Administrator to log in as
// nor mint another token. The marks are read from the contract; the code names no operation.
import t from 'tap'
import { loadSpec, operations } from '../lib/contract.js'
import { build, call, login } from './helpers.js'
import { query, queryValue } from './seed.js'

const TOKENS = '/prime/webui/admin/integrationTokens'
const newAdmin = { userName: 'mallory', email: 'mallory@example.com', userProfile: 30, password: 'Escalate-to-admin-42', isActive: true }

t.test('the contract marks every operation that manages accounts or tokens', async (t) => {
  const ops = [...operations(loadSpec()).values()]
  const marked = ops
    .filter((o) => o.noIntegrationToken)
    .map((o) => o.operationId)
    .sort()
  t.same(marked, ['addUser', 'createIntegrationToken', 'deleteUsers', 'revokeIntegrationToken', 'updateUser', 'updateUserDetails'])
  // A new operation that changes accounts or tokens cannot forget the mark.
  const managing = ops.filter((o) => o.method !== 'GET' && (o.auditCategory === 'Users' || o.path.toLowerCase().includes('integrationtokens')))
  for (const o of managing) t.ok(o.noIntegrationToken, `${o.operationId} is marked`)
})

t.test('an Administrator-profile integration token cannot add an account, log in as it and mint a token', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const created = await call(app, admin, { method: 'POST', url: TOKENS, payload: { name: 'soar', userProfile: 30 } })
  t.equal(created.statusCode, 200, created.body)
  const { token, id } = created.json()

  const add = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newAdmin })
  t.equal(add.statusCode, 403, add.body)
  t.match(add.json(), { code: 'forbidden', detail: /addUser manages accounts or tokens: it needs an account's session, never an integration token/ })
  t.equal(await queryValue(app, `SELECT count(*) FROM users WHERE user_name = 'mallory'`), 0, 'no account was made')
  const asMallory = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'mallory', password: newAdmin.password } })
  t.equal(asMallory.statusCode, 400, 'nobody to log in as')

  const refused: Record<string, number> = {}
  const tries = {
    createIntegrationToken: { method: 'POST', url: TOKENS, payload: { name: 'second', userProfile: 30 } },
    revokeIntegrationToken: { method: 'DELETE', url: `${TOKENS}/${id}` },
    updateUser: { method: 'POST', url: '/prime/webui/admin/updateuser', payload: { userName: 'admin', userProfile: 10 } },
    deleteUsers: { method: 'POST', url: '/prime/webui/admin/deleteusers', payload: ['admin'] },
    updateUserDetails: { method: 'POST', url: '/prime/webui/admin/updateuserdetails', payload: { email: 'owned@example.com' } },
  } as const
  for (const [name, req] of Object.entries(tries)) refused[name] = (await call(app, token, req)).statusCode
  t.same(refused, { createIntegrationToken: 403, revokeIntegrationToken: 403, updateUser: 403, deleteUsers: 403, updateUserDetails: 403 })
  t.equal(await queryValue(app, 'SELECT count(*) FROM integration_tokens'), 1, 'no token minted, none revoked')
  t.equal(await queryValue(app, `SELECT profile FROM users WHERE user_name = 'admin'`), 30, 'the Administrator is unchanged')
  const records = await query(app, `SELECT operation_id, outcome, user_name FROM audit_trail WHERE user_name = 'token:soar' AND outcome = 'Refused'`)
  t.equal(records.length, 6, 'each refusal is audited with the token as actor')

  // What it may do is unchanged: it reads accounts and tokens, and its profile answer says so.
  t.equal((await call(app, token, { url: '/prime/webui/admin/all' })).statusCode, 200)
  const profile = (await call(app, token, { url: '/prime/webui/admin/profile' })).json()
  t.ok(profile.allowedOperations.includes('getAllUsers'))
  t.notOk(profile.allowedOperations.includes('addUser'), 'the profile answer leaves the refused operations out')
  t.notOk(profile.allowedOperations.includes('createIntegrationToken'))
  // The Administrator's session still manages accounts.
  t.equal((await call(app, admin, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newAdmin })).statusCode, 200)
})

t.test('the rule follows the contract, not a list in the code', async (t) => {
  const spec = loadSpec()
  spec.paths['/prime/webui/admin/all'].get['x-no-integration-token'] = true
  const app = await build(t, {}, spec)
  const admin = await login(app)
  const token = (await call(app, admin, { method: 'POST', url: TOKENS, payload: { name: 'siem', userProfile: 30 } })).json().token
  t.equal((await call(app, token, { url: '/prime/webui/admin/all' })).statusCode, 403)
  t.equal((await call(app, admin, { url: '/prime/webui/admin/all' })).statusCode, 200, 'a session is not concerned')

  const bad = loadSpec()
  bad.paths['/prime/webui/admin/adduser'].post['x-no-integration-token'] = 'yes'
  t.throws(() => operations(bad), /addUser: x-no-integration-token must be true when present, not yes/)
  const unfit = loadSpec()
  unfit.paths['/prime/webui/gateway/checkin'].post['x-no-integration-token'] = true
  t.throws(() => operations(unfit), /agentCheckIn: x-no-integration-token applies only to operations of the bearerAuth scheme/)
})
