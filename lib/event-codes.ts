// The one catalogue of every event code the server raises, beside the error catalogue
// (lib/errors.ts). Each entry is a row of the event-code table of `GetEvents` in the
// contract (tests/event-codes.test.ts holds them equal): `0xCCNNNN`, CC the category
// (11 USB, 21 Network, 31 Host, 41 System, 51 General). Severities are the syslog scale.
// `risk`: the risk notification kind the event raises (table risk_notification_kinds).
import type { EventInput } from './events/ports.js'

type Category = EventInput['category']

export interface EventCode {
  code: string
  category: Category
  severity: number
  /** The event's description. */
  description: string
  /** When it is raised, in one line. */
  meaning: string
  risk?: string
  /** False for a code carried only by messages never stored as events. */
  stored?: false
}

export const eventCodes = {
  peripheralNew: { code: '0x110001', category: 'USB', severity: 6, description: 'New USB peripheral detected', meaning: 'a check-in lists a peripheral never seen on that agent' },
  peripheralReconnected: { code: '0x110002', category: 'USB', severity: 6, description: 'USB peripheral reconnected', meaning: 'a peripheral seen before on that agent is present again' },
  peripheralDisconnected: { code: '0x110003', category: 'USB', severity: 6, description: 'USB peripheral disconnected', meaning: 'a peripheral of the last check-in is gone' },
  unapprovedOnArmed: {
    code: '0x110004',
    category: 'USB',
    severity: 4,
    description: 'Unapproved peripheral on an armed agent',
    risk: 'UnapprovedPeripheralOnArmedAgent',
    meaning: 'the agent becomes Armed while an unapproved peripheral is present (it is blocked from then on)',
  },
  attackTool: { code: '0x110005', category: 'USB', severity: 2, description: 'Known attack tool detected', risk: 'KnownAttackTool', meaning: "a peripheral's VID/PID is in the attack-tool catalogue" },
  vulnerable: {
    code: '0x110006',
    category: 'USB',
    severity: 4,
    description: 'Vulnerable peripheral detected',
    risk: 'VulnerablePeripheral',
    meaning: "a peripheral's VID/PID is in the vulnerable-device catalogue",
  },
  whitelistViolation: {
    code: '0x110007',
    category: 'USB',
    severity: 4,
    description: 'Whitelist violation',
    risk: 'WhitelistViolation',
    meaning: 'an unapproved peripheral is plugged in (new or again) while the agent is Armed (it is blocked)',
  },
  portAlert: { code: '0x210001', category: 'Network', severity: 4, description: 'Port alert', meaning: 'the switch port the host is connected to reports an alert or changes state' },
  locationChanged: {
    code: '0x210002',
    category: 'Network',
    severity: 5,
    description: 'Host network location changed',
    meaning: "the host's address, switch or switch port differs from its last check-in",
  },
  hostUnreachable: {
    code: '0x210003',
    category: 'Network',
    severity: 4,
    description: 'Agentless host unreachable',
    meaning: "an agentless connection's latest finished run turns Unreachable or Failed after Reachable (also when a run is abandoned)",
  },
  hostReachable: {
    code: '0x210004',
    category: 'Network',
    severity: 6,
    description: 'Agentless host reachable again',
    meaning: 'a run finds an agentless connection Reachable after Unreachable or Failed',
  },
  modeChanged: {
    code: '0x310001',
    category: 'Host',
    severity: 5,
    description: 'Agent mode changed',
    meaning: 'an agent reports a new mode (Armed/Free); `details` names the old and new mode and who asked',
  },
  disconnected: {
    code: '0x310002',
    category: 'Host',
    severity: 4,
    description: 'Agent disconnected',
    meaning: 'no check-in for the disconnect timeout (`PRIME_AGENT_DISCONNECT_SECONDS`, default 180 s)',
  },
  reconnected: { code: '0x310003', category: 'Host', severity: 6, description: 'Agent reconnected', meaning: 'a disconnected agent checks in again' },
  enrolled: { code: '0x310004', category: 'Host', severity: 6, description: 'Agent enrolled', meaning: 'an agent enrolls, or enrolls again (its credential is rotated)' },
  commandFailed: { code: '0x310005', category: 'Host', severity: 3, description: 'Agent command failed', meaning: 'an agent reports a queued command as Failed' },
  reEnrollmentHeld: {
    code: '0x310006',
    category: 'Host',
    severity: 3,
    description: 'Agent re-enrollment held for approval',
    risk: 'AgentReEnrollmentHeld',
    meaning: "an enrollment names an enrolled machine without proving the agent's current credential: held until an Administrator decides (`agents/agent/{agentId}/reenrollment`)",
  },
  alarmFailure: {
    code: '0x410001',
    category: 'System',
    severity: 3,
    description: 'Alarm delivery failure',
    meaning: 'a delivery to an alarm destination failed permanently or gave up after its retries',
  },
  pollerOffline: { code: '0x410002', category: 'System', severity: 4, description: 'Worker poller offline', meaning: 'an activated worker poller sent no heartbeat for three heartbeat intervals' },
  pollerOnline: { code: '0x410003', category: 'System', severity: 6, description: 'Worker poller online again', meaning: 'an offline activated worker poller sends a heartbeat again' },
  alarmTest: {
    code: '0x510001',
    category: 'General',
    severity: 6,
    description: 'Alarm destination test message',
    stored: false,
    meaning: 'never stored: the code carried by the test messages of `TestAlarmDests`',
  },
} as const satisfies Record<string, EventCode>

export type EventCodeName = keyof typeof eventCodes

/** What an event record takes from its code: code, severity, category and description. */
export function eventOf<N extends EventCodeName>(name: N): Pick<EventInput, 'code' | 'severity' | 'category' | 'description'> {
  const e: EventCode = eventCodes[name]
  return { code: e.code, severity: e.severity, category: e.category, description: e.description }
}
