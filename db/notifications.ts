// Risk and system-health notifications: lists, counts, pins, dismissals, read marks, the
// health checks' results, and what changed since a given change number (the live stream).
// Risk notifications are written by the trigger on events (migration 010); every other
// change here takes the next number of notification_counter.
import type { Statement } from 'better-sqlite3'
import type { DB } from './index.js'
import { contains, orderBy, trigramTerm } from './sql.js'
import type { Sort } from '../lib/ports.js'
import type { GroupCounts, GroupRow, HealthRow, HealthState, RiskFilter, RiskRow } from '../lib/notifications/ports.js'

/** Sort fields of the risk list (the contract's x-sort-fields) and their columns. */
const riskSortColumns: Record<string, string> = {
  id: 'rn.id',
  kind: 'rn.kind',
  severity: 'rn.severity',
  hostIdentifier: 'rn.host_identifier COLLATE NOCASE',
  occurrences: 'rn.occurrences',
  firstSeen: 'rn.first_ms',
  lastSeen: 'rn.last_ms',
}

/** The fields globalSearch looks in; the `everything` column of risk_notifications_fts holds the same. */
const SEARCHED = ['kind', 'title', 'host_identifier', 'host_ip', 'agent_uuid', 'vid', 'pid', 'device_name', 'vendor_name', 'serial_number', 'device_id']

const phrase = (column: string, term: string) => `{${column}} : "${term.replace(/"/g, '""')}"`

/** A risk filter as a WHERE fragment over `risk_notifications rn`; `readMark` is the caller's. */
function riskWhere(f: RiskFilter, readMark: number): { sql: string; params: unknown[] } {
  const sql: string[] = []
  const params: unknown[] = []
  const match: string[] = []
  const add = (s: string, ...p: unknown[]) => {
    sql.push(s)
    params.push(...p)
  }
  const text = (ftsColumn: string, columns: string[], term: string) => {
    // From 3 characters the trigram index finds the rows; shorter terms scan.
    if (trigramTerm(term)) match.push(phrase(ftsColumn, term))
    else add(`(${columns.map((c) => `rn.${c} LIKE ? ESCAPE '\\'`).join(' OR ')})`, ...columns.map(() => contains(term)))
  }
  add(f.isDismissed ? 'rn.dismissed_ms IS NOT NULL' : 'rn.dismissed_ms IS NULL')
  if (f.kinds) add(`rn.kind IN (${f.kinds.map(() => '?').join(', ')})`, ...f.kinds)
  if (f.severity !== undefined) add('rn.severity = ?', f.severity)
  if (f.minimumSeverity !== undefined) add('rn.severity <= ?', f.minimumSeverity)
  if (f.vid !== undefined) add('rn.vid = ?', f.vid)
  if (f.pid !== undefined) add('rn.pid = ?', f.pid)
  if (f.isRead !== undefined) add(f.isRead ? 'rn.occurred_seq <= ?' : 'rn.occurred_seq > ?', readMark)
  if (f.isPinned !== undefined) add(f.isPinned ? 'rn.pinned_ms IS NOT NULL' : 'rn.pinned_ms IS NULL')
  if (f.from !== undefined) add('rn.last_ms >= ?', f.from)
  if (f.toExclusive !== undefined) add('rn.first_ms < ?', f.toExclusive)
  if (f.agentUuid !== undefined) text('agent_uuid', ['agent_uuid'], f.agentUuid)
  if (f.hostIdentifier !== undefined) text('host_identifier', ['host_identifier'], f.hostIdentifier)
  if (f.globalSearch !== undefined) text('everything', SEARCHED, f.globalSearch)
  if (match.length) add('rn.id IN (SELECT rowid FROM risk_notifications_fts WHERE risk_notifications_fts MATCH ?)', match.join(' AND '))
  return { sql: sql.join(' AND '), params }
}

const RELATED_EVENTS = 100

export function notificationsRepo(db: DB) {
  // Statements by their SQL: a list's shape varies with its filters, a few dozen shapes in all.
  const statements = new Map<string, Statement<unknown[]>>()
  const prepared = (sql: string) => {
    let s = statements.get(sql)
    if (!s) {
      if (statements.size >= 500) statements.clear()
      s = db.prepare<unknown[]>(sql)
      statements.set(sql, s)
    }
    return s
  }

  const nextSeq = db.prepare<[], number>('UPDATE notification_counter SET seq = seq + 1 WHERE id = 1 RETURNING seq').pluck()
  const counter = db.prepare<[], { seq: number; risk_open: number }>('SELECT seq, risk_open FROM notification_counter WHERE id = 1')

  const riskById = db.prepare<[number], RiskRow>('SELECT * FROM risk_notifications WHERE id = ?')
  const riskByIds = db.prepare<[string], RiskRow>('SELECT * FROM risk_notifications WHERE id IN (SELECT value FROM json_each(?))')
  const related = db.prepare<[number, number], number>('SELECT event_id FROM risk_notification_events WHERE notification_id = ? ORDER BY event_id DESC LIMIT ?').pluck()
  const riskPin = db.prepare<[string | null, number | null, number, number]>('UPDATE risk_notifications SET pinned_by = ?, pinned_ms = ?, change_seq = ? WHERE id = ? AND dismissed_ms IS NULL')
  const riskDismiss = db.prepare<[string, number, number, number]>(
    `UPDATE risk_notifications SET dismissed_by = ?, dismissed_ms = ?, pinned_by = NULL, pinned_ms = NULL, change_seq = ?
     WHERE id = ? AND dismissed_ms IS NULL`,
  )
  const riskChanged = db.prepare<[number, number], RiskRow>('SELECT * FROM risk_notifications WHERE change_seq > ? ORDER BY change_seq LIMIT ?')
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const riskUnreadAbove = db.prepare<[number], number>('SELECT count(*) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL AND occurred_seq > ?').pluck()
  const riskReadUpTo = db.prepare<[number], number>('SELECT count(*) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL AND occurred_seq <= ?').pluck()
  const riskOldest = db.prepare<[], number | null>('SELECT min(occurred_seq) FROM risk_notifications INDEXED BY risk_notifications_unread WHERE dismissed_ms IS NULL').pluck()
  const riskPinned = db.prepare<[], number>('SELECT count(*) FROM risk_notifications WHERE pinned_ms IS NOT NULL').pluck()
  const riskBetween = db.prepare<[number, number, number], RiskRow>(
    `SELECT * FROM risk_notifications WHERE dismissed_ms IS NULL AND occurred_seq > ? AND occurred_seq <= ?
     ORDER BY occurred_seq DESC LIMIT ?`,
  )

  const groups = db.prepare<[], GroupRow>('SELECT * FROM notification_groups')
  const group = db.prepare<[string], GroupRow>('SELECT * FROM notification_groups WHERE name = ?')
  const setMuted = db.prepare<[number, string | null, number | null, number, string]>('UPDATE notification_groups SET muted = ?, muted_by = ?, muted_ms = ?, change_seq = ? WHERE name = ?')
  const groupChecked = db.prepare<[string, number, string]>('UPDATE notification_groups SET detail = ?, checked_ms = ? WHERE name = ?')
  const groupStateChanged = db.prepare<[HealthState, string, number, number, number, string]>(
    'UPDATE notification_groups SET state = ?, detail = ?, since_ms = ?, checked_ms = ?, change_seq = ? WHERE name = ?',
  )
  const groupsChanged = db.prepare<[number], GroupRow>('SELECT * FROM notification_groups WHERE change_seq > ? ORDER BY change_seq')

  const healthById = db.prepare<[number], HealthRow>('SELECT * FROM health_notifications WHERE id = ?')
  const openHealth = db.prepare<[string], HealthRow>('SELECT * FROM health_notifications WHERE group_name = ? AND resolved_ms IS NULL')
  const insertHealth = db.prepare(
    `INSERT INTO health_notifications (group_name, severity, title, description, first_ms, last_ms, occurred_seq, change_seq)
     VALUES (@group, @severity, @title, @description, @now, @now, @seq, @seq)`,
  )
  const repeatHealth = db.prepare(
    `UPDATE health_notifications SET occurrences = occurrences + 1, last_ms = @now, severity = @severity, title = @title,
       description = @description, occurred_seq = CASE WHEN @worse THEN @seq ELSE occurred_seq END, change_seq = @seq
     WHERE id = @id`,
  )
  const resolveHealth = db.prepare<[number, number, number]>('UPDATE health_notifications SET resolved_ms = ?, change_seq = ? WHERE id = ?')
  const healthPin = db.prepare<[string | null, number | null, number, number]>('UPDATE health_notifications SET pinned_by = ?, pinned_ms = ?, change_seq = ? WHERE id = ? AND dismissed_ms IS NULL')
  const healthDismiss = db.prepare<[string, number, number, number]>(
    `UPDATE health_notifications SET dismissed_by = ?, dismissed_ms = ?, pinned_by = NULL, pinned_ms = NULL, change_seq = ?
     WHERE id = ? AND dismissed_ms IS NULL`,
  )
  const healthOfGroup = db.prepare<[string, number], HealthRow>('SELECT * FROM health_notifications WHERE group_name = ? AND dismissed_ms IS NULL ORDER BY id DESC LIMIT ?')
  const openHealthAll = db.prepare<[number], HealthRow>('SELECT * FROM health_notifications WHERE resolved_ms IS NULL AND dismissed_ms IS NULL ORDER BY id DESC LIMIT ?')
  const groupCounts = db.prepare<[number], GroupCounts>(
    `SELECT h.group_name, count(*) AS total, coalesce(sum(h.resolved_ms IS NULL), 0) AS open,
       coalesce(sum(h.occurred_seq > ? AND g.muted = 0), 0) AS unread, coalesce(sum(h.pinned_ms IS NOT NULL), 0) AS pinned
     FROM health_notifications h JOIN notification_groups g ON g.name = h.group_name
     WHERE h.dismissed_ms IS NULL GROUP BY h.group_name`,
  )
  const healthCounts = db.prepare<[number], { total: number; unread: number; pinned: number }>(
    `SELECT count(*) AS total, coalesce(sum(h.occurred_seq > ? AND g.muted = 0), 0) AS unread, coalesce(sum(h.pinned_ms IS NOT NULL), 0) AS pinned
     FROM health_notifications h JOIN notification_groups g ON g.name = h.group_name WHERE h.dismissed_ms IS NULL`,
  )
  const healthUnreadAll = db.prepare<[number], number>('SELECT count(*) FROM health_notifications WHERE dismissed_ms IS NULL AND occurred_seq > ?').pluck()
  const healthChanged = db.prepare<[number, number], HealthRow>('SELECT * FROM health_notifications WHERE change_seq > ? ORDER BY change_seq LIMIT ?')
  const healthBetween = db.prepare<[number, number, number], HealthRow>(
    `SELECT h.* FROM health_notifications h JOIN notification_groups g ON g.name = h.group_name
     WHERE h.dismissed_ms IS NULL AND g.muted = 0 AND h.occurred_seq > ? AND h.occurred_seq <= ? ORDER BY h.occurred_seq DESC LIMIT ?`,
  )

  const marks = db.prepare<[string], { risk_seq: number; health_seq: number }>('SELECT risk_seq, health_seq FROM notification_read_marks WHERE user_key = ?')
  const setRiskMark = db.prepare<[string, number]>(
    'INSERT INTO notification_read_marks (user_key, risk_seq) VALUES (?, ?) ON CONFLICT (user_key) DO UPDATE SET risk_seq = max(risk_seq, excluded.risk_seq)',
  )
  const setHealthMark = db.prepare<[string, number]>(
    'INSERT INTO notification_read_marks (user_key, health_seq) VALUES (?, ?) ON CONFLICT (user_key) DO UPDATE SET health_seq = max(health_seq, excluded.health_seq)',
  )
  // The agents other than Activated through their index (migration 014: few entries);
  // Activated is the kept agent count less them.
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const licenseUse = db.prepare<[], { activated: number; pending: number; expired: number; invalid: number }>(
    `SELECT (SELECT n FROM row_counts WHERE name = 'agents') - count(*) AS activated, coalesce(sum(license_status = 'Pending'), 0) AS pending,
       coalesce(sum(license_status = 'Expired'), 0) AS expired, coalesce(sum(license_status = 'Invalid'), 0) AS invalid
     FROM agents INDEXED BY agents_license_unactivated WHERE license_status <> 'Activated'`,
  )

  /** Risk notifications not dismissed that last occurred after `mark` (unread for whoever read up to it). */
  function riskUnread(mark: number): number {
    const { seq, risk_open } = counter.get()!
    if (mark <= 0) return risk_open
    if (mark >= seq) return 0
    // Count the smaller side of the mark (change numbers spread about evenly over the open ones).
    const oldest = riskOldest.get() ?? seq
    return mark - oldest < seq - mark ? risk_open - riskReadUpTo.get(mark)! : riskUnreadAbove.get(mark)!
  }

  /** The count of a filter on nothing but read state, without a pass over the list. */
  function openCount(f: RiskFilter, mark: number): number | undefined {
    const keys = Object.keys(f)
    if (keys.length === 0) return counter.get()!.risk_open
    if (keys.length === 1 && f.isRead !== undefined) return f.isRead ? counter.get()!.risk_open - riskUnread(mark) : riskUnread(mark)
    return undefined
  }

  /**
   * One page of the risk list and how many match. The ids of the page are found in an
   * index alone; only the page's rows are read.
   */
  function riskList(f: RiskFilter, s: Sort, readMark: number, limit: number, offset: number): { filtered: number; rows: RiskRow[] } {
    const where = riskWhere(f, readMark)
    const filtered =
      openCount(f, readMark) ??
      (prepared(`SELECT count(*) AS n FROM risk_notifications rn WHERE ${where.sql}`)
        .pluck()
        .get(...where.params) as number)
    if (filtered === 0 || offset >= filtered) return { filtered, rows: [] }
    const order = orderBy(s, riskSortColumns, 'rn.id')
    const ids = prepared(`SELECT rn.id FROM risk_notifications rn WHERE ${where.sql} ORDER BY ${order} LIMIT ? OFFSET ?`)
      .pluck()
      .all(...where.params, limit, offset) as number[]
    const byId = new Map(riskByIds.all(JSON.stringify(ids)).map((r) => [r.id, r]))
    return { filtered, rows: ids.map((id) => byId.get(id)!).filter(Boolean) }
  }

  return {
    /** The next change number; call inside the transaction that makes the change. */
    nextSeq: () => nextSeq.get()!,
    /** The latest change number and the risk notifications not dismissed. */
    counter: () => counter.get()!,

    risk: (id: number) => riskById.get(id),
    /** The latest 100 events behind a risk notification, oldest first. */
    relatedEvents: (id: number) => related.all(id, RELATED_EVENTS).reverse(),
    /** One page of the risk list and how many match. */
    riskList,
    /** The same page with each notification's related events (read here, row by row, in one call). */
    riskPage(f: RiskFilter, s: Sort, readMark: number, limit: number, offset: number): { filtered: number; rows: { row: RiskRow; related: number[] }[] } {
      const { filtered, rows } = riskList(f, s, readMark, limit, offset)
      return { filtered, rows: rows.map((row) => ({ row, related: related.all(row.id, RELATED_EVENTS).reverse() })) }
    },
    /** Sets or clears the pin of a risk notification that is not dismissed; answers whether it changed. */
    pinRisk: (id: number, by: string | null, ms: number | null) => riskPin.run(by, ms, nextSeq.get()!, id).changes > 0,
    dismissRisk: (id: number, by: string, ms: number) => riskDismiss.run(by, ms, nextSeq.get()!, id).changes > 0,
    riskChangedSince: (seq: number, limit: number) => riskChanged.all(seq, limit),
    riskUnread,
    riskPinned: () => riskPinned.get()!,
    /** Risk notifications not dismissed that last occurred in (from, to], latest first. */
    riskBetween: (from: number, to: number, limit: number) => riskBetween.all(from, to, limit),

    groups: () => groups.all(),
    group: (name: string) => group.get(name),
    setMuted: (name: string, muted: boolean, by: string, ms: number) => setMuted.run(muted ? 1 : 0, muted ? by : null, muted ? ms : null, nextSeq.get()!, name),
    /** Records a check's result; the group's `since` and change number move only when its state changes (or on its first check). */
    recordCheck(name: string, state: HealthState, detail: string, now: number): boolean {
      const g = group.get(name)
      if (!g) return false
      if (g.state === state && g.since_ms !== null) {
        groupChecked.run(detail, now, name)
        return false
      }
      groupStateChanged.run(state, detail, now, now, nextSeq.get()!, name)
      return true
    },
    groupsChangedSince: (seq: number) => groupsChanged.all(seq),

    health: (id: number) => healthById.get(id),
    openHealth: (group: string) => openHealth.get(group),
    openHealthNotification: (group: string, severity: number, title: string, description: string, now: number) =>
      Number(insertHealth.run({ group, severity, title, description, now, seq: nextSeq.get()! }).lastInsertRowid),
    /** Another failed check of an open notification; `worse` makes it unread again. */
    repeatHealthNotification: (id: number, severity: number, title: string, description: string, now: number, worse: boolean) =>
      repeatHealth.run({ id, severity, title, description, now, worse: worse ? 1 : 0, seq: nextSeq.get()! }),
    resolveHealthNotification: (id: number, now: number) => resolveHealth.run(now, nextSeq.get()!, id),
    pinHealth: (id: number, by: string | null, ms: number | null) => healthPin.run(by, ms, nextSeq.get()!, id).changes > 0,
    dismissHealth: (id: number, by: string, ms: number) => healthDismiss.run(by, ms, nextSeq.get()!, id).changes > 0,
    healthOfGroup: (name: string, limit: number) => healthOfGroup.all(name, limit),
    openHealthNotifications: (limit: number) => openHealthAll.all(limit),
    groupCounts: (mark: number) => groupCounts.all(mark),
    /** Unread counts outside muted groups, totals and pins (not dismissed). */
    healthCounts: (mark: number) => healthCounts.get(mark)!,
    /** Unread for whoever read up to `mark`, muted groups included. */
    healthUnreadAll: (mark: number) => healthUnreadAll.get(mark)!,
    healthChangedSince: (seq: number, limit: number) => healthChanged.all(seq, limit),
    /** Health notifications of unmuted groups, not dismissed, that last occurred in (from, to], latest first. */
    healthBetween: (from: number, to: number, limit: number) => healthBetween.all(from, to, limit),

    /** The caller's read marks (0: nothing read). */
    marks: (userKey: string) => marks.get(userKey) ?? { risk_seq: 0, health_seq: 0 },
    setRiskMark: (userKey: string, seq: number) => setRiskMark.run(userKey, seq),
    setHealthMark: (userKey: string, seq: number) => setHealthMark.run(userKey, seq),

    /** Agents by license status (seat use). */
    licenseUse: () => licenseUse.get()!,
  }
}
export type NotificationsRepo = ReturnType<typeof notificationsRepo>
