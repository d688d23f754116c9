// Pins the limits declared per operation in the contract (`x-rate-limit`, `x-gateway-limit`):
// they are read from it at start, and the code names no operation to apply them.
import fs from 'node:fs'
import t from 'tap'
import { loadSpec, operations } from '../lib/contract.js'
import { build } from './helpers.js'

t.test('the contract declares which operations have which limits', async (t) => {
  const ops = [...operations(loadSpec()).values()]
  t.same(
    ops
      .filter((o) => o.rateLimit === 'login')
      .map((o) => o.operationId)
      .sort(),
    ['localLogin', 'pollerRegister', 'signIn'],
  )
  t.same(Object.fromEntries(ops.filter((o) => o.gatewayLimit).map((o) => [o.operationId, o.gatewayLimit])), {
    enrollAgent: 'enrollment',
    agentCheckIn: 'check-in',
    reportCommandResults: 'result-bytes',
  })
})

t.test('an unknown limit is refused at start', async (t) => {
  const spec = loadSpec()
  spec.paths['/prime/webui/Auth/LocalLogin'].post['x-rate-limit'] = 'logins'
  t.throws(() => operations(spec), /localLogin: x-rate-limit must be one of login, not logins/)
  const other = loadSpec()
  other.paths['/prime/webui/gateway/checkin'].post['x-gateway-limit'] = 'checkin'
  t.throws(() => operations(other), /agentCheckIn: x-gateway-limit must be one of enrollment, check-in, result-bytes/)
})

t.test('the login limit follows the contract, not a list in the code', async (t) => {
  const failures = async (spec?: Record<string, any>) => {
    const app = await build(t, { PRIME_LOGIN_RATE_LIMIT_MAX: '3' }, spec)
    const statuses: number[] = []
    for (let i = 0; i < 5; i++) {
      const res = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: `nobody${i}`, password: 'wrong-password-1' } })
      statuses.push(res.statusCode)
    }
    return statuses
  }
  t.same(await failures(), [400, 400, 400, 429, 429], 'limited as the contract declares')
  const spec = loadSpec()
  delete spec.paths['/prime/webui/Auth/LocalLogin'].post['x-rate-limit']
  t.same(await failures(spec), [400, 400, 400, 400, 400], 'without the extension, not limited')
})

t.test('lib/app.ts, the request pipeline and the gateway name no operation to limit', async (t) => {
  const gateway = fs.readdirSync(new URL('../lib/gateway/', import.meta.url)).map((f) => `lib/gateway/${f}`)
  t.ok(gateway.includes('lib/gateway/limits.ts'))
  // The hooks that apply the limits live in lib/platform/ (admission.ts, answer.ts, request-log.ts).
  const platform = fs.readdirSync(new URL('../lib/platform/', import.meta.url)).map((f) => `lib/platform/${f}`)
  t.ok(platform.includes('lib/platform/admission.ts'))
  for (const file of ['lib/app.ts', ...platform, ...gateway]) {
    const source = fs.readFileSync(new URL(`../${file}`, import.meta.url), 'utf8')
    t.notMatch(source, /'(localLogin|signIn|pollerRegister|enrollAgent|agentCheckIn|reportCommandResults)'/, file)
  }
})
