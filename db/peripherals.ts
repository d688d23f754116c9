// Peripherals across agents: the list with its filters and sort orders, one agent's
// peripherals, and the approvals (the administrators' decision per agent and model).
import type { DB } from './index.js'
import { answerCache, type CheckInTimeWrites } from './answer-cache.js'
import type { CacheRegistry } from '../lib/platform/cache.js'
import { agentContains, agentConditions, renderConditions, type AgentSearch, type Conditions } from './filters.js'
import { type PeripheralFilter, type PeripheralListRow, soleField } from '../lib/agents/ports.js'
import { choosePlan, contains, firstColumn, objectRows, orderBy, plannedRead, statementCache, trigramTerm, type Condition, type Plan, type PlannedRead, type RowReader } from './sql.js'
import { STREAM_CHUNK_CHARS, type Sort } from '../lib/ports.js'
import { VIEW_CHUNK_ROWS } from './agents.js'
import { idsOf } from './agent-texts.js'
import { setImmediate as nextTurn } from 'node:timers/promises'

const FROM = 'peripherals p JOIN agents a ON a.id = p.agent_id'
const COLUMNS = 'p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags'

const cond = (sql: (plus: string) => string, ...params: unknown[]): Condition => ({ sql, params })

/** The ids of the agents matching agent conditions over `agents a2`: the searches' matches alone when they are all. */
function agentIds(c: Conditions, search: AgentSearch): { sql: string; params: unknown[] } {
  const set = search.resolve(c)
  if (set && !c.rest.length) return { sql: 'SELECT value FROM json_each(?)', params: [JSON.stringify(idsOf(set))] }
  const where = renderConditions(c, 'a2.id', 'free', set)
  return { sql: `SELECT a2.id FROM agents a2 WHERE ${where.sql}`, params: where.params }
}

function ofAgents(c: Conditions, search: AgentSearch): Condition {
  const ids = agentIds(c, search)
  return cond((plus) => `${plus}p.agent_id IN (${ids.sql})`, ...ids.params)
}

/** Interned texts (peripheral_texts, a few thousand rows) that contain the term. */
const textContains = (column: string, kind: 'vendor' | 'product', term: string) =>
  cond((plus) => `${plus}${column} IN (SELECT id FROM peripheral_texts WHERE kind = '${kind}' AND text LIKE ? ESCAPE '\\')`, contains(term.toLowerCase()))

/** A trigram phrase query: exact substring, whatever characters the term holds. */
const phrase = (term: string) => `"${term.replace(/"/g, '""')}"`

/**
 * Peripherals whose deviceID contains the term: from 3 characters through the trigram
 * index peripherals_fts (migration 005); shorter terms have no trigram and read every
 * deviceID (from the narrow unique index on agent and deviceID, not the wide rows).
 */
const deviceIds = (term: string): { sql: string; params: unknown[] } =>
  trigramTerm(term)
    ? { sql: 'SELECT rowid FROM peripherals_fts WHERE peripherals_fts MATCH ?', params: [phrase(term)] }
    : { sql: "SELECT id FROM peripherals WHERE device_id LIKE ? ESCAPE '\\'", params: [contains(term)] }

/**
 * "Contains" on the serial. The serial is the last part of the deviceID (see the
 * contract), so the deviceID's index finds the candidates, and the serial itself
 * decides; guiSerial is the serial or null, so it adds nothing.
 */
function serialContains(term: string): Condition {
  const ids = deviceIds(term)
  return cond((plus) => `${plus}p.id IN (${ids.sql}) AND p.serial_number LIKE ? ESCAPE '\\'`, ...ids.params, contains(term))
}

const riskTags = { is_attack_tool: '#attack-tool', is_vulnerable: '#vulnerable', is_unapproved: '#unapproved' }

/**
 * GlobalSearch over peripherals: the ids found through what serves each field - the
 * agent's host name and tags in memory (db/agent-texts.ts), its address through
 * agents_fts, vendor and product names
 * through the interned texts, the catalogue's vulnerability text through the models it
 * names, the risk tags through the flags, deviceID and serial through peripherals_fts.
 */
function globalSearch(term: string, search: AgentSearch): Condition {
  const named = search.texts.searchAny(['host_identifier', 'hashtags'], term)
  const addressed: Conditions = { match: [], texts: [], rest: [] }
  // ip_addresses holds every address of the agent, hostIp among them.
  agentContains(addressed, 'a2', ['ip_addresses'], ['local_ip_address'], term, true)
  const byAddress = agentIds(addressed, search)
  const byAgent = { sql: `SELECT value FROM json_each(?) UNION ${byAddress.sql}`, params: [JSON.stringify(idsOf(named)), ...byAddress.params] }
  const like = contains(term)
  const texts = "SELECT id FROM peripheral_texts WHERE kind = ? AND text LIKE ? ESCAPE '\\'"
  const parts = [
    { sql: `SELECT id FROM peripherals WHERE agent_id IN (${byAgent.sql})`, params: byAgent.params },
    { sql: `SELECT id FROM peripherals WHERE vendor_text_id IN (${texts})`, params: ['vendor', like.toLowerCase()] },
    { sql: `SELECT id FROM peripherals WHERE product_text_id IN (${texts})`, params: ['product', like.toLowerCase()] },
    {
      sql: "SELECT p2.id FROM catalogue c JOIN peripherals p2 ON p2.vid = c.vid AND p2.pid = c.pid WHERE coalesce(c.vulnerability, c.name) LIKE ? ESCAPE '\\'",
      params: [like],
    },
    deviceIds(term),
    ...Object.entries(riskTags)
      .filter(([, tag]) => tag.includes(term.toLowerCase()))
      .map(([column]) => ({ sql: `SELECT id FROM peripherals WHERE ${column} = 1`, params: [] })),
  ]
  return cond((plus) => `${plus}p.id IN (${parts.map((x) => x.sql).join(' UNION ')})`, ...parts.flatMap((x) => x.params))
}

/** A peripheral filter as conditions over `peripherals p`. */
function peripheralConditions(f: PeripheralFilter, search: AgentSearch): Condition[] {
  const out: Condition[] = []
  const agents = agentConditions({ hostIdentifier: f.hostIdentifier }, 'a2')
  if (f.ipAddress !== undefined) agentContains(agents, 'a2', ['ip_addresses'], ['local_ip_address'], f.ipAddress, true)
  if (f.hostUuid !== undefined) agentContains(agents, 'a2', ['uuid'], ['uuid'], f.hostUuid)
  if (agents.match.length || agents.texts.length || agents.rest.length) out.push(ofAgents(agents, search))
  if (f.vendor !== undefined) out.push(textContains('p.vendor_text_id', 'vendor', f.vendor))
  if (f.productInfo !== undefined) out.push(textContains('p.product_text_id', 'product', f.productInfo))
  if (f.serialNumber !== undefined) out.push(serialContains(f.serialNumber))
  if (f.vid !== undefined) out.push(cond((plus) => `${plus}p.vid = ?`, f.vid))
  if (f.pid !== undefined) out.push(cond((plus) => `${plus}p.pid = ?`, f.pid))
  for (const [column, value] of [
    ['p.is_unapproved', f.isUnapproved],
    ['p.is_vulnerable', f.isVulnerable],
    ['p.is_attack_tool', f.isAttackTool],
    ['p.present', f.present],
  ] as const) {
    if (value !== undefined) out.push(cond((plus) => `${plus}${column} = ${value ? 1 : 0}`))
  }
  if (f.globalSearch !== undefined) out.push(globalSearch(f.globalSearch, search))
  return out
}

function render(conditions: Condition[], plan: Plan | 'free') {
  // plan: query-plans "peripherals list" (tests/query-plans.test.ts)
  const plus = plan === 'walk' ? '+' : ''
  return { sql: conditions.length ? conditions.map((c) => c.sql(plus)).join(' AND ') : '1', params: conditions.flatMap((c) => c.params) }
}

/** The conditions of a peripheral filter over `peripherals p` (joined with `agents a` or not), as a WHERE fragment ('1' when none). */
export function peripheralWhere(f: PeripheralFilter, search: AgentSearch): { sql: string; params: unknown[] } {
  return render(peripheralConditions(f, search), 'free')
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
// plan: query-plans "peripherals list" (tests/query-plans.test.ts)
const peripheralSortHinted = Object.fromEntries(Object.entries(peripheralSortColumns).map(([k, v]) => [k, `+${v}`]))
/** The sort orders an index serves: the agent's uuid, then deviceID and id (peripherals_agent_uuid). */
const peripheralSortIndexed = (s: Sort) => s.field === 'uuid' || s.field === 'hostUuid'

/** ORDER BY of the peripheral list; for `seek`, hinted so that no index is walked for it. */
// plan: query-plans "peripherals list" (tests/query-plans.test.ts)
export const peripheralOrderBy = (s: Sort, plan: Plan = 'walk') =>
  orderBy(s, plan === 'seek' ? peripheralSortHinted : peripheralSortColumns, plan === 'seek' ? ['+p.device_id', '+p.id'] : ['p.device_id', 'p.id'], nullableSorts)

export function peripheralsRepo(db: DB, checkInTimes: CheckInTimeWrites, search: AgentSearch, keptAnswers = 64, caches?: CacheRegistry) {
  const cached = statementCache(db)
  const answers = answerCache<PeripheralListRow>(db, checkInTimes, keptAnswers, caches, 'peripheral-list-answers')
  const byIds = db.prepare<[string], PeripheralListRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE p.id IN (SELECT value FROM json_each(?))`)
  const total = db.prepare<[], number>("SELECT n FROM row_counts WHERE name = 'peripherals'").pluck()

  // Peripherals per interned text (migration 017).
  const textTotal = db.prepare<[string, string], number>("SELECT coalesce(sum(n), 0) FROM peripheral_texts WHERE kind = ? AND text LIKE ? ESCAPE '\\'").pluck()
  /**
   * How many peripherals match: the kept row count, the matching texts' counts (a vendor or
   * product "contains" alone), or the conditions (no join: every peripheral has its agent).
   */
  function count(f: PeripheralFilter, conditions: Condition[], all: number): number {
    if (!conditions.length) return all
    const sole = soleField(f)
    if (sole && (sole[0] === 'vendor' || sole[0] === 'productInfo')) {
      return textTotal.get(sole[0] === 'vendor' ? 'vendor' : 'product', contains((sole[1] as string).toLowerCase())) as number
    }
    const where = render(conditions, 'free')
    return cached(`SELECT count(*) FROM peripherals p WHERE ${where.sql}`)
      .pluck()
      .get(...where.params) as number
  }
  /** A page as rows of `columns` (over `peripherals p JOIN agents a`; read by `rows`), with the counts. */
  function readPage<R>(f: PeripheralFilter, sort: Sort, limit: number, offset: number, columns: string, rows: RowReader<R> = objectRows): { total: number; filtered: number; rows: R[] } {
    const conditions = peripheralConditions(f, search)
    const all = total.get() as number
    const filtered = count(f, conditions, all)
    const plan = choosePlan(filtered, all, offset, limit, peripheralSortIndexed(sort))
    const where = render(conditions, plan)
    return {
      total: all,
      filtered,
      rows: filtered <= offset ? [] : rows(cached(`SELECT ${columns} FROM ${FROM} WHERE ${where.sql} ORDER BY ${peripheralOrderBy(sort, plan)} LIMIT ? OFFSET ?`), ...where.params, limit, offset),
    }
  }
  const ofAgent = db.prepare<[number, number], PeripheralListRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE p.agent_id = ? ORDER BY p.present DESC, p.last_seen_ms DESC, p.id DESC LIMIT ?`)
  const presentModels = db.prepare<[number], { vid: string; pid: string }>('SELECT DISTINCT vid, pid FROM peripherals WHERE agent_id = ? AND present ORDER BY vid, pid')
  // Through the agent's few peripherals, never through every peripheral of a popular model.
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const hasModel = db.prepare<[number, string, string], number>('SELECT count(*) FROM (SELECT 1 FROM peripherals WHERE agent_id = ? AND +vid = ? AND +pid = ? LIMIT 1)').pluck()
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
      // Pages of at most 200 rows are kept (bounded memory); larger ones are read each time.
      const read = () => readPage<PeripheralListRow>(f, sort, limit, offset, COLUMNS)
      if (limit > 200) return read()
      return answers.answer(JSON.stringify([f, sort, limit, offset]), read, (ids) => objectRows<PeripheralListRow>(byIds, JSON.stringify(ids)))
    },

    /** A large page's counts, and the statement of its ids in order (null when it has none), for a reader thread. */
    pageIdsRead(f: PeripheralFilter, sort: Sort, limit: number, offset: number): { total: number; filtered: number; read: PlannedRead | null } {
      const planned = plannedRead()
      const { total: all, filtered } = readPage<never>(f, sort, limit, offset, 'p.id', planned.rows)
      return { total: all, filtered, read: planned.read() }
    },

    /** A large page as the ids of its peripherals in order (8 bytes a peripheral), with the counts. */
    pageIds(f: PeripheralFilter, sort: Sort, limit: number, offset: number): { total: number; filtered: number; ids: number[] } {
      const { total: all, filtered, rows } = readPage<number>(f, sort, limit, offset, 'p.id', firstColumn)
      return { total: all, filtered, ids: rows }
    },

    /**
     * These peripherals as JSON objects of `view` (lib/peripherals/views.ts) joined by
     * commas, VIEW_CHUNK_ROWS read at a time, other requests answered between them (a
     * streamed page). Peripherals deleted meanwhile are left out.
     */
    async *viewChunks(ids: readonly number[], view: (r: PeripheralListRow) => unknown): AsyncGenerator<string> {
      for (let i = 0; i < ids.length; i += VIEW_CHUNK_ROWS) {
        if (i > 0) await nextTurn()
        const page = ids.slice(i, i + VIEW_CHUNK_ROWS)
        const byId = new Map(objectRows<PeripheralListRow>(byIds, JSON.stringify(page)).map((r) => [r.id, r]))
        let text = ''
        for (const id of page) {
          const row = byId.get(id)
          if (row) text += (text ? ',' : '') + JSON.stringify(view(row))
          // Small chunks die young (db/sql.ts STREAM_CHUNK_CHARS).
          if (text.length >= STREAM_CHUNK_CHARS) {
            yield text
            text = ''
          }
        }
        if (text) yield text
      }
    },

    /** Every matching peripheral in order, read as it is consumed (streamed exports). */
    iterate(f: PeripheralFilter, sort: Sort): IterableIterator<PeripheralListRow> {
      const conditions = peripheralConditions(f, search)
      const all = total.get() as number
      const filtered = count(f, conditions, all)
      const plan = choosePlan(filtered, all, 0, filtered, peripheralSortIndexed(sort))
      const where = render(conditions, plan)
      return cached(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${where.sql} ORDER BY ${peripheralOrderBy(sort, plan)}`).iterate(...where.params) as IterableIterator<PeripheralListRow>
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
