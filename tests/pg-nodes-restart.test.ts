// PostgreSQL itself restarted under load, twice (`pg_ctl restart -m fast`, then `-m immediate`,
// a crash and its recovery), on a private cluster (tests/fixtures/pg-cluster.ts: the shared
// test server is never restarted). Two nodes take agents' enrolments and check-ins
// throughout: no node exits, each answers /readyz 200 again and takes writes by itself,
// without a restart of its own, and every write answered 2xx is in the database afterwards
// (an enrolment's agent, a check-in's attack-tool event). The times to recover are printed.
import t from 'tap'
import { connectPostgres } from '../db/postgres/index.js'
import { eventCodes } from '../lib/event-codes.js'
import { attackTool, hostState, mouse } from './fixtures/gateway.js'
import { allReady, enrollAt, readyz, request, SHARED_SECRETS, startNodes, type Answer, type Node } from './fixtures/nodes.js'
import { noPrivateCluster, startCluster } from './fixtures/pg-cluster.js'
import { until } from './fixtures/processes.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const takesWrite = (node: Node) =>
  enrollAt(node).then(
    () => true,
    () => false,
  )
/** A node's logged errors, the last few: why it stopped. */
const errorLines = (node: Node) =>
  node
    .output()
    .split('\n')
    .filter((l) => /"level":(50|60)/.test(l))
    .slice(-3)
    .map((l) => l.slice(0, 1500))
    .join('\n')
/** Writes answered 2xx between restarts, so that each restart falls in the middle of the load. */
const WRITES_BETWEEN = 20

t.test('PostgreSQL restarted under writes through two nodes: both recover by themselves, nothing accepted is lost', { skip: noPrivateCluster() }, async (t) => {
  const cluster = await startCluster(t)
  const nodes = await startNodes(t, cluster.url, 2, {
    PRIME_AGENT_MIN_CHECKIN_SECONDS: '0',
    PRIME_RATE_LIMIT_MAX: '1000000',
    // The client's pool reuses idle connections: a node closing one (after its keep-alive
    // time, on a busy machine) just as a request goes out on it would reset that request.
    PRIME_KEEP_ALIVE_TIMEOUT_SECONDS: '600',
  })
  await allReady(nodes, 60_000)

  const enrolled: string[] = []
  const checkedIn: string[] = []
  const statuses = new Map<string, number>()
  const count = (key: string) => statuses.set(key, (statuses.get(key) ?? 0) + 1)
  let stop = false
  // Also when the test fails early: the writers end.
  t.teardown(() => {
    stop = true
  })
  /** A call's answer, counted by its status; undefined (counted too) when the node did not answer. */
  const call = async (what: string, node: Node, url: string, opts: Parameters<typeof request>[3]): Promise<Answer | undefined> => {
    try {
      const res = await request(node, 'POST', url, { ...opts, timeoutMs: 60_000 })
      count(`${what} ${res.status}`)
      return res
    } catch (err) {
      count(`${what} error ${(err as Error).message.slice(0, 60)}`)
      return undefined
    }
  }
  // Two writers a node: an agent enrolled, then checked in with an attack tool plugged in.
  const writer = async (node: Node, w: number) => {
    for (let i = 0; !stop; i++) {
      const host = `HOST-${node.name}-${w}-${i}`
      const body = { enrollmentSecret: SHARED_SECRETS.PRIME_AGENT_ENROLLMENT_SECRET, machineId: `machine-${host}`, hostIdentifier: host }
      const enroll = await call('enroll', node, '/prime/webui/gateway/enroll', { body })
      if (enroll?.status !== 200) {
        await sleep(50)
        continue
      }
      const agent = enroll.json()
      enrolled.push(agent.uuid)
      const res = await call('checkin', node, '/prime/webui/gateway/checkin', { token: agent.credential, body: hostState([mouse, attackTool], { hostIdentifier: host }) })
      if (res?.status === 200) checkedIn.push(agent.uuid)
    }
  }
  // /readyz of each node, every 100 ms, as a balancer would probe: the changes seen.
  const probes = new Map<string, number[]>(nodes.map((n) => [n.name, []]))
  const probing = (async () => {
    while (!stop) {
      for (const n of nodes) {
        const seen = probes.get(n.name)!
        const s = await readyz(n)
        if (seen.at(-1) !== s) seen.push(s)
      }
      await sleep(100)
    }
  })()
  const writing = Promise.all([...nodes.flatMap((n) => [writer(n, 0), writer(n, 1)]), probing])
  // Reported where it is awaited, once the restarts are done.
  writing.catch(() => {})

  const recovered: string[] = []
  for (const mode of ['fast', 'immediate'] as const) {
    const before = enrolled.length
    await until(() => enrolled.length >= before + WRITES_BETWEEN, `${WRITES_BETWEEN} enrolments before the ${mode} restart`, 120_000)
    const began = Date.now()
    const restartMs = await cluster.restart(mode)
    // Back: every node ready and taking a write of its own, whatever the writers do meanwhile.
    const back = await Promise.all(
      nodes.map(async (n) => {
        await allReady([n], 60_000)
        const ready = Date.now() - began
        let wrote: number | undefined
        for (let tries = 0; wrote === undefined && tries < 600; tries++) {
          if (await takesWrite(n)) wrote = Date.now() - began
          else await sleep(100)
        }
        t.ok(wrote !== undefined, `${mode}: node ${n.name} takes writes again`)
        return `node ${n.name} ready at ${ready} ms, took a write at ${wrote} ms`
      }),
    )
    recovered.push(`${mode}: pg_ctl restart took ${restartMs} ms; from its start, ${back.join(', ')}`)
  }
  const before = enrolled.length
  await until(() => enrolled.length >= before + WRITES_BETWEEN, `${WRITES_BETWEEN} enrolments after the restarts`, 120_000)
  stop = true
  await writing
  for (const line of recovered) t.comment(line)
  t.comment(`answers: ${JSON.stringify(Object.fromEntries(statuses))}; /readyz seen: ${JSON.stringify(Object.fromEntries(probes))}`)

  for (const n of nodes) {
    t.equal(n.child.exitCode, null, `node ${n.name} still runs, never restarted`)
    if (n.child.exitCode !== null) t.comment(errorLines(n))
  }
  await allReady(nodes, 30_000)
  for (const [name, seen] of probes)
    t.ok(
      seen.every((s) => s === 200 || s === 503),
      `node ${name}: /readyz answered 200 or 503 only (${seen})`,
    )
  t.same(
    [...statuses.keys()].filter((k) => / error /.test(k) || (/ 5\d\d$/.test(k) && !k.endsWith(' 503'))),
    [],
    'every write was answered, none with a 5xx other than 503',
  )
  // The limits are lifted here: a 429 would be the 503s counted as failed enrollments.
  t.same(
    [...statuses.keys()].filter((k) => k.endsWith(' 429')),
    [],
    'no enrollment refused as over a limit after the 503s',
  )

  const db = connectPostgres(cluster.url, { max: 1, applicationName: 'prime-test-checker' })
  t.teardown(() => db.close())
  const agents = await db.query<{ uuid: string }>('SELECT uuid FROM agents WHERE uuid = ANY($1::text[])', [enrolled])
  t.equal(agents.length, enrolled.length, `every enrolment answered 200 is stored (${enrolled.length})`)
  const events = await db.query<{ asset_key: string }>('SELECT DISTINCT asset_key FROM events WHERE event_code = $1 AND asset_key = ANY($2::text[])', [eventCodes.attackTool.code, checkedIn])
  t.equal(events.length, checkedIn.length, `every check-in answered 200 has its attack-tool event stored (${checkedIn.length})`)
})
