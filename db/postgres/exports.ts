// Reads for the streamed exports on PostgreSQL, answering what db/exports.ts answers. A file's
// rows come through a cursor (pg-cursor), a chunk at a time as the file is written, in one
// snapshot; the aggregation by model is one statement (no need to go a range of agents at a
// time, as SQLite does to let other requests run: the server runs them meanwhile).
import { createRequire } from 'node:module'
import type pg from 'pg'
import type { AgentFilter, AgentRow, ExportStore, PeripheralFilter, PeripheralModelRow } from '../../lib/agents/ports.js'
import type { Sort } from '../../lib/ports.js'
import type { Postgres } from './connection.js'
import { Params, agentOrderBy, agentSource, agentWhere, peripheralWhere } from './agent-filters.js'

/** Rows a cursor reads at a time. */
export const CURSOR_ROWS = 1000

/** What this module uses of pg-cursor (the package ships no types). */
interface CursorRead {
  read(rows: number): Promise<Record<string, unknown>[]>
  close(): Promise<void>
}
type CursorClass = new (text: string, values: unknown[], config: { types?: unknown }) => CursorRead & pg.Submittable
const Cursor = createRequire(import.meta.url)('pg-cursor') as CursorClass

/**
 * The rows of a statement, read through a cursor CURSOR_ROWS at a time as they are consumed.
 * The cursor holds a client of the pool from the first row until the last is read or the
 * consumer stops (return()). The pool's type parsers apply (int8 as numbers).
 */
export async function* cursorRows<R>(db: Postgres, sql: string, params: unknown[]): AsyncGenerator<R> {
  const client = await db.pool.connect()
  let broken: Error | undefined
  try {
    const cursor = client.query(new Cursor(sql, params, { types: db.pool.options.types }))
    try {
      for (;;) {
        const rows = await cursor.read(CURSOR_ROWS)
        if (!rows.length) break
        for (const row of rows) yield row as R
      }
    } finally {
      await cursor.close()
    }
  } catch (err) {
    broken = err as Error
    throw err
  } finally {
    client.release(broken)
  }
}

export function pgExportsRepo(db: Postgres) {
  return {
    /** The ids of the agents matching the filter, in the export's order. */
    async agentIds(f: AgentFilter, sort: Sort): Promise<number[]> {
      const p = new Params()
      const ids = await db.value<string[]>(`SELECT ARRAY(SELECT a.id FROM ${agentSource(sort).from} WHERE ${agentWhere(f, p)} ORDER BY ${agentOrderBy(sort)})`, p.values)
      return (ids ?? []).map(Number)
    },

    /** The agents of `ids` in order, through a cursor (rows deleted meanwhile are left out). */
    agents: async (ids: readonly number[]): Promise<AsyncIterable<AgentRow>> =>
      cursorRows<AgentRow>(db, 'SELECT a.* FROM unnest($1::bigint[]) WITH ORDINALITY u (id, n) JOIN agents a ON a.id = u.id ORDER BY u.n', [ids]),

    /**
     * The matching peripherals aggregated by model, most hosts first. Where a model's
     * peripherals differ in a name column, the greatest is taken (SQLite takes the greatest
     * within the first range of 2,000 agents that has one).
     */
    async peripheralModels(f: PeripheralFilter): Promise<PeripheralModelRow[]> {
      const p = new Params()
      return (await db.query(
        `SELECT p.vid, p.pid, max(p.gui_vid COLLATE "C") AS gui_vid, max(p.gui_pid COLLATE "C") AS gui_pid, max(p.dev_icon) AS dev_icon,
           count(DISTINCT p.agent_id) AS hosts, sum(p.present) AS present, sum(p.approved) AS approved,
           sum(p.is_unapproved) AS not_approved, max(p.is_attack_tool) AS is_attack_tool, max(p.is_vulnerable) AS is_vulnerable,
           max(p.vulnerability COLLATE "C") AS vulnerability, min(p.severity) AS severity
         FROM peripherals p
         WHERE ${peripheralWhere(f, p)}
         GROUP BY p.vid, p.pid
         ORDER BY hosts DESC, p.vid COLLATE "C", p.pid COLLATE "C"`,
        p.values,
      )) as unknown as PeripheralModelRow[]
    },
  } satisfies ExportStore
}
export type PgExportsRepo = ReturnType<typeof pgExportsRepo>
