// Agents: the list with its filters and sort orders, lookups by identifiers, deletion.
import { FLAG_COLUMNS } from './agent-flags.js'
import type { DB } from './index.js'
import { answerCache, type CheckInTimeWrites } from './answer-cache.js'
import type { CacheRegistry } from '../lib/platform/cache.js'
import { keptAgentViews } from './agent-views-kept.js'
import { agentConditions, renderConditions, type AgentSearch, type Conditions } from './filters.js'
import { type AgentFilter, type AgentIdentifiers, type AgentListRow, type AgentListView, type AgentRef, type AgentRow, soleField, VIEW_COLUMNS } from '../lib/agents/ports.js'
import { choosePlan, firstColumn, objectRows, orderBy, plannedRead, statementCache, type Plan, type PlannedRead, type RowReader } from './sql.js'
import { STREAM_CHUNK_CHARS, type Sort } from '../lib/ports.js'
import type { AgentSet } from './agent-texts.js'
import { setImmediate as nextTurn } from 'node:timers/promises'

/** Conditions of a WHERE clause being built, with their parameters. */
export interface Where {
  sql: string[]
  params: unknown[]
}
const viewColumns = (alias: string) => VIEW_COLUMNS.map((c) => `${alias}.${c}`).join(', ')
const AGENT_REF_COLUMNS = 'a.id, a.rev, a.last_updated_ms'

/** The columns whose writes move an agent's rev: every one agentView reads but the id and the check-in time. */
export const REV_COLUMNS = VIEW_COLUMNS.filter((c) => c !== 'id' && c !== 'last_updated_ms')

/**
 * Rows read at a time for a streamed page: a hundred agents are about 130 KB of JSON, and
 * their row objects die young; a thousand lived on in the old generation while the client
 * took their text.
 */
export const VIEW_CHUNK_ROWS = 100

/**
 * The agents of a page as a JSON array of AgentViewResource, each kept as JSON under its id
 * and rev (db/agent-views-kept.ts): only the agents not kept at the rev the page read are read.
 */
export function agentViews(db: DB, list: AgentListView, max = 5000, caches?: CacheRegistry) {
  const byIds = db.prepare(`SELECT ${viewColumns('a')}, a.rev FROM agents a WHERE a.id IN (SELECT value FROM json_each(?))`)
  const kept = keptAgentViews(list, max, caches)
  return (refs: readonly AgentRef[]): string => {
    const { json, missing } = kept.lookup(refs)
    // A row deleted since the page was read (by another connection) is left out.
    return kept.fill(refs, json, missing ? objectRows<AgentListRow & { rev: number }>(byIds, JSON.stringify(missing)) : [])
  }
}

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

/** `shown`: how a list shows an agent (lib/agents/views.ts), kept as JSON per row here. */
export function agentsRepo(db: DB, checkInTimes: CheckInTimeWrites, search: AgentSearch, shown: AgentListView, keptAnswers = 64, caches?: CacheRegistry) {
  const cached = statementCache(db)
  const answers = answerCache<AgentRef>(db, checkInTimes, keptAnswers, caches, 'agent-list-answers')
  const refsByIds = db.prepare<[string], AgentRef>(`SELECT ${AGENT_REF_COLUMNS} FROM agents a WHERE a.id IN (SELECT value FROM json_each(?))`)
  const views = agentViews(db, shown, 5000, caches)
  const total = db.prepare<[], number>("SELECT n FROM row_counts WHERE name = 'agents'").pluck()

  // The flags' totals (migration 018), by filter field.
  const flagTotal = db.prepare<[string], number>('SELECT n FROM row_counts WHERE name = ?').pluck()
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
    if (sole && FLAG_COLUMNS[sole[0]]) {
      const flagged = flagTotal.get(`agents.${FLAG_COLUMNS[sole[0]]}`) as number
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

    /** A large page's counts, and the statement of its ids in order (null when it has none), for a reader thread. */
    pageIdsRead(f: AgentFilter, sort: Sort, limit: number, offset: number): { total: number; filtered: number; read: PlannedRead | null } {
      const planned = plannedRead()
      const { total: all, filtered } = readPage<never>(f, sort, limit, offset, 'a.id', planned.rows)
      return { total: all, filtered, read: planned.read() }
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
