// An agent as audit records name it, its held re-enrollment as its detail shows it, and a
// machine id as views and records show it.
import type { components } from '../../generated/openapi.js'
import type { AuditAsset } from '../../db/audit.js'
import type { HeldReEnrollment } from './ports.js'
import { iso } from '../time.js'

type Schemas = components['schemas']

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
