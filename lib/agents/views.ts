// Agent rows as the contract's answers: each shape is mapped here, once, for every path.
import type { components } from '../../generated/openapi.js'
import type { CommandRow } from '../../db/commands.js'
import { iso } from '../time.js'

type AgentCommand = components['schemas']['AgentCommand']

export function commandView(r: CommandRow, agentUuid: string): AgentCommand {
  return {
    commandId: r.id,
    uuid: agentUuid,
    type: r.type,
    parameters: JSON.parse(r.parameters),
    status: r.status,
    creationTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    createdBy: r.created_by,
    deliveredTime: r.delivered_ms === null ? null : iso(r.delivered_ms),
    completedTime: r.completed_ms === null ? null : iso(r.completed_ms),
    resultMessage: r.result_message,
    hasOutput: r.has_output === 1,
  }
}
