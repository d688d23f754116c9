// Peripherals across agents on PostgreSQL: the list with its filters and sort orders, one
// agent's peripherals, and the approvals. The answers are SQLite's (db/peripherals.ts); its
// kept answers and kept counts of values (row_counts, peripheral_texts.n) are not used here:
// a filter's count is read from the tables; every peripheral's, from table_rows (migration 018).
import type { PeripheralFilter, PeripheralListRow, PeripheralStore } from '../../lib/agents/ports.js'
import { STREAM_CHUNK_CHARS, type Sort } from '../../lib/ports.js'
import type { CacheRegistry } from '../../lib/platform/cache.js'
import type { Postgres } from './connection.js'
import { Params, countedPage, pageIds, pageRows, peripheralOrderBy, peripheralWhere, type PageQuery, type PageSource } from './agent-filters.js'
import { refusedCounts, type Counts } from './counts.js'
import { VIEW_READ_ROWS } from './agents.js'

const FROM = 'peripherals p JOIN agents a ON a.id = p.agent_id'
const COLUMNS = 'p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags'
const PERIPHERALS: PageSource = { table: 'peripherals', alias: 'p', from: FROM, id: 'p.id' }

const rowsOf = (rows: Record<string, unknown>[]) => rows as unknown as PeripheralListRow[]

/** `countBudgetMs`: how long a text filter's count may run (PRIME_PG_COUNT_BUDGET_MS; see countedPage). `caches`: where the refused counts are kept. */
export function pgPeripheralsRepo(db: Postgres, { countBudgetMs = 50, caches }: { countBudgetMs?: number; caches?: CacheRegistry } = {}) {
  const refused = refusedCounts('peripheral-count-refusals', caches)
  const query = (f: PeripheralFilter, sort: Sort, limit: number, offset: number): PageQuery => {
    const p = new Params()
    return { source: PERIPHERALS, where: peripheralWhere(f, p), p, order: peripheralOrderBy(sort), limit, offset, budgetMs: countBudgetMs, refused }
  }
  return {
    /** A page of the list: every peripheral count, the matching count, and the page's rows. */
    list: (f: PeripheralFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { rows: PeripheralListRow[] }> =>
      countedPage(db, query(f, sort, limit, offset), pageRows<PeripheralListRow>, (x) => x.rows.length, COLUMNS),

    /** A large page as the ids of its peripherals in order, with the counts. */
    pageIds: (f: PeripheralFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { ids: number[] }> => countedPage(db, query(f, sort, limit, offset), pageIds, (x) => x.ids.length),

    /**
     * These peripherals as JSON objects of `view` (lib/peripherals/views.ts) joined by commas,
     * in chunks of about STREAM_CHUNK_CHARS (a streamed page). Peripherals deleted meanwhile
     * are left out.
     */
    async viewChunks(ids: readonly number[], view: (r: PeripheralListRow) => unknown): Promise<AsyncIterable<string>> {
      const read = async (page: readonly number[]) => rowsOf(await db.query(`SELECT ${COLUMNS} FROM unnest($1::bigint[]) WITH ORDINALITY u (id, n) JOIN ${FROM} ON p.id = u.id ORDER BY u.n`, [page]))
      return (async function* () {
        for (let i = 0; i < ids.length; i += VIEW_READ_ROWS) {
          let text = ''
          for (const row of await read(ids.slice(i, i + VIEW_READ_ROWS))) {
            text += (text ? ',' : '') + JSON.stringify(view(row))
            if (text.length >= STREAM_CHUNK_CHARS) {
              yield text
              text = ''
            }
          }
          if (text) yield text
        }
      })()
    },

    /** One agent's peripherals: present ones first, each most recently seen first. */
    ofAgent: async (agentId: number, limit = 2048) =>
      rowsOf(await db.query(`SELECT ${COLUMNS} FROM ${FROM} WHERE p.agent_id = $1 ORDER BY p.present DESC, p.last_seen_ms DESC, p.id DESC LIMIT $2`, [agentId, limit])),

    /** The models (VID/PID) the agent reported present at its last check-in. */
    presentModels: (agentId: number) =>
      db.query<{ vid: string; pid: string }>('SELECT vid, pid FROM peripherals WHERE agent_id = $1 AND present = 1 GROUP BY vid, pid ORDER BY vid COLLATE "C", pid COLLATE "C"', [agentId]),

    /** Whether the agent ever reported a peripheral of this model. */
    hasModel: async (agentId: number, vid: string, pid: string) =>
      (await db.value<boolean>('SELECT EXISTS (SELECT 1 FROM peripherals WHERE agent_id = $1 AND vid = $2 AND pid = $3)', [agentId, vid, pid])) === true,

    /** The name of the known attack tool with this VID/PID, if the catalogue has one. */
    attackToolName: (vid: string, pid: string) => db.value<string>("SELECT name FROM catalogue WHERE kind = 'KnownAttackTool' AND vid = $1 AND pid = $2", [vid, pid]),

    /** Records a decision on a model for an agent; answers whether it changed anything. */
    async setApproval(agentId: number, vid: string, pid: string, status: 'Approved' | 'Disapproved', now: number, by: string): Promise<boolean> {
      // One statement: a decision equal to the one recorded changes nothing, not even its time.
      const changed = await db.run(
        `INSERT INTO approvals (agent_id, vid, pid, status, changed_ms, changed_by) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (agent_id, vid, pid) DO UPDATE SET status = excluded.status, changed_ms = excluded.changed_ms, changed_by = excluded.changed_by
         WHERE approvals.status <> excluded.status`,
        [agentId, vid, pid, status, now, by],
      )
      return changed > 0
    },

    /** The agent's whitelist: every model approved for it. */
    whitelist: (agentId: number) =>
      db.query<{ vid: string; pid: string }>('SELECT vid, pid FROM approvals WHERE agent_id = $1 AND status = \'Approved\' ORDER BY vid COLLATE "C", pid COLLATE "C"', [agentId]),
  } satisfies PeripheralStore
}
export type PgPeripheralsRepo = ReturnType<typeof pgPeripheralsRepo>
