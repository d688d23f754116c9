// The one mapping of an asset row to what both APIs answer (REST and GraphQL), and the
// names of its types and risk levels.
import type { components } from '../../generated/openapi.js'
import { ASSET_TYPES, type AssetRow, HOST_ICONS, INDICATOR_RISK } from './ports.js'
import { iconName } from '../usb.js'
import { iso } from '../time.js'

type Schemas = components['schemas']
export type AssetView = Schemas['AssetView']
type Indicator = Schemas['AssetIndicator']
type TypeCode = AssetView['type']
type TypeName = AssetView['typeDescription']

export const TYPE_NAMES: Record<number, TypeName> = {
  [ASSET_TYPES.Peripheral]: 'Peripheral',
  [ASSET_TYPES.Workstation]: 'Workstation',
  [ASSET_TYPES.Server]: 'Server',
  [ASSET_TYPES.VirtualDesktop]: 'Virtual desktop',
  [ASSET_TYPES.AgentlessHost]: 'Agentless host',
}
const HOST_ICON_NAMES: Record<number, string> = {
  [HOST_ICONS.Workstation]: 'Workstation',
  [HOST_ICONS.Server]: 'Server',
  [HOST_ICONS.VirtualDesktop]: 'Virtual desktop',
  [HOST_ICONS.AgentlessHost]: 'Agentless host',
}

/** The risk words of a level: High 7-10, Medium 4-6, Low 0-3. */
export const riskWords = (level: number): 'High' | 'Medium' | 'Low' => (level >= 7 ? 'High' : level >= 4 ? 'Medium' : 'Low')

const cut = (v: string | null | undefined, max: number) => (v === null || v === undefined ? null : v.slice(0, max))

/** A MAC as `aa:bb:cc:dd:ee:ff` when it is 12 hex digits, else as reported. */
function formatMac(raw: string): string {
  const hex = raw.replace(/[-:.\s]/g, '').toLowerCase()
  return /^[0-9a-f]{12}$/.test(hex) ? hex.match(/../g)!.join(':') : raw.trim().slice(0, 32)
}

interface Nic {
  macAddress?: string | null
  ipAddresses?: string[]
}

/** The host's MACs, its main adapter's first (the one carrying its address, else the first with one): as db/assets.ts orders them. */
function macsOf(row: AssetRow): string[] {
  if (!row.nics_json) return []
  let nics: Nic[]
  try {
    nics = JSON.parse(row.nics_json) as Nic[]
  } catch {
    return []
  }
  const withMac = nics.map((n, i) => ({ n, i })).filter(({ n }) => typeof n.macAddress === 'string' && n.macAddress !== '')
  const carries = (n: Nic) => (row.ip_address !== null && (n.ipAddresses ?? []).includes(row.ip_address) ? 1 : 0)
  withMac.sort((x, y) => carries(y.n) - carries(x.n) || x.i - y.i)
  return [...new Set(withMac.map(({ n }) => formatMac(n.macAddress!)))].slice(0, 16)
}

function indicator(subType: Indicator['subType'], risk: number, description: string): Indicator {
  return { subType, risk, riskIndicationString: riskWords(risk), description: description.slice(0, 1024) }
}

/** The risk indicators, named as the NAC connector's users tick them where they mean the same thing. */
function indicators(row: AssetRow, maxHosts: number): Indicator[] {
  const out: Indicator[] = []
  const R = INDICATOR_RISK
  if (row.source === 'agent') {
    if (row.has_attack_tool) out.push(indicator('Active Network Threat', R.activeThreat, 'A known attack tool is plugged into this host.'))
    if (row.has_vulnerable) out.push(indicator('Common Vulnerabilities and Exposures (CVE)', R.cve, 'A peripheral with a known vulnerability is plugged into this host.'))
    if (row.has_unapproved) out.push(indicator('Unapproved Peripheral', R.unapproved, 'A peripheral that no administrator approved is plugged into this host.'))
  } else if (row.source === 'peripheral') {
    const what = row.vulnerability ? ` (${row.vulnerability})` : ''
    if (row.attack_tool_present) out.push(indicator('Active Network Threat', R.activeThreat, `A known attack tool${what} is plugged into ${row.host_identifier}.`))
    else if (row.has_attack_tool) out.push(indicator('Inactive Network Threat', R.inactiveThreat, `A known attack tool${what} was plugged into ${row.host_identifier} and has been removed.`))
    if (row.has_vulnerable) out.push(indicator('Common Vulnerabilities and Exposures (CVE)', R.cve, `This peripheral model has a known vulnerability${what}.`))
    if (row.is_rare)
      out.push(indicator('Rare Device', R.rare, `This peripheral model (${row.vid}:${row.pid}) is plugged into ${maxHosts === 1 ? 'one host' : `at most ${maxHosts} hosts`} of the fleet.`))
    if (row.has_unapproved) out.push(indicator('Unapproved Peripheral', R.unapproved, 'No administrator approved this peripheral.'))
  } else if (row.is_unsupervised) {
    out.push(indicator('Unsupervised Host', R.unsupervised, 'This host runs no agent: it is reached through an agentless connection, and its peripherals are not watched.'))
  }
  return out
}

function locations(row: AssetRow): Schemas['AssetLocation'][] {
  const sw = row.switch_name || row.switch_ip
  const port = row.port_name || row.port_id
  const switchText = sw ? `${row.switch_name && row.switch_ip ? `${row.switch_name} (${row.switch_ip})` : sw}${port ? ` port ${port}` : ''}` : null
  const hostText = row.source === 'peripheral' ? [row.host_identifier, row.ip_address && `(${row.ip_address})`].filter(Boolean).join(' ') : row.ip_address
  const displayString = [hostText, switchText].filter(Boolean).join(' - ')
  if (!displayString) return []
  return [
    {
      displayString: displayString.slice(0, 1024),
      ipAddress: cut(row.ip_address, 256),
      hostName: cut(row.source === 'host' ? null : row.host_identifier, 256),
      switchIp: cut(row.switch_ip, 64),
      switchName: cut(row.switch_name, 256),
      portId: cut(row.port_id, 256),
      portName: cut(row.port_name, 256),
    },
  ]
}

/** The one mapping of an asset row to what both APIs answer. */
export function assetView(row: AssetRow, maxHosts: number): AssetView {
  const macs = macsOf(row)
  const prefix = row.source === 'agent' ? 'agent' : row.source === 'host' ? 'host' : 'peripheral'
  return {
    id: `${prefix}:${row.key}`.slice(0, 1100),
    key: row.key.slice(0, 1024),
    name: row.name.slice(0, 1024),
    mac: macs[0] ?? 'Dormant Device',
    macAddresses: macs,
    ipAddress: cut(row.ip_address, 256),
    type: row.type as TypeCode,
    typeDescription: TYPE_NAMES[row.type] ?? 'Unknown',
    icon: row.icon,
    iconDescription: HOST_ICON_NAMES[row.icon] ?? iconName(row.icon),
    hierarchy: row.hierarchy as AssetView['hierarchy'],
    model: cut(row.model, 512),
    vendor: cut(row.vendor, 512),
    parentId: row.source === 'peripheral' ? `agent:${row.agent_uuid}` : null,
    isOnline: row.is_online === 1,
    riskLevel: row.risk_level,
    isRiskAccepted: row.is_risk_accepted === 1,
    statusDescription: row.status.slice(0, 64),
    firstSeen: iso(row.first_seen),
    lastSeen: row.last_seen === null ? null : iso(row.last_seen),
    locations: locations(row),
    indicatorViewDetails: indicators(row, maxHosts),
  }
}
