// The agents' list JSON kept per row and rev, for both backends (db/agents.ts, db/postgres/agents.ts).
// Each agent's JSON is kept under its id and the rev its row had when read, and serves again
// while a page reads that rev: reading the 38 columns of 50 rows and serializing them cost
// most of a page (SQLite: 0.2 and 0.1 ms at 100,000 agents; PostgreSQL: about a millisecond of
// the server's CPU, parsing the rows and writing them out), while a page's ids and revs come
// from its index walk at a fraction of that. The rev moves with every write of a listed
// column (a trigger on either backend; db/agents.ts REV_COLUMNS), and a page reads it in its
// own statement, so a kept JSON is never served for a row that has changed, whichever node
// or connection changed it. Check-ins that change nothing but the time leave it as kept: it
// is kept in two parts, either side of lastUpdated, which is put in from the page's own read.
import { cacheIn, type CacheRegistry } from '../lib/platform/cache.js'
import type { AgentListRow, AgentListView, AgentRef } from '../lib/agents/ports.js'

const LAST_UPDATED = ',"lastUpdated":'

export interface KeptViews {
  /** The page's agents' JSON where kept at the rev the page read, and the ids to read for the rest (null: none). */
  lookup(refs: readonly AgentRef[]): { json: (string | undefined)[]; missing: number[] | null }
  /**
   * `json` completed with the agents read (`rows`, each kept under the rev it was read at) and
   * joined as the page's JSON array. An agent deleted since the page was read is left out.
   */
  fill(refs: readonly AgentRef[], json: (string | undefined)[], rows: Iterable<AgentListRow & { rev: number }>): string
}

/** At most `max` agents' JSON (about 1.3 KB each), the least recently used first out, in `caches` when given. */
export function keptAgentViews(list: AgentListView, max = 5000, caches?: CacheRegistry): KeptViews {
  const kept = cacheIn<number, { rev: number; head: string; tail: string }>(caches, {
    name: 'agent-views',
    signal: 'a write of a listed column of the agent (its rev, moved by a trigger)',
    max,
    maxBytes: 16 * 1024 * 1024,
    sizeOf: (v) => 2 * (v.head.length + v.tail.length) + 48,
  })
  const time = list.lastUpdated
  return {
    lookup(refs) {
      const json: (string | undefined)[] = new Array(refs.length)
      let missing: number[] | null = null
      for (let i = 0; i < refs.length; i++) {
        const r = refs[i]
        const k = kept.get(r.id)
        if (k && k.rev === r.rev) json[i] = k.head + time(r.last_updated_ms) + k.tail
        else (missing ??= []).push(r.id)
      }
      return { json, missing }
    },
    fill(refs, json, rows) {
      const read = new Map<number, string>()
      for (const row of rows) {
        const whole = JSON.stringify({ ...list.view(row), lastUpdated: null })
        // A quote inside a JSON string is escaped, so only the key itself reads ,"lastUpdated":null
        const at = whole.indexOf(`${LAST_UPDATED}null,`) + LAST_UPDATED.length
        const entry = { rev: row.rev, head: whole.slice(0, at), tail: whole.slice(at + 4) }
        kept.set(row.id, entry)
        read.set(row.id, entry.head + time(row.last_updated_ms) + entry.tail)
      }
      for (let i = 0; i < refs.length; i++) json[i] ??= read.get(refs[i].id)
      return `[${json.filter((j) => j !== undefined).join(',')}]`
    },
  }
}
