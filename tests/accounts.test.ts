import t from 'tap'
import Database from 'better-sqlite3'
import { build, login, userWithProfile, call, USER_PASSWORD, postgresPending, sqliteOnly } from './helpers.js'
import { portsOf } from './seed.js'

const ADD = '/prime/webui/admin/adduser'
const UPDATE = '/prime/webui/admin/updateuser'
const DELETE = '/prime/webui/admin/deleteUsers'

t.test('adduser validates, refuses duplicates and never returns the password', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const add = (payload: object) => call(app, admin, { method: 'POST', url: ADD, payload })
  const ok = await add({ userName: 'alice', email: 'alice@example.com', userProfile: 20, password: 'Long-enough-pass-1', firstName: 'Alice' })
  t.equal(ok.statusCode, 200)
  t.match(ok.json(), { id: Number, userName: 'alice', userProfile: 20, password: null, isActive: true, firstName: 'Alice' })

  const dup = await add({ userName: 'ALICE', email: 'a2@example.com', userProfile: 10, password: 'Long-enough-pass-1' })
  t.equal(dup.statusCode, 409, 'user names are unique regardless of case')

  const cases: [object, string][] = [
    [{ userName: 'bob', email: 'not-an-email', userProfile: 10, password: 'Long-enough-pass-1' }, 'email'],
    [{ userName: 'bob', email: 'bob@example.com', userProfile: 15, password: 'Long-enough-pass-1' }, 'userProfile'],
    [{ userName: 'bob', email: 'bob@example.com', userProfile: 10, password: 'short-1' }, 'password'],
    [{ userName: 'bob', email: 'bob@example.com', userProfile: 10, password: 'xx-bob-is-my-name' }, 'password'],
    [{ userName: 'bob', email: 'bob@example.com', userProfile: 10, password: 'onlyletterspassword' }, 'password'],
    [{ userName: 'bob', email: 'bob@example.com', userProfile: 10 }, 'password'],
    [{ userName: 'bad name!', email: 'bob@example.com', userProfile: 10, password: 'Long-enough-pass-1' }, 'userName'],
  ]
  for (const [payload, field] of cases) {
    const res = await add(payload)
    t.equal(res.statusCode, 400, `${field}: ${res.body}`)
    t.ok(
      res.json().errors.some((e: { name: string }) => e.name === field),
      `names ${field}`,
    )
  }
  t.equal(await portsOf(app).users.byName('bob'), undefined, 'nothing half-written')
})

t.test('updateuser changes only what is sent and guards the last Administrator', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'henry', 10)
  const res = await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'henry', phone: '+41 44 000 00 00', userProfile: 20 } })
  t.equal(res.statusCode, 200)
  t.match(res.json(), { userName: 'henry', phone: '+41 44 000 00 00', userProfile: 20, email: 'henry@example.com' })
  const cleared = await call(app, admin, { method: 'POST', url: UPDATE, payload: { id: res.json().id, phone: null } })
  t.equal(cleared.json().phone, null)
  const renamed = await call(app, admin, { method: 'POST', url: UPDATE, payload: { id: res.json().id, userName: 'admin' } })
  t.equal(renamed.statusCode, 409, "cannot take another account's name")

  t.equal((await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'nobody', phone: null } })).statusCode, 404)
  t.equal((await call(app, admin, { method: 'POST', url: UPDATE, payload: { phone: null } })).statusCode, 400, 'needs id or userName')
  const demote = await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'admin', userProfile: 20 } })
  t.equal(demote.statusCode, 409, 'the last Administrator cannot be demoted')
  const disable = await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'admin', isActive: false } })
  t.equal(disable.statusCode, 409, 'nor disabled')
  t.equal((await portsOf(app).users.byName('admin'))!.profile, 30)

  await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'henry', userProfile: 30 } })
  const now = await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'admin', userProfile: 20 } })
  t.equal(now.statusCode, 200, 'with a second Administrator, demotion is allowed')
})

t.test('deleteUsers answers per item', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'ivan', 10)
  await userWithProfile(app, admin, 'judy', 20)
  const judyId = (await portsOf(app).users.byName('judy'))!.id
  const res = await call(app, admin, { method: 'POST', url: DELETE, payload: ['ivan', String(judyId), 'nobody', 'admin'] })
  t.equal(res.statusCode, 200)
  t.same(res.json(), {
    succeeded: 2,
    failed: 2,
    results: [
      { id: 'ivan', status: 'done', reason: null, code: null },
      { id: String(judyId), status: 'done', reason: null, code: null },
      { id: 'nobody', status: 'failed', reason: 'No account "nobody".', code: 'not-found' },
      { id: 'admin', status: 'failed', reason: 'You cannot delete your own account.', code: 'not-allowed' },
    ],
  })
  for (const body of [[], null, [''], 'admin']) {
    t.equal((await call(app, admin, { method: 'POST', url: DELETE, payload: JSON.stringify(body), headers: { 'content-type': 'application/json' } })).statusCode, 400, JSON.stringify(body))
  }
})

t.test('the last Administrator cannot be deleted, even by another account', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const other = await userWithProfile(app, admin, 'karl', 30)
  await call(app, other, { method: 'POST', url: UPDATE, payload: { userName: 'admin', isActive: false } })
  const res = await call(app, other, { method: 'POST', url: DELETE, payload: ['karl'] })
  t.equal(res.json().results[0].code, 'not-allowed', 'yourself')
  await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'admin', isActive: true } })
})

t.test('updateuserdetails changes the own account; a new password needs the current one', async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const me = await userWithProfile(app, admin, 'lena', 10)
  const url = '/prime/webui/admin/updateuserdetails'
  const ok = await call(app, me, { method: 'POST', url, payload: { firstName: 'Lena', email: 'lena@corp.example' } })
  t.equal(ok.statusCode, 200)
  t.match(ok.json(), { userName: 'lena', firstName: 'Lena', email: 'lena@corp.example', userProfile: 10 })
  const missing = await call(app, me, { method: 'POST', url, payload: { newPassword: 'Another-pass-77' } })
  t.equal(missing.statusCode, 400)
  t.equal(missing.json().errors[0].name, 'currentPassword')
  const wrong = await call(app, me, { method: 'POST', url, payload: { newPassword: 'Another-pass-77', currentPassword: 'Not-my-password-1' } })
  t.equal(wrong.json().errors[0].name, 'currentPassword')
  const weak = await call(app, me, { method: 'POST', url, payload: { newPassword: 'short', currentPassword: USER_PASSWORD } })
  t.equal(weak.json().errors[0].name, 'newPassword')
  const profile = await call(app, me, { method: 'POST', url, payload: { userProfile: 30 } })
  t.equal(profile.statusCode, 400, 'cannot raise the own profile')
  t.equal((await call(app, me, { method: 'POST', url, payload: {} })).statusCode, 400, 'an empty change is refused')
})

t.test('read operations: own account, profile, version, status, health', postgresPending('the DiskSpace and WorkerPoller health checks'), async (t) => {
  const app = await build(t)
  const admin = await login(app)
  const user = await userWithProfile(app, admin, 'mia', 10)
  t.match((await call(app, user, { url: '/prime/webui/admin/getuserdetails' })).json(), { userName: 'mia', password: null })
  const profile = (await call(app, user, { url: '/prime/webui/admin/profile' })).json()
  t.match(profile, { userName: 'mia', userProfile: 10, profileName: 'User', tokenKind: 'session' })
  t.ok(profile.allowedOperations.includes('getUserDetails'))
  t.notOk(profile.allowedOperations.includes('addUser'))
  const version = (await call(app, user, { url: '/prime/webui/admin/PrimeVersion' })).json()
  t.match(version, { version: '1.0.0', build: 'dev', contractVersion: app.contract.spec.info.version })
  const status = (await call(app, user, { url: '/prime/webui/admin/systemstatus' })).json()
  t.match(status, { accounts: { total: 2, active: 2 }, agents: { total: 0 }, license: { seats: 1000 }, database: { sizeBytes: Number } })
  t.ok(status.database.sizeBytes > 0)
  const health = (await call(app, user, { url: '/prime/webui/admin/SubsystemHealth' })).json()
  t.same(
    health.subsystems.map((s: { name: string }) => s.name),
    ['Database', 'DiskSpace', 'Authentication', 'AlarmDelivery', 'Reports', 'WorkerPoller', 'License'],
  )
  t.equal(health.subsystems[0].status, 'Healthy')
  t.ok(['Healthy', 'Warning', 'Failed'].includes(health.status))
  t.equal((await call(app, user, { url: '/prime/webui/admin/all' })).statusCode, 403)
})

t.test("account answers are never stale: own changes, another connection's, and rolled-back ones", sqliteOnly("the answers kept in memory over SQLite's connection"), async (t) => {
  const app = await build(t)
  const admin = await login(app)
  await userWithProfile(app, admin, 'ivy', 10)
  const details = async () => (await call(app, admin, { method: 'GET', url: '/prime/webui/admin/getuserdetails' })).json()
  const all = async () => (await call(app, admin, { method: 'GET', url: '/prime/webui/admin/all' })).json() as { userName: string; firstName: string | null }[]
  t.equal((await details()).firstName, null)
  t.equal((await all()).length, 2)

  await call(app, admin, { method: 'POST', url: '/prime/webui/admin/updateuserdetails', payload: { firstName: 'Ada' } })
  t.equal((await details()).firstName, 'Ada', 'a change through the API shows at once')

  const other = new Database(app.testConfig.dbFile)
  t.teardown(() => other.close())
  other.prepare("UPDATE users SET first_name = 'Grace' WHERE user_name = 'admin'").run()
  // Another connection's commits are looked for at most once a millisecond.
  await new Promise((resolve) => setTimeout(resolve, 2))
  t.equal((await details()).firstName, 'Grace', 'a change committed by another connection shows within a millisecond')
  t.equal((await all()).find((u) => u.userName === 'admin')!.firstName, 'Grace')

  // A change inside a transaction that is rolled back never shows.
  t.throws(() =>
    app.db.transaction(() => {
      app.repos.users.update(app.repos.users.byName('ivy')!.id, { first_name: 'Temp' }, Date.now())
      t.equal(
        app.repos.users.memo('all', () => 'computed'),
        'computed',
        'inside a transaction nothing kept is used',
      )
      throw new Error('roll back')
    })(),
  )
  t.equal((await all()).find((u) => u.userName === 'ivy')!.firstName, null)

  await call(app, admin, { method: 'POST', url: DELETE, payload: ['ivy'] })
  t.same(
    (await all()).map((u) => u.userName),
    ['admin'],
    'a deleted account leaves the list at once',
  )
})
