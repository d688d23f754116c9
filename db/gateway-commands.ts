// The agent gateway's commands: their delivery to an agent, their results, the mode and
// configuration they set, and the debug logs they fetch.
import type { DB } from './index.js'
import type { CommandRow } from '../lib/gateway/ports.js'

export function commandStore(db: DB) {
  const pending = db.prepare<[number, number], CommandRow>(`SELECT * FROM agent_commands WHERE agent_id = ? AND status = 'Pending' ORDER BY id LIMIT ?`)
  const hasPending = db.prepare<[number], { one: number }>(`SELECT 1 AS one FROM agent_commands WHERE agent_id = ? AND status = 'Pending' LIMIT 1`)
  const pendingOf = db.prepare<[string], number>(`SELECT DISTINCT agent_id FROM agent_commands WHERE agent_id IN (SELECT value FROM json_each(?)) AND status = 'Pending'`).pluck()
  const deliver = db.prepare<[number, number]>(`UPDATE agent_commands SET status = 'Delivered', delivered_ms = ? WHERE id = ? AND status = 'Pending'`)
  const command = db.prepare<[number], CommandRow>('SELECT * FROM agent_commands WHERE id = ?')
  const complete = db.prepare<{ id: number; status: string; now: number; message: string | null; hasOutput: number }>(
    `UPDATE agent_commands SET status = @status, completed_ms = @now, result_message = @message, has_output = @hasOutput WHERE id = @id`,
  )
  const requestedMode = db.prepare<[number, string], { created_by: string }>(
    `SELECT created_by FROM agent_commands WHERE agent_id = ? AND type = 'SetMode' AND json_extract(parameters, '$.mode') = ?
       AND status IN ('Pending', 'Delivered', 'Succeeded') ORDER BY id DESC LIMIT 1`,
  )
  const setMode = db.prepare<[string, number, number]>('UPDATE agents SET operational_status = ?, last_configured_ms = ? WHERE id = ?')
  const configured = db.prepare<[number, number]>('UPDATE agents SET last_configured_ms = ? WHERE id = ?')
  const addDebugLog = db.prepare<[number, number, number, string]>('INSERT INTO agent_debug_logs (agent_id, command_id, created_ms, content) VALUES (?, ?, ?, ?)')
  const keepDebugLogs = db.prepare<[number, number, number]>(
    'DELETE FROM agent_debug_logs WHERE agent_id = ? AND id NOT IN (SELECT id FROM agent_debug_logs WHERE agent_id = ? ORDER BY id DESC LIMIT ?)',
  )

  return {
    hasPendingCommands: (agentId: number) => hasPending.get(agentId) !== undefined,
    /** Those of these agents with a pending command. */
    withPendingCommands: (agentIds: number[]) => pendingOf.all(JSON.stringify(agentIds)),
    /** Hands the oldest `limit` pending commands over; `more`: others wait after them. */
    deliverPending(agentId: number, limit: number, now: number): { commands: CommandRow[]; more: boolean } {
      const rows = pending.all(agentId, limit + 1)
      const commands = rows.slice(0, limit)
      for (const c of commands) deliver.run(now, c.id)
      return { commands, more: rows.length > limit }
    },
    command: (id: number) => command.get(id),
    completeCommand: (c: { id: number; status: 'Succeeded' | 'Failed'; now: number; message: string | null; hasOutput: number }) => complete.run(c),
    /** Who asked for the mode an agent now reports, when a SetMode command did. */
    modeRequestedBy: (agentId: number, mode: string) => requestedMode.get(agentId, mode)?.created_by,
    setMode: (agentId: number, mode: string, now: number) => setMode.run(mode, now, agentId),
    setConfigured: (agentId: number, now: number) => configured.run(now, agentId),
    addDebugLog(agentId: number, commandId: number, now: number, content: string, keep: number) {
      addDebugLog.run(agentId, commandId, now, content)
      keepDebugLogs.run(agentId, agentId, keep)
    },
  }
}
