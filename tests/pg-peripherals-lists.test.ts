// The peripherals list on PostgreSQL answers what SQLite's answers: the same seeded fleet in
// both, then hundreds of random list queries (every filter alone and combined, every sort
// both ways, global search of 1-5 characters, deep offsets) compared row for row with the
// counts, the large pages' ids and streamed views, the export by model, one agent's
// peripherals and the approvals.
import t from 'tap'
import { CheckInTimeWrites } from '../db/answer-cache.js'
import { agentTexts } from '../db/agent-texts.js'
import { exportsRepo } from '../db/exports.js'
import { agentSearch } from '../db/filters.js'
import type { PeripheralFilter, PeripheralListRow } from '../lib/agents/ports.js'
import { peripheralsRepo } from '../db/peripherals.js'
import { peripheralSortColumns } from '../db/postgres/agent-filters.js'
import { pgExportsRepo } from '../db/postgres/exports.js'
import { pgPeripheralsRepo } from '../db/postgres/peripherals.js'
import type { Sort } from '../lib/ports.js'
import { peripheralView } from '../lib/peripherals/views.js'
import { Rand, mixCase, seedFleet } from './fixtures/pg-lists-fleet.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

const AGENTS = 300
const PERIPHERALS = 3000
const QUERIES = 600

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of it) out.push(x)
  return out
}

t.test('peripherals lists: PostgreSQL answers as SQLite', { skip: noPostgres }, async (t) => {
  const { db: sqlite } = tempDb(t)
  const pg = await pgTestDatabase(t)
  const r = new Rand(51)
  await seedFleet(sqlite, pg, r, { agents: AGENTS, peripherals: PERIPHERALS })

  const search = agentSearch(sqlite, agentTexts(sqlite))
  const lite = peripheralsRepo(sqlite, new CheckInTimeWrites(), search, 0)
  const liteExports = exportsRepo(sqlite, search)
  const pgPeripherals = pgPeripheralsRepo(pg, { countBudgetMs: 600_000 })
  const pgExports = pgExportsRepo(pg)

  const rows = sqlite
    .prepare(
      `SELECT p.*, a.host_identifier, a.local_ip_address, a.uuid, a.hashtags, v.text AS vendor, d.text AS product, c.vulnerability, c.name
       FROM peripherals p JOIN agents a ON a.id = p.agent_id LEFT JOIN peripheral_texts v ON v.id = p.vendor_text_id
       LEFT JOIN peripheral_texts d ON d.id = p.product_text_id LEFT JOIN catalogue c ON c.vid = p.vid AND c.pid = p.pid`,
    )
    .all() as Record<string, unknown>[]
  const count = await pg.value<number>('SELECT count(*) FROM peripherals')
  t.ok(count! > PERIPHERALS * 0.9, `${count} peripherals`)

  /** A term from a real value (any case, 1-5 characters), or now and then one that matches nothing, holds LIKE's wildcards or names a risk tag. */
  const term = (columns: string[]): string => {
    if (r.chance(0.08)) return r.pick(['zzq', '%', '_', '\\', '#vul', 'tack', '#', 'VID_', '&'])
    const values = rows.map((x) => x[r.pick(columns)]).filter((v): v is string => typeof v === 'string' && v.length > 0)
    const v = r.pick(values)
    const len = 1 + r.int(5)
    const at = r.int(Math.max(1, v.length - len + 1))
    return mixCase(r, v.slice(at, at + len))
  }
  const hex = (column: string) => String(r.pick(rows)[column])
  const filters: Record<keyof PeripheralFilter, () => PeripheralFilter> = {
    hostIdentifier: () => ({ hostIdentifier: term(['host_identifier']) }),
    ipAddress: () => ({ ipAddress: term(['local_ip_address']) }),
    hostUuid: () => ({ hostUuid: term(['uuid']) }),
    vendor: () => ({ vendor: term(['vendor']) }),
    productInfo: () => ({ productInfo: term(['product']) }),
    serialNumber: () => ({ serialNumber: term(['serial_number']) }),
    vid: () => ({ vid: hex('vid') }),
    pid: () => ({ pid: hex('pid') }),
    isUnapproved: () => ({ isUnapproved: r.chance(0.5) }),
    isVulnerable: () => ({ isVulnerable: r.chance(0.5) }),
    isAttackTool: () => ({ isAttackTool: r.chance(0.5) }),
    present: () => ({ present: r.chance(0.5) }),
    globalSearch: () => ({ globalSearch: term(['host_identifier', 'hashtags', 'local_ip_address', 'vendor', 'product', 'vulnerability', 'name', 'device_id']) }),
  }
  const fields = Object.keys(filters) as (keyof PeripheralFilter)[]
  const sortFields = Object.keys(peripheralSortColumns)
  const query = (i: number): { f: PeripheralFilter; sort: Sort; limit: number; offset: number } => {
    // Each filter alone first, then none, one, two or three together.
    const given = i < fields.length * 3 ? [fields[i % fields.length]] : fields.filter(() => r.chance([0, 0.08, 0.15, 0.2][r.int(4)]))
    const f = Object.assign({}, ...given.map((k) => filters[k]())) as PeripheralFilter
    const sort: Sort = { field: i < sortFields.length * 2 ? sortFields[i >> 1] : r.pick(sortFields), direction: i % 2 ? 'desc' : 'asc' }
    const limit = r.pick([1, 5, 10, 25, 50, 100, 500])
    const offset = r.pick([0, 0, r.int(20), r.int(count!), count! - r.int(10), count! + 5])
    return { f, sort, limit, offset }
  }

  let nonEmpty = 0
  for (let i = 0; i < QUERIES; i++) {
    const { f, sort, limit, offset } = query(i)
    const what = `#${i} ${JSON.stringify(f)} ${sort.field} ${sort.direction} ${limit}@${offset}`
    const [a, b] = [lite.list(f, sort, limit, offset), await pgPeripherals.list(f, sort, limit, offset)]
    t.same(b, a, `list ${what}`)
    if (a.rows.length) nonEmpty++
    if (i % 7 === 0) t.same(await pgPeripherals.pageIds(f, sort, limit, offset), lite.pageIds(f, sort, limit, offset), `pageIds ${what}`)
    if (i % 10 === 0) t.same(await pgExports.peripheralModels(f), await liteExports.peripheralModels(f), `models ${what}`)
  }
  t.ok(nonEmpty > QUERIES / 3, `most queries have rows (${nonEmpty} of ${QUERIES})`)

  t.test('large pages: ids and streamed views', async (t) => {
    const sort: Sort = { field: 'hostIdentifier', direction: 'desc' }
    const { ids, ...counts } = await pgPeripherals.pageIds({ present: true }, sort, 100_000, 0)
    t.same({ ids, ...counts }, lite.pageIds({ present: true }, sort, 100_000, 0))
    const view = (p: PeripheralListRow) => peripheralView(p)
    const [a, b] = [await collect(await pgPeripherals.viewChunks(ids, view)), await collect(lite.viewChunks(ids, view))]
    t.same(JSON.parse(`[${a.join(',')}]`), JSON.parse(`[${b.join(',')}]`), `${ids.length} views, in order`)
  })

  t.test("one agent's peripherals, models and approvals", async (t) => {
    for (let agent = 1; agent <= 30; agent++) {
      t.same(await pgPeripherals.ofAgent(agent), lite.ofAgent(agent), `ofAgent ${agent}`)
      t.same(await pgPeripherals.presentModels(agent), lite.presentModels(agent), `presentModels ${agent}`)
      t.same(await pgPeripherals.whitelist(agent), lite.whitelist(agent), `whitelist ${agent}`)
      const { vid, pid } = r.pick(rows) as { vid: string; pid: string }
      t.equal(await pgPeripherals.hasModel(agent, vid, pid), lite.hasModel(agent, vid, pid), `hasModel ${agent} ${vid}:${pid}`)
      t.equal(await pgPeripherals.attackToolName(vid, pid), lite.attackToolName(vid, pid), `attackToolName ${vid}:${pid}`)
    }
    t.same(await pgPeripherals.ofAgent(999_999), [])
    t.equal(await pgPeripherals.attackToolName('FFFF', 'FFFF'), undefined)
    // The same decisions in both: a repeated one changes nothing.
    const decisions = [
      [1, '0951', '1666', 'Approved'],
      [1, '0951', '1666', 'Approved'],
      [1, '0951', '1666', 'Disapproved'],
      [2, '046D', 'C52B', 'Disapproved'],
      [2, '046D', 'C52B', 'Approved'],
      [2, '046D', 'C52B', 'Approved'],
    ] as const
    for (const [i, [agent, vid, pid, status]] of decisions.entries()) {
      const now = 1_800_000_000_000 + i
      t.equal(await pgPeripherals.setApproval(agent, vid, pid, status, now, 'admin'), lite.setApproval(agent, vid, pid, status, now, 'admin'), `decision ${i}`)
    }
    const approvals = 'SELECT * FROM approvals WHERE agent_id IN (1, 2) ORDER BY agent_id, vid, pid'
    t.same(await pg.query(approvals), sqlite.prepare(approvals).all(), 'the same approvals, times included')
    t.same(await pgPeripherals.whitelist(2), lite.whitelist(2))
  })
})
