// Event and audit-trail queries, the integration feeds and their exports.
import { PassThrough, type Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { auditView, eventView, type AuditTrailRow, type EventRow } from '../db/event-queries.js'
import { auditFilter, eventFilter, givenFilters, type AuditFilter, type EventFilter } from '../lib/event-filter.js'
import { audit } from '../lib/audit.js'
import { csvStream, CSV_TYPE } from '../lib/csv.js'
import { listAnswer, page, severityNames, sort, type Sort } from '../lib/listing.js'
import { pdfStream, PDF_TYPE, utcText, type PdfColumn } from '../lib/pdf.js'
import { iso } from '../lib/time.js'
import type { Handlers } from './types.js'

/** Rows an export holds at most (the contract's x-max-export-rows); tests lower them. */
export const exportLimits = { csv: 1_000_000, pdf: 100_000 }

/** `events-20250101-120000.csv`: the UTC time in export file names. */
const fileName = (prefix: string, ms: number, ext: string) => `${prefix}-${iso(ms).slice(0, 19).replace(/-/g, '').replace('T', '-').replace(/:/g, '')}.${ext}`

const timeText = (ms: number) => utcText(ms).replace(' UTC', '')

const eventPdfColumns: PdfColumn<EventRow>[] = [
  { header: 'Time (UTC)', width: 12.5, value: (e) => timeText(e.created_ms) },
  { header: 'Code', width: 6.5, value: (e) => e.event_code },
  { header: 'Severity', width: 8, value: (e) => severityNames[e.severity] },
  { header: 'Category', width: 6.5, value: (e) => e.category },
  { header: 'Source', width: 19.5, value: (e) => e.entity_id },
  { header: 'Description', width: 17.5, value: (e) => e.description },
  { header: 'Details', width: 50, value: (e) => e.details },
]

const auditPdfColumns: PdfColumn<AuditTrailRow>[] = [
  { header: 'Time (UTC)', width: 13, value: (a) => timeText(a.created_ms) },
  { header: 'Severity', width: 8, value: (a) => severityNames[a.severity] },
  { header: 'Category', width: 11, value: (a) => a.category },
  { header: 'User', width: 11, value: (a) => a.user_name },
  { header: 'Source address', width: 10, value: (a) => a.source_ip },
  { header: 'Outcome', width: 7, value: (a) => a.outcome },
  { header: 'Asset', width: 15, value: (a) => [a.asset_type !== 'Unknown' ? a.asset_type : null, a.asset_name ?? a.asset_key].filter(Boolean).join(': ') || null },
  { header: 'Description', width: 45, value: (a) => a.description },
]

/** Peripheral icons as numbers in CSV cells: `-1` stays a number, not a defused formula. */
const eventCsvRow = (r: EventRow) => ({ ...eventView(r), peripheralIcon: r.peripheral_icon })

async function* mapped<R, T>(rows: AsyncIterable<R>, f: (r: R) => T): AsyncGenerator<T> {
  for await (const r of rows) yield f(r)
}

/** The CSV with a UTF-8 byte-order mark first (spreadsheets then read it as UTF-8). */
function withBom(csv: Readable): Readable {
  const out = new PassThrough()
  out.write('\ufeff')
  csv.on('error', (err) => out.destroy(err))
  csv.pipe(out)
  return out
}

interface ExportSpec<F, R> {
  what: 'events' | 'audit records'
  prefix: string
  title: string
  listOp: 'getEvents' | 'getAuditTrails'
  filter: (body: Record<string, unknown> | null) => F
  /** The newest record's id: an export holds the records written before it started. */
  last: (req: FastifyRequest) => number
  count: (req: FastifyRequest, f: F) => number
  rows: (req: FastifyRequest, f: F, s: Sort, cap: number) => AsyncIterable<R>
  csvColumns: (req: FastifyRequest) => string[]
  csvRow: (r: R) => object
  pdfColumns: PdfColumn<R>[]
}

const eventsExport: ExportSpec<EventFilter, EventRow> = {
  what: 'events',
  prefix: 'events',
  title: 'Events',
  listOp: 'getEvents',
  filter: (body) => eventFilter(body, 'body'),
  last: (req) => req.server.repos.eventQueries.events.lastId(),
  count: (req, f) => req.server.repos.eventQueries.events.count(f),
  rows: (req, f, s, cap) => req.server.repos.eventQueries.events.iterate(f, s, cap),
  csvColumns: (req) => Object.keys(req.server.contract.spec.components.schemas.PrimeEventView.properties),
  csvRow: eventCsvRow,
  pdfColumns: eventPdfColumns,
}

const auditExport: ExportSpec<AuditFilter, AuditTrailRow> = {
  what: 'audit records',
  prefix: 'audit-trails',
  title: 'Audit trail',
  listOp: 'getAuditTrails',
  filter: (body) => auditFilter(body, 'body'),
  last: (req) => req.server.repos.eventQueries.audit.lastId(),
  count: (req, f) => req.server.repos.eventQueries.audit.count(f),
  rows: (req, f, s, cap) => req.server.repos.eventQueries.audit.iterate(f, s, cap),
  csvColumns: (req) => {
    const schemas = req.server.contract.spec.components.schemas
    return Object.keys(schemas.AuditTrailView.properties).flatMap((k) =>
      k === 'assetReference' ? Object.keys(schemas.AssetReference.properties).map((a) => `assetReference.${a}`) : [k],
    )
  },
  csvRow: auditView,
  pdfColumns: auditPdfColumns,
}

/** Streams the matching records as a CSV or PDF file, audited with what was asked. */
function sendExport<F extends { idTo: number; empty: boolean }, R>(req: FastifyRequest, reply: FastifyReply, spec: ExportSpec<F, R>, format: 'csv' | 'pdf') {
  const body = (req.body ?? null) as Record<string, unknown> | null
  const filter = spec.filter(body)
  // The records of the moment the export starts: the count in the headers is the file's
  // (and this export's own audit record, written next, is not in it).
  filter.idTo = Math.min(filter.idTo, spec.last(req))
  filter.empty ||= filter.idTo < 1
  const order = sort(req.server.contract.operations.get(spec.listOp)!, (body?.SortBy as string | null | undefined) ?? undefined, 'SortBy', 'body')
  const cap = exportLimits[format]
  const now = Date.now()
  const matched = spec.count(req, filter)
  const truncated = matched > cap
  const name = fileName(spec.prefix, now, format)
  const filters = givenFilters(body)
  const sortBy = `${order.field}_${order.direction}`
  audit(req, {
    description: `Exported ${Math.min(matched, cap)} ${spec.what} as ${format.toUpperCase()} (${name})${truncated ? `; ${matched} matched, cut to ${cap}` : ''}`,
    details: { format, fileName: name, records: Math.min(matched, cap), matched, truncated, filters: Object.fromEntries(filters), sortBy },
  })
  const rows = spec.rows(req, filter, order, cap)
  const stream = format === 'csv'
    ? withBom(csvStream(spec.csvColumns(req), mapped(rows, spec.csvRow)))
    : pdfStream({
        title: `${spec.title} - exported by ${req.principal?.name ?? 'unknown'}`,
        filters,
        sortedBy: sortBy,
        generatedMs: now,
        total: matched,
        noun: spec.what,
        columns: spec.pdfColumns,
        rows,
        maxRows: cap,
      })
  return reply
    .header('content-disposition', `attachment; filename="${name}"`)
    .header('x-records-filtered', String(matched))
    .header('x-export-truncated', String(truncated))
    .type(format === 'csv' ? CSV_TYPE : PDF_TYPE)
    .send(stream)
}

export const eventsHandlers: Handlers<
  'getEvents' | 'getEventsIntegration' | 'getAuditTrails' | 'getAuditsIntegration' | 'exportGetEvents' | 'exportGetEventsPdf' | 'exportGetAudit' | 'exportGetAuditPdf'
> = {
  async getEvents(req) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const { pageSize, offset } = page(req.query)
    const { total, filtered, rows } = req.server.repos.eventQueries.events.list(eventFilter(req.query), order, pageSize, offset)
    return listAnswer(total, filtered, rows.map(eventView))
  },

  async getEventsIntegration(req) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const { pageSize, offset } = page(req.query)
    const { total, filtered, rows } = req.server.repos.eventQueries.events.feed(eventFilter(req.query), order, pageSize, offset)
    return listAnswer(total, filtered, rows.map(eventView))
  },

  async getAuditTrails(req) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const { pageSize, offset } = page(req.query)
    const { total, filtered, rows } = req.server.repos.eventQueries.audit.list(auditFilter(req.query), order, pageSize, offset)
    return listAnswer(total, filtered, rows.map(auditView))
  },

  async getAuditsIntegration(req) {
    const { pageSize, offset } = page(req.query)
    const order: Sort = { field: 'auditTrailID', direction: 'desc' }
    const { total, filtered, rows } = req.server.repos.eventQueries.audit.feed(auditFilter(req.query), order, pageSize, offset)
    return listAnswer(total, filtered, rows.map(auditView))
  },

  async exportGetEvents(req, reply) {
    return sendExport(req, reply, eventsExport, 'csv')
  },

  async exportGetEventsPdf(req, reply) {
    return sendExport(req, reply, eventsExport, 'pdf')
  },

  async exportGetAudit(req, reply) {
    return sendExport(req, reply, auditExport, 'csv')
  },

  async exportGetAuditPdf(req, reply) {
    return sendExport(req, reply, auditExport, 'pdf')
  },
}
