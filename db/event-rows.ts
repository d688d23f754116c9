// The columns of events and audit records as every read selects them (db/event-engine/event-queries.ts,
// db/retention.ts, db/alarms.ts), in the order of their fields (lib/events/ports.ts: the rows are the domain's).
import { AUDIT_FIELDS, EVENT_FIELDS } from '../lib/events/ports.js'

export const EVENT_COLUMNS = EVENT_FIELDS.map((c) => `e.${c}`).join(', ')
export const AUDIT_COLUMNS = AUDIT_FIELDS.map((c) => `e.${c}`).join(', ')
