// backend: postgres-pending — the service is built over SQLite's ports (an in-memory database) only; not yet over PostgreSQL's
// The asset service without Fastify: an in-memory database and the SQLite ports. The one
// mapping of an asset, pages, and the counts kept for a while and computed once for
// callers that ask at the same time.
import { threadTasks } from '../lib/reader-thread.js'
import t from 'tap'
import { assetsRepo } from '../db/assets.js'
import { openDatabase, type DB } from '../db/index.js'
import { insightsRepo } from '../db/insights.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { assetService } from '../lib/assets/service.js'
import type { InsightCache } from '../lib/assets/ports.js'

const DAY = 86_400_000

function setup() {
  const db = openDatabase(':memory:')
  const uow = sqliteUnitOfWork(db)
  const repo = assetsRepo(db)
  const insights: InsightCache = asyncPort(insightsRepo(db, []), uow)
  let rareWalks = 0
  const counted: InsightCache = {
    ...insights,
    uncommonPeripheralsSliced: (maxHosts) => {
      rareWalks++
      return insights.uncommonPeripheralsSliced(maxHosts)
    },
  }
  const pages = threadTasks(db, { assets: repo })
  const service = assetService({
    assets: { ...asyncPort(repo, uow), summary: repo.summary, pageJson: async (...args) => pages.assetsPageJson(...args) },
    insights: counted,
    uncommonMaxHosts: 3,
    newHours: 24,
  })
  return { db, service, rareWalks: () => rareWalks }
}

function addHost(db: DB, name: string, address: string, createdMs: number, status = 'Reachable') {
  db.prepare(
    `INSERT INTO agentless_connections (name, address, protocol, port, user_name, credential_type, credentials, credentials_updated_ms, created_ms, updated_ms, status)
     VALUES (?, ?, 'SSH', 22, 'root', 'Password', x'00', ?, ?, ?, ?)`,
  ).run(name, address, createdMs, createdMs, createdMs, status)
}

t.test('an agentless host is an unsupervised asset; pages filter and search', async (t) => {
  const { db, service } = setup()
  const now = Date.now()
  addHost(db, 'db-01', '10.0.0.9', now - 3 * DAY)
  addHost(db, 'web-01', '10.0.0.10', now, 'Unreachable')
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
  const { db, service, rareWalks } = setup()
  const now = Date.now()
  addHost(db, 'db-01', '10.0.0.9', now - 3 * DAY)
  addHost(db, 'web-01', '10.0.0.10', now, 'Unreachable')
  const [first, again] = await Promise.all([service.overview(), service.overview()])
  t.equal(rareWalks(), 1, 'callers at the same time share one computation')
  t.match(first, { totalAssets: 2, newAssets: 1, totalHosts: 2, totalPeripherals: 0, onlineAssets: 1 })
  t.same(again, first)
  addHost(db, 'app-01', '10.0.0.11', now)
  const kept = await service.overview()
  t.equal(kept.totalAssets, 2, 'within 30 s the kept counts answer')
  t.equal(kept.computedTime, first.computedTime)
  const dist = await service.distribution()
  t.match(dist, { totalAssets: 2, byType: [{ typeDescription: 'Agentless host', count: 2, online: 1 }] })
  db.prepare('UPDATE insight_cache SET computed_ms = computed_ms - 3600000').run()
  t.equal((await service.overview()).totalAssets, 2, 'old counts answer while the next are computed')
  let total = 2
  for (let i = 0; i < 100 && total === 2; i++) {
    await new Promise((resolve) => setImmediate(resolve))
    total = (await service.overview()).totalAssets
  }
  t.equal(total, 3, 'then the counts computed again answer')
})
