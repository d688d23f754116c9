// Agents: the list with its filters and sort orders, lookups by identifiers, deletion.
import type { DB } from './index.js'
import { answerCache, type CheckInTimeWrites } from './answer-cache.js'
import { soleField, type AgentFilter, type DateRange } from './filters.js'
import { STREAM_CHUNK_CHARS, contains, firstColumn, objectRows, orderBy, statementCache, type RowReader, type Sort } from './sql.js'
import { TEXT_FIELDS, addIds, emptySet, idsOf, intersect, type AgentSet, type AgentTexts, type TextField } from './agent-texts.js'
import { setImmediate as nextTurn } from 'node:timers/promises'

// As the CHECK constraints of the agents table allow.
export type AgentDisplayStatus = 'Armed' | 'Free' | 'Arming' | 'Freeing' | 'Updating' | 'Pending' | 'Disconnected'
export type AgentLicenseStatus = 'Activated' | 'Pending' | 'Expired' | 'Invalid'
export type AgentRunningMode = 'Standard' | 'VDI' | 'Server' | null

/** Conditions of a WHERE clause being built, with their parameters. */
export interface Where {
  sql: string[]
  params: unknown[]
}

export interface AgentRow {
  id: number
  uuid: string
  machine_id: string
  credential_hash: string | null
  enrolled_ms: number
  host_identifier: string
  local_ip_address: string | null
  os_version: string | null
  manufacturer: string | null
  pc_model: string | null
  nics_json: string
  nics_text: string | null
  ip_addresses: string | null
  operational_status: 'Armed' | 'Free'
  is_system_locked: number
  connection_status: 'Connected' | 'Disconnected'
  display_status: AgentDisplayStatus
  approved_and_present: number
  approved_and_disconnected: number
  not_approved: number
  latest_event_text: string | null
  latest_minus1_event_text: string | null
  latest_minus2_event_text: string | null
  service_version: string | null
  kb_driver_version: string | null
  last_updated_ms: number | null
  last_configured_ms: number | null
  license_status: AgentLicenseStatus
  expiration_ms: number | null
  license_account_id: string | null
  license_account_name: string | null
  severity: number
  has_unapproved: number
  has_vulnerable: number
  has_attack_tool: number
  vulnerable_or_wlv: number
  in_action: number
  model_tooltip: string | null
  running_mode: AgentRunningMode
  switch_ip: string | null
  switch_name: string | null
  port_id: string | null
  port_name: string | null
  ethernets_count: number
  hashtags: string | null
  logged_on_users: string
  check_in_interval_s: number
  state_digest: string | null
  /** Changes with every write of the columns a list shows, the check-in time aside (migrations 020, 021). */
  rev: number
}

/** The columns an agent of a list needs (those lib/agents/views.ts agentView reads, and the id). */
export const VIEW_COLUMNS = [
  'id',
  'uuid',
  'host_identifier',
  'local_ip_address',
  'os_version',
  'pc_model',
  'nics_text',
  'operational_status',
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
  'in_action',
  'model_tooltip',
  'running_mode',
  'switch_ip',
  'switch_name',
  'port_id',
  'port_name',
  'ethernets_count',
  'hashtags',
] as const satisfies readonly (keyof AgentRow)[]
/** An agent as a list reads it. */
export type AgentListRow = Pick<AgentRow, (typeof VIEW_COLUMNS)[number]>
const viewColumns = (alias: string) => VIEW_COLUMNS.map((c) => `${alias}.${c}`).join(', ')

/**
 * An agent of a list page: its id, the rev of its row as the page read it (migrations 020, 021),
 * and its check-in time, which writes leave out of the rev.
 */
export interface AgentRef {
  id: number
  rev: number
  last_updated_ms: number | null
}
const AGENT_REF_COLUMNS = 'a.id, a.rev, a.last_updated_ms'

/** The columns whose writes move an agent's rev: every one agentView reads but the id and the check-in time. */
export const REV_COLUMNS = VIEW_COLUMNS.filter((c) => c !== 'id' && c !== 'last_updated_ms')

const LAST_UPDATED = ',"lastUpdated":'

/**
 * Rows read at a time for a streamed page: a hundred agents are about 130 KB of JSON, and
 * their row objects die young; a thousand lived on in the old generation while the client
 * took their text.
 */
export const VIEW_CHUNK_ROWS = 100

/**
 * How a list shows an agent (lib/agents/views.ts): its AgentViewResource object, and the
 * JSON value of its check-in time alone (`lastUpdated`, put into kept JSON per page).
 */
export interface AgentListView {
  view(row: AgentListRow): { lastUpdated: string | null }
  lastUpdated(ms: number | null): string
}

/**
 * The agents of a page as a JSON array of AgentViewResource. Each agent's JSON is kept
 * under its id and rev, and serves again while its row has that rev: reading the 38
 * columns of 50 rows and serializing them cost most of a page (0.2 and 0.1 ms at 100,000
 * agents); a page's ids and revs come from its index walk at a fraction of that. Writes
 * anywhere else (events, other agents) leave an agent's JSON as it is kept, and so do
 * check-ins that change nothing but the time: it is kept in two parts, either side of
 * lastUpdated, which is put in from the page's own read. At most `max` are kept (about
 * 1.3 KB each), the oldest written first out.
 */
export function agentViews(db: DB, list: AgentListView, max = 5000) {
  const byIds = db.prepare(`SELECT ${viewColumns('a')}, a.rev FROM agents a WHERE a.id IN (SELECT value FROM json_each(?))`)
  const kept = new Map<number, { rev: number; head: string; tail: string }>()
  const time = list.lastUpdated
  return (refs: readonly AgentRef[]): string => {
    const json: (string | undefined)[] = new Array(refs.length)
    let missing: number[] | null = null
    for (let i = 0; i < refs.length; i++) {
      const r = refs[i]
      const k = kept.get(r.id)
      if (k && k.rev === r.rev) json[i] = k.head + time(r.last_updated_ms) + k.tail
      else (missing ??= []).push(r.id)
    }
    if (missing) {
      const read = new Map<number, string>()
      for (const row of objectRows<AgentListRow & { rev: number }>(byIds, JSON.stringify(missing))) {
        const whole = JSON.stringify({ ...list.view(row), lastUpdated: null })
        // A quote inside a JSON string is escaped, so only the key itself reads ,"lastUpdated":null
        const at = whole.indexOf(`${LAST_UPDATED}null,`) + LAST_UPDATED.length
        const entry = { rev: row.rev, head: whole.slice(0, at), tail: whole.slice(at + 4) }
        kept.delete(row.id)
        if (kept.size >= max) kept.delete(kept.keys().next().value!)
        kept.set(row.id, entry)
        read.set(row.id, entry.head + time(row.last_updated_ms) + entry.tail)
      }
      // A row deleted since the page was read (by another connection) is left out.
      for (let i = 0; i < refs.length; i++) json[i] ??= read.get(refs[i].id)
    }
    return `[${json.filter((j) => j !== undefined).join(',')}]`
  }
}

/**
 * One condition of a list filter. `plus` is '+' where the query must not drive from an
 * index for it (SQLite's unary-plus hint), '' where it may.
 */
export interface Condition {
  sql: (plus: string) => string
  params: unknown[]
}

/**
 * "Contains" on fields searched in memory (db/agent-texts.ts), any of them; `indexed`:
 * columns of agents_fts searched too (through it from 3 characters, by LIKE below).
 */
export interface TextCondition {
  fields: readonly TextField[]
  term: string
  indexed?: readonly string[]
}

/**
 * A filter as trigram phrases on agents_fts (one MATCH, AND-ed), searches in memory
 * (AND-ed), and the other conditions.
 */
export interface Conditions {
  match: string[]
  texts: TextCondition[]
  rest: Condition[]
}

const cond = (sql: (plus: string) => string, ...params: unknown[]): Condition => ({ sql, params })

/** A trigram phrase query: exact substring, whatever characters the term holds. */
const phrase = (columns: readonly string[], term: string) => `{${columns.join(' ')}} : "${term.replace(/"/g, '""')}"`

/**
 * GlobalSearch looks in uuid, host name, addresses, OS version, model, network adapters,
 * agent version, licence account, latest event text and hashtags: the fields of
 * db/agent-texts.ts in memory, the others through agents_fts (ip_addresses holds the
 * local address among the others).
 */
const GLOBAL: TextCondition = { fields: TEXT_FIELDS, term: '', indexed: ['uuid', 'ip_addresses', 'nics_text'] }

/**
 * Whether a term can be a trigram phrase: it needs 3 characters, and no NUL (which ends
 * an FTS5 query string early).
 */
export const trigramTerm = (term: string) => [...term].length >= 3 && !term.includes('\u0000')

/**
 * "Contains" on agent columns of agents_fts. From 3 characters it is a phrase on that
 * trigram index (case-insensitive, exact substring), so the agents table is not scanned.
 * Shorter terms have no trigram: they are a LIKE on the columns, which scans the table.
 * `verify`: the index columns hold more than the columns asked for, so a LIKE on the
 * columns decides among the rows the index found.
 */
export function agentContains(c: Conditions, alias: string, ftsColumns: string[], columns: string[], term: string, verify = false): void {
  const trigram = trigramTerm(term)
  if (trigram) c.match.push(phrase(ftsColumns, term))
  if (trigram && !verify) return
  const like = contains(term)
  const any = columns.map((col) => `${alias}.${col} LIKE ? ESCAPE '\\'`).join(' OR ')
  c.rest.push(cond(() => `(${any})`, ...columns.map(() => like)))
}

function inList(c: Conditions, column: string, values: readonly string[] | undefined) {
  if (values) c.rest.push(cond((plus) => `${plus}${column} IN (${values.map(() => '?').join(', ')})`, ...values))
}

function flag(c: Conditions, column: string, value: boolean | undefined) {
  if (value !== undefined) c.rest.push(cond((plus) => `${plus}${column} = ${value ? 1 : 0}`))
}

function range(c: Conditions, column: string, r: DateRange | undefined) {
  if (!r) return
  if (r.to === null) c.rest.push(cond((plus) => `${plus}${column} >= ?`, r.from))
  else c.rest.push(cond((plus) => `${plus}${column} >= ? AND ${plus}${column} < ?`, r.from, r.to))
}

/** An agent filter as conditions over `agents <alias>`. */
export function agentConditions(f: AgentFilter, a = 'a'): Conditions {
  const c: Conditions = { match: [], texts: [], rest: [] }
  const text = (field: TextField, term: string | undefined) => {
    if (term !== undefined) c.texts.push({ fields: [field], term })
  }
  if (f.uuid !== undefined) agentContains(c, a, ['uuid'], ['uuid'], f.uuid)
  text('host_identifier', f.hostIdentifier)
  if (f.ipAddress !== undefined) agentContains(c, a, ['ip_addresses'], ['local_ip_address', 'ip_addresses'], f.ipAddress)
  text('service_version', f.version)
  text('os_version', f.osVersion)
  text('hashtags', f.hashtags)
  if (f.globalSearch !== undefined) c.texts.push({ ...GLOBAL, term: f.globalSearch })
  inList(c, `${a}.connection_status`, f.connectionStatus)
  inList(c, `${a}.operational_status`, f.operationalStatus)
  inList(c, `${a}.display_status`, f.displayStatus)
  inList(c, `${a}.license_status`, f.licenseStatus)
  inList(c, `${a}.running_mode`, f.runningMode)
  flag(c, `${a}.vulnerable_or_wlv`, f.containsVulnerablePeripheralOrWLV)
  flag(c, `${a}.has_unapproved`, f.hasUnapprovedPeripherals)
  flag(c, `${a}.has_vulnerable`, f.hasVulnerablePeripherals)
  flag(c, `${a}.has_attack_tool`, f.hasKnownAttackTools)
  range(c, `${a}.last_configured_ms`, f.lastConfiguration)
  range(c, `${a}.last_updated_ms`, f.lastUpdated)
  range(c, `${a}.expiration_ms`, f.expirationDate)
  if (f.severity !== undefined) c.rest.push(cond((plus) => `${plus}${a}.severity = ?`, f.severity))
  return c
}

/**
 * How a page is read. `seek`: the most selective condition's index finds the rows, which
 * are then sorted (few matches). `walk`: the sort order's index is walked and each row
 * tested, stopping at the page's end (many matches; no sort). The searches' matches, when
 * there are any, always find the rows in `seek`.
 */
export type Plan = 'seek' | 'walk'

/**
 * Walking costs an index step per row passed over, about (offset + limit) / selectivity;
 * seeking costs a row read and a sort step per match. The counts are exact (the page's
 * recordsFiltered), so the choice is made on facts, not on estimates.
 */
export function choosePlan(filtered: number, total: number, offset: number, limit: number, sortIndexed: boolean): Plan {
  if (!sortIndexed || filtered === 0) return 'seek'
  const needed = Math.min(offset + limit, filtered)
  return needed * (total / filtered) + 3 * needed < 4 * filtered ? 'walk' : 'seek'
}

/**
 * The conditions as a WHERE fragment ('1' when none) for a plan. `set`: the agents the
 * searches matched (null: no search), as a list of ids to drive from, or, in a walk, as
 * its bytes bound whole, each row testing its own: a list of 5,000 ids costs 1 ms to
 * read into SQLite before the first row, the bytes 0.01 ms, and a row's test is native
 * (a JavaScript function called for each row cost a third more).
 */
export function renderConditions(c: Conditions, idColumn: string, plan: Plan | 'free', set: AgentSet | null): { sql: string; params: unknown[] } {
  const sql: string[] = []
  const params: unknown[] = []
  if (set) {
    if (plan === 'walk') {
      sql.push(`substr(?, ${idColumn} + 1, 1) = x'01'`)
      params.push(Buffer.from(set.bits.buffer, set.bits.byteOffset, set.bits.length))
    } else {
      sql.push(`${idColumn} IN (SELECT value FROM json_each(?))`)
      params.push(JSON.stringify(idsOf(set)))
    }
  }
  // With a search, its matches find the rows; without, the planner picks (free, seek).
  // plan: query-plans "agents list" (tests/query-plans.test.ts)
  const plus = plan === 'walk' || set ? '+' : ''
  for (const r of c.rest) {
    sql.push(r.sql(plus))
    params.push(...r.params)
  }
  return { sql: sql.length ? sql.join(' AND ') : '1', params }
}

/**
 * The searches of agent filters: "contains" in memory (db/agent-texts.ts) and through
 * agents_fts, resolved into the set of agents that match them all.
 */
export function agentSearch(db: DB, texts: AgentTexts) {
  const ftsIds = db.prepare<[string], number>('SELECT rowid FROM agents_fts WHERE agents_fts MATCH ?').pluck()
  const cached = statementCache(db, 16)

  function textSet(t: TextCondition): AgentSet {
    const set = texts.searchAny(t.fields, t.term)
    if (!t.indexed) return set
    if (trigramTerm(t.term)) return addIds(set, ftsIds.all(phrase(t.indexed, t.term)))
    const like = contains(t.term)
    return addIds(
      set,
      cached(`SELECT id FROM agents WHERE ${t.indexed.map((col) => `${col} LIKE ? ESCAPE '\\'`).join(' OR ')}`)
        .pluck()
        .all(...t.indexed.map(() => like)) as number[],
    )
  }

  const search = {
    texts,
    /** The agents every search of the conditions matches; null when they have none. */
    resolve(c: Conditions): AgentSet | null {
      let set: AgentSet | null = null
      for (const t of c.texts) {
        const s = textSet(t)
        set = set ? intersect(set, s) : s
        if (set.n === 0) return set
      }
      if (c.match.length) {
        const s = addIds(emptySet(0), ftsIds.all(c.match.join(' AND ')))
        set = set ? intersect(set, s) : s
      }
      return set
    },
    /** The conditions of an agent filter over `agents a`, as a WHERE fragment ('1' when none). */
    where(f: AgentFilter): { sql: string; params: unknown[] } {
      const c = agentConditions(f)
      return renderConditions(c, 'a.id', 'free', search.resolve(c))
    },
  }
  return search
}
export type AgentSearch = ReturnType<typeof agentSearch>

/** Sort fields of the agent list (the contract's x-sort-fields) and their columns. */
export const agentSortColumns: Record<string, string> = {
  uuid: 'a.uuid',
  hostIdentifier: 'a.host_identifier COLLATE NOCASE',
  localIpAddress: 'a.local_ip_address',
  osVersion: 'a.os_version COLLATE NOCASE',
  pcModel: 'a.pc_model COLLATE NOCASE',
  operationalStatus: 'a.operational_status',
  connectionStatus: 'a.connection_status',
  displayStatusCombined: 'a.display_status',
  approvedAndPresent: 'a.approved_and_present',
  approvedAndDisconnected: 'a.approved_and_disconnected',
  notApproved: 'a.not_approved',
  serviceVersion: 'a.service_version',
  kbDriverVersion: 'a.kb_driver_version',
  lastUpdated: 'a.last_updated_ms',
  lastConfiguered: 'a.last_configured_ms',
  lastConfiguration: 'a.last_configured_ms',
  licenseStatus: 'a.license_status',
  expirationDate: 'a.expiration_ms',
  licenseAccountName: 'a.license_account_name COLLATE NOCASE',
  severity: 'a.severity',
  runningMode: 'a.running_mode',
  ethernetsCount: 'a.ethernets_count',
}
const nullableSorts = [
  'localIpAddress',
  'osVersion',
  'pcModel',
  'serviceVersion',
  'kbDriverVersion',
  'lastUpdated',
  'lastConfiguered',
  'lastConfiguration',
  'expirationDate',
  'licenseAccountName',
  'runningMode',
]
// plan: query-plans "agents list" (tests/query-plans.test.ts)
const hinted = (columns: Record<string, string>) => Object.fromEntries(Object.entries(columns).map(([k, v]) => [k, `+${v}`]))
const agentSortHinted = hinted(agentSortColumns)

/** The sort orders an index of migration 003 serves (descending only where nulls would come first). */
const agentSortIndexed = (s: Sort) => ['uuid', 'hostIdentifier', 'severity'].includes(s.field) || (s.direction === 'desc' && ['lastUpdated', 'lastConfiguered', 'lastConfiguration'].includes(s.field))

// plan: query-plans "agents list" (tests/query-plans.test.ts)
/** ORDER BY of the agent list; for `seek`, hinted so that no index is walked for it. */
export const agentOrderBy = (s: Sort, plan: Plan = 'walk') => orderBy(s, plan === 'seek' ? agentSortHinted : agentSortColumns, plan === 'seek' ? '+a.uuid' : 'a.uuid', nullableSorts)

/** The identifiers an item of agents/configuration or peripherals/command names an agent by. */
export interface AgentIdentifiers {
  uuid?: string | null
  hostIdentifier?: string | null
  ipAddress?: string | null
}

/** `shown`: how a list shows an agent (lib/agents/views.ts), kept as JSON per row here. */
export function agentsRepo(db: DB, checkInTimes: CheckInTimeWrites, search: AgentSearch, shown: AgentListView, keptAnswers = 64) {
  const cached = statementCache(db)
  const answers = answerCache<AgentRef>(db, checkInTimes, keptAnswers)
  const refsByIds = db.prepare<[string], AgentRef>(`SELECT ${AGENT_REF_COLUMNS} FROM agents a WHERE a.id IN (SELECT value FROM json_each(?))`)
  const views = agentViews(db, shown)
  const total = db.prepare<[], number>("SELECT n FROM row_counts WHERE name = 'agents'").pluck()

  // The flags' totals (migration 018), by filter field.
  const flagTotal = db.prepare<[string], number>('SELECT n FROM row_counts WHERE name = ?').pluck()
  const FLAG_TOTALS: Record<string, string> = {
    hasUnapprovedPeripherals: 'agents.has_unapproved',
    hasVulnerablePeripherals: 'agents.has_vulnerable',
    hasKnownAttackTools: 'agents.has_attack_tool',
    containsVulnerablePeripheralOrWLV: 'agents.vulnerable_or_wlv',
  }
  // A flag filter alone in host order reads its page from the flag's index (flag, host,
  // uuid; migration 003), at any offset: walking the host order and testing each agent
  // took 77 ms for a page 5,000 flagged agents in (13,000 flagged of 100,000).
  const FLAG_HOST_ORDER: Record<string, [column: string, index: string]> = {
    hasUnapprovedPeripherals: ['has_unapproved', 'agents_unapproved'],
    hasVulnerablePeripherals: ['has_vulnerable', 'agents_vulnerable'],
    hasKnownAttackTools: ['has_attack_tool', 'agents_attack_tool'],
  }
  function flagPage<R>(f: AgentFilter, sort: Sort, limit: number, offset: number, columns: string, rows: RowReader<R>): R[] | null {
    const sole = soleField(f)
    const byFlag = sole && sort.field === 'hostIdentifier' ? FLAG_HOST_ORDER[sole[0]] : undefined
    if (!byFlag) return null
    // plan: query-plans "agents list" (tests/query-plans.test.ts)
    return rows(cached(`SELECT ${columns} FROM agents a INDEXED BY ${byFlag[1]} WHERE a.${byFlag[0]} = ? ORDER BY ${agentOrderBy(sort)} LIMIT ? OFFSET ?`), sole![1] ? 1 : 0, limit, offset)
  }

  /** A page as rows of `columns` (read by `rows`: objects, or the first column's values), with the counts. */
  function readPage<R>(f: AgentFilter, sort: Sort, limit: number, offset: number, columns: string, rows: RowReader<R> = objectRows): { total: number; filtered: number; rows: R[] } {
    const c = agentConditions(f)
    const all = total.get() as number
    const { filtered, set } = count(f, c, all)
    if (filtered <= offset) return { total: all, filtered, rows: [] }
    const byFlag = flagPage<R>(f, sort, limit, offset, columns, rows)
    if (byFlag) return { total: all, filtered, rows: byFlag }
    const plan = choosePlan(filtered, all, offset, limit, agentSortIndexed(sort))
    const where = renderConditions(c, 'a.id', plan, set)
    return { total: all, filtered, rows: rows(cached(`SELECT ${columns} FROM agents a WHERE ${where.sql} ORDER BY ${agentOrderBy(sort, plan)} LIMIT ? OFFSET ?`), ...where.params, limit, offset) }
  }
  const viewsByIds = db.prepare(`SELECT ${viewColumns('a')} FROM agents a WHERE a.id IN (SELECT value FROM json_each(?))`)

  /**
   * How many agents match (from the kept row counts, the searches' matches, or the
   * conditions), and the agents the searches matched (null: none asked). A flag filter
   * alone is counted from the flag's total.
   */
  function count(f: AgentFilter, c: Conditions, all: number): { filtered: number; set: AgentSet | null } {
    if (!c.match.length && !c.texts.length && !c.rest.length) return { filtered: all, set: null }
    const sole = soleField(f)
    if (sole && FLAG_TOTALS[sole[0]]) {
      const flagged = flagTotal.get(FLAG_TOTALS[sole[0]]) as number
      return { filtered: sole[1] ? flagged : all - flagged, set: null }
    }
    const set = search.resolve(c)
    if (set && (!c.rest.length || set.n === 0)) return { filtered: set.n, set }
    const where = renderConditions(c, 'a.id', 'free', set)
    return {
      filtered: cached(`SELECT count(*) FROM agents a WHERE ${where.sql}`)
        .pluck()
        .get(...where.params) as number,
      set,
    }
  }

  function list(f: AgentFilter, sort: Sort, limit: number, offset: number) {
    // Pages of at most 200 rows are kept (bounded memory); larger ones are read each time,
    // and so are lists by check-in time (see db/answer-cache.ts).
    const read = () => readPage<AgentRef>(f, sort, limit, offset, AGENT_REF_COLUMNS)
    if (limit > 200 || f.lastUpdated || sort.field === 'lastUpdated') return read()
    return answers.answer(JSON.stringify([f, sort, limit, offset]), read, (ids) => objectRows<AgentRef>(refsByIds, JSON.stringify(ids)))
  }

  const byUuid = db.prepare<[string], AgentRow>('SELECT * FROM agents WHERE uuid = lower(?)')
  const byId = db.prepare<[number], AgentRow>('SELECT * FROM agents WHERE id = ?')
  const remove = db.prepare<[number]>('DELETE FROM agents WHERE id = ?')

  return {
    byUuid: (uuid: string) => byUuid.get(uuid),
    byId: (id: number) => byId.get(id),

    /** A page of the list: every agent count, the matching count, and the page's agents (see `views`). */
    list,

    /** A page's agents as the JSON array of AgentViewResource the list answers. */
    views: (refs: readonly AgentRef[]) => views(refs),

    /** A page of the list with its agents as that JSON array: one call per page. */
    page(f: AgentFilter, sort: Sort, limit: number, offset: number): { total: number; filtered: number; json: string } {
      const { total: all, filtered, rows } = list(f, sort, limit, offset)
      return { total: all, filtered, json: views(rows) }
    },

    /** A large page as the ids of its agents in order (8 bytes an agent), with the counts. */
    pageIds(f: AgentFilter, sort: Sort, limit: number, offset: number): { total: number; filtered: number; ids: number[] } {
      const { total: all, filtered, rows } = readPage<number>(f, sort, limit, offset, 'a.id', firstColumn)
      return { total: all, filtered, ids: rows }
    },

    /**
     * These agents as AgentViewResource JSON objects joined by commas, VIEW_CHUNK_ROWS read at
     * a time, other requests answered between them (a streamed page). Agents deleted meanwhile are left out.
     */
    async *viewChunks(ids: readonly number[]): AsyncGenerator<string> {
      for (let i = 0; i < ids.length; i += VIEW_CHUNK_ROWS) {
        if (i > 0) await nextTurn()
        const page = ids.slice(i, i + VIEW_CHUNK_ROWS)
        const byId = new Map(objectRows<AgentListRow>(viewsByIds, JSON.stringify(page)).map((r) => [r.id, r]))
        let text = ''
        for (const id of page) {
          const row = byId.get(id)
          if (row) text += (text ? ',' : '') + JSON.stringify(shown.view(row))
          // Small chunks die young (db/sql.ts STREAM_CHUNK_CHARS).
          if (text.length >= STREAM_CHUNK_CHARS) {
            yield text
            text = ''
          }
        }
        if (text) yield text
      }
    },

    /** Every matching agent in order, read as it is consumed (streamed exports). */
    iterate(f: AgentFilter, sort: Sort): IterableIterator<AgentRow> {
      const c = agentConditions(f)
      const all = total.get() as number
      const { filtered, set } = count(f, c, all)
      const plan = choosePlan(filtered, all, 0, filtered, agentSortIndexed(sort))
      const where = renderConditions(c, 'a.id', plan, set)
      return cached(`SELECT a.* FROM agents a WHERE ${where.sql} ORDER BY ${agentOrderBy(sort, plan)}`).iterate(...where.params) as IterableIterator<AgentRow>
    },

    /**
     * The agents (at most two: enough to tell "ambiguous") whose uuid, hostIdentifier and
     * localIpAddress equal every identifier given, case-insensitively.
     */
    matching(ids: AgentIdentifiers): AgentRow[] {
      const w: Where = { sql: [], params: [] }
      if (ids.uuid != null) {
        w.sql.push('uuid = lower(?)')
        w.params.push(ids.uuid)
      }
      if (ids.hostIdentifier != null) {
        w.sql.push('host_identifier = ? COLLATE NOCASE')
        w.params.push(ids.hostIdentifier)
      }
      if (ids.ipAddress != null) {
        w.sql.push('local_ip_address = ? COLLATE NOCASE')
        w.params.push(ids.ipAddress)
      }
      if (!w.sql.length) return []
      return cached(`SELECT * FROM agents WHERE ${w.sql.join(' AND ')} LIMIT 2`).all(...w.params) as AgentRow[]
    },

    /** Deletes the agent; its peripherals, approvals, commands and logs go with it (foreign keys). */
    remove: (id: number) => remove.run(id).changes > 0,
  }
}
export type AgentsRepo = ReturnType<typeof agentsRepo>
