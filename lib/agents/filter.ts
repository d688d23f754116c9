// The filters of the agent and peripheral lists, read once from a query (GET agents,
// GET peripherals) or from an export body that mirrors it, into one normalized shape.
import { bool, dateRange, oneOrMore, severity, filterText as text, filterTerm as term, type Where } from '../listing.js'
import { invalidField } from '../errors.js'
import { type AgentFilter, connectionStatuses, licenseStatuses, operationalStatuses, type PeripheralFilter, runningModes, workStatuses } from './ports.js'

// The shapes are the ports' (lib/agents/ports.ts: the repositories take them); here with the reading of them.
export { connectionStatuses, licenseStatuses, operationalStatuses, runningModes, soleField, workStatuses, type AgentFilter, type PeripheralFilter } from './ports.js'

const statusValues = [...connectionStatuses, ...operationalStatuses, ...workStatuses] as const

type Source = Record<string, unknown>

function readAgentFilter(src: Source, names: Record<keyof typeof agentQueryNames, string>, where: Where): AgentFilter {
  const f: AgentFilter = {}
  const set = <K extends keyof AgentFilter>(key: K, value: AgentFilter[K] | undefined) => {
    if (value !== undefined) f[key] = value
  }
  set('uuid', term(src, names.uuid, where))
  set('hostIdentifier', term(src, names.hostIdentifier, where))
  set('ipAddress', term(src, names.ipAddress, where))
  set('version', term(src, names.version, where))
  set('osVersion', term(src, names.osVersion, where))
  set('hashtags', term(src, names.hashtags, where))
  set('globalSearch', term(src, names.globalSearch, where))
  const status = oneOrMore(text(src, names.status), names.status, statusValues, where)
  if (status) {
    const of = <T extends string>(kind: readonly T[]) => (status as string[]).filter((s): s is T => (kind as readonly string[]).includes(s))
    const connection = of(connectionStatuses)
    const operational = of(operationalStatuses)
    const display = of(workStatuses)
    if (connection.length) f.connectionStatus = connection
    if (operational.length) f.operationalStatus = operational
    if (display.length) f.displayStatus = display
  }
  set('licenseStatus', oneOrMore(text(src, names.license), names.license, licenseStatuses, where))
  set('runningMode', oneOrMore(text(src, names.deploymentMode), names.deploymentMode, runningModes, where))
  set('containsVulnerablePeripheralOrWLV', bool(text(src, names.containsVulnerablePeripheralOrWLV), names.containsVulnerablePeripheralOrWLV, where))
  set('hasUnapprovedPeripherals', bool(text(src, names.hasUnapprovedPeripherals), names.hasUnapprovedPeripherals, where))
  set('hasVulnerablePeripherals', bool(text(src, names.hasVulnerablePeripherals), names.hasVulnerablePeripherals, where))
  set('hasKnownAttackTools', bool(text(src, names.hasKnownAttackTools), names.hasKnownAttackTools, where))
  set('lastConfiguration', dateRange(text(src, names.lastConfiguration), names.lastConfiguration, where))
  set('lastUpdated', dateRange(text(src, names.lastUpdated), names.lastUpdated, where))
  set('expirationDate', dateRange(text(src, names.expirationDate), names.expirationDate, where))
  set('severity', severity(text(src, names.severity), names.severity, where))
  return f
}

// The contract's names of each filter: query parameters of GET agents, properties of AgentsExportFilter.
const agentQueryNames = {
  uuid: 'Uuid',
  hostIdentifier: 'HostIdentifier',
  ipAddress: 'IpAddress',
  version: 'Version',
  osVersion: 'OsVersion',
  hashtags: 'Hashtags',
  globalSearch: 'GlobalSearch',
  status: 'Status',
  license: 'License',
  deploymentMode: 'DeploymentMode',
  containsVulnerablePeripheralOrWLV: 'ContainsVulnerablePeripheralOrWLV',
  hasUnapprovedPeripherals: 'HasUnapprovedPeripherals',
  hasVulnerablePeripherals: 'HasVulnerablePeripherals',
  hasKnownAttackTools: 'HasKnownAttackTools',
  lastConfiguration: 'LastConfiguration',
  lastUpdated: 'LastUpdated',
  expirationDate: 'ExpirationDate',
  severity: 'Severity',
}
const agentBodyNames = Object.fromEntries(Object.keys(agentQueryNames).map((k) => [k, k])) as typeof agentQueryNames

/** The filters of GET agents from its (canonicalized) query. */
export function agentFilterFromQuery(q: Source): AgentFilter {
  return readAgentFilter(q, agentQueryNames, 'query')
}

/** The filters of GET agents from an AgentsExportFilter body (null: no filter). */
export function agentFilterFromBody(b: Source | null | undefined): AgentFilter {
  return readAgentFilter(b ?? {}, agentBodyNames, 'body')
}

const HEX4 = /^[0-9A-Fa-f]{4}$/

function hex4(src: Source, name: string, where: Where): string | undefined {
  const v = text(src, name)
  if (v === undefined) return undefined
  if (!HEX4.test(v)) throw invalidField(where, name, 'must be 4 hexadecimal digits')
  return v.toUpperCase()
}

function readPeripheralFilter(src: Source, where: Where): PeripheralFilter {
  const f: PeripheralFilter = {}
  const set = <K extends keyof PeripheralFilter>(key: K, value: PeripheralFilter[K] | undefined) => {
    if (value !== undefined) f[key] = value
  }
  const global = where === 'query' ? 'GlobalSearch' : 'globalSearch'
  set('hostIdentifier', term(src, 'hostIdentifier', where))
  set('ipAddress', term(src, 'ipAddress', where))
  set('hostUuid', term(src, 'hostUuid', where))
  set('vendor', term(src, 'vendor', where))
  set('productInfo', term(src, 'productInfo', where))
  set('serialNumber', term(src, 'serialNumber', where))
  set('vid', hex4(src, 'vid', where))
  set('pid', hex4(src, 'pid', where))
  set('isUnapproved', bool(text(src, 'isUnapprovedPeripheral'), 'isUnapprovedPeripheral', where))
  set('isVulnerable', bool(text(src, 'isVulnerablePeripheral'), 'isVulnerablePeripheral', where))
  set('isAttackTool', bool(text(src, 'isKnownAttackTool'), 'isKnownAttackTool', where))
  set('present', bool(text(src, 'present'), 'present', where))
  set('globalSearch', term(src, global, where))
  return f
}

/** The filters of GET peripherals from its (canonicalized) query. */
export function peripheralFilterFromQuery(q: Source): PeripheralFilter {
  return readPeripheralFilter(q, 'query')
}

/** The filters of GET peripherals from a PeripheralsExportFilter body (null: no filter). */
export function peripheralFilterFromBody(b: Source | null | undefined): PeripheralFilter {
  return readPeripheralFilter(b ?? {}, 'body')
}
