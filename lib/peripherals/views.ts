// Peripheral rows as the contract's answer (PeripheralViewResource): mapped here, once,
// for the lists, streamed pages, an agent's details and report content.
import type { components } from '../../generated/openapi.js'
import type { PeripheralListRow } from '../agents/ports.js'
import { iconName } from '../usb.js'

type PeripheralView = components['schemas']['PeripheralViewResource']

/** The agent's tags, then the peripheral's risk tags. */
export function peripheralHashtags(r: Pick<PeripheralListRow, 'agent_hashtags' | 'is_attack_tool' | 'is_vulnerable' | 'is_unapproved'>): string | null {
  const tags = [r.agent_hashtags?.trim() || null]
  if (r.is_attack_tool) tags.push('#attack-tool')
  if (r.is_vulnerable) tags.push('#vulnerable')
  if (r.is_unapproved) tags.push('#unapproved')
  const all = tags.filter(Boolean).join(' ')
  return all || null
}

/** A peripheral as the lists show it (PeripheralViewResource). */
export function peripheralView(r: PeripheralListRow): PeripheralView {
  return {
    uuid: r.agent_uuid,
    hostIdentifier: r.host_identifier,
    hostIp: r.host_ip,
    deviceID: r.device_id,
    description: r.description,
    status: r.status,
    manufacturer: r.manufacturer,
    caption: r.caption,
    vid: r.vid,
    pid: r.pid,
    serialNumber: r.serial_number,
    guiVid: r.gui_vid,
    guiPid: r.gui_pid,
    guiSerial: r.gui_serial,
    devIcon: r.dev_icon as PeripheralView['devIcon'],
    devIconDescription: iconName(r.dev_icon),
    classCode: r.class_code,
    subclassCode: r.subclass_code,
    protocolCode: r.protocol_code,
    hierarchy: r.hierarchy,
    parentDeviceID: r.parent_device_id,
    isDisabled: r.is_disabled === 1,
    approved: r.approved === 1,
    present: r.present === 1,
    isUnapprovedPeripherals: r.is_unapproved === 1,
    isVulnerablePeripheral: r.is_vulnerable === 1,
    isKnownAttackTool: r.is_attack_tool === 1,
    severity: r.severity,
    inAction: r.in_action === 1,
    vulnerability: r.vulnerability,
    adminStatus: r.admin_status,
    hashtags: peripheralHashtags(r),
  }
}
