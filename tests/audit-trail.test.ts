// Pins the audit trail: every change, every refused request and every login leaves an
// immutable record, with secrets masked.
import t from 'tap'
import { build, login, call, sqliteOnly, userWithProfile, ADMIN_PASSWORD } from './helpers.js'
import { auditSince, backendOf, indexEvents, lastAuditId, latestAudit, query, queryOne } from './seed.js'
import { maskSecrets } from '../lib/audit.js'

const env = { PRIME_LOGIN_RATE_LIMIT_MAX: '10000' }
const NEW_PASSWORD = 'Secret-Sauce-4711'
const newUser = (userName: string) => ({ userName, email: `${userName}@example.com`, userProfile: 20, password: NEW_PASSWORD, firstName: 'Bob' })

const lastId = lastAuditId
/** The records written since `after`, oldest first. */
const since = auditSince

t.test('a successful change is audited', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const before = await lastId(app)
  const t0 = Date.now()
  const res = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('bob') })
  t.equal(res.statusCode, 200, res.body)
  const rows = await since(app, before)
  t.equal(rows.length, 1, 'exactly one record')
  const [row] = rows
  t.equal(row.category, 'Users')
  t.equal(row.operation_id, 'addUser')
  t.equal(row.outcome, 'Succeeded')
  t.equal(row.user_name, 'admin', 'who acted')
  t.equal(row.source_ip, '127.0.0.1', 'from where')
  t.ok(row.created_ms >= t0 && row.created_ms <= Date.now(), 'when')
  t.ok(row.severity >= 0 && row.severity <= 7)
  t.match(row.description, 'bob')
  const details = JSON.parse(row.details)
  t.equal(details.userName, 'bob', 'details name the new account')
  t.equal(details.userProfile, 20)
  t.equal(details.firstName, 'Bob')
  t.ok(details.password === null || details.password === '***' || !('password' in details), 'password absent or masked')
  t.notMatch(row.details, NEW_PASSWORD, 'the password is nowhere in the record')
  t.notMatch(row.description, NEW_PASSWORD)
  t.equal(row.asset_type, 'User')
  t.equal(row.asset_name, 'bob')
  t.equal(row.asset_key, String(res.json().id))
  t.equal(row.request_id, res.headers['x-request-id'], 'the request that wrote it, as its answer named it')
})

t.test("a record names its request: the id the answer and the log line carry, a trusted proxy's own when valid", async (t) => {
  const app = await build(t, { ...env, PRIME_TRUST_PROXY: 'true' })
  const token = await login(app)
  let before = await lastId(app)
  const given = 'soc-ticket-4711.retry-2'
  const res = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('carol'), headers: { 'x-request-id': given } })
  t.equal(res.headers['x-request-id'], given)
  t.equal((await since(app, before))[0].request_id, given, "a valid id of the trusted proxy's is kept")
  before = await lastId(app)
  const invalid = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('dave'), headers: { 'x-request-id': 'not valid!' } })
  t.match(invalid.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'an invalid one is replaced')
  t.equal((await since(app, before))[0].request_id, invalid.headers['x-request-id'])
  before = await lastId(app)
  const refused = await app.inject({ method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('mallory') })
  t.equal(refused.statusCode, 401)
  t.equal((await since(app, before))[0].request_id, refused.headers['x-request-id'], 'refused requests too')
  // The queries answer it (and the service's own records have none).
  indexEvents(app)
  const list = await call(app, token, { method: 'GET', url: '/prime/webui/Events/GetAuditTrails?SortBy=auditTrailID_asc&PageSize=1000' })
  const views = list.json().data as { auditTrailID: number; requestId: string | null; description: string }[]
  t.equal(views[0].requestId, null, 'the first start: written by the service itself')
  t.ok(
    views.some((v) => v.requestId === given),
    'GetAuditTrails shows it',
  )
})

t.test('every change of an account is audited, without its secrets', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const before = await lastId(app)
  const created = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('bob') })
  const id = created.json().id
  const changed = await call(app, token, { method: 'POST', url: '/prime/webui/admin/updateuser', payload: { id, password: 'Another-Secret-99', phone: '+41 1' } })
  t.equal(changed.statusCode, 200, changed.body)
  const own = await call(app, token, { method: 'POST', url: '/prime/webui/admin/updateuserdetails', payload: { currentPassword: ADMIN_PASSWORD, newPassword: 'Root-Secret-2024', lastName: 'Root' } })
  t.equal(own.statusCode, 200, own.body)
  const token2 = await login(app, 'admin', 'Root-Secret-2024')
  const deleted = await call(app, token2, { method: 'POST', url: '/prime/webui/admin/deleteUsers', payload: ['bob'] })
  t.equal(deleted.statusCode, 200, deleted.body)
  const logout = await call(app, token2, { method: 'POST', url: '/prime/webui/auth/logout' })
  t.equal(logout.statusCode, 200)

  const rows = await since(app, before)
  const ops = rows.map((r) => r.operation_id)
  t.same(ops, ['addUser', 'updateUser', 'updateUserDetails', 'localLogin', 'deleteUsers', 'logout'], 'one record per change, in order')
  t.ok(rows.every((r) => r.outcome === 'Succeeded'))
  const update = JSON.parse(rows[1].details)
  t.equal(update.password, '***', 'a password change is recorded, masked')
  t.same(update.phone, { from: null, to: '+41 1' }, 'with what changed')
  t.same(JSON.parse(rows[2].details).changed, ['lastName'])
  t.match(rows[2].description, /including the password/, 'an own password change is recorded')
  t.same(JSON.parse(rows[4].details).deleted, ['bob'])
  t.equal(rows[5].category, 'Authentication')
  for (const secret of [NEW_PASSWORD, 'Another-Secret-99', ADMIN_PASSWORD, 'Root-Secret-2024', token, token2]) {
    t.notOk(
      rows.some((r) => r.details.includes(secret) || r.description.includes(secret)),
      `no record contains ${secret.slice(0, 12)}...`,
    )
  }
})

t.test('refused requests are audited', async (t) => {
  const app = await build(t, env)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'ursula', 10)

  let before = await lastId(app)
  const noToken = await app.inject({ method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('mallory') })
  t.equal(noToken.statusCode, 401)
  let rows = await since(app, before)
  t.equal(rows.length, 1)
  t.equal(rows[0].outcome, 'Refused', 'no token: Refused')
  t.equal(rows[0].operation_id, 'addUser')
  t.equal(rows[0].category, 'Users')
  t.equal(rows[0].user_name, null, 'nobody known')
  t.equal(rows[0].source_ip, '127.0.0.1')
  t.match(rows[0].description, /A bearer token is required/)

  before = await lastId(app)
  const lowProfile = await call(app, user, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('mallory') })
  t.equal(lowProfile.statusCode, 403)
  rows = await since(app, before)
  t.equal(rows.length, 1)
  t.equal(rows[0].outcome, 'Refused', 'profile too low: Refused')
  t.equal(rows[0].operation_id, 'addUser')
  t.equal(rows[0].user_name, 'ursula', 'who tried')
  t.match(rows[0].description, /Administrator/)

  before = await lastId(app)
  const read = await app.inject({ url: '/prime/webui/admin/all' })
  t.equal(read.statusCode, 401)
  rows = await since(app, before)
  t.equal(rows.length, 1, 'a refused read is audited too')
  t.equal(rows[0].outcome, 'Refused')
  t.equal(rows[0].operation_id, 'getAllUsers')
  t.equal(rows[0].category, 'System', 'a read has no category of its own')

  before = await lastId(app)
  t.equal((await call(app, user, { url: '/prime/webui/admin/all' })).statusCode, 403)
  t.equal((await since(app, before))[0]?.user_name, 'ursula')

  before = await lastId(app)
  t.equal((await call(app, 'forged.jwt.token', { url: '/prime/webui/admin/profile' })).statusCode, 401)
  t.equal((await since(app, before))[0]?.outcome, 'Refused', 'an invalid token is audited')

  before = await lastId(app)
  t.equal((await call(app, admin, { url: '/prime/webui/admin/all' })).statusCode, 200)
  t.equal((await app.inject({ url: '/prime/webui/nothing' })).statusCode, 404)
  t.equal((await since(app, before)).length, 0, 'successful reads and unknown paths write nothing')
})

t.test('failed changes are audited', async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  t.equal((await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('bob') })).statusCode, 200)

  let before = await lastId(app)
  const dup = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('BOB') })
  t.equal(dup.statusCode, 409, 'a duplicate name, in any case')
  let rows = await since(app, before)
  t.equal(rows.length, 1)
  t.equal(rows[0].outcome, 'Failed')
  t.equal(rows[0].operation_id, 'addUser')
  t.equal(rows[0].category, 'Users')
  t.equal(rows[0].user_name, 'admin')
  t.match(rows[0].description, /already exists/)
  t.notMatch(rows[0].details, NEW_PASSWORD, 'the password of the refused body is masked')
  t.match(JSON.parse(rows[0].details), { status: 409, body: { userName: 'BOB', password: '***' } })

  before = await lastId(app)
  const invalid = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { ...newUser('carol'), userProfile: 99 } })
  t.equal(invalid.statusCode, 400)
  rows = await since(app, before)
  t.equal(rows.length, 1, 'an invalid body is audited')
  t.equal(rows[0].outcome, 'Failed')
  t.match(rows[0].description, /userProfile/)
  t.equal(JSON.parse(rows[0].details).body.password, '***')

  before = await lastId(app)
  const weak = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { ...newUser('carol'), password: 'short' } })
  t.equal(weak.statusCode, 400)
  rows = await since(app, before)
  t.equal(rows[0]?.outcome, 'Failed', 'a refused password is audited')
  t.notMatch(rows[0]?.details, '"short"', 'and masked')

  before = await lastId(app)
  const self = await call(app, token, { method: 'POST', url: '/prime/webui/admin/deleteUsers', payload: ['admin', 'ghost'] })
  t.equal(self.statusCode, 200)
  rows = await since(app, before)
  t.equal(rows.length, 1)
  t.equal(rows[0].outcome, 'Failed', 'a bulk change where nothing was done')
  t.equal(JSON.parse(rows[0].details).failed.length, 2)
})

t.test('logins are audited', async (t) => {
  const app = await build(t, env)
  let before = await lastId(app)
  await login(app)
  let rows = await since(app, before)
  t.equal(rows.length, 1)
  t.match(rows[0], { category: 'Authentication', operation_id: 'localLogin', outcome: 'Succeeded', user_name: 'admin', source_ip: '127.0.0.1' })

  before = await lastId(app)
  const wrong = await app.inject({ method: 'POST', url: '/prime/webui/auth/signin', payload: { username: 'Admin', password: 'not-the-password-1' } })
  t.equal(wrong.statusCode, 400)
  rows = await since(app, before)
  t.equal(rows.length, 1)
  t.match(rows[0], { category: 'Authentication', operation_id: 'signIn', outcome: 'Failed', user_name: 'admin', source_ip: '127.0.0.1' })
  t.same(JSON.parse(rows[0].details), { userName: 'Admin', reason: 'wrong password' })
  t.notMatch(rows[0].details, 'not-the-password-1', 'the tried password is not recorded')

  before = await lastId(app)
  await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'nobody', password: 'whatever-it-is-1' } })
  rows = await since(app, before)
  t.equal(rows.length, 1)
  t.match(rows[0], { outcome: 'Failed', user_name: null }, 'an unknown name is not recorded as an actor')
  t.match(JSON.parse(rows[0].details), { reason: 'unknown user', userName: 'nobody' })

  before = await lastId(app)
  const malformed = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: 'whatever-it-is-2', extra: 1 } })
  t.equal(malformed.statusCode, 400)
  rows = await since(app, before)
  t.equal(rows.length, 1, 'an invalid login request is audited')
  t.equal(rows[0].outcome, 'Failed')
  t.notMatch(rows[0].details, 'whatever-it-is-2', 'with its password masked')

  before = await lastId(app)
  const refresh = await app.inject({ method: 'POST', url: '/prime/webui/auth/refresh', payload: { refreshToken: 'prt_unknown' } })
  t.equal(refresh.statusCode, 401)
  rows = await since(app, before)
  t.equal(rows.length, 1, 'a refused refresh is audited')
  t.equal(rows[0].outcome, 'Refused')
  t.notMatch(rows[0].details, 'prt_unknown', 'the refresh token is masked')
})

t.test('audit records are immutable', async (t) => {
  const app = await build(t, env)
  await login(app)
  const [row] = await latestAudit(app)
  await t.rejects(query(app, 'UPDATE audit_trail SET description = ? WHERE id = ?', 'edited', row.id), /audit records are immutable/, 'UPDATE raises')
  await t.rejects(query(app, 'DELETE FROM audit_trail WHERE id = ?', row.id), /audit records are immutable/, 'DELETE raises')
  await t.rejects(query(app, 'DELETE FROM audit_trail'), /audit records are immutable/, 'deleting all raises')
  // PostgreSQL's key is (id, created_ms): the table is partitioned by time.
  const key = backendOf(app) === 'postgres' ? 'id, created_ms' : 'id'
  await t.rejects(
    query(
      app,
      `INSERT INTO audit_trail (id, created_ms, severity, category, description, details, outcome) VALUES (?, ?, 5, 'System', 'x', '{}', 'Succeeded') ON CONFLICT (${key}) DO UPDATE SET description = 'upserted'`,
      row.id,
      row.created_ms,
    ),
    /audit records are immutable/,
    'an upsert raises',
  )
  t.same((await latestAudit(app))[0], row, 'the record is unchanged')
})

t.test('INSERT OR REPLACE cannot overwrite an audit record', sqliteOnly("INSERT OR REPLACE is SQLite's"), async (t) => {
  const app = await build(t, env)
  await login(app)
  const [row] = await latestAudit(app)
  t.throws(
    () => app.db.prepare("INSERT OR REPLACE INTO audit_trail (id, created_ms, severity, category, description, details, outcome) VALUES (?, 0, 7, 'System', 'forged', '{}', 'Succeeded')").run(row.id),
    /immutable|constraint/,
  )
  t.equal((await latestAudit(app))[0].description, row.description, 'the record is unchanged')
})

t.test('audit ids strictly increase', sqliteOnly("compares ids with rowid, SQLite's insertion order"), async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  await app.inject({ url: '/prime/webui/admin/all' })
  await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('bob') })
  await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('bob') })
  await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'bob', password: 'wrong-password-1' } })
  const rows = await query(app, 'SELECT * FROM audit_trail ORDER BY rowid')
  t.ok(rows.length >= 6)
  for (let i = 1; i < rows.length; i++) {
    t.ok(rows[i].id > rows[i - 1].id, `id ${rows[i].id} > ${rows[i - 1].id}`)
    t.ok(rows[i].created_ms >= rows[i - 1].created_ms, 'in time order')
  }
  const latest = await latestAudit(app, 3)
  t.same(
    latest.map((r) => r.id),
    rows
      .slice(-3)
      .reverse()
      .map((r) => r.id),
    'latest(n) answers the newest first',
  )
  const seq = (await queryOne(app, "SELECT seq FROM sqlite_sequence WHERE name = 'audit_trail'")) as { seq: number }
  t.equal(seq.seq, rows.at(-1)!.id, 'AUTOINCREMENT: ids are never reused')
})

t.test('the first start is audited', async (t) => {
  const app = await build(t, env)
  const first = (await queryOne(app, 'SELECT * FROM audit_trail ORDER BY id LIMIT 1'))!
  t.match(first, { category: 'Users', outcome: 'Succeeded', asset_name: 'admin', asset_type: 'User' })
  t.match(first.description, /first Administrator/)
  t.equal(first.request_id, null, 'written by the service itself, not a request')
  t.same(JSON.parse(first.details), { userName: 'admin', userProfile: 30, passwordFrom: 'PRIME_ADMIN_PASSWORD' })
})

t.test('maskSecrets keeps flags about secrets readable', async (t) => {
  t.same(maskSecrets({ passwordChanged: true, hasToken: false }), { passwordChanged: true, hasToken: false })
})

t.test('maskSecrets', async (t) => {
  t.same(maskSecrets({ password: 'p', userName: 'bob' }), { password: '***', userName: 'bob' })
  for (const key of [
    'password',
    'Password',
    'PASSWORD',
    'newPassword',
    'currentPassword',
    'pass',
    'passphrase',
    'secret',
    'clientSecret',
    'token',
    'refreshToken',
    'accessToken',
    'credential',
    'credentials',
    'privateKey',
    'private_key',
    'apiKey',
    'api-key',
    'Authorization',
  ]) {
    t.same(maskSecrets({ [key]: 'value' }), { [key]: '***' }, `${key} is masked`)
  }
  t.same(maskSecrets({ password: null, token: undefined }), { password: null, token: undefined }, 'an absent secret stays absent (null says "not set")')
  t.same(maskSecrets({ password: 12345, secret: { nested: 'x' }, tokens: ['a', 'b'] }), { password: '***', secret: '***', tokens: '***' }, 'any value under a secret key')
  t.same(
    maskSecrets({ a: { b: { c: [{ d: { smtpPassword: 'x', host: 'mail' } }] } }, list: [{ apiKey: 'k' }, 'plain'], n: 1, ok: true, nothing: null }),
    { a: { b: { c: [{ d: { smtpPassword: '***', host: 'mail' } }] } }, list: [{ apiKey: '***' }, 'plain'], n: 1, ok: true, nothing: null },
    'at any depth, in arrays too',
  )
  t.same(maskSecrets([{ password: 'x' }, { name: 'y' }]), [{ password: '***' }, { name: 'y' }], 'an array at the root')
  t.equal(maskSecrets('password'), 'password', 'plain values pass through')
  t.equal(maskSecrets(null), null)
  const input = { password: 'x', inner: { secret: 'y' } }
  maskSecrets(input)
  t.same(input, { password: 'x', inner: { secret: 'y' } }, 'the input is not modified')
})

t.test("a caller's id is not a record's request id without a trusted proxy", async (t) => {
  const app = await build(t, env)
  const token = await login(app)
  const before = await lastId(app)
  const given = 'soc-ticket-4711.retry-2'
  const res = await call(app, token, { method: 'POST', url: '/prime/webui/admin/adduser', payload: newUser('erin'), headers: { 'x-request-id': given } })
  t.equal(res.statusCode, 200, res.body)
  t.match(res.headers['x-request-id'], /^[0-9a-f-]{36}$/, 'replaced')
  t.equal((await since(app, before))[0].request_id, res.headers['x-request-id'], "the record names the server's id")
})
