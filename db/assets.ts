// Assets as the NAC connector and the automation client discover them: every agent's host,
// every peripheral an agent reported, every agentless host. They are not a table of their
// own: each is read from its source table (three branches of one UNION ALL), with the
// asset's fields as SQL expressions over it, so that nothing has to be kept in step at
// check-in. A page is read in two steps: the keys of the page (computing only what the
// filters and the order need), then those rows in full.
import type { DB } from './index.js'
import { statementCache } from './sql.js'
import { CheckInTimeWrites } from './answer-cache.js'
import { patternList } from './match.js'

/** Asset type codes (`type`). */
export const ASSET_TYPES = { Peripheral: 1, Workstation: 2, Server: 3, VirtualDesktop: 8, AgentlessHost: 10 } as const
/** Icon codes of hosts (`icon`); a peripheral's icon is its `devIcon` (0-14). */
export const HOST_ICONS = { Workstation: 100, Server: 101, VirtualDesktop: 102, AgentlessHost: 103 } as const
/** Hierarchy codes: a host, a hub between a host and its devices, a device plugged in. */
export const HIERARCHY = { Host: 0, Hub: 1, Device: 2 } as const
const HUB_ICON = 4

/** The risk (0-10) each indicator carries; an asset's risk level is the highest of these and its severity's. */
export const INDICATOR_RISK = {
  activeThreat: 9,
  inactiveThreat: 6,
  cve: 7,
  rare: 5,
  unapproved: 4,
  unsupervised: 4,
} as const
/** Risk level (0-10) of a syslog severity (0 Emergency ... 7 Debug). */
export const SEVERITY_RISK = [10, 9, 8, 7, 5, 3, 1, 0] as const

export type Source = 'agent' | 'host' | 'peripheral'
export const SOURCES: readonly Source[] = ['agent', 'host', 'peripheral']

export type AssetField =
  | 'key'
  | 'name'
  | 'mac'
  | 'ipAddress'
  | 'model'
  | 'vendor'
  | 'statusDescription'
  | 'switchIp'
  | 'switchName'
  | 'portName'
  | 'type'
  | 'icon'
  | 'hierarchy'
  | 'riskLevel'
  | 'isOnline'
  | 'isRiskAccepted'
  | 'firstSeen'
  | 'lastSeen'

/** A condition on one field, as SQL operators: `like` patterns are escaped with `\`, dates are epoch ms. */
export type Condition =
  | { field: AssetField; op: 'in' | 'notIn'; values: (string | number)[] }
  | { field: AssetField; op: 'like' | 'notLike'; values: string[] }
  | { field: AssetField; op: 'gt' | 'ge' | 'lt' | 'le'; values: [number] }
  | { field: AssetField; op: 'range' | 'notRange'; values: [from: number, to: number] }

/** What a query asks: `filters` and `system` each an OR of AND-groups (empty: everything), both must hold. */
export interface AssetQuery {
  filters: Condition[][]
  system: Condition[][]
  /** A LIKE pattern matched against the asset's names, addresses and model. */
  search?: string
  /** `VID:PID` of the models that count as rare. */
  rare: string[]
}

export interface AssetSort {
  field: AssetField
  direction: 'asc' | 'desc'
}

const sevRisk = (s: string) => `CASE ${s} ${SEVERITY_RISK.map((r, i) => `WHEN ${i} THEN ${r}`).join(' ')} ELSE 0 END`
const R = INDICATOR_RISK
const RARE = `(p.vid || ':' || p.pid) IN (SELECT value FROM json_each(@rare))`
/** The rare models' peripherals as their index (vid, pid) finds them: a VID is 4 hex digits, so the first ':' parts the two. */
const RARE_BY_MODEL = `(p.vid, p.pid) IN (SELECT substr(value, 1, instr(value, ':') - 1), substr(value, instr(value, ':') + 1) FROM json_each(@rare))`
/** An agent's risk; the expression of the index agents_asset_risk (migration 038). */
const AGENT_RISK = `max(${sevRisk('a.severity')}, a.has_attack_tool * ${R.activeThreat}, a.has_vulnerable * ${R.cve}, a.has_unapproved * ${R.unapproved})`
/** A peripheral's risk without the rare models; the expression of the index peripherals_asset_risk (migration 038). */
const PERIPHERAL_RISK = `max(${sevRisk('p.severity')}, p.is_attack_tool * CASE WHEN p.present THEN ${R.activeThreat} ELSE ${R.inactiveThreat} END,
      p.is_vulnerable * ${R.cve}, p.is_unapproved * ${R.unapproved})`
const hexMac = (m: string) => `lower(replace(replace(replace(${m}, '-', ''), ':', ''), '.', ''))`
/** The agent's main adapter's MAC (the one carrying its address, else the first with one), as 12 hex digits. */
const AGENT_MAC = `coalesce((SELECT ${hexMac("json_extract(n.value, '$.macAddress')")} FROM json_each(a.nics_json) n
  WHERE coalesce(json_extract(n.value, '$.macAddress'), '') <> ''
  ORDER BY EXISTS (SELECT 1 FROM json_each(n.value, '$.ipAddresses') i WHERE i.value = a.local_ip_address) DESC, n.key LIMIT 1), 'dormant device')`

/** Each field of an asset, per source, as SQL over `a` (agents), `c` (agentless connections) or `p` (peripherals, with its agent `a`). */
const FIELDS: Record<AssetField, Record<Source, string>> = {
  key: { agent: 'a.uuid', host: 'CAST(c.id AS TEXT)', peripheral: "p.agent_uuid || '/' || p.device_id" },
  name: { agent: 'a.host_identifier', host: 'c.name', peripheral: 'coalesce(p.gui_pid, p.caption, p.description, p.device_id)' },
  mac: { agent: AGENT_MAC, host: "'dormant device'", peripheral: "'dormant device'" },
  ipAddress: { agent: 'a.local_ip_address', host: 'c.address', peripheral: 'a.local_ip_address' },
  model: { agent: 'a.pc_model', host: 'NULL', peripheral: 'coalesce(p.gui_pid, p.caption)' },
  vendor: { agent: 'a.manufacturer', host: 'NULL', peripheral: 'coalesce(p.gui_vid, p.manufacturer)' },
  statusDescription: {
    agent: 'a.display_status',
    host: 'c.status',
    peripheral: "CASE WHEN NOT p.present THEN 'Disconnected' WHEN p.approved THEN 'Approved' WHEN p.admin_status = 'Disapproved' THEN 'Disapproved' ELSE 'Not approved' END",
  },
  switchIp: { agent: 'a.switch_ip', host: 'NULL', peripheral: 'a.switch_ip' },
  switchName: { agent: 'a.switch_name', host: 'NULL', peripheral: 'a.switch_name' },
  portName: { agent: 'coalesce(a.port_name, a.port_id)', host: 'NULL', peripheral: 'coalesce(a.port_name, a.port_id)' },
  type: {
    agent: `CASE a.running_mode WHEN 'Server' THEN ${ASSET_TYPES.Server} WHEN 'VDI' THEN ${ASSET_TYPES.VirtualDesktop} ELSE ${ASSET_TYPES.Workstation} END`,
    host: String(ASSET_TYPES.AgentlessHost),
    peripheral: String(ASSET_TYPES.Peripheral),
  },
  icon: {
    agent: `CASE a.running_mode WHEN 'Server' THEN ${HOST_ICONS.Server} WHEN 'VDI' THEN ${HOST_ICONS.VirtualDesktop} ELSE ${HOST_ICONS.Workstation} END`,
    host: String(HOST_ICONS.AgentlessHost),
    peripheral: 'p.dev_icon',
  },
  hierarchy: { agent: String(HIERARCHY.Host), host: String(HIERARCHY.Host), peripheral: `CASE WHEN p.dev_icon = ${HUB_ICON} THEN ${HIERARCHY.Hub} ELSE ${HIERARCHY.Device} END` },
  riskLevel: {
    agent: AGENT_RISK,
    host: `max(${SEVERITY_RISK[6]}, ${R.unsupervised})`,
    peripheral: `max(${PERIPHERAL_RISK}, (${RARE}) * ${R.rare})`,
  },
  isOnline: { agent: "a.connection_status = 'Connected'", host: "c.status = 'Reachable'", peripheral: "p.present AND a.connection_status = 'Connected'" },
  // The risks an administrator approved: every peripheral behind them is approved.
  isRiskAccepted: {
    agent: '(a.has_attack_tool OR a.has_vulnerable) AND NOT a.has_unapproved',
    host: '0',
    peripheral: `p.approved AND (p.is_attack_tool OR p.is_vulnerable OR ${RARE})`,
  },
  firstSeen: { agent: 'a.enrolled_ms', host: 'c.created_ms', peripheral: 'p.first_seen_ms' },
  lastSeen: { agent: 'a.last_updated_ms', host: 'c.last_reachable_ms', peripheral: 'p.last_seen_ms' },
}

/** Fields compared as text (case-insensitively); the others are numbers (booleans 1/0). */
export const TEXT_FIELDS: ReadonlySet<AssetField> = new Set(['key', 'name', 'mac', 'ipAddress', 'model', 'vendor', 'statusDescription', 'switchIp', 'switchName', 'portName'])
const NULLABLE_SORTS: ReadonlySet<AssetField> = new Set(['ipAddress', 'model', 'vendor', 'switchIp', 'switchName', 'portName', 'lastSeen'])

const FROM: Record<Source, string> = {
  agent: 'agents a',
  host: 'agentless_connections c',
  peripheral: 'peripherals p JOIN agents a ON a.id = p.agent_id',
}
/**
 * The source's tables for a statement that reads `sql`: a peripheral's agent is joined only
 * when its columns are read (a million joins cost more than the rest of a count).
 */
const from = (src: Source, sql: string) => (src === 'peripheral' && !/\ba\./.test(sql) ? 'peripherals p' : FROM[src])
const ROWID: Record<Source, string> = { agent: 'a.id', host: 'c.id', peripheral: 'p.id' }
const SEARCHED: AssetField[] = ['name', 'key', 'ipAddress', 'model', 'vendor']

interface Rendered {
  sql: string
  params: unknown[]
}

/** Orders each source reads from an index of its own, merged (indexedKeys). */
const INDEXED_SORTS: ReadonlySet<AssetField> = new Set(['firstSeen', 'riskLevel'])

/**
 * The parts a source is read in, in an indexed order: each its sort value and the condition
 * that picks its rows. A peripheral's risk is its index's unless its model is rare (then at
 * least the rare risk): the peripherals of no rare model are read by that index, those of
 * the rare models by model.
 */
function orderedParts(src: Source, field: AssetField, anyRare: boolean): [value: string, only?: string][] {
  if (field !== 'riskLevel' || src !== 'peripheral') return [[FIELDS[field][src]]]
  if (!anyRare) return [[PERIPHERAL_RISK]]
  return [
    [PERIPHERAL_RISK, `NOT ${RARE}`],
    [`max(${PERIPHERAL_RISK}, ${R.rare})`, `${RARE_BY_MODEL} AND ${RARE}`],
  ]
}

function renderCondition(c: Condition, src: Source): Rendered {
  const e = FIELDS[c.field][src]
  const text = TEXT_FIELDS.has(c.field)
  switch (c.op) {
    case 'in':
    case 'notIn': {
      const values = text ? c.values.map((v) => String(v).toLowerCase()) : c.values
      // Several values: one set, one bound JSON array (one statement text whatever their number).
      const set = values.length > 1 ? 'SELECT value FROM json_each(?)' : '?'
      const match = text ? `lower(${e}) IN (${set})` : `(${e}) IN (${set})`
      return { sql: c.op === 'in' ? `coalesce(${match}, 0)` : `coalesce(NOT ${match}, 1)`, params: values.length > 1 ? [JSON.stringify(values)] : values }
    }
    case 'like':
    case 'notLike': {
      // Several patterns: the field computed once per row and tested against all of them (db/match.ts).
      const any = c.values.length > 1 ? `like_any(${e}, ?)` : `(${e}) LIKE ? ESCAPE '\\'`
      return { sql: c.op === 'like' ? `coalesce(${any}, 0)` : `coalesce(NOT (${any}), 1)`, params: c.values.length > 1 ? [patternList(c.values)] : c.values }
    }
    case 'gt':
      return { sql: `coalesce((${e}) > ?, 0)`, params: c.values }
    case 'ge':
      return { sql: `coalesce((${e}) >= ?, 0)`, params: c.values }
    case 'lt':
      return { sql: `coalesce((${e}) < ?, 0)`, params: c.values }
    case 'le':
      return { sql: `coalesce((${e}) <= ?, 0)`, params: c.values }
    case 'range':
      return { sql: `coalesce((${e}) >= ? AND (${e}) < ?, 0)`, params: c.values }
    case 'notRange':
      return { sql: `coalesce(NOT ((${e}) >= ? AND (${e}) < ?), 1)`, params: c.values }
  }
}

/** A field that is one constant for every asset of a source (a type, a host's icon): its value, else undefined. */
function constant(field: AssetField, src: Source): number | undefined {
  const e = FIELDS[field][src]
  return /^-?\d+$/.test(e) ? Number(e) : undefined
}

/** A condition on a constant, decided here: true or false; undefined when SQL must decide. */
function decide(c: Condition, src: Source): boolean | undefined {
  const v = TEXT_FIELDS.has(c.field) ? undefined : constant(c.field, src)
  if (v === undefined) return undefined
  const [a, b] = c.values as number[]
  switch (c.op) {
    case 'in':
      return (c.values as number[]).includes(v)
    case 'notIn':
      return !(c.values as number[]).includes(v)
    case 'gt':
      return v > a
    case 'ge':
      return v >= a
    case 'lt':
      return v < a
    case 'le':
      return v <= a
    case 'range':
      return v >= a && v < b
    case 'notRange':
      return !(v >= a && v < b)
    default:
      return undefined
  }
}

/**
 * The groups with the conditions a source decides by itself taken out: [] when they always
 * hold, null when they never do (the source is then not read at all: the connector asking
 * for hosts reads no peripheral).
 */
function fold(groups: Condition[][], src: Source): Condition[][] | null {
  if (groups.length === 0) return []
  const out: Condition[][] = []
  for (const and of groups) {
    const left: Condition[] = []
    let holds = true
    for (const c of and) {
      const d = decide(c, src)
      if (d === false) {
        holds = false
        break
      }
      if (d === undefined) left.push(c)
    }
    if (!holds) continue
    if (left.length === 0) return []
    out.push(left)
  }
  return out.length ? out : null
}

/** The query as one source sees it, or null when none of its assets can match. */
function foldQuery(q: AssetQuery, src: Source): AssetQuery | null {
  const filters = fold(q.filters, src)
  const system = fold(q.system, src)
  return filters && system ? { ...q, filters, system } : null
}

function renderGroups(groups: Condition[][], src: Source): Rendered {
  if (groups.length === 0) return { sql: '1', params: [] }
  const params: unknown[] = []
  const ors = groups.map((and) => {
    const parts = and.map((c) => {
      const r = renderCondition(c, src)
      params.push(...r.params)
      return r.sql
    })
    return `(${parts.join(' AND ')})`
  })
  return { sql: `(${ors.join(' OR ')})`, params }
}

function renderWhere(q: AssetQuery, src: Source): Rendered {
  const f = renderGroups(q.filters, src)
  const s = renderGroups(q.system, src)
  const parts = [f.sql, s.sql]
  const params = [...f.params, ...s.params]
  if (q.search !== undefined) {
    const fields = SEARCHED.map((name) => `(${FIELDS[name][src]}) LIKE @search ESCAPE '\\'`)
    if (src === 'agent') fields.push("a.nics_text LIKE @search ESCAPE '\\'")
    parts.push(`coalesce(${fields.join(' OR ')}, 0)`)
  }
  const served = indexed(q, src)
  parts.push(...served.map((r) => r.sql))
  for (const r of served) params.push(...r.params)
  const sql = parts.filter((p) => p !== '1').join(' AND ')
  return { sql: sql || '1', params }
}

/** A global search's term when its candidates can be read from the trigram indexes: three characters or more, printable ASCII, no '/'. */
function indexedTerm(search: string | undefined): string | undefined {
  if (search === undefined || !/^%.*%$/s.test(search)) return undefined
  const term = search.slice(1, -1).replace(/\\(.)/gs, '$1')
  return term.length >= 3 && /^[\x20-\x7e]+$/.test(term) && !term.includes('/') ? term : undefined
}

/**
 * Conditions an index serves, implied by the query and added to it, so they change no
 * answer. A riskLevel list that the filters (or the system filters) hold as one group:
 * the agents' risk index reads those levels alone (the connector's query). A global search
 * of an indexed term: the assets whose texts may hold it, each text read from an index (the
 * trigram indexes fold case, and the peripherals' interned texts are their vendor and
 * product texts in lower case: each finds at least the texts LIKE matches). A '/' could
 * match across a peripheral key's two parts, and a non-ASCII letter's case is folded
 * differently: such terms, and terms too short for a trigram, are matched row by row.
 */
function indexed(q: AssetQuery, src: Source): Rendered[] {
  const out: Rendered[] = []
  if (src === 'agent') {
    for (const groups of [q.filters, q.system]) {
      if (groups.length !== 1) continue
      for (const c of groups[0]) {
        if (c.field !== 'riskLevel' || c.op !== 'in') continue
        out.push({ sql: `(${AGENT_RISK}) IN (${c.values.map(() => '?').join(', ')})`, params: c.values })
      }
    }
  }
  if (indexedTerm(q.search) === undefined) return out
  const like = "LIKE @search ESCAPE '\\'"
  if (src === 'agent') {
    out.push({
      sql: `a.id IN (SELECT rowid FROM agents_fts WHERE agents_fts MATCH @fts
        UNION ALL SELECT id FROM agents WHERE host_identifier ${like}
        UNION ALL SELECT id FROM agents WHERE local_ip_address ${like}
        UNION ALL SELECT id FROM agents WHERE pc_model ${like} OR manufacturer ${like})`,
      params: [],
    })
  } else if (src === 'peripheral') {
    out.push({
      sql: `p.id IN (SELECT rowid FROM peripherals_fts WHERE peripherals_fts MATCH @fts
        UNION ALL SELECT id FROM peripherals WHERE vendor_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'vendor' AND text ${like})
        UNION ALL SELECT id FROM peripherals WHERE product_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'product' AND text ${like})
        UNION ALL SELECT id FROM peripherals WHERE agent_id IN (SELECT rowid FROM agents_fts WHERE agents_fts MATCH @ftsUuid
          UNION ALL SELECT id FROM agents WHERE local_ip_address ${like}))`,
      params: [],
    })
  }
  return out
}

/** The named values a statement uses (@rare, @search, @end), as one object after the positional ones; none when it uses none. */
function named(sql: string, q: AssetQuery, more: Record<string, unknown> = {}): [Record<string, unknown>] | [] {
  const term = indexedTerm(q.search) ?? ''
  const phrase = `"${term.replace(/"/g, '""')}"`
  const all: Record<string, unknown> = { rare: JSON.stringify(q.rare), search: q.search ?? '', fts: phrase, ftsUuid: `uuid : ${phrase}`, ...more }
  const used = Object.fromEntries(Object.entries(all).filter(([k]) => new RegExp(`@${k}\\b`).test(sql)))
  return Object.keys(used).length > 0 ? [used] : []
}

export interface AssetRow {
  source: Source
  rowid: number
  key: string
  name: string
  ip_address: string | null
  model: string | null
  vendor: string | null
  status: string
  type: number
  icon: number
  hierarchy: number
  risk_level: number
  is_online: number
  is_risk_accepted: number
  first_seen: number
  last_seen: number | null
  switch_ip: string | null
  switch_name: string | null
  port_id: string | null
  port_name: string | null
  host_identifier: string | null
  agent_uuid: string | null
  /** Agents: the adapters (JSON AgentNic[]); others null. */
  nics_json: string | null
  has_attack_tool: number
  attack_tool_present: number
  has_vulnerable: number
  vulnerability: string | null
  is_rare: number
  has_unapproved: number
  is_unsupervised: number
  vid: string | null
  pid: string | null
  host_status: string | null
}

/** The full row of each source, by its rowids (a JSON array). */
function rowSql(src: Source): string {
  const f = (name: AssetField) => FIELDS[name][src]
  const common = `'${src}' AS source, ${ROWID[src]} AS rowid, ${f('key')} AS key, ${f('name')} AS name, ${f('ipAddress')} AS ip_address,
    ${f('model')} AS model, ${f('vendor')} AS vendor, ${f('statusDescription')} AS status, ${f('type')} AS type, ${f('icon')} AS icon,
    ${f('hierarchy')} AS hierarchy, ${f('riskLevel')} AS risk_level, ${f('isOnline')} AS is_online, ${f('isRiskAccepted')} AS is_risk_accepted,
    ${f('firstSeen')} AS first_seen, ${f('lastSeen')} AS last_seen`
  const where = `WHERE ${ROWID[src]} IN (SELECT value FROM json_each(@ids))`
  switch (src) {
    case 'agent':
      return `SELECT ${common}, a.switch_ip, a.switch_name, a.port_id, a.port_name, a.host_identifier, a.uuid AS agent_uuid, a.nics_json,
        a.has_attack_tool, a.has_attack_tool AS attack_tool_present, a.has_vulnerable, NULL AS vulnerability, 0 AS is_rare, a.has_unapproved,
        0 AS is_unsupervised, NULL AS vid, NULL AS pid, NULL AS host_status
        FROM ${FROM.agent} ${where}`
    case 'host':
      return `SELECT ${common}, NULL AS switch_ip, NULL AS switch_name, NULL AS port_id, NULL AS port_name, NULL AS host_identifier,
        NULL AS agent_uuid, NULL AS nics_json, 0 AS has_attack_tool, 0 AS attack_tool_present, 0 AS has_vulnerable, NULL AS vulnerability,
        0 AS is_rare, 0 AS has_unapproved, 1 AS is_unsupervised, NULL AS vid, NULL AS pid, c.status AS host_status
        FROM ${FROM.host} ${where}`
    case 'peripheral':
      return `SELECT ${common}, a.switch_ip, a.switch_name, a.port_id, a.port_name, a.host_identifier, a.uuid AS agent_uuid, NULL AS nics_json,
        p.is_attack_tool AS has_attack_tool, p.is_attack_tool AND p.present AS attack_tool_present, p.is_vulnerable AS has_vulnerable,
        p.vulnerability, ${RARE} AS is_rare, p.is_unapproved AS has_unapproved, 0 AS is_unsupervised, p.vid, p.pid, a.connection_status AS host_status
        FROM ${FROM.peripheral} ${where}`
  }
}

export interface AssetCounts {
  type: number
  risk_level: number
  is_online: number
  is_new: number
  n: number
}

/** Where the data stands, for the paging state kept (see `dataAt`). */
export interface DataAt {
  writes: number
  generation: string
}

/** Where a page ended: the sort value, source index and rowid of its last asset. */
interface Position {
  s: unknown
  src: number
  id: number
}
type Key = [s: unknown, src: number, id: number]
interface Paging {
  per: Record<Source, number>
  ends: Map<number, Position>
}
/** Queries whose paging is kept, and page ends kept per query. */
const MAX_PAGINGS = 32
const MAX_ENDS = 64

export function assetsRepo(db: DB, checkInTimes: CheckInTimeWrites = new CheckInTimeWrites()) {
  const cached = statementCache(db, 64)
  const rows = Object.fromEntries(SOURCES.map((s) => [s, db.prepare(rowSql(s))])) as Record<Source, ReturnType<DB['prepare']>>
  const totals = db
    .prepare<[], number>(`SELECT (SELECT n FROM row_counts WHERE name = 'agents') + (SELECT n FROM row_counts WHERE name = 'peripherals')
    + (SELECT count(*) FROM agentless_connections)`)
    .pluck()
  const summaries = Object.fromEntries(
    SOURCES.map((s) => [
      s,
      db.prepare(
        `SELECT ${FIELDS.type[s]} AS type, ${FIELDS.riskLevel[s]} AS risk_level, ${FIELDS.isOnline[s]} AS is_online,
       ${FIELDS.firstSeen[s]} >= @since AS is_new, count(*) AS n
     FROM ${FROM[s]} WHERE ${ROWID[s]} > @from AND ${ROWID[s]} <= @to GROUP BY 1, 2, 3, 4`,
      ),
    ]),
  ) as Record<Source, ReturnType<DB['prepare']>>
  const lastIds = Object.fromEntries(SOURCES.map((s) => [s, db.prepare<[], number | null>(`SELECT max(${ROWID[s]}) FROM ${FROM[s].split(' JOIN ')[0]}`).pluck()])) as unknown as Record<
    Source,
    { get(): number | null | undefined }
  >
  // Switches agents report being plugged into: a switch is new when every agent behind it enrolled since.
  const switches = db.prepare<{ since: number }, { n: number; fresh: number }>(
    `SELECT count(*) AS n, coalesce(sum(first >= @since), 0) AS fresh FROM (
       SELECT min(enrolled_ms) AS first FROM agents WHERE coalesce(switch_ip, switch_name) IS NOT NULL
       GROUP BY lower(coalesce(switch_ip, '')), lower(coalesce(switch_name, '')))`,
  )

  /** The matching count of each source (0 for a source the query rules out). */
  function counts(parts: Partial<Record<Source, AssetQuery>>): Record<Source, number> {
    const out = { agent: 0, host: 0, peripheral: 0 } as Record<Source, number>
    for (const src of SOURCES) {
      const q = parts[src]
      if (!q) continue
      const w = renderWhere(q, src)
      // Without a WHERE, SQLite counts a table from its b-tree's pages, not row by row.
      const sql = `SELECT count(*) FROM ${from(src, w.sql)}${w.sql === '1' ? '' : ` WHERE ${w.sql}`}`
      out[src] = cached(sql)
        .pluck()
        .get(...w.params, ...named(sql, q)) as number
    }
    return out
  }

  /**
   * The rows after `pos` in the order of `value` (then source, then id), for one source's
   * branch, as a condition its index can serve. Nulls come last in both directions.
   */
  function afterPos(src: Source, value: string, sort: AssetSort, pos: Position): Rendered {
    const i = SOURCES.indexOf(src)
    const asc = sort.direction === 'asc'
    const cmp = asc ? '>' : '<'
    const id = ROWID[src]
    if (pos.s === null) {
      if (i === pos.src) return { sql: `(${value}) IS NULL AND ${id} ${cmp} ?`, params: [pos.id] }
      return { sql: (asc ? i > pos.src : i < pos.src) ? `(${value}) IS NULL` : '0', params: [] }
    }
    const nulls = ` OR (${value}) IS NULL`
    if (i === pos.src) return { sql: `((${value}, ${id}) ${cmp} (?, ?)${nulls})`, params: [pos.s, pos.id] }
    const later = asc ? i > pos.src : i < pos.src
    return { sql: `((${value}) ${cmp}${later ? '=' : ''} ?${nulls})`, params: [pos.s] }
  }

  /** The keys of a page: (source, rowid) in order, with the sort value. */
  function pageKeys(parts: Partial<Record<Source, AssetQuery>>, q: AssetQuery, sort: AssetSort, limit: number, offset: number, pos?: Position): Key[] {
    const params: unknown[] = []
    const branches = SOURCES.filter((src) => parts[src]).map((src) => {
      const w = renderWhere(parts[src]!, src)
      params.push(...w.params)
      const e = FIELDS[sort.field][src]
      const value = TEXT_FIELDS.has(sort.field) ? `lower(${e})` : e
      let where = w.sql
      if (pos) {
        const a = afterPos(src, value, sort, pos)
        where += ` AND ${a.sql}`
        params.push(...a.params)
      }
      return `SELECT ${value} AS s, ${SOURCES.indexOf(src)} AS src, ${ROWID[src]} AS id FROM ${from(src, where + value)} WHERE ${where}`
    })
    const dir = sort.direction === 'asc' ? 'ASC' : 'DESC'
    const nullsLast = dir === 'ASC' && NULLABLE_SORTS.has(sort.field) ? 's IS NULL, ' : ''
    const sql = `SELECT s, src, id FROM (${branches.join(' UNION ALL ')}) ORDER BY ${nullsLast}s ${dir}, src ${dir}, id ${dir} LIMIT ? OFFSET ?`
    return cached(sql)
      .raw(true)
      .all(...params, limit, offset, ...named(sql, q)) as Key[]
  }

  /**
   * In order of first sight or of risk, each source's page is read from its own index
   * (migrations 026 and 037) up to the page's end, and the pages merged: a first page reads
   * a page of each source, and a page that follows one just read starts where that one
   * ended. A peripheral's risk is read in two parts: the peripherals of no rare model in
   * the order of their index, those of the rare models (a few hosts' each) found by model.
   */
  function indexedKeys(parts: Partial<Record<Source, AssetQuery>>, q: AssetQuery, sort: AssetSort, limit: number, offset: number, pos?: Position): Key[] {
    const params: unknown[] = []
    const dir = sort.direction === 'asc' ? 'ASC' : 'DESC'
    const branches: string[] = []
    for (const src of SOURCES.filter((s) => parts[s])) {
      const w = renderWhere(parts[src]!, src)
      for (const [value, only] of orderedParts(src, sort.field, q.rare.length > 0)) {
        params.push(...w.params)
        let where = only ? `${w.sql} AND ${only}` : w.sql
        if (pos) {
          const a = afterPos(src, value, sort, pos)
          where += ` AND ${a.sql}`
          params.push(...a.params)
        }
        branches.push(`SELECT * FROM (SELECT ${value} AS s, ${SOURCES.indexOf(src)} AS src, ${ROWID[src]} AS id FROM ${from(src, where)} WHERE ${where}
        ORDER BY s ${dir}, id ${dir} LIMIT @end)`)
      }
    }
    const sql = `SELECT s, src, id FROM (${branches.join(' UNION ALL ')}) ORDER BY s ${dir}, src ${dir}, id ${dir} LIMIT ? OFFSET ?`
    return cached(sql)
      .raw(true)
      .all(...params, limit, offset, ...named(sql, q, { end: offset + limit })) as Key[]
  }

  // Paging state of the queries asked lately, while the data is unchanged: the matching
  // counts, and where each page served ended, so that the next page (the connectors page
  // through to the end) starts from there through the indexes instead of counting and
  // sorting every row before it again. Check-in times alone do not count as a change,
  // except for queries that filter or sort by lastSeen, which they move.
  const changes = db.prepare('SELECT total_changes()').pluck()
  const version = db.prepare('PRAGMA data_version').pluck()
  const paging = new Map<string, Paging>()
  let generation = ''
  /** Where the data stands for the paging state: this connection's changes, those of check-in times, other processes' commits. */
  const dataAt = (): DataAt => {
    const writes = changes.get() as number
    return { writes, generation: `${writes - checkInTimes.rows}:${version.get()}` }
  }
  function pagingOf(key: string, readsCheckIns: boolean, compute: () => Record<Source, number>, at: DataAt): Paging {
    if (at.generation !== generation) {
      paging.clear()
      generation = at.generation
    }
    const k = readsCheckIns ? `${at.writes}:${key}` : key
    let entry = paging.get(k)
    if (entry) {
      paging.delete(k)
    } else {
      entry = { per: compute(), ends: new Map() }
      if (paging.size >= MAX_PAGINGS) paging.delete(paging.keys().next().value!)
    }
    paging.set(k, entry)
    return entry
  }

  /** How pages were read: from where the previous one ended, or by offset; and which sources were read. */
  const reads = { keyset: 0, offset: 0, sources: { agent: 0, host: 0, peripheral: 0 } as Record<Source, number> }

  return {
    reads,

    /** Every asset, matching or not. */
    total: () => totals.get() as number,

    /**
     * Where the data stands, as the server's connection sees it: a reader thread's
     * connection, whose own counters move with every check-in's commit, keeps its paging
     * state by the server's (`page`'s `at`).
     */
    dataAt,

    /** The matching count, and a page of the matching assets' rows in order; `at`: where the data stands (default: here). */
    page(q: AssetQuery, sort: AssetSort, limit: number, offset: number, at: DataAt = dataAt()): { filtered: number; rows: AssetRow[] } {
      const parts: Partial<Record<Source, AssetQuery>> = {}
      for (const src of SOURCES) {
        const folded = foldQuery(q, src)
        if (folded) parts[src] = folded
      }
      const readsCheckIns = sort.field === 'lastSeen' || JSON.stringify([q.filters, q.system]).includes('"lastSeen"')
      const entry = pagingOf(JSON.stringify([q, sort]), readsCheckIns, () => counts(parts), at)
      const per = entry.per
      const filtered = per.agent + per.host + per.peripheral
      if (offset >= filtered) return { filtered, rows: [] }
      // A source nothing of which matches is not read: walking its index in order for rows
      // that are not there would read every one of them (a million peripherals).
      for (const src of SOURCES) if (per[src] === 0) delete parts[src]
      const pos = offset > 0 ? entry.ends.get(offset) : undefined
      const read = INDEXED_SORTS.has(sort.field) ? indexedKeys : pageKeys
      const keys = read(parts, q, sort, limit, pos ? 0 : offset, pos)
      if (pos) reads.keyset++
      else reads.offset++
      for (const src of SOURCES) if (parts[src]) reads.sources[src]++
      if (keys.length > 0) {
        const [s, src, id] = keys[keys.length - 1]
        if (entry.ends.size >= MAX_ENDS) entry.ends.delete(entry.ends.keys().next().value!)
        entry.ends.set(offset + keys.length, { s, src, id })
      }
      const bySource = new Map<Source, number[]>()
      for (const [, src, id] of keys) {
        const ids = bySource.get(SOURCES[src])
        if (ids) ids.push(id)
        else bySource.set(SOURCES[src], [id])
      }
      const found = new Map<string, AssetRow>()
      for (const [src, ids] of bySource) {
        const values = src === 'agent' ? { ids: JSON.stringify(ids) } : { ids: JSON.stringify(ids), rare: JSON.stringify(q.rare) }
        for (const r of rows[src].all(src === 'host' ? { ids: values.ids } : values) as AssetRow[]) found.set(`${src}:${r.rowid}`, r)
      }
      return { filtered, rows: keys.map(([, src, id]) => found.get(`${SOURCES[src]}:${id}`)).filter((r): r is AssetRow => r !== undefined) }
    },

    /**
     * Counts by type, risk level, online state and newness (first seen at or after `since`),
     * over every asset, read a range of rows at a time: yields between ranges (each sized to
     * take about `sliceMs`), so that a caller can let other work run in between.
     */
    *summary(rare: string[], since: number, sliceMs = 20, rows = { first: 2000, min: 500, max: 100_000 }): Generator<void, AssetCounts[]> {
      const tally = new Map<string, AssetCounts>()
      for (const src of SOURCES) {
        const last = lastIds[src].get() ?? null
        let size = rows.first
        for (let from = 0; last !== null && from < last; ) {
          const t0 = performance.now()
          const values = { rare: JSON.stringify(rare), since, from, to: from + size }
          for (const c of summaries[src].all(src === 'peripheral' ? values : { since, from, to: from + size }) as AssetCounts[]) {
            const k = `${c.type}:${c.risk_level}:${c.is_online}:${c.is_new}`
            const seen = tally.get(k)
            if (seen) seen.n += c.n
            else tally.set(k, { ...c })
          }
          const took = performance.now() - t0
          // The next range sized to take about sliceMs at this one's pace, within [min, max] rows.
          from += size
          size = Math.min(rows.max, Math.max(rows.min, Math.round(took > 0 ? (size * sliceMs) / took : size * 2)))
          yield
        }
      }
      return [...tally.values()]
    },

    /** Switches the agents report, and those first reported since `since`. */
    switches: (since: number) => switches.get({ since })!,
  }
}
export type AssetsRepo = ReturnType<typeof assetsRepo>
