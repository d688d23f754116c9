// Agents on PostgreSQL: the list with its filters and sort orders, lookups by identifiers,
// deletion. The answers are SQLite's (db/agents.ts). Of what SQLite keeps to answer quickly,
// only each agent's JSON is kept here (per node, under the row's rev, which every page reads
// in its own statement: db/agent-views-kept.ts); list answers, counts of values and search
// dictionaries are not: every answer is read from the tables, so any number of nodes may
// share them. The count of every agent is kept by triggers in the database (migration 018).
import { type AgentFilter, type AgentIdentifiers, type AgentListRow, type AgentListView, type AgentRef, type AgentRow, type AgentStore, VIEW_COLUMNS } from '../../lib/agents/ports.js'
import { STREAM_CHUNK_CHARS, type Sort } from '../../lib/ports.js'
import type { CacheRegistry } from '../../lib/platform/cache.js'
import { keptAgentViews } from '../agent-views-kept.js'
import type { Postgres } from './connection.js'
import { refusedCounts, type Counts } from './counts.js'
import { Params, agentOrderBy, agentSource, agentWhere, countedPage, keptAgentCount, pageIds, pageRows, type PageQuery } from './agent-filters.js'

const viewColumns = VIEW_COLUMNS.map((c) => `a.${c}`).join(', ')
const REF_COLUMNS = 'a.id, a.rev, a.last_updated_ms'

/**
 * Agents read at a time for a streamed page: a round trip each, so more than SQLite's 100
 * (db/agents.ts VIEW_CHUNK_ROWS); the JSON still goes out in small chunks.
 */
export const VIEW_READ_ROWS = 500

/** These agents' rows of `columns`, in the order of `ids` (agents deleted meanwhile are left out). */
const byIdsInOrder = (columns: string) => `SELECT ${columns} FROM unnest($1::bigint[]) WITH ORDINALITY u (id, n) JOIN agents a ON a.id = u.id ORDER BY u.n`

/**
 * `shown`: how a list shows an agent (lib/agents/views.ts agentListView), as SQLite's
 * repository is given it. `countBudgetMs`: how long a text filter's count may run
 * (PRIME_PG_COUNT_BUDGET_MS; see countedPage). `caches`: where the agents' JSON and the
 * counts refused by their budget are kept.
 */
export function pgAgentsRepo(db: Postgres, shown: AgentListView, { countBudgetMs = 50, caches }: { countBudgetMs?: number; caches?: CacheRegistry } = {}) {
  const json = (rows: AgentListRow[]) => rows.map((r) => JSON.stringify(shown.view(r)))
  const kept = keptAgentViews(shown, 5000, caches)
  const refused = refusedCounts('agent-count-refusals', caches)
  const query = (f: AgentFilter, sort: Sort, limit: number, offset: number): PageQuery => {
    const p = new Params()
    return { source: agentSource(sort), where: agentWhere(f, p), p, order: agentOrderBy(sort), limit, offset, budgetMs: countBudgetMs, kept: keptAgentCount(f), refused }
  }

  /** A page as rows of `columns` (over `agents a`), with the counts. */
  const readPage = <R>(f: AgentFilter, sort: Sort, limit: number, offset: number, columns: string) => countedPage(db, query(f, sort, limit, offset), pageRows<R>, (x) => x.rows.length, columns)

  /** The agents of a page as a JSON array of AgentViewResource: those not kept at the rev the page read are read. */
  async function views(refs: readonly AgentRef[]): Promise<string> {
    const { json: known, missing } = kept.lookup(refs)
    const rows = missing ? await db.query<AgentListRow & { rev: number }>(`SELECT ${viewColumns}, a.rev FROM agents a WHERE a.id = ANY($1::bigint[])`, [missing]) : []
    return kept.fill(refs, known, rows)
  }

  return {
    byUuid: async (uuid: string) => (await db.one('SELECT * FROM agents WHERE uuid = lower($1)', [uuid])) as AgentRow | undefined,
    byId: async (id: number) => (await db.one('SELECT * FROM agents WHERE id = $1', [id])) as AgentRow | undefined,

    /** A page of the list: every agent count, the matching count, and the page's agents (see `views`). */
    list: (f: AgentFilter, sort: Sort, limit: number, offset: number) => readPage<AgentRef>(f, sort, limit, offset, REF_COLUMNS),

    /** A page's agents as the JSON array of AgentViewResource the list answers. */
    views,

    /**
     * A page of the list with its agents as that JSON array: one statement for the page (its
     * agents' ids, revs and check-in times), a second one only for agents not kept at those revs.
     */
    async page(f: AgentFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { json: string }> {
      const { rows, ...counts } = await readPage<AgentRef>(f, sort, limit, offset, REF_COLUMNS)
      return { ...counts, json: await views(rows) }
    },

    /** A large page as the ids of its agents in order, with the counts. */
    pageIds: (f: AgentFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { ids: number[] }> => countedPage(db, query(f, sort, limit, offset), pageIds, (x) => x.ids.length),

    /**
     * These agents as AgentViewResource JSON objects joined by commas, VIEW_READ_ROWS read
     * at a time, in chunks of about STREAM_CHUNK_CHARS (a streamed page). Agents deleted
     * meanwhile are left out.
     */
    async viewChunks(ids: readonly number[]): Promise<AsyncIterable<string>> {
      const read = (page: readonly number[]) => db.query<AgentListRow>(byIdsInOrder(viewColumns), [page])
      return (async function* () {
        for (let i = 0; i < ids.length; i += VIEW_READ_ROWS) {
          let text = ''
          for (const one of json(await read(ids.slice(i, i + VIEW_READ_ROWS)))) {
            text += (text ? ',' : '') + one
            if (text.length >= STREAM_CHUNK_CHARS) {
              yield text
              text = ''
            }
          }
          if (text) yield text
        }
      })()
    },

    /**
     * The agents (at most two: enough to tell "ambiguous") whose uuid, hostIdentifier and
     * localIpAddress equal every identifier given, case-insensitively (ASCII, as SQLite's NOCASE).
     */
    async matching(ids: AgentIdentifiers, hold?: boolean): Promise<AgentRow[]> {
      const p = new Params()
      const where: string[] = []
      if (ids.uuid != null) where.push(`uuid = lower(${p.add(ids.uuid)})`)
      if (ids.hostIdentifier != null) where.push(`lower(host_identifier COLLATE "C") = lower(${p.add(ids.hostIdentifier)}::text COLLATE "C")`)
      // Addresses are ASCII: the index of migration 003 on lower(local_ip_address) serves.
      if (ids.ipAddress != null) where.push(`lower(local_ip_address) = lower(${p.add(ids.ipAddress)})`)
      if (!where.length) return []
      return (await db.query(`SELECT * FROM agents WHERE ${where.join(' AND ')} LIMIT 2${hold ? ' FOR UPDATE' : ''}`, p.values)) as unknown as AgentRow[]
    },

    /** Deletes the agent; its peripherals, approvals, commands and logs go with it (foreign keys). */
    remove: async (id: number) => (await db.run('DELETE FROM agents WHERE id = $1', [id])) > 0,
  } satisfies AgentStore & Record<string, unknown>
}
export type PgAgentsRepo = ReturnType<typeof pgAgentsRepo>
