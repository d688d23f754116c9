// The agent and peripheral filters and sort orders as PostgreSQL SQL, answering what SQLite's
// (db/filters.ts, db/agents.ts, db/peripherals.ts) answer. SQLite resolves its "contains"
// filters through in-memory dictionaries and FTS5 trigram tables; here each is an ILIKE on
// the column, which the pg_trgm GIN indexes of migration 009 serve from 3 characters (a
// shorter term has no trigram: the table is read). The agent, peripheral, export and report
// repositories share these.
//
// Case: "contains" here folds case as the column's collation does (ILIKE), as SQLite's
// in-memory search folds with JavaScript's toLowerCase; both fold non-ASCII letters in a
// UTF-8 database (SQLite's LIKE, used for 1-2 character terms on a few columns, folds ASCII
// only). Case-insensitive sorts are lower(col COLLATE "C"): ASCII folded, bytes compared,
// exactly SQLite's NOCASE, whatever the database's locale; every other text sort and
// tie-breaker is COLLATE "C" for SQLite's BINARY.
import { type AgentFilter, type PeripheralFilter, soleField } from '../../lib/agents/ports.js'
import type { DateRange, Sort } from '../../lib/ports.js'
import { contains, trigramTerm } from '../sql.js'
import { FLAG_COLUMNS } from '../agent-flags.js'
import type { Postgres } from './connection.js'
import type { Cache } from '../../lib/platform/cache.js'
import { countWithin, pageBounded, plannedRows, type Counts } from './counts.js'

/** Parameters of a statement being built: each value once, referenced as $n wherever used. */
export class Params {
  readonly values: unknown[] = []
  /** Whether a "contains" condition was added: its count may be an estimate (see countedPage). */
  text = false
  add(value: unknown): string {
    this.values.push(value)
    return `$${this.values.length}`
  }
  /** A "contains" pattern of the term (LIKE's wildcards in it escaped). */
  like(term: string): string {
    this.text = true
    return this.add(contains(term))
  }
}

/** A WHERE fragment: conditions AND-ed, 'true' when none. */
const and = (conditions: string[]) => (conditions.length ? conditions.join(' AND ') : 'true')

const anyContains = (columns: readonly string[], pattern: string) => `(${columns.map((c) => `${c} ILIKE ${pattern}`).join(' OR ')})`

/** The agent fields a GlobalSearch looks in (SQLite: db/agent-texts.ts TEXT_FIELDS and agents_fts). */
const GLOBAL_COLUMNS = ['host_identifier', 'os_version', 'pc_model', 'service_version', 'license_account_name', 'latest_event_text', 'hashtags', 'uuid', 'ip_addresses', 'nics_text'] as const

/**
 * The IpAddress filter of the agent list. SQLite finds a term of 3 characters or more in
 * ip_addresses (its trigram index), a shorter one in the local address or ip_addresses;
 * ip_addresses holds the local address among the others, so both read the same.
 */
const ipColumns = (term: string, a: string) => (trigramTerm(term) ? [`${a}.ip_addresses`] : [`${a}.local_ip_address`, `${a}.ip_addresses`])

function range(out: string[], p: Params, column: string, r: DateRange | undefined) {
  if (!r) return
  out.push(`${column} >= ${p.add(r.from)}`)
  if (r.to !== null) out.push(`${column} < ${p.add(r.to)}`)
}

/** An agent filter as conditions over `agents <a>`. */
export function agentConditions(f: AgentFilter, p: Params, a = 'a'): string[] {
  const out: string[] = []
  const text = (columns: string[], term: string | undefined) => {
    if (term !== undefined) out.push(anyContains(columns, p.like(term)))
  }
  text([`${a}.uuid`], f.uuid)
  text([`${a}.host_identifier`], f.hostIdentifier)
  if (f.ipAddress !== undefined) text(ipColumns(f.ipAddress, a), f.ipAddress)
  text([`${a}.service_version`], f.version)
  text([`${a}.os_version`], f.osVersion)
  text([`${a}.hashtags`], f.hashtags)
  text(
    GLOBAL_COLUMNS.map((c) => `${a}.${c}`),
    f.globalSearch,
  )
  const inList = (column: string, values: readonly string[] | undefined) => {
    if (values) out.push(`${a}.${column} = ANY(${p.add(values)}::text[])`)
  }
  inList('connection_status', f.connectionStatus)
  inList('operational_status', f.operationalStatus)
  inList('display_status', f.displayStatus)
  inList('license_status', f.licenseStatus)
  inList('running_mode', f.runningMode)
  const flag = (column: string, value: boolean | undefined) => {
    if (value !== undefined) out.push(`${a}.${column} = ${value ? 1 : 0}`)
  }
  flag('vulnerable_or_wlv', f.containsVulnerablePeripheralOrWLV)
  flag('has_unapproved', f.hasUnapprovedPeripherals)
  flag('has_vulnerable', f.hasVulnerablePeripherals)
  flag('has_attack_tool', f.hasKnownAttackTools)
  range(out, p, `${a}.last_configured_ms`, f.lastConfiguration)
  if (f.lastUpdated) {
    // Through agent_checkins' index on the time (agents has none on it: migration 011).
    const time: string[] = []
    range(time, p, 'ct.last_updated_ms', f.lastUpdated)
    out.push(`${a}.id IN (SELECT ct.agent_id FROM agent_checkins ct WHERE ${and(time)})`)
  }
  range(out, p, `${a}.expiration_ms`, f.expirationDate)
  if (f.severity !== undefined) out.push(`${a}.severity = ${p.add(f.severity)}`)
  return out
}

/** An agent filter over `agents <a>` as a WHERE fragment ('true' when none). */
export const agentWhere = (f: AgentFilter, p: Params, a = 'a') => and(agentConditions(f, p, a))

/**
 * The peripherals list's address filter, on the agent's local address. SQLite finds a term
 * of 3 characters or more in ip_addresses first, then tests the local address: both here.
 */
const hostAddress = (term: string, pattern: string, a: string) =>
  trigramTerm(term) ? `(${a}.ip_addresses ILIKE ${pattern} AND ${a}.local_ip_address ILIKE ${pattern})` : `${a}.local_ip_address ILIKE ${pattern}`

const RISK_TAGS = { is_attack_tool: '#attack-tool', is_vulnerable: '#vulnerable', is_unapproved: '#unapproved' }

/** Interned texts (kept lower-case) of a kind that contain the term. */
const textIds = (kind: 'vendor' | 'product', p: Params, term: string) => `SELECT id FROM peripheral_texts WHERE kind = '${kind}' AND text LIKE ${p.like(term.toLowerCase())}`

/**
 * GlobalSearch over peripherals: the agent's host name, tags or address, the vendor and
 * product names, the catalogue's vulnerability text (or name) of the model, the risk tags,
 * the deviceID.
 */
function globalSearch(term: string, p: Params): string {
  const like = p.like(term)
  const lower = p.like(term.toLowerCase())
  const parts = [
    `p.agent_id IN (SELECT a2.id FROM agents a2 WHERE a2.host_identifier ILIKE ${like} OR a2.hashtags ILIKE ${like} OR ${hostAddress(term, like, 'a2')})`,
    `p.vendor_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'vendor' AND text LIKE ${lower})`,
    `p.product_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'product' AND text LIKE ${lower})`,
    `EXISTS (SELECT 1 FROM catalogue c WHERE c.vid = p.vid AND c.pid = p.pid AND coalesce(c.vulnerability, c.name) ILIKE ${like})`,
    `p.device_id ILIKE ${like}`,
    ...Object.entries(RISK_TAGS)
      .filter(([, tag]) => tag.includes(term.toLowerCase()))
      .map(([column]) => `p.${column} = 1`),
  ]
  return `(${parts.join(' OR ')})`
}

/** A peripheral filter as conditions over `peripherals p` (joined with `agents a` or not). */
export function peripheralConditions(f: PeripheralFilter, p: Params): string[] {
  const out: string[] = []
  const agent: string[] = []
  if (f.hostIdentifier !== undefined) agent.push(`a2.host_identifier ILIKE ${p.like(f.hostIdentifier)}`)
  if (f.ipAddress !== undefined) agent.push(hostAddress(f.ipAddress, p.like(f.ipAddress), 'a2'))
  if (f.hostUuid !== undefined) agent.push(`a2.uuid ILIKE ${p.like(f.hostUuid)}`)
  if (agent.length) out.push(`p.agent_id IN (SELECT a2.id FROM agents a2 WHERE ${and(agent)})`)
  if (f.vendor !== undefined) out.push(`p.vendor_text_id IN (${textIds('vendor', p, f.vendor)})`)
  if (f.productInfo !== undefined) out.push(`p.product_text_id IN (${textIds('product', p, f.productInfo)})`)
  if (f.serialNumber !== undefined) {
    // The serial is the last part of the deviceID: its trigram index finds the candidates.
    const like = p.like(f.serialNumber)
    out.push(`p.device_id ILIKE ${like} AND p.serial_number ILIKE ${like}`)
  }
  if (f.vid !== undefined) out.push(`p.vid = ${p.add(f.vid)}`)
  if (f.pid !== undefined) out.push(`p.pid = ${p.add(f.pid)}`)
  for (const [column, value] of [
    ['is_unapproved', f.isUnapproved],
    ['is_vulnerable', f.isVulnerable],
    ['is_attack_tool', f.isAttackTool],
    ['present', f.present],
  ] as const) {
    if (value !== undefined) out.push(`p.${column} = ${value ? 1 : 0}`)
  }
  if (f.globalSearch !== undefined) out.push(globalSearch(f.globalSearch, p))
  return out
}

/** A peripheral filter over `peripherals p` as a WHERE fragment ('true' when none). */
export const peripheralWhere = (f: PeripheralFilter, p: Params) => and(peripheralConditions(f, p))

// ---- sort orders ----

const binary = (column: string) => `${column} COLLATE "C"`
const nocase = (column: string) => `lower(${column} COLLATE "C")`

/** A sort field's expression, and whether its column may be null. */
interface SortColumn {
  sql: string
  nullable?: boolean
}
const nullable = (sql: string): SortColumn => ({ sql, nullable: true })

/** Sort fields of the agent list (the contract's x-sort-fields), as db/agents.ts agentSortColumns. */
export const agentSortColumns: Record<string, SortColumn> = {
  uuid: { sql: binary('a.uuid') },
  hostIdentifier: { sql: nocase('a.host_identifier') },
  localIpAddress: nullable(binary('a.local_ip_address')),
  osVersion: nullable(nocase('a.os_version')),
  pcModel: nullable(nocase('a.pc_model')),
  operationalStatus: { sql: binary('a.operational_status') },
  connectionStatus: { sql: binary('a.connection_status') },
  displayStatusCombined: { sql: binary('a.display_status') },
  approvedAndPresent: { sql: 'a.approved_and_present' },
  approvedAndDisconnected: { sql: 'a.approved_and_disconnected' },
  notApproved: { sql: 'a.not_approved' },
  serviceVersion: nullable(binary('a.service_version')),
  kbDriverVersion: nullable(binary('a.kb_driver_version')),
  // Read from agent_checkins (joined as `c` by agentSource), whose indexes give this order.
  lastUpdated: nullable('c.last_updated_ms'),
  lastConfiguered: nullable('a.last_configured_ms'),
  lastConfiguration: nullable('a.last_configured_ms'),
  licenseStatus: { sql: binary('a.license_status') },
  expirationDate: nullable('a.expiration_ms'),
  licenseAccountName: nullable(nocase('a.license_account_name')),
  severity: { sql: 'a.severity' },
  runningMode: nullable(binary('a.running_mode')),
  ethernetsCount: { sql: 'a.ethernets_count' },
}

/** Sort fields of the peripheral list, as db/peripherals.ts peripheralSortColumns. */
export const peripheralSortColumns: Record<string, SortColumn> = {
  uuid: { sql: binary('p.agent_uuid') },
  hostUuid: { sql: binary('p.agent_uuid') },
  hostIdentifier: { sql: nocase('a.host_identifier') },
  hostIp: nullable(binary('a.local_ip_address')),
  deviceID: { sql: binary('p.device_id') },
  description: nullable(nocase('p.description')),
  manufacturer: nullable(nocase('p.manufacturer')),
  caption: nullable(nocase('p.caption')),
  vid: { sql: binary('p.vid') },
  pid: { sql: binary('p.pid') },
  serialNumber: nullable(binary('p.serial_number')),
  guiVid: nullable(nocase('p.gui_vid')),
  guiPid: nullable(nocase('p.gui_pid')),
  devIcon: { sql: 'p.dev_icon' },
  status: nullable(binary('p.status')),
  approved: { sql: 'p.approved' },
  present: { sql: 'p.present' },
  isDisabled: { sql: 'p.is_disabled' },
  isUnapprovedPeripherals: { sql: 'p.is_unapproved' },
  isVulnerablePeripheral: { sql: 'p.is_vulnerable' },
  isKnownAttackTool: { sql: 'p.is_attack_tool' },
  severity: { sql: 'p.severity' },
  adminStatus: { sql: binary('p.admin_status') },
}

/**
 * ORDER BY for a sort, with SQLite's tie-breakers (db/sql.ts orderBy) so that both backends
 * page through the same order: those after the sort's own column, in its direction. Nulls
 * come last both ways, as SQLite puts them (nullable columns ascending explicitly; descending,
 * its nulls are the smallest values).
 */
function orderBy(s: Sort, columns: Record<string, SortColumn>, ties: string[]): string {
  const column = columns[s.field]
  if (!column) throw new Error(`no column for sort field ${s.field}`)
  const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
  const after = ties.slice(ties.indexOf(column.sql) + 1)
  return [`${column.sql} ${dir}${column.nullable ? ' NULLS LAST' : ''}`, ...after.map((c) => `${c} ${dir}`)].join(', ')
}

/** ORDER BY of the agent list over `agents a`: the uuid breaks ties. */
export const agentOrderBy = (s: Sort) => orderBy(s, agentSortColumns, [binary('a.uuid')])

/** The agents a list pages through (`a`); sorted by the check-in time, with their agent_checkins row (`c`), walked in its index. */
export const agentSource = (s: Sort): PageSource =>
  s.field === 'lastUpdated' ? { table: 'agents', alias: 'a', from: 'agent_checkins c JOIN agents a ON a.id = c.agent_id', id: 'a.id' } : { table: 'agents', alias: 'a', from: 'agents a', id: 'a.id' }

/** ORDER BY of the peripheral list over `peripherals p JOIN agents a`: deviceID and id break ties. */
export const peripheralOrderBy = (s: Sort) => orderBy(s, peripheralSortColumns, [binary('p.device_id'), 'p.id'])

// ---- pages ----

/** Every row of agents or peripherals: the count their triggers keep (migration 018). */
export const rowCount = (table: 'agents' | 'peripherals') => `(SELECT n FROM table_rows WHERE name = '${table}')`

/** The count of the agents a flag filter alone matches, as kept (migration 019); undefined for any other filter. */
export function keptAgentCount(f: AgentFilter): string | undefined {
  const sole = soleField(f)
  const column = sole && FLAG_COLUMNS[sole[0]]
  if (!column) return undefined
  const flagged = `(SELECT n FROM table_rows WHERE name = 'agents.${column}')`
  return sole[1] ? flagged : `(${rowCount('agents')} - ${flagged})`
}

/** What a page statement reads: the table counted, the rows' FROM, their id, the page's rows. */
export interface PageSource {
  /** The table counted and its alias (the filter's conditions name only it). */
  table: 'agents' | 'peripherals'
  alias: string
  /** The page's FROM (the counted table, joined with what the sort and rows read). */
  from: string
  /** The page's id column. */
  id: string
}

/**
 * One statement for a page: every row's count, the matching count, and the page's ids in
 * order (`ids`), or its rows in order (`rows`, over `source.from`; none when the page is
 * empty: a row of nulls then carries the counts). One round trip, one snapshot: the counts
 * and the page agree, and each subquery is planned on its own (the filter's count from an
 * index or the table, the page by walking the sort's index or sorting the matches).
 * `filtered`: the matching count's expression (NULL::bigint: left out, to be counted apart;
 * see countedPage).
 */
export function pageStatement(source: PageSource, where: string, order: string, p: Params, limit: number, offset: number, rows: string | undefined, filtered: string): string {
  const { table } = source
  const counts = where === 'true' ? `${rowCount(table)} AS total` : `${rowCount(table)} AS total, ${filtered} AS filtered`
  const page = `SELECT ${counts}, ARRAY(SELECT ${source.id} FROM ${source.from} WHERE ${where} ORDER BY ${order} LIMIT ${p.add(limit)} OFFSET ${p.add(offset)}) AS ids`
  const matched = where === 'true' ? 'c.total' : 'c.filtered'
  // Materialized: c.total named twice would otherwise count twice.
  if (rows === undefined) return `WITH c AS MATERIALIZED (${page}) SELECT c.total, ${matched} AS filtered, c.ids FROM c`
  return `WITH c AS MATERIALIZED (${page}) SELECT c.total, ${matched} AS filtered, r.* FROM c
    LEFT JOIN LATERAL (SELECT ${rows}, u.n AS page_n FROM unnest(c.ids) WITH ORDINALITY u (id, n) JOIN ${source.from} ON ${source.id} = u.id) r ON true
    ORDER BY r.page_n`
}

/**
 * A page statement's answer (`read`: pageRows or pageIds; `size`: its rows) with its counts. A
 * filter with a text condition is not counted in the page's statement: a common term is
 * found in most rows, and counting it reads each of them (GlobalSearch over 100,000 agents:
 * 0.35 s, the page itself 10 ms). It is counted apart within `budgetMs`
 * (PRIME_PG_COUNT_BUDGET_MS, as the event lists are); past it the count is the planner's
 * estimate, bounded by the page, and `filteredExact` is false. Other filters are counted
 * exactly, in the page's statement, or read from what the database keeps (`q.kept`).
 */
export async function countedPage<T extends Counts>(db: Postgres, q: PageQuery, read: (answer: Record<string, unknown>[]) => T, size: (page: T) => number, rows?: string): Promise<T> {
  const { source, where, p } = q
  const apart = p.text && where !== 'true'
  // The filter's parameters, before the page's limit and offset are added to them.
  const filterValues = [...p.values]
  const filtered = apart ? 'NULL::bigint' : (q.kept ?? `(SELECT count(*) FROM ${source.table} ${source.alias} WHERE ${where})`)
  const page = read(await db.query(pageStatement(source, where, q.order, p, q.limit, q.offset, rows, filtered), p.values))
  if (!apart) return page
  // A page that ends the matches counts them itself, in its own snapshot: nothing to count apart.
  const n0 = size(page)
  if (n0 < q.limit && (n0 > 0 || q.offset === 0)) return { ...page, filtered: q.offset + n0 }
  const fromWhere = `${source.table} ${source.alias} WHERE ${where}`
  const counting = `SELECT count(*) FROM ${fromWhere}`
  const key = `${counting}\u0000${JSON.stringify(filterValues)}`
  const n = q.refused?.get(key) ? null : await countWithin(db, counting, filterValues, q.budgetMs)
  if (n !== null) return { ...page, filtered: n }
  q.refused?.set(key, true)
  const estimate: Counts = { total: page.total, filtered: Math.min(page.total, await plannedRows(db, fromWhere, filterValues)), filteredExact: false }
  return { ...page, ...pageBounded(estimate, q.offset, q.limit, n0) }
}

/** A page asked of countedPage: its rows' source, the filter (`where` over `p`), the order, the page, the count's budget. */
export interface PageQuery {
  source: PageSource
  where: string
  p: Params
  order: string
  limit: number
  offset: number
  budgetMs: number
  /** The matching count as the database keeps it (an expression), where it does. */
  kept?: string
  /** The counts refused by their budget lately (refusedCounts): not tried again meanwhile. */
  refused?: Cache<string, true>
}

/** A page statement's answer as its counts and its rows (the counting columns taken off). */
export function pageRows<R>(answer: Record<string, unknown>[]): Counts & { rows: R[] } {
  const first = answer[0] as { total: number; filtered: number }
  const rows: R[] = []
  for (const r of answer) {
    if (r.page_n === null) continue
    const { total: _t, filtered: _f, page_n: _n, ...row } = r
    rows.push(row as R)
  }
  return { total: first.total, filtered: first.filtered, rows }
}

/** A page statement's answer as its counts and ids (bigint[] comes as text). */
export function pageIds(answer: Record<string, unknown>[]): Counts & { ids: number[] } {
  const { total, filtered, ids } = answer[0] as { total: number; filtered: number; ids: string[] }
  return { total, filtered, ids: ids.map(Number) }
}
