// The agent gateway's peripherals: how a reported one is compared with the stored one, the
// texts they are searched by, and the writes of a group of check-ins (one statement per kind).
import type { Statement } from 'better-sqlite3'
import type { DB } from './index.js'
import type { PeripheralWrite, PeripheralsWritten, PresentPeripheral, ReportedPeripheral, StoredPeripheral } from '../lib/gateway/ports.js'

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

export function peripheralStore(db: DB) {
  const texts = internPeripheralTexts(db)
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

  // Their statements are OR FAIL (an error keeps what the statement wrote before it): outside
  // the caller's transaction each call is one of its own, so that a failed one leaves nothing.
  const applyPeripheralsAlone = db.transaction(applyPeripheralsMany)

  return {
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
  }
}
