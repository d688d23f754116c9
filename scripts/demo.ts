// npm run demo -- [--port 8080] [--agents 40] [--data-dir ./data-demo]
// One command to see the service with data: starts the server (its log in the data dir)
// and the agent simulator, then prints where to log in. Ctrl-C stops both.
import { spawn, type ChildProcess } from 'node:child_process'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { projectRoot } from '../lib/paths.js'

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: process.env.PORT || '8080' },
    agents: { type: 'string', default: '40' },
    'data-dir': { type: 'string', default: './data-demo' },
  },
})
const port = Number(values.port)
const agents = Number(values.agents)
if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`--port must be a port number, got "${values.port}"`)
if (!Number.isInteger(agents) || agents < 1 || agents > 10_000) throw new Error(`--agents must be an integer from 1 to 10000, got "${values.agents}"`)
const dataDir = path.resolve(values['data-dir'])
fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })

// The demo's own data dir keeps its admin password, so that a second run prints it again.
const passwordFile = path.join(dataDir, 'demo-admin-password')
let password = process.env.PRIME_ADMIN_PASSWORD
if (!password) {
  try {
    password = fs.readFileSync(passwordFile, 'utf8').trim()
  } catch {
    password = `Demo-${crypto.randomBytes(12).toString('base64url')}`
    fs.writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 })
  }
}

// On PostgreSQL the server keeps a secret it generates in the database, where the simulator
// (which reads the data dir's file on SQLite) cannot find it: the demo makes the enrollment
// secret itself, kept in its data dir like the password, and gives it to both.
let enrollmentSecret = process.env.PRIME_AGENT_ENROLLMENT_SECRET
if (!enrollmentSecret && process.env.PRIME_DATABASE_URL) {
  const secretFile = path.join(dataDir, 'demo-enrollment-secret')
  try {
    enrollmentSecret = fs.readFileSync(secretFile, 'utf8').trim()
  } catch {
    enrollmentSecret = `pes_${crypto.randomBytes(24).toString('base64url')}`
    fs.writeFileSync(secretFile, `${enrollmentSecret}\n`, { mode: 0o600 })
  }
}

const host = '127.0.0.1'
const url = `http://${host}:${port}`
const logFile = path.join(dataDir, 'server.log')
const env = {
  ...process.env,
  HOST: host,
  PORT: String(port),
  PRIME_DATA_DIR: dataDir,
  PRIME_ADMIN_PASSWORD: password,
  ...(enrollmentSecret ? { PRIME_AGENT_ENROLLMENT_SECRET: enrollmentSecret } : {}),
  // The README's local alarm receiver (npm run receiver) listens on loopback.
  PRIME_ALARM_ALLOWED_HOSTS: process.env.PRIME_ALARM_ALLOWED_HOSTS ?? '127.0.0.1',
  // Commands reach the simulated agents within seconds.
  PRIME_AGENT_CHECKIN_SECONDS: process.env.PRIME_AGENT_CHECKIN_SECONDS ?? '10',
}
const children: ChildProcess[] = []
const running = () => children.filter((c) => c.exitCode === null && c.signalCode === null)
const stop = (code: number) => {
  for (const c of running()) c.kill('SIGTERM')
  process.exitCode ||= code
}
// Ctrl-C reaches the children as well (one process group): a signal of ours on top would be
// a second one. A SIGINT sent to the demo alone still stops them, a moment later.
let interrupted = false
process.on('SIGINT', () => {
  interrupted = true
  setTimeout(() => stop(0), 2000).unref()
})
for (const signal of ['SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    interrupted = true
    stop(0)
  })
}

// Private, as everything in the data directory: the server makes the directory private at
// start and warns of what it had to change.
const log = fs.openSync(logFile, 'a', 0o600)
fs.fchmodSync(log, 0o600)
const server = spawn(process.execPath, [path.join(projectRoot, 'dist', 'lib', 'server.js')], { env, stdio: ['ignore', log, log] })
fs.closeSync(log)
children.push(server)
server.on('exit', (code, signal) => {
  if (code || signal) console.error(`The server exited with ${code ? `status ${code}` : signal}; its log: ${logFile}`)
  else console.log('The server stopped.')
  stop(code ?? 1)
})

async function listening(): Promise<void> {
  const deadline = Date.now() + 120_000
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`the server did not start; its log: ${logFile}`)
    try {
      const res = await fetch(`${url}/prime/webui/docs/json`, { method: 'HEAD', signal: AbortSignal.timeout(1000) })
      await res.arrayBuffer()
      return
    } catch {
      await new Promise((r) => setTimeout(r, 200))
    }
  }
  throw new Error(`the server did not listen within 2 minutes; its log: ${logFile}`)
}

try {
  await listening()
} catch (err) {
  // Stopped while starting: the server stops as it would once started.
  if (interrupted) {
    await new Promise((r) => (server.exitCode !== null || server.signalCode !== null ? r(null) : server.once('exit', r)))
    process.exit()
  }
  console.error(`Demo not started: ${(err as Error).message}`)
  stop(1)
  process.exit(1)
}

console.log(
  [
    '',
    `Prime is running at ${url} with ${agents} simulated agents (data in ${dataDir}).`,
    '',
    `  API             ${url}/prime/webui`,
    `  documentation   ${url}/prime/webui/docs  (Authorize with a token from Auth/LocalLogin, then "Try it out")`,
    '  user            admin',
    `  password        ${password}`,
    '',
    `  In another terminal: export PASSWORD='${password}'  and follow the README's "Calling the API".`,
    `  Server log: ${logFile}. Ctrl-C stops the server and the simulator.`,
    '',
  ].join('\n'),
)

const sim = spawn(process.execPath, [path.join(projectRoot, 'dist', 'scripts', 'simulate.js'), '--agents', String(agents), '--url', url, '--data-dir', dataDir], {
  env,
  stdio: ['ignore', 'inherit', 'inherit'],
})
children.push(sim)
sim.on('exit', (code) => {
  if (code) console.error(`The simulator exited with status ${code}.`)
})
