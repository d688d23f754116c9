// What the server stores and derives from a check-in's report: peripherals, adapters, the
// model line; and which peripherals appeared, went away or are new since the last one.
import type { components } from '../../generated/openapi.js'
import type { KnownPeripheral, PeripheralChanges, ReportedPeripheral, StoredPeripheral } from './ports.js'
import { deviceIcon, displaySerial, productName, vendorName } from '../usb.js'

type Schemas = components['schemas']

/** What the server stores and derives from one reported peripheral (texts aside). */
export function derivePeripheral(p: Schemas['GatewayPeripheralReport']): ReportedPeripheral {
  const vid = p.vid.toUpperCase()
  const pid = p.pid.toUpperCase()
  return {
    deviceId: p.deviceID,
    vid,
    pid,
    serialNumber: p.serialNumber ?? null,
    description: p.description ?? null,
    status: p.status ?? null,
    manufacturer: p.manufacturer ?? null,
    caption: p.caption ?? null,
    guiVid: vendorName(vid) ?? (p.manufacturer || null),
    guiPid: productName(vid, pid) ?? (p.caption || null),
    guiSerial: displaySerial(p.serialNumber),
    devIcon: deviceIcon(p.classCode, p.subclassCode, p.protocolCode),
    classCode: p.classCode?.toUpperCase() ?? null,
    subclassCode: p.subclassCode?.toUpperCase() ?? null,
    protocolCode: p.protocolCode?.toUpperCase() ?? null,
    hierarchy: p.hierarchy ?? null,
    parentDeviceId: p.parentDeviceID ?? null,
    isDisabled: p.isDisabled ? 1 : 0,
    present: p.present ? 1 : 0,
  }
}

/** `name||mac||ip,ip||status` per adapter, joined by `**` (the list's `nicsText`). */
export function nicsText(nics: Schemas['AgentNic'][]): string | null {
  if (nics.length === 0) return null
  return nics
    .map((n) => [n.name, n.macAddress ?? '', n.ipAddresses.join(','), n.status].join('||'))
    .join('**')
    .slice(0, 8192)
}

export function modelTooltip(manufacturer: string | null | undefined, model: string | null | undefined, os: string | null | undefined, adapters: number): string {
  const machine = [manufacturer, model].filter(Boolean).join(' ')
  return [machine, os, `${adapters} network adapter${adapters === 1 ? '' : 's'}`].filter(Boolean).join(' - ').slice(0, 512)
}

/** A reported peripheral described as a stored one is (for the event of its removal). */
export function storedView(d: ReportedPeripheral) {
  return { device_id: d.deviceId, vid: d.vid, pid: d.pid, gui_vid: d.guiVid, gui_pid: d.guiPid, serial_number: d.serialNumber, gui_serial: d.guiSerial, dev_icon: d.devIcon }
}

export interface Reconciled {
  /** The writes that make the stored peripherals what was reported. */
  changes: PeripheralChanges
  /** Device id -> whether it is new to this agent, for each peripheral present now and not before. */
  appeared: Map<string, boolean>
  /** Reported, but no longer present. */
  gone: ReportedPeripheral[]
  /** Present before and left out of the report. */
  missing: KnownPeripheral[]
}

/** Compares a check-in's peripherals with the stored ones: what to write and what happened. */
export function reconcile(known: StoredPeripheral[], reported: Schemas['GatewayPeripheralReport'][]): Reconciled {
  const left = new Map(known.map((p) => [p.device_id, p]))
  const changes: PeripheralChanges = { reported: [], absent: [] }
  const appeared = new Map<string, boolean>()
  const gone: ReportedPeripheral[] = []
  for (const report of reported) {
    const d = derivePeripheral(report)
    const old = left.get(d.deviceId)
    if (old) {
      left.delete(d.deviceId)
      changes.reported.push({ id: old.id, values: d, stored: old })
      if (d.present && !old.present) appeared.set(d.deviceId, false)
      if (!d.present && old.present) gone.push(d)
    } else {
      changes.reported.push({ id: null, values: d })
      if (d.present) appeared.set(d.deviceId, true)
    }
  }
  const missing = [...left.values()].filter((p) => p.present)
  changes.absent = missing.map((p) => p.id)
  return { changes, appeared, gone, missing }
}
