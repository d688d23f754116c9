// Event and audit-trail queries, the integration feeds and their exports.
import { Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { AUDIT_FIELDS, EVENT_FIELDS, type AuditTrailRow, type EventRow } from '../db/event-queries.js'
import { auditView, eventView } from '../lib/events/views.js'
import { rowOf } from '../db/sql.js'
import { auditFilter, eventFilter, givenFilters, isIncidentFetch, type AuditFilter, type EventFilter } from '../lib/events/filter.js'
import { audit } from '../lib/audit.js'
import { CSV_TYPE, csvCell } from '../lib/csv.js'
import { STREAM_CHUNK_CHARS, listAnswer, listAnswerStream, page, severityNames, sort, streamedPages, type Page, type Sort } from '../lib/listing.js'
import { pdfStream, PDF_TYPE, utcText, type PdfColumn } from '../lib/pdf.js'
import { fileStamp } from '../lib/reports/files.js'
import type { Handlers } from './types.js'

/** Rows an export holds at most (the contract's x-max-export-rows); tests lower them. */
export const exportLimits = { csv: 1_000_000, pdf: 100_000 }

/** `events-20250101T120000Z.csv`: the one form of the service's file names (see lib/reports/files.ts). */
const fileName = (prefix: string, ms: number, ext: string) => `${prefix}-${fileStamp(ms)}.${ext}`

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

// The CSV rules of lib/csv.ts, a defused formula quoted too (the contract's rule for these
// exports), written directly from the rows as arrays: csv-stringify and a view object per
// row spent about 15 µs a row, which would hold a million-row export under 70,000 rows a
// second.
const cell = (v: unknown) => csvCell(v, true)

/** ISO 8601 times, the text up to the second kept from the previous row (rows of one second share it). */
let isoSecond = NaN
let isoPrefix = ''
function isoTime(ms: number): string {
  const second = Math.floor(ms / 1000)
  if (second !== isoSecond) {
    isoSecond = second
    isoPrefix = new Date(second * 1000).toISOString().slice(0, 20)
  }
  return `${isoPrefix}${String(ms - second * 1000).padStart(3, '0')}Z`
}

type Cells = Record<string, (r: unknown[]) => unknown>
const at = <F extends readonly string[]>(fields: F) => Object.fromEntries(fields.map((f, i) => [f, i])) as Record<F[number], number>
const E = at(EVENT_FIELDS)
const A = at(AUDIT_FIELDS)
const n = (v: unknown) => v as number

/** Each CSV column of PrimeEventView from a row (peripheralIcon as a number: `-1` is not a formula). */
const eventCells: Cells = {
  eventID: (r) => r[E.id],
  creationTime: (r) => isoTime(n(r[E.created_ms])),
  creationTimeEpoch: (r) => r[E.created_ms],
  eventCode: (r) => r[E.event_code],
  severity: (r) => r[E.severity],
  severityString: (r) => severityNames[n(r[E.severity])],
  category: (r) => r[E.category],
  eventEntityID: (r) => r[E.entity_id],
  description: (r) => r[E.description],
  details: (r) => r[E.details],
  hashtags: (r) => r[E.hashtags],
  peripheralIcon: (r) => r[E.peripheral_icon],
  assetKey: (r) => r[E.asset_key],
  assetName: (r) => r[E.asset_name],
  peripheralAssetId: (r) => r[E.peripheral_asset_id],
}
/** Each CSV column of AuditTrailView (assetReference flattened) from a row. */
const auditCells: Cells = {
  auditTrailID: (r) => r[A.id],
  creationTime: (r) => isoTime(n(r[A.created_ms])),
  creationTimeEpoch: (r) => r[A.created_ms],
  severity: (r) => r[A.severity],
  severityString: (r) => severityNames[n(r[A.severity])],
  category: (r) => r[A.category],
  user: (r) => r[A.user_name],
  sourceIp: (r) => r[A.source_ip],
  description: (r) => r[A.description],
  details: (r) => r[A.details],
  operationId: (r) => r[A.operation_id],
  outcome: (r) => r[A.outcome],
  'assetReference.key': (r) => r[A.asset_key],
  'assetReference.name': (r) => r[A.asset_name],
  'assetReference.parentID': (r) => r[A.asset_parent_id],
  'assetReference.ipAddress': (r) => r[A.asset_ip],
  'assetReference.type': (r) => r[A.asset_type],
  'assetReference.subType': (r) => r[A.asset_sub_type],
  'assetReference.allAssetTypeDetail': (r) => r[A.asset_detail],
  'assetReference.icon': (r) => r[A.asset_icon],
  requestId: (r) => r[A.request_id],
}

/** The CSV text, a chunk of rows at a time: a byte-order mark (spreadsheets then read UTF-8), the header, a line per row. */
async function* csvText(columns: string[], cells: Cells, chunks: AsyncIterable<unknown[]>): AsyncGenerator<string> {
  const get = columns.map((c) => {
    const f = cells[c]
    if (!f) throw new Error(`no CSV cell for ${c}`)
    return f
  })
  yield '\ufeff' + columns.map(cell).join(',') + '\r\n'
  for await (const rows of chunks) {
    let text = ''
    for (const row of rows as unknown[][]) {
      let line = cell(get[0](row))
      for (let i = 1; i < get.length; i++) line += ',' + cell(get[i](row))
      text += line + '\r\n'
    }
    yield text
  }
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
  /** The same rows as arrays, in chunks. */
  rawChunks: (req: FastifyRequest, f: F, s: Sort, cap: number) => AsyncIterable<unknown[]>
  /** What to await before counting (the index's texts, for the events' text filters). */
  ready?: (req: FastifyRequest, f: F) => Promise<void> | undefined
  csvColumns: (req: FastifyRequest) => string[]
  csvCells: Cells
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
  rawChunks: (req, f, s, cap) => req.server.repos.eventQueries.events.rawChunks(f, s, cap),
  ready: (req, f) => req.server.repos.eventQueries.events.ready(f),
  csvColumns: (req) => Object.keys(req.server.contract.spec.components.schemas.PrimeEventView.properties),
  csvCells: eventCells,
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
  rawChunks: (req, f, s, cap) => req.server.repos.eventQueries.audit.rawChunks(f, s, cap),
  csvColumns: (req) => {
    const schemas = req.server.contract.spec.components.schemas
    return Object.keys(schemas.AuditTrailView.properties).flatMap((k) => (k === 'assetReference' ? Object.keys(schemas.AssetReference.properties).map((a) => `assetReference.${a}`) : [k]))
  },
  csvCells: auditCells,
  pdfColumns: auditPdfColumns,
}

/** Streams the matching records as a CSV or PDF file, audited with what was asked. */
async function sendExport<F extends { idTo: number; empty: boolean }, R>(req: FastifyRequest, reply: FastifyReply, spec: ExportSpec<F, R>, format: 'csv' | 'pdf') {
  const body = (req.body ?? null) as Record<string, unknown> | null
  const filter = spec.filter(body)
  await spec.ready?.(req, filter)
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
  const stream =
    format === 'csv'
      ? Readable.from(csvText(spec.csvColumns(req), spec.csvCells, spec.rawChunks(req, filter, order, cap)))
      : pdfStream({
          title: `${spec.title} - exported by ${req.principal?.name ?? 'unknown'}`,
          filters,
          sortedBy: sortBy,
          generatedMs: now,
          total: matched,
          noun: spec.what,
          columns: spec.pdfColumns,
          rows: spec.rows(req, filter, order, cap),
          maxRows: cap,
        })
  return reply
    .header('content-disposition', `attachment; filename="${name}"`)
    .header('x-records-filtered', String(matched))
    .header('x-export-truncated', String(truncated))
    .type(format === 'csv' ? CSV_TYPE : PDF_TYPE)
    .send(stream)
}

const eventOf = rowOf(EVENT_FIELDS) as unknown as (r: unknown[]) => EventRow
const auditOf = rowOf(AUDIT_FIELDS) as unknown as (r: unknown[]) => AuditTrailRow

/** Chunks of rows as arrays, as JSON objects joined by commas, about STREAM_CHUNK_CHARS at a time (a streamed page's data). */
async function* jsonRows(chunks: AsyncIterable<unknown[]>, view: (r: unknown[]) => unknown): AsyncGenerator<string> {
  for await (const rows of chunks) {
    let text = ''
    for (let i = 0; i < rows.length; i++) {
      text += (text ? ',' : '') + JSON.stringify(view(rows[i] as unknown[]))
      if (text.length >= STREAM_CHUNK_CHARS) {
        yield text
        text = ''
      }
    }
    if (text) yield text
  }
}
const eventJson = (r: unknown[]) => eventView(eventOf(r))
const auditJson = (r: unknown[]) => auditView(auditOf(r))

/** The newest first: the order of the feeds' pages. */
const NEWEST_EVENTS: Sort = { field: 'eventID', direction: 'desc' }

/** A page of events, of the list or of the feed; pages above streamedPages.above rows are streamed. */
async function sendEvents(req: FastifyRequest, reply: FastifyReply, { pageSize, offset }: Page, filter: EventFilter, order: Sort, feed: boolean) {
  const events = req.server.repos.eventQueries.events
  await events.ready(filter)
  if (pageSize > streamedPages.above) {
    const { total, filtered, chunks } = events.pageChunks(filter, order, pageSize, offset, feed)
    return reply.type('application/json').send(listAnswerStream(total, filtered, jsonRows(chunks, eventJson)))
  }
  const { total, filtered, rows } = feed ? events.feed(filter, order, pageSize, offset) : events.list(filter, order, pageSize, offset)
  return listAnswer(total, filtered, rows.map(eventView))
}

/** A page of audit records, of the list or of the feed; pages above streamedPages.above rows are streamed. */
async function sendAudit(req: FastifyRequest, reply: FastifyReply, { pageSize, offset }: Page, filter: AuditFilter, order: Sort, feed: boolean) {
  const records = req.server.repos.eventQueries.audit
  if (pageSize > streamedPages.above) {
    const { total, filtered, chunks } = records.pageChunks(filter, order, pageSize, offset, feed)
    return reply.type('application/json').send(listAnswerStream(total, filtered, jsonRows(chunks, auditJson)))
  }
  const { total, filtered, rows } = feed ? records.feed(filter, order, pageSize, offset) : records.list(filter, order, pageSize, offset)
  return listAnswer(total, filtered, rows.map(auditView))
}

export const eventsHandlers: Handlers<
  'getEvents' | 'getEventsIntegration' | 'getAuditTrails' | 'getAuditsIntegration' | 'exportGetEvents' | 'exportGetEventsPdf' | 'exportGetAudit' | 'exportGetAuditPdf'
> = {
  async getEvents(req, reply) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const pg = page(req.query)
    const filter = eventFilter(req.query)
    // The SOAR integration's incident fetch gets the feed's page (see isIncidentFetch).
    if (isIncidentFetch(req.query, order)) return sendEvents(req, reply, pg, filter, NEWEST_EVENTS, true)
    return sendEvents(req, reply, pg, filter, order, false)
  },

  async getEventsIntegration(req, reply) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    return sendEvents(req, reply, page(req.query), eventFilter(req.query), order, true)
  },

  async getAuditTrails(req, reply) {
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    return sendAudit(req, reply, page(req.query), auditFilter(req.query), order, false)
  },

  async getAuditsIntegration(req, reply) {
    return sendAudit(req, reply, page(req.query), auditFilter(req.query), { field: 'auditTrailID', direction: 'desc' }, true)
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
