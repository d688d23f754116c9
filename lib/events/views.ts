// Event and audit rows as the contract's answers (PrimeEventView, AuditTrailView): each
// shape is mapped here, once, for the lists, streamed pages, exports, feeds and alarms.
import type { components } from '../../generated/openapi.js'
import { AUDIT_FIELDS, EVENT_FIELDS } from '../../db/event-queries.js'
import { rowOf } from '../../db/sql.js'
import { listAnswer, listAnswerStream, severityNames, STREAM_CHUNK_CHARS } from '../listing.js'
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

interface RecordPage<R> {
  total: number
  filtered: number
  rows: R[]
  /** A page too large to build whole: its rows as arrays of the fields, a chunk at a time. */
  chunks?: AsyncIterable<unknown[]>
}

/** A page of events as the list's answer: an object, or the stream of one. */
export const eventsAnswer = (p: RecordPage<EventRow>) => (p.chunks ? listAnswerStream(p.total, p.filtered, jsonRows(p.chunks, eventJson)) : listAnswer(p.total, p.filtered, p.rows.map(eventView)))

/** A page of audit records as the list's answer: an object, or the stream of one. */
export const auditAnswer = (p: RecordPage<AuditTrailRow>) => (p.chunks ? listAnswerStream(p.total, p.filtered, jsonRows(p.chunks, auditJson)) : listAnswer(p.total, p.filtered, p.rows.map(auditView)))
