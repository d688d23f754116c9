// The insight service without Fastify's routes: the ports of a test app's database (SQLite
// or PostgreSQL), a clock of the test's own. Kept
// answers, their reloads, the error totals' date rules, and the catalogue's rule that a
// change makes the vulnerable-peripherals insight computed afresh.
import t from 'tap'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { catalogueService } from '../lib/catalogue/service.js'
import { insightService } from '../lib/insights/service.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { build } from './helpers.js'
import { portsOf, query, queryValue } from './seed.js'
import { addAgent, addPeripheral } from './fixtures/fleet.js'

const HOUR = 3_600_000

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t)
  const ports = portsOf(app)
  const { uow } = app.storage
  let clock = Date.parse('2026-03-02T10:00:00Z')
  const service = insightService({ insights: ports.insights, uow, disconnectSeconds: 300, uncommonMaxHosts: 2, now: () => clock })
  const catalogue = catalogueService({
    catalogue: ports.catalogue,
    followers: ports.catalogueFollowers,
    uow,
    audit: { record: (ctx: Context, entry: AuditEntry) => recordAudit({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }, ctx, entry) },
  })
  return { app, service, catalogue, tick: (ms: number) => (clock += ms) }
}

t.test('a kept insight is answered for an hour; a reload computes again after a few seconds', async (t) => {
  const { app, service, tick } = await setup(t)
  const agent = await addAgent(app)
  await addPeripheral(app, agent.id, { vid: '0951', pid: '1666' })
  const first = await service.vulnerablePeripherals()
  t.equal(first.recordsTotal, 0, 'no catalogue entry names the model')
  await query(app, "INSERT INTO catalogue (id, kind, vid, pid, name, severity, created_ms, created_by) VALUES ('c1', 'VulnerableDevice', '0951', '1666', 'drive', 3, 0, 'test')")
  tick(HOUR - 1)
  t.same(await service.vulnerablePeripherals(), first, 'kept: the entry written behind its back is not seen yet')
  t.same(await service.reloadVulnerablePeripherals().then((r) => r.recordsTotal), 1, 'a reload an hour on computes again')
  const reloaded = await service.reloadVulnerablePeripherals()
  tick(5000)
  t.same(await service.reloadVulnerablePeripherals(), reloaded, 'a reload seconds after the last computation answers it')
  t.equal(reloaded.computedTime, new Date(Date.parse('2026-03-02T10:00:00Z') + HOUR - 1).toISOString())
})

t.test('a catalogue change drops the kept vulnerable-peripherals insight', async (t) => {
  const { app, service, catalogue } = await setup(t)
  const agent = await addAgent(app)
  await addPeripheral(app, agent.id, { vid: '0951', pid: '1666' })
  t.equal((await service.vulnerablePeripherals()).recordsTotal, 0)
  const ctx = systemContext({ actor: 'admin', operation: { operationId: 'addCatalogueEntry', method: 'POST', path: '/x', auditCategory: 'Peripherals', readOnly: false } })
  await catalogue.add(ctx, 'admin', { kind: 'VulnerableDevice', vid: '0951', pid: '1666', name: 'drive' })
  const after = await service.vulnerablePeripherals()
  t.equal(after.recordsTotal, 1, 'computed afresh within the hour')
  t.match(after.data[0], { vid: '0951', pid: '1666', kind: 'VulnerableDevice', hostsCount: 1, hosts: [{ uuid: agent.uuid }] })
})

t.test('concurrent first askers compute an insight once', async (t) => {
  const { app, service } = await setup(t)
  for (let i = 0; i < 3; i++) await addPeripheral(app, (await addAgent(app)).id, { vid: '1234', pid: String(i).padStart(4, '0') })
  const puts = () => queryValue<number>(app, "SELECT count(*) FROM insight_cache WHERE name LIKE 'uncommon%'")
  const [a, b] = await Promise.all([service.uncommonPeripherals(), service.uncommonPeripherals()])
  t.same(a, b)
  t.equal(await puts(), 1)
  t.equal(a.maxHosts, 2)
  t.equal(a.recordsTotal, 3, 'each model is on one host of three')
})

t.test('error totals: a date alone spans its UTC day; a reversed or too long range is refused', async (t) => {
  const { service } = await setup(t)
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
  const { app, service } = await setup(t)
  await addAgent(app, { connection_status: 'Connected', operational_status: 'Armed' })
  await addAgent(app, { connection_status: 'Disconnected', operational_status: 'Free' })
  const c = await service.classification()
  t.equal(c.totalAgents, 2)
  t.same(c.byConnectionStatus.map((n) => n.name).sort(), ['Connected', 'Disconnected'])
  const logged = await service.loggedAgents()
  t.equal(logged.recordsTotal, 1)
  t.equal(logged.disconnectAfterSeconds, 300)
  t.match(logged.data, [{ operationalStatus: 'Armed' }])
})
