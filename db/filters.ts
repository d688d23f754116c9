// The agent filter (lib/agents/ports.ts, read from requests by lib/agents/filter.ts) as SQL
// conditions and searches, which the agent, peripheral, export and report repositories share.
import type { DB } from './index.js'
import { contains, statementCache, trigramTerm, type Condition, type Plan } from './sql.js'
import { TEXT_FIELDS, addIds, emptySet, idsOf, intersect, type AgentSet, type AgentTexts, type TextField } from './agent-texts.js'
import type { DateRange } from '../lib/ports.js'
import type { AgentFilter } from '../lib/agents/ports.js'

// ---- the agent filter as SQL conditions and searches ----

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
