// What the agent gateway reads and writes on PostgreSQL: enrollment, check-ins (agent state
// and peripherals), command delivery and results, and the sweeper's timeouts. The same
// methods and answers as db/gateway.ts; a check-in is a few statements whatever its size.
//
// Check-in times are written as they come (heartbeats): SQLite's CheckInTimeWrites counts
// them only for its own kept list answers, which PostgreSQL has none of.
import { type GatewayRepo, peripheralTexts, unchanged } from '../gateway.js'
import type {
  AgentRow,
  CommandRow,
  GatewayAgent,
  NewAgent,
  OverdueCommand,
  PeripheralWrite,
  PeripheralsWritten,
  PresentPeripheral,
  ReportedPeripheral,
  StateWrite,
  StoredPeripheral,
  SweptAgent,
} from '../../lib/gateway/ports.js'
import type { HeldReEnrollment } from '../../lib/agents/ports.js'
import type { Async } from '../unit-of-work.js'
import { type Postgres, prepared } from './connection.js'

/** What SQLite's statements answer where the callers read `changes` (PostgreSQL has no rowid). */
const changed = (changes: number) => ({ changes, lastInsertRowid: 0 })

/** The agent columns a check-in sets (AgentState's), bar its time and digest, which every one sets. */
const STATE_COLUMNS: [keyof StateWrite['state'], string, string][] = [
  ['hostIdentifier', 'host_identifier', 'text'],
  ['localIpAddress', 'local_ip_address', 'text'],
  ['osVersion', 'os_version', 'text'],
  ['manufacturer', 'manufacturer', 'text'],
  ['pcModel', 'pc_model', 'text'],
  ['nicsJson', 'nics_json', 'text'],
  ['nicsText', 'nics_text', 'text'],
  ['ipAddresses', 'ip_addresses', 'text'],
  ['operationalStatus', 'operational_status', 'text'],
  ['isSystemLocked', 'is_system_locked', 'bigint'],
  ['serviceVersion', 'service_version', 'text'],
  ['kbDriverVersion', 'kb_driver_version', 'text'],
  ['licenseStatus', 'license_status', 'text'],
  ['licenseAccountId', 'license_account_id', 'text'],
  ['modelTooltip', 'model_tooltip', 'text'],
  ['runningMode', 'running_mode', 'text'],
  ['switchIp', 'switch_ip', 'text'],
  ['switchName', 'switch_name', 'text'],
  ['portId', 'port_id', 'text'],
  ['portName', 'port_name', 'text'],
  ['ethernetsCount', 'ethernets_count', 'bigint'],
  ['hashtags', 'hashtags', 'text'],
  ['loggedOnUsers', 'logged_on_users', 'text'],
  ['checkInSeconds', 'check_in_interval_s', 'bigint'],
]

/**
 * Every check-in's state in one statement: a JSON array of objects, each with the agent's id,
 * time, digest and `set`, the names of the columns that changed (as read before), and those
 * columns' values; a column left out of `set` keeps what it holds. A check-in connects its
 * agent (set whatever the row read before said: a sweeper may have disconnected it since).
 */
const UPDATE_STATES = `UPDATE agents a SET
  ${STATE_COLUMNS.map(([, c]) => `${c} = CASE WHEN '${c}' = ANY(x.set) THEN x.${c} ELSE a.${c} END`).join(',\n  ')},
  connection_status = 'Connected',
  last_updated_ms = greatest(coalesce(a.last_updated_ms, 0), x.last_updated_ms),
  state_digest = x.state_digest
FROM jsonb_to_recordset($1::jsonb) AS x(id bigint, last_updated_ms bigint, state_digest text, set text[],
  ${STATE_COLUMNS.map(([, c, type]) => `${c} ${type}`).join(', ')})
WHERE a.id = x.id`

/** The columns of a reported peripheral, in the order of the write's arrays. */
const REPORTED: [keyof ReportedPeripheral, string, string][] = [
  ['deviceId', 'device_id', 'text'],
  ['vid', 'vid', 'text'],
  ['pid', 'pid', 'text'],
  ['serialNumber', 'serial_number', 'text'],
  ['description', 'description', 'text'],
  ['status', 'status', 'text'],
  ['manufacturer', 'manufacturer', 'text'],
  ['caption', 'caption', 'text'],
  ['guiVid', 'gui_vid', 'text'],
  ['guiPid', 'gui_pid', 'text'],
  ['guiSerial', 'gui_serial', 'text'],
  ['devIcon', 'dev_icon', 'bigint'],
  ['classCode', 'class_code', 'text'],
  ['subclassCode', 'subclass_code', 'text'],
  ['protocolCode', 'protocol_code', 'text'],
  ['hierarchy', 'hierarchy', 'text'],
  ['parentDeviceId', 'parent_device_id', 'text'],
  ['isDisabled', 'is_disabled', 'bigint'],
  ['present', 'present', 'bigint'],
]
/** The write's arrays besides the reported columns. */
const WRITE_EXTRA: [string, string][] = [
  ['id', 'bigint'],
  ['agent_id', 'bigint'],
  ['agent_uuid', 'text'],
  ['now', 'bigint'],
  ['previous_ms', 'bigint'],
  ['vendor_text', 'text'],
  ['product_text', 'text'],
]
const WRITE_ARRAYS = [...WRITE_EXTRA, ...REPORTED.map(([, c, type]) => [c, type] as [string, string])]
const SET_REPORTED = REPORTED.map(([, c]) => c)
/** Where a stored one reported present again lies: seen now; gone since the check-in that still listed it. */
const LAST_SEEN = (row: string, v: string) => `CASE WHEN ${v}.present <> 0 THEN ${v}.now WHEN ${row}.present <> 0 THEN greatest(${row}.last_seen_ms, ${v}.previous_ms) ELSE ${row}.last_seen_ms END`

/**
 * Interns the texts of `wanted` (kind, text): found, else inserted in (kind, text) order, so
 * that two statements inserting the same new texts wait for each other rather than
 * deadlock. One a concurrent statement inserts first is neither found (this statement's
 * snapshot is older) nor inserted (DO NOTHING: a DO UPDATE would lock it against the
 * foreign key checks of other writers): its peripherals are told `missing` and take it in
 * a second statement (fixTexts).
 */
const INTERN = `found AS (
  SELECT t.id, t.kind, t.text FROM peripheral_texts t JOIN wanted w ON t.kind = w.kind AND md5(t.text) = md5(w.text) AND t.text = w.text
), added AS (
  INSERT INTO peripheral_texts (kind, text)
  SELECT w.kind, w.text FROM wanted w WHERE NOT EXISTS (SELECT 1 FROM found f WHERE f.kind = w.kind AND f.text = w.text)
  ORDER BY w.kind, w.text
  ON CONFLICT (kind, md5(text)) DO NOTHING
  RETURNING id, kind, text
), texts AS (
  SELECT * FROM found UNION ALL SELECT * FROM added
)`
const WANTED = (from: string) => `wanted AS (
  SELECT DISTINCT t.kind, t.text FROM ${from} CROSS JOIN LATERAL (VALUES ('vendor', ${from}.vendor_text), ('product', ${from}.product_text)) AS t(kind, text)
  WHERE t.text IS NOT NULL
)`
/** Texts wanted and not had. */
const MISSING = (v: string) => `(${v}.vendor_text IS NOT NULL AND ${v}.vendor_text_id IS NULL) OR (${v}.product_text IS NOT NULL AND ${v}.product_text_id IS NULL)`

/**
 * A group of check-ins' peripherals in one statement: the written ones' texts interned,
 * rewritten ones updated by id, new ones inserted (a concurrent check-in of the same agent
 * that inserted the device first makes it an update), and the presence and last sight of
 * the others (a data-modifying WITH runs whether read or not). Answers the written ids
 * with their place in the report, and whether a text is missing (INTERN).
 */
const WRITE_PERIPHERALS = `WITH r AS (
  SELECT * FROM unnest(${WRITE_ARRAYS.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ')}) WITH ORDINALITY
    AS r(${WRITE_ARRAYS.map(([c]) => c).join(', ')}, ord)
), ${WANTED('r')}, ${INTERN}, v AS (
  SELECT r.*, vt.id AS vendor_text_id, pt.id AS product_text_id FROM r
  LEFT JOIN texts vt ON vt.kind = 'vendor' AND vt.text = r.vendor_text
  LEFT JOIN texts pt ON pt.kind = 'product' AND pt.text = r.product_text
), updated AS (
  UPDATE peripherals p SET ${SET_REPORTED.map((c) => `${c} = v.${c}`).join(', ')},
    vendor_text_id = v.vendor_text_id, product_text_id = v.product_text_id, last_seen_ms = ${LAST_SEEN('p', 'v')}
  FROM v WHERE v.id IS NOT NULL AND p.id = v.id
  RETURNING p.id, v.ord, ${MISSING('v')} AS missing, v.vendor_text, v.product_text
), inserted AS (
  INSERT INTO peripherals (agent_id, agent_uuid, ${SET_REPORTED.join(', ')}, vendor_text_id, product_text_id, first_seen_ms, last_seen_ms)
  SELECT v.agent_id, v.agent_uuid, ${SET_REPORTED.map((c) => `v.${c}`).join(', ')}, v.vendor_text_id, v.product_text_id, v.now, v.now
  FROM v WHERE v.id IS NULL ORDER BY v.ord
  ON CONFLICT (agent_id, device_id) DO UPDATE SET ${SET_REPORTED.map((c) => `${c} = excluded.${c}`).join(', ')},
    vendor_text_id = excluded.vendor_text_id, product_text_id = excluded.product_text_id,
    last_seen_ms = CASE WHEN excluded.present <> 0 THEN excluded.last_seen_ms ELSE peripherals.last_seen_ms END
  RETURNING id, agent_id, device_id
), seen AS (
  UPDATE peripherals p SET last_seen_ms = s.ms
  FROM unnest($${WRITE_ARRAYS.length + 1}::bigint[], $${WRITE_ARRAYS.length + 2}::bigint[]) AS s(id, ms) WHERE p.id = s.id
), moved AS (
  UPDATE peripherals p SET present = m.present, last_seen_ms = CASE WHEN m.present <> 0 OR m.ms > p.last_seen_ms THEN m.ms ELSE p.last_seen_ms END
  FROM unnest($${WRITE_ARRAYS.length + 3}::bigint[], $${WRITE_ARRAYS.length + 4}::bigint[], $${WRITE_ARRAYS.length + 5}::bigint[]) AS m(id, present, ms)
  WHERE p.id = m.id
)
SELECT u.id, u.ord, u.missing, u.vendor_text, u.product_text FROM updated u
UNION ALL SELECT i.id, v.ord, ${MISSING('v')}, v.vendor_text, v.product_text FROM inserted i JOIN v ON v.agent_id = i.agent_id AND v.device_id = i.device_id`

/** Gives peripherals the texts a concurrent writer interned first (WRITE_PERIPHERALS' `missing`); answers those still without. */
const FIX_TEXTS = `WITH x AS (
  SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[]) AS x(id, vendor_text, product_text)
), ${WANTED('x')}, ${INTERN}, fixed AS (
  UPDATE peripherals p SET vendor_text_id = vt.id, product_text_id = pt.id
  FROM x LEFT JOIN texts vt ON vt.kind = 'vendor' AND vt.text = x.vendor_text LEFT JOIN texts pt ON pt.kind = 'product' AND pt.text = x.product_text
  WHERE p.id = x.id
  RETURNING p.id, x.vendor_text, x.product_text, (x.vendor_text IS NOT NULL AND vt.id IS NULL) OR (x.product_text IS NOT NULL AND pt.id IS NULL) AS missing
)
SELECT id, vendor_text, product_text FROM fixed WHERE missing`

/** The ids of texts (kind, text), interned (INTERN); those a concurrent writer inserted after the snapshot are left out. */
const INTERN_TEXTS = `WITH wanted AS (
  SELECT DISTINCT kind, text FROM unnest($1::text[], $2::text[]) AS w(kind, text) WHERE text IS NOT NULL
), ${INTERN}
SELECT id, kind, text FROM texts`

/**
 * Interns the vendor and product texts of peripherals (db/gateway.ts internPeripheralTexts,
 * for many at once: seeds and fixtures) and answers their ids, in the order given.
 */
export function pgInternPeripheralTexts(db: Postgres) {
  return async (peripherals: Parameters<typeof peripheralTexts>[0][]): Promise<{ vendorTextId: number | null; productTextId: number | null }[]> => {
    const texts = peripherals.map(peripheralTexts)
    const ids = new Map<string, number>()
    const key = (kind: string, text: string) => `${kind}\u0000${text}`
    let wanted = texts
      .flatMap((t) => [
        ['vendor', t.vendor],
        ['product', t.product],
      ])
      .filter((w): w is [string, string] => w[1] !== null)
    // Each round's statement sees what the concurrent writers it waited for committed.
    for (let round = 0; wanted.length > 0; round++) {
      if (round === 3) throw new Error('peripheral texts could not be interned')
      for (const r of await db.query<{ id: number; kind: string; text: string }>(INTERN_TEXTS, [wanted.map((w) => w[0]), wanted.map((w) => w[1])])) ids.set(key(r.kind, r.text), r.id)
      wanted = wanted.filter(([kind, text]) => !ids.has(key(kind, text)))
    }
    return texts.map((t) => ({
      vendorTextId: t.vendor === null ? null : ids.get(key('vendor', t.vendor))!,
      productTextId: t.product === null ? null : ids.get(key('product', t.product))!,
    }))
  }
}

/** A machine id is one machine whatever its letters' case, as on SQLite (migration 010). */
const BY_MACHINE_ID = 'SELECT id, uuid, credential_hash FROM agents WHERE lower(machine_id) = lower($1)'
/**
 * An agent's held re-enrollment; inside a unit of work (a decision) its row stays locked until
 * the unit ends: of two decisions at once, the second reads it after the first committed (gone).
 */
const HELD = (locked: boolean) => `SELECT * FROM agent_reenrollments WHERE agent_id = $1${locked ? ' FOR UPDATE' : ''}`

/**
 * Writes a group's reported peripherals in one statement (inserts, rewrites, presence moves),
 * interns their texts, and trims each agent that grew past `max`: the absent ones seen
 * longest ago go first.
 */
async function applyPeripheralsMany(db: Postgres, writes: PeripheralWrite[], max: number): Promise<PeripheralsWritten> {
  const arrays: unknown[][] = WRITE_ARRAYS.map(() => [])
  const seenIds: number[] = []
  const seenMs: number[] = []
  const movedIds: number[] = []
  const movedPresent: number[] = []
  const movedMs: number[] = []
  const agents: number[] = []
  const grown: number[] = []
  let written = 0
  const push = (v: ReportedPeripheral, id: number | null, w: PeripheralWrite) => {
    const t = peripheralTexts(v)
    const extra = [id, w.agentId, w.agentUuid, w.now, w.previousMs, t.vendor, t.product]
    for (let i = 0; i < extra.length; i++) arrays[i].push(extra[i])
    for (let i = 0; i < REPORTED.length; i++) arrays[extra.length + i].push(v[REPORTED[i][0]])
    written++
  }
  for (const w of writes) {
    let inserted = false
    const before = written + movedIds.length
    for (const { id, values, stored } of w.changes.reported) {
      if (id === null) {
        push(values, null, w)
        inserted = true
      } else if (stored === undefined || !unchanged(stored, values)) push(values, id, w)
      else if (values.present) {
        if (stored.present) {
          seenIds.push(id)
          seenMs.push(w.now)
        } else {
          movedIds.push(id)
          movedPresent.push(1)
          movedMs.push(w.now)
        }
      } else if (stored.present) {
        movedIds.push(id)
        movedPresent.push(0)
        movedMs.push(w.previousMs)
      }
    }
    for (const id of w.changes.absent) {
      movedIds.push(id)
      movedPresent.push(0)
      movedMs.push(w.previousMs)
    }
    if (inserted) grown.push(w.agentId)
    if (written + movedIds.length > before) agents.push(w.agentId)
  }
  if (written + seenIds.length + movedIds.length === 0) return { written: [], moved: [], agents }
  type Written = { id: number; ord: number; missing: boolean; vendor_text: string | null; product_text: string | null }
  const rows = await db.query<Written>(WRITE_PERIPHERALS, [...arrays, seenIds, seenMs, movedIds, movedPresent, movedMs])
  const ids = rows.sort((a, b) => a.ord - b.ord).map((r) => r.id)
  // Each round's statement sees what the concurrent writers it waited for committed.
  let missing: Omit<Written, 'ord' | 'missing'>[] = rows.filter((r) => r.missing)
  for (let round = 0; missing.length > 0; round++) {
    if (round === 3) throw new Error(`peripheral texts could not be interned for peripherals ${missing.map((r) => r.id).join(', ')}`)
    missing = await db.query(FIX_TEXTS, [missing.map((r) => r.id), missing.map((r) => r.vendor_text), missing.map((r) => r.product_text)])
  }
  // Only an insert can take an agent over `max`: the absent ones seen longest ago go first.
  if (grown.length) {
    await db.run(
      `DELETE FROM peripherals WHERE id IN (
         SELECT id FROM (
           SELECT p.id, row_number() OVER (PARTITION BY p.agent_id ORDER BY p.last_seen_ms, p.id) AS n,
             (SELECT count(*) FROM peripherals a WHERE a.agent_id = p.agent_id) AS total
           FROM peripherals p WHERE p.agent_id = ANY($1::bigint[]) AND p.present = 0
         ) x WHERE x.n <= x.total - $2)`,
      [grown, max],
    )
  }
  return { written: ids, moved: movedIds, agents }
}

/** Rows of several agents, by agent, in the order read. */
function byAgent<T extends { agent_id: number }>(rows: T[], strip = false): Map<number, T[]> {
  const out = new Map<number, T[]>()
  for (const r of rows) {
    const row = strip ? (({ agent_id: _, ...rest }) => rest)(r) : r
    const list = out.get(r.agent_id)
    if (list) list.push(row as T)
    else out.set(r.agent_id, [row as T])
  }
  return out
}

const PRESENT_COLUMNS = `p.device_id, p.vid, p.pid, p.gui_vid, p.gui_pid, p.serial_number, p.gui_serial, p.dev_icon, p.approved,
  p.is_attack_tool, p.is_vulnerable,
  (SELECT string_agg(c.name, '; ' ORDER BY c.created_ms, c.kind) FROM catalogue c WHERE c.vid = p.vid AND c.pid = p.pid) AS catalogue_name`

const SWEPT = 'id, uuid, host_identifier, local_ip_address, last_updated_ms'
const SWEPT_OF = (a: string) =>
  SWEPT.split(', ')
    .map((c) => `${a}.${c}`)
    .join(', ')

export interface PgGatewayOptions {
  /**
   * The license's seats. Given, `activate` takes a seat only while one is free, counted under
   * the seats' lock (sweepers on several nodes may hand seats out at once); without it, as SQLite's.
   */
  seats?: number
}

/**
 * The agent a check-in's credential names, with whether commands wait for it: an unchanged
 * check-in (most of them) is then answered after this one statement. Prepared: every
 * check-in runs it.
 */
const BY_CREDENTIAL = prepared(`SELECT id, uuid, host_identifier, local_ip_address, connection_status, state_digest,
    EXISTS (SELECT 1 FROM agent_commands c WHERE c.agent_id = agents.id AND c.status = 'Pending') AS has_pending
  FROM agents WHERE credential_hash = $1`)

export function pgGatewayRepo(db: Postgres, options: PgGatewayOptions = {}) {
  /**
   * The seats in use. Inside a unit of work the seats' row stays locked until that unit
   * ends (license_seats, migration 003): a count read under it includes every seat taken by
   * a unit that held it before, and no other node counts until this one has taken its seat.
   */
  async function seatsInUse(): Promise<number> {
    return (await db.value<number>(`SELECT activated FROM license_seats${db.uow.inUnit() ? ' FOR UPDATE' : ''}`)) ?? 0
  }

  async function disconnectQuiet(ids: number[], before: number, latestText: string): Promise<SweptAgent[]> {
    // The conditions again on the row itself: one that checked in after the read is left alone.
    return db.query<SweptAgent & Record<string, unknown>>(
      `UPDATE agents SET connection_status = 'Disconnected', display_status = 'Disconnected',
         latest_minus2_event_text = latest_minus1_event_text, latest_minus1_event_text = latest_event_text, latest_event_text = $3
       WHERE id = ANY($1::bigint[]) AND connection_status = 'Connected' AND last_updated_ms < $2
       RETURNING ${SWEPT}`,
      [ids, before, latestText],
    )
  }

  const port = {
    byCredential: (hash: string) => db.one<GatewayAgent & Record<string, unknown>>(BY_CREDENTIAL, [hash]),
    async byMachineId(machineId: string, hold?: boolean) {
      // A lock on the id itself, as there may be no row to lock yet (a first enrollment).
      if (hold) await db.query(`SELECT pg_advisory_xact_lock(hashtextextended('prime enrollment ' || lower($1), 0))`, [machineId])
      return db.one<{ id: number; uuid: string; credential_hash: string | null }>(`${BY_MACHINE_ID}${hold ? ' FOR UPDATE' : ''}`, [machineId])
    },
    agentByUuid: (uuid: string) => db.one<AgentRow & Record<string, unknown>>('SELECT * FROM agents WHERE uuid = $1', [uuid.toLowerCase()]),
    /** Keeps a re-enrollment aside for an Administrator (the latest per agent). */
    async holdReEnrollment(h: { agentId: number; id: string; credentialHash: string; hostIdentifier: string; sourceIp: string | null; requestedMs: number }) {
      return changed(
        await db.run(
          `INSERT INTO agent_reenrollments (agent_id, id, credential_hash, host_identifier, source_ip, requested_ms) VALUES ($1, $2, $3, $4, $5, $6)
           ON CONFLICT (agent_id) DO UPDATE SET id = excluded.id, credential_hash = excluded.credential_hash, host_identifier = excluded.host_identifier,
             source_ip = excluded.source_ip, requested_ms = excluded.requested_ms`,
          [h.agentId, h.id, h.credentialHash, h.hostIdentifier, h.sourceIp, h.requestedMs],
        ),
      )
    },
    heldReEnrollment: (agentId: number) => db.one<HeldReEnrollment & Record<string, unknown>>(HELD(db.uow.inUnit()), [agentId]),
    heldReEnrollmentByCredential: (hash: string) => db.one<HeldReEnrollment & Record<string, unknown>>('SELECT * FROM agent_reenrollments WHERE credential_hash = $1', [hash]),
    dropReEnrollment: async (agentId: number) => changed(await db.run('DELETE FROM agent_reenrollments WHERE agent_id = $1', [agentId])),
    /** The seats in use (Activated agents); inside a unit of work, the seats stay locked until it ends. */
    activatedCount: seatsInUse,
    insertAgent: async (a: NewAgent) =>
      (await db.value<number>(
        `INSERT INTO agents (uuid, machine_id, credential_hash, enrolled_ms, host_identifier, license_status, expiration_ms, license_account_name, check_in_interval_s)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
        [a.uuid, a.machineId, a.credentialHash, a.enrolledMs, a.hostIdentifier, a.licenseStatus, a.expirationMs, a.licenseAccountName, a.checkInSeconds],
      )) as number,
    // A re-enrolled agent goes through the full comparison at its next check-in.
    rotateCredential: async (id: number, hash: string, hostIdentifier: string) =>
      changed(await db.run('UPDATE agents SET credential_hash = $1, host_identifier = $2, state_digest = NULL WHERE id = $3', [hash, hostIdentifier, id])),
    agent: (id: number) => db.one<AgentRow & Record<string, unknown>>('SELECT * FROM agents WHERE id = $1', [id]),
    /** Each check-in's state on its agent (one each), in one statement. */
    async updateStates(writes: StateWrite[]): Promise<void> {
      if (writes.length === 0) return
      const rows = writes.map(({ id, before, state }) => {
        const row = before as unknown as Record<string, unknown>
        const out: Record<string, unknown> = { id, last_updated_ms: state.lastUpdatedMs, state_digest: state.stateDigest }
        const set: string[] = []
        for (const [key, column] of STATE_COLUMNS) {
          if (row[column] !== state[key]) {
            set.push(column)
            out[column] = state[key]
          }
        }
        out.set = set
        return out
      })
      await db.run(UPDATE_STATES, [JSON.stringify(rows)])
    },
    /** These agents' rows (every column), in no order. */
    agents: (ids: number[]) => db.query<AgentRow & Record<string, unknown>>('SELECT * FROM agents WHERE id = ANY($1::bigint[])', [ids]),
    /** Check-in times, written in one statement. */
    async heartbeats(times: Iterable<[number, number]>): Promise<void> {
      const ids: number[] = []
      const ms: number[] = []
      for (const [id, at] of times) {
        ids.push(id)
        ms.push(at)
      }
      if (ids.length === 0) return
      await db.run(
        `UPDATE agents a SET last_updated_ms = greatest(coalesce(a.last_updated_ms, 0), t.ms)
         FROM unnest($1::bigint[], $2::bigint[]) AS t(id, ms) WHERE a.id = t.id`,
        [ids, ms],
      )
    },

    /** knownPeripherals of several agents, by agent (those without any left out), by device id as SQLite reads them. */
    async knownPeripheralsOf(agentIds: number[]): Promise<Map<number, StoredPeripheral[]>> {
      const rows = await db.query<StoredPeripheral & { agent_id: number } & Record<string, unknown>>(
        `SELECT agent_id, id, device_id, present, vid, pid, gui_vid, gui_pid, serial_number, gui_serial, dev_icon, description, status,
           manufacturer, caption, class_code, subclass_code, protocol_code, hierarchy, parent_device_id, is_disabled
         FROM peripherals WHERE agent_id = ANY($1::bigint[]) ORDER BY agent_id, device_id COLLATE "C"`,
        [agentIds],
      )
      return byAgent(rows, true)
    },
    /**
     * Writes the peripherals of several check-ins (one per agent) in one statement, then keeps
     * at most `max` per agent by forgetting the absent ones seen longest ago. `previousMs`:
     * an agent's check-in before this one (a peripheral present then and gone now was last seen then).
     */
    applyPeripheralsMany: (writes: PeripheralWrite[], max: number) => db.uow.run(() => applyPeripheralsMany(db, writes, max)),
    presentPeripherals: (agentId: number) =>
      db.query<PresentPeripheral & Record<string, unknown>>(`SELECT ${PRESENT_COLUMNS} FROM peripherals p WHERE p.agent_id = $1 AND p.present <> 0 ORDER BY p.device_id COLLATE "C"`, [agentId]),
    /** presentPeripherals of several agents, by agent (those without any left out). */
    async presentPeripheralsOf(agentIds: number[]): Promise<Map<number, PresentPeripheral[]>> {
      const rows = await db.query<PresentPeripheral & { agent_id: number } & Record<string, unknown>>(
        `SELECT p.agent_id, ${PRESENT_COLUMNS} FROM peripherals p WHERE p.agent_id = ANY($1::bigint[]) AND p.present <> 0
         ORDER BY p.agent_id, p.device_id COLLATE "C"`,
        [agentIds],
      )
      return byAgent(rows)
    },
    async addErrors(agentId: number, errors: { time: number; code: string | null; message: string }[]): Promise<void> {
      if (errors.length === 0) return
      await db.run(
        `INSERT INTO agent_errors (agent_id, time_ms, code, message)
         SELECT $1, e.time_ms, e.code, e.message FROM unnest($2::bigint[], $3::text[], $4::text[]) WITH ORDINALITY AS e(time_ms, code, message, ord) ORDER BY e.ord`,
        [agentId, errors.map((e) => e.time), errors.map((e) => e.code), errors.map((e) => e.message)],
      )
    },

    hasPendingCommands: async (agentId: number) => (await db.one(`SELECT 1 FROM agent_commands WHERE agent_id = $1 AND status = 'Pending' LIMIT 1`, [agentId])) !== undefined,
    /** Those of these agents with a pending command. */
    withPendingCommands: async (agentIds: number[]) =>
      (await db.query<{ agent_id: number }>(`SELECT DISTINCT agent_id FROM agent_commands WHERE agent_id = ANY($1::bigint[]) AND status = 'Pending' ORDER BY agent_id`, [agentIds])).map(
        (r) => r.agent_id,
      ),
    /**
     * Hands the oldest `limit` pending commands over (answered as they were read, Pending);
     * `more`: others wait after them. Claimed rows are skipped by a concurrent delivery.
     */
    async deliverPending(agentId: number, limit: number, now: number): Promise<{ commands: CommandRow[]; more: boolean }> {
      const rows = await db.query<CommandRow & Record<string, unknown>>(
        `WITH picked AS (
           SELECT * FROM agent_commands WHERE agent_id = $1 AND status = 'Pending' ORDER BY id LIMIT $2 + 1 FOR UPDATE SKIP LOCKED
         ), delivered AS (
           UPDATE agent_commands c SET status = 'Delivered', delivered_ms = $3
           WHERE c.id IN (SELECT id FROM picked ORDER BY id LIMIT $2) AND c.status = 'Pending'
         )
         SELECT * FROM picked ORDER BY id`,
        [agentId, limit, now],
      )
      return { commands: rows.slice(0, limit), more: rows.length > limit }
    },
    command: (id: number) => db.one<CommandRow & Record<string, unknown>>('SELECT * FROM agent_commands WHERE id = $1', [id]),
    completeCommand: async (c: { id: number; status: 'Succeeded' | 'Failed'; now: number; message: string | null; hasOutput: number }) =>
      changed(await db.run('UPDATE agent_commands SET status = $1, completed_ms = $2, result_message = $3, has_output = $4 WHERE id = $5', [c.status, c.now, c.message, c.hasOutput, c.id])),
    /** Who asked for the mode an agent now reports, when a SetMode command did. */
    modeRequestedBy: async (agentId: number, mode: string) =>
      (
        await db.one<{ created_by: string }>(
          `SELECT created_by FROM agent_commands WHERE agent_id = $1 AND type = 'SetMode' AND parameters::jsonb ->> 'mode' = $2
             AND status IN ('Pending', 'Delivered', 'Succeeded') ORDER BY id DESC LIMIT 1`,
          [agentId, mode],
        )
      )?.created_by,
    setMode: async (agentId: number, mode: string, now: number) => changed(await db.run('UPDATE agents SET operational_status = $1, last_configured_ms = $2 WHERE id = $3', [mode, now, agentId])),
    setConfigured: async (agentId: number, now: number) => changed(await db.run('UPDATE agents SET last_configured_ms = $1 WHERE id = $2', [now, agentId])),
    /** Stores a command's debug logs, keeping the agent's latest `keep`. */
    async addDebugLog(agentId: number, commandId: number, now: number, content: string, keep: number): Promise<void> {
      // The DELETE's snapshot lacks the new row: the latest keep - 1 others stay with it.
      await db.run(
        `WITH added AS (INSERT INTO agent_debug_logs (agent_id, command_id, created_ms, content) VALUES ($1, $2, $3, $4) RETURNING id)
         DELETE FROM agent_debug_logs WHERE agent_id = $1 AND id NOT IN (SELECT id FROM agent_debug_logs WHERE agent_id = $1 ORDER BY id DESC LIMIT greatest($5::bigint - 1, 0))`,
        [agentId, commandId, now, content, keep],
      )
    },

    // Walks the connected agents' check-in times (agent_checkins, migration 011: equal to the
    // agents' own, which no index holds) from the oldest; NULLS FIRST, which `<` leaves out,
    // lets that index's backward scan give the order. Each agent is read by its id (OFFSET 0
    // keeps that a nested loop): joined, the planner may scan every agent to hash them.
    staleAgents: (before: number, limit: number) =>
      db.query<SweptAgent & Record<string, unknown>>(
        `SELECT ${SWEPT_OF('a')} FROM agent_checkins c
         CROSS JOIN LATERAL (SELECT ${SWEPT}, display_status, connection_status FROM agents WHERE id = c.agent_id OFFSET 0) a
         WHERE c.connected AND c.last_updated_ms < $1 AND a.connection_status = 'Connected' AND a.last_updated_ms < $1
         ORDER BY c.last_updated_ms NULLS FIRST, a.display_status COLLATE "C", a.id LIMIT $2`,
        [before, limit],
      ),
    /**
     * Disconnects the first `limit` agents quiet since `before` with ids in (after, upTo], in id
     * order (a mass disconnect's pass): answers them. Rows another node's pass holds are skipped.
     */
    async disconnectRange(after: number, upTo: number, before: number, limit: number, latestText: string): Promise<SweptAgent[]> {
      const rows = await db.query<SweptAgent & Record<string, unknown>>(
        // The batch picked once, in a WITH: a subquery of the WHERE may be scanned again per
        // row, and a rescan skips the rows this statement already changed and takes the next.
        `WITH picked AS MATERIALIZED (
           SELECT id FROM agents WHERE id > $1 AND id <= $2 AND connection_status = 'Connected' AND last_updated_ms < $3
           ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED
         )
         UPDATE agents a SET connection_status = 'Disconnected', display_status = 'Disconnected',
           latest_minus2_event_text = latest_minus1_event_text, latest_minus1_event_text = latest_event_text, latest_event_text = $5
         FROM picked WHERE a.id = picked.id AND a.connection_status = 'Connected' AND a.last_updated_ms < $3
         RETURNING ${SWEPT_OF('a')}`,
        [after, upTo, before, limit, latestText],
      )
      return rows.sort((a, b) => a.id - b.id)
    },
    /** The highest agent id (0 without agents). */
    lastAgentId: async () => (await db.value<number>('SELECT coalesce(max(id), 0) FROM agents')) ?? 0,
    disconnect: async (id: number, before: number) =>
      (await db.run(`UPDATE agents SET connection_status = 'Disconnected' WHERE id = $1 AND connection_status = 'Connected' AND last_updated_ms < $2`, [id, before])) === 1,
    /**
     * Disconnects those of these agents still connected and quiet since before `before`;
     * answers them, in the order given (see db/gateway.ts).
     */
    async disconnectMany(ids: number[], before: number, latestText: string): Promise<SweptAgent[]> {
      if (ids.length === 0) return []
      const gone = new Map((await disconnectQuiet(ids, before, latestText)).map((a) => [a.id, a]))
      return ids.flatMap((id) => gone.get(id) ?? [])
    },
    overdueCommands: (before: number, limit: number) =>
      db.query<OverdueCommand & Record<string, unknown>>(
        `SELECT c.id, c.type, c.agent_id, a.uuid, a.host_identifier, a.local_ip_address
         FROM agent_commands c JOIN agents a ON a.id = c.agent_id
         WHERE c.status = 'Delivered' AND c.delivered_ms < $1 ORDER BY c.delivered_ms, c.id LIMIT $2`,
        [before, limit],
      ),
    timeOutCommand: async (id: number, now: number, message: string) =>
      (await db.run(`UPDATE agent_commands SET status = 'Failed', completed_ms = $1, result_message = $2 WHERE id = $3 AND status = 'Delivered'`, [now, message, id])) === 1,
    waitingForSeat: async (limit: number) => (await db.query<{ id: number }>(`SELECT id FROM agents WHERE license_status = 'Pending' ORDER BY enrolled_ms, id LIMIT $1`, [limit])).map((r) => r.id),
    /** Gives a waiting agent a seat (with `seats` set: only while one is free, under the seats' lock). */
    async activate(id: number) {
      const seats = options.seats
      if (seats === undefined) return changed(await db.run(`UPDATE agents SET license_status = 'Activated' WHERE id = $1 AND license_status = 'Pending'`, [id]))
      return db.uow.run(async () => {
        if ((await seatsInUse()) >= seats) return changed(0)
        return changed(await db.run(`UPDATE agents SET license_status = 'Activated' WHERE id = $1 AND license_status = 'Pending'`, [id]))
      })
    },
    /** Licenses whose expiration date has passed become Expired; answers how many. */
    expireLicenses: (now: number) =>
      db.run(`UPDATE agents SET license_status = 'Expired' WHERE license_status IN ('Activated', 'Pending') AND expiration_ms IS NOT NULL AND expiration_ms <= $1`, [now]),
  }
  return port satisfies Async<GatewayRepo>
}
export type PgGatewayRepo = ReturnType<typeof pgGatewayRepo>
