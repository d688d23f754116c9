// The rows of events and audit records as every read returns them (db/event-engine/event-queries.ts,
// db/retention.ts, db/alarms.ts), and their columns in order (rows read as arrays follow it).
import type { EventCategory } from './events.js'
import type { auditCategories } from './filters.js'

export interface EventRow {
  id: number
  created_ms: number
  event_code: string
  severity: number
  category: EventCategory
  entity_id: string
  description: string
  details: string
  hashtags: string | null
  peripheral_icon: number
  asset_key: string | null
  asset_name: string | null
  peripheral_asset_id: string | null
}

export interface AuditTrailRow {
  id: number
  created_ms: number
  severity: number
  category: (typeof auditCategories)[number]
  user_name: string | null
  source_ip: string | null
  description: string
  details: string
  operation_id: string | null
  outcome: 'Succeeded' | 'Failed' | 'Refused'
  asset_key: string | null
  asset_name: string | null
  asset_parent_id: string | null
  asset_ip: string | null
  // Values of the contract's ElementType, NetworkElementSubType and AllAssetTypeDetail, as
  // lib/audit.ts writes them (lib/events/views.ts maps them into AssetReference).
  asset_type: string
  asset_sub_type: string
  asset_detail: string
  asset_icon: number
  request_id: string | null
}

/** The columns every read returns, in this order (rows as arrays follow it). */
export const EVENT_FIELDS = [
  'id',
  'created_ms',
  'event_code',
  'severity',
  'category',
  'entity_id',
  'description',
  'details',
  'hashtags',
  'peripheral_icon',
  'asset_key',
  'asset_name',
  'peripheral_asset_id',
] as const
export const AUDIT_FIELDS = [
  'id',
  'created_ms',
  'severity',
  'category',
  'user_name',
  'source_ip',
  'description',
  'details',
  'operation_id',
  'outcome',
  'asset_key',
  'asset_name',
  'asset_parent_id',
  'asset_ip',
  'asset_type',
  'asset_sub_type',
  'asset_detail',
  'asset_icon',
  'request_id',
] as const
export const EVENT_COLUMNS = EVENT_FIELDS.map((c) => `e.${c}`).join(', ')
export const AUDIT_COLUMNS = AUDIT_FIELDS.map((c) => `e.${c}`).join(', ')
