// What every report's content shares: the definition and run it is made for, the cover
// lines, times in the report's zone and the small helpers of the builders (content-*.ts).
import { DateTime } from 'luxon'
import { severityNames } from '../listing.js'
import type { ReportSources } from './ports.js'
import type { PdfFigure, PdfReport, PdfTable } from './pdf.js'
import { frequencyTitles, type Schedule } from './schedule.js'
import { filterLines, periodOf, periods, periodTitle, typeInfo, type Filters, type ReportFormat, type ReportType } from './types.js'

export const PDF_MAX_ROWS = 5000
export const CSV_MAX_ROWS = 1_000_000
export const DAY = 86_400_000
export const TOP = 20
export const CSV_NOTE = 'a CSV report holds every one'

/** A definition as a run uses it (the snapshot taken when the run was queued). */
export interface Definition {
  id: string
  name: string
  description: string | null
  type: ReportType
  format: ReportFormat
  filters: Filters
  schedule: Schedule | null
  recipients: string[]
  sender: string | null
}

export interface RunContext {
  /** Where the content is read from. */
  sources: ReportSources
  definition: Definition
  runId: string
  trigger: 'schedule' | 'request' | 'catchUp'
  requestedBy: string | null
  dueMs: number
  startedMs: number
  signal: AbortSignal
}

export interface CsvContent {
  columns: string[]
  rows: AsyncIterable<object>
}

export const severityText = (s: number) => severityNames[s] ?? String(s)
export const n = (x: number) => x.toLocaleString('en-US')
export const pct = (part: number, whole: number) => (whole > 0 ? `${((part / whole) * 100).toFixed(1)} %` : '')

/** A time in the report's zone: `2025-01-13 07:30:00` (the zone is named in the header or next to it). */
export function localTime(ms: number, zone: string, seconds = true): string {
  return DateTime.fromMillis(ms, { zone }).toFormat(seconds ? 'yyyy-MM-dd HH:mm:ss' : 'yyyy-MM-dd HH:mm')
}

/** `2025-01-13 07:30 Europe/Paris (06:30 UTC)`, or `2025-01-13 06:30 UTC`. */
export function timeText(ms: number, zone: string): string {
  const utc = `${localTime(ms, 'UTC', false)} UTC`
  return zone === 'UTC' ? utc : `${localTime(ms, zone, false)} ${zone} (${utc.slice(11)})`
}

const ordinal = (d: number) => `${d}${d % 10 === 1 && d !== 11 ? 'st' : d % 10 === 2 && d !== 12 ? 'nd' : d % 10 === 3 && d !== 13 ? 'rd' : 'th'}`

/** The schedule as a sentence. */
export function scheduleText(s: Schedule | null): string {
  if (!s) return 'On request only'
  const at = `at ${s.timeOfDay} (${s.timeZone})`
  switch (s.frequency) {
    case 'once':
      return `Once, on ${s.date} ${at}`
    case 'daily':
      return `${frequencyTitles.daily} ${at}`
    case 'weekly':
      return `Every ${s.dayOfWeek} ${at}`
    case 'monthly':
      return `On the ${ordinal(s.dayOfMonth!)} of every month ${at}${s.dayOfMonth! > 28 ? ', or its last day when shorter' : ''}`
  }
}

export const zoneOf = (d: Definition) => d.schedule?.timeZone ?? 'UTC'

/** The period a digest covers, ending when the run started. */
export function periodRange(ctx: RunContext): { from: number; to: number; title: string } {
  const p = periodOf(ctx.definition.filters, ctx.definition.schedule?.frequency ?? null)
  return { from: ctx.startedMs - periods[p] * DAY, to: ctx.startedMs, title: periodTitle(p) }
}

const triggerText = (ctx: RunContext) =>
  ctx.trigger === 'request' ? `Requested by ${ctx.requestedBy ?? 'a user'}` : ctx.trigger === 'catchUp' ? `Catch-up of the run due ${timeText(ctx.dueMs, zoneOf(ctx.definition))}` : 'Scheduled'

/** The cover lines every report has. */
function cover(ctx: RunContext, period?: { from: number; to: number; title: string }): [string, string][] {
  const d = ctx.definition
  const zone = zoneOf(d)
  const lines: [string, string][] = []
  if (period) lines.push(['Period', `${period.title}: ${timeText(period.from, zone)} to ${timeText(period.to, zone)}`])
  const filters = filterLines(d.type, d.filters)
  if (filters.length === 0) lines.push(['Filters', 'None'])
  filters.forEach(([label, value], i) => lines.push([i === 0 ? 'Filters' : '', `${label}: ${value}`]))
  lines.push(['Schedule', scheduleText(d.schedule)])
  lines.push(['Generated', `${timeText(ctx.startedMs, zone)} - ${triggerText(ctx)}`])
  lines.push(['Times shown in', zone === 'UTC' ? 'UTC' : `${zone} (the schedule's time zone)`])
  return lines
}

export function pdfShell(ctx: RunContext, figures: PdfFigure[], tables: PdfTable[], period?: { from: number; to: number; title: string }): PdfReport {
  const d = ctx.definition
  return {
    title: d.name,
    subtitle: `${typeInfo[d.type].title} report`,
    description: d.description ?? typeInfo[d.type].description,
    info: cover(ctx, period),
    figures,
    tables,
    footer: `${d.name} - ${typeInfo[d.type].title} - generated ${timeText(ctx.startedMs, zoneOf(d))}`,
  }
}

export const fig = (label: string, value: number | string): PdfFigure => ({ label, value: typeof value === 'number' ? n(value) : value })

export async function* take<T>(rows: AsyncIterable<T>, max: number): AsyncGenerator<T> {
  let i = 0
  for await (const row of rows) {
    if (i++ >= max) return
    yield row
  }
}
