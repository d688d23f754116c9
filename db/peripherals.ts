// Peripherals across agents: the list with its filters and sort orders, one agent's
// peripherals, and the approvals (the administrators' decision per agent and model).
import type { DB } from './index.js'
import type { PeripheralFilter } from '../lib/agent-filter.js'
import { contains, orderBy, type Sort } from '../lib/listing.js'
import { iconName } from '../lib/usb.js'
import type { components } from '../generated/openapi.js'
import { agentContains, statementCache, type Where } from './agents.js'

type PeripheralView = components['schemas']['PeripheralViewResource']

export interface PeripheralRow {
  id: number
  agent_id: number
  agent_uuid: string
  device_id: string
  vid: string
  pid: string
  serial_number: string | null
  description: string | null
  status: string | null
  manufacturer: string | null
  caption: string | null
  gui_vid: string | null
  gui_pid: string | null
  gui_serial: string | null
  dev_icon: number
  class_code: string | null
  subclass_code: string | null
  protocol_code: string | null
  hierarchy: string | null
  parent_device_id: string | null
  is_disabled: number
  present: number
  approved: number
  admin_status: PeripheralView['adminStatus']
  is_unapproved: number
  is_vulnerable: number
  is_attack_tool: number
  vulnerability: string | null
  severity: number
  in_action: number
  vendor_text_id: number | null
  product_text_id: number | null
  first_seen_ms: number
  last_seen_ms: number
}

/** A peripheral row with the fields of its agent that the view shows. */
export interface PeripheralListRow extends PeripheralRow {
  host_identifier: string
  host_ip: string | null
  agent_hashtags: string | null
}

/** The agent's tags, then the peripheral's risk tags. */
export function peripheralHashtags(r: Pick<PeripheralListRow, 'agent_hashtags' | 'is_attack_tool' | 'is_vulnerable' | 'is_unapproved'>): string | null {
  const tags = [r.agent_hashtags?.trim() || null]
  if (r.is_attack_tool) tags.push('#attack-tool')
  if (r.is_vulnerable) tags.push('#vulnerable')
  if (r.is_unapproved) tags.push('#unapproved')
  const all = tags.filter(Boolean).join(' ')
  return all || null
}

/** A peripheral as the lists show it (PeripheralViewResource). */
export function peripheralView(r: PeripheralListRow): PeripheralView {
  return {
    uuid: r.agent_uuid,
    hostIdentifier: r.host_identifier,
    hostIp: r.host_ip,
    deviceID: r.device_id,
    description: r.description,
    status: r.status,
    manufacturer: r.manufacturer,
    caption: r.caption,
    vid: r.vid,
    pid: r.pid,
    serialNumber: r.serial_number,
    guiVid: r.gui_vid,
    guiPid: r.gui_pid,
    guiSerial: r.gui_serial,
    devIcon: r.dev_icon as PeripheralView['devIcon'],
    devIconDescription: iconName(r.dev_icon),
    classCode: r.class_code,
    subclassCode: r.subclass_code,
    protocolCode: r.protocol_code,
    hierarchy: r.hierarchy,
    parentDeviceID: r.parent_device_id,
    isDisabled: r.is_disabled === 1,
    approved: r.approved === 1,
    present: r.present === 1,
    isUnapprovedPeripherals: r.is_unapproved === 1,
    isVulnerablePeripheral: r.is_vulnerable === 1,
    isKnownAttackTool: r.is_attack_tool === 1,
    severity: r.severity,
    inAction: r.in_action === 1,
    vulnerability: r.vulnerability,
    adminStatus: r.admin_status,
    hashtags: peripheralHashtags(r),
  }
}

const FROM = 'peripherals p JOIN agents a ON a.id = p.agent_id'
const COLUMNS = 'p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags'

/** Interned texts (peripheral_texts, a few thousand rows) that contain the term. */
function textContains(w: Where, column: string, kind: 'vendor' | 'product', term: string) {
  w.sql.push(`${column} IN (SELECT id FROM peripheral_texts WHERE kind = '${kind}' AND text LIKE ? ESCAPE '\\')`)
  w.params.push(contains(term.toLowerCase()))
}

const riskTags = { is_attack_tool: '#attack-tool', is_vulnerable: '#vulnerable', is_unapproved: '#unapproved' }

/** GlobalSearch over peripherals: each field through the index that serves it. */
function globalSearch(w: Where, term: string) {
  const any: Where = { sql: [], params: [] }
  const agents: Where = { sql: [], params: [] }
  agentContains('a2', ['everything'], ['host_identifier', 'local_ip_address', 'hashtags'], term, agents)
  any.sql.push(`p.agent_id IN (SELECT a2.id FROM agents a2 WHERE ${agents.sql.join(' AND ')})`)
  any.params.push(...agents.params)
  textContains(any, 'p.vendor_text_id', 'vendor', term)
  textContains(any, 'p.product_text_id', 'product', term)
  any.sql.push(`(p.vid, p.pid) IN (SELECT vid, pid FROM catalogue WHERE coalesce(vulnerability, name) LIKE ? ESCAPE '\\')`)
  any.params.push(contains(term))
  serialContains(any, ['device_id', 'serial_number'], term)
  for (const [column, tag] of Object.entries(riskTags)) if (tag.includes(term.toLowerCase())) any.sql.push(`p.${column} = 1`)
  w.sql.push(`(${any.sql.join(' OR ')})`)
  w.params.push(...any.params)
}

/** "Contains" on the device's own identifiers, which are not interned. */
function serialContains(w: Where, columns: string[], term: string) {
  const like = contains(term)
  w.sql.push(`(${columns.map((c) => `p.${c} LIKE ? ESCAPE '\\'`).join(' OR ')})`)
  for (const _ of columns) w.params.push(like)
}

/** The conditions of a peripheral filter over `peripherals p JOIN agents a`, as a WHERE fragment ('1' when none). */
export function peripheralWhere(f: PeripheralFilter): { sql: string; params: unknown[] } {
  const w: Where = { sql: [], params: [] }
  if (f.hostIdentifier !== undefined) agentContains('a', ['host_identifier'], ['host_identifier'], f.hostIdentifier, w)
  if (f.ipAddress !== undefined) agentContains('a', ['ip_addresses', 'everything'], ['local_ip_address'], f.ipAddress, w)
  if (f.hostUuid !== undefined) agentContains('a', ['uuid'], ['uuid'], f.hostUuid, w)
  if (f.vendor !== undefined) textContains(w, 'p.vendor_text_id', 'vendor', f.vendor)
  if (f.productInfo !== undefined) textContains(w, 'p.product_text_id', 'product', f.productInfo)
  if (f.serialNumber !== undefined) serialContains(w, ['serial_number', 'gui_serial'], f.serialNumber)
  for (const [column, value] of [['p.vid', f.vid], ['p.pid', f.pid]] as const) {
    if (value === undefined) continue
    w.sql.push(`${column} = ?`)
    w.params.push(value)
  }
  for (const [column, value] of [['p.is_unapproved', f.isUnapproved], ['p.is_vulnerable', f.isVulnerable], ['p.is_attack_tool', f.isAttackTool], ['p.present', f.present]] as const) {
    if (value !== undefined) w.sql.push(`${column} = ${value ? 1 : 0}`)
  }
  if (f.globalSearch !== undefined) globalSearch(w, f.globalSearch)
  return { sql: w.sql.length ? w.sql.join(' AND ') : '1', params: w.params }
}

/** Sort fields of the peripheral list (the contract's x-sort-fields) and their columns. */
export const peripheralSortColumns: Record<string, string> = {
  uuid: 'p.agent_uuid',
  hostUuid: 'p.agent_uuid',
  hostIdentifier: 'a.host_identifier COLLATE NOCASE',
  hostIp: 'a.local_ip_address',
  deviceID: 'p.device_id',
  description: 'p.description COLLATE NOCASE',
  manufacturer: 'p.manufacturer COLLATE NOCASE',
  caption: 'p.caption COLLATE NOCASE',
  vid: 'p.vid',
  pid: 'p.pid',
  serialNumber: 'p.serial_number',
  guiVid: 'p.gui_vid COLLATE NOCASE',
  guiPid: 'p.gui_pid COLLATE NOCASE',
  devIcon: 'p.dev_icon',
  status: 'p.status',
  approved: 'p.approved',
  present: 'p.present',
  isDisabled: 'p.is_disabled',
  isUnapprovedPeripherals: 'p.is_unapproved',
  isVulnerablePeripheral: 'p.is_vulnerable',
  isKnownAttackTool: 'p.is_attack_tool',
  severity: 'p.severity',
  adminStatus: 'p.admin_status',
}
const nullableSorts = ['hostIp', 'description', 'manufacturer', 'caption', 'serialNumber', 'guiVid', 'guiPid', 'status']
export const peripheralOrderBy = (s: Sort) => orderBy(s, peripheralSortColumns, ['p.device_id', 'p.id'], nullableSorts)

export function peripheralsRepo(db: DB) {
  const cached = statementCache(db)
  const total = db.prepare<[], number>("SELECT n FROM row_counts WHERE name = 'peripherals'").pluck()
  const ofAgent = db.prepare<[number, number], PeripheralListRow>(
    `SELECT ${COLUMNS} FROM ${FROM} WHERE p.agent_id = ? ORDER BY p.present DESC, p.last_seen_ms DESC, p.id DESC LIMIT ?`,
  )
  const presentModels = db.prepare<[number], { vid: string; pid: string }>('SELECT DISTINCT vid, pid FROM peripherals WHERE agent_id = ? AND present ORDER BY vid, pid')
  const hasModel = db.prepare<[number, string, string], number>('SELECT count(*) FROM peripherals WHERE agent_id = ? AND vid = ? AND pid = ?').pluck()
  const approval = db.prepare<[number, string, string], string>('SELECT status FROM approvals WHERE agent_id = ? AND vid = ? AND pid = ?').pluck()
  const setApproval = db.prepare<{ agent: number; vid: string; pid: string; status: string; now: number; by: string }>(
    `INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES (:agent, :vid, :pid, :status, :now, :by)
     ON CONFLICT (agent_id, vid, pid) DO UPDATE SET status = excluded.status, changed_ms = excluded.changed_ms, changed_by = excluded.changed_by`,
  )
  const whitelist = db.prepare<[number], { vid: string; pid: string }>("SELECT vid, pid FROM approvals WHERE agent_id = ? AND status = 'Approved' ORDER BY vid, pid")
  const attackTool = db.prepare<[string, string], string>("SELECT name FROM catalogue WHERE kind = 'KnownAttackTool' AND vid = ? AND pid = ?").pluck()

  return {
    /** A page of the list: every peripheral count, the matching count, and the page's rows. */
    list(f: PeripheralFilter, sort: Sort, limit: number, offset: number) {
      const where = peripheralWhere(f)
      const all = total.get() as number
      const filtered = where.sql === '1' ? all : (cached(`SELECT count(*) FROM ${FROM} WHERE ${where.sql}`).pluck().get(...where.params) as number)
      const rows = cached(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${where.sql} ORDER BY ${peripheralOrderBy(sort)} LIMIT ? OFFSET ?`).all(...where.params, limit, offset) as PeripheralListRow[]
      return { total: all, filtered, rows }
    },

    /** Every matching peripheral in order, read as it is consumed (streamed exports). */
    iterate(f: PeripheralFilter, sort: Sort): IterableIterator<PeripheralListRow> {
      const where = peripheralWhere(f)
      return cached(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${where.sql} ORDER BY ${peripheralOrderBy(sort)}`).iterate(...where.params) as IterableIterator<PeripheralListRow>
    },

    /** One agent's peripherals: present ones first, each most recently seen first. */
    ofAgent: (agentId: number, limit = 2048) => ofAgent.all(agentId, limit),
    /** The models (VID/PID) the agent reported present at its last check-in. */
    presentModels: (agentId: number) => presentModels.all(agentId),
    /** Whether the agent ever reported a peripheral of this model. */
    hasModel: (agentId: number, vid: string, pid: string) => (hasModel.get(agentId, vid, pid) as number) > 0,
    /** The name of the known attack tool with this VID/PID, if the catalogue has one. */
    attackToolName: (vid: string, pid: string) => attackTool.get(vid, pid) as string | undefined,

    /** Records a decision on a model for an agent; answers whether it changed anything. */
    setApproval(agentId: number, vid: string, pid: string, status: 'Approved' | 'Disapproved', now: number, by: string): boolean {
      if (approval.get(agentId, vid, pid) === status) return false
      setApproval.run({ agent: agentId, vid, pid, status, now, by })
      return true
    },
    /** The agent's whitelist: every model approved for it. */
    whitelist: (agentId: number) => whitelist.all(agentId),
  }
}
export type PeripheralsRepo = ReturnType<typeof peripheralsRepo>
