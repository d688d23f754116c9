// A command as the gateway hands it to its agent.
import type { components } from '../../generated/openapi.js'
import { iso } from '../time.js'
import type { CommandRow } from './ports.js'

type Schemas = components['schemas']

export function gatewayCommandView(c: CommandRow): Schemas['GatewayCommand'] {
  let stored: Record<string, unknown> = {}
  try {
    stored = JSON.parse(c.parameters) ?? {}
  } catch {
    // parameters are written by the server; unreadable ones are sent as none
  }
  const parameters: Schemas['AgentCommandParameters'] = {}
  if (stored.mode === 'Armed' || stored.mode === 'Free') parameters.mode = stored.mode
  if (Array.isArray(stored.approvedPeripherals)) parameters.approvedPeripherals = stored.approvedPeripherals as Schemas['PeripheralModel'][]
  return { commandId: c.id, type: c.type, parameters, creationTime: iso(c.created_ms), creationTimeEpoch: c.created_ms }
}
