// The events agentless checking raises, and how audit records name its assets.
import type { AuditAsset } from '../../db/audit.js'
import type { EventInput } from '../../db/events.js'
import type { ConnectionRow, PollerRow } from '../../db/agentless.js'
import { isIp } from './address.js'

export const agentlessEvents = {
  hostUnreachable: { code: '0x210003', severity: 4, category: 'Network', description: 'Agentless host unreachable' },
  hostReachable: { code: '0x210004', severity: 6, category: 'Network', description: 'Agentless host reachable again' },
  pollerOffline: { code: '0x410002', severity: 4, category: 'System', description: 'Worker poller offline' },
  pollerOnline: { code: '0x410003', severity: 6, category: 'System', description: 'Worker poller online again' },
} as const satisfies Record<string, Pick<EventInput, 'code' | 'severity' | 'category' | 'description'>>

type Connection = Pick<ConnectionRow, 'id' | 'name' | 'address'>

export function connectionEvent(kind: 'hostUnreachable' | 'hostReachable', c: Connection, details: string): EventInput {
  return { ...agentlessEvents[kind], entityId: `${c.name} (${c.address})`.slice(0, 300), details, assetKey: String(c.id), assetName: c.name }
}

export function pollerEvent(kind: 'pollerOffline' | 'pollerOnline', p: Pick<PollerRow, 'id' | 'name' | 'ip_address'>, details: string): EventInput {
  return { ...agentlessEvents[kind], entityId: (p.ip_address ? `${p.name} (${p.ip_address})` : p.name).slice(0, 300), details, assetKey: p.id, assetName: p.name }
}

export function connectionAsset(c: Pick<ConnectionRow, 'id' | 'name' | 'address' | 'protocol'>): AuditAsset {
  return {
    key: String(c.id),
    name: c.name,
    ipAddress: isIp(c.address) ? c.address.slice(0, 64) : null,
    type: 'AgentlessHost',
    subType: 'None',
    detail: c.protocol === 'WinRM' ? 'AgentlessWindowsHost' : 'AgentlessLinuxHost',
  }
}

export function pollerAsset(p: Pick<PollerRow, 'id' | 'name' | 'ip_address'>): AuditAsset {
  return { key: p.id, name: p.name, ipAddress: p.ip_address, type: 'WorkerPoller', subType: 'None', detail: 'Poller' }
}
