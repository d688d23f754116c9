// The agents list on PostgreSQL answers what SQLite's answers: the same seeded fleet in both,
// then hundreds of random list queries (every filter alone and combined, every sort both
// ways, global search of 1-5 characters, deep offsets) compared for ids, order and counts,
// the page's JSON, the large pages' ids and streamed views, the exports, and the lookups.
import t from 'tap'
import { agentsRepo } from '../db/agents.js'
import type { AgentFilter, AgentRow } from '../lib/agents/ports.js'
import { CheckInTimeWrites } from '../db/answer-cache.js'
import { agentTexts } from '../db/agent-texts.js'
import { exportsRepo } from '../db/exports.js'
import { agentSearch } from '../db/filters.js'
import { pgAgentsRepo } from '../db/postgres/agents.js'
import { agentOrderBy, agentSortColumns } from '../db/postgres/agent-filters.js'
import { pgExportsRepo } from '../db/postgres/exports.js'
import type { Sort } from '../lib/ports.js'
import { agentListView } from '../lib/agents/views.js'
import { Rand, mixCase, seedFleet } from './fixtures/pg-lists-fleet.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const AGENTS = 400
const QUERIES = 600

/** A row without its rev: each backend numbers its own changes. */
const withoutRev = ({ rev: _rev, ...row }: AgentRow) => row

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of it) out.push(x)
  return out
}

t.test('agents lists: PostgreSQL answers as SQLite', { skip: noPostgres }, async (t) => {
  const { db: sqlite } = tempDb(t)
  const pg = await pgTestDatabase(t)
  const r = new Rand(50)
  await seedFleet(sqlite, pg, r, { agents: AGENTS, peripherals: 2000 })

  const search = agentSearch(sqlite, agentTexts(sqlite))
  const lite = agentsRepo(sqlite, new CheckInTimeWrites(), search, agentListView, 0)
  const liteExports = exportsRepo(sqlite, search)
  const pgAgents = pgAgentsRepo(pg, agentListView, { countBudgetMs: 600_000 })
  const pgExports = pgExportsRepo(pg)

  const agents = sqlite.prepare('SELECT * FROM agents').all() as AgentRow[]
  /** A term from a real value (any case, 1-5 characters), or now and then one that matches nothing or holds LIKE's wildcards. */
  const term = (columns: (keyof AgentRow)[]): string => {
    if (r.chance(0.08)) return r.pick(['zzq', '%', '_', '10.', '#', '-', 'a_b', '5%'])
    const values = agents.map((a) => a[r.pick(columns)]).filter((v): v is string => typeof v === 'string' && v.length > 0)
    const v = r.pick(values)
    const len = 1 + r.int(5)
    const at = r.int(Math.max(1, v.length - len + 1))
    return mixCase(r, v.slice(at, at + len))
  }
  const some = <T>(xs: readonly T[]): T[] => {
    const out = xs.filter(() => r.chance(0.4))
    return out.length ? out : [r.pick(xs)]
  }
  const day = 86_400_000
  const dates = () => {
    const from = 1_700_000_000_000 + r.int(40) * day
    return { from, to: r.chance(0.3) ? null : from + (1 + r.int(20)) * day }
  }
  const filters: Record<keyof AgentFilter, () => AgentFilter> = {
    uuid: () => ({ uuid: term(['uuid']) }),
    hostIdentifier: () => ({ hostIdentifier: term(['host_identifier']) }),
    ipAddress: () => ({ ipAddress: term(['local_ip_address', 'ip_addresses']) }),
    version: () => ({ version: term(['service_version']) }),
    osVersion: () => ({ osVersion: term(['os_version']) }),
    hashtags: () => ({ hashtags: term(['hashtags']) }),
    globalSearch: () => ({ globalSearch: term(['host_identifier', 'os_version', 'pc_model', 'license_account_name', 'latest_event_text', 'hashtags', 'uuid', 'ip_addresses', 'nics_text']) }),
    connectionStatus: () => ({ connectionStatus: some(['Connected', 'Disconnected'] as const) }),
    operationalStatus: () => ({ operationalStatus: some(['Armed', 'Free'] as const) }),
    displayStatus: () => ({ displayStatus: some(['Arming', 'Freeing', 'Updating', 'Pending'] as const) }),
    licenseStatus: () => ({ licenseStatus: some(['Activated', 'Pending', 'Expired', 'Invalid'] as const) }),
    runningMode: () => ({ runningMode: some(['Standard', 'VDI', 'Server'] as const) }),
    containsVulnerablePeripheralOrWLV: () => ({ containsVulnerablePeripheralOrWLV: r.chance(0.5) }),
    hasUnapprovedPeripherals: () => ({ hasUnapprovedPeripherals: r.chance(0.5) }),
    hasVulnerablePeripherals: () => ({ hasVulnerablePeripherals: r.chance(0.5) }),
    hasKnownAttackTools: () => ({ hasKnownAttackTools: r.chance(0.5) }),
    lastConfiguration: () => ({ lastConfiguration: dates() }),
    lastUpdated: () => ({ lastUpdated: dates() }),
    expirationDate: () => ({ expirationDate: { from: 1_700_000_000_000 + (300 + r.int(100)) * day, to: null } }),
    severity: () => ({ severity: r.int(8) }),
  }
  const fields = Object.keys(filters) as (keyof AgentFilter)[]
  const sortFields = Object.keys(agentSortColumns)
  const query = (i: number): { f: AgentFilter; sort: Sort; limit: number; offset: number } => {
    // Each filter alone first, then none, one, two or three together.
    const given = i < fields.length * 3 ? [fields[i % fields.length]] : fields.filter(() => r.chance([0, 0.05, 0.1, 0.15][r.int(4)]))
    const f = Object.assign({}, ...given.map((k) => filters[k]())) as AgentFilter
    const sort: Sort = { field: i < sortFields.length * 2 ? sortFields[i >> 1] : r.pick(sortFields), direction: i % 2 ? 'desc' : 'asc' }
    const limit = r.pick([1, 5, 10, 25, 50, 100, 500])
    const offset = r.pick([0, 0, r.int(20), r.int(AGENTS), AGENTS - r.int(10), AGENTS + 5])
    return { f, sort, limit, offset }
  }

  let nonEmpty = 0
  for (let i = 0; i < QUERIES; i++) {
    const { f, sort, limit, offset } = query(i)
    const what = `#${i} ${JSON.stringify(f)} ${sort.field} ${sort.direction} ${limit}@${offset}`
    const [a, b] = [lite.list(f, sort, limit, offset), await pgAgents.list(f, sort, limit, offset)]
    t.same(
      { total: b.total, filtered: b.filtered, ids: b.rows.map((x) => x.id), times: b.rows.map((x) => x.last_updated_ms) },
      { total: a.total, filtered: a.filtered, ids: a.rows.map((x) => x.id), times: a.rows.map((x) => x.last_updated_ms) },
      `list ${what}`,
    )
    if (a.rows.length) nonEmpty++
    if (i % 5 === 0) t.same(await pgAgents.page(f, sort, limit, offset), lite.page(f, sort, limit, offset), `page ${what}`)
    if (i % 7 === 0) t.same(await pgAgents.pageIds(f, sort, limit, offset), lite.pageIds(f, sort, limit, offset), `pageIds ${what}`)
    if (i % 10 === 0) t.same(await pgExports.agentIds(f, sort), liteExports.agentIds(f, sort), `export ids ${what}`)
  }
  t.ok(nonEmpty > QUERIES / 3, `most queries have rows (${nonEmpty} of ${QUERIES})`)

  t.test('large pages: ids, streamed views and JSON of a page agree', async (t) => {
    const sort: Sort = { field: 'hostIdentifier', direction: 'asc' }
    const { ids, ...counts } = await pgAgents.pageIds({}, sort, 100_000, 0)
    t.same({ ids, ...counts }, lite.pageIds({}, sort, 100_000, 0))
    const chunks = await collect(await pgAgents.viewChunks(ids))
    t.same(JSON.parse(`[${chunks.join(',')}]`), JSON.parse(`[${(await collect(lite.viewChunks(ids))).join(',')}]`), 'the same views, in order')
    const refs = (await pgAgents.list({ hashtags: 'lab' }, sort, 30, 3)).rows
    t.equal(await pgAgents.views(refs), lite.views(lite.list({ hashtags: 'lab' }, sort, 30, 3).rows), 'views of a page')
    t.equal(await pgAgents.views([]), '[]')
    t.same(await collect(await pgAgents.viewChunks([])), [])
  })

  t.test('exports: rows through a cursor in the order of the ids', async (t) => {
    const ids = await pgExports.agentIds({ operationalStatus: ['Armed'] }, { field: 'lastUpdated', direction: 'desc' })
    const gone = [999_999, ...ids.slice(0, 3)]
    const a = (await collect(await pgExports.agents(gone))).map(withoutRev)
    const b = (await collect(liteExports.agents(gone))).map(withoutRev)
    t.same(a, b, 'absent ids are left out')
    t.equal(a.length, 3)
    const all = (await collect(await pgExports.agents(ids))).map(withoutRev)
    t.same(all, (await collect(liteExports.agents(ids))).map(withoutRev), `${ids.length} agents, every column`)
    // A consumer that stops early gives the cursor's client back.
    for (let i = 0; i < 8; i++) for await (const _ of await pgExports.agents(ids)) break
    t.equal(pg.pool.totalCount - pg.pool.idleCount, 0, 'no client left checked out')
  })

  t.test('lookups: by uuid and by identifiers', async (t) => {
    for (const a of agents.slice(0, 40)) {
      const uuid = r.chance(0.5) ? a.uuid.toUpperCase() : a.uuid
      t.same(withoutRev((await pgAgents.byUuid(uuid))!), withoutRev(lite.byUuid(uuid)!), `byUuid ${uuid}`)
      t.same(withoutRev((await pgAgents.byId(a.id))!), withoutRev(lite.byId(a.id)!), `byId ${a.id}`)
      const ids = {
        uuid: r.chance(0.3) ? a.uuid : undefined,
        hostIdentifier: r.chance(0.7) ? mixCase(r, a.host_identifier) : undefined,
        ipAddress: r.chance(0.5) ? a.local_ip_address : undefined,
      }
      const byId = (x: AgentRow, y: AgentRow) => x.id - y.id
      t.same((await pgAgents.matching(ids)).sort(byId).map(withoutRev), lite.matching(ids).sort(byId).map(withoutRev), `matching ${JSON.stringify(ids)}`)
    }
    t.equal(await pgAgents.byUuid('no-such-uuid'), undefined)
    t.same(await pgAgents.matching({}), [])
    t.same(await pgAgents.matching({ hostIdentifier: 'no-such-host' }), [])
  })

  t.test('remove: the agent and its peripherals go', async (t) => {
    const victim = agents[7]
    t.equal(await pgAgents.remove(victim.id), true)
    t.equal(lite.remove(victim.id), true)
    t.equal(await pgAgents.remove(victim.id), false, 'a second time: nothing to remove')
    t.equal(await pg.value('SELECT count(*) FROM peripherals WHERE agent_id = $1', [victim.id]), 0)
    const sort: Sort = { field: 'uuid', direction: 'asc' }
    const [a, b] = [lite.list({}, sort, 1000, 0), await pgAgents.list({}, sort, 1000, 0)]
    t.same([b.total, b.filtered, b.rows.map((x) => x.id)], [a.total, a.filtered, a.rows.map((x) => x.id)], 'the lists agree after it')
  })

  t.test('every agent and peripheral counted, and the agents of each flag: kept by inserts, updates, deletes (cascaded too) and TRUNCATE', async (t) => {
    const kept = async () => pg.query<{ name: string; n: number }>('SELECT name, n::int AS n FROM table_rows ORDER BY name COLLATE "C"')
    const flags = ['has_attack_tool', 'has_unapproved', 'has_vulnerable', 'vulnerable_or_wlv']
    const counted = async () => [
      { name: 'agents', n: await pg.value<number>('SELECT count(*)::int FROM agents') },
      ...(await Promise.all(flags.map(async (f) => ({ name: `agents.${f}`, n: await pg.value<number>(`SELECT count(*)::int FROM agents WHERE ${f} = 1`) })))),
      { name: 'peripherals', n: await pg.value<number>('SELECT count(*)::int FROM peripherals') },
    ]
    t.same(await kept(), await counted(), 'as counted after the seed and a removal')
    t.ok(
      (await kept()).slice(1, 5).every((r) => r.n > 0),
      'the seed flagged agents of every flag',
    )
    // Flags set and cleared by one statement, and by statements of one transaction.
    await pg.run('UPDATE agents SET has_unapproved = 1 - has_unapproved, has_vulnerable = 1 WHERE id % 3 = 0')
    t.same(await kept(), await counted(), 'as counted after a bulk update of flags')
    await pg.uow.run(async () => {
      await pg.run('UPDATE agents SET has_attack_tool = 1 WHERE id % 5 = 1')
      await pg.run('UPDATE agents SET has_attack_tool = 0, vulnerable_or_wlv = 1 - vulnerable_or_wlv WHERE id % 7 = 1')
    })
    t.same(await kept(), await counted(), 'and after a transaction of several')
    const unchanged = await kept()
    await pg.run('UPDATE agents SET last_updated_ms = coalesce(last_updated_ms, 0) + 1')
    t.same(await kept(), unchanged, 'an update that changes no flag changes nothing')
    for (const [filter, column] of [
      [{ hasUnapprovedPeripherals: true }, 'has_unapproved = 1'],
      [{ hasVulnerablePeripherals: false }, 'has_vulnerable = 0'],
      [{ hasKnownAttackTools: true }, 'has_attack_tool = 1'],
      [{ containsVulnerablePeripheralOrWLV: false }, 'vulnerable_or_wlv = 0'],
    ] as const) {
      const page = await pgAgents.list(filter, { field: 'hostIdentifier', direction: 'asc' }, 5, 0)
      t.equal(page.filtered, await pg.value<number>(`SELECT count(*)::int FROM agents WHERE ${column}`), `${JSON.stringify(filter)} answers the kept count`)
    }
    const before = await kept()
    // An upsert that inserts nothing leaves the counts (and their row lock) alone.
    const p = (await pg.one<{ id: number }>('SELECT id FROM peripherals LIMIT 1'))!
    await pg.run('INSERT INTO peripherals SELECT * FROM peripherals WHERE id = $1 ON CONFLICT DO NOTHING', [p.id])
    t.same(await kept(), before, 'an insert of nothing changes nothing')
    // A whole agent removed takes its peripherals' count with it (ON DELETE CASCADE).
    const victim = (await pg.one<{ id: number }>('SELECT agent_id AS id FROM peripherals GROUP BY agent_id ORDER BY count(*) DESC LIMIT 1'))!
    await pg.run('DELETE FROM agents WHERE id = $1', [victim.id])
    t.same(await kept(), await counted(), 'as counted after a cascaded delete')
    const peripherals = (rows: { name: string; n: number }[]) => rows.find((r) => r.name === 'peripherals')!.n
    t.ok(peripherals(await kept()) < peripherals(before), "the agent's peripherals are counted out")
    const [a] = [await pgAgents.list({}, { field: 'uuid', direction: 'asc' }, 5, 0)]
    t.equal(a.total, (await counted())[0].n, 'the list answers the kept count')
    await pg.run('TRUNCATE agents CASCADE')
    t.same(await kept(), [{ name: 'agents', n: 0 }, ...flags.map((f) => ({ name: `agents.${f}`, n: 0 })), { name: 'peripherals', n: 0 }], 'TRUNCATE empties them all')
  })
})

t.test('a page deep in the host, uuid or severity order is found in the sort index alone (migration 022)', { skip: noPostgres }, async (t) => {
  const { db: sqlite } = tempDb(t)
  const pg = await pgTestDatabase(t)
  await seedFleet(sqlite, pg, new Rand(22), { agents: 300, peripherals: 0 })
  // VACUUM sets the visibility map: an index-only scan then reads no table block.
  await pg.run('VACUUM ANALYZE agents')
  for (const [field, index] of [
    ['hostIdentifier', 'agents_host_order'],
    ['uuid', 'agents_uuid_order'],
    ['severity', 'agents_severity_order'],
  ] as const) {
    for (const direction of ['asc', 'desc'] as const) {
      // As the page statement walks it (db/postgres/agent-filters.ts pageStatement). Over 300
      // agents the planner would rather sort them all: what is pinned is that the index answers
      // alone when walked, as it is over a large fleet.
      const ids = `SELECT a.id FROM agents a WHERE true ORDER BY ${agentOrderBy({ field, direction })} LIMIT 50 OFFSET 200`
      const plan = await pg.uow.run(async () => {
        await pg.run('SET LOCAL enable_seqscan = off')
        await pg.run('SET LOCAL enable_sort = off')
        return (await pg.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ${ids}`)).map((r) => r['QUERY PLAN']).join('\n')
      })
      t.match(plan, new RegExp(`Index Only Scan( Backward)? using ${index} `), `${field} ${direction}: an index-only scan of ${index}`)
      t.match(plan, /Heap Fetches: 0\b/, `${field} ${direction}: no row read from the table`)
      t.same(
        (await pg.query<{ id: string }>(ids)).map((r) => Number(r.id)),
        (await pg.query<{ id: string }>(`SELECT id FROM agents a ORDER BY ${agentOrderBy({ field, direction })}`)).slice(200, 250).map((r) => Number(r.id)),
        `${field} ${direction}: the page's ids as the whole order has them`,
      )
    }
  }
})
