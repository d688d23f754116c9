// The risk raiser on PostgreSQL (db/events.ts riskRaiser on SQLite): raises or repeats the
// risk notifications of the risky events of a batch, one per kind, agent and device
// (VID:PID:serial) while it is not dismissed, in one statement. The agent and the peripheral
// are read as they are now. Events of one notification in the batch make one change of it,
// with their count, first and last time and the latest one's details; the notifications
// take their change numbers in the order of their latest events. Run it in the unit of work
// that wrote the events (the events recorder's hook).
import type { Postgres } from './connection.js'

/** Migration 006's notification lock: every change of a notification is made under it. */
export const NOTIFICATION_LOCK = 7022100601

/** The risky events selected by `where` (over `events e`), with what their notifications are made of. */
const risky = (where: string) => `
  SELECT e.id, e.created_ms, substr(e.details, 1, 2000) AS details, e.asset_key, k.kind, k.severity, k.title,
    coalesce(a.host_identifier, e.asset_name, e.entity_id) AS host, a.local_ip_address AS ip,
    coalesce(p.vid, e.peripheral_vid) AS vid, coalesce(p.pid, e.peripheral_pid) AS pid, p.serial_number AS serial,
    coalesce(p.device_id, e.peripheral_asset_id) AS device_id, p.gui_pid AS device_name, p.gui_vid AS vendor_name,
    concat_ws(':', coalesce(p.vid, e.peripheral_vid, ''), coalesce(p.pid, e.peripheral_pid, ''),
      coalesce(p.serial_number, e.peripheral_asset_id, '')) AS device_key
  FROM events e
  JOIN risk_notification_kinds k ON k.event_code = e.event_code
  LEFT JOIN agents a ON a.uuid = e.asset_key
  LEFT JOIN peripherals p ON p.agent_id = a.id AND p.device_id = e.peripheral_asset_id
  WHERE ${where} AND e.asset_key IS NOT NULL`

const raiseSql = (where: string) => `
  WITH ev AS (${risky(where)}),
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

export function pgRiskRaiser(db: Postgres) {
  const raise = (sql: string, params: unknown[]) =>
    db.uow.run(async () => {
      await db.query('SELECT pg_advisory_xact_lock($1)', [NOTIFICATION_LOCK])
      return (await db.value<number>(sql, params)) ?? 0
    })
  return {
    /** The event codes that raise notifications (callers skip a batch without any). */
    codes: async (): Promise<Set<string>> => new Set((await db.query<{ event_code: string }>('SELECT event_code FROM risk_notification_kinds')).map((r) => r.event_code)),
    /** Raises the notifications of these events (those of them that are risky); answers how many changed. */
    raise: (eventIds: number[]): Promise<number> => (eventIds.length === 0 ? Promise.resolve(0) : raise(raiseSql('e.id = ANY($1::bigint[])'), [eventIds])),
    /** Raises the notifications of the events with ids in [from, to] (bulk loads); answers how many changed. */
    raiseRange: (from: number, to: number): Promise<number> => raise(raiseSql('e.id BETWEEN $1 AND $2'), [from, to]),
  }
}
export type PgRiskRaiser = ReturnType<typeof pgRiskRaiser>
