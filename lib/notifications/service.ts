// What the notification operations read and change. Pins, dismissals and mutes are shared
// by all users; read state is the reader's. Every change is audited in its unit of work.
// Takes plain inputs (the request's context, the reader and the parsed input), so it runs
// without Fastify.
import type { AuditAsset, AuditTrail, UnitOfWork } from '../platform/ports.js'
import { problem } from '../errors.js'
import type { Context } from '../platform/context.js'
import { iso } from '../time.js'
import { KeptAnswers } from './kept.js'
import type { HealthRow, NotificationStore, RiskRow } from './ports.js'
import type { RiskQuery } from './query.js'
import { countsView, groupView, healthView, riskView, type CountsView, type GroupName, type GroupView, type RiskView } from './views.js'
import type { CacheRegistry } from '../platform/cache.js'

/** Notifications a group or the operational status shows. */
const LISTED = 100

/** Who reads: the key of the read state (an account or an integration token, see `callerKey`) and the name its changes carry. */
export interface Reader {
  key: string
  name: string
}

export interface NotificationDeps {
  notifications: NotificationStore
  uow: UnitOfWork
  audit: AuditTrail
  /** The groups the contract names, in its order (`groupNames`). */
  groupNames: readonly GroupName[]
  /** List and count answers kept while no notification changes (PRIME_KEPT_LIST_ANSWERS; 0: none). */
  keptAnswers: number
  /** The app's caches, where the kept answers are made (absent: a cache of its own). */
  caches?: CacheRegistry
  /** Runs the health checks now if this process has not run them yet: a reader's first look gets a check of its own. */
  ensureChecked(): Promise<void>
  /** Tells the reader's open streams which notifications a read-all marked read (change numbers in (from, to]). */
  markedRead(readerKey: string, kind: 'risk' | 'health', from: number, to: number): void
  now?: () => number
}

const riskAsset = (r: RiskRow): AuditAsset => ({
  key: String(r.id),
  name: r.title,
  parentId: r.agent_uuid,
  ipAddress: r.host_ip,
  type: 'Notification',
  detail: 'RiskNotification',
})
const healthAsset = (h: HealthRow): AuditAsset => ({ key: String(h.id), name: h.title, parentId: h.group_name, type: 'Notification', detail: 'HealthNotification' })

export function notificationService(deps: NotificationDeps) {
  const { notifications: store, uow, audit } = deps
  const now = deps.now ?? Date.now
  const kept = new KeptAnswers(deps.keptAnswers, deps.caches)

  async function riskOf(id: number): Promise<RiskRow> {
    const r = await store.risk(id)
    if (!r) throw problem('not-found', `No risk notification with id ${id}.`)
    return r
  }

  async function healthOf(id: number): Promise<HealthRow> {
    const h = await store.health(id)
    if (!h) throw problem('not-found', `No system-health notification with id ${id}.`)
    return h
  }

  const service = {
    /** One page of risk notifications as the reader sees them, and how many match. */
    async listRisk(reader: Reader, q: RiskQuery): Promise<{ filtered: number; data: RiskView[] }> {
      const mark = (await store.marks(reader.key)).risk_seq
      const { seq } = await store.counter()
      return kept.answer(seq, JSON.stringify(['risk', q, mark]), async () => {
        const { filtered, rows } = await store.riskPage(q.filter, q.sort, mark, q.pageSize, q.offset)
        return { filtered, data: rows.map(({ row, related }) => riskView(row, row.occurred_seq <= mark, related)) }
      })
    },

    async counts(reader: Reader): Promise<CountsView> {
      const marks = await store.marks(reader.key)
      const counter = await store.counter()
      return kept.answer(counter.seq, JSON.stringify(['counts', marks.risk_seq, marks.health_seq]), async () => {
        const risk = { unread: await store.riskUnread(marks.risk_seq), pinned: await store.riskPinned(), total: counter.risk_open }
        return countsView(risk, await store.healthCounts(marks.health_seq))
      })
    },

    /** Every group, in the contract's order, with the reader's counts and its notifications not dismissed. */
    async groups(reader: Reader): Promise<GroupView[]> {
      await deps.ensureChecked()
      const mark = (await store.marks(reader.key)).health_seq
      const byName = new Map((await store.groups()).map((g) => [g.name, g]))
      const countsByName = new Map((await store.groupCounts(mark)).map((c) => [c.group_name, c]))
      const out: GroupView[] = []
      for (const name of deps.groupNames) {
        const g = byName.get(name)!
        const listed = await store.healthOfGroup(name, LISTED)
        out.push({ ...groupView(g, countsByName.get(name)), notifications: listed.map((h) => healthView(h, h.occurred_seq <= mark)) })
      }
      return out
    },

    /** The subsystems as the last periodic check found them, and the open notifications. */
    async operationalStatus(reader: Reader) {
      await deps.ensureChecked()
      const mark = (await store.marks(reader.key)).health_seq
      const byName = new Map((await store.groups()).map((g) => [g.name, g]))
      const rank = { Healthy: 0, Warning: 1, Failed: 2 } as const
      let status: keyof typeof rank = 'Healthy'
      let checked = 0
      const subsystems = deps.groupNames.map((name) => {
        const g = byName.get(name)!
        if (rank[g.state] > rank[status]) status = g.state
        checked = Math.max(checked, g.checked_ms ?? 0)
        return { name, state: g.state, detail: g.detail.slice(0, 1000), since: iso(g.since_ms ?? g.checked_ms ?? 0), checkedTime: iso(g.checked_ms ?? 0) }
      })
      const open = await store.openHealthNotifications(LISTED)
      return { status, checkedTime: iso(checked), subsystems, openNotifications: open.map((h) => healthView(h, h.occurred_seq <= mark)) }
    },

    /** Pins or unpins a risk notification; a dismissed one cannot be pinned. Answers the pin state. */
    async pinRisk(ctx: Context, reader: Reader, id: number, pinned: boolean): Promise<boolean> {
      return uow.run(async () => {
        const r = await riskOf(id)
        if (r.dismissed_ms !== null && pinned) throw problem('conflict', `Risk notification ${id} is dismissed; a dismissed notification cannot be pinned.`)
        const was = r.pinned_ms !== null
        if (was !== pinned) await store.pinRisk(id, pinned ? reader.name : null, pinned ? now() : null)
        await audit.record(ctx, {
          description: `${was === pinned ? `Risk notification ${id} was already ${pinned ? 'pinned' : 'unpinned'}` : `${pinned ? 'Pinned' : 'Unpinned'} risk notification ${id}`}: ${r.title}`,
          details: { id, kind: r.kind, pinned: { from: was, to: pinned } },
          asset: riskAsset(r),
        })
        return pinned
      })
    },

    /** Dismisses a risk notification; answers whether it was not dismissed before. */
    async dismissRisk(ctx: Context, reader: Reader, id: number): Promise<boolean> {
      return uow.run(async () => {
        const r = await riskOf(id)
        const done = r.dismissed_ms === null && (await store.dismissRisk(id, reader.name, now()))
        await audit.record(ctx, {
          description: done ? `Dismissed risk notification ${id}: ${r.title}` : `Risk notification ${id} was already dismissed (by ${r.dismissed_by} at ${iso(r.dismissed_ms!)})`,
          details: { id, kind: r.kind, dismissed: done, wasPinned: r.pinned_ms !== null, occurrences: r.occurrences },
          asset: riskAsset(r),
        })
        return done
      })
    },

    /** Toggles the pin of a system-health notification; a dismissed one cannot be pinned. Answers the new pin state. */
    async pinHealth(ctx: Context, reader: Reader, id: number): Promise<boolean> {
      return uow.run(async () => {
        const h = await healthOf(id)
        if (h.dismissed_ms !== null) throw problem('conflict', `System-health notification ${id} is dismissed; a dismissed notification cannot be pinned.`)
        const pinned = h.pinned_ms === null
        await store.pinHealth(id, pinned ? reader.name : null, pinned ? now() : null)
        await audit.record(ctx, {
          description: `${pinned ? 'Pinned' : 'Unpinned'} system-health notification ${id}: ${h.title}`,
          details: { id, group: h.group_name, pinned: { from: !pinned, to: pinned } },
          asset: healthAsset(h),
        })
        return pinned
      })
    },

    /** Dismisses a system-health notification; answers whether it was not dismissed before. */
    async dismissHealth(ctx: Context, reader: Reader, id: number): Promise<boolean> {
      return uow.run(async () => {
        const h = await healthOf(id)
        const done = h.dismissed_ms === null && (await store.dismissHealth(id, reader.name, now()))
        await audit.record(ctx, {
          description: done ? `Dismissed system-health notification ${id}: ${h.title}` : `System-health notification ${id} was already dismissed (by ${h.dismissed_by} at ${iso(h.dismissed_ms!)})`,
          details: { id, group: h.group_name, dismissed: done, wasPinned: h.pinned_ms !== null, state: h.resolved_ms === null ? 'Open' : 'Resolved' },
          asset: healthAsset(h),
        })
        return done
      })
    },

    /** Marks everything of one kind read for the reader; answers whether anything was unread. */
    async readAll(ctx: Context, reader: Reader, kind: 'risk' | 'health'): Promise<boolean> {
      const { from, to, unread } = await uow.run(async () => {
        const marks = await store.marks(reader.key)
        const from = kind === 'risk' ? marks.risk_seq : marks.health_seq
        const unread = kind === 'risk' ? await store.riskUnread(from) : await store.healthUnreadAll(from)
        const to = (await store.counter()).seq
        if (kind === 'risk') await store.setRiskMark(reader.key, to)
        else await store.setHealthMark(reader.key, to)
        const what = kind === 'risk' ? 'risk' : 'system-health'
        await audit.record(ctx, {
          description: unread > 0 ? `Marked ${unread} ${what} notification(s) read` : `No unread ${what} notifications to mark read`,
          details: { kind, marked: unread },
          asset: { type: 'Notification', detail: kind === 'risk' ? 'RiskNotification' : 'HealthNotification' },
        })
        return { from, to, unread }
      })
      if (to > from) deps.markedRead(reader.key, kind, from, to)
      return unread > 0
    },

    /** Mutes or unmutes a group; answers every group as the reader sees them. */
    async setMuted(ctx: Context, reader: Reader, name: GroupName, muted: boolean): Promise<GroupView[]> {
      await uow.run(async () => {
        const g = (await store.group(name))!
        const was = g.muted === 1
        if (was !== muted) await store.setMuted(name, muted, reader.name, now())
        await audit.record(ctx, {
          description: was === muted ? `Notification group ${name} was already ${muted ? 'muted' : 'unmuted'}` : `${muted ? 'Muted' : 'Unmuted'} notification group ${name}`,
          details: { name, muted: { from: was, to: muted } },
          asset: { key: name, name, type: 'Notification', detail: 'Setting' },
        })
      })
      return service.groups(reader)
    },
  }
  return service
}

export type NotificationService = ReturnType<typeof notificationService>
