// The attack run's core (scripts/attack-core.ts, driven by `npm run attack`) against an
// app.inject() server on a few operations: so that it keeps working as the contract grows,
// and so that it does find what it looks for (a 5xx, an undeclared status or media type, a
// body unlike the contract's, an alarm target's answer read back).
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { attack, contractJudge, summarize, type Sender } from '../scripts/attack-core.js'
import { build, call, login, userWithProfile } from './helpers.js'
import { ALARM_PATH, alarmEnv } from './fixtures/receivers.js'

const injectSender =
  (app: FastifyInstance): Sender =>
  async (req) => {
    const res = await app.inject({ method: req.method as any, url: req.url, headers: req.headers, payload: req.body })
    return { status: res.statusCode, contentType: String(res.headers['content-type'] ?? ''), body: res.body }
  }

const FEW = new Set(['getAlarmDests', 'testAlarmDests', 'removeAlarmDest', 'getUserDetails', 'agentCheckIn'])

t.test('a run over a few operations: every credential kind, no 5xx, nothing read back', async (t) => {
  const app = await build(t, { ...alarmEnv, PRIME_AGENT_ENROLLMENT_SECRET: 'attack-test-enrollment-0123', PRIME_AGENT_MIN_CHECKIN_SECONDS: '0' })
  const admin = await login(app)
  const enrolled = await call(app, undefined, {
    method: 'POST',
    url: '/prime/webui/gateway/enroll',
    payload: { enrollmentSecret: 'attack-test-enrollment-0123', machineId: 'attack-machine-1', hostIdentifier: 'HOST-1' },
  })
  t.equal(enrolled.statusCode, 200, enrolled.body)
  const token = await call(app, admin, { method: 'POST', url: '/prime/webui/admin/integrationTokens', payload: { name: 'siem', userProfile: 10 } })
  const credentials = {
    garbage: 'x',
    administrator: admin,
    manager: await userWithProfile(app, admin, 'manager', 20),
    user: await userWithProfile(app, admin, 'reader', 10),
    integration: token.json().token,
    agent: enrolled.json().credential,
  }
  const dest = await call(app, admin, {
    method: 'POST',
    url: `${ALARM_PATH}/AddOrUpdateAlarmDest`,
    payload: { name: 'hook', type: 'webhook', webhook: { url: 'http://127.0.0.1:9/', secret: 'attack-test-secret-0123' } },
  })
  t.equal(dest.statusCode, 200)

  const seen = new Set<string>()
  const send = injectSender(app)
  const result = await attack(
    app.contract.spec,
    async (req) => {
      seen.add(req.headers.authorization ?? 'none')
      return send(req)
    },
    credentials,
    { only: (op) => FEW.has(op.operationId), marker: 'NEVER-ANSWERED-MARKER', concurrency: 2, longUrl: 2000, longHeader: 2000 },
  )

  t.equal(result.operations.length, FEW.size, 'each chosen operation attacked')
  t.ok(result.requests > FEW.size * 20, `${result.requests} requests`)
  t.ok(seen.size >= 7, 'sent with every credential kind, a garbage one and none')
  for (const o of result.operations) t.ok(o.requests > 10 && Object.keys(o.statuses).length > 1, `${o.operationId}: ${JSON.stringify(o.statuses)}`)
  t.same(
    result.findings.filter((f) => f.kind === '5xx' || f.kind === 'read-back' || f.kind === 'transport-error'),
    [],
    'no 5xx, no read-back',
  )
  // A trailing slash and a method the path does not serve are answered 405, which these
  // operations do not declare today: routing's own matter (the attack run reports it).
  t.same(summarize(result.findings.filter((f) => !/^(trailing slash|wrong method) /.test(f.label))), [], 'every other answer as the contract declares it')
})

t.test('the judge finds what it looks for', async (t) => {
  const app = await build(t)
  const { spec } = app.contract
  const judge = contractJudge(spec)
  const op = app.contract.operations.get('getAlarmDests')!
  t.equal(judge(op, { status: 200, contentType: 'application/json', body: JSON.stringify({ recordsTotal: 0, recordsFiltered: 0, data: [] }) }), null, 'a declared answer')
  t.match(judge(op, { status: 500, contentType: 'application/problem+json', body: '{}' }), { kind: '5xx' })
  t.match(judge(op, { status: 418, contentType: 'application/json', body: '{}' }), { kind: 'undeclared-status' })
  t.match(judge(op, { status: 200, contentType: 'text/html', body: '<p>' }), { kind: 'undeclared-media-type' })
  t.match(judge(op, { status: 200, contentType: 'application/json', body: '{"data":1}' }), { kind: 'body-not-as-declared' })
  t.match(judge(op, { status: 200, contentType: 'application/json', body: '{' }), { kind: 'body-not-as-declared' })

  const marker = 'TARGET-ANSWER-MARKER'
  const result = await attack(
    spec,
    async () => ({ status: 200, contentType: 'application/json', body: JSON.stringify({ recordsTotal: 0, recordsFiltered: 0, data: [], note: marker }) }),
    { administrator: 'x' },
    { only: (o) => o.operationId === 'getAlarmDests', marker },
  )
  t.ok(
    result.findings.some((f) => f.kind === 'read-back'),
    'an answer carrying the marker is a read-back',
  )
  const broken = await attack(
    spec,
    async () => {
      throw new Error('connection reset')
    },
    { administrator: 'x' },
    { only: (o) => o.operationId === 'getAlarmDests' },
  )
  t.ok(broken.findings.length > 0 && broken.findings.every((f) => f.kind === 'transport-error'), 'a request without an answer is a finding')
})
