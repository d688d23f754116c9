// backend: postgres-pending — the service is built over SQLite's ports (an in-memory database) only; not yet over PostgreSQL's
// The catalogue service without Fastify: SQLite ports, plain context; a change drops the
// kept vulnerable-peripherals insight in its unit of work, and rolls back with it.
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { agentStateRepo } from '../db/agent-state.js'
import { auditRepo } from '../db/audit.js'
import { catalogueRepo } from '../db/catalogue.js'
import { insightsRepo } from '../db/insights.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { catalogueService, MAX_CATALOGUE_ENTRIES } from '../lib/catalogue/service.js'
import { VULNERABLE_INSIGHT } from '../lib/insights/service.js'
import { systemContext, type Context } from '../lib/platform/context.js'

function setup() {
  const db = openDatabase(':memory:')
  const uow = sqliteUnitOfWork(db)
  const insights = insightsRepo(db, ['0x000001'])
  const agentState = agentStateRepo(db)
  const auditStore = auditRepo(db)
  const refreshed: string[] = []
  let failAudit = false
  const record = (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    recordAudit({ repo: auditStore, refusalWindowMs: 60_000, flushRefusal: () => {} }, ctx, entry)
  }
  const service = catalogueService({
    catalogue: asyncPort(catalogueRepo(db), uow),
    followers: asyncPort(
      {
        refreshModel: (vid: string, pid: string) => {
          refreshed.push(`${vid}:${pid}`)
          return agentState.refreshModel(vid, pid)
        },
        invalidateInsight: insights.invalidate,
      },
      uow,
    ),
    uow,
    audit: asyncPort({ record }, uow),
    now: () => 1_700_000_000_000,
  })
  const keepInsight = () => insights.store(VULNERABLE_INSIGHT, 1000, { recordsTotal: 0, data: [] })
  const insightKept = () => insights.peek(VULNERABLE_INSIGHT) !== undefined
  const auditRows = () => db.prepare('SELECT user_name, operation_id, description FROM audit_trail ORDER BY id').all() as Record<string, unknown>[]
  return { db, service, refreshed, keepInsight, insightKept, auditRows, failAudit: (on: boolean) => (failAudit = on) }
}

const ctx = (operationId: string) =>
  systemContext({ actor: 'admin', profile: 30, requestId: 'req-1', operation: { operationId, method: 'POST', path: '/x', auditCategory: 'Peripherals', readOnly: false } })
const entry = { kind: 'VulnerableDevice' as const, vid: '0951', pid: '16a6', name: 'Flash drive' }

t.test('an entry is added with its audit record; the model is reassessed and the insight dropped', async (t) => {
  const { service, refreshed, keepInsight, insightKept, auditRows } = setup()
  keepInsight()
  const row = await service.add(ctx('addCatalogueEntry'), 'admin', entry)
  t.match(row, { kind: 'VulnerableDevice', vid: '0951', pid: '16A6', severity: 3, created_by: 'admin', created_ms: 1_700_000_000_000, built_in: 0 })
  t.same(refreshed, ['0951:16A6'])
  t.notOk(insightKept(), 'the vulnerable-peripherals insight is computed afresh')
  t.match(auditRows(), [{ user_name: 'admin', operation_id: 'addCatalogueEntry', description: 'Catalogue entry added: VulnerableDevice 0951:16A6 "Flash drive" (0 agent(s) reported this model)' }])
  t.ok((await service.list()).some((r) => r.id === row.id))
})

t.test('the same kind and model again is a conflict, and nothing is written', async (t) => {
  const { service, keepInsight, insightKept, auditRows } = setup()
  await service.add(ctx('addCatalogueEntry'), 'admin', entry)
  keepInsight()
  await t.rejects(service.add(ctx('addCatalogueEntry'), 'admin', { ...entry, vid: '0951', pid: '16A6' }), { code: 'conflict' })
  t.ok(insightKept())
  t.equal(auditRows().length, 1)
})

t.test('a full catalogue refuses another entry', async (t) => {
  const { db, service } = setup()
  const insert = db.prepare("INSERT INTO catalogue (id, kind, vid, pid, name, severity, created_ms, created_by) VALUES (?, 'VulnerableDevice', ?, ?, 'bulk', 3, 0, 'test')")
  const have = (db.prepare('SELECT count(*) FROM catalogue').pluck().get() as number) ?? 0
  db.transaction(() => {
    for (let i = have; i < MAX_CATALOGUE_ENTRIES; i++) insert.run(`bulk-${i}`, 'FFFF', i.toString(16).padStart(4, '0'))
  })()
  await t.rejects(service.add(ctx('addCatalogueEntry'), 'admin', entry), { code: 'conflict', message: /full/ })
})

t.test('when the audit record cannot be written, the entry and the insight stay as they were', async (t) => {
  const { service, keepInsight, insightKept, auditRows, failAudit } = setup()
  const before = (await service.list()).length
  keepInsight()
  failAudit(true)
  await t.rejects(service.add(ctx('addCatalogueEntry'), 'admin', entry), /audit trail is full/)
  t.equal((await service.list()).length, before)
  t.ok(insightKept(), 'the insight was not dropped either')
  t.equal(auditRows().length, 0)
})

t.test('removal: by id in any case, audited; an unknown id is not found', async (t) => {
  const { service, refreshed, keepInsight, insightKept, auditRows } = setup()
  const row = await service.add(ctx('addCatalogueEntry'), 'a-token-name-that-is-long'.repeat(5), entry)
  t.equal(row.created_by.length, 100, 'who added it is cut to the field')
  keepInsight()
  const removed = await service.remove(ctx('deleteCatalogueEntry'), row.id.toUpperCase())
  t.equal(removed.id, row.id)
  t.notOk(insightKept())
  t.same(refreshed, ['0951:16A6', '0951:16A6'])
  t.match(auditRows().at(-1), { operation_id: 'deleteCatalogueEntry', description: /^Catalogue entry removed: VulnerableDevice 0951:16A6/ })
  await t.rejects(service.remove(ctx('deleteCatalogueEntry'), row.id), { code: 'not-found' })
})
