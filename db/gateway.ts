// What the agent gateway reads and writes: enrollment, check-ins (agent state and
// peripherals), command delivery and results, and the sweeper's timeouts.
import type { Statement } from 'better-sqlite3'
import type { DB } from './index.js'
import type { CheckInTimeWrites } from './answer-cache.js'
import type { PeripheralRow } from './peripherals.js'

/** What an agent's credential resolves to on every gateway call (one indexed lookup). */
export interface GatewayAgent {
  id: number
  uuid: string
  host_identifier: string
  local_ip_address: string | null
  connection_status: 'Connected' | 'Disconnected'
  state_digest: string | null
}

export interface AgentRow extends GatewayAgent {
  machine_id: string
  os_version: string | null
  manufacturer: string | null
  pc_model: string | null
  operational_status: 'Armed' | 'Free'
  service_version: string | null
  kb_driver_version: string | null
  last_updated_ms: number | null
  license_status: 'Activated' | 'Pending' | 'Expired' | 'Invalid'
  license_account_id: string | null
  running_mode: string | null
  switch_ip: string | null
  switch_name: string | null
  port_id: string | null
  port_name: string | null
}

export interface NewAgent {
  uuid: string
  machineId: string
  credentialHash: string
  enrolledMs: number
  hostIdentifier: string
  licenseStatus: AgentRow['license_status']
  expirationMs: number | null
  licenseAccountName: string
  checkInSeconds: number
}

/** Everything a check-in sets on the agent row. */
export interface AgentState {
  hostIdentifier: string
  localIpAddress: string | null
  osVersion: string | null
  manufacturer: string | null
  pcModel: string | null
  nicsJson: string
  nicsText: string | null
  ipAddresses: string | null
  operationalStatus: 'Armed' | 'Free'
  isSystemLocked: number
  serviceVersion: string | null
  kbDriverVersion: string | null
  licenseStatus: AgentRow['license_status']
  licenseAccountId: string | null
  modelTooltip: string | null
  runningMode: string | null
  switchIp: string | null
  switchName: string | null
  portId: string | null
  portName: string | null
  ethernetsCount: number
  hashtags: string | null
  loggedOnUsers: string
  checkInSeconds: number
  lastUpdatedMs: number
  stateDigest: string
}

/** A stored peripheral of an agent, enough to compare it and to describe it in an event. */
export interface KnownPeripheral {
  id: number
  device_id: string
  present: number
  vid: string
  pid: string
  gui_vid: string | null
  gui_pid: string | null
  serial_number: string | null
  gui_serial: string | null
  dev_icon: number
}

/** A stored peripheral with every column a report sets (to skip writes that change nothing). */
export interface StoredPeripheral
  extends KnownPeripheral,
    Pick<PeripheralRow, 'description' | 'status' | 'manufacturer' | 'caption' | 'class_code' | 'subclass_code' | 'protocol_code' | 'hierarchy' | 'parent_device_id' | 'is_disabled'> {
  /** The columns a report sets bar the device id and presence, as SIGNATURE writes them (when read so). */
  signature?: string
}

/**
 * A stored peripheral's reported columns as one JSON array, written by SQLite (json_array)
 * as JSON.stringify writes a report's (signatureOf): equal texts are equal values. A report
 * is compared by it, and the columns are taken apart only for a peripheral an event
 * describes: each value read costs better-sqlite3 about as much as the row's lookup.
 */
const SIGNATURE = `json_array(vid, pid, gui_vid, gui_pid, serial_number, gui_serial, dev_icon, description, status, manufacturer, caption,
  class_code, subclass_code, protocol_code, hierarchy, parent_device_id, is_disabled)`

export function signatureOf(v: ReportedPeripheral): string {
  return JSON.stringify([
    v.vid,
    v.pid,
    v.guiVid,
    v.guiPid,
    v.serialNumber,
    v.guiSerial,
    v.devIcon,
    v.description,
    v.status,
    v.manufacturer,
    v.caption,
    v.classCode,
    v.subclassCode,
    v.protocolCode,
    v.hierarchy,
    v.parentDeviceId,
    v.isDisabled,
  ])
}

/** A peripheral read with its signature: the other columns are taken from it when first asked for. */
class SignedPeripheral implements StoredPeripheral {
  #columns: unknown[] | undefined
  constructor(
    readonly id: number,
    readonly device_id: string,
    readonly present: number,
    readonly signature: string,
  ) {}
  #at(i: number) {
    this.#columns ??= JSON.parse(this.signature) as unknown[]
    return this.#columns[i]
  }
  get vid() {
    return this.#at(0) as string
  }
  get pid() {
    return this.#at(1) as string
  }
  get gui_vid() {
    return this.#at(2) as string | null
  }
  get gui_pid() {
    return this.#at(3) as string | null
  }
  get serial_number() {
    return this.#at(4) as string | null
  }
  get gui_serial() {
    return this.#at(5) as string | null
  }
  get dev_icon() {
    return this.#at(6) as number
  }
  get description() {
    return this.#at(7) as string | null
  }
  get status() {
    return this.#at(8) as string | null
  }
  get manufacturer() {
    return this.#at(9) as string | null
  }
  get caption() {
    return this.#at(10) as string | null
  }
  get class_code() {
    return this.#at(11) as string | null
  }
  get subclass_code() {
    return this.#at(12) as string | null
  }
  get protocol_code() {
    return this.#at(13) as string | null
  }
  get hierarchy() {
    return this.#at(14) as string | null
  }
  get parent_device_id() {
    return this.#at(15) as string | null
  }
  get is_disabled() {
    return this.#at(16) as number
  }
}

/** A peripheral as stored from a report, with what the server derives from it. */
export interface PeripheralValues {
  deviceId: string
  vid: string
  pid: string
  serialNumber: string | null
  description: string | null
  status: string | null
  manufacturer: string | null
  caption: string | null
  guiVid: string | null
  guiPid: string | null
  guiSerial: string | null
  devIcon: number
  classCode: string | null
  subclassCode: string | null
  protocolCode: string | null
  hierarchy: string | null
  parentDeviceId: string | null
  isDisabled: number
  present: number
  vendorTextId: number | null
  productTextId: number | null
}

/** A reported peripheral and what the server derives from it, before its texts are interned. */
export type ReportedPeripheral = Omit<PeripheralValues, 'vendorTextId' | 'productTextId'>

/** The writes that make an agent's stored peripherals what its check-in reported. */
export interface PeripheralChanges {
  /** In the report's order: a stored one's id and row, or null for one new to the agent. */
  reported: { id: number | null; values: ReportedPeripheral; stored?: StoredPeripheral }[]
  /** Stored ones present before and left out of the report. */
  absent: number[]
}

/** A present peripheral with its flags, as events describe it. */
export interface PresentPeripheral extends Omit<KnownPeripheral, 'id' | 'present'> {
  approved: number
  is_attack_tool: number
  is_vulnerable: number
  catalogue_name: string | null
}

export interface CommandRow {
  id: number
  agent_id: number
  type: 'SetMode' | 'UpdatePolicy' | 'UpdateAgent' | 'FetchDebugLogs'
  parameters: string
  status: 'Pending' | 'Delivered' | 'Succeeded' | 'Failed' | 'Cancelled'
  created_ms: number
  created_by: string
  result_message: string | null
}

/** A re-enrollment awaiting an Administrator's approval. */
export interface HeldReEnrollment {
  agent_id: number
  /** A random UUID, new with each enrollment held (a replacement gets its own). */
  id: string
  credential_hash: string
  host_identifier: string
  source_ip: string | null
  requested_ms: number
}

export interface SweptAgent {
  id: number
  uuid: string
  host_identifier: string
  local_ip_address: string | null
  last_updated_ms: number
}

export interface OverdueCommand {
  id: number
  type: CommandRow['type']
  agent_id: number
  uuid: string
  host_identifier: string
  local_ip_address: string | null
}

/**
 * The searchable vendor and product texts of a peripheral, lower-case, its names joined by
 * ` | ` (absent ones left out), so that "contains" never matches across two names. Vendor:
 * the shown vendor name and the reported manufacturer; product: the shown product name,
 * the description and the caption.
 */
export function peripheralTexts(p: { guiVid: string | null; manufacturer: string | null; guiPid: string | null; description: string | null; caption: string | null }) {
  const join = (parts: (string | null)[]) =>
    parts
      .filter((s): s is string => !!s)
      .join(' | ')
      .toLowerCase() || null
  return { vendor: join([p.guiVid, p.manufacturer]), product: join([p.guiPid, p.description, p.caption]) }
}

/**
 * Interns vendor and product texts into peripheral_texts and answers their ids: the one
 * way peripherals get their vendor_text_id and product_text_id (the gateway and the seed
 * script both use it). No cache: an id cached from a transaction that rolled back would
 * point nowhere.
 */
export function internPeripheralTexts(db: DB) {
  const find = db.prepare<[string, string], { id: number }>('SELECT id FROM peripheral_texts WHERE kind = ? AND text = ?')
  const add = db.prepare<[string, string]>('INSERT INTO peripheral_texts (kind, text) VALUES (?, ?)')
  const intern = (kind: 'vendor' | 'product', text: string | null): number | null => {
    if (text === null) return null
    return find.get(kind, text)?.id ?? Number(add.run(kind, text).lastInsertRowid)
  }
  return (p: Parameters<typeof peripheralTexts>[0]) => {
    const t = peripheralTexts(p)
    return { vendorTextId: intern('vendor', t.vendor), productTextId: intern('product', t.product) }
  }
}

/**
 * The parameters of a peripheral's insert or update, written out: Node 20 takes over ten
 * microseconds to spread an object this wide into another (or to Object.assign it), and a
 * check-in writes a few of them.
 */
function peripheralParams(
  v: ReportedPeripheral,
  t: { vendorTextId: number | null; productTextId: number | null },
  id: number | null,
  agentId: number,
  agentUuid: string,
  now: number,
  previousMs: number,
) {
  return {
    deviceId: v.deviceId,
    vid: v.vid,
    pid: v.pid,
    serialNumber: v.serialNumber,
    description: v.description,
    status: v.status,
    manufacturer: v.manufacturer,
    caption: v.caption,
    guiVid: v.guiVid,
    guiPid: v.guiPid,
    guiSerial: v.guiSerial,
    devIcon: v.devIcon,
    classCode: v.classCode,
    subclassCode: v.subclassCode,
    protocolCode: v.protocolCode,
    hierarchy: v.hierarchy,
    parentDeviceId: v.parentDeviceId,
    isDisabled: v.isDisabled,
    present: v.present,
    vendorTextId: t.vendorTextId,
    productTextId: t.productTextId,
    id,
    agentId,
    agentUuid,
    now,
    previousMs,
  }
}

/** Every column a report sets, bar the presence, is as stored (both backends' check-ins). */
export function unchanged(s: StoredPeripheral, v: ReportedPeripheral): boolean {
  if (s.signature !== undefined) return s.device_id === v.deviceId && s.signature === signatureOf(v)
  return (
    s.device_id === v.deviceId &&
    s.vid === v.vid &&
    s.pid === v.pid &&
    s.serial_number === v.serialNumber &&
    s.description === v.description &&
    s.status === v.status &&
    s.manufacturer === v.manufacturer &&
    s.caption === v.caption &&
    s.gui_vid === v.guiVid &&
    s.gui_pid === v.guiPid &&
    s.gui_serial === v.guiSerial &&
    s.dev_icon === v.devIcon &&
    s.class_code === v.classCode &&
    s.subclass_code === v.subclassCode &&
    s.protocol_code === v.protocolCode &&
    s.hierarchy === v.hierarchy &&
    s.parent_device_id === v.parentDeviceId &&
    s.is_disabled === v.isDisabled
  )
}

/** The agent columns a check-in sets (AgentState's), bar its time and digest, which every one sets. */
const STATE_COLUMNS: [Exclude<keyof AgentState, 'lastUpdatedMs' | 'stateDigest'>, string][] = [
  ['hostIdentifier', 'host_identifier'],
  ['localIpAddress', 'local_ip_address'],
  ['osVersion', 'os_version'],
  ['manufacturer', 'manufacturer'],
  ['pcModel', 'pc_model'],
  ['nicsJson', 'nics_json'],
  ['nicsText', 'nics_text'],
  ['ipAddresses', 'ip_addresses'],
  ['operationalStatus', 'operational_status'],
  ['isSystemLocked', 'is_system_locked'],
  ['serviceVersion', 'service_version'],
  ['kbDriverVersion', 'kb_driver_version'],
  ['licenseStatus', 'license_status'],
  ['licenseAccountId', 'license_account_id'],
  ['modelTooltip', 'model_tooltip'],
  ['runningMode', 'running_mode'],
  ['switchIp', 'switch_ip'],
  ['switchName', 'switch_name'],
  ['portId', 'port_id'],
  ['portName', 'port_name'],
  ['ethernetsCount', 'ethernets_count'],
  ['hashtags', 'hashtags'],
  ['loggedOnUsers', 'logged_on_users'],
  ['checkInSeconds', 'check_in_interval_s'],
]

/** A check-in's state for its agent, and the agent's row as read before it (every column). */
export interface StateWrite {
  id: number
  before: AgentRow
  state: AgentState
}

/** What applyPeripheralsMany changed beyond seen times: peripheral ids, and the agents they belong to. */
export interface PeripheralsWritten {
  /** Inserted, or rewritten with what the agent reported. */
  written: number[]
  /** Present again, or no longer present; nothing else changed. */
  moved: number[]
  agents: number[]
}

/** A check-in's peripheral writes for its agent (applyPeripheralsMany's items). */
export interface PeripheralWrite {
  agentId: number
  agentUuid: string
  changes: PeripheralChanges
  now: number
  previousMs: number
}

/** Check-ins' states per UPDATE statement (3 parameters and one per changed column each). */
const STATES_PER_UPDATE = 64

/** Peripherals' presence or last sight (2 or 3 parameters each) per UPDATE statement. */
const PRESENCE_PER_UPDATE = 128

/** Rows of several agents, by agent, in the order read (agents without a row left out). */
function byAgent<T extends { agent_id: number }>(rows: T[]): Map<number, T[]> {
  const out = new Map<number, T[]>()
  for (const r of rows) {
    const list = out.get(r.agent_id)
    if (list) list.push(r)
    else out.set(r.agent_id, [r])
  }
  return out
}

export function gatewayRepo(db: DB, checkInTimes: CheckInTimeWrites) {
  const texts = internPeripheralTexts(db)
  const byCredential = db.prepare<[string], GatewayAgent>('SELECT id, uuid, host_identifier, local_ip_address, connection_status, state_digest FROM agents WHERE credential_hash = ?')
  const byMachineId = db.prepare<[string], { id: number; uuid: string; credential_hash: string | null }>('SELECT id, uuid, credential_hash FROM agents WHERE machine_id = ?')
  const byUuid = db.prepare<[string], AgentRow>('SELECT * FROM agents WHERE uuid = ?')
  const hold = db.prepare(
    `INSERT INTO agent_reenrollments (agent_id, id, credential_hash, host_identifier, source_ip, requested_ms)
     VALUES (@agentId, @id, @credentialHash, @hostIdentifier, @sourceIp, @requestedMs)
     ON CONFLICT (agent_id) DO UPDATE SET id = excluded.id, credential_hash = excluded.credential_hash, host_identifier = excluded.host_identifier,
       source_ip = excluded.source_ip, requested_ms = excluded.requested_ms`,
  )
  const held = db.prepare<[number], HeldReEnrollment>('SELECT * FROM agent_reenrollments WHERE agent_id = ?')
  const heldByCredential = db.prepare<[string], HeldReEnrollment>('SELECT * FROM agent_reenrollments WHERE credential_hash = ?')
  const dropHeld = db.prepare<[number]>('DELETE FROM agent_reenrollments WHERE agent_id = ?')
  // The agents less the others (migration 014: only they are indexed).
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const activated = db.prepare<[], { n: number }>(
    `SELECT (SELECT n FROM row_counts WHERE name = 'agents')
       - (SELECT count(*) FROM agents INDEXED BY agents_license_unactivated WHERE license_status <> 'Activated') AS n`,
  )
  const insertAgent = db.prepare(
    `INSERT INTO agents (uuid, machine_id, credential_hash, enrolled_ms, host_identifier, license_status, expiration_ms,
       license_account_name, check_in_interval_s)
     VALUES (@uuid, @machineId, @credentialHash, @enrolledMs, @hostIdentifier, @licenseStatus, @expirationMs,
       @licenseAccountName, @checkInSeconds)`,
  )
  // A re-enrolled agent goes through the full comparison at its next check-in.
  const rotate = db.prepare<[string, string, number]>('UPDATE agents SET credential_hash = ?, host_identifier = ?, state_digest = NULL WHERE id = ?')
  const agent = db.prepare<[number], AgentRow>('SELECT * FROM agents WHERE id = ?')
  const heartbeat = db.prepare<[number, number]>('UPDATE agents SET last_updated_ms = max(coalesce(last_updated_ms, 0), ?) WHERE id = ?')
  // A group's check-ins in one statement per set of changed columns (most groups: one). A
  // column left out of the SET keeps its indexes untouched (the agent row carries about twenty);
  // one new rev for the rows (migration 032), as the per-row trigger would give each.
  const agentsById = db.prepare<[string], AgentRow>('SELECT * FROM agents WHERE id IN (SELECT value FROM json_each(?))')
  // Bound VALUES (id, time, digest, then the changed columns), STATES_PER_UPDATE agents a
  // statement, OR FAIL, and no SQL function (the later time by CASE, not max()): a statement
  // of several rows on a table with triggers that calls a function makes SQLite keep a
  // statement journal of every page it rewrites (db/events.ts); an error undoes the caller's
  // transaction instead.
  const statesOf = new Map<string, Statement<unknown[]>>()
  const statesStatement = (columns: string[], rows: number) => {
    const key = `${rows}:${columns.join(',')}`
    let st = statesOf.get(key)
    if (st === undefined) {
      const row = `(${Array(3 + columns.length)
        .fill('?')
        .join(', ')})`
      st = db.prepare<unknown[]>(
        `UPDATE OR FAIL agents SET ${columns.map((c, i) => `${c} = x.column${i + 4}, `).join('')}
           last_updated_ms = CASE WHEN coalesce(last_updated_ms, 0) >= x.column2 THEN coalesce(last_updated_ms, 0) ELSE x.column2 END,
           state_digest = x.column3, rev = ?
         FROM (VALUES ${Array(rows).fill(row).join(', ')}) AS x
         WHERE agents.id = x.column1`,
      )
      // One statement per set of columns and number of rows: few sets in practice, but bounded.
      if (statesOf.size >= 256) statesOf.clear()
      statesOf.set(key, st)
    }
    return st
  }

  const peripheralColumns = `device_id = @deviceId, vid = @vid, pid = @pid, serial_number = @serialNumber, description = @description,
    status = @status, manufacturer = @manufacturer, caption = @caption, gui_vid = @guiVid, gui_pid = @guiPid, gui_serial = @guiSerial,
    dev_icon = @devIcon, class_code = @classCode, subclass_code = @subclassCode, protocol_code = @protocolCode, hierarchy = @hierarchy,
    parent_device_id = @parentDeviceId, is_disabled = @isDisabled, present = @present, vendor_text_id = @vendorTextId,
    product_text_id = @productTextId`
  const insertPeripheral = db.prepare(
    `INSERT INTO peripherals (agent_id, agent_uuid, device_id, vid, pid, serial_number, description, status, manufacturer, caption,
       gui_vid, gui_pid, gui_serial, dev_icon, class_code, subclass_code, protocol_code, hierarchy, parent_device_id, is_disabled,
       present, vendor_text_id, product_text_id, first_seen_ms, last_seen_ms)
     VALUES (@agentId, @agentUuid, @deviceId, @vid, @pid, @serialNumber, @description, @status, @manufacturer, @caption,
       @guiVid, @guiPid, @guiSerial, @devIcon, @classCode, @subclassCode, @protocolCode, @hierarchy, @parentDeviceId, @isDisabled,
       @present, @vendorTextId, @productTextId, @now, @now)`,
  )
  const updatePeripheral = db.prepare(
    `UPDATE peripherals SET ${peripheralColumns},
       last_seen_ms = CASE WHEN @present THEN @now WHEN present THEN max(last_seen_ms, @previousMs) ELSE last_seen_ms END
     WHERE id = @id`,
  )
  const peripheralCount = db.prepare<[number], { n: number }>('SELECT count(*) AS n FROM peripherals WHERE agent_id = ?')
  const dropOldestAbsent = db.prepare<[number, number]>(
    `DELETE FROM peripherals WHERE id IN
       (SELECT id FROM peripherals WHERE agent_id = ? AND NOT present ORDER BY last_seen_ms, id LIMIT ?)`,
  )
  // As arrays, the reported columns as one text (SIGNATURE): better-sqlite3 sets an object's
  // properties one by one by name, and each value it hands over costs about as much as a row.
  const knownOf = db
    .prepare<[string], [number, number, string, number, string]>(`SELECT agent_id, id, device_id, present, ${SIGNATURE} FROM peripherals WHERE agent_id IN (SELECT value FROM json_each(?))`)
    .raw()
  // Peripherals reported as stored: their presence and last sight alone (no other column or
  // index touched), several check-ins' in one statement. Seen while present: (id, ms) each.
  // Bound VALUES, PRESENCE_PER_UPDATE rows a statement: no JSON to take apart in SQL, and no
  // SQL function (the later time by CASE: last_seen_ms is never NULL), so that no statement
  // journal is needed should these columns ever get a trigger.
  const seenOf: Statement<unknown[]>[] = []
  const seenMany = (rows: number) =>
    (seenOf[rows] ??= db.prepare<unknown[]>(`UPDATE OR FAIL peripherals SET last_seen_ms = x.column2 FROM (VALUES ${Array(rows).fill('(?, ?)').join(', ')}) AS x WHERE peripherals.id = x.column1`))
  // Present again (id, 1, now), or absent (id, 0, previousMs) since the check-in after
  // previousMs, the last one that still listed it.
  const presenceOf: Statement<unknown[]>[] = []
  const presenceMany = (rows: number) =>
    (presenceOf[rows] ??= db.prepare<unknown[]>(
      `UPDATE OR FAIL peripherals SET present = x.column2,
         last_seen_ms = CASE WHEN x.column2 OR x.column3 > last_seen_ms THEN x.column3 ELSE last_seen_ms END
       FROM (VALUES ${Array(rows).fill('(?, ?, ?)').join(', ')}) AS x WHERE peripherals.id = x.column1`,
    ))
  const inRuns = (statementOf: (rows: number) => Statement<unknown[]>, rows: number[][]) => {
    for (let at = 0; at < rows.length; at += PRESENCE_PER_UPDATE) {
      const run = rows.slice(at, at + PRESENCE_PER_UPDATE)
      statementOf(run.length).run(run.flat())
    }
  }
  const present = db.prepare<[number], PresentPeripheral>(
    `SELECT p.device_id, p.vid, p.pid, p.gui_vid, p.gui_pid, p.serial_number, p.gui_serial, p.dev_icon, p.approved,
       p.is_attack_tool, p.is_vulnerable,
       (SELECT group_concat(c.name, '; ') FROM catalogue c WHERE c.vid = p.vid AND c.pid = p.pid) AS catalogue_name
     FROM peripherals p WHERE p.agent_id = ? AND p.present`,
  )
  const presentOf = db.prepare<[string], PresentPeripheral & { agent_id: number }>(
    `SELECT p.agent_id, p.device_id, p.vid, p.pid, p.gui_vid, p.gui_pid, p.serial_number, p.gui_serial, p.dev_icon, p.approved,
       p.is_attack_tool, p.is_vulnerable,
       (SELECT group_concat(c.name, '; ') FROM catalogue c WHERE c.vid = p.vid AND c.pid = p.pid) AS catalogue_name
     FROM peripherals p WHERE p.agent_id IN (SELECT value FROM json_each(?)) AND p.present`,
  )
  const insertError = db.prepare<[number, number, string | null, string]>('INSERT INTO agent_errors (agent_id, time_ms, code, message) VALUES (?, ?, ?, ?)')

  const pending = db.prepare<[number, number], CommandRow>(`SELECT * FROM agent_commands WHERE agent_id = ? AND status = 'Pending' ORDER BY id LIMIT ?`)
  const hasPending = db.prepare<[number], { one: number }>(`SELECT 1 AS one FROM agent_commands WHERE agent_id = ? AND status = 'Pending' LIMIT 1`)
  const pendingOf = db.prepare<[string], number>(`SELECT DISTINCT agent_id FROM agent_commands WHERE agent_id IN (SELECT value FROM json_each(?)) AND status = 'Pending'`).pluck()
  const deliver = db.prepare<[number, number]>(`UPDATE agent_commands SET status = 'Delivered', delivered_ms = ? WHERE id = ? AND status = 'Pending'`)
  const command = db.prepare<[number], CommandRow>('SELECT * FROM agent_commands WHERE id = ?')
  const complete = db.prepare<{ id: number; status: string; now: number; message: string | null; hasOutput: number }>(
    `UPDATE agent_commands SET status = @status, completed_ms = @now, result_message = @message, has_output = @hasOutput WHERE id = @id`,
  )
  const requestedMode = db.prepare<[number, string], { created_by: string }>(
    `SELECT created_by FROM agent_commands WHERE agent_id = ? AND type = 'SetMode' AND json_extract(parameters, '$.mode') = ?
       AND status IN ('Pending', 'Delivered', 'Succeeded') ORDER BY id DESC LIMIT 1`,
  )
  const setMode = db.prepare<[string, number, number]>('UPDATE agents SET operational_status = ?, last_configured_ms = ? WHERE id = ?')
  const configured = db.prepare<[number, number]>('UPDATE agents SET last_configured_ms = ? WHERE id = ?')
  const addDebugLog = db.prepare<[number, number, number, string]>('INSERT INTO agent_debug_logs (agent_id, command_id, created_ms, content) VALUES (?, ?, ?, ?)')
  const keepDebugLogs = db.prepare<[number, number, number]>(
    'DELETE FROM agent_debug_logs WHERE agent_id = ? AND id NOT IN (SELECT id FROM agent_debug_logs WHERE agent_id = ? ORDER BY id DESC LIMIT ?)',
  )

  const stale = db.prepare<[number, number], SweptAgent>(
    `SELECT id, uuid, host_identifier, local_ip_address, last_updated_ms FROM agents
     WHERE connection_status = 'Connected' AND last_updated_ms < ? ORDER BY last_updated_ms LIMIT ?`,
  )
  const disconnect = db.prepare<[number, number]>(`UPDATE agents SET connection_status = 'Disconnected' WHERE id = ? AND connection_status = 'Connected' AND last_updated_ms < ?`)
  // After an outage, most agents in a range of ids are quiet: taken in id order, the rows a
  // batch rewrites share their pages (and their entries in the agents' indexes, which end
  // with the id), and its commit writes about half the pages it did in check-in order.
  // By the rowid, not by agents_connection: that index would hand every quiet agent to a sort.
  // plan: query-plans "prepared at start"
  const staleAfter = db.prepare<[number, number, number, number], SweptAgent>(
    `SELECT id, uuid, host_identifier, local_ip_address, last_updated_ms FROM agents NOT INDEXED
     WHERE id > ? AND id <= ? AND connection_status = 'Connected' AND last_updated_ms < ? ORDER BY id LIMIT ?`,
  )
  const lastAgentId = db.prepare<[], number>('SELECT coalesce(max(id), 0) FROM agents').pluck()
  // The ids first (CROSS JOIN keeps that order): left to itself, the planner walks the
  // agents_connection index over every quiet agent, which after an outage is all of them.
  const quietOf = db.prepare<[string, number], SweptAgent>(
    `SELECT a.id, a.uuid, a.host_identifier, a.local_ip_address, a.last_updated_ms FROM json_each(?) j CROSS JOIN agents a ON a.id = j.value
     WHERE a.connection_status = 'Connected' AND a.last_updated_ms < ?`,
  )
  // One statement does what a disconnect changes in the row: the connection, the display
  // status it decides alone (agent-state.ts: Disconnected before anything else), and the
  // latest event texts moving down one place for the disconnect event. Nothing else a
  // status refresh computes depends on the connection, and each extra update of a row
  // rewrites it, its revision and its index entries again.
  // One new rev for all the rows (migration 032): the per-row trigger would rewrite each row
  // a second time and bump the counter once per agent.
  // The rows quietOf just read, in the same transaction: no RETURNING and OR FAIL, as the
  // latest texts' update in db/events.ts, so that SQLite keeps no statement journal of the
  // pages it rewrites (an error undoes the caller's whole transaction instead).
  const nextRev = db.prepare<[], number>(`UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev' RETURNING n`).pluck()
  const disconnectMany = db.prepare<[string, number, string]>(
    `UPDATE OR FAIL agents SET connection_status = 'Disconnected', display_status = 'Disconnected',
       latest_minus2_event_text = latest_minus1_event_text, latest_minus1_event_text = latest_event_text, latest_event_text = ?, rev = ?
     WHERE id IN (SELECT value FROM json_each(?))`,
  )
  const overdue = db.prepare<[number, number], OverdueCommand>(
    `SELECT c.id, c.type, c.agent_id, a.uuid, a.host_identifier, a.local_ip_address
     FROM agent_commands c JOIN agents a ON a.id = c.agent_id
     WHERE c.status = 'Delivered' AND c.delivered_ms < ? ORDER BY c.delivered_ms LIMIT ?`,
  )
  const timeOut = db.prepare<[number, string, number]>(`UPDATE agent_commands SET status = 'Failed', completed_ms = ?, result_message = ? WHERE id = ? AND status = 'Delivered'`)
  const waitingForSeat = db.prepare<[number], { id: number }>(`SELECT id FROM agents WHERE license_status = 'Pending' ORDER BY enrolled_ms, id LIMIT ?`)
  const activate = db.prepare<[number]>(`UPDATE agents SET license_status = 'Activated' WHERE id = ? AND license_status = 'Pending'`)
  // An expired license frees no seat: the agents keep counting until they are deleted.
  const expire = db.prepare<[number]>(`UPDATE agents SET license_status = 'Expired'
    WHERE license_status IN ('Activated', 'Pending') AND expiration_ms IS NOT NULL AND expiration_ms <= ?`)

  function disconnectQuiet(ids: number[], before: number, latestText: string): SweptAgent[] {
    const quiet = quietOf.all(JSON.stringify(ids), before)
    if (quiet.length) disconnectMany.run(latestText, nextRev.get()!, JSON.stringify(quiet.map((a) => a.id)))
    return quiet
  }
  const disconnectQuietAlone = db.transaction(disconnectQuiet)
  // A pass's batch: the quiet agents of an id range read in the transaction that disconnects
  // them, so that no second read of their rows checks them again.
  function disconnectRange(after: number, upTo: number, before: number, limit: number, latestText: string): SweptAgent[] {
    const quiet = staleAfter.all(after, upTo, before, limit)
    if (quiet.length) disconnectMany.run(latestText, nextRev.get()!, JSON.stringify(quiet.map((a) => a.id)))
    return quiet
  }
  const disconnectRangeAlone = db.transaction(disconnectRange)

  /**
   * Writes the check-ins' peripherals; answers what their derived state may now be out of
   * date for (agentState.refreshCheckIns): the rows inserted or rewritten (`written`), those
   * whose presence alone changed (`moved`), and the agents that wrote anything but a seen time.
   */
  function applyPeripheralsMany(writes: PeripheralWrite[], max: number): PeripheralsWritten {
    const seenAt: [number, number][] = []
    const presence: [number, number, number][] = []
    const grown: number[] = []
    const written: number[] = []
    const agents: number[] = []
    for (const { agentId, agentUuid, changes: c, now, previousMs } of writes) {
      let inserted = false
      const before = written.length + presence.length
      for (const { id, values, stored } of c.reported) {
        if (id === null) {
          written.push(Number(insertPeripheral.run(peripheralParams(values, texts(values), null, agentId, agentUuid, now, previousMs)).lastInsertRowid))
          inserted = true
        } else if (stored === undefined || !unchanged(stored, values)) {
          updatePeripheral.run(peripheralParams(values, texts(values), id, agentId, agentUuid, now, previousMs))
          written.push(id)
        }
        // As updatePeripheral would leave it (its texts too: they follow from the same values).
        else if (values.present) {
          if (stored.present) seenAt.push([id, now])
          else presence.push([id, 1, now])
        } else if (stored.present) presence.push([id, 0, previousMs])
      }
      for (const id of c.absent) presence.push([id, 0, previousMs])
      // Only an insert can take the agent over `max`.
      if (inserted) grown.push(agentId)
      if (written.length + presence.length > before) agents.push(agentId)
    }
    if (seenAt.length) inRuns(seenMany, seenAt)
    if (presence.length) inRuns(presenceMany, presence)
    // Dropped rows change only their agent's counters: it inserted, so it is among `agents`.
    for (const agentId of grown) {
      const excess = peripheralCount.get(agentId)!.n - max
      if (excess > 0) dropOldestAbsent.run(agentId, excess)
    }
    return { written, moved: presence.map(([id]) => id), agents }
  }

  /** Writes each check-in's state: the columns that changed, its time and digest, a new rev. */
  function updateStates(writes: StateWrite[]): void {
    const bySet = new Map<string, { columns: string[]; rows: unknown[][] }>()
    for (const { id, before, state } of writes) {
      const row = before as unknown as Record<string, unknown>
      const columns: string[] = []
      const values: unknown[] = [id, state.lastUpdatedMs, state.stateDigest]
      for (const [key, column] of STATE_COLUMNS) {
        if (row[column] !== state[key]) {
          columns.push(column)
          values.push(state[key])
        }
      }
      if (before.connection_status !== 'Connected') {
        columns.push('connection_status')
        values.push('Connected')
      }
      const key = columns.join(',')
      const set = bySet.get(key) ?? { columns, rows: [] }
      set.rows.push(values)
      bySet.set(key, set)
    }
    for (const { columns, rows } of bySet.values()) {
      const rev = nextRev.get()!
      for (let at = 0; at < rows.length; at += STATES_PER_UPDATE) {
        const run = rows.slice(at, at + STATES_PER_UPDATE)
        statesStatement(columns, run.length).run(rev, ...run.flat())
      }
    }
  }

  // Their statements are OR FAIL (an error keeps what the statement wrote before it): outside
  // the caller's transaction each call is one of its own, so that a failed one leaves nothing.
  const updateStatesAlone = db.transaction(updateStates)
  const applyPeripheralsAlone = db.transaction(applyPeripheralsMany)

  return {
    byCredential: (hash: string) => byCredential.get(hash),
    byMachineId: (machineId: string) => byMachineId.get(machineId),
    agentByUuid: (uuid: string) => byUuid.get(uuid.toLowerCase()),
    /** Keeps a re-enrollment aside for an Administrator (the latest per agent). */
    holdReEnrollment: (h: { agentId: number; id: string; credentialHash: string; hostIdentifier: string; sourceIp: string | null; requestedMs: number }) => hold.run(h),
    heldReEnrollment: (agentId: number) => held.get(agentId),
    heldReEnrollmentByCredential: (hash: string) => heldByCredential.get(hash),
    dropReEnrollment: (agentId: number) => dropHeld.run(agentId),
    activatedCount: () => activated.get()!.n,
    insertAgent: (a: NewAgent) => Number(insertAgent.run(a).lastInsertRowid),
    rotateCredential: (id: number, hash: string, hostIdentifier: string) => rotate.run(hash, hostIdentifier, id),
    agent: (id: number) => agent.get(id),
    /** Each check-in's state on its agent (one each), one statement per set of changed columns. */
    updateStates: (writes: StateWrite[]) => (db.inTransaction ? updateStates(writes) : updateStatesAlone(writes)),
    /** These agents' rows (every column), in no order. */
    agents: (ids: number[]) => agentsById.all(JSON.stringify(ids)),
    /** Check-in times noted in memory, written in one go. */
    heartbeats(times: Iterable<[number, number]>) {
      for (const [id, ms] of times) checkInTimes.rows += heartbeat.run(ms, id).changes
    },

    /** knownPeripherals of several agents, by agent (those without any left out). */
    knownPeripheralsOf(agentIds: number[]): Map<number, StoredPeripheral[]> {
      const out = new Map<number, StoredPeripheral[]>()
      for (const r of knownOf.all(JSON.stringify(agentIds))) {
        const p = new SignedPeripheral(r[1], r[2], r[3], r[4])
        const agentId = r[0]
        const list = out.get(agentId)
        if (list) list.push(p)
        else out.set(agentId, [p])
      }
      return out
    },
    /**
     * Writes the peripherals of several check-ins (one per agent; texts interned; the writes of
     * a presence alone in one statement each), then keeps at most `max` per agent by forgetting
     * the absent ones seen longest ago. `previousMs`: an agent's check-in before this one (a
     * peripheral present then and gone now was last seen then).
     */
    applyPeripheralsMany: (writes: PeripheralWrite[], max: number): PeripheralsWritten => (db.inTransaction ? applyPeripheralsMany(writes, max) : applyPeripheralsAlone(writes, max)),
    presentPeripherals: (agentId: number) => present.all(agentId),
    /** presentPeripherals of several agents, by agent (those without any left out). */
    presentPeripheralsOf(agentIds: number[]): Map<number, PresentPeripheral[]> {
      return byAgent(presentOf.all(JSON.stringify(agentIds)))
    },
    addErrors(agentId: number, errors: { time: number; code: string | null; message: string }[]): void {
      for (const e of errors) insertError.run(agentId, e.time, e.code, e.message)
    },

    hasPendingCommands: (agentId: number) => hasPending.get(agentId) !== undefined,
    /** Those of these agents with a pending command. */
    withPendingCommands: (agentIds: number[]) => pendingOf.all(JSON.stringify(agentIds)),
    /** Hands the oldest `limit` pending commands over; `more`: others wait after them. */
    deliverPending(agentId: number, limit: number, now: number): { commands: CommandRow[]; more: boolean } {
      const rows = pending.all(agentId, limit + 1)
      const commands = rows.slice(0, limit)
      for (const c of commands) deliver.run(now, c.id)
      return { commands, more: rows.length > limit }
    },
    command: (id: number) => command.get(id),
    completeCommand: (c: { id: number; status: 'Succeeded' | 'Failed'; now: number; message: string | null; hasOutput: number }) => complete.run(c),
    /** Who asked for the mode an agent now reports, when a SetMode command did. */
    modeRequestedBy: (agentId: number, mode: string) => requestedMode.get(agentId, mode)?.created_by,
    setMode: (agentId: number, mode: string, now: number) => setMode.run(mode, now, agentId),
    setConfigured: (agentId: number, now: number) => configured.run(now, agentId),
    addDebugLog(agentId: number, commandId: number, now: number, content: string, keep: number) {
      addDebugLog.run(agentId, commandId, now, content)
      keepDebugLogs.run(agentId, agentId, keep)
    },

    staleAgents: (before: number, limit: number) => stale.all(before, limit),
    /** Connected agents quiet since before `before` with ids in (after, upTo], in id order. */
    /**
     * disconnectMany for the first `limit` agents quiet since `before` with ids in (after, upTo],
     * in id order (a mass disconnect's pass): answers them.
     */
    disconnectRange: (after: number, upTo: number, before: number, limit: number, latestText: string): SweptAgent[] =>
      db.inTransaction ? disconnectRange(after, upTo, before, limit, latestText) : disconnectRangeAlone(after, upTo, before, limit, latestText),
    /** The highest agent id (0 without agents). */
    lastAgentId: () => lastAgentId.get() ?? 0,
    disconnect: (id: number, before: number) => disconnect.run(id, before).changes === 1,
    /**
     * Disconnects those of these agents still connected and quiet since before `before`;
     * answers them, in the order given. Their display status becomes Disconnected, and
     * `latestText` (the text of the disconnect event the caller records for each, without
     * an agent for its texts) becomes their latest event text, the others moving down.
     */
    disconnectMany(ids: number[], before: number, latestText: string): SweptAgent[] {
      if (ids.length === 0) return []
      // The read and the write in one transaction (no savepoint inside the caller's).
      const quiet = db.inTransaction ? disconnectQuiet(ids, before, latestText) : disconnectQuietAlone(ids, before, latestText)
      const gone = new Map(quiet.map((a) => [a.id, a]))
      return ids.flatMap((id) => gone.get(id) ?? [])
    },
    overdueCommands: (before: number, limit: number) => overdue.all(before, limit),
    timeOutCommand: (id: number, now: number, message: string) => timeOut.run(now, message, id).changes === 1,
    waitingForSeat: (limit: number) => waitingForSeat.all(limit).map((r) => r.id),
    activate: (id: number) => activate.run(id),
    /** Licenses whose expiration date has passed become Expired; answers how many. */
    expireLicenses: (now: number) => expire.run(now).changes,
  }
}
export type GatewayRepo = ReturnType<typeof gatewayRepo>
