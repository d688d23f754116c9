// The risk insights as the contract shows them, from the rows db/insights.ts answers.
import type { components } from '../../generated/openapi.js'
import { severityNames } from '../listing.js'
import { iso } from '../time.js'
import { iconName, productName, vendorName } from '../usb.js'
import type { ClassificationRows, ErrorTotalsRows, HostRow, LoggedAgentRow, PolicyTestRows, UncommonRows, ViolationRows, VulnerableRows } from './ports.js'

type S = components['schemas']
type Host = S['RiskInsightHost']
type NameCount = S['AgentsNameCount']
export type UncommonView = Omit<S['UncommonPeripheralsResult'], 'computedTime'>
export type VulnerableView = Omit<S['VulnerablePeripheralsResult'], 'computedTime'>

const DAY_MS = 86_400_000
const MAX_LOGGED_ON_USERS = 32
const TOP_VALUES = 50

const icon = (code: number | null) => (code !== null && code >= 0 && code <= 14 ? code : 0)
const text = (s: string | null | undefined, max: number) => (s == null ? null : s.slice(0, max))
/** What every insight says of a peripheral model: its ids, names and device class. */
const model = (vid: string, pid: string, guiVid: string | null, guiPid: string | null, devIcon: number | null) => ({
  vid: vid.slice(0, 4),
  pid: pid.slice(0, 4),
  guiVid: text(guiVid ?? vendorName(vid) ?? null, 256),
  guiPid: text(guiPid ?? productName(vid, pid) ?? null, 256),
  devIcon: icon(devIcon),
  devIconDescription: iconName(icon(devIcon)),
})

export const hostView = (r: HostRow): Host => ({ uuid: r.uuid, hostIdentifier: r.host_identifier.slice(0, 255), localIpAddress: text(r.local_ip_address, 64) })

function loggedOnUsers(json: string): string[] {
  try {
    const users: unknown = JSON.parse(json)
    if (!Array.isArray(users)) return []
    return users
      .filter((u): u is string => typeof u === 'string')
      .slice(0, MAX_LOGGED_ON_USERS)
      .map((u) => u.slice(0, 128))
  } catch {
    return []
  }
}

export const loggedAgentView = (r: LoggedAgentRow): S['LoggedAgentsResult']['data'][number] => ({
  ...hostView(r),
  operationalStatus: r.operational_status as 'Armed' | 'Free',
  displayStatusCombined: r.display_status as S['AgentDisplayStatus'],
  lastUpdated: iso(r.checked_in_ms),
  loggedOnUsers: loggedOnUsers(r.logged_on_users),
})

export function policyTestView(rows: PolicyTestRows): Omit<S['PolicyTestResult'], 'evaluatedTime'> {
  const data: S['PolicyTestAgent'][] = rows.agents.map(({ agent: a, findings }) => {
    const armed = a.operational_status === 'Armed'
    return {
      ...hostView(a),
      operationalStatus: a.operational_status,
      connectionStatus: a.connection_status,
      findings: findings.map((p) => {
        const approved = p.approved === 1
        const attack = p.is_attack_tool === 1
        const vulnerable = p.is_vulnerable === 1
        const risk = attack ? 'a known attack tool' : 'a vulnerable device'
        const reason = !approved ? `Not approved on this agent${attack || vulnerable ? `, and ${risk}` : ''}.` : `Approved, but ${risk}${p.vulnerability ? `: ${p.vulnerability}` : '.'}`
        return {
          deviceID: p.device_id.slice(0, 512),
          ...model(p.vid, p.pid, p.gui_vid, p.gui_pid, p.dev_icon),
          approved,
          isKnownAttackTool: attack,
          isVulnerablePeripheral: vulnerable,
          outcomeIfArmed: approved ? ('Allowed' as const) : ('Blocked' as const),
          blockedNow: armed && !approved,
          reason: reason.slice(0, 500),
        }
      }),
    }
  })
  const { counts } = rows
  return {
    agentsEvaluated: rows.total,
    agentsWithFindings: counts.agents,
    wouldBlock: counts.would_block,
    knownAttackTools: counts.attack,
    vulnerablePeripherals: counts.vulnerable,
    truncated: counts.agents > data.length,
    data,
  }
}

export function errorTotalsView(from: number, to: number, { byDay, agents }: ErrorTotalsRows): S['AgentsErrorDataWrapper'] {
  const reported = byDay.reduce((n, d) => n + d.reported, 0)
  const total = byDay.reduce((n, d) => n + d.total, 0)
  return {
    fromDate: iso(from),
    toDate: iso(to),
    totalErrors: total,
    reportedErrors: reported,
    failedCommands: total - reported,
    agentsWithErrors: agents[0]?.agents ?? 0,
    byDay: byDay.map((d) => ({
      date: iso(d.day * DAY_MS).slice(0, 10),
      reportedErrors: d.reported,
      failedCommands: d.total - d.reported,
      total: d.total,
    })),
    data: agents.map((r) => ({
      ...hostView(r),
      total: r.total,
      reportedErrors: r.reported,
      failedCommands: r.total - r.reported,
      lastErrorTime: iso(r.last),
      lastErrorText: r.text.slice(0, 1000),
    })),
  }
}

export const uncommonView = (r: UncommonRows): UncommonView => ({
  maxHosts: r.maxHosts,
  agentsConsidered: r.agentsConsidered,
  recordsTotal: r.total,
  data: r.models.map(({ model: m, hosts }) => ({
    ...model(m.vid, m.pid, m.gui_vid, m.gui_pid, m.dev_icon),
    hostsCount: m.hosts,
    peripheralsCount: m.peripherals,
    presentCount: m.present,
    firstSeen: iso(m.first_seen),
    lastSeen: iso(m.last_seen),
    hosts: hosts.map(hostView),
  })),
})

export const vulnerableView = (r: VulnerableRows): VulnerableView => ({
  recordsTotal: r.total,
  data: r.models.map(({ model: m, hosts }) => ({
    ...model(m.vid, m.pid, m.gui_vid, m.gui_pid, m.dev_icon),
    kind: m.kind,
    catalogueEntryId: m.id,
    name: m.name,
    vulnerability: m.vulnerability,
    severity: m.severity,
    hostsCount: m.hosts,
    presentCount: m.present,
    approvedCount: m.approved,
    hosts: hosts.map(hostView),
  })),
})

export const violationsView = (from: number, to: number, r: ViolationRows): Omit<S['UniqueWhitelistViolationsResult'], 'computedTime'> => ({
  fromTime: iso(from),
  toTime: iso(to),
  recordsTotal: r.total,
  data: r.models.map((m) => ({
    ...model(m.vid, m.pid, m.known?.gui_vid ?? null, m.known?.gui_pid ?? null, m.known?.dev_icon ?? m.icon),
    violationsCount: m.n,
    hostsCount: m.hostsCount,
    firstSeen: iso(m.first),
    lastSeen: iso(m.last),
    hosts: m.hosts.map(hostView).sort((a, b) => a.hostIdentifier.localeCompare(b.hostIdentifier, 'en', { sensitivity: 'base' }) || a.uuid.localeCompare(b.uuid)),
  })),
})

/** The 50 most common values (null counting as one), the rest summed under `Other`. */
function topValues(rows: { name: string | null; count: number }[]): NameCount[] {
  const top = rows.slice(0, TOP_VALUES).map((r) => ({ name: text(r.name, 256), count: r.count }))
  const rest = rows.slice(TOP_VALUES).reduce((n, r) => n + r.count, 0)
  if (rest > 0) top.push({ name: 'Other', count: rest })
  return top
}

export function classificationView(r: ClassificationRows): Omit<S['AgentsClassificationSummary'], 'computedTime'> {
  const ranked = (m: Map<string | null, number>) =>
    topValues([...m].map(([name, count]) => ({ name, count })).sort((a, b) => b.count - a.count || String(a.name ?? '').localeCompare(String(b.name ?? ''))))
  return {
    totalAgents: r.totalAgents,
    ...(Object.fromEntries(Object.entries(r.counts).map(([k, m]) => [k, ranked(m)])) as Record<keyof ClassificationRows['counts'], NameCount[]>),
    bySeverity: [...r.severities]
      .filter(([s]) => s >= 0 && s <= 7)
      .sort(([a], [b]) => a - b)
      .map(([severity, count]) => ({
        severity,
        severityString: severityNames[severity],
        count,
      })),
    risk: r.risk,
    peripheralsByClass: r.peripheralsByClass.map((p) => ({
      devIcon: icon(p.dev_icon),
      devIconDescription: iconName(icon(p.dev_icon)),
      present: p.present,
      approved: p.approved,
      notApproved: p.present - p.approved,
    })),
  }
}
