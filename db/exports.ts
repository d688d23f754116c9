// Reads for the streamed exports. A better-sqlite3 iterator keeps the connection busy
// while it is open, so a file that takes seconds to download must not hold one: the
// order is read once as a list of ids (8 bytes a row), then the rows in pages of 250,
// and other requests run between pages.
import type { DB } from './index.js'
import type { AgentSearch } from './filters.js'
import type { AgentFilter, AgentRow, PeripheralFilter, PeripheralModelRow } from '../lib/agents/ports.js'
import type { Sort } from '../lib/ports.js'
import { agentOrderBy } from './agents.js'
import { statementCache } from './sql.js'
import { peripheralWhere } from './peripherals.js'
import { setImmediate as nextTurn } from 'node:timers/promises'

// A page's rows, views and CSV lines are one task of the event loop: 1,000 agents held it
// 90-140 ms, 250 hold it under 50 ms, and the whole export takes no longer.
const PAGE_ROWS = 250
// Agents per step of the aggregated peripheral export (about 20,000 peripherals).
const AGGREGATE_AGENTS = 2000

/** The rows of `ids` in their order, fetched a page at a time; rows deleted meanwhile are left out. */
export async function* inPages<T extends { id: number }>(ids: readonly number[], fetch: (ids: number[]) => T[]): AsyncGenerator<T> {
  for (let i = 0; i < ids.length; i += PAGE_ROWS) {
    if (i > 0) await nextTurn()
    const page = ids.slice(i, i + PAGE_ROWS)
    const byId = new Map(fetch(page).map((r) => [r.id, r]))
    for (const id of page) {
      const row = byId.get(id)
      if (row) yield row
    }
  }
}

export function exportsRepo(db: DB, search: AgentSearch) {
  const cached = statementCache(db, 64)
  const agentsById = db.prepare<[string], AgentRow>('SELECT * FROM agents WHERE id IN (SELECT value FROM json_each(?))')
  const agentRange = db.prepare<[], { lo: number | null; hi: number | null }>('SELECT min(id) AS lo, max(id) AS hi FROM agents')
  return {
    /** The ids of the agents matching the filter, in the export's order. */
    agentIds(f: AgentFilter, sort: Sort): number[] {
      const where = search.where(f)
      return cached(`SELECT a.id FROM agents a WHERE ${where.sql} ORDER BY ${agentOrderBy(sort)}`)
        .pluck()
        .all(...where.params) as number[]
    },

    /** The matching agents, a page at a time. */
    agents: (ids: readonly number[]) => inPages(ids, (page) => agentsById.all(JSON.stringify(page))),

    /**
     * The matching peripherals aggregated by model, most hosts first. A pass over a million
     * peripherals takes seconds, so it goes a range of agents at a time, letting other
     * requests run between ranges: every count is a sum over the ranges, hosts included
     * (an agent is in one range only). The models are few enough to be held.
     */
    async peripheralModels(f: PeripheralFilter): Promise<PeripheralModelRow[]> {
      const where = peripheralWhere(f, search)
      const range = agentRange.get()!
      const partial = cached(
        `SELECT p.vid, p.pid, max(p.gui_vid) AS gui_vid, max(p.gui_pid) AS gui_pid, max(p.dev_icon) AS dev_icon,
           count(DISTINCT p.agent_id) AS hosts, sum(p.present) AS present, sum(p.approved) AS approved,
           sum(p.is_unapproved) AS not_approved, max(p.is_attack_tool) AS is_attack_tool, max(p.is_vulnerable) AS is_vulnerable,
           max(p.vulnerability) AS vulnerability, min(p.severity) AS severity
         FROM agents a JOIN peripherals p ON p.agent_id = a.id
         WHERE a.id >= ? AND a.id < ? AND ${where.sql}
         GROUP BY p.vid, p.pid`,
      )
      const models = new Map<string, PeripheralModelRow>()
      for (let from = range.lo ?? 0; from <= (range.hi ?? -1); from += AGGREGATE_AGENTS) {
        if (from > (range.lo ?? 0)) await nextTurn()
        for (const r of partial.all(from, from + AGGREGATE_AGENTS, ...where.params) as PeripheralModelRow[]) {
          const key = `${r.vid}:${r.pid}`
          const m = models.get(key)
          if (!m) {
            models.set(key, r)
            continue
          }
          m.gui_vid ??= r.gui_vid
          m.gui_pid ??= r.gui_pid
          m.vulnerability ??= r.vulnerability
          m.dev_icon = Math.max(m.dev_icon, r.dev_icon)
          m.hosts += r.hosts
          m.present += r.present
          m.approved += r.approved
          m.not_approved += r.not_approved
          m.is_attack_tool = Math.max(m.is_attack_tool, r.is_attack_tool)
          m.is_vulnerable = Math.max(m.is_vulnerable, r.is_vulnerable)
          m.severity = Math.min(m.severity, r.severity)
        }
      }
      return [...models.values()].sort((a, b) => b.hosts - a.hosts || a.vid.localeCompare(b.vid) || a.pid.localeCompare(b.pid))
    },
  }
}
export type ExportsRepo = ReturnType<typeof exportsRepo>
