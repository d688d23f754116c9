// The events the gateway raises about an agent and its peripherals, and how they read.
import type { EventInput } from '../events/ports.js'
import type { GatewayAgent, PresentPeripheral } from './ports.js'
import { eventOf } from '../event-codes.js'

/** The events the gateway raises (lib/event-codes.ts, the table of `getEvents` in the contract). */
export const agentEvents = {
  peripheralNew: eventOf('peripheralNew'),
  peripheralReconnected: eventOf('peripheralReconnected'),
  peripheralDisconnected: eventOf('peripheralDisconnected'),
  unapprovedOnArmed: eventOf('unapprovedOnArmed'),
  whitelistViolation: eventOf('whitelistViolation'),
  attackTool: eventOf('attackTool'),
  vulnerable: eventOf('vulnerable'),
  locationChanged: eventOf('locationChanged'),
  modeChanged: eventOf('modeChanged'),
  disconnected: eventOf('disconnected'),
  reconnected: eventOf('reconnected'),
  enrolled: eventOf('enrolled'),
  commandFailed: eventOf('commandFailed'),
  reEnrollmentHeld: eventOf('reEnrollmentHeld'),
}
type EventKind = keyof typeof agentEvents

export type AgentRef = Pick<GatewayAgent, 'uuid' | 'host_identifier' | 'local_ip_address'>

/** A peripheral as its events describe it. */
export type DescribedPeripheral = Omit<PresentPeripheral, 'approved' | 'is_attack_tool' | 'is_vulnerable' | 'catalogue_name'>

/** An agent as its events name it: `HOST (address)`. */
const entityOf = (agent: AgentRef) => (agent.local_ip_address ? `${agent.host_identifier} (${agent.local_ip_address})` : agent.host_identifier).slice(0, 300)

/**
 * An event about an agent, and about one of its peripherals when `p` is given. Every field
 * is written out, not spread from the kind: Node 20's V8 takes about a microsecond for each
 * property added after a spread, and a mass disconnect makes 100,000 of these.
 */
function agentEvent(kind: EventKind, agent: AgentRef, details: string, p: DescribedPeripheral | null, hashtags: string | null): EventInput {
  const e = agentEvents[kind]
  return {
    code: e.code,
    severity: e.severity,
    category: e.category,
    description: e.description,
    entityId: entityOf(agent),
    details,
    assetKey: agent.uuid,
    assetName: agent.host_identifier,
    hashtags,
    peripheralIcon: p ? p.dev_icon : -1,
    peripheralAssetId: p ? p.device_id : null,
    peripheralVid: p ? p.vid : null,
    peripheralPid: p ? p.pid : null,
  }
}

/** An event about an agent itself. */
export const hostEvent = (kind: EventKind, agent: AgentRef, details: string): EventInput => agentEvent(kind, agent, details, null, null)

const peripheralEvent = (kind: EventKind, agent: AgentRef, p: DescribedPeripheral, details: string, hashtags: string | null = null): EventInput => agentEvent(kind, agent, details, p, hashtags)

const deviceLabel = (p: Pick<PresentPeripheral, 'gui_vid' | 'gui_pid' | 'vid' | 'pid' | 'gui_serial'>, host: string) =>
  `${[p.gui_vid, p.gui_pid].filter(Boolean).join(' ') || 'Unknown device'} (VID ${p.vid}, PID ${p.pid}${p.gui_serial ? `, serial ${p.gui_serial}` : ''}) on ${host}`

export function removedEvent(ref: AgentRef, p: DescribedPeripheral): EventInput {
  return peripheralEvent('peripheralDisconnected', ref, p, `${deviceLabel(p, ref.host_identifier)} was removed.`)
}

export function modeEvent(ref: AgentRef, from: string, to: string, requestedBy: string | undefined | null): EventInput {
  return hostEvent('modeChanged', ref, `${ref.host_identifier} is now ${to} (was ${from}); ${requestedBy ? `requested by ${requestedBy}` : 'changed on the host'}.`)
}

export function unapprovedEvent(ref: AgentRef, p: PresentPeripheral): EventInput {
  return peripheralEvent('unapprovedOnArmed', ref, p, `${deviceLabel(p, ref.host_identifier)} is not approved; agent is Armed, device blocked.`, '#unapproved #armed')
}

export function presenceEvents(ref: AgentRef, p: PresentPeripheral, isNew: boolean, mode: string): EventInput[] {
  const label = deviceLabel(p, ref.host_identifier)
  const out = [peripheralEvent(isNew ? 'peripheralNew' : 'peripheralReconnected', ref, p, `${label}.`)]
  const stance = `agent is ${mode}${mode === 'Armed' && !p.approved ? ', device blocked' : ''}`
  if (p.is_attack_tool) out.push(peripheralEvent('attackTool', ref, p, `${label}: ${p.catalogue_name}; ${stance}.`, `#attack-tool #${mode.toLowerCase()}`))
  if (p.is_vulnerable) out.push(peripheralEvent('vulnerable', ref, p, `${label}: ${p.catalogue_name}; ${stance}.`, '#vulnerable'))
  // Plugged in while Armed and not approved: the agent blocks it (a whitelist violation).
  if (mode === 'Armed' && !p.approved) out.push(peripheralEvent('whitelistViolation', ref, p, `${label} is not approved; agent is Armed, device blocked.`, '#whitelist-violation #armed'))
  return out
}
