// The reads a report makes that no other repository offers: aggregates over agents and
// peripherals, and the events and audit records of a period, each in steps (id ranges,
// days, keyset pages) with other work let in between.
import type { EventRow } from '../lib/events/ports.js'
import type { DB } from './index.js'
import type { AgentSearch } from './filters.js'
import { type AgentFilter, type AgentRow, type PeripheralFilter, type PeripheralListRow, VIEW_COLUMNS } from '../lib/agents/ports.js'
import { contains, type statementCache } from './sql.js'
import { peripheralWhere } from './peripherals.js'
import { setImmediate as pause } from 'node:timers/promises'
import type { AgentTotals, AuditDigestRow, AuditFilter, DigestTotals, EventFilter, PeripheralExtra, PeripheralTotals } from '../lib/reports/ports.js'

/** Agents per step of an aggregate over agents or peripherals. */
const AGENT_STEP = 5000
/** Rows per page of a streamed read. */
const PAGE_ROWS = 1000

/** Agents per page of a streamed agent read. */
const AGENT_PAGE = 250

/**
 * The columns the agent list's view reads (db/agents.ts VIEW_COLUMNS): a report reads only
 * those (an agent row has wide JSON columns it does not show).
 */
const AGENT_VIEW_COLUMNS: string[] = [...VIEW_COLUMNS]

/**
 * An object of those columns from a raw row. Generated once: an object literal of a fixed
 * shape is built several times faster than one filled key by key (a third of a 100,000-row
 * report). The names are the agents table's column names, checked as such.
 */
const agentFromRaw = (() => {
  if (!AGENT_VIEW_COLUMNS.every((c) => /^[a-z][a-z0-9_]*$/.test(c))) throw new Error(`unexpected agent column among ${AGENT_VIEW_COLUMNS.join(', ')}`)
  return new Function('r', `return { ${AGENT_VIEW_COLUMNS.map((c, i) => `${c}: r[${i}]`).join(', ')} }`) as (raw: unknown[]) => AgentRow
})()

function where(parts: string[]) {
  return parts.length ? parts.join(' AND ') : '1'
}

function eventConditions(f: EventFilter): { sql: string; params: unknown[] } {
  const parts = ['created_ms >= ?', 'created_ms < ?']
  const params: unknown[] = [f.from, f.to]
  if (f.maxSeverity !== undefined) {
    parts.push('severity <= ?')
    params.push(f.maxSeverity)
  }
  if (f.categories?.length) {
    parts.push(`category IN (${f.categories.map(() => '?').join(', ')})`)
    params.push(...f.categories)
  }
  if (f.source !== undefined) {
    parts.push("entity_id LIKE ? ESCAPE '\\'")
    params.push(contains(f.source))
  }
  if (f.globalSearch !== undefined) {
    // The fields GetEvents' GlobalSearch looks in (severityString is matched by name below).
    const columns = ['description', 'details', 'entity_id', 'event_code', 'category', 'hashtags', 'asset_name']
    const names = ['Emergency', 'Alert', 'Critical', 'Error', 'Warning', 'Notice', 'Informational', 'Debug']
    const bySeverity = names
      .map((n, i) => [n, i] as const)
      .filter(([n]) => n.toLowerCase().includes(f.globalSearch!.toLowerCase()))
      .map(([, i]) => i)
    const any = columns.map((c) => `${c} LIKE ? ESCAPE '\\'`)
    if (bySeverity.length) any.push(`severity IN (${bySeverity.join(', ')})`)
    parts.push(`(${any.join(' OR ')})`)
    params.push(...columns.map(() => contains(f.globalSearch!)))
  }
  return { sql: where(parts), params }
}

function auditConditions(f: AuditFilter): { sql: string; params: unknown[] } {
  const parts = ['created_ms >= ?', 'created_ms < ?']
  const params: unknown[] = [f.from, f.to]
  if (f.maxSeverity !== undefined) {
    parts.push('severity <= ?')
    params.push(f.maxSeverity)
  }
  if (f.categories?.length) {
    parts.push(`category IN (${f.categories.map(() => '?').join(', ')})`)
    params.push(...f.categories)
  }
  if (f.user !== undefined) {
    parts.push("user_name LIKE ? ESCAPE '\\'")
    params.push(contains(f.user))
  }
  if (f.outcomes?.length) {
    parts.push(`outcome IN (${f.outcomes.map(() => '?').join(', ')})`)
    params.push(...f.outcomes)
  }
  return { sql: where(parts), params }
}

function peripheralConditions(f: PeripheralFilter, extra: PeripheralExtra, search: AgentSearch): { sql: string; params: unknown[] } {
  const base = peripheralWhere(f, search)
  const parts = [base.sql]
  const params = [...base.params]
  if (extra.approved !== undefined) parts.push(`p.approved = ${extra.approved ? 1 : 0}`)
  if (extra.icons?.length) parts.push(`p.dev_icon IN (${extra.icons.map((i) => Math.trunc(i)).join(', ')})`)
  return { sql: parts.join(' AND '), params }
}

const bump = <K>(m: Map<K, number>, k: K, n: number) => m.set(k, (m.get(k) ?? 0) + n)

/** `cached`: the reports' statement cache (reports.ts), shared with the definitions' updates. */
export function dataStore(db: DB, search: AgentSearch, cached: ReturnType<typeof statementCache>) {
  // ---- data ----
  const agentRange = db.prepare<[], { lo: number | null; hi: number | null }>('SELECT min(id) AS lo, max(id) AS hi FROM agents')
  // Rows as arrays (far cheaper to read than objects), made into objects of the view's columns only.
  const agentsById = db.prepare<[string], unknown[]>(`SELECT ${AGENT_VIEW_COLUMNS.join(', ')} FROM agents WHERE id IN (SELECT value FROM json_each(?))`).raw(true)
  const peripheralsOfAgents = db.prepare<[string], PeripheralListRow>(
    `SELECT p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags
     FROM peripherals p JOIN agents a ON a.id = p.agent_id WHERE p.agent_id IN (SELECT value FROM json_each(?))`,
  )

  /** Steps over agent id ranges; `fn` gets [from, to). */
  async function byAgentRanges(fn: (from: number, to: number) => void, signal?: AbortSignal) {
    const range = agentRange.get()!
    if (range.lo === null || range.hi === null) return
    for (let from = range.lo; from <= range.hi; from += AGENT_STEP) {
      if (from > range.lo) await pause()
      signal?.throwIfAborted()
      fn(from, from + AGENT_STEP)
    }
  }

  /** Counts over days of [from, to): each day is one GROUP BY, with other work between them. */
  async function byDays(from: number, to: number, fn: (a: number, b: number) => void, signal?: AbortSignal) {
    const DAY = 86_400_000
    for (let a = from; a < to; a += DAY) {
      if (a > from) await pause()
      signal?.throwIfAborted()
      fn(a, Math.min(a + DAY, to))
    }
  }

  return {
    // ---- data ----
    /** The agents of `ids` in that order, with the columns the list's view reads, a page at a time (rows deleted meanwhile are left out). */
    async *agents(ids: readonly number[], signal?: AbortSignal): AsyncGenerator<AgentRow> {
      for (let i = 0; i < ids.length; i += AGENT_PAGE) {
        if (i > 0) await pause()
        signal?.throwIfAborted()
        const page = ids.slice(i, i + AGENT_PAGE)
        const byId = new Map<number, AgentRow>()
        for (const raw of agentsById.all(JSON.stringify(page))) {
          const row = agentFromRaw(raw)
          byId.set(row.id, row)
        }
        for (const id of page) {
          const row = byId.get(id)
          if (row) yield row
        }
      }
    },

    /** Counters of the agents matching the filter. */
    async agentTotals(f: AgentFilter, signal?: AbortSignal): Promise<AgentTotals> {
      const w = search.where(f)
      const sql = cached(
        `SELECT count(*) AS agents, coalesce(sum(connection_status = 'Connected'), 0) AS connected, coalesce(sum(operational_status = 'Armed'), 0) AS armed,
           coalesce(sum(has_unapproved), 0) AS withUnapproved, coalesce(sum(has_vulnerable), 0) AS withVulnerable,
           coalesce(sum(has_attack_tool), 0) AS withAttackTools, coalesce(sum(license_status = 'Activated'), 0) AS licenseActivated,
           coalesce(sum(not_approved), 0) AS unapprovedPeripherals
         FROM agents a WHERE a.id >= ? AND a.id < ? AND ${w.sql}`,
      )
      const t: AgentTotals = { agents: 0, connected: 0, armed: 0, withUnapproved: 0, withVulnerable: 0, withAttackTools: 0, licenseActivated: 0, unapprovedPeripherals: 0 }
      await byAgentRanges((from, to) => {
        const r = sql.get(from, to, ...w.params) as AgentTotals
        for (const k of Object.keys(t) as (keyof AgentTotals)[]) t[k] += r[k]
      }, signal)
      return t
    },

    /** Counters of the peripherals matching the filter. */
    async peripheralTotals(f: PeripheralFilter, extra: PeripheralExtra, signal?: AbortSignal): Promise<PeripheralTotals> {
      const w = peripheralConditions(f, extra, search)
      const sql = cached(
        `SELECT count(*) AS peripherals, count(DISTINCT p.agent_id) AS hosts, coalesce(sum(p.present), 0) AS present, coalesce(sum(p.approved), 0) AS approved,
           coalesce(sum(p.is_unapproved), 0) AS unapproved, coalesce(sum(p.is_vulnerable), 0) AS vulnerable, coalesce(sum(p.is_attack_tool), 0) AS attackTools
         FROM peripherals p WHERE p.agent_id >= ? AND p.agent_id < ? AND ${w.sql}`,
      )
      const t: PeripheralTotals = { peripherals: 0, hosts: 0, present: 0, approved: 0, unapproved: 0, vulnerable: 0, attackTools: 0 }
      // An agent is in one range only, so the distinct hosts of the ranges add up.
      await byAgentRanges((from, to) => {
        const r = sql.get(from, to, ...w.params) as PeripheralTotals
        for (const k of Object.keys(t) as (keyof PeripheralTotals)[]) t[k] += r[k]
      }, signal)
      return t
    },

    /**
     * The peripherals matching the filter, agent by agent in the order of `agentIds`
     * (each agent's by deviceID), read for a few hundred agents at a time.
     */
    async *peripherals(agentIds: readonly number[], f: PeripheralFilter, extra: PeripheralExtra, signal?: AbortSignal): AsyncGenerator<PeripheralListRow> {
      const w = peripheralConditions(f, extra, search)
      const filtered = w.sql !== '1'
      const sql = filtered
        ? cached(
            `SELECT p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags
             FROM peripherals p JOIN agents a ON a.id = p.agent_id WHERE p.agent_id IN (SELECT value FROM json_each(?)) AND ${w.sql}`,
          )
        : peripheralsOfAgents
      const step = 200
      for (let i = 0; i < agentIds.length; i += step) {
        if (i > 0) await pause()
        signal?.throwIfAborted()
        const page = agentIds.slice(i, i + step)
        const order = new Map(page.map((id, k) => [id, k]))
        const rows = (filtered ? sql.all(JSON.stringify(page), ...w.params) : sql.all(JSON.stringify(page))) as PeripheralListRow[]
        rows.sort((a, b) => order.get(a.agent_id)! - order.get(b.agent_id)! || (a.device_id < b.device_id ? -1 : a.device_id > b.device_id ? 1 : a.id - b.id))
        yield* rows
      }
    },

    /** Counts of the events of the filter: by severity, category and source. */
    async eventTotals(f: EventFilter, signal?: AbortSignal): Promise<DigestTotals> {
      const t: DigestTotals = { total: 0, bySeverity: new Map(), byCategory: new Map(), byOutcome: new Map(), byKey: new Map() }
      const { sql: w, params } = eventConditions({ ...f, from: 0, to: 0 })
      // A source is its asset where the event names one (an agent's events name it "HOST" before
      // its address is known, "HOST (ip)" after, and again after a move), shown as its latest
      // name; events without an asset count by their source text.
      const q = cached(
        `SELECT severity, category, CASE WHEN asset_key IS NULL THEN 'text:' || entity_id ELSE 'asset:' || asset_key END AS key,
                max(id) AS last, entity_id AS label, count(*) AS n
         FROM events WHERE ${w} GROUP BY 1, 2, 3`,
      )
      const sources = new Map<string, { n: number; last: number; label: string }>()
      await byDays(
        f.from,
        f.to,
        (a, b) => {
          for (const r of q.all(a, b, ...params.slice(2)) as { severity: number; category: string; key: string; last: number; label: string; n: number }[]) {
            t.total += r.n
            bump(t.bySeverity, r.severity, r.n)
            bump(t.byCategory, r.category, r.n)
            const s = sources.get(r.key)
            if (!s) sources.set(r.key, { n: r.n, last: r.last, label: r.label })
            else {
              s.n += r.n
              if (r.last > s.last) Object.assign(s, { last: r.last, label: r.label })
            }
          }
        },
        signal,
      )
      for (const s of sources.values()) bump(t.byKey, s.label, s.n)
      return t
    },

    /** The events of the filter, newest first, a page at a time. */
    async *events(f: EventFilter, signal?: AbortSignal): AsyncGenerator<EventRow> {
      const { sql: w, params } = eventConditions(f)
      const first = cached(`SELECT * FROM events WHERE ${w} ORDER BY created_ms DESC, id DESC LIMIT ${PAGE_ROWS}`)
      const next = cached(`SELECT * FROM events WHERE ${w} AND (created_ms, id) < (?, ?) ORDER BY created_ms DESC, id DESC LIMIT ${PAGE_ROWS}`)
      let page = first.all(...params) as EventRow[]
      while (page.length) {
        yield* page
        if (page.length < PAGE_ROWS) return
        await pause()
        signal?.throwIfAborted()
        const last = page[page.length - 1]
        page = next.all(...params, last.created_ms, last.id) as EventRow[]
      }
    },

    /** Counts of the audit records of the filter: by severity, category, outcome and user. */
    async auditTotals(f: AuditFilter, signal?: AbortSignal): Promise<DigestTotals> {
      const t: DigestTotals = { total: 0, bySeverity: new Map(), byCategory: new Map(), byOutcome: new Map(), byKey: new Map() }
      const { sql: w, params } = auditConditions({ ...f, from: 0, to: 0 })
      const q = cached(`SELECT severity, category, outcome, coalesce(user_name, '(unknown)') AS key, count(*) AS n FROM audit_trail WHERE ${w} GROUP BY 1, 2, 3, 4`)
      await byDays(
        f.from,
        f.to,
        (a, b) => {
          for (const r of q.all(a, b, ...params.slice(2)) as { severity: number; category: string; outcome: string; key: string; n: number }[]) {
            t.total += r.n
            bump(t.bySeverity, r.severity, r.n)
            bump(t.byCategory, r.category, r.n)
            bump(t.byOutcome, r.outcome, r.n)
            bump(t.byKey, r.key, r.n)
          }
        },
        signal,
      )
      return t
    },

    /** The audit records of the filter, newest first, a page at a time. */
    async *auditRecords(f: AuditFilter, signal?: AbortSignal): AsyncGenerator<AuditDigestRow> {
      const { sql: w, params } = auditConditions(f)
      const columns = 'id, created_ms, severity, category, user_name, source_ip, description, details, operation_id, outcome, asset_key, asset_name, asset_type'
      const first = cached(`SELECT ${columns} FROM audit_trail WHERE ${w} ORDER BY created_ms DESC, id DESC LIMIT ${PAGE_ROWS}`)
      const next = cached(`SELECT ${columns} FROM audit_trail WHERE ${w} AND (created_ms, id) < (?, ?) ORDER BY created_ms DESC, id DESC LIMIT ${PAGE_ROWS}`)
      let page = first.all(...params) as AuditDigestRow[]
      while (page.length) {
        yield* page
        if (page.length < PAGE_ROWS) return
        await pause()
        signal?.throwIfAborted()
        const last = page[page.length - 1]
        page = next.all(...params, last.created_ms, last.id) as AuditDigestRow[]
      }
    },
  }
}
