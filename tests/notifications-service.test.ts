// The notification service without Fastify's routes: plain context and reader, the ports of
// a test app's database (SQLite or PostgreSQL), the
// unit of work rolling back with the audit record.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { notificationService, type NotificationDeps } from '../lib/notifications/service.js'
import type { GroupName } from '../lib/notifications/views.js'
import type { Sort } from '../lib/listing.js'
import { build } from './helpers.js'
import { portsOf, query, queryValue } from './seed.js'

const alice = { key: 'user:1', name: 'alice' }
const bob = { key: 'user:2', name: 'bob' }
const newest: Sort = { field: 'id', direction: 'desc' }
const page = { filter: {}, sort: newest, pageSize: 50, offset: 0 }

async function riskNotification(app: FastifyInstance, title: string, events: number[] = []): Promise<number> {
  const seq = await queryValue<number>(app, 'UPDATE notification_counter SET seq = seq + 1 WHERE id = 1 RETURNING seq')
  const id = await queryValue<number>(
    app,
    `INSERT INTO risk_notifications (kind, severity, agent_uuid, host_identifier, device_key, title, description, first_ms, last_ms, occurred_seq, change_seq)
     VALUES ('KnownAttackTool', 2, 'agent-1', 'host-1', ?, ?, 'seen', 1000, 1000, ?, ?) RETURNING id`,
    `1234:5678:${title}`,
    title,
    seq,
    seq,
  )
  for (const e of events) await query(app, 'INSERT INTO risk_notification_events (notification_id, event_id) VALUES (?, ?)', id, e)
  return id
}

async function setup(t: Parameters<typeof build>[0], over: Partial<NotificationDeps> = {}) {
  const app = await build(t)
  // The events a notification names are not written here (SQLite's schema would want them).
  if (app.storage.backend === 'sqlite') app.db.pragma('foreign_keys = OFF')
  const { uow } = app.storage
  const repo = portsOf(app).notifications
  const marked: unknown[] = []
  let checks = 0
  let failAudit = false
  const record = async (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    await recordAudit({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }, ctx, entry)
  }
  const service = notificationService({
    notifications: repo,
    uow,
    audit: { record },
    groupNames: ['Database', 'License'] as GroupName[],
    keptAnswers: 100,
    ensureChecked: async () => void checks++,
    markedRead: (...args) => void marked.push(args),
    now: () => 5000,
    ...over,
  })
  // Only what the service wrote from here on.
  const mark = (await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')) ?? 0
  const auditRows = () => query(app, 'SELECT user_name, operation_id, description, outcome FROM audit_trail WHERE id > ? ORDER BY id', mark)
  return { app, repo, service, marked, auditRows, checks: () => checks, failAudit: (on: boolean) => (failAudit = on) }
}

const ctx = (operationId: string) =>
  systemContext({ actor: 'alice', profile: 20, requestId: 'req-1', operation: { operationId, method: 'POST', path: '/x', auditCategory: 'Configuration', readOnly: false } })

t.test('a pin is written with its audit record; a dismissed notification cannot be pinned', async (t) => {
  const { app, service, auditRows } = await setup(t)
  const id = await riskNotification(app, 'rubber ducky', [7, 9])
  t.equal(await service.pinRisk(ctx('pinRiskNotification'), alice, id, true), true)
  const [view] = (await service.listRisk(alice, page)).data
  t.match(view, { id, isPinned: true, pinnedBy: 'alice', pinnedTime: new Date(5000).toISOString(), relatedEventIds: [7, 9] })
  t.match(await auditRows(), [{ user_name: 'alice', operation_id: 'pinRiskNotification', description: `Pinned risk notification ${id}: rubber ducky` }])
  t.equal(await service.dismissRisk(ctx('dismissRiskNotification'), alice, id), true)
  t.equal(await service.dismissRisk(ctx('dismissRiskNotification'), alice, id), false, 'a second dismissal changes nothing')
  await t.rejects(service.pinRisk(ctx('pinRiskNotification'), alice, id, true), { code: 'conflict' })
  await t.rejects(service.pinRisk(ctx('pinRiskNotification'), alice, id + 1, true), { code: 'not-found' })
  t.equal((await auditRows()).length, 3, 'refusals write no record of their own here')
})

t.test('when the audit record cannot be written, the change is rolled back', async (t) => {
  const { app, repo, service, auditRows, failAudit } = await setup(t)
  const id = await riskNotification(app, 'keylogger')
  const seq = (await repo.counter()).seq
  failAudit(true)
  await t.rejects(service.pinRisk(ctx('pinRiskNotification'), alice, id, true), /audit trail is full/)
  await t.rejects(service.readAll(ctx('readAllRiskNotifications'), alice, 'risk'), /audit trail is full/)
  t.equal((await repo.risk(id))!.pinned_ms, null)
  t.equal((await repo.counter()).seq, seq, 'no change number was taken')
  t.same(await repo.marks(alice.key), { risk_seq: 0, health_seq: 0 })
  t.equal((await auditRows()).length, 0)
})

t.test("read state is the reader's: read-all moves only their mark and tells their streams", async (t) => {
  const { app, service, marked, auditRows } = await setup(t)
  await riskNotification(app, 'one')
  await riskNotification(app, 'two')
  t.match(await service.counts(alice), { riskUnread: 2, riskTotal: 2, unread: 2 })
  t.equal(await service.readAll(ctx('readAllRiskNotifications'), alice, 'risk'), true)
  t.match(await service.counts(alice), { riskUnread: 0, riskTotal: 2 }, 'the kept answer is not served for the new mark')
  t.match(await service.counts(bob), { riskUnread: 2 })
  t.same(
    (await service.listRisk(alice, page)).data.map((r) => r.isRead),
    [true, true],
  )
  t.same(
    (await service.listRisk(bob, page)).data.map((r) => r.isRead),
    [false, false],
  )
  t.same(marked, [[alice.key, 'risk', 0, 2]])
  t.equal(await service.readAll(ctx('readAllRiskNotifications'), alice, 'risk'), false, 'nothing left unread')
  t.equal(marked.length, 1, 'streams are told only when the mark moves')
  t.match((await auditRows()).at(-1), { description: 'No unread risk notifications to mark read' })
})

t.test('kept answers follow every change', async (t) => {
  const { app, service } = await setup(t)
  await riskNotification(app, 'one')
  t.equal((await service.listRisk(alice, page)).filtered, 1)
  await riskNotification(app, 'two')
  t.equal((await service.listRisk(alice, page)).filtered, 2, 'a new notification takes a change number: the kept page is not served')
})

t.test("groups: the reader's first look runs the checks; muting is audited and answered", async (t) => {
  const { service, checks, auditRows } = await setup(t)
  const groups = await service.setMuted(ctx('updateNotificationGroup'), alice, 'License', true)
  t.same(
    groups.map((g) => [g.name, g.muted, g.mutedBy]),
    [
      ['Database', false, null],
      ['License', true, 'alice'],
    ],
  )
  await service.setMuted(ctx('updateNotificationGroup'), alice, 'License', true)
  t.match(await auditRows(), [{ description: 'Muted notification group License' }, { description: 'Notification group License was already muted' }])
  t.equal(checks(), 2)
  const status = await service.operationalStatus(alice)
  t.same(
    status.subsystems.map((s) => s.name),
    ['Database', 'License'],
  )
})

t.test('system-health notifications: pin toggles, dismissal ends pinning', async (t) => {
  const { app, repo, service, auditRows } = await setup(t)
  // Opened as the health checks open one (lib/notifications/health.ts).
  const records = app.storage.notificationLoops.records
  await records.openHealthNotification('Database', 3, 'Database check failed', 'quick check: corrupt', 1000)
  const id = (await records.openHealth('Database'))!.id
  t.equal(await service.pinHealth(ctx('pinHealthNotification'), alice, id), true)
  t.equal(await service.pinHealth(ctx('pinHealthNotification'), alice, id), false)
  t.equal(await service.dismissHealth(ctx('dismissHealthNotification'), bob, id), true)
  t.equal((await repo.health(id))!.dismissed_by, 'bob')
  await t.rejects(service.pinHealth(ctx('pinHealthNotification'), alice, id), { code: 'conflict' })
  await t.rejects(service.dismissHealth(ctx('dismissHealthNotification'), alice, id + 1), { code: 'not-found' })
  t.equal((await auditRows()).length, 3)
})
