// What each report type contains: its cover figures and tables (PDF) or its rows (CSV),
// read from the repositories the lists and insights use, in steps. Each kind of report is
// built in a module of its own (content-inventories.ts, content-digests.ts,
// content-insights.ts) from what content-common.ts shares.
import type { PdfReport } from './pdf.js'
import type { ReportType } from './types.js'
import type { CsvContent, RunContext } from './content-common.js'
import { auditCsv, auditPdf, eventsCsv, eventsPdf } from './content-digests.js'
import { insightsCsv, insightsPdf } from './content-insights.js'
import { agentsCsv, agentsPdf, peripheralsCsv, peripheralsPdf } from './content-inventories.js'

export { CSV_MAX_ROWS, type CsvContent, type Definition, localTime, PDF_MAX_ROWS, periodRange, type RunContext, scheduleText, timeText } from './content-common.js'

const builders: Record<ReportType, { pdf: (ctx: RunContext) => Promise<PdfReport>; csv: (ctx: RunContext) => CsvContent | Promise<CsvContent> }> = {
  agentsInventory: { pdf: agentsPdf, csv: agentsCsv },
  peripheralsInventory: { pdf: peripheralsPdf, csv: peripheralsCsv },
  riskInsightsSummary: { pdf: insightsPdf, csv: insightsCsv },
  eventsDigest: { pdf: eventsPdf, csv: eventsCsv },
  auditTrailDigest: { pdf: auditPdf, csv: auditCsv },
}

export const buildPdf = (ctx: RunContext) => builders[ctx.definition.type].pdf(ctx)
export const buildCsv = async (ctx: RunContext) => builders[ctx.definition.type].csv(ctx)
