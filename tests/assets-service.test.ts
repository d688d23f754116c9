// The asset service without Fastify's routes, over the ports of a test app's database
// (SQLite or PostgreSQL). The one
// mapping of an asset, pages, and the counts kept for a while and computed once for
// callers that ask at the same time.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { assetService } from '../lib/assets/service.js'
import type { InsightCache } from '../lib/assets/ports.js'
import { build } from './helpers.js'
import { portsOf, query } from './seed.js'

const DAY = 86_400_000

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t)
  const ports = portsOf(app)
  const insights: InsightCache = ports.insights
  let rareWalks = 0
  const counted: InsightCache = {
    ...insights,
    uncommonPeripheralsSliced: (maxHosts) => {
      rareWalks++
      return insights.uncommonPeripheralsSliced(maxHosts)
    },
  }
  const service = assetService({
    assets: ports.assets,
    insights: counted,
    uncommonMaxHosts: 3,
    newHours: 24,
  })
  return { app, service, rareWalks: () => rareWalks }
}

async function addHost(app: FastifyInstance, name: string, address: string, createdMs: number, status = 'Reachable') {
  await query(
    app,
    `INSERT INTO agentless_connections (name, address, protocol, port, user_name, credential_type, credentials, credentials_updated_ms, created_ms, updated_ms, status)
     VALUES (?, ?, 'SSH', 22, 'root', 'Password', ?, ?, ?, ?, ?)`,
    name,
    address,
    Buffer.from([0]),
    createdMs,
    createdMs,
    createdMs,
    status,
  )
}

t.test('an agentless host is an unsupervised asset; pages filter and search', async (t) => {
  const { app, service } = await setup(t)
  const now = Date.now()
  await addHost(app, 'db-01', '10.0.0.9', now - 3 * DAY)
  await addHost(app, 'web-01', '10.0.0.10', now, 'Unreachable')
  const page = await service.page({ filters: [], system: [], search: '%db-0%' }, { field: 'name', direction: 'asc' }, 10, 0)
  t.match(page, { recordsTotal: 2, recordsFiltered: 1 })
  t.match(page.data, [
    {
      name: 'db-01',
      ipAddress: '10.0.0.9',
      typeDescription: 'Agentless host',
      iconDescription: 'Agentless host',
      parentId: null,
      indicatorViewDetails: [{ subType: 'Unsupervised Host' }],
    },
  ])
  const online = await service.page({ filters: [[{ field: 'isOnline', op: 'in', values: [1] }]], system: [], search: undefined }, { field: 'name', direction: 'asc' }, 10, 0)
  t.same(
    online.data.map((a) => a.name),
    ['db-01'],
    'a reachable host is online, an unreachable one is not',
  )
})

t.test('the overview and the distribution count every asset, and their counts are kept', async (t) => {
  const { app, service, rareWalks } = await setup(t)
  const now = Date.now()
  await addHost(app, 'db-01', '10.0.0.9', now - 3 * DAY)
  await addHost(app, 'web-01', '10.0.0.10', now, 'Unreachable')
  const [first, again] = await Promise.all([service.overview(), service.overview()])
  t.equal(rareWalks(), 1, 'callers at the same time share one computation')
  t.match(first, { totalAssets: 2, newAssets: 1, totalHosts: 2, totalPeripherals: 0, onlineAssets: 1 })
  t.same(again, first)
  await addHost(app, 'app-01', '10.0.0.11', now)
  const kept = await service.overview()
  t.equal(kept.totalAssets, 2, 'within 30 s the kept counts answer')
  t.equal(kept.computedTime, first.computedTime)
  const dist = await service.distribution()
  t.match(dist, { totalAssets: 2, byType: [{ typeDescription: 'Agentless host', count: 2, online: 1 }] })
  await query(app, 'UPDATE insight_cache SET computed_ms = computed_ms - 3600000')
  t.equal((await service.overview()).totalAssets, 2, 'old counts answer while the next are computed')
  // The next counts are computed in the background: on PostgreSQL over several round trips,
  // so wait by the clock (bounded), not by a number of turns.
  let total = 2
  for (const until = Date.now() + 10_000; total === 2 && Date.now() < until; ) {
    await new Promise((resolve) => setTimeout(resolve, 10))
    total = (await service.overview()).totalAssets
  }
  t.equal(total, 3, 'then the counts computed again answer')
})
