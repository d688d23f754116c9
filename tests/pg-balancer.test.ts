// `npm run nodes`: three nodes on one PostgreSQL behind HAProxy, as docs/operating.md shows
// them. Requests through the balancer reach every node; a node killed with SIGKILL is taken
// out and the balancer's answers stay 200; Ctrl-C (SIGINT to the process group) stops the
// nodes, the balancer and the simulator, status 0. HAProxy is Debian's package (.ci/run
// installs it); without it this fails naming the fix, it is never skipped.
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../lib/paths.js'
import { start, tempDir, until } from './fixtures/processes.js'
import { freePort } from './fixtures/receivers.js'
import { noPostgres, pgEmptyDatabaseUrl } from './pg.js'

const nodesJs = path.join(projectRoot, 'dist', 'scripts', 'nodes.js')
t.setTimeout(240_000)

t.test('npm run nodes: three nodes behind HAProxy serve, lose one, and stop on Ctrl-C', { skip: noPostgres }, async (t) => {
  t.ok(
    ['/usr/sbin/haproxy', '/usr/local/sbin/haproxy'].some((p) => fs.existsSync(p)),
    'HAProxy is installed (apt-get install haproxy)',
  )
  const url = await pgEmptyDatabaseUrl(t)
  const dir = tempDir(t, 'prime-nodes-')
  const port = await freePort()
  const nodes = start(t, [nodesJs, '--nodes', '3', '--port', String(port), '--agents', '2', '--data-dir', dir], { PRIME_DATABASE_URL: url }, path.join(dir, 'nodes.out'))
  let code: number | null | undefined
  void nodes.exited.then((c) => (code = c))
  await until(() => /Prime is running on 3 nodes/.test(nodes.output()) || code !== undefined, 'the nodes to start', 180_000)
  t.equal(code, undefined, `running (${nodes.output().slice(-400)})`)

  const base = `http://127.0.0.1:${port}/prime/webui`
  const password = fs.readFileSync(path.join(dir, 'admin-password'), 'utf8').trim()
  const login = await fetch(`${base}/Auth/LocalLogin`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'admin', password }) })
  t.equal(login.status, 200, 'logged in through the balancer')
  const { token } = (await login.json()) as { token: string }
  const me = async () => (await fetch(`${base}/admin/getuserdetails`, { headers: { authorization: `Bearer ${token}` } })).status
  // Each node counts what it answered (its own /metrics, asked directly).
  const servedByNode = () =>
    Promise.all(
      [1, 2, 3].map(async (i) => {
        const text = await (await fetch(`http://127.0.0.1:${port + i}/metrics`, { headers: { authorization: `Bearer ${token}` } })).text()
        return Number(/prime_http_requests_total\{operation="getUserDetails",status="200"\} (\d+)/.exec(text)?.[1] ?? 0)
      }),
    )
  // Round robin over the nodes HAProxy's checks have found up: on a busy machine a node may
  // pass its checks a few seconds after it said it was ready, so the requests go on (each
  // answered 200) until every node has answered some, for a minute at most.
  const statuses: number[] = []
  let served = [0, 0, 0]
  for (const end = Date.now() + 60_000; Date.now() < end && !served.every((n) => n > 0); served = await servedByNode()) {
    for (let i = 0; i < 6; i++) statuses.push(await me())
  }
  t.ok(statuses.length >= 6 && statuses.every((s) => s === 200), `a session of one node is good on every node (${statuses.length} requests: ${[...new Set(statuses)].join(', ')})`)
  t.ok(
    served.every((n) => n > 0),
    `every node served some (${served.join(', ')})`,
  )

  // One node gone: the balancer's health check (1 s, two failures) takes it out.
  const pid = Number(/"pid":(\d+)/.exec(fs.readFileSync(path.join(dir, 'node-2', 'server.log'), 'utf8'))?.[1])
  t.ok(pid > 0, 'node-2 named its pid in its log')
  process.kill(pid, 'SIGKILL')
  await new Promise((r) => setTimeout(r, 3_000))
  const after: number[] = []
  for (let i = 0; i < 6; i++) after.push(await me())
  t.same(after, [200, 200, 200, 200, 200, 200], 'answers stay 200 with a node killed')

  process.kill(-nodes.child.pid!, 'SIGINT')
  t.equal(await nodes.exited, 0, 'Ctrl-C ends it with status 0')
  t.match(nodes.output(), /The nodes stopped/)
})
