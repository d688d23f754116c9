// PRIME_DATABASE_URL=postgres://... npm run nodes -- [--nodes 3] [--port 8080] [--agents 40] [--data-dir ./data-nodes]
// Several nodes on one PostgreSQL behind a real load balancer, on one machine: starts the
// nodes (each its own process, port and data directory), HAProxy in front of them (Debian's
// package: `apt-get install haproxy`), and the agent simulator through the balancer; prints
// where to log in. Ctrl-C stops them all. docs/operating.md "Several nodes" explains the
// configuration written to <data-dir>/haproxy.cfg and what changes in production.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { projectRoot } from '../lib/paths.js'

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '3' },
    port: { type: 'string', default: process.env.PORT || '8080' },
    agents: { type: 'string', default: '40' },
    'data-dir': { type: 'string', default: './data-nodes' },
  },
})
const fail = (why: string): never => {
  console.error(`Nodes not started: ${why}`)
  process.exit(1)
}
const nodes = Number(values.nodes)
const port = Number(values.port)
const agents = Number(values.agents)
if (!Number.isInteger(nodes) || nodes < 1 || nodes > 16) fail(`--nodes must be an integer from 1 to 16, got "${values.nodes}"`)
if (!Number.isInteger(port) || port < 1 || port > 65535 - nodes) fail(`--port must be a port number, got "${values.port}"`)
if (!Number.isInteger(agents) || agents < 0 || agents > 10_000) fail(`--agents must be an integer from 0 to 10000, got "${values.agents}"`)
const databaseUrl = process.env.PRIME_DATABASE_URL
if (!databaseUrl || !/^postgres(ql)?:\/\//.test(databaseUrl))
  fail('set PRIME_DATABASE_URL to a PostgreSQL database the nodes share, e.g. PRIME_DATABASE_URL=postgres://prime@127.0.0.1:5432/prime npm run nodes')
const haproxy: string =
  ['/usr/sbin/haproxy', '/usr/local/sbin/haproxy'].find((p) => fs.existsSync(p)) ??
  (spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' }).stdout.trim() || fail('HAProxy is not installed: apt-get install haproxy'))

const dataDir = path.resolve(values['data-dir'])
fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })
// Kept in the data dir, so that a second run prints it again (the account is in the database).
const passwordFile = path.join(dataDir, 'admin-password')
let password = process.env.PRIME_ADMIN_PASSWORD
if (!password) {
  try {
    password = fs.readFileSync(passwordFile, 'utf8').trim()
  } catch {
    password = `Nodes-${crypto.randomBytes(12).toString('base64url')}`
    fs.writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 })
  }
}

// The nodes share the enrollment secret (from configuration here; without it they would share
// the one kept in the database), and the simulator enrolls with it.
const secretFile = path.join(dataDir, 'agent-enrollment-secret')
let enrollmentSecret = process.env.PRIME_AGENT_ENROLLMENT_SECRET
if (!enrollmentSecret) {
  try {
    enrollmentSecret = fs.readFileSync(secretFile, 'utf8').trim()
  } catch {
    enrollmentSecret = crypto.randomBytes(24).toString('base64url')
    fs.writeFileSync(secretFile, `${enrollmentSecret}\n`, { mode: 0o600 })
  }
}

const host = '127.0.0.1'
const url = `http://${host}:${port}`
const nodePort = (i: number) => port + 1 + i

/**
 * The balancer: round robin over the nodes that answer /readyz (a node that loses PostgreSQL,
 * or drains at a stop, answers 503 and is taken out until it answers 200 again); the client's
 * address in X-Forwarded-For, which the nodes trust (PRIME_TRUST_PROXY); long-lived
 * notification streams and exports kept open by `timeout tunnel`.
 */
const config = `# Written by npm run nodes (scripts/nodes.ts); see docs/operating.md "Several nodes".
global
    maxconn 4096

defaults
    mode http
    option forwardfor
    timeout connect 5s
    timeout client 65s
    timeout server 65s
    timeout tunnel 1h
    timeout http-keep-alive 10s
    retries 2
    option redispatch

frontend prime
    bind ${host}:${port}
    default_backend nodes

backend nodes
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 1s fall 2 rise 2
${Array.from({ length: nodes }, (_, i) => `    server node-${i + 1} ${host}:${nodePort(i)} check`).join('\n')}
`
const configFile = path.join(dataDir, 'haproxy.cfg')
fs.writeFileSync(configFile, config, { mode: 0o600 })

const children: ChildProcess[] = []
const running = () => children.filter((c) => c.exitCode === null && c.signalCode === null)
let stopping = false
const stop = (code: number) => {
  stopping = true
  for (const c of running()) c.kill('SIGTERM')
  process.exitCode ||= code
}
// Ctrl-C reaches every child as well (one process group): a signal of ours on top would be a
// second one. A SIGINT sent to this process alone still stops them, a moment later.
process.on('SIGINT', () => {
  stopping = true
  setTimeout(() => stop(0), 2000).unref()
})
for (const signal of ['SIGTERM', 'SIGHUP'] as const) process.on(signal, () => stop(0))

let started = false
/**
 * Starts a child with its output in `logFile`. Any child that ends while they start stops the
 * rest; once they run, only the balancer's end (or the last node's) does: a node that goes is
 * what the balancer is there for.
 */
function spawnLogged(name: string, command: string, args: string[], env: NodeJS.ProcessEnv, logFile: string, kind: 'node' | 'balancer' | 'simulator'): ChildProcess {
  const log = fs.openSync(logFile, 'a', 0o600)
  const child = spawn(command, args, { env, stdio: ['ignore', log, log] })
  fs.closeSync(log)
  children.push(child)
  // Decided a moment later: Ctrl-C reaches the children and this process together, and a
  // child's end (HAProxy's is at once) may be seen before this process's own SIGINT has set
  // `stopping`, which made a Ctrl-C end with status 1.
  child.on('exit', (code, signal) =>
    setTimeout(() => {
      if (stopping) return
      if (code || signal) console.error(`${name} exited with ${code ? `status ${code}` : signal}; its log: ${logFile}`)
      const nodesLeft = nodeProcs.filter((c) => c.exitCode === null && c.signalCode === null).length
      if (!started || kind === 'balancer' || (kind === 'node' && nodesLeft === 0)) stop(code || 1)
      else if (kind === 'node') console.error(`${nodesLeft} of ${nodes} nodes left; the balancer sends nothing to ${name}.`)
    }, 250),
  )
  return child
}
const nodeProcs: ChildProcess[] = []

const logs: string[] = []
for (let i = 0; i < nodes; i++) {
  const dir = path.join(dataDir, `node-${i + 1}`)
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const logFile = path.join(dir, 'server.log')
  logs.push(logFile)
  // All nodes at once: one of them migrates the schema, under an advisory lock.
  const node = spawnLogged(
    `node-${i + 1}`,
    process.execPath,
    [path.join(projectRoot, 'dist', 'lib', 'server.js')],
    {
      ...process.env,
      HOST: host,
      PORT: String(nodePort(i)),
      PRIME_DATA_DIR: dir,
      PRIME_DATABASE_URL: databaseUrl,
      PRIME_ADMIN_PASSWORD: password,
      PRIME_AGENT_ENROLLMENT_SECRET: enrollmentSecret,
      PRIME_TRUST_PROXY: 'true',
      PRIME_ALARM_ALLOWED_HOSTS: process.env.PRIME_ALARM_ALLOWED_HOSTS ?? '127.0.0.1',
      PRIME_AGENT_CHECKIN_SECONDS: process.env.PRIME_AGENT_CHECKIN_SECONDS ?? '10',
    },
    logFile,
    'node',
  )
  nodeProcs.push(node)
}
spawnLogged('HAProxy', haproxy, ['-db', '-f', configFile], process.env, path.join(dataDir, 'haproxy.log'), 'balancer')

/** Until the balancer answers /readyz through a node, each node's own /readyz too. */
async function ready(): Promise<void> {
  const deadline = Date.now() + 120_000
  const ok = async (u: string) => {
    try {
      const res = await fetch(`${u}/readyz`, { signal: AbortSignal.timeout(1000) })
      await res.arrayBuffer()
      return res.status === 200
    } catch {
      return false
    }
  }
  while (Date.now() < deadline) {
    if (stopping) throw new Error('stopped while starting')
    const each = await Promise.all(Array.from({ length: nodes }, (_, i) => ok(`http://${host}:${nodePort(i)}`)))
    if (each.every(Boolean) && (await ok(url))) return
    await new Promise((r) => setTimeout(r, 300))
  }
  throw new Error(`the nodes were not ready within 2 minutes; their logs: ${logs.join(', ')}`)
}

try {
  await ready()
  started = true
} catch (err) {
  if (!stopping) {
    console.error(`Nodes not started: ${(err as Error).message}`)
    stop(1)
  }
  await Promise.all(running().map((c) => new Promise((r) => c.once('exit', r))))
  process.exit()
}

console.log(
  [
    '',
    `Prime is running on ${nodes} nodes behind HAProxy at ${url}${agents ? `, with ${agents} simulated agents` : ''} (data in ${dataDir}).`,
    '',
    `  API             ${url}/prime/webui`,
    ...Array.from({ length: nodes }, (_, i) => `  node-${i + 1}          http://${host}:${nodePort(i)}  log ${logs[i]}`),
    `  balancer        ${configFile}`,
    '  user            admin',
    `  password        ${password}`,
    '',
    '  Stop a node (kill its process) and the balancer takes it out within two seconds; its',
    '  singleton loops move to another node within a lease (PRIME_LOOP_LEASE_SECONDS).',
    '  Ctrl-C stops the nodes, the balancer and the simulator.',
    '',
  ].join('\n'),
)

if (agents > 0)
  spawnLogged(
    'the simulator',
    process.execPath,
    [path.join(projectRoot, 'dist', 'scripts', 'simulate.js'), '--agents', String(agents), '--url', url, '--data-dir', dataDir, '--secret', enrollmentSecret],
    process.env,
    path.join(dataDir, 'simulator.log'),
    'simulator',
  )

await Promise.all(children.map((c) => (c.exitCode !== null || c.signalCode !== null ? null : new Promise((r) => c.once('exit', r)))))
console.log('The nodes stopped.')
