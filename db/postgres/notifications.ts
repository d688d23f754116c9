// Risk and system-health notifications on PostgreSQL (db/notifications.ts on SQLite): lists,
// counts, pins, dismissals, read marks, the health checks' results, and what changed since a
// given change number (the live stream).
//
// Every change takes its number from notification_next_seq() (migration 006): a sequence
// drawn under the notification lock (pg_advisory_xact_lock, held to commit), as the events
// feed takes its ids, so that a change never becomes visible with a lower number than one
// already seen; the last number is written to notification_counter in the same transaction.
// A change that finds nothing to change still takes a number, as on SQLite.
import type { NotificationsRepo } from '../notifications.js'
import type { GroupCounts, GroupRow, HealthRow, HealthState, RiskFilter, RiskRow } from '../../lib/notifications/ports.js'
import { contains, orderBy, trigramTerm } from '../sql.js'
import type { Sort } from '../../lib/ports.js'
import type { Async } from '../unit-of-work.js'
import type { Postgres } from './connection.js'

/** Sort fields of the risk list (the contract's x-sort-fields) and their columns; host names compare with ASCII folded, as SQLite's NOCASE. */
const riskSortColumns: Record<string, string> = {
  id: 'rn.id',
  kind: 'rn.kind',
  severity: 'rn.severity',
  hostIdentifier: 'lower(rn.host_identifier)',
  occurrences: 'rn.occurrences',
  firstSeen: 'rn.first_ms',
  lastSeen: 'rn.last_ms',
}

/** The fields globalSearch looks in, one at a time for short terms. */
const SEARCHED = ['kind', 'title', 'host_identifier', 'host_ip', 'agent_uuid', 'vid', 'pid', 'device_name', 'vendor_name', 'serial_number', 'device_id']
/** All of them as one text (migration 006's risk_notifications_text index): a longer term may span two, as in SQLite's FTS column. */
const EVERYTHING = `(risk_notification_text(${SEARCHED.map((c) => `rn.${c}`).join(', ')}) COLLATE "C")`

/** A risk filter as a WHERE fragment over `risk_notifications rn`, its parameters numbered from `from`. */
function riskWhere(f: RiskFilter, readMark: number, from = 1): { sql: string; params: unknown[] } {
  const sql: string[] = []
  const params: unknown[] = []
  const p = (v: unknown) => {
    params.push(v)
    return `$${from + params.length - 1}`
  }
  // Text columns are COLLATE "C": ILIKE folds ASCII letters only, as SQLite's LIKE.
  const text = (columns: string[], term: string) => {
    const like = p(contains(term))
    sql.push(`(${columns.map((c) => `${c} ILIKE ${like}`).join(' OR ')})`)
  }
  sql.push(f.isDismissed ? 'rn.dismissed_ms IS NOT NULL' : 'rn.dismissed_ms IS NULL')
  if (f.kinds) sql.push(`rn.kind = ANY(${p(f.kinds)}::text[])`)
  if (f.severity !== undefined) sql.push(`rn.severity = ${p(f.severity)}`)
  if (f.minimumSeverity !== undefined) sql.push(`rn.severity <= ${p(f.minimumSeverity)}`)
  if (f.vid !== undefined) sql.push(`rn.vid = ${p(f.vid)}`)
  if (f.pid !== undefined) sql.push(`rn.pid = ${p(f.pid)}`)
  if (f.isRead !== undefined) sql.push(f.isRead ? `rn.occurred_seq <= ${p(readMark)}` : `rn.occurred_seq > ${p(readMark)}`)
  if (f.isPinned !== undefined) sql.push(f.isPinned ? 'rn.pinned_ms IS NOT NULL' : 'rn.pinned_ms IS NULL')
  if (f.from !== undefined) sql.push(`rn.last_ms >= ${p(f.from)}`)
  if (f.toExclusive !== undefined) sql.push(`rn.first_ms < ${p(f.toExclusive)}`)
  if (f.agentUuid !== undefined) text(['rn.agent_uuid'], f.agentUuid)
  if (f.hostIdentifier !== undefined) text(['rn.host_identifier'], f.hostIdentifier)
  if (f.globalSearch !== undefined) text(trigramTerm(f.globalSearch) ? [EVERYTHING] : SEARCHED.map((c) => `rn.${c}`), f.globalSearch)
  return { sql: sql.join(' AND '), params }
}

const RELATED_EVENTS = 100

/** Takes the next change number once per statement, whether or not the statement changes a row. */
const SEQ = 'WITH s AS (SELECT notification_next_seq() AS seq)'

type RunResult = { changes: number }
type Related = { related: string[] }

export type PgNotificationsRepo = Async<Omit<NotificationsRepo, 'setMuted' | 'repeatHealthNotification' | 'resolveHealthNotification' | 'setRiskMark' | 'setHealthMark'>> & {
  setMuted(name: string, muted: boolean, by: string, ms: number): Promise<RunResult>
  repeatHealthNotification(id: number, severity: number, title: string, description: string, now: number, worse: boolean): Promise<RunResult>
  resolveHealthNotification(id: number, now: number): Promise<RunResult>
  setRiskMark(userKey: string, seq: number): Promise<RunResult>
  setHealthMark(userKey: string, seq: number): Promise<RunResult>
  /** The latest change number alone (what the stream polls), without counting open notifications. */
  changeSeq(): Promise<number>
}

export function pgNotificationsRepo(db: Postgres): PgNotificationsRepo {
  // Rows typed as the SQLite repository's interfaces (which have no index signature).
  const select = <T>(sql: string, params?: unknown[]) => db.query(sql, params) as Promise<T[]>
  const first = <T>(sql: string, params?: unknown[]) => db.one(sql, params) as Promise<T | undefined>
  /**
   * Runs `sql` (after SEQ) that changes rows; answers how many it changed. The number is
   * read in the outer query so that it is taken even when no row matches.
   */
  const changed = async (sql: string, params: unknown[]) =>
    (await db.one<{ n: number }>(`${SEQ}, u AS (${sql} RETURNING 1) SELECT (SELECT seq FROM s) AS seq, (SELECT count(*) FROM u) AS n`, params))!.n
  const relatedOf = (r: Related) => r.related.map(Number).reverse()
  const strip = <T>(r: T & Related & { filtered?: number }): T => {
    const { related: _r, filtered: _f, ...row } = r
    return row as T
  }

  async function riskPage(f: RiskFilter, s: Sort, readMark: number, limit: number, offset: number): Promise<{ filtered: number; rows: { row: RiskRow; related: number[] }[] }> {
    const where = riskWhere(f, readMark, 3)
    const order = orderBy(s, riskSortColumns, 'rn.id')
    const rows = await select<RiskRow & Related & { filtered: number }>(
      `WITH c AS (SELECT count(*) AS n FROM risk_notifications rn WHERE ${where.sql})
       SELECT c.n AS filtered, p.* FROM c LEFT JOIN LATERAL (
         SELECT rn.*, ARRAY(SELECT event_id FROM risk_notification_events WHERE notification_id = rn.id ORDER BY event_id DESC LIMIT ${RELATED_EVENTS}) AS related
         FROM risk_notifications rn WHERE c.n > $2 AND ${where.sql} ORDER BY ${order} LIMIT $1 OFFSET $2) p ON true`,
      [limit, offset, ...where.params],
    )
    const filtered = rows[0]?.filtered ?? 0
    return { filtered, rows: rows.filter((r) => r.id !== null).map((r) => ({ row: strip<RiskRow>(r), related: relatedOf(r) })) }
  }

  async function riskUnread(mark: number): Promise<number> {
    return (await db.value<number>('SELECT count(*) FROM risk_notifications WHERE dismissed_ms IS NULL AND occurred_seq > $1', [mark]))!
  }

  return {
    /** The next change number; call inside the unit of work that makes the change. */
    nextSeq: async () => (await db.value<number>('SELECT notification_next_seq()'))!,
    /** The latest change number and the risk notifications not dismissed. */
    counter: async () =>
      (await first<{ seq: number; risk_open: number }>('SELECT seq, (SELECT count(*) FROM risk_notifications WHERE dismissed_ms IS NULL) AS risk_open FROM notification_counter WHERE id = 1'))!,
    changeSeq: async () => (await db.value<number>('SELECT seq FROM notification_counter WHERE id = 1'))!,

    risk: (id: number) => first<RiskRow>('SELECT * FROM risk_notifications WHERE id = $1', [id]),
    /** The latest 100 events behind a risk notification, oldest first. */
    relatedEvents: async (id: number) =>
      (await select<{ event_id: number }>('SELECT event_id FROM risk_notification_events WHERE notification_id = $1 ORDER BY event_id DESC LIMIT $2', [id, RELATED_EVENTS]))
        .map((r) => r.event_id)
        .reverse(),
    /** One page of the risk list and how many match. */
    async riskList(f: RiskFilter, s: Sort, readMark: number, limit: number, offset: number) {
      const { filtered, rows } = await riskPage(f, s, readMark, limit, offset)
      return { filtered, rows: rows.map((r) => r.row) }
    },
    /** The same page with each notification's related events, in one round trip. */
    riskPage,
    /** Sets or clears the pin of a risk notification that is not dismissed; answers whether it changed. */
    pinRisk: async (id: number, by: string | null, ms: number | null) =>
      (await changed('UPDATE risk_notifications SET pinned_by = $2, pinned_ms = $3, change_seq = (SELECT seq FROM s) WHERE id = $1 AND dismissed_ms IS NULL', [id, by, ms])) > 0,
    dismissRisk: async (id: number, by: string, ms: number) =>
      (await changed(
        `UPDATE risk_notifications SET dismissed_by = $2, dismissed_ms = $3, pinned_by = NULL, pinned_ms = NULL, change_seq = (SELECT seq FROM s)
         WHERE id = $1 AND dismissed_ms IS NULL`,
        [id, by, ms],
      )) > 0,
    riskChangedSince: (seq: number, limit: number) => select<RiskRow>('SELECT * FROM risk_notifications WHERE change_seq > $1 ORDER BY change_seq LIMIT $2', [seq, limit]),
    riskUnread,
    riskPinned: async () => (await db.value<number>('SELECT count(*) FROM risk_notifications WHERE pinned_ms IS NOT NULL'))!,
    /** Risk notifications not dismissed that last occurred in (from, to], latest first. */
    riskBetween: (from: number, to: number, limit: number) =>
      select<RiskRow>('SELECT * FROM risk_notifications WHERE dismissed_ms IS NULL AND occurred_seq > $1 AND occurred_seq <= $2 ORDER BY occurred_seq DESC LIMIT $3', [from, to, limit]),

    groups: () => select<GroupRow>('SELECT * FROM notification_groups ORDER BY name'),
    group: (name: string) => first<GroupRow>('SELECT * FROM notification_groups WHERE name = $1', [name]),
    setMuted: async (name: string, muted: boolean, by: string, ms: number) => ({
      changes: await changed('UPDATE notification_groups SET muted = $2, muted_by = $3, muted_ms = $4, change_seq = (SELECT seq FROM s) WHERE name = $1', [
        name,
        muted ? 1 : 0,
        muted ? by : null,
        muted ? ms : null,
      ]),
    }),
    /** Records a check's result; the group's `since` and change number move only when its state changes (or on its first check). */
    async recordCheck(name: string, state: HealthState, detail: string, now: number): Promise<boolean> {
      const r = await first<{ moved: boolean }>(
        `WITH g AS (SELECT name, state = $2 AND since_ms IS NOT NULL AS same FROM notification_groups WHERE name = $1 FOR UPDATE)
         UPDATE notification_groups n SET detail = $3, checked_ms = $4,
           state = $2, since_ms = CASE WHEN g.same THEN n.since_ms ELSE $4 END,
           change_seq = CASE WHEN g.same THEN n.change_seq ELSE notification_next_seq() END
         FROM g WHERE n.name = g.name RETURNING NOT g.same AS moved`,
        [name, state, detail, now],
      )
      return r?.moved ?? false
    },
    groupsChangedSince: (seq: number) => select<GroupRow>('SELECT * FROM notification_groups WHERE change_seq > $1 ORDER BY change_seq', [seq]),

    health: (id: number) => first<HealthRow>('SELECT * FROM health_notifications WHERE id = $1', [id]),
    openHealth: (group: string) => first<HealthRow>('SELECT * FROM health_notifications WHERE group_name = $1 AND resolved_ms IS NULL', [group]),
    openHealthNotification: async (group: string, severity: number, title: string, description: string, now: number) =>
      (await db.value<number>(
        `${SEQ} INSERT INTO health_notifications (group_name, severity, title, description, first_ms, last_ms, occurred_seq, change_seq)
         SELECT $1, $2, $3, $4, $5, $5, s.seq, s.seq FROM s RETURNING id`,
        [group, severity, title, description, now],
      ))!,
    /** Another failed check of an open notification; `worse` makes it unread again. */
    repeatHealthNotification: async (id: number, severity: number, title: string, description: string, now: number, worse: boolean) => ({
      changes: await changed(
        `UPDATE health_notifications SET occurrences = occurrences + 1, last_ms = $2, severity = $3, title = $4, description = $5,
           occurred_seq = CASE WHEN $6 THEN (SELECT seq FROM s) ELSE occurred_seq END, change_seq = (SELECT seq FROM s)
         WHERE id = $1`,
        [id, now, severity, title, description, worse],
      ),
    }),
    resolveHealthNotification: async (id: number, now: number) => ({
      changes: await changed('UPDATE health_notifications SET resolved_ms = $2, change_seq = (SELECT seq FROM s) WHERE id = $1', [id, now]),
    }),
    pinHealth: async (id: number, by: string | null, ms: number | null) =>
      (await changed('UPDATE health_notifications SET pinned_by = $2, pinned_ms = $3, change_seq = (SELECT seq FROM s) WHERE id = $1 AND dismissed_ms IS NULL', [id, by, ms])) > 0,
    dismissHealth: async (id: number, by: string, ms: number) =>
      (await changed(
        `UPDATE health_notifications SET dismissed_by = $2, dismissed_ms = $3, pinned_by = NULL, pinned_ms = NULL, change_seq = (SELECT seq FROM s)
         WHERE id = $1 AND dismissed_ms IS NULL`,
        [id, by, ms],
      )) > 0,
    healthOfGroup: (name: string, limit: number) => select<HealthRow>('SELECT * FROM health_notifications WHERE group_name = $1 AND dismissed_ms IS NULL ORDER BY id DESC LIMIT $2', [name, limit]),
    openHealthNotifications: (limit: number) => select<HealthRow>('SELECT * FROM health_notifications WHERE resolved_ms IS NULL AND dismissed_ms IS NULL ORDER BY id DESC LIMIT $1', [limit]),
    groupCounts: (mark: number) =>
      select<GroupCounts & Record<string, unknown>>(
        `SELECT h.group_name, count(*) AS total, count(*) FILTER (WHERE h.resolved_ms IS NULL) AS open,
           count(*) FILTER (WHERE h.occurred_seq > $1 AND g.muted = 0) AS unread, count(*) FILTER (WHERE h.pinned_ms IS NOT NULL) AS pinned
         FROM health_notifications h JOIN notification_groups g ON g.name = h.group_name
         WHERE h.dismissed_ms IS NULL GROUP BY h.group_name ORDER BY h.group_name`,
        [mark],
      ),
    /** Unread counts outside muted groups, totals and pins (not dismissed). */
    healthCounts: async (mark: number) =>
      (await first<{ total: number; unread: number; pinned: number }>(
        `SELECT count(*) AS total, count(*) FILTER (WHERE h.occurred_seq > $1 AND g.muted = 0) AS unread, count(*) FILTER (WHERE h.pinned_ms IS NOT NULL) AS pinned
         FROM health_notifications h JOIN notification_groups g ON g.name = h.group_name WHERE h.dismissed_ms IS NULL`,
        [mark],
      ))!,
    /** Unread for whoever read up to `mark`, muted groups included. */
    healthUnreadAll: async (mark: number) => (await db.value<number>('SELECT count(*) FROM health_notifications WHERE dismissed_ms IS NULL AND occurred_seq > $1', [mark]))!,
    healthChangedSince: (seq: number, limit: number) => select<HealthRow>('SELECT * FROM health_notifications WHERE change_seq > $1 ORDER BY change_seq LIMIT $2', [seq, limit]),
    /** Health notifications of unmuted groups, not dismissed, that last occurred in (from, to], latest first. */
    healthBetween: (from: number, to: number, limit: number) =>
      select<HealthRow>(
        `SELECT h.* FROM health_notifications h JOIN notification_groups g ON g.name = h.group_name
         WHERE h.dismissed_ms IS NULL AND g.muted = 0 AND h.occurred_seq > $1 AND h.occurred_seq <= $2 ORDER BY h.occurred_seq DESC LIMIT $3`,
        [from, to, limit],
      ),

    /** The caller's read marks (0: nothing read). */
    marks: async (userKey: string) =>
      (await first<{ risk_seq: number; health_seq: number }>('SELECT risk_seq, health_seq FROM notification_read_marks WHERE user_key = $1', [userKey])) ?? {
        risk_seq: 0,
        health_seq: 0,
      },
    setRiskMark: async (userKey: string, seq: number) => ({
      changes: await db.run(
        `INSERT INTO notification_read_marks AS m (user_key, risk_seq) VALUES ($1, $2)
         ON CONFLICT (user_key) DO UPDATE SET risk_seq = greatest(m.risk_seq, excluded.risk_seq)`,
        [userKey, seq],
      ),
    }),
    setHealthMark: async (userKey: string, seq: number) => ({
      changes: await db.run(
        `INSERT INTO notification_read_marks AS m (user_key, health_seq) VALUES ($1, $2)
         ON CONFLICT (user_key) DO UPDATE SET health_seq = greatest(m.health_seq, excluded.health_seq)`,
        [userKey, seq],
      ),
    }),

    /** Agents by license status (seat use). */
    licenseUse: async () =>
      (await first<{ activated: number; pending: number; expired: number; invalid: number }>(
        `SELECT count(*) FILTER (WHERE license_status = 'Activated') AS activated, count(*) FILTER (WHERE license_status = 'Pending') AS pending,
           count(*) FILTER (WHERE license_status = 'Expired') AS expired, count(*) FILTER (WHERE license_status = 'Invalid') AS invalid
         FROM agents`,
      ))!,
  }
}
