// The events agentless checking raises, and how audit records name its assets.
import type { AuditAsset } from '../platform/ports.js'
import type { EventInput } from '../events/ports.js'
import type { ConnectionRow, PollerRow } from './ports.js'
import { isIp } from './address.js'
import { eventOf } from '../event-codes.js'

export const agentlessEvents = {
  hostUnreachable: eventOf('hostUnreachable'),
  hostReachable: eventOf('hostReachable'),
  pollerOffline: eventOf('pollerOffline'),
  pollerOnline: eventOf('pollerOnline'),
}

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
