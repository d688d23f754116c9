// Agent rows as the contract's answers: each shape is mapped here, once, for every path.
import type { components } from '../../generated/openapi.js'
import type { AuditAsset } from '../../db/audit.js'
import type { AgentListRow, AgentListView } from '../../db/agents.js'
import type { CommandRow } from '../../db/commands.js'
import type { HeldReEnrollment } from '../../db/gateway.js'
import { iso } from '../time.js'

type Schemas = components['schemas']
type AgentCommand = Schemas['AgentCommand']
type AgentView = Schemas['AgentViewResource']

const isoOrNull = (ms: number | null) => (ms === null ? null : iso(ms))

/** An agent as the lists show it (AgentViewResource). */
export function agentView(r: AgentListRow): AgentView {
  return {
    uuid: r.uuid,
    hostIdentifier: r.host_identifier,
    localIpAddress: r.local_ip_address,
    osVersion: r.os_version,
    pcModel: r.pc_model,
    nicsText: r.nics_text,
    operationalStatus: r.operational_status,
    connectionStatus: r.connection_status,
    displayStatusCombined: r.display_status,
    approvedAndPresent: r.approved_and_present,
    approvedAndDisconnected: r.approved_and_disconnected,
    notApproved: r.not_approved,
    latestEventText: r.latest_event_text,
    latestMinus1EventText: r.latest_minus1_event_text,
    latestMinus2EventText: r.latest_minus2_event_text,
    serviceVersion: r.service_version,
    kbDriverVersion: r.kb_driver_version,
    lastUpdated: isoOrNull(r.last_updated_ms),
    lastConfiguered: isoOrNull(r.last_configured_ms),
    licenseStatus: r.license_status,
    expirationDate: isoOrNull(r.expiration_ms),
    licenseAccountId: r.license_account_id,
    licenseAccountName: r.license_account_name,
    severity: r.severity,
    hasUnapprovedPeripherals: r.has_unapproved === 1,
    hasVulnerablePeripherals: r.has_vulnerable === 1,
    hasKnownAttackTools: r.has_attack_tool === 1,
    containsVulnerablePeripheralOrWLV: r.vulnerable_or_wlv === 1,
    inAction: r.in_action === 1,
    modelToolTip: r.model_tooltip,
    runningMode: r.running_mode,
    connectedSwitchIp: r.switch_ip,
    connectedSwitchName: r.switch_name,
    connectedPortId: r.port_id,
    connectedPortName: r.port_name,
    ethernetsCount: r.ethernets_count,
    hashtags: r.hashtags,
  }
}

/** How the agent lists show an agent, for the JSON db/agents.ts keeps per row. */
export const agentListView: AgentListView = {
  view: agentView,
  lastUpdated: (ms) => (ms === null ? 'null' : `"${iso(ms)}"`),
}

/** A held re-enrollment as the agent detail shows it. */
export function heldView(h: HeldReEnrollment | undefined): Schemas['AgentDetailViewResource']['pendingReEnrollment'] {
  return h ? { requestedTime: iso(h.requested_ms), hostIdentifier: h.host_identifier, sourceIp: h.source_ip } : null
}

/** A machine id as views and records show it: enough to tell hosts apart, not to enroll as one. */
export function maskMachineId(machineId: string): string {
  return machineId.length <= 4 ? '****' : `****${machineId.slice(-4)}`
}

/** The agent as audit records name it. */
export function agentAsset(a: { uuid: string; host_identifier: string; local_ip_address?: string | null; running_mode?: string | null; os_version?: string | null }): AuditAsset {
  const os = a.os_version ?? ''
  return {
    key: a.uuid,
    name: a.host_identifier,
    ipAddress: a.local_ip_address ?? null,
    type: 'Agent',
    subType: a.running_mode === 'Server' ? 'Server' : a.running_mode === 'VDI' ? 'VirtualMachine' : a.running_mode === 'Standard' ? 'Workstation' : 'None',
    detail: /windows/i.test(os) ? 'WindowsHost' : /mac ?os|darwin/i.test(os) ? 'MacHost' : /linux|ubuntu|debian|red ?hat|centos|suse|fedora/i.test(os) ? 'LinuxHost' : 'Unknown',
  }
}

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
