// Pins the per-credential request budgets: every credential kind (an account's sessions,
// an integration token, an agent, a worker poller) has its own budget per window, whatever
// address it calls from, answered 429 with Retry-After; and agent enrollments are limited
// per address and overall, accepted ones too.
import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login, userWithProfile } from './helpers.js'
import { latestAudit, queryValue } from './seed.js'
import { ENROLLMENT_SECRET, checkIn, enroll, gatewayEnv, hostState } from './fixtures/gateway.js'

const VERSION = '/prime/webui/admin/PrimeVersion'
const POLLER_SECRET = 'pes_request-budgets-poller-secret'
let address = 0
/** Each request from another address: only the credential's budget can refuse it. */
const from = (app: FastifyInstance, token: string, url = VERSION) =>
  app.inject({ url, headers: { authorization: `Bearer ${token}` }, remoteAddress: `10.77.${(++address >> 8) & 255}.${address & 255}` })

function tooMany(t: Test, res: { statusCode: number; headers: Record<string, unknown>; json: () => any }, what: RegExp) {
  t.equal(res.statusCode, 429)
  t.equal(res.json().type, 'urn:prime:problem:rate-limited')
  t.match(res.json().detail, what)
  t.match(String(res.headers['retry-after']), /^[1-9]\d*$/, 'Retry-After in whole seconds')
}

t.test('an account has one budget for all its sessions and addresses', async (t) => {
  const app = await build(t, { PRIME_USER_RATE_LIMIT_MAX: '4' })
  const admin = await login(app)
  const second = await login(app) // another session of the same account
  const ursula = await userWithProfile(app, admin, 'ursula', 10)
  const answers = [await from(app, admin), await from(app, second), await from(app, admin)]
  t.same(
    answers.map((r) => r.statusCode),
    [200, 200, 200],
  )
  // adduser counted for admin too: this is its 5th request.
  tooMany(t, await from(app, second), /this account/)
  t.equal((await from(app, ursula)).statusCode, 200, 'another account has its own budget')
  const before = (await latestAudit(app))[0].id
  tooMany(t, await from(app, admin), /this account/)
  t.equal((await latestAudit(app))[0].id, before, 'a budget refusal writes no audit record')
})

t.test('an integration token has a budget of its own', async (t) => {
  const app = await build(t, { PRIME_TOKEN_RATE_LIMIT_MAX: '3' })
  const admin = await login(app)
  const created = await call(app, admin, { method: 'POST', url: '/prime/webui/admin/integrationTokens', payload: { name: 'soar', userProfile: 20 } })
  const token = created.json().token as string
  for (let i = 0; i < 3; i++) t.equal((await from(app, token)).statusCode, 200)
  tooMany(t, await from(app, token), /this integration token/)
  t.equal((await from(app, admin)).statusCode, 200, 'the account that created it is not affected')
})

t.test('a worker poller has a budget of its own', async (t) => {
  const app = await build(t, { PRIME_POLLER_ENROLLMENT_SECRET: POLLER_SECRET, PRIME_POLLER_RATE_LIMIT_MAX: '2' })
  const registered = await app.inject({
    method: 'POST',
    url: '/prime/webui/agents/agentless/poller/register',
    payload: { enrollmentSecret: POLLER_SECRET, name: 'poller-a', hostName: 'vm', version: '1.0.0' },
  })
  t.equal(registered.statusCode, 200, registered.body)
  const credential = registered.json().credential as string
  const heartbeat = () =>
    app.inject({
      method: 'POST',
      url: '/prime/webui/agents/agentless/poller/heartbeat',
      headers: { authorization: `Bearer ${credential}` },
      payload: { version: '1.0.0' },
      remoteAddress: `10.78.0.${++address & 255}`,
    })
  t.not((await heartbeat()).statusCode, 429)
  t.not((await heartbeat()).statusCode, 429)
  tooMany(t, await heartbeat(), /this worker poller/)
})

t.test('an agent has a budget of its own across gateway calls', async (t) => {
  const app = await build(t, { ...gatewayEnv, PRIME_AGENT_RATE_LIMIT_MAX: '3' })
  const agent = await enroll(app)
  const other = await enroll(app)
  for (let i = 0; i < 3; i++) t.equal((await checkIn(app, agent.credential, hostState([]))).statusCode, 200)
  const refused = await checkIn(app, agent.credential, hostState([]))
  tooMany(t, refused, /this agent/)
  t.notOk(refused.headers['x-ratelimit-limit'], 'not the per-address limit')
  const results = await app.inject({
    method: 'POST',
    url: '/prime/webui/gateway/commandresults',
    headers: { authorization: `Bearer ${agent.credential}` },
    payload: { results: [{ commandId: 1, status: 'Succeeded' }] },
  })
  t.equal(results.statusCode, 429, 'every gateway call counts')
  t.equal((await checkIn(app, other.credential, hostState([]))).statusCode, 200, 'another agent is not affected')
})

t.test('enrollments are limited per address and overall, accepted ones too', async (t) => {
  const app = await build(t, { ...gatewayEnv, PRIME_AGENT_ENROLL_PER_MINUTE_PER_ADDRESS: '3', PRIME_AGENT_ENROLL_PER_MINUTE: '5' })
  const enrollFrom = (remoteAddress: string, n: number) =>
    app.inject({ method: 'POST', url: '/prime/webui/gateway/enroll', remoteAddress, payload: { enrollmentSecret: ENROLLMENT_SECRET, machineId: `budget-machine-${n}`, hostIdentifier: `HOST-${n}` } })
  const site = [await enrollFrom('10.5.0.1', 1), await enrollFrom('10.5.0.1', 2), await enrollFrom('10.5.0.1', 3), await enrollFrom('10.5.0.1', 4)]
  t.same(
    site.map((r) => r.statusCode),
    [200, 200, 200, 429],
    'the 4th accepted-looking enrollment from one address waits',
  )
  tooMany(t, site[3], /enrollments a minute from this address/)
  t.equal((await enrollFrom('10.6.0.1', 5)).statusCode, 200, 'another address enrolls')
  t.equal((await enrollFrom('10.6.0.2', 6)).statusCode, 200)
  const overall = await enrollFrom('10.7.0.1', 7)
  tooMany(t, overall, /enrollments a minute to this server/)
  t.equal(await queryValue(app, 'SELECT count(*) FROM agents'), 5, 'no agent beyond the budgets')
})

t.test('PRIME_RATE_LIMIT_MAX set higher lifts the per-credential defaults', async (t) => {
  const { loadConfig } = await import('../lib/config.js')
  const dir = (await import('node:fs')).mkdtempSync((await import('node:path')).join((await import('node:os')).tmpdir(), 'prime-budgets-'))
  t.teardown(() => import('node:fs').then((fs) => fs.rmSync(dir, { recursive: true, force: true })))
  t.same(loadConfig({ PRIME_DATA_DIR: dir }).credentialRateLimits, { user: 1200, token: 1200, agent: 60, poller: 1200 }, 'the defaults')
  t.same(loadConfig({ PRIME_DATA_DIR: dir, PRIME_RATE_LIMIT_MAX: '5000', PRIME_AGENT_RATE_LIMIT_MAX: '90' }).credentialRateLimits, { user: 5000, token: 5000, agent: 90, poller: 5000 })
  t.throws(() => loadConfig({ PRIME_DATA_DIR: dir, PRIME_USER_RATE_LIMIT_MAX: '0' }), /PRIME_USER_RATE_LIMIT_MAX/)
})
