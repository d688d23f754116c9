// The catalogue service without Fastify's routes: the ports of a test app's database (SQLite
// or PostgreSQL), plain context; a change drops the
// kept vulnerable-peripherals insight in its unit of work, and rolls back with it.
import t from 'tap'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { catalogueService, MAX_CATALOGUE_ENTRIES } from '../lib/catalogue/service.js'
import { VULNERABLE_INSIGHT } from '../lib/insights/service.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { build } from './helpers.js'
import { insertRows, portsOf, query, queryValue } from './seed.js'

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t)
  const ports = portsOf(app)
  const { uow } = app.storage
  const { insights } = ports
  const refreshed: string[] = []
  let failAudit = false
  const record = async (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    await recordAudit({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }, ctx, entry)
  }
  const service = catalogueService({
    catalogue: ports.catalogue,
    followers: {
      refreshModel: (vid: string, pid: string) => {
        refreshed.push(`${vid}:${pid}`)
        return ports.catalogueFollowers.refreshModel(vid, pid)
      },
      invalidateInsight: ports.catalogueFollowers.invalidateInsight,
    },
    uow,
    audit: { record },
    now: () => 1_700_000_000_000,
  })
  const keepInsight = () => insights.store(VULNERABLE_INSIGHT, 1000, { recordsTotal: 0, data: [] })
  const insightKept = async () => (await insights.peek(VULNERABLE_INSIGHT)) !== undefined
  // Only what the service wrote from here on.
  const mark = (await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')) ?? 0
  const auditRows = () => query(app, 'SELECT user_name, operation_id, description FROM audit_trail WHERE id > ? ORDER BY id', mark)
  return { app, service, refreshed, keepInsight, insightKept, auditRows, failAudit: (on: boolean) => (failAudit = on) }
}

const ctx = (operationId: string) =>
  systemContext({ actor: 'admin', profile: 30, requestId: 'req-1', operation: { operationId, method: 'POST', path: '/x', auditCategory: 'Peripherals', readOnly: false } })
const entry = { kind: 'VulnerableDevice' as const, vid: '0951', pid: '16a6', name: 'Flash drive' }

/** Fills the catalogue up to `free` entries below its limit. */
async function fillCatalogue(app: Parameters<typeof insertRows>[0], free: number) {
  const have = (await queryValue<number>(app, 'SELECT count(*) FROM catalogue')) ?? 0
  const row = (i: number) => ({ id: `bulk-${i}`, kind: 'VulnerableDevice', vid: 'FFFF', pid: i.toString(16).padStart(4, '0'), name: 'bulk', severity: 3, created_ms: 0, created_by: 'test' })
  await insertRows(
    app,
    'catalogue',
    Array.from({ length: MAX_CATALOGUE_ENTRIES - free - have }, (_, k) => row(have + k)),
  )
}

t.test('an entry is added with its audit record; the model is reassessed and the insight dropped', async (t) => {
  const { service, refreshed, keepInsight, insightKept, auditRows } = await setup(t)
  await keepInsight()
  const row = await service.add(ctx('addCatalogueEntry'), 'admin', entry)
  t.match(row, { kind: 'VulnerableDevice', vid: '0951', pid: '16A6', severity: 3, created_by: 'admin', created_ms: 1_700_000_000_000, built_in: 0 })
  t.same(refreshed, ['0951:16A6'])
  t.notOk(await insightKept(), 'the vulnerable-peripherals insight is computed afresh')
  t.match(await auditRows(), [
    { user_name: 'admin', operation_id: 'addCatalogueEntry', description: 'Catalogue entry added: VulnerableDevice 0951:16A6 "Flash drive" (0 agent(s) reported this model)' },
  ])
  t.ok((await service.list()).some((r) => r.id === row.id))
})

t.test('the same kind and model again is a conflict, and nothing is written', async (t) => {
  const { service, keepInsight, insightKept, auditRows } = await setup(t)
  await service.add(ctx('addCatalogueEntry'), 'admin', entry)
  await keepInsight()
  await t.rejects(service.add(ctx('addCatalogueEntry'), 'admin', { ...entry, vid: '0951', pid: '16A6' }), { code: 'conflict' })
  t.ok(await insightKept())
  t.equal((await auditRows()).length, 1)
})

t.test('a full catalogue refuses another entry', async (t) => {
  const { app, service } = await setup(t)
  await fillCatalogue(app, 0)
  await t.rejects(service.add(ctx('addCatalogueEntry'), 'admin', entry), { code: 'conflict', message: /full/ })
})

t.test('adds at once near the limit: never more than the limit, the others 409', async (t) => {
  const { app, service } = await setup(t)
  await fillCatalogue(app, 3)
  const outcomes = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => service.add(ctx('addCatalogueEntry'), 'admin', { ...entry, vid: 'EEEE', pid: `000${i}` })))
  const refused = outcomes.filter((o) => o.status === 'rejected')
  t.ok(
    refused.every((o) => (o.reason as { code?: string; message?: string }).code === 'conflict' && /full/.test((o.reason as Error).message)),
    `every refusal is the full catalogue's 409 (${refused.map((o) => (o.reason as Error).message).join(' | ')})`,
  )
  t.equal(Number(await queryValue<number>(app, 'SELECT count(*) FROM catalogue')), MAX_CATALOGUE_ENTRIES, 'exactly the limit')
  t.equal(outcomes.length - refused.length, 3, 'only the adds the limit left room for')
})

t.test('when the audit record cannot be written, the entry and the insight stay as they were', async (t) => {
  const { service, keepInsight, insightKept, auditRows, failAudit } = await setup(t)
  const before = (await service.list()).length
  await keepInsight()
  failAudit(true)
  await t.rejects(service.add(ctx('addCatalogueEntry'), 'admin', entry), /audit trail is full/)
  t.equal((await service.list()).length, before)
  t.ok(await insightKept(), 'the insight was not dropped either')
  t.equal((await auditRows()).length, 0)
})

t.test('removal: by id in any case, audited; an unknown id is not found', async (t) => {
  const { service, refreshed, keepInsight, insightKept, auditRows } = await setup(t)
  const row = await service.add(ctx('addCatalogueEntry'), 'a-token-name-that-is-long'.repeat(5), entry)
  t.equal(row.created_by.length, 100, 'who added it is cut to the field')
  await keepInsight()
  const removed = await service.remove(ctx('deleteCatalogueEntry'), row.id.toUpperCase())
  t.equal(removed.id, row.id)
  t.notOk(await insightKept())
  t.same(refreshed, ['0951:16A6', '0951:16A6'])
  t.match((await auditRows()).at(-1), { operation_id: 'deleteCatalogueEntry', description: /^Catalogue entry removed: VulnerableDevice 0951:16A6/ })
  await t.rejects(service.remove(ctx('deleteCatalogueEntry'), row.id), { code: 'not-found' })
})
