// Event and audit rows as the contract's answers (PrimeEventView, AuditTrailView): each
// shape is mapped here, once, for the lists, streamed pages, exports, feeds and alarms.
import type { components } from '../../generated/openapi.js'
import { AUDIT_FIELDS, EVENT_FIELDS } from '../../db/event-queries.js'
import { rowOf } from '../../db/sql.js'
import type { Readable } from 'node:stream'
import { listAnswerJson, listAnswerStream, severityNames, STREAM_CHUNK_CHARS } from '../listing.js'
import type { AuditTrailRow, EventRow } from './ports.js'
import { iso } from '../time.js'

type EventView = components['schemas']['PrimeEventView']
type AuditView = components['schemas']['AuditTrailView']
type Asset = AuditView['assetReference']

/** An event as the lists show it (PrimeEventView). */
export function eventView(r: EventRow): EventView {
  return {
    eventID: r.id,
    creationTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    eventCode: r.event_code,
    severity: r.severity,
    severityString: severityNames[r.severity],
    category: r.category,
    eventEntityID: r.entity_id,
    description: r.description,
    details: r.details,
    hashtags: r.hashtags,
    peripheralIcon: String(r.peripheral_icon),
    assetKey: r.asset_key,
    assetName: r.asset_name,
    peripheralAssetId: r.peripheral_asset_id,
  }
}

/** An audit record as the lists show it (AuditTrailView). */
export function auditView(r: AuditTrailRow): AuditView {
  return {
    auditTrailID: r.id,
    creationTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    severity: r.severity,
    severityString: severityNames[r.severity],
    category: r.category,
    user: r.user_name,
    sourceIp: r.source_ip,
    description: r.description,
    details: r.details,
    operationId: r.operation_id,
    outcome: r.outcome,
    assetReference: {
      key: r.asset_key,
      name: r.asset_name,
      parentID: r.asset_parent_id,
      ipAddress: r.asset_ip,
      type: r.asset_type as Asset['type'],
      subType: r.asset_sub_type as Asset['subType'],
      allAssetTypeDetail: r.asset_detail as Asset['allAssetTypeDetail'],
      icon: r.asset_icon,
    },
    requestId: r.request_id,
  }
}

const eventOf = rowOf(EVENT_FIELDS) as unknown as (r: unknown[]) => EventRow
const auditOf = rowOf(AUDIT_FIELDS) as unknown as (r: unknown[]) => AuditTrailRow

const str = JSON.stringify
const finite = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v)

/**
 * An event row (an array of EVENT_FIELDS) as the JSON text of its view, written directly:
 * the same bytes as `JSON.stringify(eventView(row))` (same keys in the same order, texts
 * through JSON.stringify), without the object (a poller's page of 10,000 is 2.5 MB). A row
 * the writer does not expect (a cell missing, a number that JSON writes as null) takes the
 * view's path, so the text is the view's whatever the row holds.
 */
export function eventJson(r: unknown[]): string {
  const id = r[0]
  const ms = r[1]
  const severity = r[3]
  const icon = r[9]
  const name = typeof severity === 'number' ? severityNames[severity] : undefined
  if (!finite(id) || !finite(ms) || name === undefined || typeof icon !== 'number' || r.length !== 13 || r.includes(undefined)) return str(eventView(eventOf(r)))
  return (
    '{"eventID":' +
    id +
    ',"creationTime":"' +
    iso(ms) +
    '","creationTimeEpoch":' +
    ms +
    ',"eventCode":' +
    str(r[2]) +
    ',"severity":' +
    severity +
    ',"severityString":"' +
    name +
    '","category":' +
    str(r[4]) +
    ',"eventEntityID":' +
    str(r[5]) +
    ',"description":' +
    str(r[6]) +
    ',"details":' +
    str(r[7]) +
    ',"hashtags":' +
    str(r[8]) +
    ',"peripheralIcon":"' +
    icon +
    '","assetKey":' +
    str(r[10]) +
    ',"assetName":' +
    str(r[11]) +
    ',"peripheralAssetId":' +
    str(r[12]) +
    '}'
  )
}

/** An audit row (an array of AUDIT_FIELDS) as the JSON text of its view. */
export const auditJson = (r: unknown[]) => str(auditView(auditOf(r)))

/** Rows as JSON objects joined by commas, about STREAM_CHUNK_CHARS at a time (a streamed page's data). */
async function* jsonRows(chunks: AsyncIterable<unknown[]>, json: (r: unknown[]) => string): AsyncGenerator<string> {
  for await (const rows of chunks) {
    let text = ''
    for (let i = 0; i < rows.length; i++) {
      text += (text ? ',' : '') + json(rows[i] as unknown[])
      if (text.length >= STREAM_CHUNK_CHARS) {
        yield text
        text = ''
      }
    }
    if (text) yield text
  }
}

/** Rows as a JSON array, one string. */
function jsonArray(rows: unknown[][], json: (r: unknown[]) => string): string {
  if (rows.length === 0) return '[]'
  const parts = new Array<string>(rows.length)
  for (let i = 0; i < rows.length; i++) parts[i] = json(rows[i])
  return '[' + parts.join(',') + ']'
}

interface RecordPage {
  total: number
  filtered: number
  /** The rows as arrays of the fields. */
  rows: unknown[][]
  /** A page too large to build whole: its rows, a chunk at a time. */
  chunks?: AsyncIterable<unknown[]>
}

/**
 * A page as the list's answer, as JSON text (the bytes JSON.stringify writes for the
 * answer's object): one string, or a stream of it for a large page.
 */
const answerOf = (p: RecordPage, json: (r: unknown[]) => string): string | Readable =>
  p.chunks ? listAnswerStream(p.total, p.filtered, jsonRows(p.chunks, json)) : listAnswerJson(p.total, p.filtered, jsonArray(p.rows, json))

/** A page of events as the list's answer (JSON text, or the stream of it). */
export const eventsAnswer = (p: RecordPage) => answerOf(p, eventJson)

/** A page of audit records as the list's answer (JSON text, or the stream of it). */
export const auditAnswer = (p: RecordPage) => answerOf(p, auditJson)
