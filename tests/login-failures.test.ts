// Failed logins: counted per user name and source address, so that a stranger cannot lock a
// real user out; a name without an account answers exactly like one with (status, body,
// lock, and the same password check, against a stand-in hash); and only failures count
// toward the per-address login limit.
import t from 'tap'
import crypto from 'node:crypto'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'

// Every scrypt run is recorded: replaced before the password module binds it, so the
// modules under test are imported below rather than statically.
const scryptRuns: { salt: string; keyLen: number; options: string }[] = []
const realScrypt = crypto.scrypt
crypto.scrypt = function (this: unknown, ...args: any[]) {
  scryptRuns.push({ salt: Buffer.from(args[1]).toString('base64'), keyLen: args[2], options: JSON.stringify(args[3]) })
  return (realScrypt as any).apply(this, args)
} as typeof crypto.scrypt
const { build, login, userWithProfile, call, ADMIN_PASSWORD, USER_PASSWORD } = await import('./helpers.js')

const LOGIN = '/prime/webui/Auth/LocalLogin'
const UPDATE = '/prime/webui/admin/updateuser'
const attempt = (app: FastifyInstance, username: string, password: string, remoteAddress = '127.0.0.1') => app.inject({ method: 'POST', url: LOGIN, payload: { username, password }, remoteAddress })

/** What a client can tell from an answer, apart from its request id and the rate-limit counts. */
function seen(res: LightMyRequestResponse) {
  const { requestId: _id, ...body } = res.json()
  const headers = Object.fromEntries(Object.entries(res.headers).filter(([k]) => !['date', 'x-request-id', 'x-ratelimit-remaining', 'x-ratelimit-reset'].includes(k)))
  return { status: res.statusCode, body, headers }
}

t.test('an unknown name and an existing one run the same password check', async (t) => {
  const app = await build(t, { PRIME_LOCKOUT_THRESHOLD: '2', PRIME_LOGIN_RATE_LIMIT_MAX: '1000' })
  const runs = async (username: string, remoteAddress: string) => {
    const from = scryptRuns.length
    const res = await attempt(app, username, 'Wrong-password-1', remoteAddress)
    return { status: res.statusCode, runs: scryptRuns.slice(from) }
  }
  // The first unknown name of this process: the stand-in hash was made at start, not on this login.
  const unknown = await runs('nobody-here', '192.0.2.1')
  const existing = await runs('admin', '192.0.2.2')
  t.equal(unknown.runs.length, 1, 'one scrypt run for an unknown name')
  t.equal(existing.runs.length, 1, 'one scrypt run for an existing name')
  t.equal(unknown.runs[0].options, existing.runs[0].options, `the same cost parameters (${existing.runs[0].options})`)
  t.equal(unknown.runs[0].keyLen, existing.runs[0].keyLen, 'the same key length')
  t.not(unknown.runs[0].salt, existing.runs[0].salt, 'against the stand-in hash, not the account hash')
  t.equal((await runs('nobody-else', '192.0.2.1')).runs[0].salt, unknown.runs[0].salt, 'the same stand-in for every unknown name')

  await runs('nobody-here', '192.0.2.1')
  await runs('admin', '192.0.2.2')
  const lockedUnknown = await runs('nobody-here', '192.0.2.1')
  const lockedExisting = await runs('admin', '192.0.2.2')
  t.same([lockedUnknown.status, lockedExisting.status], [429, 429], 'both locked')
  t.same([lockedUnknown.runs.length, lockedExisting.runs.length], [0, 0], 'and neither runs scrypt while locked')
})

t.test('failures from another address cannot lock a user out', async (t) => {
  const app = await build(t, { PRIME_LOCKOUT_THRESHOLD: '5', PRIME_LOGIN_RATE_LIMIT_MAX: '1000' })
  const stranger = '203.0.113.66'
  for (let i = 0; i < 5; i++) t.equal((await attempt(app, 'admin', `Wrong-password-${i}`, stranger)).statusCode, 400)
  t.equal((await attempt(app, 'admin', ADMIN_PASSWORD, stranger)).statusCode, 429, 'the stranger is locked out of admin')
  t.equal((await attempt(app, 'admin', ADMIN_PASSWORD)).statusCode, 200, 'admin still logs in from its own address')
  const v6 = ['2001:db8:5:1::10', '2001:db8:5:1::99']
  for (let i = 0; i < 5; i++) await attempt(app, 'admin', `Wrong-password-${i}`, v6[0])
  t.equal((await attempt(app, 'admin', ADMIN_PASSWORD, v6[1])).statusCode, 429, 'an IPv6 client is counted per /64, like the rate limits')
  t.equal((await attempt(app, 'admin', ADMIN_PASSWORD, '2001:db8:5:2::10')).statusCode, 200, 'the next /64 is not locked')
})

t.test('a name without an account answers exactly like an existing one', async (t) => {
  const app = await build(t, { PRIME_LOCKOUT_THRESHOLD: '3', PRIME_LOGIN_RATE_LIMIT_MAX: '1000' })
  const admin = await login(app)
  await userWithProfile(app, admin, 'dora', 10)
  await call(app, admin, { method: 'POST', url: UPDATE, payload: { userName: 'dora', isActive: false } })
  const names = { existing: 'admin', unknown: 'nobody-here', disabled: 'dora' }
  const password = { existing: 'Wrong-password-1', unknown: 'Wrong-password-1', disabled: USER_PASSWORD }

  for (let i = 1; i <= 4; i++) {
    const answers = await Promise.all(Object.keys(names).map((k) => attempt(app, names[k as keyof typeof names], password[k as keyof typeof names], `198.51.100.${k.length}`)))
    const [existing, unknown, disabled] = answers.map(seen)
    t.equal(existing.status, i <= 3 ? 400 : 429, `attempt ${i}: ${i <= 3 ? 'a failed login' : 'locked'}`)
    t.same(unknown, existing, `attempt ${i}: an unknown name gets the same status, body and headers`)
    t.same(disabled, existing, `attempt ${i}: so does a disabled account with its right password`)
  }
})

t.test('only failed logins count toward the login limit', async (t) => {
  const app = await build(t, { PRIME_LOGIN_RATE_LIMIT_MAX: '3', PRIME_LOCKOUT_THRESHOLD: '1000' })
  for (let i = 1; i <= 10; i++) t.equal((await attempt(app, 'admin', ADMIN_PASSWORD)).statusCode, 200, `login ${i} of an automation that logs in before each call`)
  const parallel = await Promise.all(Array.from({ length: 6 }, (_, i) => attempt(app, 'admin', `Wrong-password-${i}`)))
  t.same(parallel.map((r) => r.statusCode).sort(), [400, 400, 400, 429, 429, 429], 'parallel failures cannot outrun the limit: each counts when it arrives')
  t.equal((await attempt(app, 'admin', ADMIN_PASSWORD)).statusCode, 429, 'after 3 failures the address waits, right password or not')
})
