// Agent rows as the contract's answers: each shape is mapped here, once, for every path.
import type { components } from '../../generated/openapi.js'
import type { AuditAsset } from '../platform/ports.js'
import type { AgentListRow, AgentListView, AgentRow, CommandRow, HeldReEnrollment, PeripheralListRow, PeripheralModelRow } from './ports.js'
import { severityNames } from '../listing.js'
import { utcText, type PdfColumn } from '../pdf.js'
import { peripheralView } from '../peripherals/views.js'
import { iso } from '../time.js'
import { iconName, productName, vendorName } from '../usb.js'

type Schemas = components['schemas']
type AgentCommand = Schemas['AgentCommand']
type AgentView = Schemas['AgentViewResource']
type AgentNic = Schemas['AgentNic']

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
  return h ? { reEnrollmentId: h.id, requestedTime: iso(h.requested_ms), hostIdentifier: h.host_identifier, sourceIp: h.source_ip } : null
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

/** JSON the gateway stored; whatever it holds, the answer keeps to the contract's shape and limits. */
function parseList(json: string): unknown[] {
  try {
    const v = JSON.parse(json)
    return Array.isArray(v) ? v.slice(0, 32) : []
  } catch {
    return []
  }
}

const nicView = (n: any): AgentNic => ({
  name: String(n?.name || '(unnamed)').slice(0, 256),
  macAddress: n?.macAddress == null ? null : String(n.macAddress).slice(0, 32),
  ipAddresses: Array.isArray(n?.ipAddresses) ? n.ipAddresses.slice(0, 16).map((a: unknown) => String(a).slice(0, 64)) : [],
  status: ['Up', 'Down', 'Unknown'].includes(n?.status) ? n.status : 'Unknown',
  isEthernet: n?.isEthernet === true,
})

/** What an agent's details are made of (lib/agents/service.ts details). */
export interface AgentDetails {
  agent: AgentRow
  held: HeldReEnrollment | undefined
  peripherals: PeripheralListRow[]
  commands: CommandRow[]
}

/** An agent with everything GET agents/{agentId} shows (AgentDetailViewResource). */
export function agentDetailView({ agent, held, peripherals, commands }: AgentDetails): Schemas['AgentDetailViewResource'] {
  return {
    ...agentView(agent),
    machineId: maskMachineId(agent.machine_id),
    pendingReEnrollment: heldView(held),
    enrolledTime: new Date(agent.enrolled_ms).toISOString(),
    isSystemLocked: agent.is_system_locked === 1,
    checkInIntervalSeconds: agent.check_in_interval_s,
    loggedOnUsers: parseList(agent.logged_on_users).map((u) => String(u).slice(0, 128)),
    nics: parseList(agent.nics_json).map(nicView),
    peripherals: peripherals.map(peripheralView),
    commands: commands.map((c) => commandView(c, agent.uuid)),
  }
}

/** `<host>-debuglogs-<UTC time>.log`, with only characters safe in a file name. */
export const logFileName = (host: string, ms: number) => `${host.replace(/[^\w.-]/g, '_').slice(0, 100)}-debuglogs-${new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '')}.log`

// ---- the export files (agents, peripheral models) ----

const severityText = (n: number) => severityNames[n] ?? String(n)
const timeText = (value: string | null) => (value ? utcText(Date.parse(value)).replace(' UTC', '') : '')

export const agentPdfColumns: PdfColumn<AgentView>[] = [
  { header: 'Host', width: 15, value: (a) => a.hostIdentifier },
  { header: 'IP address', width: 10, value: (a) => a.localIpAddress },
  { header: 'Connection', width: 9, value: (a) => a.connectionStatus },
  { header: 'Status', width: 8, value: (a) => a.displayStatusCombined },
  { header: 'Mode', width: 6, value: (a) => a.operationalStatus },
  { header: 'License', width: 8, value: (a) => a.licenseStatus },
  { header: 'OS', width: 14, value: (a) => a.osVersion },
  { header: 'Service', width: 8, value: (a) => a.serviceVersion },
  { header: 'Driver', width: 8, value: (a) => a.kbDriverVersion },
  { header: 'Approved', width: 8, align: 'right', value: (a) => a.approvedAndPresent },
  { header: 'Unapproved', width: 9, align: 'right', value: (a) => a.notApproved },
  { header: 'Severity', width: 10, value: (a) => severityText(a.severity) },
  { header: 'Last check-in (UTC)', width: 13, value: (a) => timeText(a.lastUpdated) },
]

/** Agent rows as the export writes them, one at a time as they are read. */
export async function* agentViews(rows: AsyncIterable<AgentListRow>) {
  for await (const row of rows) yield agentView(row)
}

/** A peripheral model as the aggregated export writes it. */
export const modelView = (m: PeripheralModelRow) => ({
  vid: m.vid,
  pid: m.pid,
  guiVid: m.gui_vid ?? vendorName(m.vid) ?? null,
  guiPid: m.gui_pid ?? productName(m.vid, m.pid) ?? null,
  devIcon: m.dev_icon,
  devIconDescription: iconName(m.dev_icon),
  hosts: m.hosts,
  present: m.present,
  approved: m.approved,
  notApproved: m.not_approved,
  isKnownAttackTool: m.is_attack_tool === 1,
  isVulnerablePeripheral: m.is_vulnerable === 1,
  vulnerability: m.vulnerability,
  severity: m.severity,
})
export const modelColumns = Object.keys(modelView({ vid: '', pid: '', dev_icon: 0 } as PeripheralModelRow))

export const modelPdfColumns: PdfColumn<ReturnType<typeof modelView>>[] = [
  { header: 'VID', width: 5, value: (m) => m.vid },
  { header: 'PID', width: 5, value: (m) => m.pid },
  { header: 'Vendor', width: 15, value: (m) => m.guiVid },
  { header: 'Product', width: 18, value: (m) => m.guiPid },
  { header: 'Class', width: 10, value: (m) => m.devIconDescription },
  { header: 'Hosts', width: 5, align: 'right', value: (m) => m.hosts },
  { header: 'Present', width: 6, align: 'right', value: (m) => m.present },
  { header: 'Approved', width: 7, align: 'right', value: (m) => m.approved },
  { header: 'Unapproved', width: 8, align: 'right', value: (m) => m.notApproved },
  { header: 'Attack tool', width: 8, value: (m) => m.isKnownAttackTool },
  { header: 'Vulnerable', width: 8, value: (m) => m.isVulnerablePeripheral },
  { header: 'Severity', width: 9, value: (m) => severityText(m.severity) },
  { header: 'Vulnerability', width: 18, value: (m) => m.vulnerability },
]
