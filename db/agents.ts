// Agents: the list with its filters and sort orders, lookups by identifiers, deletion.
import type Database from 'better-sqlite3'
import type { DB } from './index.js'
import type { AgentFilter } from '../lib/agent-filter.js'
import { contains, orderBy, type DateRange, type Sort } from '../lib/listing.js'
import { iso } from '../lib/time.js'
import type { components } from '../generated/openapi.js'

type AgentView = components['schemas']['AgentViewResource']

/** Conditions of a WHERE clause being built, with their parameters. */
export interface Where { sql: string[]; params: unknown[] }

/**
 * Prepared statements of the filtered lists, by SQL text. The text depends only on which
 * filters are given, so few exist; the cap bounds memory whatever callers combine.
 */
export function statementCache(db: DB, cap = 256) {
  const statements = new Map<string, Database.Statement>()
  return (sql: string): Database.Statement => {
    let s = statements.get(sql)
    if (s) {
      statements.delete(sql)
    } else {
      s = db.prepare(sql)
      if (statements.size >= cap) statements.delete(statements.keys().next().value!)
    }
    statements.set(sql, s)
    return s
  }
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
  display_status: AgentView['displayStatusCombined']
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
  license_status: AgentView['licenseStatus']
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
  running_mode: AgentView['runningMode']
  switch_ip: string | null
  switch_name: string | null
  port_id: string | null
  port_name: string | null
  ethernets_count: number
  hashtags: string | null
  logged_on_users: string
  check_in_interval_s: number
  state_digest: string | null
}

const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms))

/** An agent as the lists show it (AgentViewResource). */
export function agentView(r: AgentRow): AgentView {
  return {
    uuid: r.uuid,
    hostIdentifier: r.host_identifier,
    localIpAddress: r.local_ip_address,
    osVersion: r.os_version,
    pcModel: r.pc_model,
    nicsText: r.nics_text,
    operationalStatus: r.operational_status,
    connectionStatus: r.connection_status,
    displayStatusCombined: r.display_status,
    approvedAndPresent: r.approved_and_present,
    approvedAndDisconnected: r.approved_and_disconnected,
    notApproved: r.not_approved,
    latestEventText: r.latest_event_text,
    latestMinus1EventText: r.latest_minus1_event_text,
    latestMinus2EventText: r.latest_minus2_event_text,
    serviceVersion: r.service_version,
    kbDriverVersion: r.kb_driver_version,
    lastUpdated: isoOrNull(r.last_updated_ms),
    lastConfiguered: isoOrNull(r.last_configured_ms),
    licenseStatus: r.license_status,
    expirationDate: isoOrNull(r.expiration_ms),
    licenseAccountId: r.license_account_id,
    licenseAccountName: r.license_account_name,
    severity: r.severity,
    hasUnapprovedPeripherals: r.has_unapproved === 1,
    hasVulnerablePeripherals: r.has_vulnerable === 1,
    hasKnownAttackTools: r.has_attack_tool === 1,
    containsVulnerablePeripheralOrWLV: r.vulnerable_or_wlv === 1,
    inAction: r.in_action === 1,
    modelToolTip: r.model_tooltip,
    runningMode: r.running_mode,
    connectedSwitchIp: r.switch_ip,
    connectedSwitchName: r.switch_name,
    connectedPortId: r.port_id,
    connectedPortName: r.port_name,
    ethernetsCount: r.ethernets_count,
    hashtags: r.hashtags,
  }
}

/** The fields GlobalSearch looks in (the `everything` column of agents_fts holds the same). */
const SEARCHED = ['uuid', 'host_identifier', 'local_ip_address', 'os_version', 'pc_model', 'nics_text', 'service_version', 'license_account_name', 'latest_event_text', 'hashtags']

/** A trigram phrase query: exact substring, whatever characters the term holds. */
const phrase = (columns: string[], term: string) => `{${columns.join(' ')}} : "${term.replace(/"/g, '""')}"`

/**
 * "Contains" on agent columns. From 3 characters the trigram index agents_fts finds the
 * candidates, so the agents table is not scanned; the LIKE on the real columns then
 * keeps exactly the rows that contain the term (the index folds case beyond ASCII and
 * its `everything` column runs fields together). Shorter terms have no trigram: they
 * scan the agents table.
 */
export function agentContains(alias: string, ftsColumns: string[], columns: string[], term: string, w: Where): void {
  const like = contains(term)
  const exact = columns.map((c) => `${alias}.${c} LIKE ? ESCAPE '\\'`)
  if ([...term].length >= 3) {
    w.sql.push(`${alias}.id IN (SELECT rowid FROM agents_fts WHERE agents_fts MATCH ?)`)
    w.params.push(phrase(ftsColumns, term))
  }
  w.sql.push(exact.length > 1 ? `(${exact.join(' OR ')})` : exact[0])
  for (let i = 0; i < columns.length; i++) w.params.push(like)
}

function inList(w: Where, column: string, values: readonly string[] | undefined) {
  if (!values) return
  w.sql.push(`${column} IN (${values.map(() => '?').join(', ')})`)
  w.params.push(...values)
}

function flag(w: Where, column: string, value: boolean | undefined) {
  if (value === undefined) return
  w.sql.push(`${column} = ${value ? 1 : 0}`)
}

function range(w: Where, column: string, r: DateRange | undefined) {
  if (!r) return
  w.sql.push(`${column} >= ?`)
  w.params.push(r.from)
  if (r.to !== null) {
    w.sql.push(`${column} < ?`)
    w.params.push(r.to)
  }
}

/** The conditions of an agent filter over `agents a`, as a WHERE fragment ('1' when none). */
export function agentWhere(f: AgentFilter, alias = 'a'): { sql: string; params: unknown[] } {
  const w: Where = { sql: [], params: [] }
  addAgentConditions(w, f, alias)
  return { sql: w.sql.length ? w.sql.join(' AND ') : '1', params: w.params }
}

function addAgentConditions(w: Where, f: AgentFilter, a: string) {
  if (f.uuid !== undefined) agentContains(a, ['uuid'], ['uuid'], f.uuid, w)
  if (f.hostIdentifier !== undefined) agentContains(a, ['host_identifier'], ['host_identifier'], f.hostIdentifier, w)
  // `everything` holds localIpAddress too: the index may only find more, never fewer.
  if (f.ipAddress !== undefined) agentContains(a, ['ip_addresses', 'everything'], ['local_ip_address', 'ip_addresses'], f.ipAddress, w)
  if (f.version !== undefined) agentContains(a, ['service_version'], ['service_version'], f.version, w)
  if (f.osVersion !== undefined) agentContains(a, ['os_version'], ['os_version'], f.osVersion, w)
  if (f.hashtags !== undefined) agentContains(a, ['hashtags'], ['hashtags'], f.hashtags, w)
  if (f.globalSearch !== undefined) agentContains(a, ['everything'], SEARCHED, f.globalSearch, w)
  inList(w, `${a}.connection_status`, f.connectionStatus)
  inList(w, `${a}.operational_status`, f.operationalStatus)
  inList(w, `${a}.display_status`, f.displayStatus)
  inList(w, `${a}.license_status`, f.licenseStatus)
  inList(w, `${a}.running_mode`, f.runningMode)
  flag(w, `${a}.vulnerable_or_wlv`, f.containsVulnerablePeripheralOrWLV)
  flag(w, `${a}.has_unapproved`, f.hasUnapprovedPeripherals)
  flag(w, `${a}.has_vulnerable`, f.hasVulnerablePeripherals)
  flag(w, `${a}.has_attack_tool`, f.hasKnownAttackTools)
  range(w, `${a}.last_configured_ms`, f.lastConfiguration)
  range(w, `${a}.last_updated_ms`, f.lastUpdated)
  range(w, `${a}.expiration_ms`, f.expirationDate)
  if (f.severity !== undefined) {
    w.sql.push(`${a}.severity = ?`)
    w.params.push(f.severity)
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
  'localIpAddress', 'osVersion', 'pcModel', 'serviceVersion', 'kbDriverVersion', 'lastUpdated', 'lastConfiguered',
  'lastConfiguration', 'expirationDate', 'licenseAccountName', 'runningMode',
]
export const agentOrderBy = (s: Sort) => orderBy(s, agentSortColumns, 'a.uuid', nullableSorts)

/** The identifiers an item of agents/configuration or peripherals/command names an agent by. */
export interface AgentIdentifiers { uuid?: string | null; hostIdentifier?: string | null; ipAddress?: string | null }

export function agentsRepo(db: DB) {
  const cached = statementCache(db)
  const total = db.prepare<[], { n: number }>("SELECT n FROM row_counts WHERE name = 'agents'").pluck()
  const byUuid = db.prepare<[string], AgentRow>('SELECT * FROM agents WHERE uuid = lower(?)')
  const byId = db.prepare<[number], AgentRow>('SELECT * FROM agents WHERE id = ?')
  const remove = db.prepare<[number]>('DELETE FROM agents WHERE id = ?')

  return {
    byUuid: (uuid: string) => byUuid.get(uuid),
    byId: (id: number) => byId.get(id),

    /** A page of the list: every agent count, the matching count, and the page's rows. */
    list(f: AgentFilter, sort: Sort, limit: number, offset: number) {
      const where = agentWhere(f)
      const all = total.get() as unknown as number
      const filtered = where.sql === '1' ? all : (cached(`SELECT count(*) FROM agents a WHERE ${where.sql}`).pluck().get(...where.params) as number)
      const rows = cached(`SELECT a.* FROM agents a WHERE ${where.sql} ORDER BY ${agentOrderBy(sort)} LIMIT ? OFFSET ?`).all(...where.params, limit, offset) as AgentRow[]
      return { total: all, filtered, rows }
    },

    /** Every matching agent in order, read as it is consumed (streamed exports). */
    iterate(f: AgentFilter, sort: Sort): IterableIterator<AgentRow> {
      const where = agentWhere(f)
      return cached(`SELECT a.* FROM agents a WHERE ${where.sql} ORDER BY ${agentOrderBy(sort)}`).iterate(...where.params) as IterableIterator<AgentRow>
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
