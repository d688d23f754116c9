// The reads a report makes on PostgreSQL (db/postgres/reports.ts composes them): aggregates
// over agents and peripherals, one statement each, and the events, audit records and agents
// of a period as keyset pages.
import { type AgentFilter, type AgentRow, type PeripheralFilter, type PeripheralListRow, VIEW_COLUMNS } from '../../lib/agents/ports.js'
import type { EventRow } from '../../lib/events/ports.js'
import type { AgentTotals, AuditDigestRow, AuditFilter, DigestTotals, EventFilter, PeripheralExtra, PeripheralTotals } from '../../lib/reports/ports.js'
import { contains } from '../sql.js'
import { severityNames } from '../../lib/ports.js'
import type { Postgres } from './connection.js'

/** Rows per page of a streamed read. */
const PAGE_ROWS = 1000
/** Agents per page of a streamed agent or peripheral read. */
const AGENT_PAGE = 500

/** Binds values as `$1, $2…` while a statement is put together. */
export class Params {
  readonly values: unknown[] = []
  constructor(first: unknown[] = []) {
    this.values.push(...first)
  }
  add(value: unknown): string {
    this.values.push(value)
    return `$${this.values.length}`
  }
}

/**
 * The agent and peripheral filters as PostgreSQL conditions: over `agents a` and over
 * `peripherals p`. The agents' part may give its own (with its search indexes); these are
 * plain conditions, "contains" as ILIKE (served by pg_trgm indexes where they exist).
 */
export interface PgFilterSql {
  agents(f: AgentFilter, p: Params, alias?: string): string
  peripherals(f: PeripheralFilter, p: Params): string
}

/** "Contains" on any of the columns (NULL columns match nothing). */
const anyContains = (columns: string[], term: string, p: Params) => {
  const pattern = p.add(contains(term))
  return `(${columns.map((c) => `${c} ILIKE ${pattern}`).join(' OR ')})`
}

/** The fields GlobalSearch looks in over agents (db/filters.ts: the texts in memory and agents_fts). */
const AGENT_GLOBAL = ['host_identifier', 'os_version', 'pc_model', 'service_version', 'license_account_name', 'latest_event_text', 'hashtags', 'uuid', 'ip_addresses', 'nics_text']

export const plainFilterSql: PgFilterSql = {
  agents(f, p, a = 'a') {
    const parts: string[] = []
    const text = (columns: string[], term: string | undefined) => {
      if (term !== undefined) parts.push(anyContains(columns, term, p))
    }
    text([`${a}.uuid`], f.uuid)
    text([`${a}.host_identifier`], f.hostIdentifier)
    text([`${a}.local_ip_address`, `${a}.ip_addresses`], f.ipAddress)
    text([`${a}.service_version`], f.version)
    text([`${a}.os_version`], f.osVersion)
    text([`${a}.hashtags`], f.hashtags)
    text(
      AGENT_GLOBAL.map((c) => `${a}.${c}`),
      f.globalSearch,
    )
    const list = (column: string, values: readonly string[] | undefined) => {
      if (values) parts.push(`${a}.${column} = ANY(${p.add(values)}::text[])`)
    }
    list('connection_status', f.connectionStatus)
    list('operational_status', f.operationalStatus)
    list('display_status', f.displayStatus)
    list('license_status', f.licenseStatus)
    list('running_mode', f.runningMode)
    const flag = (column: string, value: boolean | undefined) => {
      if (value !== undefined) parts.push(`${a}.${column} = ${value ? 1 : 0}`)
    }
    flag('vulnerable_or_wlv', f.containsVulnerablePeripheralOrWLV)
    flag('has_unapproved', f.hasUnapprovedPeripherals)
    flag('has_vulnerable', f.hasVulnerablePeripherals)
    flag('has_attack_tool', f.hasKnownAttackTools)
    const range = (column: string, r: AgentFilter['lastUpdated']) => {
      if (!r) return
      parts.push(`${a}.${column} >= ${p.add(r.from)}`)
      if (r.to !== null) parts.push(`${a}.${column} < ${p.add(r.to)}`)
    }
    range('last_configured_ms', f.lastConfiguration)
    range('last_updated_ms', f.lastUpdated)
    range('expiration_ms', f.expirationDate)
    if (f.severity !== undefined) parts.push(`${a}.severity = ${p.add(f.severity)}`)
    return parts.length ? parts.join(' AND ') : 'true'
  },

  peripherals(f, p) {
    const parts: string[] = []
    const ofAgents: string[] = []
    if (f.hostIdentifier !== undefined) ofAgents.push(anyContains(['a2.host_identifier'], f.hostIdentifier, p))
    if (f.ipAddress !== undefined) ofAgents.push(anyContains(['a2.local_ip_address'], f.ipAddress, p))
    if (f.hostUuid !== undefined) ofAgents.push(anyContains(['a2.uuid'], f.hostUuid, p))
    if (ofAgents.length) parts.push(`p.agent_id IN (SELECT a2.id FROM agents a2 WHERE ${ofAgents.join(' AND ')})`)
    const texts = (column: string, kind: 'vendor' | 'product', term: string) =>
      `${column} IN (SELECT id FROM peripheral_texts WHERE kind = '${kind}' AND text ILIKE ${p.add(contains(term.toLowerCase()))})`
    if (f.vendor !== undefined) parts.push(texts('p.vendor_text_id', 'vendor', f.vendor))
    if (f.productInfo !== undefined) parts.push(texts('p.product_text_id', 'product', f.productInfo))
    if (f.serialNumber !== undefined) parts.push(anyContains(['p.serial_number'], f.serialNumber, p))
    if (f.vid !== undefined) parts.push(`p.vid = ${p.add(f.vid)}`)
    if (f.pid !== undefined) parts.push(`p.pid = ${p.add(f.pid)}`)
    for (const [column, value] of [
      ['p.is_unapproved', f.isUnapproved],
      ['p.is_vulnerable', f.isVulnerable],
      ['p.is_attack_tool', f.isAttackTool],
      ['p.present', f.present],
    ] as const) {
      if (value !== undefined) parts.push(`${column} = ${value ? 1 : 0}`)
    }
    if (f.globalSearch !== undefined) {
      // As db/peripherals.ts: the agent's host name, tags and address, the vendor and
      // product texts, the catalogue's text of the model, the deviceID, the risk tags.
      const term = f.globalSearch
      const like = p.add(contains(term))
      const tags = Object.entries({ is_attack_tool: '#attack-tool', is_vulnerable: '#vulnerable', is_unapproved: '#unapproved' })
        .filter(([, tag]) => tag.includes(term.toLowerCase()))
        .map(([column]) => `p.${column} = 1`)
      parts.push(`(p.agent_id IN (SELECT a2.id FROM agents a2 WHERE a2.host_identifier ILIKE ${like} OR a2.hashtags ILIKE ${like} OR a2.local_ip_address ILIKE ${like})
        OR p.vendor_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'vendor' AND text ILIKE ${like})
        OR p.product_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'product' AND text ILIKE ${like})
        OR EXISTS (SELECT 1 FROM catalogue c WHERE c.vid = p.vid AND c.pid = p.pid AND coalesce(c.vulnerability, c.name) ILIKE ${like})
        OR p.device_id ILIKE ${like}${tags.map((t) => ` OR ${t}`).join('')})`)
    }
    return parts.length ? parts.join(' AND ') : 'true'
  },
}

function eventWhere(f: EventFilter, p: Params): string {
  const parts = [`created_ms >= ${p.add(f.from)}`, `created_ms < ${p.add(f.to)}`]
  if (f.maxSeverity !== undefined) parts.push(`severity <= ${p.add(f.maxSeverity)}`)
  if (f.categories?.length) parts.push(`category = ANY(${p.add(f.categories)}::text[])`)
  if (f.source !== undefined) parts.push(`entity_id ILIKE ${p.add(contains(f.source))}`)
  if (f.globalSearch !== undefined) {
    const like = p.add(contains(f.globalSearch))
    const any = ['description', 'details', 'entity_id', 'event_code', 'category', 'hashtags', 'asset_name'].map((c) => `${c} ILIKE ${like}`)
    const bySeverity = severityNames.flatMap((n, i) => (n.toLowerCase().includes(f.globalSearch!.toLowerCase()) ? [i] : []))
    if (bySeverity.length) any.push(`severity IN (${bySeverity.join(', ')})`)
    parts.push(`(${any.join(' OR ')})`)
  }
  return parts.join(' AND ')
}

function auditWhere(f: AuditFilter, p: Params): string {
  const parts = [`created_ms >= ${p.add(f.from)}`, `created_ms < ${p.add(f.to)}`]
  if (f.maxSeverity !== undefined) parts.push(`severity <= ${p.add(f.maxSeverity)}`)
  if (f.categories?.length) parts.push(`category = ANY(${p.add(f.categories)}::text[])`)
  if (f.user !== undefined) parts.push(`user_name ILIKE ${p.add(contains(f.user))}`)
  if (f.outcomes?.length) parts.push(`outcome = ANY(${p.add(f.outcomes)}::text[])`)
  return parts.join(' AND ')
}

function peripheralWhere(filters: PgFilterSql, f: PeripheralFilter, extra: PeripheralExtra, p: Params): string {
  const parts = [filters.peripherals(f, p)]
  if (extra.approved !== undefined) parts.push(`p.approved = ${extra.approved ? 1 : 0}`)
  if (extra.icons?.length) parts.push(`p.dev_icon = ANY(${p.add(extra.icons.map((i) => Math.trunc(i)))}::bigint[])`)
  return parts.join(' AND ')
}

const bump = <K>(m: Map<K, number>, k: K, n: number) => m.set(k, (m.get(k) ?? 0) + n)

/** The report sources' reads; `filters`: the agent and peripheral filters as SQL. */
export function pgReportData(db: Postgres, filters: PgFilterSql) {
  // Rows typed as the SQLite repository's (the same columns).
  const all = <T>(sql: string, params?: unknown[]) => db.query(sql, params) as Promise<unknown> as Promise<T[]>
  const get = <T>(sql: string, params?: unknown[]) => db.one(sql, params) as Promise<unknown> as Promise<T | undefined>
  const data = {
    // ---- data ----
    /** The agents of `ids` in that order, with the columns the list's view reads, a page at a time (rows deleted meanwhile are left out). */
    async *agents(ids: readonly number[], signal?: AbortSignal): AsyncGenerator<AgentRow> {
      const columns = VIEW_COLUMNS.map((c) => `a.${c}`).join(', ')
      for (let i = 0; i < ids.length; i += AGENT_PAGE) {
        signal?.throwIfAborted()
        const page = ids.slice(i, i + AGENT_PAGE)
        yield* await all<AgentRow>(`SELECT ${columns} FROM unnest($1::bigint[]) WITH ORDINALITY u(id, n) JOIN agents a ON a.id = u.id ORDER BY u.n`, [page])
      }
    },

    /** Counters of the agents matching the filter. */
    async agentTotals(f: AgentFilter, signal?: AbortSignal): Promise<AgentTotals> {
      signal?.throwIfAborted()
      const p = new Params()
      const w = filters.agents(f, p)
      return (await get<AgentTotals>(
        `SELECT count(*) AS "agents", count(*) FILTER (WHERE connection_status = 'Connected') AS "connected",
           count(*) FILTER (WHERE operational_status = 'Armed') AS "armed",
           coalesce(sum(has_unapproved), 0) AS "withUnapproved", coalesce(sum(has_vulnerable), 0) AS "withVulnerable",
           coalesce(sum(has_attack_tool), 0) AS "withAttackTools", count(*) FILTER (WHERE license_status = 'Activated') AS "licenseActivated",
           coalesce(sum(not_approved), 0) AS "unapprovedPeripherals"
         FROM agents a WHERE ${w}`,
        p.values,
      ))!
    },

    /** Counters of the peripherals matching the filter. */
    async peripheralTotals(f: PeripheralFilter, extra: PeripheralExtra, signal?: AbortSignal): Promise<PeripheralTotals> {
      signal?.throwIfAborted()
      const p = new Params()
      const w = peripheralWhere(filters, f, extra, p)
      return (await get<PeripheralTotals>(
        `SELECT count(*) AS "peripherals", count(DISTINCT p.agent_id) AS "hosts", coalesce(sum(p.present), 0) AS "present",
           coalesce(sum(p.approved), 0) AS "approved", coalesce(sum(p.is_unapproved), 0) AS "unapproved",
           coalesce(sum(p.is_vulnerable), 0) AS "vulnerable", coalesce(sum(p.is_attack_tool), 0) AS "attackTools"
         FROM peripherals p WHERE ${w}`,
        p.values,
      ))!
    },

    /**
     * The peripherals matching the filter, agent by agent in the order of `agentIds`
     * (each agent's by deviceID), read for a few hundred agents at a time.
     */
    async *peripherals(agentIds: readonly number[], f: PeripheralFilter, extra: PeripheralExtra, signal?: AbortSignal): AsyncGenerator<PeripheralListRow> {
      const p = new Params([null])
      const w = peripheralWhere(filters, f, extra, p)
      const sql = `SELECT p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags
        FROM unnest($1::bigint[]) WITH ORDINALITY u(id, n) JOIN peripherals p ON p.agent_id = u.id JOIN agents a ON a.id = p.agent_id
        WHERE ${w} ORDER BY u.n, p.device_id COLLATE "C", p.id`
      for (let i = 0; i < agentIds.length; i += AGENT_PAGE) {
        signal?.throwIfAborted()
        p.values[0] = agentIds.slice(i, i + AGENT_PAGE)
        yield* await all<PeripheralListRow>(sql, p.values)
      }
    },

    /** Counts of the events of the filter: by severity, category and source. */
    async eventTotals(f: EventFilter, signal?: AbortSignal): Promise<DigestTotals> {
      signal?.throwIfAborted()
      const t: DigestTotals = { total: 0, bySeverity: new Map(), byCategory: new Map(), byOutcome: new Map(), byKey: new Map() }
      const p = new Params()
      const w = eventWhere(f, p)
      // A source is its asset where the event names one (an agent's events name it "HOST"
      // before its address is known, "HOST (ip)" after), shown as the name its latest event
      // gave; events without an asset count by their source text.
      const rows = await db.query<{ severity: number; category: string; label: string; n: number }>(
        `WITH g AS (
           SELECT severity, category, CASE WHEN asset_key IS NULL THEN 'text:' || entity_id ELSE 'asset:' || asset_key END AS key, id, entity_id
           FROM events WHERE ${w})
         SELECT g.severity, g.category, s.label, count(*) AS n
         FROM g JOIN (SELECT DISTINCT ON (key) key, entity_id AS label FROM g ORDER BY key, id DESC) s USING (key)
         GROUP BY 1, 2, 3`,
        p.values,
      )
      for (const r of rows) {
        t.total += r.n
        bump(t.bySeverity, r.severity, r.n)
        bump(t.byCategory, r.category, r.n)
        bump(t.byKey, r.label, r.n)
      }
      return t
    },

    /** The events of the filter, newest first, a page at a time. */
    async *events(f: EventFilter, signal?: AbortSignal): AsyncGenerator<EventRow> {
      yield* pages<EventRow>('SELECT * FROM events', (p) => eventWhere(f, p), signal)
    },

    /** Counts of the audit records of the filter: by severity, category, outcome and user. */
    async auditTotals(f: AuditFilter, signal?: AbortSignal): Promise<DigestTotals> {
      signal?.throwIfAborted()
      const t: DigestTotals = { total: 0, bySeverity: new Map(), byCategory: new Map(), byOutcome: new Map(), byKey: new Map() }
      const p = new Params()
      const rows = await db.query<{ severity: number; category: string; outcome: string; key: string; n: number }>(
        `SELECT severity, category, outcome, coalesce(user_name, '(unknown)') AS key, count(*) AS n FROM audit_trail WHERE ${auditWhere(f, p)} GROUP BY 1, 2, 3, 4`,
        p.values,
      )
      for (const r of rows) {
        t.total += r.n
        bump(t.bySeverity, r.severity, r.n)
        bump(t.byCategory, r.category, r.n)
        bump(t.byOutcome, r.outcome, r.n)
        bump(t.byKey, r.key, r.n)
      }
      return t
    },

    /** The audit records of the filter, newest first, a page at a time. */
    async *auditRecords(f: AuditFilter, signal?: AbortSignal): AsyncGenerator<AuditDigestRow> {
      const columns = 'id, created_ms, severity, category, user_name, source_ip, description, details, operation_id, outcome, asset_key, asset_name, asset_type'
      yield* pages<AuditDigestRow>(`SELECT ${columns} FROM audit_trail`, (p) => auditWhere(f, p), signal)
    },
  }

  /** Keyset pages of `select` under the conditions, newest first (created_ms, id). */
  async function* pages<T extends { created_ms: number; id: number }>(select: string, where: (p: Params) => string, signal?: AbortSignal): AsyncGenerator<T> {
    let last: T | undefined
    for (;;) {
      signal?.throwIfAborted()
      const p = new Params()
      const w = where(p)
      const after = last ? ` AND (created_ms, id) < (${p.add(last.created_ms)}, ${p.add(last.id)})` : ''
      const page = await all<T>(`${select} WHERE ${w}${after} ORDER BY created_ms DESC, id DESC LIMIT ${PAGE_ROWS}`, p.values)
      yield* page
      if (page.length < PAGE_ROWS) return
      last = page[page.length - 1]
    }
  }

  return data
}
