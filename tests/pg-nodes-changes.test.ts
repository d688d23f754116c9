// Changes made on one node seen on another, with real processes on one PostgreSQL database:
// a session logged out, or revoked by a password change, on node A is refused by node B at
// its very next request (bearer checks read the database at each request; nothing of a
// session is kept in a node's memory); a notification stream on A receives what B wrote
// (each node's hub looks at the shared change counter every 250 ms).
import t from 'tap'
import { attackTool, hostState, mouse } from './fixtures/gateway.js'
import { allReady, enrollAt, loginAt, request, startNodes, Stream, type Node } from './fixtures/nodes.js'
import { USER_PASSWORD } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const ME = '/prime/webui/admin/getuserdetails'
const status = async (node: Node, token: string) => (await request(node, 'GET', ME, { token })).status

t.test('changes on one node, seen on another', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const [a, b] = await startNodes(t, url, 2, { PRIME_AGENT_MIN_CHECKIN_SECONDS: '0' })
  await allReady([a, b])
  const admin = await loginAt(a)

  t.test('a session revoked on A is refused on B at its next request', async (t) => {
    const added = await request(a, 'POST', '/prime/webui/admin/adduser', { token: admin, body: { userName: 'carol', email: 'carol@example.com', userProfile: 10, password: USER_PASSWORD } })
    t.equal(added.status, 200, 'account added on A')

    // Logout on A.
    const session = await loginAt(a, 'carol', USER_PASSWORD)
    t.equal(await status(b, session), 200, 'B accepts the session')
    const out = await request(a, 'POST', '/prime/webui/auth/logout', { token: session })
    t.equal(out.status, 200, 'logged out on A')
    const refusedAfter = Date.now()
    t.equal(await status(b, session), 401, 'B refuses it at the next request')
    t.ok(Date.now() - refusedAfter < 1000, 'answered at once')

    // Password change on A: every token of the account, on B too.
    const first = await loginAt(b, 'carol', USER_PASSWORD)
    const second = await loginAt(a, 'carol', USER_PASSWORD)
    t.equal(await status(b, first), 200)
    const change = await request(a, 'POST', '/prime/webui/admin/updateuserdetails', { token: second, body: { currentPassword: USER_PASSWORD, newPassword: 'A-new-passphrase-2' } })
    t.equal(change.status, 200, 'password changed on A')
    t.equal(await status(b, first), 401, "B refuses the account's session opened on B")
    t.equal(await status(b, second), 401, 'and the one opened on A')
    t.equal((await request(b, 'POST', '/prime/webui/Auth/LocalLogin', { body: { username: 'carol', password: USER_PASSWORD } })).status, 400, 'B refuses the old password')
    t.ok(await loginAt(b, 'carol', 'A-new-passphrase-2'), 'B takes the new one')

    // Disabled on A.
    const third = await loginAt(b, 'carol', 'A-new-passphrase-2')
    const disabled = await request(a, 'POST', '/prime/webui/admin/updateuser', { token: admin, body: { userName: 'carol', isActive: false } })
    t.equal(disabled.status, 200, 'account disabled on A')
    t.equal(await status(b, third), 401, 'B refuses the disabled account at once')
  })

  t.test('a notification stream on A receives what B wrote', async (t) => {
    const stream = await Stream.open(a, admin)
    t.teardown(() => stream.close())
    t.equal(stream.status, 200)
    await stream.next((e) => e.event === 'counts')

    // An attack tool reported through B: the risk notification B writes reaches A's stream.
    const agent = await enrollAt(b)
    const from = stream.events.length
    const sent = Date.now()
    const checkIn = await request(b, 'POST', '/prime/webui/gateway/checkin', { token: agent.credential, body: hostState([mouse, attackTool], { hostIdentifier: 'NODES-HOST' }) })
    t.equal(checkIn.status, 200, 'checked in on B')
    const risk = await stream.next((e) => e.event === 'riskNotification', from, 3000)
    const lagMs = risk.at - sent
    t.match(risk.data, { kind: 'KnownAttackTool', agentUuid: agent.uuid, isPinned: false })
    t.ok(lagMs < 1000, `on A ${lagMs} ms after B was asked (A looks every 250 ms)`)
    t.match((await stream.next((e) => e.event === 'counts' && e.data.riskUnread === 1, from)).data, { riskTotal: 1 }, 'with fresh counts')

    // Pinned through B: A's stream shows it.
    const mark = stream.events.length
    const pin = await request(b, 'POST', '/prime/webui/systemNotification/riskNotifications/pin', { token: admin, body: { id: risk.data.id, pinned: true } })
    t.equal(pin.status, 200, 'pinned on B')
    t.match((await stream.next((e) => e.event === 'riskNotification', mark, 3000)).data, { id: risk.data.id, isPinned: true, pinnedBy: 'admin' })

    // Its session logged out on B: A's stream of it ends, at the latest at its next revalidation (5 s).
    const loggedOut = Date.now()
    t.equal((await request(b, 'POST', '/prime/webui/auth/logout', { token: admin })).status, 200, 'logged out on B')
    for (let end = Date.now() + 7000; !stream.ended && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20))
    const endedMs = Date.now() - loggedOut
    t.ok(stream.ended, `A's stream ended ${endedMs} ms after the logout on B`)
    t.ok(endedMs <= 5500, 'within the revalidation period')
  })
})
