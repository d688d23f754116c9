// Commands queued for agents on PostgreSQL (delivered and completed by the agent gateway):
// the same methods and answers as db/commands.ts.
import type { CommandsRepo } from '../commands.js'
import type { CommandParameters, CommandRow, CommandType } from '../../lib/agents/ports.js'
import type { Async } from '../unit-of-work.js'
import type { Postgres } from './connection.js'

// As db/commands.ts: open commands of one agent stay few, finished ones are shown up to 20.
const MAX_OPEN_SHOWN = 280
const FINISHED_SHOWN = 20

type Row = CommandRow & Record<string, unknown>

export function pgCommandsRepo(db: Postgres) {
  const port = {
    queue: async (agentId: number, type: CommandType, parameters: CommandParameters, now: number, by: string) =>
      (await db.value<number>(`INSERT INTO agent_commands (agent_id, type, parameters, status, created_ms, created_by) VALUES ($1, $2, $3, 'Pending', $4, $5) RETURNING id`, [
        agentId,
        type,
        JSON.stringify(parameters),
        now,
        by.slice(0, 100),
      ])) as number,
    /** The agent's commands of a type still Pending or Delivered, newest first. */
    open: (agentId: number, type: CommandType) =>
      db.query<Row>(`SELECT * FROM agent_commands WHERE agent_id = $1 AND status IN ('Pending', 'Delivered') AND type = $2 ORDER BY id DESC`, [agentId, type]),
    /** Cancels the agent's Pending commands (of one type, or all); answers their ids, in id order. */
    async cancelPending(agentId: number, now: number, reason: string, type?: CommandType): Promise<number[]> {
      const rows = await db.query<{ id: number }>(
        `WITH cancelled AS (
           UPDATE agent_commands SET status = 'Cancelled', completed_ms = $2, result_message = $3
           WHERE agent_id = $1 AND status = 'Pending' AND ($4::text IS NULL OR type = $4) RETURNING id
         ) SELECT id FROM cancelled ORDER BY id`,
        [agentId, now, reason.slice(0, 1000), type ?? null],
      )
      return rows.map((r) => r.id)
    },
    /** The ids and types of the agent's Pending commands. */
    pending: (agentId: number) => db.query<{ id: number; type: CommandType }>(`SELECT id, type FROM agent_commands WHERE agent_id = $1 AND status = 'Pending' ORDER BY id`, [agentId]),
    /** What the agent detail shows: open commands, then the latest finished ones, newest first. */
    async ofAgent(agentId: number): Promise<CommandRow[]> {
      const rows = await db.query<Row & { part: number }>(
        `(SELECT *, 0 AS part FROM agent_commands WHERE agent_id = $1 AND status IN ('Pending', 'Delivered') ORDER BY id DESC LIMIT $2)
         UNION ALL
         (SELECT *, 1 AS part FROM agent_commands WHERE agent_id = $1 AND status IN ('Succeeded', 'Failed', 'Cancelled') ORDER BY id DESC LIMIT $3)
         ORDER BY part, id DESC`,
        [agentId, MAX_OPEN_SHOWN, FINISHED_SHOWN],
      )
      return rows.map(({ part: _, ...row }) => row)
    },
    /** The agent's most recently collected debug logs. */
    latestDebugLogs: (agentId: number) => db.one<{ created_ms: number; content: string }>('SELECT created_ms, content FROM agent_debug_logs WHERE agent_id = $1 ORDER BY id DESC LIMIT 1', [agentId]),
  }
  return port satisfies Async<CommandsRepo>
}
export type PgCommandsRepo = ReturnType<typeof pgCommandsRepo>
