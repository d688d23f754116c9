// What the notification operations read and change. Pins, dismissals and mutes are shared
// by all users; read state is the caller's. Every change is audited in its transaction.
import type { FastifyRequest } from 'fastify'
import type { AuditAsset } from '../../db/audit.js'
import type { HealthRow, RiskRow } from '../../db/notifications.js'
import { audit } from '../audit.js'
import { problem } from '../errors.js'
import { iso } from '../time.js'
import { callerKey } from './stream.js'
import { countsView, groupNames, groupView, healthView, riskView, type CountsView, type GroupName, type GroupView, type RiskView } from './views.js'
import type { RiskQuery } from './query.js'

/** Notifications a group or the operational status shows. */
const LISTED = 100

const riskAsset = (r: RiskRow): AuditAsset => ({
  key: String(r.id),
  name: r.title,
  parentId: r.agent_uuid,
  ipAddress: r.host_ip,
  type: 'Notification',
  detail: 'RiskNotification',
})
const healthAsset = (h: HealthRow): AuditAsset => ({ key: String(h.id), name: h.title, parentId: h.group_name, type: 'Notification', detail: 'HealthNotification' })

const marksOf = (req: FastifyRequest) => req.server.repos.notifications.marks(callerKey(req.principal!))

function riskOf(req: FastifyRequest, id: number): RiskRow {
  const r = req.server.repos.notifications.risk(id)
  if (!r) throw problem('not-found', `No risk notification with id ${id}.`)
  return r
}

function healthOf(req: FastifyRequest, id: number): HealthRow {
  const h = req.server.repos.notifications.health(id)
  if (!h) throw problem('not-found', `No system-health notification with id ${id}.`)
  return h
}

export function listRisk(req: FastifyRequest, q: RiskQuery): { filtered: number; data: RiskView[] } {
  const repo = req.server.repos.notifications
  const mark = marksOf(req).risk_seq
  return req.server.notifications.kept.answer(repo.counter().seq, JSON.stringify(['risk', q, mark]), () => {
    const { filtered, rows } = repo.riskList(q.filter, q.sort, mark, q.pageSize, q.offset)
    return { filtered, data: rows.map((r) => riskView(r, r.occurred_seq <= mark, repo.relatedEvents(r.id))) }
  })
}

export function counts(req: FastifyRequest): CountsView {
  const repo = req.server.repos.notifications
  const marks = marksOf(req)
  return req.server.notifications.kept.answer(repo.counter().seq, JSON.stringify(['counts', marks.risk_seq, marks.health_seq]), () => {
    const risk = { unread: repo.riskUnread(marks.risk_seq), pinned: repo.riskPinned(), total: repo.counter().risk_open }
    return countsView(risk, repo.healthCounts(marks.health_seq))
  })
}

/** Every group, in the contract's order, with the caller's counts and its notifications not dismissed. */
export function groups(req: FastifyRequest): GroupView[] {
  ensureChecked(req)
  const repo = req.server.repos.notifications
  const mark = marksOf(req).health_seq
  const byName = new Map(repo.groups().map((g) => [g.name, g]))
  const countsByName = new Map(repo.groupCounts(mark).map((c) => [c.group_name, c]))
  return groupNames(req.server.contract.spec).map((name) => {
    const g = byName.get(name)!
    return { ...groupView(g, countsByName.get(name)), notifications: repo.healthOfGroup(name, LISTED).map((h) => healthView(h, h.occurred_seq <= mark)) }
  })
}

/** The subsystems as the last periodic check found them, and the open notifications. */
export function operationalStatus(req: FastifyRequest) {
  ensureChecked(req)
  const repo = req.server.repos.notifications
  const mark = marksOf(req).health_seq
  const byName = new Map(repo.groups().map((g) => [g.name, g]))
  const rank = { Healthy: 0, Warning: 1, Failed: 2 } as const
  let status: keyof typeof rank = 'Healthy'
  let checked = 0
  const subsystems = groupNames(req.server.contract.spec).map((name) => {
    const g = byName.get(name)!
    if (rank[g.state] > rank[status]) status = g.state
    checked = Math.max(checked, g.checked_ms ?? 0)
    return { name, state: g.state, detail: g.detail.slice(0, 1000), since: iso(g.since_ms ?? g.checked_ms ?? 0), checkedTime: iso(g.checked_ms ?? 0) }
  })
  return {
    status,
    checkedTime: iso(checked),
    subsystems,
    openNotifications: repo.openHealthNotifications(LISTED).map((h) => healthView(h, h.occurred_seq <= mark)),
  }
}

/** Before the first periodic check of this process, a reader gets a check of its own. */
function ensureChecked(req: FastifyRequest) {
  if (req.server.notifications.checkedMs === 0) req.server.notifications.checkHealth()
}

export function pinRisk(req: FastifyRequest, id: number, pinned: boolean): boolean {
  const { db, repos } = req.server
  const by = req.principal!.name
  return db.transaction(() => {
    const r = riskOf(req, id)
    if (r.dismissed_ms !== null && pinned) throw problem('conflict', `Risk notification ${id} is dismissed; a dismissed notification cannot be pinned.`)
    const was = r.pinned_ms !== null
    if (was !== pinned) repos.notifications.pinRisk(id, pinned ? by : null, pinned ? Date.now() : null)
    audit(req, {
      description: `${was === pinned ? `Risk notification ${id} was already ${pinned ? 'pinned' : 'unpinned'}` : `${pinned ? 'Pinned' : 'Unpinned'} risk notification ${id}`}: ${r.title}`,
      details: { id, kind: r.kind, pinned: { from: was, to: pinned } },
      asset: riskAsset(r),
    })
    return pinned
  })()
}

export function dismissRisk(req: FastifyRequest, id: number): boolean {
  const { db, repos } = req.server
  return db.transaction(() => {
    const r = riskOf(req, id)
    const done = r.dismissed_ms === null && repos.notifications.dismissRisk(id, req.principal!.name, Date.now())
    audit(req, {
      description: done ? `Dismissed risk notification ${id}: ${r.title}` : `Risk notification ${id} was already dismissed (by ${r.dismissed_by} at ${iso(r.dismissed_ms!)})`,
      details: { id, kind: r.kind, dismissed: done, wasPinned: r.pinned_ms !== null, occurrences: r.occurrences },
      asset: riskAsset(r),
    })
    return done
  })()
}

export function pinHealth(req: FastifyRequest, id: number): boolean {
  const { db, repos } = req.server
  return db.transaction(() => {
    const h = healthOf(req, id)
    if (h.dismissed_ms !== null) throw problem('conflict', `System-health notification ${id} is dismissed; a dismissed notification cannot be pinned.`)
    const pinned = h.pinned_ms === null
    repos.notifications.pinHealth(id, pinned ? req.principal!.name : null, pinned ? Date.now() : null)
    audit(req, {
      description: `${pinned ? 'Pinned' : 'Unpinned'} system-health notification ${id}: ${h.title}`,
      details: { id, group: h.group_name, pinned: { from: !pinned, to: pinned } },
      asset: healthAsset(h),
    })
    return pinned
  })()
}

export function dismissHealth(req: FastifyRequest, id: number): boolean {
  const { db, repos } = req.server
  return db.transaction(() => {
    const h = healthOf(req, id)
    const done = h.dismissed_ms === null && repos.notifications.dismissHealth(id, req.principal!.name, Date.now())
    audit(req, {
      description: done ? `Dismissed system-health notification ${id}: ${h.title}` : `System-health notification ${id} was already dismissed (by ${h.dismissed_by} at ${iso(h.dismissed_ms!)})`,
      details: { id, group: h.group_name, dismissed: done, wasPinned: h.pinned_ms !== null, state: h.resolved_ms === null ? 'Open' : 'Resolved' },
      asset: healthAsset(h),
    })
    return done
  })()
}

/** Marks everything of one kind read for the caller; answers whether anything was unread. */
export function readAll(req: FastifyRequest, kind: 'risk' | 'health'): boolean {
  const { db, repos, notifications } = req.server
  const repo = repos.notifications
  const key = callerKey(req.principal!)
  const { from, to, unread } = db.transaction(() => {
    const marks = repo.marks(key)
    const from = kind === 'risk' ? marks.risk_seq : marks.health_seq
    const unread = kind === 'risk' ? repo.riskUnread(from) : repo.healthUnreadAll(from)
    const to = repo.counter().seq
    if (kind === 'risk') repo.setRiskMark(key, to)
    else repo.setHealthMark(key, to)
    const what = kind === 'risk' ? 'risk' : 'system-health'
    audit(req, {
      description: unread > 0 ? `Marked ${unread} ${what} notification(s) read` : `No unread ${what} notifications to mark read`,
      details: { kind, marked: unread },
      asset: { type: 'Notification', detail: kind === 'risk' ? 'RiskNotification' : 'HealthNotification' },
    })
    return { from, to, unread }
  })()
  if (to > from) notifications.hub.markedRead(req.principal!, kind, from, to)
  return unread > 0
}

export function setMuted(req: FastifyRequest, name: GroupName, muted: boolean): GroupView[] {
  const { db, repos } = req.server
  db.transaction(() => {
    const g = repos.notifications.group(name)!
    const was = g.muted === 1
    if (was !== muted) repos.notifications.setMuted(name, muted, req.principal!.name, Date.now())
    audit(req, {
      description: was === muted ? `Notification group ${name} was already ${muted ? 'muted' : 'unmuted'}` : `${muted ? 'Muted' : 'Unmuted'} notification group ${name}`,
      details: { name, muted: { from: was, to: muted } },
      asset: { key: name, name, type: 'Notification', detail: 'Setting' },
    })
  })()
  return groups(req)
}
