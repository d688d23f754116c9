// Every list operation answers at most the page its contract documents: its PageSize
// parameter's maximum is accepted and one more is refused (400 naming PageSize), read from
// the contract, so that a list added later is held to its own maximum too.
import t from 'tap'
import { loadSpec, operations } from '../lib/contract.js'
import { build, call, login } from './helpers.js'

const lists = [...operations(loadSpec()).values()].filter((op) => op.pageSizeMax !== null)

t.test('the contract declares the maximum page of each list', async (t) => {
  const max = Object.fromEntries(lists.map((op) => [op.operationId, op.pageSizeMax]))
  t.equal(max.getAssets, 10_000, 'assets are held whole: 10000')
  t.equal(max.getAgents, 1_000_000)
  t.equal(max.getEventsIntegration, 1_000_000)
  t.ok(lists.length >= 8, `every list with a PageSize parameter: ${Object.keys(max).join(', ')}`)
  t.ok(
    lists.every((op) => op.method === 'GET' && !op.path.includes('{')),
    'each is called as is',
  )

  const spec = loadSpec()
  spec.paths['/prime/webui/agents'].get.parameters = [{ name: 'PageSize', in: 'query', schema: { type: 'integer' } }]
  t.throws(() => operations(spec), /getAgents: its PageSize parameter must declare an integer maximum/, 'a list without a maximum is a contract bug')
})

t.test('every list refuses one more than its maximum, and answers the maximum', async (t) => {
  const app = await build(t)
  const token = await login(app)
  for (const op of lists) {
    const max = op.pageSizeMax!
    for (const name of ['PageSize', 'pageSize']) {
      const over = await call(app, token, { method: 'GET', url: `${op.path}?${name}=${max + 1}` })
      t.equal(over.statusCode, 400, `${op.operationId} ${name}=${max + 1}: ${over.body.slice(0, 200)}`)
      t.match(String(over.headers['content-type']), /^application\/problem\+json/)
      const body = over.json()
      t.equal(body.type, 'urn:prime:problem:validation')
      t.ok(
        body.errors?.some((e: { name: string; location: string }) => e.name === 'PageSize' && e.location === 'query'),
        `${op.operationId}: names PageSize: ${JSON.stringify(body.errors)}`,
      )
    }
    const at = await call(app, token, { method: 'GET', url: `${op.path}?PageSize=${max}` })
    t.equal(at.statusCode, 200, `${op.operationId} PageSize=${max}: ${at.body.slice(0, 200)}`)
  }
})

t.test('assets: the older NAC connector pages of 5000 still pass; 10001 and 1000000 do not', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const get = (q: string) => call(app, token, { method: 'GET', url: `/prime/webui/transformerDataApi/assets?${q}` })
  t.equal((await get('pageSize=5000&pageNumber=1')).statusCode, 200)
  for (const size of [10_001, 20_000, 1_000_000]) {
    const res = await get(`PageSize=${size}`)
    t.equal(res.statusCode, 400, `PageSize=${size}`)
    t.match(res.json().detail, /PageSize/)
  }
})
