// npm run seed -- --agents 100000 [--peripherals-per-agent 10] [--data-dir ./data] [--seed 42] [--append]
//                  [--events 5000000 --days 365]
// Bulk-loads a realistic fleet straight into the SQLite file of a data directory (for
// demos and benchmarks): agents, their peripherals, approvals and some events; with
// --events, also that many events of history (scripts/seed-events.ts) over the last --days,
// merged with the fleet's own in time order, as a live server would have numbered them. Stored
// flags and counters are computed here the way db/agent-state.ts computes them, and a
// sample is checked against it at the end.
//
// A worker thread generates the rows, and builds the peripherals' device-id index, while
// the main thread writes them: each half takes about as long as the other, and there are
// two cores. The whole load is one transaction.
import fs from 'node:fs'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads'
import cliProgress from 'cli-progress'
import Database from 'better-sqlite3'
import { openDatabase, type DB } from '../db/index.js'
import { buildAssetGrams } from '../db/asset-grams.js'
import { agentStateRepo } from '../db/agent-state.js'
import { peripheralTexts } from '../db/gateway.js'
import { raiseRisks } from '../db/events.js'
import { passOverEvents } from '../db/alarm-queue.js'
import { agentEvents } from '../lib/gateway/events.js'
import { derivePeripheral, modelTooltip, nicsText } from '../lib/gateway/peripherals.js'
import { fleetHost, Rand, streamSeed, uuidFrom } from './fleet-data.js'
import { historyRows, indexEvents } from './seed-events.js'

export interface SeedOptions {
  agents: number
  peripheralsPerAgent?: number
  seed?: number
  /** Agents per chunk: the unit of generation, progress and stopping. */
  chunk?: number
  now?: number
  onProgress?: (agents: number, peripherals: number) => void
  /** Stops after the current chunk (the data so far stays, consistent). */
  signal?: AbortSignal
  /** Also this much event history of the fleet's hosts (a new fleet only), in time order with the fleet's events. */
  history?: { events: number; days: number }
  onEvents?: (written: number, total: number) => void
}

export interface SeedResult {
  agents: number
  peripherals: number
  approvals: number
  events: number
  ms: number
  /** Where the main thread's time went, ms. */
  phases: Record<string, number>
}

const HOUR = 3_600_000
const DAY = 24 * HOUR

interface Catalogue {
  attack: Set<string>
  vulnerable: Set<string>
  severity: Map<string, number>
  vulnerability: Map<string, string>
  names: Map<string, string>
}

function loadCatalogue(db: DB): Catalogue {
  const c: Catalogue = { attack: new Set(), vulnerable: new Set(), severity: new Map(), vulnerability: new Map(), names: new Map() }
  const rows = db.prepare('SELECT kind, vid, pid, name, vulnerability, severity FROM catalogue ORDER BY rowid').all() as {
    kind: string
    vid: string
    pid: string
    name: string
    vulnerability: string | null
    severity: number
  }[]
  for (const r of rows) {
    const key = `${r.vid}:${r.pid}`
    ;(r.kind === 'KnownAttackTool' ? c.attack : c.vulnerable).add(key)
    c.severity.set(key, Math.min(c.severity.get(key) ?? 7, r.severity))
    const text = r.vulnerability ?? r.name
    c.vulnerability.set(key, c.vulnerability.has(key) ? `${c.vulnerability.get(key)} ${text}` : text)
    c.names.set(key, c.names.has(key) ? `${c.names.get(key)}; ${r.name}` : r.name)
  }
  return c
}

// ---------------------------------------------------------------------------------------
// Generation (in the worker): rows as the parameter arrays of the insert statements.

interface License {
  /** The server's license settings (PRIME_LICENSE_*), as the gateway applies them. */
  accountName: string
  accountId: string | null
  expirationMs: number | null
}

interface GenContext {
  seed: number
  perAgent: number
  now: number
  catalogue: Catalogue
  license: License
  /** Host number of the first agent, and the ids the first agent and peripheral get. */
  firstIndex: number
  firstId: number
  firstPeripheralId: number
}

/** Running numbers across chunks: event order, peripheral ids. */
interface Sequences {
  events: number
  peripherals: number
}

/** Rows as the parameter arrays of AGENT_INSERT, PERIPHERAL_INSERT and so on. */
interface Chunk {
  agents: unknown[][]
  /** Vendor and product texts sit where their ids go (VENDOR_AT, PRODUCT_AT). */
  peripherals: unknown[][]
  approvals: unknown[][]
  events: unknown[][]
}

const AGENT_COLUMNS = [
  'id',
  'uuid',
  'machine_id',
  'enrolled_ms',
  'host_identifier',
  'local_ip_address',
  'os_version',
  'manufacturer',
  'pc_model',
  'nics_json',
  'nics_text',
  'ip_addresses',
  'operational_status',
  'is_system_locked',
  'connection_status',
  'display_status',
  'approved_and_present',
  'approved_and_disconnected',
  'not_approved',
  'latest_event_text',
  'latest_minus1_event_text',
  'latest_minus2_event_text',
  'service_version',
  'kb_driver_version',
  'last_updated_ms',
  'last_configured_ms',
  'license_status',
  'expiration_ms',
  'license_account_id',
  'license_account_name',
  'severity',
  'has_unapproved',
  'has_vulnerable',
  'has_attack_tool',
  'vulnerable_or_wlv',
  'model_tooltip',
  'running_mode',
  'switch_ip',
  'switch_name',
  'port_id',
  'port_name',
  'ethernets_count',
  'hashtags',
  'logged_on_users',
]
const PERIPHERAL_COLUMNS = [
  'id',
  'agent_id',
  'agent_uuid',
  'device_id',
  'vid',
  'pid',
  'serial_number',
  'description',
  'status',
  'manufacturer',
  'caption',
  'gui_vid',
  'gui_pid',
  'gui_serial',
  'dev_icon',
  'class_code',
  'subclass_code',
  'protocol_code',
  'hierarchy',
  'parent_device_id',
  'is_disabled',
  'present',
  'approved',
  'admin_status',
  'is_unapproved',
  'is_vulnerable',
  'is_attack_tool',
  'vulnerability',
  'severity',
  'in_action',
  'vendor_text_id',
  'product_text_id',
  'first_seen_ms',
  'last_seen_ms',
]
const insertSql = (table: string, columns: readonly string[]) => `INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`
const AGENT_INSERT = insertSql('agents', AGENT_COLUMNS)
const PERIPHERAL_INSERT = insertSql('peripherals', PERIPHERAL_COLUMNS)
const VENDOR_AT = PERIPHERAL_COLUMNS.indexOf('vendor_text_id'),
  PRODUCT_AT = PERIPHERAL_COLUMNS.indexOf('product_text_id')

type EventKind = keyof typeof agentEvents
interface SeedEvent {
  t: number
  kind: EventKind
  details: string
  hashtags: string | null
  icon: number
  device: string | null
  vid: string | null
  pid: string | null
}

function generateChunk(ctx: GenContext, from: number, count: number, seq: Sequences): Chunk {
  const { catalogue, now, license } = ctx
  const chunk: Chunk = { agents: [], peripherals: [], approvals: [], events: [] }
  const expired = license.expirationMs !== null && license.expirationMs <= now
  for (let k = from; k < from + count; k++) {
    const index = ctx.firstIndex + k
    const agentId = ctx.firstId + k
    const host = fleetHost(ctx.seed, 'seed', index, ctx.perAgent)
    const r = new Rand(streamSeed(ctx.seed, 'seed-state', index))
    const uuid = uuidFrom(r)
    const enrolled = now - r.int(1, 730) * DAY + r.int(0, DAY)
    const connected = r.chance(0.92)
    const lastUpdated = connected ? now - r.int(0, 90_000) : Math.max(enrolled, now - r.int(10 * 60_000, 30 * DAY))
    const armed = r.chance(0.6)
    const mode = armed ? 'Armed' : 'Free'
    const lastConfigured = r.chance(0.95) ? enrolled + Math.floor(r.next() * (lastUpdated - enrolled)) : null
    // A few wait for a seat; with an account id set, a few report another account.
    const status = expired
      ? 'Expired'
      : r.weighted([
          ['Activated', 97],
          ['Pending', 2],
          [license.accountId === null ? 'Activated' : 'Invalid', 1],
        ] as const)
    const reportedAccount = status === 'Invalid' ? 'OTHER-0042' : (license.accountId ?? 'PRIME-0001')

    // The administrators' decisions, per model: on most agents everything but attack tools
    // is approved; on the others removable devices often wait for review.
    const tidy = r.chance(0.85)
    const decisions = new Map<string, 'Approved' | 'Disapproved'>()
    for (const p of host.peripherals) {
      const key = `${p.vid}:${p.pid}`
      if (decisions.has(key)) continue
      const removable = p.classCode === '08' || p.classCode === '06' || p.classCode === 'FF' || p.classCode === '02'
      if (catalogue.attack.has(key)) {
        if (r.chance(0.3)) decisions.set(key, 'Disapproved')
      } else if (r.chance(catalogue.vulnerable.has(key) ? 0.5 : tidy ? 1 : removable ? 0.5 : 0.9)) {
        decisions.set(key, 'Approved')
      } else if (r.chance(0.2)) {
        decisions.set(key, 'Disapproved')
      }
    }

    // Peripheral rows (derived as the gateway derives a report) and the agent's counters
    // and flags (as db/agent-state.ts computes them).
    let approvedPresent = 0,
      approvedGone = 0,
      notApproved = 0,
      hasVulnerable = false,
      hasAttack = false,
      agentSeverity = 6
    const rows = host.peripherals.map((report) => {
      const d = derivePeripheral(report)
      const key = `${d.vid}:${d.pid}`
      const adminStatus = decisions.get(key) ?? 'NotReviewed'
      const approved = adminStatus === 'Approved'
      const isAttack = catalogue.attack.has(key)
      const isVulnerable = catalogue.vulnerable.has(key)
      const severity = Math.min(catalogue.severity.get(key) ?? 6, approved ? 6 : armed ? 4 : 5)
      const firstSeen = enrolled + Math.floor(r.next() * (lastUpdated - enrolled))
      const lastSeen = d.present ? lastUpdated : firstSeen + Math.floor(r.next() * (lastUpdated - firstSeen))
      if (d.present) {
        if (approved) approvedPresent++
        else notApproved++
        if (isVulnerable) hasVulnerable = true
        if (isAttack) hasAttack = true
        agentSeverity = Math.min(agentSeverity, severity)
      } else if (approved) approvedGone++
      // The agent blocks what is not approved while armed.
      if (d.present && armed && !approved) d.isDisabled = 1
      return { d, key, adminStatus, approved, isAttack, isVulnerable, severity, firstSeen, lastSeen }
    })
    const hasUnapproved = notApproved > 0

    // Its history, in the gateway's words: enrollment, the last mode change, the two
    // peripherals seen last, and the risks present.
    const hostName = host.hostIdentifier
    const none = { hashtags: null, icon: -1, device: null, vid: null, pid: null }
    const evs: SeedEvent[] = [{ ...none, t: enrolled, kind: 'enrolled', details: `${hostName} enrolled (license ${status}).` }]
    if (lastConfigured !== null) evs.push({ ...none, t: lastConfigured, kind: 'modeChanged', details: `${hostName} is now ${mode} (was ${armed ? 'Free' : 'Armed'}); requested by admin.` })
    let newest = -1,
      second = -1
    rows.forEach((x, i) => {
      if (!x.d.present) return
      if (newest < 0 || x.firstSeen > rows[newest].firstSeen) {
        second = newest
        newest = i
      } else if (second < 0 || x.firstSeen > rows[second].firstSeen) second = i
    })
    rows.forEach((x, i) => {
      if (!x.d.present) return
      const d = x.d
      const label = `${[d.guiVid, d.guiPid].filter(Boolean).join(' ') || 'Unknown device'} (VID ${d.vid}, PID ${d.pid}${d.guiSerial ? `, serial ${d.guiSerial}` : ''}) on ${hostName}`
      const stance = `agent is ${mode}${armed && !x.approved ? ', device blocked' : ''}`
      const base = { icon: d.devIcon, device: d.deviceId, vid: d.vid, pid: d.pid }
      if (i === newest || i === second) evs.push({ ...base, t: x.firstSeen, kind: 'peripheralNew', details: `${label}.`, hashtags: null })
      if (x.isAttack) evs.push({ ...base, t: x.firstSeen, kind: 'attackTool', details: `${label}: ${catalogue.names.get(x.key)}; ${stance}.`, hashtags: `#attack-tool #${mode.toLowerCase()}` })
      if (x.isVulnerable) evs.push({ ...base, t: x.firstSeen, kind: 'vulnerable', details: `${label}: ${catalogue.names.get(x.key)}; ${stance}.`, hashtags: '#vulnerable' })
      if (armed && !x.approved) evs.push({ ...base, t: x.firstSeen, kind: 'unapprovedOnArmed', details: `${label} is not approved; agent is Armed, device blocked.`, hashtags: '#unapproved #armed' })
    })
    // In time order; within one check-in the most severe last, as the gateway records them.
    evs.sort((a, b) => a.t - b.t || agentEvents[b.kind].severity - agentEvents[a.kind].severity)
    const latest = evs
      .slice(-3)
      .reverse()
      .map((e) => agentEvents[e.kind].description)

    const nics = host.nics
    const ips = [...new Set([host.localIpAddress, ...nics.flatMap((n) => n.ipAddresses)])].join(' ')
    const sw = host.connectedSwitch
    chunk.agents.push([
      agentId,
      uuid,
      host.machineId,
      enrolled,
      hostName,
      host.localIpAddress,
      host.osVersion,
      host.manufacturer,
      host.pcModel,
      JSON.stringify(nics),
      nicsText(nics),
      ips,
      mode,
      armed && r.chance(0.5) ? 1 : 0,
      connected ? 'Connected' : 'Disconnected',
      connected ? mode : 'Disconnected',
      approvedPresent,
      approvedGone,
      notApproved,
      latest[0] ?? null,
      latest[1] ?? null,
      latest[2] ?? null,
      host.serviceVersion,
      host.kbDriverVersion,
      lastUpdated,
      lastConfigured,
      status,
      license.expirationMs,
      reportedAccount,
      license.accountName,
      agentSeverity,
      hasUnapproved ? 1 : 0,
      hasVulnerable ? 1 : 0,
      hasAttack ? 1 : 0,
      hasVulnerable || (hasUnapproved && armed) ? 1 : 0,
      modelTooltip(host.manufacturer, host.pcModel, host.osVersion, nics.length),
      host.runningMode,
      sw?.ip ?? null,
      sw?.name ?? null,
      sw?.portId ?? null,
      sw?.portName ?? null,
      nics.filter((n) => n.isEthernet).length,
      host.hashtags.length ? host.hashtags.join(' ') : null,
      JSON.stringify(host.loggedOnUsers),
    ])
    for (const [key, decision] of decisions) {
      chunk.approvals.push([agentId, key.slice(0, 4), key.slice(5), decision, enrolled + Math.floor(r.next() * (lastUpdated - enrolled)), r.chance(0.8) ? 'admin' : 'token:soar'])
    }
    for (const x of rows) {
      const d = x.d
      const texts = peripheralTexts(d)
      chunk.peripherals.push([
        ctx.firstPeripheralId + seq.peripherals++,
        agentId,
        uuid,
        d.deviceId,
        d.vid,
        d.pid,
        d.serialNumber,
        d.description,
        d.status,
        d.manufacturer,
        d.caption,
        d.guiVid,
        d.guiPid,
        d.guiSerial,
        d.devIcon,
        d.classCode,
        d.subclassCode,
        d.protocolCode,
        d.hierarchy,
        d.parentDeviceId,
        d.isDisabled,
        d.present,
        x.approved ? 1 : 0,
        x.adminStatus,
        d.present && !x.approved ? 1 : 0,
        x.isVulnerable ? 1 : 0,
        x.isAttack ? 1 : 0,
        catalogue.vulnerability.get(x.key) ?? null,
        x.severity,
        0,
        texts.vendor,
        texts.product,
        x.firstSeen,
        x.lastSeen,
      ])
    }
    const entity = `${hostName} (${host.localIpAddress})`
    for (const e of evs) {
      const ev = agentEvents[e.kind]
      chunk.events.push([e.t, seq.events++, ev.code, ev.severity, ev.category, entity, ev.description, e.details, e.hashtags, e.icon, uuid, hostName, e.device, e.vid, e.pid])
    }
  }
  return chunk
}

/** The tables whose secondary indexes and insert triggers wait until the end of a load. */
const TABLES = ['agents', 'peripherals', 'events']

// The worker: generates chunks ahead of the writer, a few at a time (credits bound memory).
//
// It also builds the full-text indexes fed by insert triggers on peripherals (the trigram
// index of device ids), in a scratch database of its own, from the same rows: at about
// 30 µs a peripheral that is the costliest part of the load, and the generator leaves the
// worker time to spare. The main thread copies them in at the end. (The agents' own index
// is fed by the main thread, a statement per chunk of new agents.)
interface WorkerFts {
  /** The index (an FTS5 table), its CREATE statement, the peripherals columns its trigger reads. */
  name: string
  ddl: string
  columns: string[]
  /** The trigger's insert as one statement over the new rows: INSERT INTO <name> ... SELECT ... FROM peripherals AS new WHERE new.id >= ? */
  bulkSql: string
}
interface FtsPlan {
  file: string
  indexes: WorkerFts[]
}
type WorkerMessage = { chunk: Chunk } | { ftsBuilt: true } | { ftsFailed: string } | { failed: string }

if (!isMainThread && (workerData as { seedWorker?: boolean } | null)?.seedWorker) {
  const { ctx, total, chunk, fts } = workerData as { ctx: GenContext; total: number; chunk: number; fts: FtsPlan | null }
  const post = (m: WorkerMessage) => parentPort!.postMessage(m)
  let scratch: Database.Database | null = null
  let addRows: ((c: Chunk) => void) | null = null
  if (fts) {
    scratch = new Database(fts.file)
    // The app's connection has this file attached: a transaction it begins meanwhile
    // (BEGIN IMMEDIATE locks every attached file) holds it for a moment; wait, as db/index.ts does.
    scratch.pragma('busy_timeout = 5000')
    scratch.pragma('journal_mode = OFF')
    scratch.pragma('synchronous = OFF')
    const columns = [...new Set(fts.indexes.flatMap((x) => x.columns))].filter((c) => c !== 'id')
    scratch.exec(`CREATE TABLE peripherals (id INTEGER PRIMARY KEY${columns.map((c) => `, "${c}"`).join('')})`)
    for (const x of fts.indexes) scratch.exec(x.ddl)
    const insert = scratch.prepare(insertSql('peripherals', ['id', ...columns]))
    const at = ['id', ...columns].map((c) => PERIPHERAL_COLUMNS.indexOf(c))
    const bulk = fts.indexes.map((x) => scratch!.prepare(x.bulkSql))
    addRows = scratch.transaction((c: Chunk) => {
      if (!c.peripherals.length) return
      for (const row of c.peripherals) insert.run(at.map((i) => row[i]))
      for (const b of bulk) b.run(c.peripherals[0][0])
    })
  }
  let credits = 4,
    next = 0
  const seq: Sequences = { events: 0, peripherals: 0 }
  const pump = () => {
    while (credits > 0 && next < total) {
      const n = Math.min(chunk, total - next)
      const c = generateChunk(ctx, next, n, seq)
      post({ chunk: c })
      if (addRows) {
        try {
          addRows(c)
        } catch (err) {
          post({ ftsFailed: (err as Error).message })
          addRows = null
        }
      }
      next += n
      credits--
    }
    if (next >= total && scratch) {
      try {
        if (addRows) {
          for (const x of fts!.indexes) scratch.exec(`INSERT INTO "${x.name}" ("${x.name}") VALUES ('optimize')`)
          post({ ftsBuilt: true })
        }
      } catch (err) {
        post({ ftsFailed: (err as Error).message })
      }
      scratch.close()
      scratch = null
    }
  }
  // Errors cross to the main thread as text (an error object would lose its message).
  const run = () => {
    try {
      pump()
    } catch (err) {
      post({ failed: String((err as Error)?.message ?? err) })
    }
  }
  parentPort!.on('message', () => {
    credits++
    run()
  })
  run()
}

// ---------------------------------------------------------------------------------------
// Writing (main thread)

interface BulkLoad {
  /** Set when the worker can build the peripherals' full-text indexes (empty ones, fed by triggers of the known shape). */
  fts: FtsPlan | null
  /** Adds the agents written since the last call, up to id `upTo`, to their full-text index. */
  indexAgents(upTo: number): void
  /** Builds what waited, commits, and restores the settings; `ftsBuilt`: the worker's indexes are complete. */
  commit(ftsBuilt: boolean): void
  /** Undoes the whole load (the dropped indexes and triggers come back with it). */
  rollback(): void
}

/**
 * One transaction for the whole load, so that an interrupted or failed load leaves the
 * database as it was (the rollback journal holds little: nearly every page is new). Inside
 * it, indexes are built once at the end rather than row by row: the secondary indexes are
 * dropped and created again, row-count triggers give way to one count, the
 * peripherals' full-text indexes are built by the worker (or, failing that, in one
 * statement of their trigger's own expressions), and the agents' by such a statement per chunk.
 */
function beginBulkLoad(db: DB, firstAgentId: number, firstPeripheralId: number, phase: (name: string, since: number) => void): BulkLoad {
  const synchronous = db.pragma('synchronous', { simple: true })
  const cache = db.pragma('cache_size', { simple: true })
  const foreignKeys = db.pragma('foreign_keys', { simple: true })
  const journal = db.pragma('journal_mode', { simple: true }) as string
  // Leaving WAL needs the only connection: this also refuses to load under a running server.
  try {
    db.pragma('journal_mode = DELETE')
  } catch (err) {
    throw new Error(`the database is in use (stop the server while seeding): ${(err as Error).message}`)
  }
  // A process that dies mid-load leaves a hot journal that undoes it; only a power loss
  // during the load could lose more, and the load is repeatable.
  db.pragma('synchronous = OFF')
  db.pragma('cache_size = -262144')
  // The rows are generated consistent with each other: checking every reference would only cost time.
  db.pragma('foreign_keys = OFF')
  const restore = () => {
    db.pragma(`foreign_keys = ${foreignKeys ? 'ON' : 'OFF'}`)
    db.pragma(`cache_size = ${cache}`)
    db.pragma(`synchronous = ${synchronous}`)
    db.pragma(`journal_mode = ${journal}`)
  }

  const inTables = `tbl_name IN (${TABLES.map(() => '?').join(', ')})`
  const indexes = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND ${inTables}`).all(...TABLES) as { name: string; sql: string }[]
  const triggers = db.prepare(`SELECT name, tbl_name AS tbl, sql FROM sqlite_master WHERE type = 'trigger' AND ${inTables}`).all(...TABLES) as { name: string; tbl: string; sql: string }[]
  // Row-count triggers (`UPDATE row_counts SET n = n + 1 ...` per insert): the counts are
  // set once at the end instead.
  const counters = triggers
    .map((t) => ({ ...t, counter: /AFTER INSERT ON \w+\s+BEGIN\s+UPDATE row_counts SET n = n \+ 1 WHERE name = '(\w+)'\s*;\s*END$/i.exec(t.sql)?.[1] }))
    .filter((t): t is typeof t & { counter: string } => t.counter !== undefined)
  // The interned texts' peripheral counts (migration 017), likewise counted once at the end.
  const textCounters = triggers.filter((t) => /AFTER INSERT ON peripherals\s+BEGIN\s+UPDATE peripheral_texts SET n = n \+ 1\b/i.test(t.sql))
  // The short searches' grams (migration 039), built once from every row at the end.
  const gramKeepers = triggers.filter((t) => /^(agents|peripherals)_(peripheral_)?grams_/.test(t.name))
  // Full-text indexes fed by `INSERT INTO <index> (...) VALUES (<expressions of new.*>)`
  // on peripherals, still empty: that insert becomes a SELECT over the new rows aliased
  // `new`. A trigger of another shape stays and fires per row.
  const ftsOf = (t: { name: string; sql: string }): (WorkerFts & { trigger: string }) | null => {
    const m = /AFTER INSERT ON peripherals\s+BEGIN\s+INSERT INTO (\w+)\s*(\([^)]*\))\s*VALUES\s*\(([^;]*)\)\s*;\s*END$/i.exec(t.sql)
    if (!m) return null
    const ddl = (db.prepare(`SELECT sql FROM sqlite_master WHERE name = ? AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'`).get(m[1]) as { sql: string } | undefined)?.sql
    if (!ddl || (db.prepare(`SELECT count(*) AS n FROM "${m[1]}"`).get() as { n: number }).n > 0) return null
    const columns = [...new Set([...m[3].matchAll(/\bnew\.(\w+)/gi)].map((x) => x[1].toLowerCase()))]
    if (!columns.every((c) => PERIPHERAL_COLUMNS.includes(c))) return null
    return { name: m[1], ddl, columns, bulkSql: `INSERT INTO ${m[1]} ${m[2]} SELECT ${m[3]} FROM peripherals AS new WHERE new.id >= ?`, trigger: t.name }
  }
  const deferred = triggers.map(ftsOf).filter((x) => x !== null)
  // The agents' full-text index and the in-memory search's notes (db/agent-texts.ts), fed
  // the same way by triggers on agents, are fed a chunk at a time instead: one statement
  // over a chunk's agents costs a quarter of what the trigger costs row by row, which was
  // most of the load (and it overlaps the worker's work).
  const agentFts = triggers
    .map((t) => ({ trigger: t.name, m: /AFTER INSERT ON agents\s+BEGIN\s+INSERT INTO (\w+)\s*(\([^)]*\))\s*VALUES\s*\(([^;]*)\)\s*;\s*END$/i.exec(t.sql) }))
    .filter((x): x is { trigger: string; m: RegExpExecArray } => x.m !== null)
    .map(({ trigger, m }) => ({ trigger, insert: db.prepare(`INSERT INTO ${m[1]} ${m[2]} SELECT ${m[3]} FROM agents AS new WHERE new.id BETWEEN ? AND ?`) }))
  let agentsIndexedTo = firstAgentId - 1
  const indexAgents = (upTo: number) => {
    if (upTo <= agentsIndexedTo) return
    for (const x of agentFts) x.insert.run(agentsIndexedTo + 1, upTo)
    agentsIndexedTo = upTo
  }
  const shadowTables = (name: string) =>
    (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ESCAPE '\\'`).all(`${name.replace(/_/g, '\\_')}\\_%`) as { name: string }[]).map((r) => r.name)
  const fts: FtsPlan | null = deferred.length ? { file: `${db.name}.seed-fts`, indexes: deferred.map(({ trigger: _t, ...x }) => x) } : null

  // The worker's scratch database is attached now: ATTACH is refused inside a transaction.
  if (fts) {
    fs.rmSync(fts.file, { force: true })
    db.exec(`ATTACH DATABASE '${fts.file.replace(/'/g, "''")}' AS seed_fts`)
  }
  const cleanUp = () => {
    if (!fts) return
    db.exec('DETACH DATABASE seed_fts')
    fs.rmSync(fts.file, { force: true })
  }
  // Deferred: IMMEDIATE would also lock the attached scratch database the worker writes.
  db.exec('BEGIN')
  const dropped = [...counters.map((t) => t.name), ...textCounters.map((t) => t.name), ...gramKeepers.map((t) => t.name), ...deferred.map((x) => x.trigger), ...agentFts.map((x) => x.trigger)]
  for (const ix of indexes) db.exec(`DROP INDEX "${ix.name}"`)
  for (const name of dropped) db.exec(`DROP TRIGGER "${name}"`)

  return {
    fts,
    indexAgents,
    commit(ftsBuilt: boolean) {
      let t = performance.now()
      for (const c of counters) db.prepare(`UPDATE row_counts SET n = (SELECT count(*) FROM "${c.tbl}") WHERE name = ?`).run(c.counter)
      for (const ix of indexes) db.exec(ix.sql)
      if (textCounters.length) {
        db.exec(`UPDATE peripheral_texts SET n = coalesce(c.n, 0)
          FROM (SELECT t.id, (SELECT count(*) FROM peripherals WHERE vendor_text_id = t.id) + (SELECT count(*) FROM peripherals WHERE product_text_id = t.id) AS n
                FROM peripheral_texts t) AS c
          WHERE c.id = peripheral_texts.id`)
      }
      phase('build indexes', t)
      if (gramKeepers.length) {
        t = performance.now()
        buildAssetGrams(db)
        phase('count search grams', t)
      }
      t = performance.now()
      if (ftsBuilt) {
        // The worker's indexes, table by table: the same definitions, so the same format.
        // Writing an FTS5 table's own tables needs SQLite's defensive mode off for a moment.
        db.unsafeMode(true)
        try {
          for (const x of deferred) {
            for (const name of shadowTables(x.name)) {
              db.exec(`DELETE FROM main."${name}"`)
              db.exec(`INSERT INTO main."${name}" SELECT * FROM seed_fts."${name}"`)
            }
          }
        } finally {
          db.unsafeMode(false)
        }
        if (deferred.length) phase('copy full-text indexes', t)
      } else {
        for (const x of deferred) {
          db.prepare(x.bulkSql).run(firstPeripheralId)
          db.exec(`INSERT INTO "${x.name}" ("${x.name}") VALUES ('optimize')`)
        }
        if (deferred.length) phase('build full-text indexes', t)
      }
      for (const trigger of triggers) if (dropped.includes(trigger.name)) db.exec(trigger.sql)
      t = performance.now()
      db.exec('COMMIT')
      phase('commit', t)
      cleanUp()
      restore()
    },
    rollback() {
      if (db.inTransaction) db.exec('ROLLBACK')
      cleanUp()
      restore()
    },
  }
}

const EVENT_COLUMNS = `created_ms, event_code, severity, category, entity_id, description, details, hashtags, peripheral_icon,
  asset_key, asset_name, peripheral_asset_id, peripheral_vid, peripheral_pid`

/**
 * Writes the fleet's staged events (temp.seed_events) and the generated history into
 * `events` as one stream in time order (both are read in order: a merge, no sort of
 * millions of rows); answers how many.
 */
async function writeWithHistory(db: DB, history: { events: number; days: number; hosts: number; seed: number; now: number }, onEvents?: (written: number, total: number) => void): Promise<number> {
  db.exec('CREATE INDEX temp.seed_events_order ON seed_events (created_ms, seq)')
  const page = db
    .prepare<[number, number]>(`SELECT seq, ${EVENT_COLUMNS} FROM temp.seed_events
    WHERE (created_ms, seq) > (?, ?) ORDER BY created_ms, seq LIMIT 20000`)
    .raw()
  const insert = db.prepare(`INSERT INTO events (${EVENT_COLUMNS}) VALUES (${Array(14).fill('?').join(', ')})`)
  const total = history.events + (db.prepare('SELECT count(*) FROM temp.seed_events').pluck().get() as number)
  let buf = page.all(Number.MIN_SAFE_INTEGER, -1) as unknown[][]
  let at = 0
  const staged = (): unknown[] | null => {
    if (at === buf.length && buf.length) {
      const last = buf[buf.length - 1]
      buf = page.all(last[1] as number, last[0] as number) as unknown[][]
      at = 0
    }
    return at < buf.length ? buf[at] : null
  }
  let n = 0
  const put = (row: unknown[]) => {
    insert.run(row)
    if (++n % 50_000 === 0) onEvents?.(n, total)
  }
  for (const h of historyRows({ ...history })) {
    for (let s = staged(); s && (s[1] as number) <= (h[0] as number); s = staged()) {
      put(s.slice(1))
      at++
    }
    put(h)
    if (n % 50_000 === 0) await new Promise((resolve) => setImmediate(resolve))
  }
  for (let s = staged(); s; s = staged()) {
    put(s.slice(1))
    at++
  }
  onEvents?.(n, total)
  return n
}

/**
 * Seeds `opts.agents` more agents into an open database (migrated by openDatabase), which
 * nothing else may use meanwhile. All or nothing: after an error the database is as it
 * was; after `opts.signal` aborts, it holds the agents written so far, complete.
 */
export async function seedFleet(db: DB, opts: SeedOptions): Promise<SeedResult> {
  const t0 = performance.now()
  const chunkSize = opts.chunk ?? 500
  const phases: Record<string, number> = {}
  const phase = (name: string, since: number) => {
    phases[name] = (phases[name] ?? 0) + performance.now() - since
  }
  const ctx: GenContext = {
    seed: opts.seed ?? 42,
    perAgent: opts.peripheralsPerAgent ?? 10,
    now: opts.now ?? Date.now(),
    catalogue: loadCatalogue(db),
    license: {
      accountName: process.env.PRIME_LICENSE_ACCOUNT || 'Prime',
      accountId: process.env.PRIME_LICENSE_ACCOUNT_ID || null,
      expirationMs: process.env.PRIME_LICENSE_EXPIRES ? Date.parse(process.env.PRIME_LICENSE_EXPIRES) : null,
    },
    firstIndex: (db.prepare('SELECT count(*) AS n FROM agents').get() as { n: number }).n,
    firstId: (db.prepare('SELECT coalesce(max(id), 0) + 1 AS n FROM agents').get() as { n: number }).n,
    firstPeripheralId: (db.prepare('SELECT coalesce(max(id), 0) + 1 AS n FROM peripherals').get() as { n: number }).n,
  }

  if (opts.history && ctx.firstIndex > 0) throw new Error('event history goes with a new fleet only: leave out --append, or use a fresh --data-dir')
  const insertAgent = db.prepare(AGENT_INSERT)
  const insertPeripheral = db.prepare(PERIPHERAL_INSERT)
  const insertApproval = db.prepare('INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (?, ?, ?, ?, ?, ?)')
  // Events wait here and go to `events` in time order at the end, so that event ids
  // increase with their time, as they do when a live server records them.
  db.exec(`CREATE TEMP TABLE IF NOT EXISTS seed_events (created_ms INTEGER, seq INTEGER, event_code TEXT, severity INTEGER,
    category TEXT, entity_id TEXT, description TEXT, details TEXT, hashtags TEXT, peripheral_icon INTEGER, asset_key TEXT,
    asset_name TEXT, peripheral_asset_id TEXT, peripheral_vid TEXT, peripheral_pid TEXT)`)
  db.exec('DELETE FROM temp.seed_events')
  const insertEvent = db.prepare(`INSERT INTO temp.seed_events VALUES (${Array(15).fill('?').join(', ')})`)

  // Interned as db/gateway.ts internPeripheralTexts does, with a cache: a failed chunk fails the whole seed.
  const textIds = new Map<string, number>()
  for (const r of db.prepare('SELECT id, kind, text FROM peripheral_texts').all() as { id: number; kind: string; text: string }[]) textIds.set(`${r.kind}\0${r.text}`, r.id)
  const addText = db.prepare('INSERT INTO peripheral_texts (kind, text) VALUES (?, ?)')
  const textId = (kind: 'vendor' | 'product', text: unknown): number | null => {
    if (typeof text !== 'string') return null
    const key = `${kind}\0${text}`
    let id = textIds.get(key)
    if (id === undefined) {
      id = Number(addText.run(kind, text).lastInsertRowid)
      textIds.set(key, id)
    }
    return id
  }

  let agents = 0,
    peripherals = 0,
    approvals = 0,
    events = 0
  // Inside the load's one transaction (a savepoint per chunk would only add journal writes).
  const write = (c: Chunk) => {
    let lastAgent = 0
    for (const row of c.agents) lastAgent = Number(insertAgent.run(row).lastInsertRowid)
    load.indexAgents(lastAgent)
    for (const row of c.approvals) insertApproval.run(row)
    for (const row of c.peripherals) {
      row[VENDOR_AT] = textId('vendor', row[VENDOR_AT])
      row[PRODUCT_AT] = textId('product', row[PRODUCT_AT])
      insertPeripheral.run(row)
    }
    for (const row of c.events) insertEvent.run(row)
  }

  const load = beginBulkLoad(db, ctx.firstId, ctx.firstPeripheralId, phase)
  // A larger young generation: the generator allocates many short-lived strings.
  const worker = new Worker(generatorModule(), {
    workerData: { seedWorker: true, ctx, total: opts.agents, chunk: chunkSize, fts: load.fts },
    resourceLimits: { maxYoungGenerationSizeMb: 64 },
  })
  const queue: Chunk[] = []
  let wake: (() => void) | null = null,
    failure: Error | null = null,
    exited = false
  const fts: { state: 'building' | 'built' | 'failed' } = { state: load.fts ? 'building' : 'failed' }
  worker.on('message', (m: WorkerMessage) => {
    if ('chunk' in m) queue.push(m.chunk)
    else if ('ftsBuilt' in m) fts.state = 'built'
    else if ('failed' in m) failure = new Error(`the generator failed: ${m.failed}`)
    else {
      fts.state = 'failed'
      console.error(`The worker could not build the peripherals' full-text indexes (${m.ftsFailed}); building them here.`)
    }
    wake?.()
  })
  worker.on('error', (err) => {
    failure = new Error(`the generator failed: ${(err as Error)?.message ?? JSON.stringify(err)}`)
    wake?.()
  })
  worker.on('exit', () => {
    exited = true
    wake?.()
  })
  const waitForWorker = async () => {
    const waited = performance.now()
    await new Promise<void>((resolve) => {
      wake = resolve
    })
    wake = null
    phase('wait for the worker', waited)
  }
  try {
    while (agents < opts.agents && !opts.signal?.aborted) {
      if (failure) throw failure
      const c = queue.shift()
      if (!c) {
        if (exited) throw new Error('the generator stopped early')
        await waitForWorker()
        continue
      }
      worker.postMessage('more')
      const t = performance.now()
      write(c)
      phase('write rows', t)
      agents += c.agents.length
      peripherals += c.peripherals.length
      approvals += c.approvals.length
      opts.onProgress?.(agents, peripherals)
      // Let signals and timers in between chunks (the queue is rarely empty).
      await new Promise((resolve) => setImmediate(resolve))
    }
    const t = performance.now()
    const lastEvent = () => db.prepare('SELECT coalesce(max(id), 0) FROM events').pluck().get() as number
    const firstEvent = lastEvent() + 1
    events =
      opts.history && agents > 0
        ? await writeWithHistory(db, { ...opts.history, hosts: agents, seed: ctx.seed, now: ctx.now }, opts.onEvents)
        : db.prepare(`INSERT INTO events (${EVENT_COLUMNS}) SELECT ${EVENT_COLUMNS} FROM temp.seed_events ORDER BY created_ms, seq`).run().changes
    db.exec('DELETE FROM temp.seed_events')
    raiseRisks(db, firstEvent, lastEvent())
    passOverEvents(db, firstEvent, lastEvent())
    phase('write events', t)
    // The worker's index holds every generated agent: usable only if all were written.
    const complete = agents === opts.agents
    while (complete && fts.state === 'building' && !failure && !exited) await waitForWorker()
    await worker.terminate()
    load.commit(complete && fts.state === 'built')
  } catch (err) {
    await worker.terminate()
    load.rollback()
    throw err
  } finally {
    db.exec('DROP TABLE IF EXISTS temp.seed_events')
  }

  const t = performance.now()
  db.exec('ANALYZE')
  db.pragma('wal_checkpoint(TRUNCATE)')
  phase('analyze', t)

  return { agents, peripherals, approvals, events, ms: performance.now() - t0, phases }
}

/**
 * Recomputes `sample` random agents with db/agent-state.ts (inside a savepoint that is
 * rolled back) and answers the differences from what the seed stored; also looks each
 * one (and a peripheral of it) up in the full-text indexes.
 */
export function checkSeed(db: DB, sample = 100): { checked: number; mismatches: string[] } {
  const state = agentStateRepo(db)
  const ids = (db.prepare('SELECT id FROM agents ORDER BY random() LIMIT ?').all(sample) as { id: number }[]).map((r) => r.id)
  const agentRow = db.prepare('SELECT * FROM agents WHERE id = ?')
  const peripheralRows = db.prepare('SELECT * FROM peripherals WHERE agent_id = ? ORDER BY id')
  const found = db.prepare('SELECT count(*) AS n FROM agents_fts WHERE agents_fts MATCH ? AND rowid = ?')
  const hasDeviceIndex = !!db.prepare(`SELECT 1 FROM sqlite_master WHERE name = 'peripherals_fts'`).get()
  const foundDevice = hasDeviceIndex ? db.prepare('SELECT count(*) AS n FROM peripherals_fts WHERE peripherals_fts MATCH ? AND rowid = ?') : null
  const quoted = (text: unknown) => `"${String(text).replace(/"/g, '""')}"`
  const mismatches: string[] = []
  // rev counts writes (migration 020): the recomputation is one, whatever it wrote.
  const diff = (what: string, a: Record<string, unknown>, b: Record<string, unknown>) => {
    for (const k of Object.keys(a)) if (k !== 'rev' && a[k] !== b[k]) mismatches.push(`${what}.${k}: seeded ${JSON.stringify(a[k])}, recomputed ${JSON.stringify(b[k])}`)
  }
  for (const id of ids) {
    const before = { agent: agentRow.get(id) as Record<string, unknown>, peripherals: peripheralRows.all(id) as Record<string, unknown>[] }
    // The full-text indexes were built apart from the rows: they must find them.
    const uuid = before.agent.uuid
    if ((found.get(`{uuid} : ${quoted(uuid)}`, id) as { n: number }).n !== 1) mismatches.push(`agent ${id}: agents_fts does not find uuid ${uuid}`)
    const p = before.peripherals[0]
    if (foundDevice && p && (foundDevice.get(quoted(p.device_id), p.id) as { n: number }).n !== 1) mismatches.push(`peripheral ${p.id}: peripherals_fts does not find ${p.device_id}`)
    db.exec('SAVEPOINT seed_check')
    try {
      state.refreshAgent(id)
      const after = { agent: agentRow.get(id) as Record<string, unknown>, peripherals: peripheralRows.all(id) as Record<string, unknown>[] }
      diff(`agent ${id}`, before.agent, after.agent)
      before.peripherals.forEach((p, i) => diff(`agent ${id} peripheral ${p.id}`, p, after.peripherals[i]))
    } finally {
      db.exec('ROLLBACK TO seed_check; RELEASE seed_check')
    }
  }
  // The texts' peripheral counts are set once at the end of a load (migration 017).
  const wrongCounts = db
    .prepare(`SELECT * FROM (SELECT t.id, t.n, (SELECT count(*) FROM peripherals WHERE vendor_text_id = t.id)
    + (SELECT count(*) FROM peripherals WHERE product_text_id = t.id) AS actual FROM peripheral_texts t) WHERE n <> actual LIMIT 3`)
    .all() as { id: number; n: number; actual: number }[]
  for (const w of wrongCounts) mismatches.push(`peripheral text ${w.id}: counts ${w.n} peripherals, ${w.actual} name it`)
  // And the agents' flag totals (migration 018), kept by triggers as the agents were written.
  for (const flag of ['has_unapproved', 'has_vulnerable', 'has_attack_tool', 'vulnerable_or_wlv']) {
    const kept = db.prepare('SELECT n FROM row_counts WHERE name = ?').pluck().get(`agents.${flag}`)
    const actual = db.prepare(`SELECT count(*) FROM agents WHERE ${flag} = 1`).pluck().get()
    if (kept !== undefined && kept !== actual) mismatches.push(`agents.${flag}: total ${kept}, ${actual} agents flagged`)
  }
  return { checked: ids.length, mismatches }
}

async function main() {
  const { values } = parseArgs({
    options: {
      agents: { type: 'string', default: '1000' },
      'peripherals-per-agent': { type: 'string', default: '10' },
      'data-dir': { type: 'string', default: process.env.PRIME_DATA_DIR || './data' },
      seed: { type: 'string', default: '42' },
      append: { type: 'boolean', default: false },
      'check-sample': { type: 'string', default: '100' },
      events: { type: 'string', default: '0' },
      days: { type: 'string', default: '365' },
    },
  })
  const num = (name: string, raw: string, min: number, max: number) => {
    const n = Number(raw)
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`--${name} must be an integer from ${min} to ${max}, got "${raw}"`)
    return n
  }
  const agents = num('agents', values.agents, 1, 10_000_000)
  const perAgent = num('peripherals-per-agent', values['peripherals-per-agent'], 0, 500)
  const seed = num('seed', values.seed, 0, 2 ** 31 - 1)
  const sample = num('check-sample', values['check-sample'], 0, 100_000)
  const history = { events: num('events', values.events, 0, 100_000_000), days: num('days', values.days, 1, 3650) }
  if (history.events > 0 && values.append) throw new Error('--events goes with a new fleet only: leave out --append, or use a fresh --data-dir')
  const dataDir = path.resolve(values['data-dir'])
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })
  const file = path.join(dataDir, 'prime.sqlite')

  const t0 = performance.now()
  const db = openDatabase(file)
  const existing = (db.prepare('SELECT count(*) AS n FROM agents').get() as { n: number }).n
  if (existing > 0 && !values.append) {
    db.close()
    throw new Error(`${file} already holds ${existing} agents: pass --append to add more, or use a fresh --data-dir`)
  }
  const bar = new cliProgress.SingleBar(
    {
      format: 'seeding |{bar}| {percentage}% | {value}/{total} agents | {peripherals} peripherals | {duration_formatted} elapsed, ETA {eta_formatted}',
      stream: process.stderr,
      hideCursor: true,
      // Ctrl-C ends the load after the current chunk (below), not the process.
      gracefulExit: false,
    },
    cliProgress.Presets.shades_classic,
  )
  const stop = new AbortController()
  process.once('SIGINT', () => stop.abort())
  bar.start(agents, 0, { peripherals: 0 })
  let result: SeedResult
  try {
    let events: cliProgress.SingleBar | null = null
    result = await seedFleet(db, {
      agents,
      peripheralsPerAgent: perAgent,
      seed,
      signal: stop.signal,
      onProgress: (a, p) => bar.update(a, { peripherals: p }),
      history: history.events > 0 ? history : undefined,
      onEvents: (done, total) => {
        if (!events) {
          bar.stop()
          events = new cliProgress.SingleBar(
            { format: 'events  |{bar}| {percentage}% | {value}/{total} events in time order | {duration_formatted} elapsed, ETA {eta_formatted}', stream: process.stderr, hideCursor: true },
            cliProgress.Presets.shades_classic,
          )
          events.start(total, 0)
        }
        events.update(done)
      },
    })
    ;(events as cliProgress.SingleBar | null)?.stop()
    if (history.events > 0 && !stop.signal.aborted) {
      // The query index, as seed-events builds it (the server would otherwise do it in the background after its start).
      const t = performance.now()
      const indexing = new cliProgress.SingleBar(
        { format: 'indexing |{bar}| {percentage}% | {value}/{total} events | {duration_formatted} elapsed, ETA {eta_formatted}', stream: process.stderr, hideCursor: true },
        cliProgress.Presets.shades_classic,
      )
      indexing.start(result.events, 0)
      await indexEvents(db, (done, total) => {
        indexing.setTotal(total)
        indexing.update(done)
      })
      indexing.stop()
      db.exec('ANALYZE')
      db.pragma('wal_checkpoint(TRUNCATE)')
      result.phases['index events'] = performance.now() - t
    }
  } finally {
    bar.stop()
  }
  const loaded = performance.now() - t0
  const check = checkSeed(db, sample)
  db.close()

  const s = (ms: number) => (ms / 1000).toFixed(1) + ' s'
  if (stop.signal.aborted) console.log('Interrupted: stopped after the last complete chunk.')
  console.log(`Seeded ${result.agents} agents, ${result.peripherals} peripherals, ${result.approvals} approvals and ${result.events} events into ${file}`)
  console.log(
    `  ${Object.entries(result.phases)
      .map(([k, v]) => `${k} ${s(v)}`)
      .join(', ')}`,
  )
  if (check.mismatches.length) {
    console.error(`Check FAILED: ${check.mismatches.length} differences from db/agent-state.ts in ${check.checked} sampled agents:`)
    for (const line of check.mismatches.slice(0, 20)) console.error('  ' + line)
    process.exitCode = 1
  } else {
    console.log(`Check: ${check.checked} sampled agents match what db/agent-state.ts computes.`)
  }
  console.log(`Elapsed: ${s(loaded)} (check ${s(performance.now() - t0 - loaded)})`)
}

if (isMainThread && process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  main().catch((err) => {
    console.error(err instanceof Error ? err.message : err)
    process.exit(1)
  })
}

/**
 * The module the generator thread runs: this one, or from its TypeScript source (as the tests
 * import it) the compiled one when built (run-tests builds first): Node 20 gives a worker
 * thread none of the process's TypeScript loader (tsx).
 */
function generatorModule(): URL {
  if (!import.meta.url.endsWith('.ts')) return new URL(import.meta.url)
  const compiled = new URL('../dist/scripts/seed.js', import.meta.url)
  return fs.existsSync(compiled) ? compiled : new URL(import.meta.url)
}
