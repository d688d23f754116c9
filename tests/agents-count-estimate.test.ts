// recordsFilteredExact on the agents and peripherals lists: on PostgreSQL the count of a
// text filter that runs past its budget (PRIME_PG_COUNT_BUDGET_MS; 0 here: never counted
// exactly) is the planner's estimate, said by `recordsFilteredExact: false`, with the rows
// still exact; filters without text and pages that end the matches answer exact counts and
// leave the field out, as the embedded SQLite database always does.
import t from 'tap'
import { addFleet } from './fixtures/fleet.js'
import { build, call, login, testBackend } from './helpers.js'

const estimating = testBackend === 'postgres'

t.test('agents and peripherals lists: an estimated count says so, the rows stay exact', async (t) => {
  const app = await build(t, { PRIME_PG_COUNT_BUDGET_MS: '0' })
  const token = await login(app)
  await addFleet(app, { agents: 40, seed: 5 })
  const get = async (url: string, query: Record<string, string>) => {
    const r = await call(app, token, { method: 'GET', url, query })
    t.equal(r.statusCode, 200, `${url} ${JSON.stringify(query)}: ${r.body.slice(0, 200)}`)
    return r.json()
  }

  const cases = [
    { url: '/prime/webui/agents', q: { HostIdentifier: 'a' }, size: 'PageSize', number: 'PageNumber', id: 'uuid' },
    { url: '/prime/webui/agents', q: { GlobalSearch: 'a' }, size: 'PageSize', number: 'PageNumber', id: 'uuid' },
    { url: '/prime/webui/peripherals', q: { hostIdentifier: 'a' }, size: 'pageSize', number: 'pageNumber', id: 'id' },
  ] as const
  for (const c of cases) {
    // Every match in one page that is not full: its count is its rows, exact on both.
    const all = await get(c.url, { ...c.q, [c.size]: '1000' })
    t.ok(all.data.length > 12, `${c.url} ${JSON.stringify(c.q)}: ${all.data.length} matches`)
    t.equal(all.recordsFiltered, all.data.length)
    t.notOk('recordsFilteredExact' in all, 'a page that ends the matches: exact, the field left out')

    const page = await get(c.url, { ...c.q, [c.size]: '5', [c.number]: '2' })
    const ids = (rows: Record<string, unknown>[]) => rows.map((r) => r[c.id])
    t.same(ids(page.data), ids(all.data).slice(5, 10), 'the rows are exact')
    t.equal(page.recordsTotal, all.recordsTotal)
    if (estimating) {
      t.equal(page.recordsFilteredExact, false, `${JSON.stringify(c.q)}: an estimate, said so`)
      t.ok(page.recordsFiltered >= 10 && page.recordsFiltered <= page.recordsTotal, `estimate ${page.recordsFiltered} within [10, ${page.recordsTotal}]`)
    } else {
      t.notOk('recordsFilteredExact' in page, 'SQLite: exact')
      t.equal(page.recordsFiltered, all.data.length)
    }
    // A page past the matches: at most the rows before it.
    const past = await get(c.url, { ...c.q, [c.size]: '5', [c.number]: '100' })
    t.same(past.data, [])
    t.ok(past.recordsFiltered <= 495)
  }

  // Filters without text are counted exactly on both.
  const plain = await get('/prime/webui/agents', { Status: 'Connected', PageSize: '3' })
  t.notOk('recordsFilteredExact' in plain)
  const connected = await get('/prime/webui/agents', { Status: 'Connected', PageSize: '1000' })
  t.equal(plain.recordsFiltered, connected.data.length)
  const present = await get('/prime/webui/peripherals', { present: 'True', pageSize: '3' })
  t.notOk('recordsFilteredExact' in present)
})
