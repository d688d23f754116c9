// backend: postgres-pending — the service is built over SQLite's ports (an in-memory database) only; not yet over PostgreSQL's
// The insight service without Fastify: SQLite ports, a clock of the test's own. Kept
// answers, their reloads, the error totals' date rules, and the catalogue's rule that a
// change makes the vulnerable-peripherals insight computed afresh.
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { agentStateRepo } from '../db/agent-state.js'
import { auditRepo } from '../db/audit.js'
import { catalogueRepo } from '../db/catalogue.js'
import { insightsRepo } from '../db/insights.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { catalogueService } from '../lib/catalogue/service.js'
import { eventCodes } from '../lib/event-codes.js'
import { insightService } from '../lib/insights/service.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { insertAgent, insertPeripheral } from './fixtures/fleet.js'

const HOUR = 3_600_000

function setup() {
  const db = openDatabase(':memory:')
  const uow = sqliteUnitOfWork(db)
  const repo = insightsRepo(db, [eventCodes.whitelistViolation.code, eventCodes.unapprovedOnArmed.code])
  let clock = Date.parse('2026-03-02T10:00:00Z')
  const service = insightService({ insights: asyncPort(repo, uow), uow, disconnectSeconds: 300, uncommonMaxHosts: 2, now: () => clock })
  const agentState = agentStateRepo(db)
  const auditStore = auditRepo(db)
  const catalogue = catalogueService({
    catalogue: asyncPort(catalogueRepo(db), uow),
    followers: asyncPort({ refreshModel: agentState.refreshModel, invalidateInsight: repo.invalidate }, uow),
    uow,
    audit: asyncPort({ record: (ctx: Context, entry: AuditEntry) => recordAudit({ repo: auditStore, refusalWindowMs: 60_000, flushRefusal: () => {} }, ctx, entry) }, uow),
  })
  // The fleet fixtures need the database and the agents' state only.
  const app = { db, repos: { agentState } } as unknown as FastifyInstance
  return { db, app, service, catalogue, tick: (ms: number) => (clock += ms) }
}

t.test('a kept insight is answered for an hour; a reload computes again after a few seconds', async (t) => {
  const { app, service, tick } = setup()
  const agent = insertAgent(app)
  insertPeripheral(app, agent.id, { vid: '0951', pid: '1666' })
  const first = await service.vulnerablePeripherals()
  t.equal(first.recordsTotal, 0, 'no catalogue entry names the model')
  app.db.prepare("INSERT INTO catalogue (id, kind, vid, pid, name, severity, created_ms, created_by) VALUES ('c1', 'VulnerableDevice', '0951', '1666', 'drive', 3, 0, 'test')").run()
  tick(HOUR - 1)
  t.same(await service.vulnerablePeripherals(), first, 'kept: the entry written behind its back is not seen yet')
  t.same(await service.reloadVulnerablePeripherals().then((r) => r.recordsTotal), 1, 'a reload an hour on computes again')
  const reloaded = await service.reloadVulnerablePeripherals()
  tick(5000)
  t.same(await service.reloadVulnerablePeripherals(), reloaded, 'a reload seconds after the last computation answers it')
  t.equal(reloaded.computedTime, new Date(Date.parse('2026-03-02T10:00:00Z') + HOUR - 1).toISOString())
})

t.test('a catalogue change drops the kept vulnerable-peripherals insight', async (t) => {
  const { app, service, catalogue } = setup()
  const agent = insertAgent(app)
  insertPeripheral(app, agent.id, { vid: '0951', pid: '1666' })
  t.equal((await service.vulnerablePeripherals()).recordsTotal, 0)
  const ctx = systemContext({ actor: 'admin', operation: { operationId: 'addCatalogueEntry', method: 'POST', path: '/x', auditCategory: 'Peripherals', readOnly: false } })
  await catalogue.add(ctx, 'admin', { kind: 'VulnerableDevice', vid: '0951', pid: '1666', name: 'drive' })
  const after = await service.vulnerablePeripherals()
  t.equal(after.recordsTotal, 1, 'computed afresh within the hour')
  t.match(after.data[0], { vid: '0951', pid: '1666', kind: 'VulnerableDevice', hostsCount: 1, hosts: [{ uuid: agent.uuid }] })
})

t.test('concurrent first askers compute an insight once', async (t) => {
  const { app, db, service } = setup()
  for (let i = 0; i < 3; i++) insertPeripheral(app, insertAgent(app).id, { vid: '1234', pid: String(i).padStart(4, '0') })
  const puts = db.prepare("SELECT count(*) FROM insight_cache WHERE name LIKE 'uncommon%'").pluck()
  const [a, b] = await Promise.all([service.uncommonPeripherals(), service.uncommonPeripherals()])
  t.same(a, b)
  t.equal(puts.get(), 1)
  t.equal(a.maxHosts, 2)
  t.equal(a.recordsTotal, 3, 'each model is on one host of three')
})

t.test('error totals: a date alone spans its UTC day; a reversed or too long range is refused', async (t) => {
  const { service } = setup()
  const day = await service.errorTotals('2026-03-01', '2026-03-01')
  t.equal(day.fromDate, '2026-03-01T00:00:00.000Z')
  t.equal(day.toDate, '2026-03-01T23:59:59.999Z')
  const week = await service.errorTotals(undefined, undefined)
  t.equal(week.toDate, '2026-03-02T10:00:00.000Z', 'up to now')
  t.equal(week.fromDate, '2026-02-23T10:00:00.000Z', 'a week by default')
  await t.rejects(service.errorTotals('2026-03-02', '2026-03-01'), { code: 'validation', message: /FromDate/ })
  await t.rejects(service.errorTotals('2024-01-01', '2026-03-01'), { message: /at most 366 days/ })
})

t.test('the classification and the logged agents read the fleet as it is', async (t) => {
  const { app, service } = setup()
  insertAgent(app, { connection_status: 'Connected', operational_status: 'Armed' })
  insertAgent(app, { connection_status: 'Disconnected', operational_status: 'Free' })
  const c = await service.classification()
  t.equal(c.totalAgents, 2)
  t.same(c.byConnectionStatus.map((n) => n.name).sort(), ['Connected', 'Disconnected'])
  const logged = await service.loggedAgents()
  t.equal(logged.recordsTotal, 1)
  t.equal(logged.disconnectAfterSeconds, 300)
  t.match(logged.data, [{ operationalStatus: 'Armed' }])
})
