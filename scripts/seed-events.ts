// npm run seed-events -- --events 5000000 [--hosts 100000] [--days 30] [--data-dir ./data] [--seed 42]
// Bulk-loads a realistic event history straight into the SQLite file of a data directory
// (for demos and benchmarks; stop the server first), then brings the query index of
// migration 008 up to date, with a progress bar for each.
//
// The history reads as the gateway writes it: hosts of the fleet generator (the same
// names, addresses and agent uuids as `npm run seed` with the same --seed), their own
// peripherals connecting and disconnecting day after day (so details repeat), now and
// then an unapproved device on an armed agent, a vulnerable receiver or an attack tool,
// network moves and port alerts, mode changes, lost and regained connections, failed
// commands and alarm delivery failures; more during working hours than at night or at
// weekends, ids in time order.
import fs from 'node:fs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'
import cliProgress from 'cli-progress'
import { openDatabase, type DB } from '../db/index.js'
import { recordIndexer } from '../db/event-engine/event-index.js'
import { raiseRisks } from '../db/events.js'
import { passOverEvents } from '../db/alarm-queue.js'
import { eventOf } from '../lib/event-codes.js'
import { agentEvents } from '../lib/gateway/events.js'
import { derivePeripheral } from '../lib/gateway/peripherals.js'
import { fleetHost, Rand, streamSeed, uuidFrom, type FleetPeripheral } from './fleet-data.js'

export interface EventSeedOptions {
  events: number
  hosts?: number
  days?: number
  seed?: number
  now?: number
  onProgress?: (phase: 'write' | 'index', done: number, total: number) => void
  /** Writes history older than events already stored (benchmarks of out-of-order loads only). */
  anyOrder?: boolean
}

export interface EventSeedResult {
  events: number
  hosts: number
  /** Where the time went, ms. */
  phases: Record<string, number>
}

const MINUTE = 60_000
const DAY = 86_400_000

interface Device {
  deviceId: string
  label: string
  icon: number
  vid: string
  pid: string
  kind: 'attack' | 'vulnerable' | 'other'
}
interface Host {
  name: string
  ip: string
  uuid: string
  devices: Device[]
  switchName: string | null
  switchIp: string | null
  port: string | null
}

const ATTACK = new Set(['0483:5740', '1D6B:0104', '16C0:0486'])
const VULNERABLE = new Set(['046D:C52B', '1915:0102'])

function device(p: FleetPeripheral): Device {
  const d = derivePeripheral(p)
  const key = `${d.vid}:${d.pid}`
  return {
    deviceId: d.deviceId,
    // As the gateway words it (lib/gateway/events.ts deviceLabel), without the host.
    label: `${[d.guiVid, d.guiPid].filter(Boolean).join(' ') || 'Unknown device'} (VID ${d.vid}, PID ${d.pid}${d.guiSerial ? `, serial ${d.guiSerial}` : ''})`,
    icon: d.devIcon,
    vid: d.vid,
    pid: d.pid,
    kind: ATTACK.has(key) ? 'attack' : VULNERABLE.has(key) ? 'vulnerable' : 'other',
  }
}

/** Host number `i` of the fleet `seed`: the agent `npm run seed` writes for it, with its devices. */
function host(seed: number, i: number): Host {
  const h = fleetHost(seed, 'seed', i, 10)
  const uuid = uuidFrom(new Rand(streamSeed(seed, 'seed-state', i)))
  // Removable devices come last in the generator's list: people plug those.
  const devices = h.peripherals.map(device).reverse()
  const sw = h.connectedSwitch
  return { name: h.hostIdentifier, ip: h.localIpAddress, uuid, devices, switchName: sw?.name ?? null, switchIp: sw?.ip ?? null, port: sw?.portId ?? null }
}

type Kind = keyof typeof agentEvents | 'portAlert' | 'alarmFailure'
const kinds: readonly (readonly [Kind, number])[] = [
  ['peripheralDisconnected', 30],
  ['peripheralReconnected', 29],
  ['peripheralNew', 9],
  ['unapprovedOnArmed', 9],
  ['locationChanged', 4],
  ['portAlert', 3],
  ['disconnected', 5],
  ['reconnected', 5],
  ['modeChanged', 2.5],
  ['vulnerable', 1.2],
  ['attackTool', 0.15],
  ['commandFailed', 0.4],
  ['enrolled', 0.6],
  ['alarmFailure', 0.05],
]
const extraKinds = {
  portAlert: eventOf('portAlert'),
  alarmFailure: eventOf('alarmFailure'),
} as const

/** Relative activity by hour of day (UTC) and day of week. */
function activity(ms: number): number {
  const d = new Date(ms)
  const hour = d.getUTCHours() + d.getUTCMinutes() / 60
  const day = d.getUTCDay()
  const working = Math.exp(-((hour - 13) ** 2) / 18)
  return (day === 0 || day === 6 ? 0.25 : 1) * (0.15 + working)
}

const INSERT = `INSERT INTO events (created_ms, event_code, severity, category, entity_id, description, details, hashtags, peripheral_icon,
  asset_key, asset_name, peripheral_asset_id, peripheral_vid, peripheral_pid) VALUES (${Array(14).fill('?').join(', ')})`

/** What the history is: how many events, of how many hosts, over how many days up to `now`. */
export interface HistoryOptions {
  events: number
  hosts: number
  days: number
  seed: number
  now: number
}

/**
 * The rows of the history (the parameters of INSERT below), in time order: minute by
 * minute over the period, each minute's share of the events at sorted random instants.
 */
export function* historyRows(opts: HistoryOptions): Generator<unknown[]> {
  const { seed, days, now, events: total } = opts
  const hostCount = opts.hosts
  const hosts: Host[] = []
  for (let i = 0; i < hostCount; i++) hosts.push(host(seed, i))
  const withAttack = hosts.filter((h) => h.devices.some((d) => d.kind === 'attack'))
  const withVulnerable = hosts.filter((h) => h.devices.some((d) => d.kind === 'vulnerable'))

  // Minutes of the period with their share of the events, so that ids follow time.
  const start = now - days * DAY
  const minutes = days * 24 * 60
  const weights = new Float64Array(minutes)
  let sum = 0
  for (let m = 0; m < minutes; m++) sum += weights[m] = activity(start + m * MINUTE)

  const r = new Rand(streamSeed(seed, 'events', 0))
  const pickHost = () => hosts[Math.floor(hosts.length * r.next() ** 1.6)]
  const pickDevice = (h: Host, kind?: Device['kind']) => {
    const list = kind ? h.devices.filter((d) => d.kind === kind) : h.devices
    return list[Math.floor(list.length * r.next() ** 2.5)]
  }
  let commandId = 1000
  const row = (ms: number): unknown[] => {
    const kind = r.weighted(kinds)
    if (kind === 'alarmFailure') {
      const dest = r.pick(['soc-webhook', 'siem-syslog', 'oncall-email'])
      const ev = extraKinds.alarmFailure
      return [
        ms,
        ev.code,
        ev.severity,
        ev.category,
        'Prime server',
        ev.description,
        `Delivery of event ${Math.floor(r.next() * 1e6)} to ${dest} failed for good after 14 attempts: connect ECONNREFUSED 10.0.0.5:${dest === 'siem-syslog' ? 6514 : 443}.`,
        null,
        -1,
        null,
        null,
        null,
        null,
        null,
      ]
    }
    const h = kind === 'attackTool' && withAttack.length ? r.pick(withAttack) : kind === 'vulnerable' && withVulnerable.length ? r.pick(withVulnerable) : pickHost()
    const entity = `${h.name} (${h.ip})`
    const hostOnly = (k: keyof typeof agentEvents | 'portAlert', details: string): unknown[] => {
      const ev = k === 'portAlert' ? extraKinds.portAlert : agentEvents[k]
      return [ms, ev.code, ev.severity, ev.category, entity, ev.description, details, null, -1, h.uuid, h.name, null, null, null]
    }
    switch (kind) {
      case 'peripheralDisconnected':
      case 'peripheralReconnected':
      case 'peripheralNew':
      case 'unapprovedOnArmed':
      case 'vulnerable':
      case 'attackTool': {
        const d = kind === 'attackTool' ? (pickDevice(h, 'attack') ?? pickDevice(h)) : kind === 'vulnerable' ? (pickDevice(h, 'vulnerable') ?? pickDevice(h)) : pickDevice(h)
        const ev = agentEvents[kind]
        const label = `${d.label} on ${h.name}`
        const armed = kind === 'unapprovedOnArmed' || r.chance(0.6)
        const details =
          kind === 'peripheralDisconnected'
            ? `${label} was removed.`
            : kind === 'unapprovedOnArmed'
              ? `${label} is not approved; agent is Armed, device blocked.`
              : kind === 'attackTool'
                ? `${label}: known keystroke-injection tool; agent is ${armed ? 'Armed, device blocked' : 'Free'}.`
                : kind === 'vulnerable'
                  ? `${label}: receiver with unpatched firmware; agent is ${armed ? 'Armed' : 'Free'}.`
                  : `${label}.`
        const hashtags = kind === 'unapprovedOnArmed' ? '#unapproved #armed' : kind === 'attackTool' ? `#attack-tool #${armed ? 'armed' : 'free'}` : kind === 'vulnerable' ? '#vulnerable' : null
        return [ms, ev.code, ev.severity, ev.category, entity, ev.description, details, hashtags, d.icon, h.uuid, h.name, d.deviceId, d.vid, d.pid]
      }
      case 'portAlert':
        return hostOnly(
          'portAlert',
          h.switchName ? `Switch ${h.switchName} (${h.switchIp}) port ${h.port} ${r.chance(0.5) ? 'went down' : 'reports errors (CRC)'}.` : `${h.name} lost its network link.`,
        )
      case 'locationChanged':
        return hostOnly(kind, `${h.name} moved: address ${h.ip} -> ${h.ip.replace(/\.\d+$/, `.${r.int(10, 209)}`)}.`)
      case 'modeChanged': {
        const armed = r.chance(0.5)
        return hostOnly(kind, `${h.name} is now ${armed ? 'Armed' : 'Free'} (was ${armed ? 'Free' : 'Armed'}); requested by ${r.pick(['admin', 'secops', 'token:soar'])}.`)
      }
      case 'disconnected':
        return hostOnly(kind, `${h.name} has not checked in since ${new Date(ms - r.int(180_000, 600_000)).toISOString()}.`)
      case 'reconnected':
        return hostOnly(kind, `${h.name} checks in again; its last check-in was ${new Date(ms - r.int(600_000, 16 * 3_600_000)).toISOString()}.`)
      case 'commandFailed':
        return hostOnly(
          kind,
          `${r.pick(['SetMode', 'UpdatePolicy', 'UpdateAgent'])} command ${commandId++} failed on ${h.name}: ${r.chance(0.7) ? 'No result reported within 15 minutes of delivery' : 'the agent reported an error'}.`,
        )
      case 'enrolled':
        return hostOnly(kind, `${h.name} enrolled (license Activated).`)
    }
    throw new Error(`no event of kind ${kind}`)
  }

  let written = 0
  let carry = 0
  for (let m = 0; m < minutes && written < total; m++) {
    const exact = (weights[m] / sum) * total + carry
    const n = m === minutes - 1 ? total - written : Math.min(total - written, Math.floor(exact))
    carry = exact - n
    const from = start + m * MINUTE
    const offsets = Array.from({ length: n }, () => Math.floor(r.next() * MINUTE)).sort((a, b) => a - b)
    for (const off of offsets) yield row(from + off)
    written += n
  }
}

/** The first instant of a history of `days` days up to `now`. */
export const historyStart = (now: number, days: number) => now - days * DAY

/**
 * Writes `opts.events` events into an open database (migrated by openDatabase) that
 * nothing else uses meanwhile, then indexes them. All or nothing for the rows. Ids follow
 * time, as on a live server: a database that holds events younger than the history's
 * start is refused (`npm run seed -- --events` writes a fleet and its history together).
 */
export async function seedEvents(db: DB, opts: EventSeedOptions): Promise<EventSeedResult> {
  const seed = opts.seed ?? 42
  const hostCount = opts.hosts ?? 100_000
  const days = opts.days ?? 30
  const now = opts.now ?? Date.now()
  const total = opts.events
  const phases: Record<string, number> = {}
  let t = performance.now()
  const phase = (name: string) => {
    phases[name] = performance.now() - t
    t = performance.now()
  }
  const newest = db.prepare('SELECT max(created_ms) FROM events').pluck().get() as number | null
  if (!opts.anyOrder && newest !== null && newest >= historyStart(now, days)) {
    throw new Error(
      `the database holds events up to ${new Date(newest).toISOString()}, after the start of a ${days}-day history ` +
        `(${new Date(historyStart(now, days)).toISOString()}): event ids would not follow time. Use a fresh --data-dir, ` +
        'or `npm run seed -- --events N --days D` to write a fleet and its history together',
    )
  }
  const rows = historyRows({ events: total, hosts: hostCount, days, seed, now })

  // Secondary indexes are built once at the end; the journal and fsyncs are not needed
  // for a load that is repeated if it fails (one transaction: all or nothing).
  const journal = db.pragma('journal_mode', { simple: true }) as string
  const synchronous = db.pragma('synchronous', { simple: true })
  const cache = db.pragma('cache_size', { simple: true })
  try {
    db.pragma('journal_mode = DELETE')
  } catch (err) {
    throw new Error(`the database is in use (stop the server while seeding): ${(err as Error).message}`)
  }
  db.pragma('synchronous = OFF')
  db.pragma('cache_size = -262144')
  const indexes = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events' AND sql IS NOT NULL`).all() as { name: string; sql: string }[]
  const insert = db.prepare(INSERT)
  let written = 0
  const firstEvent = (db.prepare('SELECT coalesce(max(id), 0) FROM events').pluck().get() as number) + 1
  db.exec('BEGIN')
  try {
    for (const ix of indexes) db.exec(`DROP INDEX "${ix.name}"`)
    for (const row of rows) {
      insert.run(row)
      if (++written % 50_000 === 0) {
        opts.onProgress?.('write', written, total)
        await new Promise((resolve) => setImmediate(resolve))
      }
    }
    opts.onProgress?.('write', written, total)
    phase('write rows')
    for (const ix of indexes) db.exec(ix.sql)
    phase('build indexes')
    const lastEvent = db.prepare('SELECT coalesce(max(id), 0) FROM events').pluck().get() as number
    raiseRisks(db, firstEvent, lastEvent)
    phase('risk notifications')
    passOverEvents(db, firstEvent, lastEvent)
    db.exec('COMMIT')
  } catch (err) {
    if (db.inTransaction) db.exec('ROLLBACK')
    throw err
  } finally {
    db.pragma(`journal_mode = ${journal}`)
  }

  await indexEvents(db, (done, of) => opts.onProgress?.('index', done, of))
  phase('index')
  db.exec('ANALYZE')
  db.pragma(`synchronous = ${synchronous}`)
  db.pragma(`cache_size = ${cache}`)
  db.pragma('wal_checkpoint(TRUNCATE)')
  phase('analyze')
  return { events: written, hosts: hostCount, phases }
}

/** Brings the query index up to date, as the server builds it, in large batches. */
export async function indexEvents(db: DB, onProgress?: (done: number, total: number) => void): Promise<void> {
  // A large page cache and no fsync per batch, as for the load (it is repeated if it fails).
  const synchronous = db.pragma('synchronous', { simple: true })
  const cache = db.pragma('cache_size', { simple: true })
  db.pragma('synchronous = OFF')
  db.pragma('cache_size = -262144')
  try {
    const indexer = recordIndexer(db, { sourceCache: 200_000, docCache: 400_000 })
    const first = indexer.indexed('events')
    const top = db.prepare('SELECT coalesce(max(id), 0) FROM events').pluck().get() as number
    for (let n = indexer.step('events', 65_536); n > 0; n = indexer.step('events', 65_536)) {
      onProgress?.(indexer.indexed('events') - first, top - first)
      await new Promise((resolve) => setImmediate(resolve))
    }
    indexer.catchUp('audit_trail')
  } finally {
    db.pragma(`synchronous = ${synchronous}`)
    db.pragma(`cache_size = ${cache}`)
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      events: { type: 'string', default: '1000000' },
      hosts: { type: 'string', default: '100000' },
      days: { type: 'string', default: '30' },
      'data-dir': { type: 'string', default: process.env.PRIME_DATA_DIR || './data' },
      seed: { type: 'string', default: '42' },
    },
  })
  const num = (name: string, raw: string, min: number, max: number) => {
    const n = Number(raw)
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer from ${min} to ${max}, got "${raw}"`)
    return n
  }
  const events = num('events', values.events, 1, 100_000_000)
  const hosts = num('hosts', values.hosts, 1, 10_000_000)
  const days = num('days', values.days, 1, 3650)
  const seed = num('seed', values.seed, 0, 2 ** 31 - 1)
  const dataDir = path.resolve(values['data-dir'])
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const file = path.join(dataDir, 'prime.sqlite')
  const db = openDatabase(file)
  // One bar per phase: writing the rows, then indexing them.
  const bars: Partial<Record<'write' | 'index', cliProgress.SingleBar>> = {}
  const barFor = (phase: 'write' | 'index', total: number) => {
    let bar = bars[phase]
    if (!bar) {
      if (phase === 'index') bars.write?.stop()
      bar = bars[phase] = new cliProgress.SingleBar(
        {
          format: `${phase === 'write' ? 'writing ' : 'indexing'} |{bar}| {percentage}% | {value}/{total} events | {duration_formatted} elapsed, ETA {eta_formatted}`,
          stream: process.stderr,
          hideCursor: true,
        },
        cliProgress.Presets.shades_classic,
      )
      bar.start(total, 0)
    }
    bar.setTotal(total)
    return bar
  }
  let result: EventSeedResult
  try {
    result = await seedEvents(db, { events, hosts, days, seed, onProgress: (p, done, total) => barFor(p, total).update(done) })
  } finally {
    bars.write?.stop()
    bars.index?.stop()
    db.close()
  }
  const s = (ms: number) => (ms / 1000).toFixed(1) + ' s'
  console.log(`Seeded ${result.events} events of ${result.hosts} hosts over ${days} days into ${file}`)
  console.log(
    `  ${Object.entries(result.phases)
      .map(([k, v]) => `${k} ${s(v)}`)
      .join(', ')}`,
  )
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err)
    process.exit(1)
  })
}
