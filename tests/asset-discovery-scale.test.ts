// backend: sqlite-only — SQLite's discovery structures (sources read from the interned texts, model slices, kept counts)
// What keeps asset discovery fast at fleet scale answers exactly what reading every row
// would: pages read from where the previous one ended, sources a query rules out left
// unread, the rare models found model by model and in slices, the overview's counts read
// a range of rows at a time.
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { build, call, login } from './helpers.js'
import { insertAgent, insertPeripheral } from './fixtures/fleet.js'
import { SORT_FIELDS } from '../lib/assets/query.js'
import { uncommonView } from '../lib/insights/views.js'

const DAY = 86_400_000
const QUERY = `query Q($filters: [ConditionalRowFilterInput], $system: [ConditionalRowFilterInput], $page: Int, $size: Int, $sort: String) {
  conditionalTable(query: { filters: $filters, systemFilters: $system }, pagination: { pageNumber: $page, pageSize: $size, sortBy: $sort }) {
    recordsFiltered data { id riskLevel } } }`
const f = (field: string, expression: string, value: string, conditionTypeValue = 'single') => ({ field, expression, value, op: 'AND', conditionTypeValue })
/** The NAC connector's own filters. */
const CONNECTOR = {
  filters: [f('isOnline', 'Exact', 'true'), f('type', 'Exact', '2,3,8,9,10', 'multiple'), f('riskLevel', 'Exact', '0,1,2,3,4,5,6,7,8,9', 'multiple')],
  system: [f('icon', 'NotExact', '50'), f('type', 'NotExact', '6'), f('hierarchy', 'NotExact', '1')],
}

/** Agents with ties in every field (same times, models, risks), some with peripherals, and an agentless host. */
function fleet(app: FastifyInstance) {
  const now = Date.now()
  const agents = []
  for (let i = 0; i < 9; i++) {
    agents.push(
      insertAgent(app, {
        host_identifier: `HOST-${i % 3}`,
        pc_model: i % 2 ? null : 'OptiPlex 7090',
        running_mode: i % 4 === 0 ? 'Server' : 'Standard',
        enrolled_ms: now - (i % 3) * DAY,
        connection_status: i % 5 === 0 ? 'Disconnected' : 'Connected',
        severity: i % 3 === 0 ? 2 : 6,
      }),
    )
  }
  for (const [n, a] of agents.slice(0, 5).entries()) {
    // 0483:5740 on three hosts; 046D:C077 on five, a hub on one of them (never rare).
    for (let j = 0; j < 3; j++) {
      const st = j === 2 && n < 3
      insertPeripheral(app, a.id, { vid: st ? '0483' : '046D', pid: st ? '5740' : 'C077', first_seen_ms: now - (j % 2) * DAY, dev_icon: j === 1 && n === 0 ? 4 : 3 })
    }
  }
  app.db
    .prepare(`INSERT INTO agentless_connections (name, address, protocol, port, user_name, credential_type, credentials, credentials_updated_ms, created_ms, updated_ms, status)
    VALUES ('db-01', '10.0.0.9', 'SSH', 22, 'root', 'Password', x'00', ?, ?, ?, 'Reachable')`)
    .run(now, now - DAY, now)
}

async function pages(app: FastifyInstance, token: string, variables: Record<string, unknown>, size: number) {
  const ids: string[] = []
  for (let page = 1; ; page++) {
    const res = await call(app, token, { method: 'POST', url: '/sepio-data', payload: { query: QUERY, variables: { ...variables, page, size } } })
    if (res.statusCode !== 200) throw new Error(res.body)
    const data = res.json().data.conditionalTable.data as { id: string }[]
    if (data.length === 0) return ids
    ids.push(...data.map((a) => a.id))
  }
}

t.test('pages that follow one another are read from where the last ended, and join up to the whole list', async (t) => {
  // Read on the server's own connection, whose repository counts how pages were read.
  const app = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400', PRIME_UNCOMMON_PERIPHERAL_MAX_HOSTS: '2', PRIME_READER_THREADS: '0' })
  const token = await login(app)
  fleet(app)
  const reads = app.repos.assets.reads
  for (const field of SORT_FIELDS) {
    for (const direction of ['asc', 'desc']) {
      const sort = `${field}_${direction}`
      const whole = await pages(app, token, { sort }, 1000)
      const before = reads.keyset
      const paged = await pages(app, token, { sort }, 4)
      t.same(paged, whole, sort)
      t.equal(new Set(paged).size, paged.length, `${sort}: no asset twice`)
      // Pages 2..n of the 25 assets start where the last ended (the empty one after them reads nothing).
      t.equal(whole.length, 25)
      t.equal(reads.keyset - before, Math.ceil(whole.length / 4) - 1, `${sort}: read from where the last page ended`)
    }
  }
  // With the connector's filters: the same, and no peripheral is read to find hosts.
  const peripheralReads = reads.sources.peripheral
  const whole = await pages(app, token, { ...CONNECTOR, sort: 'riskLevel_desc' }, 1000)
  t.same(await pages(app, token, { ...CONNECTOR, sort: 'riskLevel_desc' }, 2), whole)
  t.ok(whole.length > 0 && whole.every((id) => !id.startsWith('peripheral:')))
  t.equal(reads.sources.peripheral, peripheralReads, 'the query asks only for hosts: no peripheral is read')

  // A source none of whose assets match is not read either (its index would be walked to the end).
  const hosts = await pages(app, token, { filters: [f('name', 'StartsWith', 'HOST-')], sort: 'firstSeen_asc' }, 4)
  t.equal(hosts.length, 9)
  t.equal(reads.sources.peripheral, peripheralReads, 'no peripheral is named HOST-: none is read')

  // Pages asked out of order are read by offset, and answer the same.
  const sort = 'name_asc'
  const all = await pages(app, token, { sort }, 1000)
  const third = (await call(app, token, { method: 'POST', url: '/sepio-data', payload: { query: QUERY, variables: { sort, page: 3, size: 5 } } }))
    .json()
    .data.conditionalTable.data.map((a: any) => a.id)
  t.same(third, all.slice(10, 15))
})

t.test('a change between two pages: the next page is read by offset again, from the current data', async (t) => {
  const app = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  const token = await login(app)
  fleet(app)
  const ask = async (page: number) =>
    (await call(app, token, { method: 'POST', url: '/sepio-data', payload: { query: QUERY, variables: { sort: 'firstSeen_asc', page, size: 5 } } })).json().data.conditionalTable
  await ask(1)
  // A new agent first seen before every other asset: page 2 by offset begins one asset earlier.
  insertAgent(app, { host_identifier: 'EARLY', enrolled_ms: Date.now() - 100 * DAY })
  const second = await ask(2)
  const whole = (await call(app, token, { method: 'POST', url: '/sepio-data', payload: { query: QUERY, variables: { sort: 'firstSeen_asc', page: 1, size: 100 } } })).json().data.conditionalTable
  t.equal(second.recordsFiltered, whole.recordsFiltered)
  t.same(
    second.data.map((a: any) => a.id),
    whole.data.slice(5, 10).map((a: any) => a.id),
  )
})

t.test('the rare models: model by model, in slices or not, as one GROUP BY over every peripheral finds them', async (t) => {
  const app = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  fleet(app)
  const insights = app.repos.insights
  for (const maxHosts of [1, 2, 4, 8]) {
    // The one-statement form this replaces (hubs left out, fewest hosts first, latest seen first).
    const expected = app.db
      .prepare(
        `WITH rare AS (SELECT vid, pid, count(DISTINCT agent_id) AS hosts FROM peripherals WHERE present = 1 AND vid NOT IN ('', '0000')
         GROUP BY vid, pid HAVING count(DISTINCT agent_id) <= @maxHosts)
       SELECT p.vid, p.pid, r.hosts, count(*) AS peripherals FROM rare r JOIN peripherals p ON p.vid = r.vid AND p.pid = r.pid
       WHERE p.agent_id IN (SELECT agent_id FROM peripherals q WHERE q.vid = r.vid AND q.pid = r.pid AND q.present = 1)
       GROUP BY p.vid, p.pid HAVING max(p.dev_icon = 4) = 0 ORDER BY r.hosts, max(p.last_seen_ms) DESC, p.vid, p.pid`,
      )
      .all({ maxHosts }) as { vid: string; pid: string; hosts: number; peripherals: number }[]
    const whole = uncommonView(insights.uncommonPeripherals(maxHosts))
    t.same(
      whole.data.map((m) => ({ vid: m.vid, pid: m.pid, hosts: m.hostsCount, peripherals: m.peripheralsCount })),
      expected,
      `maxHosts ${maxHosts}`,
    )
    // A slice of 0 ms stops after every model: resumed, it finds the same.
    t.same(uncommonView(await insights.uncommonPeripheralsSliced(maxHosts, 0)), whole, `maxHosts ${maxHosts}, in slices`)
  }
  t.same(
    uncommonView(insights.uncommonPeripherals(8)).data.map((m) => m.vid),
    ['0483'],
    'the model on three hosts is rare; a hub never is',
  )
})

t.test('the overview counts, a row at a time, are those of one reading', async (t) => {
  const app = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  fleet(app)
  const sort = (c: { type: number; risk_level: number; is_online: number; is_new: number }[]) =>
    [...c].sort((x, y) => x.type - y.type || x.risk_level - y.risk_level || x.is_online - y.is_online || x.is_new - y.is_new)
  const run = (gen: Generator<void, any>) => {
    let steps = 0
    for (;;) {
      const r = gen.next()
      if (r.done) return { counts: r.value, steps }
      steps++
    }
  }
  const since = Date.now() - DAY / 2
  const rare = ['0483:5740']
  const once = run(app.repos.assets.summary(rare, since, 20, { first: 1e9, min: 1e9, max: 1e9 }))
  const sliced = run(app.repos.assets.summary(rare, since, 0, { first: 1, min: 1, max: 1 }))
  t.ok(sliced.steps > 20, `read in ${sliced.steps} ranges`)
  t.same(sort(sliced.counts), sort(once.counts))
  t.equal(
    once.counts.reduce((n: number, c: { n: number }) => n + c.n, 0),
    9 + 15 + 1,
  )
})

t.test('the switches, a range of agents at a time, are those of one statement over every agent', async (t) => {
  const app = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  fleet(app)
  const now = Date.now()
  // Switches named alike but for case, each behind agents in ranges far apart, one of them
  // enrolled long ago; agents without a switch; a switch known by its name only.
  const ids = app.db.prepare('SELECT id FROM agents ORDER BY id').pluck().all() as number[]
  const at = app.db.prepare('UPDATE agents SET switch_ip = ?, switch_name = ?, enrolled_ms = ? WHERE id = ?')
  const plan: [string | null, string | null, number][] = [
    ['10.0.0.1', 'Floor3-SW1', now],
    [null, null, now],
    ['10.0.0.1', 'floor3-sw1', now - 10 * DAY],
    [null, 'core-sw2', now],
    ['10.0.0.2', null, now],
    ['10.0.0.2', 'other', now],
    [null, 'CORE-SW2', now],
  ]
  ids.forEach((id, i) => at.run(...plan[i % plan.length], id))
  const run = (gen: Generator<void, { n: number; fresh: number }>) => {
    let steps = 0
    for (;;) {
      const r = gen.next()
      if (r.done) return { value: r.value, steps }
      steps++
    }
  }
  const oneStatement = app.db.prepare(
    `SELECT count(*) AS n, coalesce(sum(first >= ?), 0) AS fresh FROM (
       SELECT min(enrolled_ms) AS first FROM agents WHERE coalesce(switch_ip, switch_name) IS NOT NULL
       GROUP BY lower(coalesce(switch_ip, '')), lower(coalesce(switch_name, '')))`,
  )
  for (const since of [0, now - DAY, now + DAY]) {
    const sliced = run(app.repos.assets.switches(since, 0, { first: 1, min: 1, max: 1 }))
    t.ok(sliced.steps >= ids.length, `read in ${sliced.steps} ranges`)
    t.same(sliced.value, oneStatement.get(since), `since ${since - now} ms from now`)
    t.same(run(app.repos.assets.switches(since)).value, sliced.value)
  }
  t.same(run(app.repos.assets.switches(now - DAY)).value, { n: 4, fresh: 3 }, 'floor3-sw1 is not new: one of its agents enrolled ten days ago')
})

t.test('counts older than 30 s: the last ones answered at once, counted again in the background, exact after changes', async (t) => {
  const app = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  const token = await login(app)
  fleet(app)
  const overview = async () => (await call(app, token, { url: '/prime/webui/transformerDataApi/assetsOverview' })).json()
  const age = () => app.db.prepare("UPDATE insight_cache SET computed_ms = computed_ms - 60000 WHERE name LIKE 'assetSummary:%'").run()
  const stamp = () => app.db.prepare("SELECT computed_ms FROM insight_cache WHERE name LIKE 'assetSummary:%'").pluck().get()
  const first = await overview()
  t.equal(first.totalAssets, 25)
  // Changes of every source: an agent and a peripheral added, a peripheral removed, an agent disconnected.
  const added = insertAgent(app, { connection_status: 'Connected' })
  insertPeripheral(app, added.id)
  app.db.prepare('DELETE FROM peripherals WHERE id = (SELECT min(id) FROM peripherals)').run()
  app.db.prepare("UPDATE agents SET connection_status = 'Disconnected' WHERE id = (SELECT min(id) FROM agents WHERE connection_status = 'Connected')").run()
  t.same(await overview(), first, 'younger than 30 s: as counted')
  age()
  const before = stamp()
  const stale = await overview()
  t.same({ ...stale, computedTime: undefined }, { ...first, computedTime: undefined }, 'older: the last counts, answered at once')
  while (stamp() === before) await new Promise((r) => setTimeout(r, 10))
  const now = await overview()
  t.equal(now.totalAssets, 26)
  t.equal(now.totalHosts, 11)
  t.equal(now.totalPeripherals, 15)
  // Counted again from the rows: what one reading of every asset finds.
  const online = app.db
    .prepare(`SELECT (SELECT count(*) FROM agents WHERE connection_status = 'Connected')
    + (SELECT count(*) FROM peripherals p JOIN agents a ON a.id = p.agent_id WHERE p.present AND a.connection_status = 'Connected')
    + (SELECT count(*) FROM agentless_connections WHERE status = 'Reachable')`)
    .pluck()
    .get()
  t.equal(now.onlineAssets, online)
  t.equal(first.onlineAssets - now.onlineAssets, 4 - 2, 'an agent and its three peripherals went offline; an agent and its peripheral came')
})
