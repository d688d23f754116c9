// backend: postgres-pending — the service is built over SQLite's ports (an in-memory database) only; not yet over PostgreSQL's
// The notification service without Fastify: plain context and reader, SQLite ports, the
// unit of work rolling back with the audit record.
import t from 'tap'
import { openDatabase, type DB } from '../db/index.js'
import { auditRepo } from '../db/audit.js'
import { notificationsRepo } from '../db/notifications.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { notificationService, type NotificationDeps } from '../lib/notifications/service.js'
import type { GroupName } from '../lib/notifications/views.js'
import type { Sort } from '../lib/listing.js'

const alice = { key: 'user:1', name: 'alice' }
const bob = { key: 'user:2', name: 'bob' }
const newest: Sort = { field: 'id', direction: 'desc' }
const page = { filter: {}, sort: newest, pageSize: 50, offset: 0 }

function riskNotification(db: DB, title: string, events: number[] = []): number {
  const seq = db.prepare('UPDATE notification_counter SET seq = seq + 1 WHERE id = 1 RETURNING seq').pluck().get() as number
  const id = db
    .prepare(
      `INSERT INTO risk_notifications (kind, severity, agent_uuid, host_identifier, device_key, title, description, first_ms, last_ms, occurred_seq, change_seq)
       VALUES ('KnownAttackTool', 2, 'agent-1', 'host-1', ?, ?, 'seen', 1000, 1000, ?, ?) RETURNING id`,
    )
    .pluck()
    .get(`1234:5678:${title}`, title, seq, seq) as number
  for (const e of events) db.prepare('INSERT INTO risk_notification_events (notification_id, event_id) VALUES (?, ?)').run(id, e)
  return id
}

function setup(over: Partial<NotificationDeps> = {}) {
  const db = openDatabase(':memory:')
  db.pragma('foreign_keys = OFF')
  const uow = sqliteUnitOfWork(db)
  const repo = notificationsRepo(db)
  const auditStore = auditRepo(db)
  const marked: unknown[] = []
  let checks = 0
  let failAudit = false
  const record = (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    recordAudit({ repo: auditStore, refusalWindowMs: 60_000, flushRefusal: () => {} }, ctx, entry)
  }
  const service = notificationService({
    notifications: asyncPort(repo, uow),
    uow,
    audit: asyncPort({ record }, uow),
    groupNames: ['Database', 'License'] as GroupName[],
    keptAnswers: 100,
    ensureChecked: async () => void checks++,
    markedRead: (...args) => void marked.push(args),
    now: () => 5000,
    ...over,
  })
  const auditRows = () => db.prepare('SELECT user_name, operation_id, description, outcome FROM audit_trail ORDER BY id').all() as Record<string, unknown>[]
  return { db, repo, service, marked, auditRows, checks: () => checks, failAudit: (on: boolean) => (failAudit = on) }
}

const ctx = (operationId: string) =>
  systemContext({ actor: 'alice', profile: 20, requestId: 'req-1', operation: { operationId, method: 'POST', path: '/x', auditCategory: 'Configuration', readOnly: false } })

t.test('a pin is written with its audit record; a dismissed notification cannot be pinned', async (t) => {
  const { db, service, auditRows } = setup()
  const id = riskNotification(db, 'rubber ducky', [7, 9])
  t.equal(await service.pinRisk(ctx('pinRiskNotification'), alice, id, true), true)
  const [view] = (await service.listRisk(alice, page)).data
  t.match(view, { id, isPinned: true, pinnedBy: 'alice', pinnedTime: new Date(5000).toISOString(), relatedEventIds: [7, 9] })
  t.match(auditRows(), [{ user_name: 'alice', operation_id: 'pinRiskNotification', description: `Pinned risk notification ${id}: rubber ducky` }])
  t.equal(await service.dismissRisk(ctx('dismissRiskNotification'), alice, id), true)
  t.equal(await service.dismissRisk(ctx('dismissRiskNotification'), alice, id), false, 'a second dismissal changes nothing')
  await t.rejects(service.pinRisk(ctx('pinRiskNotification'), alice, id, true), { code: 'conflict' })
  await t.rejects(service.pinRisk(ctx('pinRiskNotification'), alice, id + 1, true), { code: 'not-found' })
  t.equal(auditRows().length, 3, 'refusals write no record of their own here')
})

t.test('when the audit record cannot be written, the change is rolled back', async (t) => {
  const { db, repo, service, auditRows, failAudit } = setup()
  const id = riskNotification(db, 'keylogger')
  const seq = repo.counter().seq
  failAudit(true)
  await t.rejects(service.pinRisk(ctx('pinRiskNotification'), alice, id, true), /audit trail is full/)
  await t.rejects(service.readAll(ctx('readAllRiskNotifications'), alice, 'risk'), /audit trail is full/)
  t.equal(repo.risk(id)!.pinned_ms, null)
  t.equal(repo.counter().seq, seq, 'no change number was taken')
  t.same(repo.marks(alice.key), { risk_seq: 0, health_seq: 0 })
  t.equal(auditRows().length, 0)
})

t.test("read state is the reader's: read-all moves only their mark and tells their streams", async (t) => {
  const { db, service, marked, auditRows } = setup()
  riskNotification(db, 'one')
  riskNotification(db, 'two')
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
  t.match(auditRows().at(-1), { description: 'No unread risk notifications to mark read' })
})

t.test('kept answers follow every change', async (t) => {
  const { db, service } = setup()
  riskNotification(db, 'one')
  t.equal((await service.listRisk(alice, page)).filtered, 1)
  riskNotification(db, 'two')
  t.equal((await service.listRisk(alice, page)).filtered, 2, 'a new notification takes a change number: the kept page is not served')
})

t.test("groups: the reader's first look runs the checks; muting is audited and answered", async (t) => {
  const { service, checks, auditRows } = setup()
  const groups = await service.setMuted(ctx('updateNotificationGroup'), alice, 'License', true)
  t.same(
    groups.map((g) => [g.name, g.muted, g.mutedBy]),
    [
      ['Database', false, null],
      ['License', true, 'alice'],
    ],
  )
  await service.setMuted(ctx('updateNotificationGroup'), alice, 'License', true)
  t.match(auditRows(), [{ description: 'Muted notification group License' }, { description: 'Notification group License was already muted' }])
  t.equal(checks(), 2)
  const status = await service.operationalStatus(alice)
  t.same(
    status.subsystems.map((s) => s.name),
    ['Database', 'License'],
  )
})

t.test('system-health notifications: pin toggles, dismissal ends pinning', async (t) => {
  const { repo, service, auditRows } = setup()
  repo.openHealthNotification('Database', 3, 'Database check failed', 'quick check: corrupt', 1000)
  const id = repo.openHealth('Database')!.id
  t.equal(await service.pinHealth(ctx('pinHealthNotification'), alice, id), true)
  t.equal(await service.pinHealth(ctx('pinHealthNotification'), alice, id), false)
  t.equal(await service.dismissHealth(ctx('dismissHealthNotification'), bob, id), true)
  t.equal(repo.health(id)!.dismissed_by, 'bob')
  await t.rejects(service.pinHealth(ctx('pinHealthNotification'), alice, id), { code: 'conflict' })
  await t.rejects(service.dismissHealth(ctx('dismissHealthNotification'), alice, id + 1), { code: 'not-found' })
  t.equal(auditRows().length, 3)
})
