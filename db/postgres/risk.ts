// The risk raiser on PostgreSQL (db/events.ts riskRaiser on SQLite): raises or repeats the
// risk notifications of the risky events of a batch, one per kind, agent and device
// (VID:PID:serial) while it is not dismissed, in one statement. The agent and the peripheral
// are read as they are now. Events of one notification in the batch make one change of it,
// with their count, first and last time and the latest one's details; the notifications
// take their change numbers in the order of their latest events. Run it in the unit of work
// that wrote the events (the events recorder's hook).
import { type Postgres, type Sql, prepared } from './connection.js'
import type { RecordedEvent } from './events-write.js'

/** Migration 006's notification lock: every change of a notification is made under it. */
export const NOTIFICATION_LOCK = 7022100601

/**
 * The risky events of `from` (rows named `e`, with the events' columns) selected by `where`,
 * with what their notifications are made of.
 */
const risky = (from: string, where: string) => `
  SELECT e.id, e.created_ms, substr(e.details, 1, 2000) AS details, e.asset_key, k.kind, k.severity, k.title,
    coalesce(a.host_identifier, e.asset_name, e.entity_id) AS host, a.local_ip_address AS ip,
    coalesce(p.vid, e.peripheral_vid) AS vid, coalesce(p.pid, e.peripheral_pid) AS pid, p.serial_number AS serial,
    coalesce(p.device_id, e.peripheral_asset_id) AS device_id, p.gui_pid AS device_name, p.gui_vid AS vendor_name,
    concat_ws(':', coalesce(p.vid, e.peripheral_vid, ''), coalesce(p.pid, e.peripheral_pid, ''),
      coalesce(p.serial_number, e.peripheral_asset_id, '')) AS device_key
  FROM ${from}
  JOIN risk_notification_kinds k ON k.event_code = e.event_code
  LEFT JOIN agents a ON a.uuid = e.asset_key
  LEFT JOIN peripherals p ON p.agent_id = a.id AND p.device_id = e.peripheral_asset_id
  WHERE ${where} AND e.asset_key IS NOT NULL`

/** Events given as arrays ($1 to $10) in the shape of the events table's columns that `risky` reads. */
const EVENTS_GIVEN = `unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[])
    AS e (id, created_ms, details, asset_key, event_code, asset_name, entity_id, peripheral_vid, peripheral_pid, peripheral_asset_id)`

const raiseSql = (where: string, from = 'events e') => `
  WITH ev AS (${risky(from, where)}),
  g AS (
    SELECT asset_key, device_key, kind, count(*) AS n, min(created_ms) AS first_ms, max(created_ms) AS last_ms, max(id) AS last_id
    FROM ev GROUP BY asset_key, device_key, kind
  ),
  latest AS (
    SELECT ev.*, g.n, g.first_ms, g.last_ms, row_number() OVER (ORDER BY ev.id) AS k, count(*) OVER () AS total
    FROM g JOIN ev ON ev.id = g.last_id
  ),
  -- The last of as many consecutive change numbers as notifications change (none taken when none does).
  s AS (SELECT CASE WHEN (SELECT count(*) FROM g) > 0 THEN notification_next_seq((SELECT count(*) FROM g)::integer) END AS top),
  -- Under the notification lock (taken before this statement: its snapshot holds every
  -- change committed before), the open notifications of these keys are updated and the
  -- others inserted; an upsert would draw an id for each updated row too.
  upd AS (
    UPDATE risk_notifications r SET
      occurrences = r.occurrences + l.n,
      last_ms = greatest(r.last_ms, l.last_ms),
      host_identifier = l.host,
      host_ip = coalesce(l.ip, r.host_ip),
      device_name = coalesce(l.device_name, r.device_name),
      vendor_name = coalesce(l.vendor_name, r.vendor_name),
      title = l.title || l.host,
      description = l.details,
      occurred_seq = s.top - l.total + l.k,
      change_seq = s.top - l.total + l.k
    FROM latest l CROSS JOIN s
    WHERE r.agent_uuid = l.asset_key AND r.device_key = l.device_key AND r.kind = l.kind AND r.dismissed_ms IS NULL
    RETURNING r.id, r.agent_uuid, r.device_key, r.kind
  ),
  ins AS (
    INSERT INTO risk_notifications (kind, severity, agent_uuid, host_identifier, host_ip, vid, pid, serial_number, device_id,
      device_name, vendor_name, device_key, title, description, occurrences, first_ms, last_ms, occurred_seq, change_seq)
    SELECT l.kind, l.severity, l.asset_key, l.host, l.ip, l.vid, l.pid, l.serial, l.device_id, l.device_name, l.vendor_name, l.device_key,
      l.title || l.host, l.details, l.n, l.first_ms, l.last_ms, s.top - l.total + l.k, s.top - l.total + l.k
    FROM latest l CROSS JOIN s
    WHERE NOT EXISTS (
      SELECT 1 FROM risk_notifications r WHERE r.agent_uuid = l.asset_key AND r.device_key = l.device_key AND r.kind = l.kind AND r.dismissed_ms IS NULL)
    ORDER BY l.k
    RETURNING id, agent_uuid, device_key, kind
  ),
  up AS (SELECT * FROM upd UNION ALL SELECT * FROM ins),
  linked AS (
    INSERT INTO risk_notification_events (notification_id, event_id)
    SELECT up.id, ev.id FROM up JOIN ev ON ev.asset_key = up.agent_uuid AND ev.device_key = up.device_key AND ev.kind = up.kind
  )
  SELECT count(*) FROM up`

/** The raise of every event batch: prepared (its plan cost more than its run). */
const RAISE_GIVEN = prepared(raiseSql('true', EVENTS_GIVEN))

export function pgRiskRaiser(db: Postgres) {
  const raise = (sql: Sql, params: unknown[]) =>
    db.uow.run(async () => {
      await db.query('SELECT pg_advisory_xact_lock($1)', [NOTIFICATION_LOCK])
      return (await db.value<number>(sql, params)) ?? 0
    })
  return {
    /** The event codes that raise notifications (callers skip a batch without any). */
    codes: async (): Promise<Set<string>> => new Set((await db.query<{ event_code: string }>('SELECT event_code FROM risk_notification_kinds')).map((r) => r.event_code)),
    /**
     * Raises the notifications of these events (those of them that are risky), read from the
     * events table; answers how many changed. An id alone names no day, so every day's
     * partition is probed: with a year of them, about 0.2 s a call. The recorder's hook
     * passes the events themselves (`raiseEvents`).
     */
    raise: (eventIds: number[]): Promise<number> => (eventIds.length === 0 ? Promise.resolve(0) : raise(raiseSql('e.id = ANY($1::bigint[])'), [eventIds])),
    /**
     * `raise` for events just written in this unit of work, given with their ids as written:
     * nothing is read back from the events table (no partition is planned or probed).
     */
    raiseEvents: (ids: number[], rows: RecordedEvent[]): Promise<number> => {
      if (ids.length === 0) return Promise.resolve(0)
      const col = <T>(fn: (r: RecordedEvent) => T) => rows.map(fn)
      return raise(RAISE_GIVEN, [
        ids,
        col((r) => r.createdMs),
        col((r) => r.event.details),
        col((r) => r.event.assetKey ?? null),
        col((r) => r.event.code),
        col((r) => r.event.assetName ?? null),
        col((r) => r.event.entityId),
        col((r) => r.event.peripheralVid ?? null),
        col((r) => r.event.peripheralPid ?? null),
        col((r) => r.event.peripheralAssetId ?? null),
      ])
    },
    /**
     * Raises the notifications of the events with ids after `after` up to `to`, read from the
     * days [fromMs, toMs) that hold them (the risk feed, db/postgres/risk-feed.ts); answers how many changed.
     */
    raiseAfter: (after: number, to: number, fromMs: number, toMs: number): Promise<number> =>
      raise(raiseSql('e.id > $1 AND e.id <= $2 AND e.created_ms >= $3 AND e.created_ms < $4'), [after, to, fromMs, toMs]),
    /** Raises the notifications of the events with ids in [from, to] (bulk loads); answers how many changed. */
    raiseRange: (from: number, to: number): Promise<number> => raise(raiseSql('e.id BETWEEN $1 AND $2'), [from, to]),
  }
}
export type PgRiskRaiser = ReturnType<typeof pgRiskRaiser>

/**
 * The events recorder's `recorded` hook: only the risky events of an asset raise
 * notifications (as on SQLite), so a batch without any takes no notification lock.
 */
export function raiseRecorded(risk: PgRiskRaiser, codes: ReadonlySet<string>) {
  return async (ids: number[], rows: RecordedEvent[]): Promise<void> => {
    const riskyIds: number[] = []
    const riskyRows: RecordedEvent[] = []
    ids.forEach((id, i) => {
      if (!rows[i].event.assetKey || !codes.has(rows[i].event.code)) return
      riskyIds.push(id)
      riskyRows.push(rows[i])
    })
    if (riskyIds.length) await risk.raiseEvents(riskyIds, riskyRows)
  }
}
