// The agents and peripherals inventories: their figures and tables (PDF) or rows (CSV).
import { agentView } from '../agents/views.js'
import type { PeripheralListRow } from '../agents/ports.js'
import { peripheralView } from '../peripherals/views.js'
import type { AgentFilter, PeripheralFilter } from '../agents/filter.js'
import { iso } from '../time.js'
import type { PdfColumn, PdfReport, PdfTable } from './pdf.js'
import type { Filters } from './types.js'
// Lets other requests run (after a read of every matching id, say).
import { setImmediate as turn } from 'node:timers/promises'
import { PDF_MAX_ROWS, CSV_MAX_ROWS, CSV_NOTE, type RunContext, type CsvContent, localTime, zoneOf, pdfShell, fig, take } from './content-common.js'

// Agents inventory

function agentFilter(f: Filters): AgentFilter {
  const out: AgentFilter = {}
  if (typeof f.hostIdentifier === 'string') out.hostIdentifier = f.hostIdentifier
  if (typeof f.ipAddress === 'string') out.ipAddress = f.ipAddress
  if (typeof f.hashtags === 'string') out.hashtags = f.hashtags
  if (f.operationalStatus === 'Armed' || f.operationalStatus === 'Free') out.operationalStatus = [f.operationalStatus]
  if (f.connectionStatus === 'Connected' || f.connectionStatus === 'Disconnected') out.connectionStatus = [f.connectionStatus]
  if (Array.isArray(f.licenseStatus)) out.licenseStatus = f.licenseStatus as AgentFilter['licenseStatus']
  if (typeof f.hasUnapprovedPeripherals === 'boolean') out.hasUnapprovedPeripherals = f.hasUnapprovedPeripherals
  if (typeof f.hasVulnerablePeripherals === 'boolean') out.hasVulnerablePeripherals = f.hasVulnerablePeripherals
  if (typeof f.hasKnownAttackTools === 'boolean') out.hasKnownAttackTools = f.hasKnownAttackTools
  return out
}

const risks = (flags: [boolean, string][]) =>
  flags
    .filter(([on]) => on)
    .map(([, name]) => name)
    .join(', ')
const BY_HOST = { field: 'hostIdentifier', direction: 'asc' } as const

type AgentView = ReturnType<typeof agentView>
function agentColumns(zone: string): PdfColumn<AgentView>[] {
  return [
    { header: 'Host', width: 15, value: (a) => a.hostIdentifier },
    { header: 'IP address', width: 9, value: (a) => a.localIpAddress },
    { header: 'Connection', width: 8.5, value: (a) => a.connectionStatus },
    { header: 'Mode', width: 5.5, value: (a) => a.operationalStatus },
    { header: 'License', width: 7, value: (a) => a.licenseStatus },
    { header: 'OS', width: 18, value: (a) => a.osVersion },
    { header: 'Service', width: 7, value: (a) => a.serviceVersion },
    { header: 'Approved', width: 7, align: 'right', value: (a) => a.approvedAndPresent },
    { header: 'Unapproved', width: 8.5, align: 'right', value: (a) => a.notApproved },
    {
      header: 'Risks',
      width: 13,
      value: (a) =>
        risks([
          [a.hasKnownAttackTools, 'Attack tool'],
          [a.hasVulnerablePeripherals, 'Vulnerable'],
          [a.hasUnapprovedPeripherals, 'Unapproved'],
        ]),
    },
    { header: 'Last check-in', width: 13, value: (a) => (a.lastUpdated ? localTime(Date.parse(a.lastUpdated), zone, false) : '') },
  ]
}

async function* agentViews(rows: AsyncIterable<import('../agents/ports.js').AgentRow>) {
  for await (const row of rows) yield agentView(row)
}

export async function agentsPdf(ctx: RunContext): Promise<PdfReport> {
  const repos = ctx.sources
  const filter = agentFilter(ctx.definition.filters)
  const t = await repos.reports.agentTotals(filter, ctx.signal)
  const ids = await repos.exports.agentIds(filter, BY_HOST)
  await turn()
  const figures = [
    fig('Agents', t.agents),
    fig('Connected', t.connected),
    fig('Armed', t.armed),
    fig('With unapproved peripherals', t.withUnapproved),
    fig('With vulnerable peripherals', t.withVulnerable),
    fig('With known attack tools', t.withAttackTools),
  ]
  const table: PdfTable<AgentView> = {
    title: 'Agents, by host name',
    noun: 'agents',
    columns: agentColumns(zoneOf(ctx.definition)),
    total: ids.length,
    rows: agentViews(repos.reports.agents(ids.slice(0, PDF_MAX_ROWS + 1), ctx.signal)),
    maxRows: PDF_MAX_ROWS,
    cutNote: CSV_NOTE,
    empty: 'No agent matches the filters.',
  }
  return pdfShell(ctx, figures, [table])
}

export async function agentsCsv(ctx: RunContext): Promise<CsvContent> {
  const repos = ctx.sources
  const ids = await repos.exports.agentIds(agentFilter(ctx.definition.filters), BY_HOST)
  return {
    columns: repos.agentColumns,
    rows: agentViews(repos.reports.agents(ids.slice(0, CSV_MAX_ROWS + 1), ctx.signal)),
  }
}

// ---------------------------------------------------------------------------------------
// Peripherals inventory

function peripheralFilters(f: Filters): { agents: AgentFilter; peripherals: PeripheralFilter; extra: { approved?: boolean; icons?: number[] } } {
  const agents: AgentFilter = typeof f.hostIdentifier === 'string' ? { hostIdentifier: f.hostIdentifier } : {}
  const peripherals: PeripheralFilter = {}
  if (typeof f.vendor === 'string') peripherals.vendor = f.vendor
  if (typeof f.productInfo === 'string') peripherals.productInfo = f.productInfo
  if (typeof f.present === 'boolean') peripherals.present = f.present
  if (typeof f.isVulnerablePeripheral === 'boolean') peripherals.isVulnerable = f.isVulnerablePeripheral
  if (typeof f.isKnownAttackTool === 'boolean') peripherals.isAttackTool = f.isKnownAttackTool
  const extra: { approved?: boolean; icons?: number[] } = {}
  if (typeof f.approved === 'boolean') extra.approved = f.approved
  if (Array.isArray(f.peripheralIcons)) extra.icons = f.peripheralIcons as number[]
  return { agents, peripherals, extra }
}

type PeripheralRowView = ReturnType<typeof peripheralView> & { firstSeen: string; lastSeen: string }
const peripheralRowView = (r: PeripheralListRow): PeripheralRowView => ({ ...peripheralView(r), firstSeen: iso(r.first_seen_ms), lastSeen: iso(r.last_seen_ms) })

async function* peripheralViews(rows: AsyncIterable<PeripheralListRow>) {
  for await (const row of rows) yield peripheralRowView(row)
}

function peripheralColumns(zone: string): PdfColumn<PeripheralRowView>[] {
  return [
    { header: 'Host', width: 11, value: (p) => p.hostIdentifier },
    { header: 'IP address', width: 8, value: (p) => p.hostIp },
    { header: 'VID', width: 4, value: (p) => p.vid },
    { header: 'PID', width: 4, value: (p) => p.pid },
    { header: 'Vendor', width: 11, value: (p) => p.guiVid ?? p.manufacturer },
    { header: 'Product', width: 14, value: (p) => p.guiPid ?? p.caption },
    { header: 'Class', width: 7.5, value: (p) => p.devIconDescription },
    { header: 'Serial', width: 12, value: (p) => p.guiSerial ?? p.serialNumber },
    { header: 'Present', width: 5.5, value: (p) => p.present },
    { header: 'Approved', width: 7, value: (p) => p.approved },
    {
      header: 'Risks',
      width: 9,
      value: (p) =>
        risks([
          [p.isKnownAttackTool, 'Attack tool'],
          [p.isVulnerablePeripheral, 'Vulnerable'],
          [p.isUnapprovedPeripherals, 'Unapproved'],
        ]),
    },
    { header: 'Last seen', width: 11, value: (p) => localTime(Date.parse(p.lastSeen), zone, false) },
  ]
}

export async function peripheralsPdf(ctx: RunContext): Promise<PdfReport> {
  const repos = ctx.sources
  const f = peripheralFilters(ctx.definition.filters)
  const t = await repos.reports.peripheralTotals({ ...f.peripherals, ...f.agents }, f.extra, ctx.signal)
  const ids = await repos.exports.agentIds(f.agents, BY_HOST)
  await turn()
  const figures = [
    fig('Peripherals', t.peripherals),
    fig('Hosts', t.hosts),
    fig('Plugged in', t.present),
    fig('Not approved, plugged in', t.unapproved),
    fig('Vulnerable', t.vulnerable),
    fig('Known attack tools', t.attackTools),
  ]
  const table: PdfTable<PeripheralRowView> = {
    title: 'Peripherals, by host name',
    noun: 'peripherals',
    columns: peripheralColumns(zoneOf(ctx.definition)),
    total: t.peripherals,
    rows: peripheralViews(take(repos.reports.peripherals(ids, f.peripherals, f.extra, ctx.signal), PDF_MAX_ROWS + 1)),
    maxRows: PDF_MAX_ROWS,
    cutNote: CSV_NOTE,
    empty: 'No peripheral matches the filters.',
  }
  return pdfShell(ctx, figures, [table])
}

export async function peripheralsCsv(ctx: RunContext): Promise<CsvContent> {
  const repos = ctx.sources
  const f = peripheralFilters(ctx.definition.filters)
  const ids = await repos.exports.agentIds(f.agents, BY_HOST)
  return {
    columns: [...repos.peripheralColumns, 'firstSeen', 'lastSeen'],
    rows: peripheralViews(repos.reports.peripherals(ids, f.peripherals, f.extra, ctx.signal)),
  }
}
