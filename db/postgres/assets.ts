// Assets on PostgreSQL (db/assets.ts is SQLite's): every agent's host, every peripheral an
// agent reported, every agentless host, read from their source tables as three branches of
// one UNION ALL, the asset's fields SQL expressions over them. A page is one statement: the
// matching count, the page's keys in order and those rows in full.
//
// Text is compared as SQLite compares it: folded by lower() under the "C" collation (ASCII
// letters only, as SQLite's lower() and LIKE fold) and ordered by code point. Nothing is
// kept between calls (SQLite's repository keeps where each page ended, per process): a page
// further on is read by OFFSET, its cost growing with the offset.
import {
  ASSET_TYPES,
  type AssetCounts,
  type AssetField,
  type AssetQuery,
  type AssetRow,
  type AssetSort,
  type AssetStore,
  type Condition,
  HIERARCHY,
  HOST_ICONS,
  INDICATOR_RISK,
  type Source,
  type SwitchCounts,
  TEXT_FIELDS,
} from '../../lib/assets/ports.js'
import { SEVERITY_RISK, SOURCES } from '../assets.js'
import type { Postgres, Row } from './connection.js'
import { rowCount } from './agent-filters.js'

const R = INDICATOR_RISK
const HUB_ICON = 4
const sevRisk = (s: string) => `CASE ${s} ${SEVERITY_RISK.map((r, i) => `WHEN ${i} THEN ${r}`).join(' ')} ELSE 0 END`
/** An agent's risk: the expression of the index agents_asset_risk, written as there. */
const AGENT_RISK = `greatest(${sevRisk('a.severity')}, a.has_attack_tool * ${R.activeThreat}, a.has_vulnerable * ${R.cve}, a.has_unapproved * ${R.unapproved})`
/** A peripheral's risk without the rare models: the expression of the index peripherals_asset_risk. */
const PERIPHERAL_RISK = `greatest(${sevRisk('p.severity')}, p.is_attack_tool * CASE WHEN p.present = 1 THEN ${R.activeThreat} ELSE ${R.inactiveThreat} END, p.is_vulnerable * ${R.cve}, p.is_unapproved * ${R.unapproved})`
/** SQLite's lower(): ASCII letters only. */
const fold = (e: string) => `lower((${e}) COLLATE "C")`
const lowerAscii = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase())
const hexMac = (m: string) => fold(`replace(replace(replace(${m}, '-', ''), ':', ''), '.', '')`)
/** The agent's main adapter's MAC (the one carrying its address, else the first with one), as 12 hex digits. */
const AGENT_MAC = `coalesce((SELECT ${hexMac("n.value ->> 'macAddress'")} FROM jsonb_array_elements(a.nics_json::jsonb) WITH ORDINALITY n(value, k)
  WHERE coalesce(n.value ->> 'macAddress', '') <> ''
  ORDER BY coalesce(n.value -> 'ipAddresses' @> to_jsonb(a.local_ip_address), false) DESC, n.k LIMIT 1), 'dormant device')`
const PERIPHERAL_NAME = 'coalesce(p.gui_pid, p.caption, p.description, p.device_id)'
const PERIPHERAL_KEY = "p.agent_uuid || '/' || p.device_id"
const PERIPHERAL_VENDOR = 'coalesce(p.gui_vid, p.manufacturer)'

/** Each field of an asset, per source, as SQL over `a` (agents), `c` (agentless connections) or `p` (peripherals, with its agent `a`); `rare` the rare models' array. */
function fields(rare: string): Record<AssetField, Record<Source, string>> {
  const isRare = `((p.vid || ':' || p.pid) = ANY(${rare}))`
  return {
    key: { agent: 'a.uuid', host: 'c.id::text', peripheral: PERIPHERAL_KEY },
    name: { agent: 'a.host_identifier', host: 'c.name', peripheral: PERIPHERAL_NAME },
    mac: { agent: AGENT_MAC, host: "'dormant device'::text", peripheral: "'dormant device'::text" },
    ipAddress: { agent: 'a.local_ip_address', host: 'c.address', peripheral: 'a.local_ip_address' },
    model: { agent: 'a.pc_model', host: 'NULL::text', peripheral: 'coalesce(p.gui_pid, p.caption)' },
    vendor: { agent: 'a.manufacturer', host: 'NULL::text', peripheral: PERIPHERAL_VENDOR },
    statusDescription: {
      agent: 'a.display_status',
      host: 'c.status',
      peripheral: "CASE WHEN p.present = 0 THEN 'Disconnected' WHEN p.approved <> 0 THEN 'Approved' WHEN p.admin_status = 'Disapproved' THEN 'Disapproved' ELSE 'Not approved' END",
    },
    switchIp: { agent: 'a.switch_ip', host: 'NULL::text', peripheral: 'a.switch_ip' },
    switchName: { agent: 'a.switch_name', host: 'NULL::text', peripheral: 'a.switch_name' },
    portName: { agent: 'coalesce(a.port_name, a.port_id)', host: 'NULL::text', peripheral: 'coalesce(a.port_name, a.port_id)' },
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
      host: String(Math.max(SEVERITY_RISK[6], R.unsupervised)),
      peripheral: `greatest(${PERIPHERAL_RISK}, CASE WHEN ${isRare} THEN ${R.rare} ELSE 0 END)`,
    },
    isOnline: { agent: "(a.connection_status = 'Connected')::int", host: "(c.status = 'Reachable')::int", peripheral: "(p.present <> 0 AND a.connection_status = 'Connected')::int" },
    // The risks an administrator approved: every peripheral behind them is approved.
    isRiskAccepted: {
      agent: '((a.has_attack_tool <> 0 OR a.has_vulnerable <> 0) AND a.has_unapproved = 0)::int',
      host: '0',
      peripheral: `(p.approved <> 0 AND (p.is_attack_tool <> 0 OR p.is_vulnerable <> 0 OR ${isRare}))::int`,
    },
    firstSeen: { agent: 'a.enrolled_ms', host: 'c.created_ms', peripheral: 'p.first_seen_ms' },
    lastSeen: { agent: 'a.last_updated_ms', host: 'c.last_reachable_ms', peripheral: 'p.last_seen_ms' },
  }
}

const NULLABLE_SORTS: ReadonlySet<AssetField> = new Set(['ipAddress', 'model', 'vendor', 'switchIp', 'switchName', 'portName', 'lastSeen'])
const FROM: Record<Source, string> = {
  agent: 'agents a',
  host: 'agentless_connections c',
  peripheral: 'peripherals p JOIN agents a ON a.id = p.agent_id',
}
/** A peripheral's agent is joined only when its columns are read. */
const from = (src: Source, sql: string) => (src === 'peripheral' && !/\ba\./.test(sql) ? 'peripherals p' : FROM[src])
const ROWID: Record<Source, string> = { agent: 'a.id', host: 'c.id', peripheral: 'p.id' }

/**
 * Parameters written as tokens, numbered once the statement is whole: each value is bound
 * once however often it is written, and one the statement does not use (the rare models
 * when no peripheral is read) is not bound at all (PostgreSQL refuses a parameter whose
 * type it cannot tell).
 */
class Params {
  private readonly added: unknown[] = []
  add(v: unknown, cast: string): string {
    this.added.push(v)
    return `({{${this.added.length - 1}}}::${cast})`
  }
  /** The statement with its tokens as $1, $2… and their values. */
  bind(sql: string): [string, unknown[]] {
    const numbers = new Map<number, number>()
    const values: unknown[] = []
    const text = sql.replace(/\{\{(\d+)\}\}/g, (_, k: string) => {
      let n = numbers.get(Number(k))
      if (n === undefined) {
        values.push(this.added[Number(k)])
        n = values.length
        numbers.set(Number(k), n)
      }
      return `$${n}`
    })
    return [text, values]
  }
}

/** A field that is one constant for every asset of a source (a type, a host's icon): its value, else undefined. */
function constant(f: Record<AssetField, Record<Source, string>>, field: AssetField, src: Source): number | undefined {
  const e = f[field][src]
  return /^-?\d+$/.test(e) ? Number(e) : undefined
}

/** A condition on a constant, decided here: true or false; undefined when SQL must decide. */
function decide(f: Record<AssetField, Record<Source, string>>, c: Condition, src: Source): boolean | undefined {
  const v = TEXT_FIELDS.has(c.field) ? undefined : constant(f, c.field, src)
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

/** The groups with the conditions the source decides by itself taken out: [] when they always hold, null when they never do (the source is not read). */
function foldGroups(f: Record<AssetField, Record<Source, string>>, groups: Condition[][], src: Source): Condition[][] | null {
  if (groups.length === 0) return []
  const out: Condition[][] = []
  for (const and of groups) {
    const left: Condition[] = []
    let holds = true
    for (const c of and) {
      const d = decide(f, c, src)
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

/**
 * A condition as SQL. Positive ones are left as they are (a null rejects a row as false
 * does, and a bare LIKE can be read from a trigram index); negated ones hold on null, as
 * SQLite's `coalesce(NOT …, 1)` does.
 */
function renderCondition(e: string, c: Condition, p: Params): string {
  const text = TEXT_FIELDS.has(c.field)
  switch (c.op) {
    case 'in':
    case 'notIn': {
      const match = text
        ? `${fold(e)} = ANY(${p.add(
            c.values.map((v) => String(v).toLowerCase()),
            'text[]',
          )})`
        : `(${e}) = ANY(${p.add(c.values, 'bigint[]')})`
      return c.op === 'in' ? match : `(${match}) IS NOT TRUE`
    }
    case 'like':
    case 'notLike': {
      const patterns = c.values.map(lowerAscii)
      const match = patterns.length === 1 ? `${fold(e)} LIKE ${p.add(patterns[0], 'text')}` : `${fold(e)} LIKE ANY(${p.add(patterns, 'text[]')})`
      return c.op === 'like' ? match : `(${match}) IS NOT TRUE`
    }
    case 'gt':
      return `(${e}) > ${p.add(c.values[0], 'bigint')}`
    case 'ge':
      return `(${e}) >= ${p.add(c.values[0], 'bigint')}`
    case 'lt':
      return `(${e}) < ${p.add(c.values[0], 'bigint')}`
    case 'le':
      return `(${e}) <= ${p.add(c.values[0], 'bigint')}`
    case 'range':
    case 'notRange': {
      const within = `(${e}) >= ${p.add(c.values[0], 'bigint')} AND (${e}) < ${p.add(c.values[1], 'bigint')}`
      return c.op === 'range' ? `(${within})` : `(${within}) IS NOT TRUE`
    }
  }
}

function renderGroups(f: Record<AssetField, Record<Source, string>>, groups: Condition[][], src: Source, p: Params): string | undefined {
  if (groups.length === 0) return undefined
  return `(${groups.map((and) => `(${and.map((c) => renderCondition(f[c.field][src], c, p)).join(' AND ')})`).join(' OR ')})`
}

/**
 * The global search over an asset's name, key, address, model and vendor (and an agent's
 * adapters), each text as its trigram index reads it. A peripheral's model is its name when
 * it has one; its agent's address is matched by the agents' index and joined by id, so that
 * every part is read from an index.
 */
function renderSearch(src: Source, s: string): string {
  const like = (e: string) => `${fold(e)} LIKE ${s}`
  switch (src) {
    case 'agent':
      return `(${['a.host_identifier', 'a.uuid', 'a.local_ip_address', 'a.pc_model', 'a.manufacturer', 'a.nics_text'].map(like).join(' OR ')})`
    case 'host':
      return `(${['c.name', 'c.id::text', 'c.address'].map(like).join(' OR ')})`
    case 'peripheral':
      // Aliases of their own: the page's statement joins a peripheral's agent only when it reads it.
      return `p.id IN (SELECT p.id FROM peripherals p WHERE ${[PERIPHERAL_NAME, PERIPHERAL_KEY, PERIPHERAL_VENDOR].map(like).join(' OR ')}
        UNION ALL SELECT p2.id FROM agents a2 JOIN peripherals p2 ON p2.agent_id = a2.id WHERE ${like('a2.local_ip_address')})`
  }
}

/** Each source's WHERE (`true` for every row), or none for a source the query rules out. */
function renderWheres(f: Record<AssetField, Record<Source, string>>, q: AssetQuery, p: Params): Partial<Record<Source, string>> {
  const out: Partial<Record<Source, string>> = {}
  const search = q.search === undefined ? undefined : p.add(lowerAscii(q.search), 'text')
  for (const src of SOURCES) {
    const filters = foldGroups(f, q.filters, src)
    const system = foldGroups(f, q.system, src)
    if (!filters || !system) continue
    const parts = [renderGroups(f, filters, src, p), renderGroups(f, system, src, p), search === undefined ? undefined : renderSearch(src, search)]
    out[src] = parts.filter((x) => x !== undefined).join(' AND ') || 'true'
  }
  return out
}

/** The full row of each source, for the ids of `page` whose src is the source's index. */
function rowSql(f: Record<AssetField, Record<Source, string>>, src: Source, rare: string): string {
  const e = (name: AssetField) => f[name][src]
  const common = `page.s, page.src, page.id, '${src}'::text AS source, ${ROWID[src]} AS rowid, ${e('key')} AS key, ${e('name')} AS name,
    ${e('ipAddress')} AS ip_address, ${e('model')} AS model, ${e('vendor')} AS vendor, ${e('statusDescription')} AS status, ${e('type')} AS type,
    ${e('icon')} AS icon, ${e('hierarchy')} AS hierarchy, ${e('riskLevel')} AS risk_level, ${e('isOnline')} AS is_online,
    ${e('isRiskAccepted')} AS is_risk_accepted, ${e('firstSeen')} AS first_seen, ${e('lastSeen')} AS last_seen`
  const i = SOURCES.indexOf(src)
  switch (src) {
    case 'agent':
      return `SELECT ${common}, a.switch_ip, a.switch_name, a.port_id, a.port_name, a.host_identifier, a.uuid AS agent_uuid, a.nics_json,
        a.has_attack_tool, a.has_attack_tool AS attack_tool_present, a.has_vulnerable, NULL::text AS vulnerability, 0 AS is_rare, a.has_unapproved,
        0 AS is_unsupervised, NULL::text AS vid, NULL::text AS pid, NULL::text AS host_status
        FROM page JOIN agents a ON a.id = page.id WHERE page.src = ${i}`
    case 'host':
      return `SELECT ${common}, NULL::text AS switch_ip, NULL::text AS switch_name, NULL::text AS port_id, NULL::text AS port_name,
        NULL::text AS host_identifier, NULL::text AS agent_uuid, NULL::text AS nics_json, 0 AS has_attack_tool, 0 AS attack_tool_present,
        0 AS has_vulnerable, NULL::text AS vulnerability, 0 AS is_rare, 0 AS has_unapproved, 1 AS is_unsupervised, NULL::text AS vid,
        NULL::text AS pid, c.status AS host_status
        FROM page JOIN agentless_connections c ON c.id = page.id WHERE page.src = ${i}`
    case 'peripheral':
      return `SELECT ${common}, a.switch_ip, a.switch_name, a.port_id, a.port_name, a.host_identifier, a.uuid AS agent_uuid,
        NULL::text AS nics_json, p.is_attack_tool AS has_attack_tool, (p.is_attack_tool <> 0 AND p.present <> 0)::int AS attack_tool_present,
        p.is_vulnerable AS has_vulnerable, p.vulnerability, ((p.vid || ':' || p.pid) = ANY(${rare}))::int AS is_rare,
        p.is_unapproved AS has_unapproved, 0 AS is_unsupervised, p.vid, p.pid, a.connection_status AS host_status
        FROM page JOIN peripherals p ON p.id = page.id JOIN agents a ON a.id = p.agent_id WHERE page.src = ${i}`
  }
}

export interface PgAssetsRepo extends Omit<AssetStore, 'pageJson' | 'summary' | 'switches'> {
  /**
   * The matching count and a page of the matching assets' rows in order, in one statement
   * (SQLite's `page`, read there in a reader thread); the caller makes the views
   * (lib/assets/views.ts assetView) and their JSON.
   */
  page(q: AssetQuery, sort: AssetSort, limit: number, offset: number): Promise<{ filtered: number; rows: AssetRow[] }>
  /**
   * The counts of every asset by type, risk level, online and new: one statement per
   * source, yielding between them. An async generator where SQLite's is synchronous: a
   * caller that awaits each `next()` reads both.
   */
  summary(rare: string[], since: number): AsyncGenerator<void, AssetCounts[]>
  /** Switches the agents report, and those first reported since `since`: one statement (the server's work, not the event loop's). */
  switches(since: number): Promise<SwitchCounts>
}

export function pgAssetsRepo(db: Postgres): PgAssetsRepo {
  return {
    async total() {
      return (await db.value<number>(`SELECT ${rowCount('agents')} + ${rowCount('peripherals')} + (SELECT count(*) FROM agentless_connections)`)) as number
    },

    async page(q, sort, limit, offset) {
      const p = new Params()
      const rare = p.add(q.rare, 'text[]')
      const f = fields(rare)
      const wheres = renderWheres(f, q, p)
      const sources = SOURCES.filter((s) => wheres[s] !== undefined)
      if (sources.length === 0) return { filtered: 0, rows: [] }
      const dir = sort.direction === 'asc' ? 'ASC' : 'DESC'
      // Nulls last both ways, as SQLite's repository orders them; the other fields are never null.
      const nulls = NULLABLE_SORTS.has(sort.field) ? ' NULLS LAST' : ''
      const counts = sources.map((src) => `(SELECT count(*) FROM ${from(src, wheres[src]!)} WHERE ${wheres[src]})`)
      // Each branch's first offset + limit rows in its own order (its index's, where it has
      // one: first sight, risk), merged: the page is among them. A peripheral's risk is its
      // index's unless its model is rare: those of the rare models are a branch apart.
      const end = p.add(offset + limit, 'bigint')
      const branch = (value: string, i: number, id: string, fromSql: string, where: string) =>
        `(SELECT ${value} AS s, ${i} AS src, ${id} AS id FROM ${fromSql} WHERE ${where} ORDER BY s ${dir}${nulls}, id ${dir} LIMIT ${end})`
      const branches: string[] = []
      for (const src of sources) {
        const w = wheres[src]!
        const e = f[sort.field][src]
        const value = TEXT_FIELDS.has(sort.field) ? fold(e) : e
        const i = SOURCES.indexOf(src)
        if (src === 'peripheral' && sort.field === 'riskLevel' && q.rare.length > 0) {
          const isRare = `((p.vid || ':' || p.pid) = ANY(${rare}))`
          branches.push(branch(PERIPHERAL_RISK, i, 'p.id', from(src, w), `${w} AND NOT ${isRare}`))
          // The rare models' peripherals found by model (index peripherals_model), the exact test kept.
          const byModel = `(p.vid, p.pid) IN (SELECT split_part(m, ':', 1), split_part(m, ':', 2) FROM unnest(${rare}) m)`
          branches.push(branch(`greatest(${PERIPHERAL_RISK}, ${R.rare})`, i, 'p.id', from(src, w), `${w} AND ${byModel} AND ${isRare}`))
        } else {
          branches.push(branch(value, i, ROWID[src], from(src, w + value), w))
        }
      }
      const order = (t: string) => `${t}s ${dir}${nulls}, ${t}src ${dir}, ${t}id ${dir}`
      const sql = `WITH page AS (
          SELECT s, src, id FROM (${branches.join('\n UNION ALL ')}) u ORDER BY ${order('')} LIMIT ${p.add(limit, 'bigint')} OFFSET ${p.add(offset, 'bigint')}
        ), rows AS (${sources.map((src) => rowSql(f, src, rare)).join('\n UNION ALL ')})
        SELECT n.filtered, r.* FROM (SELECT ${counts.join(' + ')} AS filtered) n LEFT JOIN rows r ON true ORDER BY ${order('r.')}`
      const found = await db.query(...p.bind(sql))
      const filtered = found[0].filtered as number
      const rows = found
        .filter((r) => r.id !== null)
        .map((r: Row) => {
          const { filtered: _n, s: _s, src: _src, id: _id, ...row } = r
          return row as unknown as AssetRow
        })
      return { filtered, rows }
    },

    async *summary(rare, since) {
      const p = new Params()
      const f = fields(p.add(rare, 'text[]'))
      const s = p.add(since, 'bigint')
      const out: AssetCounts[] = []
      for (const [n, src] of SOURCES.entries()) {
        if (n > 0) yield
        const sql = `SELECT ${f.type[src]} AS type, ${f.riskLevel[src]} AS risk_level, ${f.isOnline[src]} AS is_online,
            (${f.firstSeen[src]} >= ${s})::int AS is_new, count(*) AS n
          FROM ${FROM[src]} GROUP BY 1, 2, 3, 4`
        out.push(...(await db.query<AssetCounts & Row>(...p.bind(sql))))
      }
      // One entry per combination, as SQLite's tally: the sources' types differ, so they never share one.
      return out
    },

    async switches(since: number) {
      // Switches agents report being plugged into: a switch is new when every agent behind it enrolled since.
      return (await db.one<{ n: number; fresh: number }>(
        `SELECT count(*) AS n, coalesce(sum((first >= $1::bigint)::int), 0) AS fresh FROM (
           SELECT min(enrolled_ms) AS first FROM agents WHERE coalesce(switch_ip, switch_name) IS NOT NULL
           GROUP BY lower(coalesce(switch_ip, '') COLLATE "C"), lower(coalesce(switch_name, '') COLLATE "C")) s`,
        [since],
      ))!
    },
  }
}
