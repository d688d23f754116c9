// Event and audit rows as the contract's answers (PrimeEventView, AuditTrailView): each
// shape is mapped here, once, for the lists, streamed pages, exports, feeds and alarms.
import type { components } from '../../generated/openapi.js'
import type { AuditTrailRow, EventRow } from '../../db/event-queries.js'
import { severityNames } from '../listing.js'
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
