// Commands queued for agents (delivered and completed by the agent gateway).
import type { DB } from './index.js'
import type { CommandParameters, CommandRow, CommandType } from '../lib/agents/ports.js'

// Open commands of one agent stay few (newer ones supersede or reuse older ones), but an
// agent that never answers could pile up Delivered ones until they time out.
const MAX_OPEN_SHOWN = 280
const FINISHED_SHOWN = 20

export function commandsRepo(db: DB) {
  const insert = db.prepare<{ agent: number; type: string; parameters: string; now: number; by: string }>(
    "INSERT INTO agent_commands (agent_id, type, parameters, status, created_ms, created_by) VALUES (:agent, :type, :parameters, 'Pending', :now, :by)",
  )
  const open = db.prepare<[number, string], CommandRow>("SELECT * FROM agent_commands WHERE agent_id = ? AND status IN ('Pending', 'Delivered') AND type = ? ORDER BY id DESC")
  const pendingIds = db.prepare<[number], { id: number; type: CommandType }>("SELECT id, type FROM agent_commands WHERE agent_id = ? AND status = 'Pending' ORDER BY id")
  const pendingOfType = db.prepare<[number, string], { id: number; type: CommandType }>("SELECT id, type FROM agent_commands WHERE agent_id = ? AND status = 'Pending' AND type = ? ORDER BY id")
  const cancel = db.prepare<[number, string, number]>("UPDATE agent_commands SET status = 'Cancelled', completed_ms = ?, result_message = ? WHERE id = ? AND status = 'Pending'")
  const openOfAgent = db.prepare<[number, number], CommandRow>("SELECT * FROM agent_commands WHERE agent_id = ? AND status IN ('Pending', 'Delivered') ORDER BY id DESC LIMIT ?")
  const finishedOfAgent = db.prepare<[number, number], CommandRow>("SELECT * FROM agent_commands WHERE agent_id = ? AND status IN ('Succeeded', 'Failed', 'Cancelled') ORDER BY id DESC LIMIT ?")
  const latestLogs = db.prepare<[number], { created_ms: number; content: string }>('SELECT created_ms, content FROM agent_debug_logs WHERE agent_id = ? ORDER BY id DESC LIMIT 1')

  function cancelAll(rows: { id: number }[], now: number, reason: string): number[] {
    return rows.filter((r) => cancel.run(now, reason.slice(0, 1000), r.id).changes > 0).map((r) => r.id)
  }

  return {
    queue(agentId: number, type: CommandType, parameters: CommandParameters, now: number, by: string): number {
      return Number(insert.run({ agent: agentId, type, parameters: JSON.stringify(parameters), now, by: by.slice(0, 100) }).lastInsertRowid)
    },
    /** The agent's commands of a type still Pending or Delivered, newest first. */
    open: (agentId: number, type: CommandType) => open.all(agentId, type),
    /** Cancels the agent's Pending commands (of one type, or all); answers their ids. */
    cancelPending(agentId: number, now: number, reason: string, type?: CommandType): number[] {
      return cancelAll(type ? pendingOfType.all(agentId, type) : pendingIds.all(agentId), now, reason)
    },
    /** The ids and types of the agent's Pending commands. */
    pending: (agentId: number) => pendingIds.all(agentId),
    /** What the agent detail shows: open commands, then the latest finished ones, newest first. */
    ofAgent: (agentId: number) => [...openOfAgent.all(agentId, MAX_OPEN_SHOWN), ...finishedOfAgent.all(agentId, FINISHED_SHOWN)],
    /** The agent's most recently collected debug logs. */
    latestDebugLogs: (agentId: number) => latestLogs.get(agentId),
  }
}
export type CommandsRepo = ReturnType<typeof commandsRepo>
