// Every connection of two nodes to PostgreSQL ended by the server (as when PostgreSQL
// restarts; the shared test server itself is not restarted) while clients write through
// both nodes: no node exits, each serves again by itself, /readyz says 503 at most while a
// node cannot reach the database, and every write answered 2xx is in the database afterwards.
import t from 'tap'
import { connectionLost } from '../db/postgres/connection.js'
import { connectPostgres } from '../db/postgres/index.js'
import { attackTool, hostState, mouse } from './fixtures/gateway.js'
import { allReady, enrollAt, readyz, request, startNodes, type Node } from './fixtures/nodes.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const WRITE_MS = 8000
const TERMINATE_AT_MS = [1500, 3500, 5500]

t.test('connections to PostgreSQL ended under writes: nodes recover by themselves, nothing accepted is lost', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const limits = { PRIME_AGENT_MIN_CHECKIN_SECONDS: '0', PRIME_RATE_LIMIT_MAX: '1000000', PRIME_AGENT_ENROLL_PER_MINUTE_PER_ADDRESS: '1000000', PRIME_AGENT_ENROLL_PER_MINUTE: '1000000' }
  const nodes = await startNodes(t, url, 2, limits)
  await allReady(nodes)
  const db = connectPostgres(url, { max: 1, applicationName: 'prime-test-terminator' })
  t.teardown(() => db.close())
  const dbName = new URL(url).pathname.slice(1)

  const accepted: string[] = []
  const statuses = new Map<string, number>()
  const count = (key: string) => statuses.set(key, (statuses.get(key) ?? 0) + 1)
  const end = Date.now() + WRITE_MS
  // Two writers a node: an agent enrolled, then checked in (a write of its state, peripherals and events).
  const writer = async (node: Node, w: number) => {
    for (let i = 0; Date.now() < end; i++) {
      const machineId = `machine-${node.name}-${w}-${i}`
      try {
        const agent = await enrollAt(node, machineId, `HOST-${node.name}-${w}-${i}`)
        accepted.push(agent.uuid)
        count('enroll 200')
        const res = await request(node, 'POST', '/prime/webui/gateway/checkin', {
          token: agent.credential,
          body: hostState(i % 2 ? [mouse] : [mouse, attackTool], { hostIdentifier: `HOST-${node.name}-${w}-${i}` }),
        })
        count(`checkin ${res.status}`)
      } catch (err) {
        const m = /: (\d{3}) /.exec((err as Error).message)
        count(m ? `enroll ${m[1]}` : `error ${(err as Error).message.slice(0, 60)}`)
        await sleep(20)
      }
    }
  }
  // /readyz of each node, every 100 ms, as a balancer would probe.
  const probes = new Map<string, number[]>(nodes.map((n) => [n.name, []]))
  const probing = (async () => {
    while (Date.now() < end + 5000) {
      for (const n of nodes) {
        const seen = probes.get(n.name)!
        const s = await readyz(n)
        if (seen[seen.length - 1] !== s) seen.push(s)
      }
      await sleep(100)
    }
  })()
  const started = Date.now()
  const terminating = (async () => {
    let ended = 0
    for (const at of TERMINATE_AT_MS) {
      await sleep(started + at - Date.now())
      ended += Number(await db.value('SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [dbName]))
    }
    return ended
  })()
  await Promise.all([...nodes.flatMap((n) => [writer(n, 0), writer(n, 1)]), probing])
  const terminated = await terminating
  t.ok(terminated >= TERMINATE_AT_MS.length * 2, `${terminated} connections ended by the server`)
  t.comment(`answers: ${JSON.stringify(Object.fromEntries(statuses))}; /readyz seen: ${JSON.stringify(Object.fromEntries(probes))}`)

  for (const n of nodes) {
    if (n.child.exitCode !== null)
      t.comment(
        n
          .output()
          .split('\n')
          .filter((l) => /"level":(50|60)/.test(l))
          .slice(0, 3)
          .join('\n'),
      )
    t.equal(n.child.exitCode, null, `node ${n.name} still runs`)
  }
  await allReady(nodes, 10_000)
  t.pass('every node ready again without a restart')
  for (const [name, seen] of probes)
    t.ok(
      seen.every((s) => s === 200 || s === 503),
      `node ${name}: /readyz answered 200 or 503 only (${seen})`,
    )
  const fiveHundreds = [...statuses].filter(([k]) => / 5\d\d$/.test(k) && !/ 503$/.test(k))
  t.same(fiveHundreds, [], 'no write answered a 5xx other than 503')
  t.ok(accepted.length > 20, `${accepted.length} enrollments accepted`)
  const stored = await db.query<{ uuid: string }>('SELECT uuid FROM agents WHERE uuid = ANY($1::text[])', [accepted])
  t.equal(stored.length, accepted.length, 'every accepted enrollment is stored')
  // And the nodes write again.
  for (const n of nodes) t.ok((await enrollAt(n)).uuid, `node ${n.name} takes writes`)
})

t.test('a unit of work whose connection is ended before its COMMIT runs again', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const db = connectPostgres(url, { max: 2 })
  const killer = connectPostgres(url, { max: 1 })
  t.teardown(() => Promise.all([db.close(), killer.close()]))
  await db.run('CREATE TABLE reconnect_probe (attempt integer NOT NULL)')
  let attempts = 0
  await db.uow.run(async () => {
    attempts++
    await db.run('INSERT INTO reconnect_probe (attempt) VALUES ($1)', [attempts])
    if (attempts === 1) {
      const pid = await db.value<number>('SELECT pg_backend_pid()')
      await killer.run('SELECT pg_terminate_backend($1)', [pid])
      await db.run('INSERT INTO reconnect_probe (attempt) VALUES (0)')
    }
  })
  t.equal(attempts, 2, 'run again on another connection')
  t.same(await db.query('SELECT attempt FROM reconnect_probe'), [{ attempt: 2 }], 'written once, by the second run')

  // Ended just before COMMIT, once the client knows it (COMMIT is then never sent): again.
  attempts = 0
  await db.run('DELETE FROM reconnect_probe')
  await db.uow.run(async () => {
    attempts++
    await db.run('INSERT INTO reconnect_probe (attempt) VALUES ($1)', [attempts])
    if (attempts === 1) {
      const pid = await db.value<number>('SELECT pg_backend_pid()')
      await killer.run('SELECT pg_terminate_backend($1)', [pid])
      await new Promise((r) => setTimeout(r, 200))
    }
  })
  t.equal(attempts, 2, 'run again on another connection')
  t.same(await db.query('SELECT attempt FROM reconnect_probe'), [{ attempt: 2 }], 'written once, by the second run')

  // A connection ended while checked out between statements (no statement to fail): the
  // client's error is taken, not thrown at the process; the pool connects again.
  const held = await db.pool.connect()
  const heldPid = (await held.query('SELECT pg_backend_pid() AS p')).rows[0].p
  await killer.run('SELECT pg_terminate_backend($1)', [heldPid])
  await new Promise((r) => setTimeout(r, 200))
  const refused = await held.query('SELECT 1').catch((err: Error) => err)
  t.ok(connectionLost(refused), 'its next statement says the connection is lost')
  held.release()
  t.equal(await db.value('SELECT 1'), 1, 'the pool serves again, and the process is still here')
})
