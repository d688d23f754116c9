// The export files of events and audit records (CSV and PDF), written from the rows as they
// stream from the database.
import { Readable } from 'node:stream'
import { AUDIT_FIELDS, EVENT_FIELDS } from '../../db/event-queries.js'
import { CSV_TYPE, csvCell } from '../csv.js'
import { severityNames } from '../listing.js'
import { PDF_TYPE, utcText, type PdfColumn } from '../pdf.js'
import { fileStamp } from '../reports/files.js'
import type { AuditTrailRow, EventRow } from './ports.js'

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

export type Cells = Record<string, (r: unknown[]) => unknown>
const at = <F extends readonly string[]>(fields: F) => Object.fromEntries(fields.map((f, i) => [f, i])) as Record<F[number], number>
const E = at(EVENT_FIELDS)
const A = at(AUDIT_FIELDS)
const n = (v: unknown) => v as number

/** Each CSV column of PrimeEventView from a row (peripheralIcon as a number: `-1` is not a formula). */
export const eventCells: Cells = {
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
export const auditCells: Cells = {
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
