// The server on PostgreSQL (PRIME_DATABASE_URL), end to end through its routes: readiness,
// logins, accounts, sessions and integration tokens, the audit trail they write; and an
// operation whose storage is not built on PostgreSQL answers 501, naming what is missing; a
// login racing another connection's password reset makes no session.
import pg from 'pg'
import t from 'tap'
import { hashPassword } from '../lib/passwords.js'
import { ADMIN_PASSWORD, build, call, login } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const API = '/prime/webui'

t.test('the server on PostgreSQL', { skip: noPostgres }, async (t) => {
  const app = await build(t, { PRIME_DATABASE_URL: await pgTestDatabaseUrl(t) })
  t.equal(app.storage.backend, 'postgres')

  const ready = await app.inject({ method: 'GET', url: '/readyz' })
  t.equal(ready.statusCode, 200, ready.body)

  const admin = await login(app)
  const me = await call(app, admin, { method: 'GET', url: `${API}/admin/getuserdetails` })
  t.equal(me.statusCode, 200, me.body)

  const added = await call(app, admin, { method: 'POST', url: `${API}/admin/adduser`, payload: { userName: 'Olga', email: 'olga@example.com', userProfile: 10, password: 'Battery-staple-97' } })
  t.equal(added.statusCode, 200, added.body)
  const again = await call(app, admin, { method: 'POST', url: `${API}/admin/adduser`, payload: { userName: 'OLGA', email: 'o2@example.com', userProfile: 10, password: 'Battery-staple-97' } })
  t.equal(again.statusCode, 409, 'a name taken in another case is refused')

  // The same name added twice at once: the unique index decides, the loser gets the 409.
  const racing = await Promise.all(
    [1, 2, 3].map((i) => call(app, admin, { method: 'POST', url: `${API}/admin/adduser`, payload: { userName: 'Twin', email: `t${i}@example.com`, userProfile: 10, password: 'Battery-staple-97' } })),
  )
  t.same(racing.map((r) => r.statusCode).sort(), [200, 409, 409], 'one is made; the others are told the name is taken')

  const olga = await app.inject({ method: 'POST', url: `${API}/Auth/LocalLogin`, payload: { username: 'olga', password: 'Battery-staple-97' } })
  t.equal(olga.statusCode, 200, olga.body)
  const wrong = await app.inject({ method: 'POST', url: `${API}/Auth/LocalLogin`, payload: { username: 'olga', password: 'not-it' } })
  t.equal(wrong.statusCode, 400, 'a wrong password: the login fails')

  // A refresh token works once; its replay ends the session.
  const { refreshToken, token: olgaToken } = olga.json()
  const first = await app.inject({ method: 'POST', url: `${API}/auth/refresh`, payload: { refreshToken } })
  t.equal(first.statusCode, 200, first.body)
  const replay = await app.inject({ method: 'POST', url: `${API}/auth/refresh`, payload: { refreshToken } })
  t.equal(replay.statusCode, 401)
  const after = await call(app, olgaToken, { method: 'GET', url: `${API}/admin/getuserdetails` })
  t.equal(after.statusCode, 401, 'the session ended with the replay')

  // The audit trail holds what happened, newest first.
  const trail = await call(app, admin, { method: 'GET', url: `${API}/Events/GetAuditTrails?PageSize=50` })
  t.equal(trail.statusCode, 200, trail.body)
  const described = trail.json().data.map((r: { description: string }) => r.description)
  t.ok(
    described.some((d: string) => /Login of "Olga"/.test(d)),
    'the login is in the trail',
  )
  t.ok(
    described.some((d: string) => /Refresh token reused/.test(d)),
    'so is the replayed refresh token',
  )

  // PostgreSQL's text holds no NUL character: such input is refused with a 400 naming it.
  const nul = await call(app, admin, { method: 'GET', url: `${API}/agents/agent/a%00b` })
  t.equal(nul.statusCode, 400, nul.body)
  t.match(nul.json().detail, /NUL character/)
  const nulLogin = await app.inject({ method: 'POST', url: `${API}/Auth/LocalLogin`, payload: { username: 'ad\u0000min', password: 'whatever-it-is' } })
  t.equal(nulLogin.statusCode, 400, nulLogin.body)

  // An operation whose storage is not on PostgreSQL yet: an honest 501.
  const agents = await call(app, admin, { method: 'GET', url: `${API}/agents?PageSize=10` })
  if (agents.statusCode === 501) t.match(agents.json(), { code: 'not-implemented', detail: /PostgreSQL/ })
  else t.equal(agents.statusCode, 200, agents.body)

  t.ok(ADMIN_PASSWORD)
})

t.test('a login whose account is reset meanwhile on another connection makes no session', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const app = await build(t, { PRIME_DATABASE_URL: url })
  const admin = await login(app)
  const added = await call(app, admin, { method: 'POST', url: `${API}/admin/adduser`, payload: { userName: 'wanda', email: 'w@example.com', userProfile: 10, password: 'Battery-staple-97' } })
  t.equal(added.statusCode, 200, added.body)
  // Another node's reset, held open: its new hash is written, its sessions ended, not committed.
  const other = new pg.Client({ connectionString: url })
  await other.connect()
  t.teardown(() => other.end())
  await other.query('BEGIN')
  await other.query("UPDATE users SET password_hash = $1, tokens_valid_after_ms = $2 WHERE user_name = 'wanda'", [await hashPassword('Other-pass-12345'), Date.now()])
  await other.query("UPDATE sessions SET revoked_ms = $1 WHERE user_id = (SELECT id FROM users WHERE user_name = 'wanda') AND revoked_ms IS NULL", [Date.now()])
  // The login checks the old password against the committed hash, then holds the account: it waits for the reset.
  const pending = app.inject({ method: 'POST', url: `${API}/Auth/LocalLogin`, payload: { username: 'wanda', password: 'Battery-staple-97' } })
  await new Promise((r) => setTimeout(r, 500))
  await other.query('COMMIT')
  const res = await pending
  t.equal(res.statusCode, 400, 'the login sees the reset and fails')
  t.equal(
    (await other.query("SELECT count(*)::int AS n FROM sessions WHERE user_id = (SELECT id FROM users WHERE user_name = 'wanda') AND revoked_ms IS NULL")).rows[0].n,
    0,
    'no live session of the old password',
  )
})
