// The risk insights summary: its sections as figures and tables (PDF) or lines (CSV).
import { classificationView, errorTotalsView, uncommonView, violationsView, vulnerableView } from '../insights/views.js'
import type { PdfColumn, PdfFigure, PdfReport, PdfTable } from './pdf.js'
import { insightSections, type InsightSection } from './types.js'
// Lets other requests run (after a read of every matching id, say).
import { setImmediate as turn } from 'node:timers/promises'
import { PDF_MAX_ROWS, CSV_NOTE, type RunContext, type CsvContent, n, pct, localTime, zoneOf, periodRange, pdfShell, fig, severityText } from './content-common.js'

// Risk insights summary

/** One line of the risk insights CSV: every section in one table, told apart by `section`. */
interface InsightLine {
  section: InsightSection
  item: string | null
  vid: string | null
  pid: string | null
  vendor: string | null
  product: string | null
  deviceClass: string | null
  hosts: number | null
  count: number | null
  firstSeen: string | null
  lastSeen: string | null
  detail: string | null
}
const insightCsvColumns: (keyof InsightLine)[] = ['section', 'item', 'vid', 'pid', 'vendor', 'product', 'deviceClass', 'hosts', 'count', 'firstSeen', 'lastSeen', 'detail']
const line = (section: InsightSection, l: Partial<InsightLine>): InsightLine => ({
  section,
  item: null,
  vid: null,
  pid: null,
  vendor: null,
  product: null,
  deviceClass: null,
  hosts: null,
  count: null,
  firstSeen: null,
  lastSeen: null,
  detail: null,
  ...l,
})
const hostNames = (hosts: { hostIdentifier: string }[], total: number) => hosts.map((h) => h.hostIdentifier).join(', ') + (total > hosts.length ? ` and ${total - hosts.length} more` : '')

const sectionTitles: Record<InsightSection, string> = {
  classificationSummary: 'Classification of the agents',
  vulnerablePeripherals: 'Vulnerable peripherals and known attack tools',
  uncommonPeripherals: 'Uncommon peripherals',
  whitelistViolations: 'Whitelist violations',
  errorTotals: 'Errors by agent',
}

/** Every section's lines, computed one after the other with other work between them. */
async function insightLines(ctx: RunContext): Promise<{ sections: InsightSection[]; lines: Map<InsightSection, InsightLine[]>; figures: PdfFigure[]; period: ReturnType<typeof periodRange> }> {
  const { insights } = ctx.sources
  const f = ctx.definition.filters
  const sections = insightSections.filter((s) => !Array.isArray(f.sections) || (f.sections as string[]).includes(s))
  const maxHosts = typeof f.uncommonMaxHosts === 'number' ? f.uncommonMaxHosts : 3
  const period = periodRange(ctx)
  const lines = new Map<InsightSection, InsightLine[]>()
  const figures: PdfFigure[] = []
  for (const section of sections) {
    await turn()
    ctx.signal.throwIfAborted()
    if (section === 'classificationSummary') {
      const c = classificationView(await insights.classification())
      const groups: [string, { name: string | null; count: number }[]][] = [
        ['Connection', c.byConnectionStatus],
        ['Mode', c.byOperationalStatus],
        ['Status', c.byDisplayStatus],
        ['License', c.byLicenseStatus],
        ['Running mode', c.byRunningMode],
        ['OS version', c.byOsVersion.slice(0, 10)],
        ['Service version', c.byServiceVersion.slice(0, 10)],
      ]
      const out: InsightLine[] = []
      for (const [group, values] of groups) for (const v of values) out.push(line(section, { item: `${group}: ${v.name ?? '(none)'}`, count: v.count, detail: pct(v.count, c.totalAgents) }))
      for (const s of c.bySeverity) out.push(line(section, { item: `Severity: ${s.severityString}`, count: s.count, detail: pct(s.count, c.totalAgents) }))
      for (const p of c.peripheralsByClass)
        out.push(
          line(section, {
            item: `Plugged-in peripherals: ${p.devIconDescription}`,
            deviceClass: p.devIconDescription,
            count: p.present,
            detail: `${n(p.approved)} approved, ${n(p.notApproved)} not approved`,
          }),
        )
      lines.set(section, out)
      const connected = c.byConnectionStatus.find((x) => x.name === 'Connected')?.count ?? 0
      figures.push(fig('Agents', c.totalAgents), fig('Connected', connected), fig('With known attack tools', c.risk.withKnownAttackTools))
    } else if (section === 'vulnerablePeripherals') {
      const v = vulnerableView(await insights.vulnerablePeripherals())
      lines.set(
        section,
        v.data.map((m) =>
          line(section, {
            item: m.name,
            vid: m.vid,
            pid: m.pid,
            vendor: m.guiVid,
            product: m.guiPid,
            deviceClass: m.devIconDescription,
            hosts: m.hostsCount,
            count: m.presentCount,
            detail: `${m.kind === 'KnownAttackTool' ? 'Known attack tool' : 'Vulnerable device'}${m.vulnerability ? `: ${m.vulnerability}` : ''}; ${severityText(m.severity)}; ${n(m.approvedCount)} approved; hosts: ${hostNames(m.hosts, m.hostsCount)}`,
          }),
        ),
      )
      figures.push(fig('Risky models present', v.recordsTotal))
    } else if (section === 'uncommonPeripherals') {
      const u = uncommonView(await insights.uncommonPeripherals(maxHosts))
      lines.set(
        section,
        u.data.map((m) =>
          line(section, {
            item: `${m.guiVid ?? m.vid} ${m.guiPid ?? m.pid}`,
            vid: m.vid,
            pid: m.pid,
            vendor: m.guiVid,
            product: m.guiPid,
            deviceClass: m.devIconDescription,
            hosts: m.hostsCount,
            count: m.peripheralsCount,
            firstSeen: m.firstSeen,
            lastSeen: m.lastSeen,
            detail: hostNames(m.hosts, m.hostsCount),
          }),
        ),
      )
      figures.push(fig('Uncommon models', u.recordsTotal))
    } else if (section === 'whitelistViolations') {
      const w = violationsView(period.from, period.to, await insights.whitelistViolations(period.from, period.to))
      lines.set(
        section,
        w.data.map((m) =>
          line(section, {
            item: `${m.guiVid ?? m.vid} ${m.guiPid ?? m.pid}`,
            vid: m.vid,
            pid: m.pid,
            vendor: m.guiVid,
            product: m.guiPid,
            deviceClass: m.devIconDescription,
            hosts: m.hostsCount,
            count: m.violationsCount,
            firstSeen: m.firstSeen,
            lastSeen: m.lastSeen,
            detail: hostNames(m.hosts, m.hostsCount),
          }),
        ),
      )
      figures.push(
        fig(
          'Whitelist violations',
          w.data.reduce((x, m) => x + m.violationsCount, 0),
        ),
      )
    } else {
      const e = errorTotalsView(period.from, period.to, await insights.errorTotals(period.from, period.to))
      lines.set(
        section,
        e.data.map((a) =>
          line(section, {
            item: a.hostIdentifier,
            hosts: 1,
            count: a.total,
            lastSeen: a.lastErrorTime,
            detail: `${n(a.reportedErrors)} reported, ${n(a.failedCommands)} failed commands; last: ${a.lastErrorText}`,
          }),
        ),
      )
      figures.push(fig('Errors', e.totalErrors))
    }
  }
  return { sections, lines, figures: figures.slice(0, 6), period }
}

export async function insightsPdf(ctx: RunContext): Promise<PdfReport> {
  const { sections, lines, figures, period } = await insightLines(ctx)
  const zone = zoneOf(ctx.definition)
  const when = (t: string | null) => (t ? localTime(Date.parse(t), zone, false) : '')
  const model: PdfColumn<InsightLine>[] = [
    { header: 'VID', width: 5, value: (l) => l.vid },
    { header: 'PID', width: 5, value: (l) => l.pid },
    { header: 'Vendor', width: 14, value: (l) => l.vendor },
    { header: 'Product', width: 16, value: (l) => l.product },
    { header: 'Class', width: 9, value: (l) => l.deviceClass },
    { header: 'Hosts', width: 5, align: 'right', value: (l) => l.hosts },
  ]
  const columns: Record<InsightSection, PdfColumn<InsightLine>[]> = {
    classificationSummary: [
      { header: 'Group and value', width: 50, value: (l) => l.item },
      { header: 'Count', width: 10, align: 'right', value: (l) => l.count },
      { header: 'Share or detail', width: 30, value: (l) => l.detail },
    ],
    vulnerablePeripherals: [
      { header: 'Name', width: 14, value: (l) => l.item },
      ...model,
      { header: 'Present', width: 6, align: 'right', value: (l) => l.count },
      { header: 'Detail', width: 40, value: (l) => l.detail },
    ],
    uncommonPeripherals: [
      ...model,
      { header: 'Devices', width: 7, align: 'right', value: (l) => l.count },
      { header: 'First seen', width: 11, value: (l) => when(l.firstSeen) },
      { header: 'Last seen', width: 10, value: (l) => when(l.lastSeen) },
      { header: 'Hosts', width: 24, value: (l) => l.detail },
    ],
    whitelistViolations: [
      ...model,
      { header: 'Violations', width: 7, align: 'right', value: (l) => l.count },
      { header: 'First', width: 11, value: (l) => when(l.firstSeen) },
      { header: 'Last', width: 10, value: (l) => when(l.lastSeen) },
      { header: 'Hosts', width: 24, value: (l) => l.detail },
    ],
    errorTotals: [
      { header: 'Host', width: 16, value: (l) => l.item },
      { header: 'Errors', width: 6, align: 'right', value: (l) => l.count },
      { header: 'Last error', width: 11, value: (l) => when(l.lastSeen) },
      { header: 'Detail', width: 60, value: (l) => l.detail },
    ],
  }
  const nouns: Record<InsightSection, string> = { classificationSummary: 'lines', vulnerablePeripherals: 'models', uncommonPeripherals: 'models', whitelistViolations: 'models', errorTotals: 'agents' }
  const maxHosts = typeof ctx.definition.filters.uncommonMaxHosts === 'number' ? ctx.definition.filters.uncommonMaxHosts : 3
  const empty: Record<InsightSection, string> = {
    classificationSummary: 'No agent is enrolled.',
    vulnerablePeripherals: 'No peripheral of the catalogue of vulnerable devices and attack tools was reported.',
    uncommonPeripherals: `No peripheral model is plugged in on ${maxHosts} host(s) or fewer.`,
    whitelistViolations: 'No whitelist violation in the period.',
    errorTotals: 'No agent error or failed command in the period.',
  }
  const titles = { ...sectionTitles, uncommonPeripherals: `Uncommon peripherals (plugged in on ${maxHosts} host(s) or fewer)` }
  const tables: PdfTable<InsightLine>[] = sections.map((s) => ({
    title: titles[s],
    noun: nouns[s],
    columns: columns[s],
    total: lines.get(s)!.length,
    rows: lines.get(s)!,
    maxRows: PDF_MAX_ROWS,
    cutNote: CSV_NOTE,
    empty: empty[s],
    width: s === 'classificationSummary' ? 0.75 : 1,
  }))
  const usesPeriod = sections.includes('whitelistViolations') || sections.includes('errorTotals')
  return pdfShell(ctx, figures, tables, usesPeriod ? period : undefined)
}

export async function insightsCsv(ctx: RunContext): Promise<CsvContent> {
  const { sections, lines } = await insightLines(ctx)
  return {
    columns: insightCsvColumns,
    rows: (async function* () {
      for (const s of sections) yield* lines.get(s)!
    })(),
  }
}
