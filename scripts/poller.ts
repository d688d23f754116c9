// The worker poller: registers with the server once (enrollment secret), then sends
// heartbeats, fetches the connections registered to it, checks each on its schedule and
// reports every run. Told StopChecking (deactivated), it stops checking and keeps
// sending heartbeats; its credential refused (deleted), it stops.
//
//   PRIME_SERVER_URL=http://127.0.0.1:8080 PRIME_POLLER_ENROLLMENT_SECRET=... npm run poller
//
// Settings (environment): PRIME_SERVER_URL (required), PRIME_POLLER_ENROLLMENT_SECRET
// (needed to register the first time), PRIME_POLLER_NAME (default: the host name),
// PRIME_POLLER_STATE_FILE (default ./poller-state.json: its id and credential, mode 0600),
// PRIME_POLLER_CONCURRENCY (checks at once, default 32).
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { components } from '../generated/openapi.js'
import { runCheck } from '../lib/agentless/checks.js'
import { projectRoot } from '../lib/paths.js'

type Schemas = components['schemas']
type Connection = Schemas['PollerConnection']
type Run = Schemas['PollerRun']

const VERSION: string = JSON.parse(fs.readFileSync(path.join(projectRoot, 'package.json'), 'utf8')).version
const API = '/prime/webui/agents/agentless/poller'
const MAX_RUNS_PER_REPORT = 1000
const MAX_QUEUED_RUNS = 20_000
const REPORT_EVERY_MS = 1000
const RETRY_MS = 5000

/** The exit code when the server refuses the credential (the poller was deleted). */
const EXIT_REVOKED = 2

class ServerError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`HTTP ${status}: ${body.slice(0, 300)}`)
  }
}

function log(message: string, extra?: Record<string, unknown>) {
  process.stdout.write(`${new Date().toISOString()} poller: ${message}${extra ? ' ' + JSON.stringify(extra) : ''}\n`)
}

function setting(name: string, fallback?: string): string {
  const v = process.env[name] || fallback
  if (v === undefined) {
    log(`${name} is required`)
    process.exit(1)
  }
  return v
}

const hostName = () =>
  os
    .hostname()
    .replace(/[^A-Za-z0-9.-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, 253) || 'poller-host'

interface State {
  serverUrl: string
  pollerId: string
  name: string
  credential: string
}

interface Scheduled {
  connection: Connection
  nextDueMs: number
  running: boolean
}

class Poller {
  private state!: State
  private heartbeatSeconds = 60
  private checking = false
  private revision: number | null = null
  private readonly connections = new Map<number, Scheduled>()
  private readonly queue: Run[] = []
  private active = 0
  private stopped = false
  private readonly startedTime = new Date().toISOString()
  private heartbeatTimer?: NodeJS.Timeout
  private tickTimer?: NodeJS.Timeout
  private reportTimer?: NodeJS.Timeout
  private reporting = false

  constructor(
    private readonly serverUrl: string,
    private readonly stateFile: string,
    private readonly concurrency: number,
  ) {}

  private async call<T>(method: string, path: string, body?: unknown, credential = this.state?.credential): Promise<T> {
    const res = await fetch(this.serverUrl + path, {
      method,
      headers: { accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...(credential ? { authorization: `Bearer ${credential}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    })
    const text = await res.text()
    if (!res.ok) throw new ServerError(res.status, text)
    return JSON.parse(text) as T
  }

  /** Its id and credential: kept from an earlier registration, or registered now. */
  async register(name: string, secret: string | undefined): Promise<void> {
    try {
      const kept = JSON.parse(fs.readFileSync(this.stateFile, 'utf8')) as State
      if (kept.serverUrl === this.serverUrl && kept.credential) {
        this.state = kept
        log(`using the registration kept in ${this.stateFile}`, { pollerId: kept.pollerId, name: kept.name })
        return
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
    if (!secret) throw new Error("not registered yet: set PRIME_POLLER_ENROLLMENT_SECRET to the server's poller enrollment secret")
    const r = await this.call<Schemas['PollerRegistration']>('POST', `${API}/register`, { enrollmentSecret: secret, name, hostName: hostName(), version: VERSION }, '')
    this.state = { serverUrl: this.serverUrl, pollerId: r.pollerId, name: r.name, credential: r.credential }
    this.heartbeatSeconds = r.heartbeatIntervalSeconds
    fs.mkdirSync(path.dirname(this.stateFile), { recursive: true })
    fs.writeFileSync(this.stateFile, JSON.stringify(this.state, null, 2) + '\n', { mode: 0o600 })
    log(`registered as ${r.name}; a Manager has to activate it before it checks anything`, { pollerId: r.pollerId })
  }

  start() {
    void this.heartbeat()
    this.reportTimer = setInterval(() => void this.report(), REPORT_EVERY_MS)
  }

  /** Stops checking and sends what is still to report. */
  async stop() {
    this.stopped = true
    clearTimeout(this.heartbeatTimer)
    clearTimeout(this.tickTimer)
    clearInterval(this.reportTimer)
    await this.report()
  }

  private revoked(err: unknown): boolean {
    if (!(err instanceof ServerError) || err.status !== 401) return false
    log("the server refuses this poller's credential: it was deleted there. Delete the state file and register again to bring it back.", { stateFile: this.stateFile })
    void this.stop().then(() => process.exit(EXIT_REVOKED))
    return true
  }

  private async heartbeat() {
    if (this.stopped) return
    let next = this.heartbeatSeconds * 1000
    try {
      const r = await this.call<Schemas['PollerInstruction']>('POST', `${API}/heartbeat`, {
        version: VERSION,
        hostName: hostName(),
        startedTime: this.startedTime,
        activeChecks: this.active,
        assignmentsRevision: this.revision,
      })
      this.heartbeatSeconds = r.heartbeatIntervalSeconds
      next = r.heartbeatIntervalSeconds * 1000
      if (r.instruction === 'StopChecking') this.stopChecking()
      else if (!this.checking || r.assignmentsRevision !== this.revision) await this.fetchConnections()
    } catch (err) {
      if (this.revoked(err)) return
      log(`heartbeat failed: ${(err as Error).message}`)
      next = Math.min(next, RETRY_MS)
    }
    if (!this.stopped) this.heartbeatTimer = setTimeout(() => void this.heartbeat(), next)
  }

  private stopChecking() {
    if (!this.checking) return
    log('told to stop checking (deactivated); heartbeats go on')
    this.checking = false
    this.revision = null
    this.connections.clear()
    // Runs not reported yet would be refused: a deactivated poller's reports are not recorded.
    this.queue.length = 0
    clearTimeout(this.tickTimer)
  }

  private async fetchConnections() {
    const r = await this.call<Schemas['PollerAssignments']>('GET', `${API}/connections`)
    if (r.instruction === 'StopChecking') return this.stopChecking()
    const now = Date.now()
    const seen = new Set<number>()
    for (const c of r.connections) {
      seen.add(c.id)
      const known = this.connections.get(c.id)
      const last = c.lastStartTime ? Date.parse(c.lastStartTime) : null
      const due = last === null ? now : last + c.pollingIntervalSeconds * 1000
      if (!known) {
        this.connections.set(c.id, { connection: c, nextDueMs: due, running: false })
        continue
      }
      // Where or how to reach the host changed: check it again now rather than at its next turn.
      const moved = ['address', 'port', 'protocol', 'useTls', 'userName', 'password', 'privateKey', 'privateKeyPassphrase'].some(
        (k) => known.connection[k as keyof Connection] !== c[k as keyof Connection],
      )
      known.connection = c
      known.nextDueMs = moved ? now : Math.min(known.nextDueMs, (last ?? now) + c.pollingIntervalSeconds * 1000)
    }
    for (const id of this.connections.keys()) if (!seen.has(id)) this.connections.delete(id)
    const wasChecking = this.checking
    this.checking = true
    this.revision = r.assignmentsRevision
    log(`${wasChecking ? 'assignments changed' : 'checking'}: ${r.connections.length} connection(s)`, { revision: r.assignmentsRevision })
    this.tick()
  }

  /** Starts the checks that are due, then sleeps until the next one is. */
  private tick() {
    clearTimeout(this.tickTimer)
    if (!this.checking || this.stopped) return
    const now = Date.now()
    let nextMs = Infinity
    for (const s of this.connections.values()) {
      if (s.running) continue
      if (s.nextDueMs <= now && this.active < this.concurrency) void this.check(s)
      else nextMs = Math.min(nextMs, Math.max(s.nextDueMs, now + 50))
    }
    if (nextMs !== Infinity) this.tickTimer = setTimeout(() => this.tick(), Math.min(nextMs - now, 60_000))
  }

  private async check(s: Scheduled) {
    const c = s.connection
    const runId = crypto.randomUUID()
    const start = new Date()
    s.running = true
    s.nextDueMs = start.getTime() + c.pollingIntervalSeconds * 1000
    this.active++
    this.enqueue({ runId, connectionId: c.id, statusString: 'Running', startTime: start.toISOString(), endTime: null })
    try {
      const r = await runCheck({ address: c.address, port: c.port, protocol: c.protocol, useTls: c.useTls, timeoutSeconds: c.timeoutSeconds })
      // A connection dropped or a poller stopped meanwhile: the result has nowhere to go.
      if (!this.checking || this.connections.get(c.id) !== s) return
      this.enqueue({
        runId,
        connectionId: c.id,
        statusString: r.status,
        startTime: start.toISOString(),
        endTime: new Date().toISOString(),
        statusDescription: r.description.slice(0, 1000),
        statusErrorDescription: r.error === null ? null : r.error.slice(0, 2000),
      })
    } catch (err) {
      this.enqueue({
        runId,
        connectionId: c.id,
        statusString: 'Failed',
        startTime: start.toISOString(),
        endTime: new Date().toISOString(),
        statusDescription: null,
        statusErrorDescription: `The check itself failed: ${(err as Error).message}`.slice(0, 2000),
      })
    } finally {
      s.running = false
      this.active--
      this.tick()
    }
  }

  private enqueue(run: Run) {
    if (!this.checking) return
    this.queue.push(run)
    if (this.queue.length > MAX_QUEUED_RUNS) this.queue.splice(0, this.queue.length - MAX_QUEUED_RUNS)
  }

  /** Sends the queued runs, 1000 at a time; on failure they wait for the next turn. */
  private async report() {
    if (this.reporting) return
    this.reporting = true
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.slice(0, MAX_RUNS_PER_REPORT)
        try {
          const r = await this.call<Schemas['ItemResults']>('POST', `${API}/runs`, { runs: batch })
          this.queue.splice(0, batch.length)
          for (const item of r.results) if (item.status === 'failed') log(`run ${item.id} refused: ${item.reason}`)
        } catch (err) {
          if (this.revoked(err)) return
          if (err instanceof ServerError && err.status === 409) {
            this.queue.length = 0
            this.stopChecking()
            return
          }
          if (err instanceof ServerError && err.status === 400) {
            // Never accepted as sent: keeping it would block every later report.
            log(`report refused, dropped: ${err.message}`)
            this.queue.splice(0, batch.length)
            continue
          }
          log(`report failed, kept for the next try: ${(err as Error).message}`)
          return
        }
      }
    } finally {
      this.reporting = false
    }
  }
}

async function main() {
  const serverUrl = setting('PRIME_SERVER_URL').replace(/\/+$/, '')
  const stateFile = path.resolve(setting('PRIME_POLLER_STATE_FILE', 'poller-state.json'))
  const name = (process.env.PRIME_POLLER_NAME || hostName()).replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64)
  const concurrency = Number(setting('PRIME_POLLER_CONCURRENCY', '32'))
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1000) {
    log('PRIME_POLLER_CONCURRENCY must be an integer from 1 to 1000')
    process.exit(1)
  }
  const poller = new Poller(serverUrl, stateFile, concurrency)
  for (;;) {
    try {
      await poller.register(name, process.env.PRIME_POLLER_ENROLLMENT_SECRET)
      break
    } catch (err) {
      if (err instanceof ServerError && [400, 401, 409].includes(err.status)) {
        log(`registration refused: ${err.message}`)
        process.exit(1)
      }
      if (!(err instanceof ServerError) && /not registered yet/.test((err as Error).message)) {
        log((err as Error).message)
        process.exit(1)
      }
      log(`registration failed, retrying in ${RETRY_MS / 1000} s: ${(err as Error).message}`)
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS))
    }
  }
  poller.start()
  const shutdown = (signal: string) => {
    log(`${signal}: stopping`)
    void poller.stop().then(() => process.exit(0))
  }
  process.once('SIGTERM', () => shutdown('SIGTERM'))
  process.once('SIGINT', () => shutdown('SIGINT'))
}

void main()
