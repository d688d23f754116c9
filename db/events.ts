import type { DB } from './index.js'

export type EventCategory = 'USB' | 'Network' | 'System' | 'Host' | 'General'

export interface EventInput {
  code: string
  severity: number
  category: EventCategory
  /** The source as clients filter it: `<host> (<ip>)`. */
  entityId: string
  description: string
  details: string
  hashtags?: string | null
  peripheralIcon?: number
  assetKey?: string | null
  assetName?: string | null
  peripheralAssetId?: string | null
  peripheralVid?: string | null
  peripheralPid?: string | null
  /** For alarm-delivery failures: the destination the event is about (it is not delivered there). */
  alarmDestinationId?: string | null
}

export function eventsRepo(db: DB) {
  // Positional parameters: binding fifteen by name costs about as much again as the insert.
  const insert = db.prepare(
    `INSERT INTO events (created_ms, event_code, severity, category, entity_id, description, details, hashtags,
       peripheral_icon, asset_key, asset_name, peripheral_asset_id, peripheral_vid, peripheral_pid, alarm_destination_id)
     VALUES (${Array(15).fill('?').join(', ')})`,
  )
  // SET expressions read the row's old values: each text moves down one place.
  const shift1 = db.prepare<[string, number]>(
    `UPDATE agents SET latest_minus2_event_text = latest_minus1_event_text, latest_minus1_event_text = latest_event_text,
       latest_event_text = ? WHERE id = ?`,
  )
  const shift2 = db.prepare<[string, string, number]>(
    `UPDATE agents SET latest_minus2_event_text = latest_event_text, latest_minus1_event_text = ?, latest_event_text = ? WHERE id = ?`,
  )
  const shift3 = db.prepare<[string, string, string, number]>(
    'UPDATE agents SET latest_minus2_event_text = ?, latest_minus1_event_text = ?, latest_event_text = ? WHERE id = ?',
  )

  return {
    /**
     * Stores events in order; with `agentId`, that agent's three latest event texts follow
     * (one update however many events, so that a first check-in with many peripherals
     * rewrites the agent's search text once).
     */
    record(createdMs: number, events: EventInput[], agentId?: number): number[] {
      const ids = events.map((e) =>
        Number(
          insert.run(
            createdMs, e.code, e.severity, e.category, e.entityId, e.description, e.details, e.hashtags ?? null,
            e.peripheralIcon ?? -1, e.assetKey ?? null, e.assetName ?? null, e.peripheralAssetId ?? null,
            e.peripheralVid ?? null, e.peripheralPid ?? null, e.alarmDestinationId ?? null,
          ).lastInsertRowid,
        ),
      )
      if (agentId !== undefined && events.length > 0) {
        const [a, b, c] = events.slice(-3).reverse().map((e) => e.description)
        if (c !== undefined) shift3.run(c, b, a, agentId)
        else if (b !== undefined) shift2.run(b, a, agentId)
        else shift1.run(a, agentId)
      }
      return ids
    },
  }
}
export type EventsRepo = ReturnType<typeof eventsRepo>
