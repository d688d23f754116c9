// The integration feeds followed across three nodes while every node writes: agents enrol
// and check in through each node (events and audit records), admins log in on each (audit
// records), and every PostgreSQL unit of work waits a random time before its COMMIT
// (PRIME_FAULT_COMMIT_DELAY_MS), so that transactions of different nodes finish in a
// shuffled order. A poller asks each page of a different node, round robin, from the last
// id it received plus one: it receives every event and every audit record exactly once, in
// id order, none passed over. The feed locks (db/postgres/events-write.ts) make this hold:
// with both taken out of the INSERTs by hand (the rest unchanged), this test fails: in one
// run 130 of 480 events and 1 of 458 audit records were passed over (committed late, below
// the position the poller had reached).
import t from 'tap'
import { connectPostgres } from '../db/postgres/index.js'
import { hostState, mouse, stick } from './fixtures/gateway.js'
import { allReady, enrollAt, loginAt, request, startNodes, type Node } from './fixtures/nodes.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const NODES = 3
const WRITERS_PER_NODE = 4
/** Calls of each writer: an enrolment every fourth, a login every fifth, check-ins between. */
const CALLS = 40
const COMMIT_DELAY_MS = 40
/** Small pages, so that the poller passes through the writes while they happen. */
const PAGE_SIZE = 20

interface Feed {
  name: string
  url: string
  from: string
  id: (r: Record<string, number>) => number
  table: string
}
const FEEDS: Feed[] = [
  { name: 'events', url: '/prime/webui/Events/GetEventsIntegration', from: 'FromEventId', id: (r) => r.eventID, table: 'events' },
  { name: 'audit', url: '/prime/webui/Events/GetAuditsIntegration', from: 'FromAuditTrailId', id: (r) => r.auditTrailID, table: 'audit_trail' },
]

t.test('feeds polled across three nodes under shuffled commits: every record once, in id order', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const settings = {
    PRIME_FAULT_COMMIT_DELAY_MS: String(COMMIT_DELAY_MS),
    PRIME_AGENT_MIN_CHECKIN_SECONDS: '0',
    PRIME_RATE_LIMIT_MAX: '1000000',
    PRIME_LOGIN_RATE_LIMIT_MAX: '100000',
    // A login counts as a failure until its password is checked, so that parallel guesses
    // cannot outrun the lockout: a dozen parallel logins of one name would lock it here.
    PRIME_LOCKOUT_THRESHOLD: '1000',
    // The client's pool reuses idle connections: a node closing one (after its keep-alive
    // time, on a busy machine) just as a request goes out on it would reset that request.
    PRIME_KEEP_ALIVE_TIMEOUT_SECONDS: '600',
  }
  const nodes = await startNodes(t, url, NODES, settings)
  await allReady(nodes, 60_000)
  const token = await loginAt(nodes[0])
  const db = connectPostgres(url, { max: 1, applicationName: 'prime-test-reader' })
  t.teardown(() => db.close())

  const answers = new Map<string, number>()
  const count = (key: string) => answers.set(key, (answers.get(key) ?? 0) + 1)
  const writer = async (node: Node, w: number) => {
    let agent = { uuid: '', credential: '' }
    for (let i = 0; i < CALLS; i++) {
      const host = `HOST-${node.name}-${w}-${Math.floor(i / 4)}`
      if (i % 4 === 0) {
        agent = await enrollAt(node, `machine-${host}`, host)
        count('enroll 200')
      } else if (i % 5 === 0) {
        await loginAt(node)
        count('login 200')
      } else {
        // A stick plugged in and out: an event at each check-in.
        const res = await request(node, 'POST', '/prime/webui/gateway/checkin', {
          token: agent.credential,
          body: hostState(i % 2 ? [mouse, stick] : [mouse], { hostIdentifier: host }),
          timeoutMs: 30_000,
        })
        count(`checkin ${res.status}`)
      }
    }
  }

  // Set once the writers are done and the database's ids then are read: after that, an
  // empty page means the feed is drained.
  let committed: Record<string, number[]> | undefined
  const follow = async (feed: Feed) => {
    const received: number[] = []
    const servedBy = new Map<string, number>()
    let next = 0
    for (let polls = 0; ; polls++) {
      const drained = committed !== undefined
      const node = nodes[polls % nodes.length]
      const res = await request(node, 'GET', `${feed.url}?${feed.from}=${next}&PageSize=${PAGE_SIZE}`, { token, timeoutMs: 30_000 })
      if (res.status !== 200) throw new Error(`${feed.name} poll on node ${node.name}: ${res.status} ${res.text}`)
      const ids: number[] = res.json().data.map(feed.id)
      // Newest first: walked in reverse, oldest first.
      received.push(...ids.reverse())
      if (ids.length) {
        next = ids[ids.length - 1] + 1
        servedBy.set(node.name, (servedBy.get(node.name) ?? 0) + ids.length)
      } else if (drained) return { received, polls, servedBy }
      else await sleep(20)
    }
  }

  const started = Date.now()
  const following = Promise.all(FEEDS.map(follow))
  // Its failure is reported where it is awaited, after the writers.
  following.catch(() => {})
  await Promise.all(nodes.flatMap((n) => Array.from({ length: WRITERS_PER_NODE }, (_, w) => writer(n, w))))
  const writeMs = Date.now() - started
  committed = {}
  for (const feed of FEEDS) committed[feed.name] = (await db.query<{ id: number }>(`SELECT id FROM ${feed.table} ORDER BY id`)).map((r) => r.id)
  const followed = await following
  t.comment(`answers: ${JSON.stringify(Object.fromEntries(answers))}; writes took ${writeMs} ms`)
  t.same(
    [...answers.keys()].filter((k) => !k.endsWith(' 200')),
    [],
    'every write answered 200',
  )

  for (const [i, feed] of FEEDS.entries()) {
    const { received, polls, servedBy } = followed[i]
    const before = committed[feed.name]
    const got = new Set(received)
    const stored = (await db.query<{ id: number }>(`SELECT id FROM ${feed.table} WHERE id <= $1 ORDER BY id`, [received.at(-1) ?? 0])).map((r) => r.id)
    t.comment(`${feed.name}: ${received.length} received in ${polls} polls; records served per node ${JSON.stringify(Object.fromEntries(servedBy))}`)
    t.equal(servedBy.size, NODES, `${feed.name}: every node served part of the feed`)
    t.ok(
      received.every((id, k) => k === 0 || id > received[k - 1]),
      `${feed.name}: received in increasing id order, none twice`,
    )
    t.same(received, stored, `${feed.name}: exactly the stored records up to the last one received, none passed over`)
    t.same(
      before.filter((id) => !got.has(id)),
      [],
      `${feed.name}: every record committed while the writers ran was received (${before.length})`,
    )
  }
  t.ok(committed.events.length >= NODES * WRITERS_PER_NODE * CALLS * 0.5, `${committed.events.length} events written`)
  t.ok(committed.audit.length >= NODES * WRITERS_PER_NODE * (CALLS / 4), `${committed.audit.length} audit records written`)
})
