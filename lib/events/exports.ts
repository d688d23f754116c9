// The export files of events and audit records (CSV and PDF), written from the rows as they
// stream from the database.
import { Readable } from 'node:stream'
import { AUDIT_FIELDS, type AuditTrailRow, EVENT_FIELDS, type EventRow } from './ports.js'
import { CSV_TYPE, csvCell } from '../csv.js'
import { severityNames } from '../listing.js'
import { PDF_TYPE, utcText, type PdfColumn } from '../pdf.js'
import { fileStamp } from '../reports/files.js'
import { iso } from '../time.js'

/** Rows an export holds at most (the contract's x-max-export-rows); tests lower them. */
export const exportLimits = { csv: 1_000_000, pdf: 100_000 }

export type ExportFormat = 'csv' | 'pdf'
export const exportType = (format: ExportFormat) => (format === 'csv' ? CSV_TYPE : PDF_TYPE)

/** `events-20250101T120000Z.csv`: the one form of the service's file names (see lib/reports/files.ts). */
export const exportFileName = (prefix: string, ms: number, ext: string) => `${prefix}-${fileStamp(ms)}.${ext}`

const timeText = (ms: number) => utcText(ms).replace(' UTC', '')

export const eventPdfColumns: PdfColumn<EventRow>[] = [
  { header: 'Time (UTC)', width: 12.5, value: (e) => timeText(e.created_ms) },
  { header: 'Code', width: 6.5, value: (e) => e.event_code },
  { header: 'Severity', width: 8, value: (e) => severityNames[e.severity] },
  { header: 'Category', width: 6.5, value: (e) => e.category },
  { header: 'Source', width: 19.5, value: (e) => e.entity_id },
  { header: 'Description', width: 17.5, value: (e) => e.description },
  { header: 'Details', width: 50, value: (e) => e.details },
]

export const auditPdfColumns: PdfColumn<AuditTrailRow>[] = [
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
/** A number's cell as csvCell writes it (never quoted or defused), without its checks. */
const num = (v: unknown) => (typeof v === 'number' ? String(v) : cell(v))
/** A time's cell: ISO 8601 as every answer writes it (lib/time.ts). */
const time = (v: unknown) => cell(iso(v as number))
const severityCells = severityNames.map(cell)
const severityCell = (v: unknown) => severityCells[v as number] ?? ''

/** Each column's cell, as CSV text (quoted and defused as needed), from a row as an array. */
export type Cells = Record<string, (r: unknown[]) => string>
const at = <F extends readonly string[]>(fields: F) => Object.fromEntries(fields.map((f, i) => [f, i])) as Record<F[number], number>
const E = at(EVENT_FIELDS)
const A = at(AUDIT_FIELDS)

/** Each CSV column of PrimeEventView from a row (peripheralIcon as a number: `-1` is not a formula). */
export const eventCells: Cells = {
  eventID: (r) => num(r[E.id]),
  creationTime: (r) => time(r[E.created_ms]),
  creationTimeEpoch: (r) => num(r[E.created_ms]),
  eventCode: (r) => cell(r[E.event_code]),
  severity: (r) => num(r[E.severity]),
  severityString: (r) => severityCell(r[E.severity]),
  category: (r) => cell(r[E.category]),
  eventEntityID: (r) => cell(r[E.entity_id]),
  description: (r) => cell(r[E.description]),
  details: (r) => cell(r[E.details]),
  hashtags: (r) => cell(r[E.hashtags]),
  peripheralIcon: (r) => num(r[E.peripheral_icon]),
  assetKey: (r) => cell(r[E.asset_key]),
  assetName: (r) => cell(r[E.asset_name]),
  peripheralAssetId: (r) => cell(r[E.peripheral_asset_id]),
}
/** Each CSV column of AuditTrailView (assetReference flattened) from a row. */
export const auditCells: Cells = {
  auditTrailID: (r) => num(r[A.id]),
  creationTime: (r) => time(r[A.created_ms]),
  creationTimeEpoch: (r) => num(r[A.created_ms]),
  severity: (r) => num(r[A.severity]),
  severityString: (r) => severityCell(r[A.severity]),
  category: (r) => cell(r[A.category]),
  user: (r) => cell(r[A.user_name]),
  sourceIp: (r) => cell(r[A.source_ip]),
  description: (r) => cell(r[A.description]),
  details: (r) => cell(r[A.details]),
  operationId: (r) => cell(r[A.operation_id]),
  outcome: (r) => cell(r[A.outcome]),
  'assetReference.key': (r) => cell(r[A.asset_key]),
  'assetReference.name': (r) => cell(r[A.asset_name]),
  'assetReference.parentID': (r) => cell(r[A.asset_parent_id]),
  'assetReference.ipAddress': (r) => cell(r[A.asset_ip]),
  'assetReference.type': (r) => cell(r[A.asset_type]),
  'assetReference.subType': (r) => cell(r[A.asset_sub_type]),
  'assetReference.allAssetTypeDetail': (r) => cell(r[A.asset_detail]),
  'assetReference.icon': (r) => num(r[A.asset_icon]),
  requestId: (r) => cell(r[A.request_id]),
}

/**
 * Characters of CSV in each piece of the stream, about. The lines of a piece are joined once
 * and encoded once: a piece of a whole chunk of rows (300 KB), built by appending, went to V8's
 * large-object space, and flattening it for the socket took as long as writing the lines.
 */
const PIECE_CHARS = 64 * 1024

/** The CSV bytes, a piece at a time: a byte-order mark (spreadsheets then read UTF-8), the header, a line per row. */
async function* csvText(columns: string[], cells: Cells, chunks: AsyncIterable<unknown[]>): AsyncGenerator<Buffer> {
  const get = columns.map((c) => {
    const f = cells[c]
    if (!f) throw new Error(`no CSV cell for ${c}`)
    return f
  })
  yield Buffer.from('\ufeff' + columns.map(cell).join(',') + '\r\n')
  let lines: string[] = []
  let chars = 0
  for await (const rows of chunks) {
    for (const row of rows as unknown[][]) {
      let line = get[0](row)
      for (let i = 1; i < get.length; i++) line += ',' + get[i](row)
      line += '\r\n'
      lines.push(line)
      chars += line.length
      if (chars >= PIECE_CHARS) {
        yield Buffer.from(lines.join(''))
        lines = []
        chars = 0
      }
    }
  }
  if (lines.length) yield Buffer.from(lines.join(''))
}

/** The CSV file of rows as arrays, columns in the given order. */
export const csvFile = (columns: string[], cells: Cells, chunks: AsyncIterable<unknown[]>): Readable => Readable.from(csvText(columns, cells, chunks))

interface Schemas {
  PrimeEventView: { properties?: object }
  AuditTrailView: { properties?: object }
  AssetReference: { properties?: object }
}

/** The CSV columns of each export, from the contract: PrimeEventView's, and AuditTrailView's with assetReference flattened. */
export function exportColumns(schemas: Schemas): { events: string[]; audit: string[] } {
  const keys = (s: { properties?: object }) => Object.keys(s.properties ?? {})
  return {
    events: keys(schemas.PrimeEventView),
    audit: keys(schemas.AuditTrailView).flatMap((k) => (k === 'assetReference' ? keys(schemas.AssetReference).map((a) => `assetReference.${a}`) : [k])),
  }
}
