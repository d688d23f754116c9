// Pins re-enrollment: the shared enrollment secret alone cannot move an enrolled identity.
// An enrollment naming an enrolled machine either proves the agent's current credential
// (rotated at once) or is held, with an event and a risk notification, until an
// Administrator approves it (then the new credential works and the old one stops) or
// rejects it; and the machine id an attacker would need is not shown.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { query, queryValue } from './seed.js'
import { build, login, call, userWithProfile } from './helpers.js'
import { ENROLLMENT_SECRET, checkIn, enroll, gatewayEnv, hostState, mouse } from './fixtures/gateway.js'

const MACHINE = '4C4C4544-0042-3510-8052-B4C04F4E3732'
const enrollAs = (app: FastifyInstance, extra: Record<string, unknown> = {}, remoteAddress = '203.0.113.9') =>
  app.inject({
    method: 'POST',
    url: '/prime/webui/gateway/enroll',
    remoteAddress,
    payload: { enrollmentSecret: ENROLLMENT_SECRET, machineId: MACHINE.toLowerCase(), hostIdentifier: 'IMPOSTOR', ...extra },
  })
const decide = (app: FastifyInstance, token: string, uuid: string, decision: string, reEnrollmentId: string) =>
  call(app, token, { method: 'POST', url: `/prime/webui/agents/agent/${uuid}/reenrollment`, payload: { decision, reEnrollmentId } })
/** The held request's id, as an Administrator reviewing the agent detail sees it. */
const heldId = async (app: FastifyInstance, token: string, uuid: string): Promise<string> =>
  (await call(app, token, { url: `/prime/webui/agents/agent/${uuid}` })).json().pendingReEnrollment.reEnrollmentId
const rows = (app: FastifyInstance, sql: string, ...args: unknown[]) => query(app, sql, ...args)

t.test('the secret and a known machine id alone do not take an enrolled agent over', async (t) => {
  const app = await build(t, gatewayEnv)
  const admin = await login(app)
  const real = await enroll(app, MACHINE)
  t.equal((await checkIn(app, real.credential, hostState([mouse], { operationalStatus: 'Armed' }))).statusCode, 200)

  const detail = (await call(app, admin, { url: `/prime/webui/agents/agent/${real.uuid}` })).json()
  t.equal(detail.machineId, '****3732', 'the machine id is masked in the agent view')
  t.equal(detail.pendingReEnrollment, null)
  const auditText = (await rows(app, 'SELECT details FROM audit_trail')).map((r) => r.details).join('\n')
  t.notOk(auditText.toLowerCase().includes(MACHINE.toLowerCase()), 'nor is it written whole in the audit trail')

  const res = await enrollAs(app)
  t.equal(res.statusCode, 202, res.body)
  const held = res.json()
  t.match(held, { uuid: real.uuid, reEnrolled: true, pendingApproval: true, credential: /^pag_/ })

  t.equal((await checkIn(app, real.credential, hostState([mouse], { operationalStatus: 'Armed' }))).statusCode, 200, 'the real agent keeps working')
  const impostor = await checkIn(app, held.credential, hostState([], { operationalStatus: 'Free' }))
  t.equal(impostor.statusCode, 401, 'the held credential does not work')
  t.match(impostor.json().detail, /awaits an Administrator's approval/)
  t.equal(await queryValue(app, 'SELECT operational_status FROM agents WHERE uuid = ?', real.uuid), 'Armed', 'nobody reported Free in its name')

  const [event] = await rows(app, `SELECT * FROM events WHERE event_code = '0x310006'`)
  t.match(event, { asset_key: real.uuid, category: 'Host', severity: 3, description: 'Agent re-enrollment held for approval' })
  t.match(event.details, /did not present the agent's current credential/)
  t.match(event.details, '203.0.113.9')
  // From the table itself: on PostgreSQL risk notifications are raised behind the writes, caught up first as every read of them does.
  await app.storage.riskFeed?.catchUp()
  const [risk] = await rows(app, `SELECT * FROM risk_notifications WHERE kind = 'AgentReEnrollmentHeld'`)
  t.match(risk, { agent_uuid: real.uuid, severity: 3 }, 'a risk notification')
  const listed = await call(app, admin, { url: '/prime/webui/systemNotification/riskNotifications?kind=AgentReEnrollmentHeld' })
  t.equal(listed.statusCode, 200, listed.body)
  t.ok(JSON.stringify(listed.json()).includes(real.uuid), 'listed among the risk notifications, by its kind')
  const record = (await rows(app, `SELECT * FROM audit_trail WHERE operation_id = 'enrollAgent' ORDER BY id DESC LIMIT 1`))[0]
  t.match(record.description, /held for an Administrator's approval/)
  t.equal(record.asset_key, real.uuid)

  const shown = (await call(app, admin, { url: `/prime/webui/agents/agent/${real.uuid}` })).json()
  t.match(shown.pendingReEnrollment, { hostIdentifier: 'IMPOSTOR', sourceIp: '203.0.113.9' })

  const wrongProof = await enrollAs(app, { currentCredential: 'pag_' + 'C'.repeat(43) })
  t.equal(wrongProof.statusCode, 202, 'a credential that is not the current one proves nothing')
  t.match((await rows(app, `SELECT details FROM events WHERE event_code = '0x310006' ORDER BY id DESC LIMIT 1`))[0].details, /presented a credential that is not the agent's current one/)
  t.equal((await rows(app, 'SELECT * FROM agent_reenrollments')).length, 1, 'one held per agent: the latest replaces the one before')
  t.equal((await checkIn(app, held.credential, hostState([]))).statusCode, 401, 'the replaced one is gone')
})

t.test('an Administrator approves a held re-enrollment: the new credential works, the old one stops', async (t) => {
  const app = await build(t, gatewayEnv)
  const admin = await login(app)
  const manager = await userWithProfile(app, admin, 'mona', 20)
  const real = await enroll(app, MACHINE)
  await checkIn(app, real.credential, hostState([mouse]))
  // A reinstalled agent lost its credential.
  const reinstalled = (await enrollAs(app, { hostIdentifier: 'DESKTOP-9LR722S' })).json()

  const id = await heldId(app, admin, real.uuid)
  t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'the held request has an id')
  t.equal((await decide(app, manager, real.uuid, 'Approve', id)).statusCode, 403, 'a Manager may not decide')
  t.equal((await decide(app, admin, real.uuid, 'Maybe', id)).statusCode, 400)
  t.equal((await decide(app, admin, '00000000-0000-4000-8000-000000000000', 'Approve', id)).statusCode, 404)
  const res = await decide(app, admin, real.uuid, 'Approve', id)
  t.equal(res.statusCode, 200, res.body)
  t.match(res.json(), { uuid: real.uuid, decision: 'Approve', reEnrollmentId: id, hostIdentifier: 'DESKTOP-9LR722S', sourceIp: '203.0.113.9' })

  t.equal((await checkIn(app, reinstalled.credential, hostState([mouse]))).statusCode, 200, 'the approved credential works')
  t.equal((await checkIn(app, real.credential, hostState([mouse]))).statusCode, 401, 'the old one stops')
  const record = (await rows(app, `SELECT * FROM audit_trail WHERE operation_id = 'decideAgentReEnrollment' ORDER BY id DESC LIMIT 1`))[0]
  t.match(record, { user_name: 'admin', outcome: 'Succeeded', asset_key: real.uuid })
  t.match(record.description, /Approved the re-enrollment/)
  t.equal((await rows(app, 'SELECT * FROM agent_reenrollments')).length, 0)
  t.equal((await decide(app, admin, real.uuid, 'Approve', id)).statusCode, 404, 'nothing is held any more')
})

t.test('a rejected re-enrollment is dropped; the agent keeps its credential', async (t) => {
  const app = await build(t, gatewayEnv)
  const admin = await login(app)
  const real = await enroll(app, MACHINE)
  const held = (await enrollAs(app)).json()
  const res = await decide(app, admin, real.uuid, 'Reject', await heldId(app, admin, real.uuid))
  t.equal(res.statusCode, 200, res.body)
  const refused = await checkIn(app, held.credential, hostState([]))
  t.equal(refused.statusCode, 401)
  t.notMatch(refused.json().detail, /approval/, 'no longer awaiting anything')
  t.equal((await checkIn(app, real.credential, hostState([mouse]))).statusCode, 200)
  t.equal((await call(app, admin, { url: `/prime/webui/agents/agent/${real.uuid}` })).json().pendingReEnrollment, null)
})

t.test('the agent proving its current credential is rotated at once', async (t) => {
  const app = await build(t, gatewayEnv)
  const real = await enroll(app, MACHINE)
  const again = await enrollAs(app, { currentCredential: real.credential })
  t.equal(again.statusCode, 200, again.body)
  t.match(again.json(), { uuid: real.uuid, reEnrolled: true, pendingApproval: false })
  t.equal((await checkIn(app, again.json().credential, hostState([]))).statusCode, 200)
  t.equal((await checkIn(app, real.credential, hostState([]))).statusCode, 401)
  t.equal((await rows(app, `SELECT * FROM events WHERE event_code = '0x310006'`)).length, 0, 'no alarm for the agent itself')
  const record = (await rows(app, `SELECT details FROM audit_trail WHERE operation_id = 'enrollAgent' ORDER BY id DESC LIMIT 1`))[0]
  t.notOk(record.details.includes(real.credential), 'the credential presented is not recorded')
})

t.test('a decision is tied to the held request reviewed: a replacement meanwhile is not approved in its place', async (t) => {
  const app = await build(t, gatewayEnv)
  const admin = await login(app)
  const real = await enroll(app, MACHINE)
  const reviewed = (await enrollAs(app, { hostIdentifier: 'SEC2-HOST' })).json()
  const detail = (await call(app, admin, { url: `/prime/webui/agents/agent/${real.uuid}` })).json()
  t.match(detail.pendingReEnrollment, { hostIdentifier: 'SEC2-HOST', reEnrollmentId: String })
  const reviewedId = detail.pendingReEnrollment.reEnrollmentId as string
  const heldAudit = (await rows(app, `SELECT details FROM audit_trail WHERE operation_id = 'enrollAgent' ORDER BY id DESC LIMIT 1`))[0]
  t.equal(JSON.parse(heldAudit.details).reEnrollmentId, reviewedId, 'the audit record of the hold names the id')

  // While the Administrator looks, another enrollment of the machine replaces the held one.
  const attacker = (await enrollAs(app, { hostIdentifier: 'ATTACKER' }, '198.51.100.66')).json()
  const replacedId = await heldId(app, admin, real.uuid)
  t.not(replacedId, reviewedId, 'the replacement has an id of its own')

  const before = await rows(app, 'SELECT * FROM agent_reenrollments')
  const refused = await decide(app, admin, real.uuid, 'Approve', reviewedId)
  t.equal(refused.statusCode, 409, refused.body)
  t.match(refused.json(), { type: 'urn:prime:problem:reenrollment-replaced', code: 'reenrollment-replaced', status: 409 })
  t.match(refused.json().detail, /no longer the one held: a later enrollment \(reported host name "ATTACKER", from 198\.51\.100\.66/)
  t.same(await rows(app, 'SELECT * FROM agent_reenrollments'), before, 'nothing decided: the replacement is still held, as it was')
  t.equal((await checkIn(app, attacker.credential, hostState([]))).statusCode, 401, "the attacker's credential was not approved")
  t.equal((await checkIn(app, reviewed.credential, hostState([]))).statusCode, 401, 'the reviewed one was replaced')
  t.equal((await checkIn(app, real.credential, hostState([mouse]))).statusCode, 200, 'the agent keeps its credential')
  const record = (await rows(app, `SELECT * FROM audit_trail WHERE operation_id = 'decideAgentReEnrollment' ORDER BY id DESC LIMIT 1`))[0]
  t.equal(record.outcome, 'Failed', 'the refused decision is audited as failed')

  const missing = await call(app, admin, { method: 'POST', url: `/prime/webui/agents/agent/${real.uuid}/reenrollment`, payload: { decision: 'Approve' } })
  t.equal(missing.statusCode, 400, 'a decision names the request it decides')
  t.match(missing.body, /reEnrollmentId/)

  // Reviewed again, the replacement is rejected; two decisions at once: one wins, the other finds nothing.
  const [a, b] = await Promise.all([decide(app, admin, real.uuid, 'Reject', replacedId), decide(app, admin, real.uuid, 'Approve', replacedId)])
  t.same([a.statusCode, b.statusCode].sort(), [200, 404], 'single use, race-free')
  // Which one wins is the order they reach the database in (one at a time on SQLite, a pool on PostgreSQL).
  const rejected = a.statusCode === 200
  t.equal((await checkIn(app, attacker.credential, hostState([]))).statusCode, rejected ? 401 : 200, rejected ? 'rejected' : 'approved')
  t.equal((await checkIn(app, real.credential, hostState([mouse]))).statusCode, rejected ? 200 : 401)
})
