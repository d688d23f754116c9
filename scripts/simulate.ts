// npm run simulate -- [--agents 300] [--url http://127.0.0.1:8080] [--secret <enrollment secret>] [--duration <seconds>]
// Plays a fleet of agents against the agent gateway over HTTP, so that a new installation
// shows live data within a minute: each host enrolls (its machine id is stable, so a
// restarted simulator re-enrolls the same agents), checks in with its state and
// peripherals on the interval the server answers, now and then plugs or unplugs a
// device (occasionally a known attack tool or a vulnerable one), obeys its commands and
// reports their results.
import fs from 'node:fs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import type { components } from '../generated/openapi.js'
import { fleetHost, modelsOf, pluggedDevice, Rand, streamSeed, type FleetHost, type FleetPeripheral } from './fleet-data.js'

type Schemas = components['schemas']
type CheckInRequest = Schemas['GatewayCheckInRequest']
type CheckInResponse = Schemas['GatewayCheckInResponse']
type EnrollResponse = Schemas['GatewayEnrollResponse']
type CommandResult = Schemas['GatewayCommandResult']
type Command = Schemas['GatewayCommand']

const { values } = parseArgs({
  options: {
    agents: { type: 'string', default: '300' },
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    secret: { type: 'string' },
    'data-dir': { type: 'string', default: process.env.PRIME_DATA_DIR || './data' },
    duration: { type: 'string' },
    seed: { type: 'string', default: '42' },
    concurrency: { type: 'string', default: '8' },
    'license-account': { type: 'string', default: process.env.PRIME_LICENSE_ACCOUNT_ID || 'PRIME-0001' },
  },
})

function num(name: string, raw: string, min: number, max: number): number {
  const n = Number(raw)
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`--${name} must be an integer from ${min} to ${max}, got "${raw}"`)
    process.exit(2)
  }
  return n
}

const AGENTS = num('agents', values.agents, 1, 100_000)
const SEED = num('seed', values.seed, 0, 2 ** 31 - 1)
const CONCURRENCY = num('concurrency', values.concurrency, 1, 256)
const DURATION_MS = values.duration === undefined ? Infinity : num('duration', values.duration, 1, 365 * 86400) * 1000
const BASE = values.url.replace(/\/+$/, '') + '/prime/webui/gateway'
const dataDir = path.resolve(values['data-dir'])
const stateFile = path.join(dataDir, 'simulator-state.json')

function enrollmentSecret(): string {
  if (values.secret) return values.secret
  if (process.env.PRIME_AGENT_ENROLLMENT_SECRET) return process.env.PRIME_AGENT_ENROLLMENT_SECRET
  const file = path.join(dataDir, 'agent-enrollment-secret')
  try {
    return fs.readFileSync(file, 'utf8').trim()
  } catch {
    console.error(`No enrollment secret: pass --secret, set PRIME_AGENT_ENROLLMENT_SECRET, or point --data-dir at the server's data directory (${file} not found).`)
    process.exit(2)
  }
}
const SECRET = enrollmentSecret()

// ---------------------------------------------------------------------------------------
// The simulated agents

interface SimAgent {
  host: FleetHost
  r: Rand
  credential: string | null
  /** The credential last held, presented when enrolling again (a restart, a 401). */
  lastCredential: string | null
  /** The enrollment awaits an Administrator's approval (the machine was enrolled and no credential proved it). */
  held: boolean
  uuid: string | null
  mode: 'Armed' | 'Free'
  locked: boolean
  /** The approved models of the last UpdatePolicy (null: none received yet). */
  whitelist: Set<string> | null
  nextAt: number
  busy: boolean
  checkedIn: boolean
  plugSeq: number
  /** Results not yet accepted by the server (sent again with the next ones). */
  unreported: CommandResult[]
}

/** What survives a restart of the simulator: what the agents were told to be. */
interface Kept {
  mode: 'Armed' | 'Free'
  serviceVersion: string
  kbDriverVersion: string
  whitelist: string[] | null
  credential?: string | null
}
let kept: Record<string, Kept> = {}
try {
  kept = JSON.parse(fs.readFileSync(stateFile, 'utf8'))
} catch {
  // first run
}

const agents: SimAgent[] = []
for (let i = 0; i < AGENTS; i++) {
  const host = fleetHost(SEED, 'sim', i)
  const r = new Rand(streamSeed(SEED, 'sim-run', i) ^ Date.now())
  const k = kept[host.machineId]
  if (k) {
    host.serviceVersion = k.serviceVersion
    host.kbDriverVersion = k.kbDriverVersion
  }
  agents.push({
    host,
    r,
    credential: null,
    lastCredential: k?.credential ?? null,
    held: false,
    uuid: null,
    mode: k?.mode ?? 'Free',
    locked: false,
    whitelist: k?.whitelist ? new Set(k.whitelist) : null,
    // Enrollments spread over the first few seconds.
    nextAt: Date.now() + Math.floor((i / AGENTS) * Math.min(10_000, AGENTS * 20)),
    busy: false,
    checkedIn: false,
    plugSeq: 0,
    unreported: [],
  })
}

function saveState() {
  // Hosts beyond --agents (a larger earlier run) keep what they had.
  const out: Record<string, Kept> = { ...kept }
  for (const a of agents) {
    out[a.host.machineId] = {
      mode: a.mode,
      serviceVersion: a.host.serviceVersion,
      kbDriverVersion: a.host.kbDriverVersion,
      whitelist: a.whitelist ? [...a.whitelist] : null,
      credential: a.credential ?? a.lastCredential,
    }
  }
  try {
    // It holds the agents' credentials: readable by its owner only.
    fs.writeFileSync(stateFile, JSON.stringify(out), { mode: 0o600 })
    fs.chmodSync(stateFile, 0o600)
  } catch {
    // the data dir may belong to a server elsewhere; the state is a convenience
  }
}

// ---------------------------------------------------------------------------------------
// Statistics, logged every 10 s

const stats = { enrolled: 0, reEnrolled: 0, held: 0, checkIns: 0, commands: 0, plugged: 0, unplugged: 0, risky: 0, r429: 0, r401: 0, failures: 0, lastError: '' }
let windowCheckIns = 0,
  windowCommands = 0,
  windowStart = Date.now()

function logLine() {
  const now = Date.now()
  const secs = (now - windowStart) / 1000
  const enrolled = agents.filter((a) => a.credential && !a.held).length
  console.log(
    `${new Date(now).toISOString()} agents ${enrolled}/${AGENTS} enrolled · ${(windowCheckIns / secs).toFixed(1)} check-ins/s · ` +
      `${windowCommands} commands obeyed (${stats.commands} in all) · plugged ${stats.plugged} (risky ${stats.risky}), unplugged ${stats.unplugged} · ` +
      `held for approval: ${agents.filter((a) => a.held).length} · 429: ${stats.r429}, 401: ${stats.r401}, failures: ${stats.failures}${stats.lastError ? ` (latest: ${stats.lastError})` : ''}`,
  )
  windowCheckIns = 0
  windowCommands = 0
  windowStart = now
  stats.lastError = ''
  saveState()
}

// ---------------------------------------------------------------------------------------
// HTTP

interface Answer<T> {
  status: number
  body: T | null
  retryAfterMs: number
  detail: string
}

async function post<T>(op: string, body: unknown, credential?: string): Promise<Answer<T>> {
  const res = await fetch(`${BASE}/${op}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...(credential ? { authorization: `Bearer ${credential}` } : {}) },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(30_000),
  })
  const text = await res.text()
  let parsed: unknown = null
  try {
    parsed = text ? JSON.parse(text) : null
  } catch {
    // not JSON: keep the status
  }
  const retry = Number(res.headers.get('retry-after'))
  const detail = res.status >= 400 ? ((parsed as { detail?: string } | null)?.detail ?? text.slice(0, 200)) : ''
  if (res.status >= 400) stats.lastError = `${op} ${res.status}: ${detail}`
  return { status: res.status, body: res.ok ? (parsed as T) : null, retryAfterMs: Number.isFinite(retry) && retry > 0 ? retry * 1000 : 0, detail }
}

const jitter = (a: SimAgent, ms: number, spread = 0.1) => Math.round(ms * (1 - spread + 2 * spread * a.r.next()))
/** Never earlier than the server asked (it refuses check-ins that come too soon). */
const lateBy = (a: SimAgent, ms: number) => Math.round(ms * (1 + 0.1 * a.r.next()))

/** Answers that mean "later": rate limited, not built yet, or failing. */
function later(a: SimAgent, res: Answer<unknown>) {
  if (res.status === 429) {
    stats.r429++
    a.nextAt = Date.now() + (res.retryAfterMs || 5000) + jitter(a, 1000, 1)
  } else {
    stats.failures++
    a.nextAt = Date.now() + jitter(a, res.status === 501 ? 30_000 : 10_000, 0.5)
  }
}

async function enroll(a: SimAgent): Promise<boolean> {
  // Presenting the credential it last had proves the identity: the server rotates it at once.
  const res = await post<EnrollResponse>('enroll', {
    enrollmentSecret: SECRET,
    machineId: a.host.machineId,
    hostIdentifier: a.host.hostIdentifier,
    localIpAddress: a.host.localIpAddress,
    ...(a.lastCredential ? { currentCredential: a.lastCredential } : {}),
  })
  if (res.status === 401) {
    console.error(`Enrollment refused (401): the enrollment secret is wrong. ${stats.lastError}`)
    stop(1)
    return false
  }
  // 202: held for an Administrator's approval.
  if ((res.status !== 200 && res.status !== 202) || !res.body) {
    later(a, res)
    return false
  }
  a.credential = res.body.credential
  a.lastCredential = res.body.credential
  a.uuid = res.body.uuid
  a.held = res.body.pendingApproval
  if (a.held) {
    stats.held++
    console.log(`${a.host.hostIdentifier}: enrolled before and its credential is lost; re-enrollment held until an Administrator approves it (agents/agent/${a.uuid}/reenrollment).`)
  } else if (res.body.reEnrolled) stats.reEnrolled++
  else stats.enrolled++
  return true
}

// ---------------------------------------------------------------------------------------
// Behaviour

const REMOVABLE = new Set(['08', '06', '02', 'FF', '01', '0E', '07', '0B'])
const RISKY = new Set([...modelsOf('attack'), ...modelsOf('vulnerable')].map((m) => `${m.vid}:${m.pid}`))

/** Now and then a device is plugged in or pulled out (about once an hour per host at the default interval). */
function fiddle(a: SimAgent) {
  const list = a.host.peripherals
  if (!a.r.chance(0.02)) return
  const present = list.filter((p) => p.present && REMOVABLE.has(p.classCode ?? ''))
  const absent = list.filter((p) => !p.present)
  const roll = a.r.next()
  if (roll < 0.45 || (present.length === 0 && absent.length === 0)) {
    const p = pluggedDevice(a.r, a.host.index, a.plugSeq++)
    list.push(p)
    stats.plugged++
    if (RISKY.has(`${p.vid}:${p.pid}`)) stats.risky++
    // An agent remembers a bounded history of devices.
    if (list.length > 24) {
      const old = list.findIndex((x) => !x.present)
      if (old >= 0) list.splice(old, 1)
    }
  } else if (roll < 0.8 && present.length) {
    const p = a.r.pick(present)
    p.present = false
    p.status = 'Unknown'
    stats.unplugged++
  } else if (absent.length) {
    const p = a.r.pick(absent)
    p.present = true
    p.status = 'OK'
    stats.plugged++
  }
}

function blocked(a: SimAgent, p: FleetPeripheral): boolean {
  return a.mode === 'Armed' && p.present && a.whitelist !== null && !a.whitelist.has(`${p.vid}:${p.pid}`)
}

function checkInBody(a: SimAgent): CheckInRequest {
  const h = a.host
  const errors: CheckInRequest['errors'] = a.r.chance(0.002)
    ? [{ time: new Date(Date.now() - a.r.int(1000, 50_000)).toISOString(), code: 'DRV-0042', message: 'USB filter driver restarted after a watchdog timeout.' }]
    : []
  return {
    hostIdentifier: h.hostIdentifier,
    agentTime: new Date().toISOString(),
    osVersion: h.osVersion,
    manufacturer: h.manufacturer,
    pcModel: h.pcModel,
    serviceVersion: h.serviceVersion,
    kbDriverVersion: h.kbDriverVersion,
    runningMode: h.runningMode,
    operationalStatus: a.mode,
    isSystemLocked: a.locked,
    localIpAddress: h.localIpAddress,
    nics: h.nics,
    connectedSwitch: h.connectedSwitch,
    licenseAccountId: values['license-account'],
    loggedOnUsers: h.loggedOnUsers,
    hashtags: h.hashtags,
    errors,
    peripherals: h.peripherals.map((p) => ({ ...p, isDisabled: blocked(a, p) })),
  }
}

function debugLog(a: SimAgent): string {
  const lines: string[] = []
  const t0 = Date.now() - 3_600_000
  const n = a.r.int(40, 120)
  for (let i = 0; i < n; i++) {
    const t = new Date(t0 + Math.floor((i / n) * 3_600_000)).toISOString()
    const p = a.r.pick(a.host.peripherals)
    lines.push(
      a.r.pick([
        `${t} INFO  service: heartbeat ok, ${a.host.peripherals.filter((x) => x.present).length} devices present, mode ${a.mode}`,
        `${t} INFO  usbmon: enumerated ${p.deviceID} class ${p.classCode}/${p.subclassCode}/${p.protocolCode}`,
        `${t} DEBUG policy: ${a.whitelist ? a.whitelist.size : 0} approved models loaded`,
        `${t} INFO  gateway: check-in accepted by ${values.url}`,
        `${t} WARN  kbfilter: slow keystroke dispatch (${a.r.int(20, 90)} ms) on ${p.deviceID}`,
        `${t} DEBUG usbmon: port ${a.r.int(1, 12)} power state D0`,
      ]),
    )
  }
  return lines.join('\n') + '\n'
}

function bumpVersion(v: string): string {
  const parts = v.split('.').map(Number)
  parts[parts.length - 1] += 1
  return parts.join('.')
}

/** Runs one command as an agent would; answers its result. */
function obey(a: SimAgent, c: Command): CommandResult {
  const done = (message: string, output?: string): CommandResult => ({ commandId: c.commandId, status: 'Succeeded', message, completedTime: new Date().toISOString(), ...(output ? { output } : {}) })
  switch (c.type) {
    case 'SetMode': {
      const mode = c.parameters.mode ?? a.mode
      a.mode = mode
      a.locked = mode === 'Armed' && a.r.chance(0.5)
      return done(`Mode set to ${mode}.`)
    }
    case 'UpdatePolicy': {
      const models = c.parameters.approvedPeripherals ?? []
      a.whitelist = new Set(models.map((m) => `${m.vid}:${m.pid}`))
      return done(`Policy applied: ${models.length} approved model${models.length === 1 ? '' : 's'}.`)
    }
    case 'UpdateAgent': {
      if (a.r.chance(0.03)) return { commandId: c.commandId, status: 'Failed', message: 'Download failed: the distribution point did not answer.', completedTime: new Date().toISOString() }
      a.host.serviceVersion = bumpVersion(a.host.serviceVersion)
      a.host.kbDriverVersion = bumpVersion(a.host.kbDriverVersion)
      return done(`Updated to ${a.host.serviceVersion}.`)
    }
    case 'FetchDebugLogs': {
      const output = debugLog(a)
      return done(`Collected ${(Buffer.byteLength(output) / 1024).toFixed(1)} KiB of logs.`, output)
    }
    default:
      return { commandId: c.commandId, status: 'Failed', message: `Unsupported command ${String(c.type)}.`, completedTime: new Date().toISOString() }
  }
}

async function report(a: SimAgent) {
  while (a.unreported.length && a.credential) {
    const batch = a.unreported.slice(0, 100)
    const res = await post('commandresults', { results: batch }, a.credential)
    if (res.status === 401) {
      stats.r401++
      a.credential = null
      return
    }
    if (res.status !== 200) {
      later(a, res)
      return
    }
    a.unreported.splice(0, batch.length)
  }
}

async function checkIn(a: SimAgent) {
  fiddle(a)
  const res = await post<CheckInResponse>('checkin', checkInBody(a), a.credential!)
  if (res.status === 401 && a.held && /approval/i.test(res.detail)) {
    // Waiting for the Administrator: ask again in a minute, without enrolling again.
    a.nextAt = Date.now() + jitter(a, 60_000)
    return
  }
  if (res.status === 401) {
    // Rotated or deleted: enroll again at once.
    stats.r401++
    a.credential = null
    a.held = false
    a.nextAt = Date.now()
    return
  }
  a.held = false
  if (res.status !== 200 || !res.body) {
    later(a, res)
    return
  }
  stats.checkIns++
  windowCheckIns++
  const interval = res.body.nextCheckInSeconds * 1000
  // The second check-in lands anywhere in the first interval, so that a fleet that
  // started together does not stay in step.
  a.nextAt = Date.now() + (a.checkedIn ? lateBy(a, interval) : Math.max(Math.min(interval, 6000), Math.floor(interval * a.r.next())))
  a.checkedIn = true
  if (res.body.commands.length) {
    for (const c of res.body.commands) a.unreported.push(obey(a, c))
    stats.commands += res.body.commands.length
    windowCommands += res.body.commands.length
    await sleep(a.r.int(200, 1500))
  }
  if (a.unreported.length) await report(a)
}

async function step(a: SimAgent) {
  try {
    if (!a.credential) {
      if (!(await enroll(a))) return
    }
    await checkIn(a)
  } catch (err) {
    stats.failures++
    stats.lastError = (err as Error).cause ? String((err as Error).cause) : (err as Error).message
    a.nextAt = Date.now() + jitter(a, 10_000, 0.5)
  }
}

// ---------------------------------------------------------------------------------------
// The loop

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
let stopping = false
let exitCode = 0
function stop(code = 0) {
  exitCode = Math.max(exitCode, code)
  stopping = true
}
process.once('SIGINT', () => stop())
process.once('SIGTERM', () => stop())

const started = Date.now()
console.log(`Simulating ${AGENTS} agents against ${BASE} (${CONCURRENCY} requests at a time${Number.isFinite(DURATION_MS) ? `, for ${DURATION_MS / 1000} s` : ', until Ctrl-C'}).`)
const ticker = setInterval(logLine, 10_000)
let inFlight = 0
while (!stopping && Date.now() - started < DURATION_MS) {
  const now = Date.now()
  for (const a of agents) {
    if (inFlight >= CONCURRENCY) break
    if (a.busy || a.nextAt > now) continue
    a.busy = true
    inFlight++
    void step(a).finally(() => {
      a.busy = false
      inFlight--
    })
  }
  await sleep(inFlight >= CONCURRENCY ? 5 : 50)
}
while (inFlight > 0) await sleep(20)
clearInterval(ticker)
logLine()
const secs = (Date.now() - started) / 1000
console.log(
  `Done after ${secs.toFixed(0)} s: ${stats.enrolled} enrolled, ${stats.reEnrolled} re-enrolled, ${stats.held} held for approval, ${stats.checkIns} check-ins, ${stats.commands} commands obeyed.`,
)
process.exit(exitCode)
