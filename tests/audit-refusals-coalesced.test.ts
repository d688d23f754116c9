// Pins the bound on audit growth: repeated identical refusals (same actor, operation,
// outcome, status and reason) within a window are one record written at once plus one
// record with their count when the window closes; reasons a caller can vary at will open
// at most a few windows; the count is kept in the database as it goes. And the agent
// gateway's own bounds: results only for commands awaiting one, result bytes per day.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login } from './helpers.js'
import { auditSince, lastAuditId, query, queryOne, queryValue } from './seed.js'
import { enroll, gatewayEnv, reportResults } from './fixtures/gateway.js'
import { flushRefusals, MAX_REFUSAL_REASONS } from '../lib/audit.js'

const WINDOW_MS = 300_000
const records = async (app: FastifyInstance, after: number) => auditSince(app, after) as Promise<Record<string, any>[]>
const lastId = async (app: FastifyInstance) => lastAuditId(app)
const results = (app: FastifyInstance, credential: string, payload: unknown) =>
  app.inject({ method: 'POST', url: '/prime/webui/gateway/commandresults', headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/json' }, payload: JSON.stringify(payload) })

t.test('an agent flooding invalid command results writes one record per window, with the count', async (t) => {
  const app = await build(t, gatewayEnv)
  const agent = await enroll(app)
  const before = await lastId(app)
  // A large invalid body (an unknown property), 40 times.
  const invalid = { results: [{ commandId: 1, status: 'Succeeded', junk: 'x'.repeat(200_000) }] }
  for (let i = 0; i < 40; i++) t.equal((await results(app, agent.credential, invalid)).statusCode, 400)
  let written = await records(app, before)
  t.equal(written.length, 1, 'one record for 40 identical refusals so far')
  t.equal(written[0].user_name, `agent:${agent.uuid}`)
  t.equal(written[0].outcome, 'Failed')
  t.ok(written[0].details.length <= 4096, `a refusal keeps at most 4096 characters of details (${written[0].details.length})`)
  const counter = (await queryOne(app, 'SELECT * FROM audit_refusal_counts'))!
  t.equal(counter.repeats, 39, 'the repeats are counted in the database as they come')
  t.equal(counter.first_id, written[0].id)

  t.equal(await flushRefusals(app, Date.now()), 0, 'nothing is written before the window closes')
  t.equal(await flushRefusals(app, Date.now() + WINDOW_MS), 1)
  written = await records(app, before)
  t.equal(written.length, 2, 'the count becomes one more record when the window closes')
  const summary = written[1]
  t.match(summary.description, `Repeated 39 more times within 300 s of record ${written[0].id}`)
  t.match(JSON.parse(summary.details), { count: 40, repeats: 39, firstRecordId: written[0].id, windowSeconds: 300, sourceIps: ['127.0.0.1'] })
  t.equal(summary.outcome, 'Failed')
  t.equal(summary.operation_id, 'reportCommandResults')
  t.equal(summary.user_name, `agent:${agent.uuid}`)
  t.equal(await queryValue(app, 'SELECT count(*) FROM audit_refusal_counts'), 0, 'the counter is gone')
})

t.test('results only for commands given to the agent and awaiting one; others are a 4xx, coalesced', async (t) => {
  const app = await build(t, gatewayEnv)
  const agent = await enroll(app)
  const before = await lastId(app)
  for (let i = 0; i < 25; i++) {
    const res = await reportResults(app, agent.credential, [{ commandId: 424242, status: 'Succeeded', message: 'made up' }])
    t.equal(res.statusCode, 404, 'a result for a command never given: not found')
    if (i === 0) t.same(res.json().errors, [{ location: 'body', name: 'results/0/commandId', reason: 'not-found: Command 424242 is unknown to this agent.' }])
  }
  t.equal((await records(app, before)).length, 1, 'one record for 25 refusals')
  t.equal(await queryValue(app, 'SELECT count(*) FROM agent_commands'), 0, 'nothing written')
})

t.test('refusals of different kinds are written apart; reasons varied at will open few windows', async (t) => {
  const app = await build(t, gatewayEnv)
  const admin = await login(app)
  const before = await lastId(app)
  const anon = (remoteAddress: string) => app.inject({ url: '/prime/webui/admin/all', remoteAddress })
  for (let i = 0; i < 10; i++) await anon('198.51.100.7')
  for (let i = 0; i < 10; i++) await anon('198.51.100.8')
  t.equal((await records(app, before)).length, 2, 'without a credential, each source address is an actor')

  const mark = await lastId(app)
  // An unknown property of another name each time: the reason differs each time.
  for (let i = 0; i < 30; i++) {
    const res = await call(app, admin, { method: 'POST', url: '/prime/webui/admin/adduser', payload: { userName: 'u', [`unknown${i}`]: 1 } })
    t.equal(res.statusCode, 400)
  }
  const written = await records(app, mark)
  t.equal(written.length, MAX_REFUSAL_REASONS + 1, `${MAX_REFUSAL_REASONS} reasons, then the others counted as one`)
  await flushRefusals(app, Date.now() + WINDOW_MS)
  const summary = (await records(app, mark)).at(-1)!
  t.match(JSON.parse(summary.details), { count: 30 - MAX_REFUSAL_REASONS, firstRecordId: written.at(-1)!.id })

  // After its window, a refusal is written again.
  const [first] = await records(app, before)
  await query(app, app.storage.backend === 'sqlite' ? 'DROP TRIGGER audit_trail_no_update' : 'DROP TRIGGER audit_trail_no_update ON audit_trail')
  await query(app, 'UPDATE audit_trail SET created_ms = created_ms - ? WHERE refusal_key IS NOT NULL', WINDOW_MS)
  const again = await lastId(app)
  await anon('198.51.100.7')
  const next = await records(app, again)
  t.ok(
    next.some((r) => r.description === first.description && r.request_id !== null),
    'the next window opens with a record of its own',
  )
})

t.test('command results are bounded in bytes per agent per day', async (t) => {
  const app = await build(t, { ...gatewayEnv, PRIME_AGENT_RESULT_BYTES_PER_DAY: '20000' })
  const agent = await enroll(app)
  const other = await enroll(app)
  const big = { results: [{ commandId: 1, status: 'Succeeded', message: 'x'.repeat(900) }] }
  const answers: number[] = []
  for (let i = 0; i < 25; i++) answers.push((await results(app, agent.credential, big)).statusCode)
  const firstLimited = answers.indexOf(429)
  t.ok(firstLimited > 10 && firstLimited < 25, `refused once the day's bytes are spent (request ${firstLimited + 1})`)
  t.ok(
    answers.slice(firstLimited).every((s) => s === 429),
    'and from then on',
  )
  const res = await results(app, agent.credential, big)
  t.match(res.json().detail, /at most 20000 a day/)
  const wait = Number(res.headers['retry-after'])
  t.ok(wait >= 1 && wait <= 86_400, `Retry-After until the day ends (${wait} s)`)
  t.equal((await results(app, other.credential, big)).statusCode, 404, 'another agent has its own bytes')
})
