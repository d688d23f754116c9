// The GraphQL endpoint of asset discovery: its filter expressions, AND/OR, paging and
// sorting; its bounds; and every wrong request answered 400 (GraphQL errors in the GraphQL
// format, malformed bodies as problems), never 500.
import t, { type Test } from 'tap'
import { getIntrospectionQuery } from 'graphql'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { build, call, login } from './helpers.js'
import { queryValue } from './seed.js'
import { addAgent, addPeripheral } from './fixtures/fleet.js'

const DAY = 86_400_000
const FIELDS = 'key name mac type riskLevel isOnline lastSeen model'
const table = (args = '$filters', fields = FIELDS) =>
  `query Q($filters: [ConditionalRowFilterInput], $system: [ConditionalRowFilterInput], $page: Int, $size: Int, $sort: String, $search: String) {
    conditionalTable(query: { filters: ${args}, systemFilters: $system, globalSearch: $search }, pagination: { pageNumber: $page, pageSize: $size, sortBy: $sort }) {
      recordsTotal recordsFiltered pageNumber pageSize data { ${fields} } } }`
const f = (field: string, expression: string, value: string, op = 'AND', conditionTypeValue = 'single') => ({ field, expression, value, op, conditionTypeValue })

async function gql(app: FastifyInstance, token: string, variables: Record<string, unknown>, query = table()) {
  return call(app, token, { method: 'POST', url: '/sepio-data', payload: { query, variables } })
}

function errors(t: Test, res: LightMyRequestResponse, code: string, message?: string | RegExp) {
  t.equal(res.statusCode, 400, res.body)
  t.match(String(res.headers['content-type']), /^application\/json/)
  const body = res.json()
  t.equal(body.data, null)
  t.equal(body.errors[0].extensions.code, code)
  if (message) t.match(body.errors[0].message, message)
  return body.errors
}

t.test('filters, AND/OR, paging and sorting', async (t) => {
  // The agents inserted never check in: the sweeper must not mark them Disconnected meanwhile.
  const app = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  const token = await login(app)
  const now = Date.now()
  const alpha = await addAgent(app, { host_identifier: 'ALPHA-01', pc_model: 'Latitude 5440', enrolled_ms: now - 10 * DAY, last_updated_ms: now - 3 * DAY, connection_status: 'Disconnected' })
  const beta = await addAgent(app, { host_identifier: 'BETA-02', pc_model: 'OptiPlex 7090', running_mode: 'Server', enrolled_ms: now - 5 * DAY, last_updated_ms: now })
  const gamma = await addAgent(app, { host_identifier: 'GAMMA-03', pc_model: null, running_mode: 'VDI', enrolled_ms: now - DAY, last_updated_ms: now - 2 * 3_600_000 })
  await addPeripheral(app, beta.id, { vid: '0483', pid: '5740' })
  const mac = JSON.parse(await queryValue<string>(app, 'SELECT nics_json FROM agents WHERE id = ?', alpha.id))[0].macAddress as string
  const hosts = [f('type', 'Exact', '2,3,8')]
  const keys = async (variables: Record<string, unknown>) => {
    const res = await gql(app, token, { system: hosts, ...variables })
    t.equal(res.statusCode, 200, res.body)
    return res.json().data.conditionalTable.data.map((a: any) => a.name)
  }

  t.same(await keys({ sort: 'name_asc' }), ['ALPHA-01', 'BETA-02', 'GAMMA-03'])
  t.same(await keys({ sort: 'NAME_DESC' }), ['GAMMA-03', 'BETA-02', 'ALPHA-01'], 'sort names match case-insensitively')
  t.same(await keys({ filters: [f('name', 'Contains', 'eta')] }), ['BETA-02'])
  t.same(await keys({ filters: [f('name', 'NotContains', 'eta')], sort: 'name_asc' }), ['ALPHA-01', 'GAMMA-03'])
  t.same(await keys({ filters: [f('name', 'StartsWith', 'gam')] }), ['GAMMA-03'])
  t.same(await keys({ filters: [f('name', 'EndsWith', '-01')] }), ['ALPHA-01'])
  t.same(await keys({ filters: [f('name', 'Exact', 'alpha-01,gamma-03', 'AND', 'multiple')], sort: 'name_asc' }), ['ALPHA-01', 'GAMMA-03'])
  t.same(await keys({ filters: [f('name', 'Exact', '100%_')] }), [], 'LIKE wildcards in values are literal')
  t.same(await keys({ filters: [f('model', 'NotExact', 'OptiPlex 7090')], sort: 'name_asc' }), ['ALPHA-01', 'GAMMA-03'], 'a null field matches the Not... expressions')
  t.same(await keys({ filters: [f('model', 'Exact', 'latitude 5440')] }), ['ALPHA-01'])
  t.same(await keys({ filters: [f('type', 'Exact', '3')] }), ['BETA-02'])
  t.same(await keys({ filters: [f('riskLevel', 'GreaterThan', '5')] }), ['BETA-02'], 'the host with a known attack tool')
  t.same(await keys({ filters: [f('riskLevel', 'LessThanOrEqual', '5')], sort: 'name_asc' }), ['ALPHA-01', 'GAMMA-03'])
  t.same(await keys({ filters: [f('isOnline', 'Exact', 'False')] }), ['ALPHA-01'])
  t.same(await keys({ filters: [f('isOnline', 'NotExact', '0')], sort: 'name_asc' }), ['BETA-02', 'GAMMA-03'])
  t.same(await keys({ filters: [f('lastSeen', 'LessThan', new Date(now - 2 * DAY).toISOString())] }), ['ALPHA-01'])
  t.same(await keys({ filters: [f('firstSeen', 'Exact', new Date(now - DAY).toISOString().slice(0, 10))] }), ['GAMMA-03'], 'a date alone is its UTC day')
  t.same(await keys({ filters: [f('firstSeen', 'GreaterThanOrEqual', new Date(now - 6 * DAY).toISOString().replace('T', ' ').slice(0, 19))], sort: 'firstSeen_asc' }), ['BETA-02', 'GAMMA-03'])
  t.same(await keys({ filters: [f('mac', 'Exact', mac.toLowerCase().replace(/-/g, ':'))] }), ['ALPHA-01'], 'a MAC in another form')
  t.same(await keys({ search: 'gamma' }), ['GAMMA-03'])
  t.same(await keys({ search: mac }), ['ALPHA-01'], 'global search reaches the adapters')

  // AND binds tighter than OR: (name contains ALPHA AND online) OR type 8.
  const or = [
    { ...f('name', 'Contains', 'ALPHA'), index: 0 },
    { ...f('isOnline', 'Exact', 'true'), index: 1 },
    { ...f('type', 'Exact', '8', 'OR'), index: 2 },
  ]
  t.same(await keys({ filters: or }), ['GAMMA-03'])
  t.same(await keys({ filters: [or[2], or[0], { ...or[1], op: 'or' }], sort: 'name_asc' }), ['ALPHA-01', 'BETA-02', 'GAMMA-03'], 'filters are taken in index order')

  // Paging until the page is empty; sorting with nulls last.
  const pages: string[][] = []
  for (let page = 1; page <= 4; page++) pages.push(await keys({ page, size: 1, sort: 'model_asc' }))
  t.same(pages, [['ALPHA-01'], ['BETA-02'], ['GAMMA-03'], []])
  const counts = (await gql(app, token, { system: hosts, filters: [f('name', 'Contains', 'a')], page: 9, size: 2 })).json().data.conditionalTable
  t.match(counts, { recordsTotal: 4, recordsFiltered: 3, pageNumber: 9, pageSize: 2, data: [] })

  // The peripheral, and system filters that always hold.
  const all = (await gql(app, token, { system: [f('hierarchy', 'NotExact', '0')] })).json().data.conditionalTable
  t.same(
    all.data.map((a: any) => [a.type, a.mac]),
    [[1, 'Dormant Device']],
  )
  t.equal(alpha.uuid.length > 0 && gamma.uuid.length > 0, true)
})

t.test('wrong requests answer 400 in the GraphQL format, never 500', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await addAgent(app)
  const send = (payload: unknown, headers: Record<string, string> = {}) => call(app, token, { method: 'POST', url: '/sepio-data', payload: payload as object, headers })

  errors(t, await send({ query: '{ conditionalTable { data { id } }' }), 'GRAPHQL_PARSE_FAILED', /Syntax Error/)
  // A JSON document tree is not a query (mercurius would take it as one).
  errors(t, await send({ query: '{"kind":"Document","definitions":[]}' }), 'GRAPHQL_PARSE_FAILED')
  errors(t, await send({ query: '[1,2]' }), 'GRAPHQL_PARSE_FAILED', /Unexpected "\["/)
  errors(t, await send({ query: 'fragment A on Asset { id }' }), 'GRAPHQL_VALIDATION_FAILED', /no operation/)
  errors(t, await send({ query: '{ conditionalTable { data { colour } } }' }), 'GRAPHQL_VALIDATION_FAILED', /colour/)
  errors(t, await send({ query: 'mutation { conditionalTable { recordsTotal } }' }), 'GRAPHQL_VALIDATION_FAILED')
  errors(t, await send({ query: table(), variables: { page: '1' } }), 'GRAPHQL_VALIDATION_FAILED', /\$page/)
  errors(t, await send({ query: table(), variables: { filters: [{ field: 'name' }] } }), 'GRAPHQL_VALIDATION_FAILED', /expression/)
  errors(t, await send({ query: table(), operationName: 'Other' }), 'GRAPHQL_VALIDATION_FAILED', /Other/)

  const bad = async (variables: Record<string, unknown>, message: RegExp) => {
    const errs = errors(t, await gql(app, token, variables), 'BAD_USER_INPUT', message)
    t.same(errs[0].path, ['conditionalTable'])
  }
  await bad({ filters: [f('colour', 'Exact', 'red')] }, /query\.filters\[0\]\.field "colour" is unknown: use one of key, name/)
  await bad({ filters: [f('name', 'Resembles', 'x')] }, /expression "Resembles" is unknown/)
  await bad({ filters: [f('riskLevel', 'Contains', '5')] }, /Contains does not apply to riskLevel \(a number\)/)
  await bad({ filters: [f('name', 'GreaterThan', 'a')] }, /GreaterThan does not apply to name/)
  await bad({ filters: [f('riskLevel', 'Exact', 'high')] }, /must be an integer/)
  await bad({ filters: [f('riskLevel', 'GreaterThan', '1,2')] }, /takes one value/)
  await bad({ filters: [f('isOnline', 'Exact', 'yes')] }, /true or false/)
  await bad({ filters: [f('lastSeen', 'LessThan', 'yesterday')] }, /must be a date/)
  await bad({ filters: [f('name', 'Exact', 'a', 'XOR')] }, /op must be AND or OR/)
  await bad({ filters: [{ ...f('name', 'Exact', 'a'), is_userattribute: true }] }, /no user attributes/)
  await bad({ filters: Array.from({ length: 21 }, () => f('name', 'Exact', 'a')) }, /query has 21 filters and system filters: at most 20 in all/)
  await bad({ filters: Array.from({ length: 11 }, () => f('name', 'Exact', 'a')), system: Array.from({ length: 10 }, () => f('name', 'Exact', 'a')) }, /at most 20 in all/)
  await bad({ filters: [f('type', 'Exact', Array.from({ length: 51 }, (_, i) => i).join(','))] }, /filters\[0\]\.value lists 51 values: at most 50 per filter/)
  await bad({ system: [f('name', 'NotContains', Array.from({ length: 51 }, (_, i) => `n${i}`).join(','), 'AND', 'multiple')] }, /systemFilters\[0\]\.value lists 51 values/)
  await bad({ system: [f('name', 'Exact', 'a\u0000')] }, /systemFilters\[0\]\.value must not contain the NUL/)
  await bad({ sort: 'colour_asc' }, /sortBy must be <field>_asc/)
  await bad({ size: 10001 }, /pageSize must be from 1 to 10000/)
  await bad({ page: 0 }, /pageNumber must be at least 1/)

  // Bounds: fields (fragments counted as spread), tables per request, tokens.
  const fragments = `fragment F on Asset { ${'id key name mac '.repeat(10)} } query { conditionalTable { data { ${'...F '.repeat(10)} } } }`
  errors(t, await send({ query: fragments }), 'GRAPHQL_VALIDATION_FAILED', /more than 300 fields/)
  errors(t, await send({ query: '{ a: conditionalTable { recordsTotal } b: conditionalTable { recordsTotal } }' }), 'GRAPHQL_VALIDATION_FAILED', /at most 1 per request/)
  errors(t, await send({ query: `{ conditionalTable { recordsTotal ${'__typename '.repeat(5000)} } }` }), 'GRAPHQL_PARSE_FAILED', /5000 tokens/)

  // The request's form, credential and media type: problem documents, as every operation.
  const problem = (res: { statusCode: number; headers: Record<string, unknown> }, status: number) => {
    t.equal(res.statusCode, status)
    t.match(String(res.headers['content-type']), /^application\/problem\+json/)
  }
  problem(await send({ variables: {} }), 400)
  problem(await send({ query: '{ x }', extra: 1 }), 400)
  problem(await send({ query: 42 }), 400)
  problem(await call(app, token, { method: 'POST', url: '/sepio-data', payload: '{"query": ', headers: { 'content-type': 'application/json' } }), 400)
  problem(await call(app, token, { method: 'POST', url: '/sepio-data', payload: 'query { x }', headers: { 'content-type': 'application/graphql' } }), 415)
  problem(await call(app, undefined, { method: 'POST', url: '/sepio-data', payload: { query: table() } }), 401)
  problem(await call(app, token, { method: 'GET', url: '/sepio-data' }), 405)
  // The path matches case-insensitively, as every other.
  t.equal((await call(app, token, { method: 'POST', url: '/Sepio-Data', payload: { query: '{ conditionalTable { recordsTotal } }' } })).statusCode, 200)
})

t.test('a query is not audited; a refused one is', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const count = async () => queryValue<number>(app, "SELECT count(*) FROM audit_trail WHERE operation_id = 'querySepioData'")
  t.equal((await gql(app, token, {})).statusCode, 200)
  errors(t, await gql(app, token, { sort: 'x' }), 'BAD_USER_INPUT')
  t.equal(await count(), 0)
  t.equal((await call(app, undefined, { method: 'POST', url: '/sepio-data', payload: { query: table() } })).statusCode, 401)
  t.equal(await count(), 1)
})

t.test('introspection and suggestions: off unless PRIME_GRAPHQL_INTROSPECTION is on', async (t) => {
  const typo = '{ conditionalTable { data { nme } } }'
  const typoVariables = { query: table(), variables: { filters: [{ fild: 'name', field: 'name', expression: 'Exact' }] } }

  await t.test('off (the default)', async (t) => {
    const app = await build(t)
    t.equal(app.testConfig.graphqlIntrospection, false)
    const token = await login(app)
    const send = (payload: object) => call(app, token, { method: 'POST', url: '/sepio-data', payload })
    for (const query of [getIntrospectionQuery(), '{ __schema { queryType { name } } }', '{ __type(name: "Asset") { fields { name } } }']) {
      const res = await send({ query })
      errors(t, res, 'GRAPHQL_VALIDATION_FAILED', /introspection has been disabled/)
      t.notMatch(res.body, /ConditionalRowFilterInput|"fields"/, 'nothing of the schema is answered')
    }
    // __typename names a type the query already names: allowed, as GraphQL clients add it.
    t.equal((await send({ query: '{ conditionalTable { __typename recordsTotal } }' })).statusCode, 200)
    const wrong = errors(t, await send({ query: typo }), 'GRAPHQL_VALIDATION_FAILED', /Cannot query field "nme" on type "Asset"\.$/)
    t.notMatch(JSON.stringify(wrong), /Did you mean|"name"/)
    const variable = errors(t, await send(typoVariables), 'GRAPHQL_VALIDATION_FAILED', /fild/)
    t.notMatch(JSON.stringify(variable), /Did you mean/)
  })

  await t.test('on', async (t) => {
    const app = await build(t, { PRIME_GRAPHQL_INTROSPECTION: 'on' })
    t.equal(app.testConfig.graphqlIntrospection, true)
    const token = await login(app)
    const send = (payload: object) => call(app, token, { method: 'POST', url: '/sepio-data', payload })
    // The standard introspection query a GraphQL client sends fits the bounds.
    const intro = await send({ query: getIntrospectionQuery() })
    t.equal(intro.statusCode, 200, intro.body.slice(0, 300))
    t.ok(intro.json().data.__schema.types.some((x: any) => x.name === 'ConditionalRowFilterInput'))
    let deep = 'name'
    for (let i = 0; i < 16; i++) deep = `ofType { ${deep} }`
    errors(t, await send({ query: `{ __schema { types { ${deep} } } }` }), 'GRAPHQL_VALIDATION_FAILED', /depth/)
    errors(t, await send({ query: typo }), 'GRAPHQL_VALIDATION_FAILED', /Cannot query field "nme" on type "Asset"\. Did you mean "name"\?/)
    errors(t, await send(typoVariables), 'GRAPHQL_VALIDATION_FAILED', /Did you mean "field"\?/)
  })
})

t.test('a query costs what it selects times the page, and filter values; over 250000 it is refused before it runs', async (t) => {
  const app = await build(t)
  const token = await login(app)
  await addAgent(app)
  const send = (query: string, variables: Record<string, unknown> = {}) => call(app, token, { method: 'POST', url: '/sepio-data', payload: { query, variables } })
  const ok = (res: LightMyRequestResponse, what: string) => t.equal(res.statusCode, 200, `${what}: ${res.body.slice(0, 300)}`)
  const refused = (res: LightMyRequestResponse) => errors(t, res, 'GRAPHQL_VALIDATION_FAILED', /costs more than 250000/)

  // The NAC connector's query (the contract's example; 17 fields an asset) at the largest page, with its filters.
  const nac = `query GetDiscoveredAssets($pageNum: Int!, $pageSize: Int!, $filters: [ConditionalRowFilterInput], $systemFilters: [ConditionalRowFilterInput]) {
    conditionalTable(query: { filters: $filters, systemFilters: $systemFilters, globalSearch: "" } pagination: { pageNumber: $pageNum, pageSize: $pageSize, sortBy: "riskLevel_desc" }) {
      recordsFiltered
      data { id mac key isRiskAccepted model iconDescription isOnline riskLevel statusDescription firstSeen lastSeen locations { displayString } indicatorViewDetails { subType riskIndicationString description } } } }`
  const filters = [f('isOnline', 'Exact', 'true'), f('type', 'Exact', '2,3,8,9,10', 'AND', 'multiple'), f('riskLevel', 'Exact', '0,1,2,3,4,5,6,7,8,9', 'AND', 'multiple')]
  const systemFilters = [f('icon', 'NotExact', '50'), f('type', 'NotExact', '6'), f('hierarchy', 'NotExact', '1')]
  const answer = await send(nac, { pageNum: 1, pageSize: 10_000, filters, systemFilters })
  ok(answer, 'the NAC connector at pageSize 10000')
  t.equal(answer.json().data.conditionalTable.data.length, 1)

  // 290 aliases of id (292 fields, within the 300): 2,900,002 at a page of 10000, refused whether the size is literal or a variable; 29,002 at 100.
  const aliases = (size: string) => `query Q($size: Int) { conditionalTable(pagination: { pageSize: ${size} }) { data { ${Array.from({ length: 290 }, (_, i) => `a${i}: id`).join(' ')} } } }`
  refused(await send(aliases('10000')))
  refused(await send(aliases('$size'), { size: 10_000 }))
  refused(await send(aliases('$size'), { size: 1_000 }))
  ok(await send(aliases('$size'), { size: 100 }), '290 aliases at a page of 100')
  ok(await send(aliases('$size')), '290 aliases at the default page of 20')
  // The same through fragments and a whole pagination object in a variable.
  const spread = `fragment I on Asset { ${Array.from({ length: 29 }, (_, i) => `b${i}: id`).join(' ')} }
    query Q($p: PaginationInput) { conditionalTable(pagination: $p) { data { ${'...I '.repeat(9)} ... on Asset { ...I } } } }`
  refused(await send(spread, { p: { pageSize: 10_000 } }))
  ok(await send(spread, { p: { pageSize: 500 } }), '290 fields through fragments at a page of 500')

  // 24 fields an asset: 240,002 at a page of 10000; each filter value adds 10.
  const wide = `query Q($filters: [ConditionalRowFilterInput], $system: [ConditionalRowFilterInput]) {
    conditionalTable(query: { filters: $filters, systemFilters: $system }, pagination: { pageSize: 10000 }) {
      data { id key name mac macAddresses ipAddress type typeDescription icon iconDescription hierarchy model vendor parentId isOnline riskLevel
             isRiskAccepted statusDescription firstSeen lastSeen locations { displayString } indicatorViewDetails { risk } } } }`
  const fifty = (from: number) => Array.from({ length: 50 }, (_, i) => from + i).join(',')
  const many = Array.from({ length: 20 }, (_, i) => f('riskLevel', 'NotExact', fifty(100 + 50 * i)))
  ok(await send(wide), '24 fields at 10000, no filters')
  ok(await send(wide, { filters: many.slice(0, 10), system: [...many.slice(10, 19), f('riskLevel', 'NotExact', fifty(2000).replace(/,\d+$/, ''))] }), '999 filter values: 249,992')
  refused(await send(wide, { filters: many.slice(0, 10), system: many.slice(10) }))
})

t.test('many filter values match as few do', async (t) => {
  const app = await build(t, { PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  const token = await login(app)
  const names = ['Alpha-1', 'BRAVO-2', 'charlie-3', 'Delta_4', 'echo%5', 'FOXTROT-6']
  const models = ['Latitude 5440', 'OptiPlex 7090', null, 'ThinkPad X1', 'Latitude 7420', 'Precision 3660']
  for (const [i, host_identifier] of names.entries()) await addAgent(app, { host_identifier, pc_model: models[i] })
  const hosts = [f('type', 'Exact', '2,3,8')]
  const keys = async (filters: unknown[]) => {
    const res = await gql(app, token, { system: hosts, filters, sort: 'name_asc' })
    t.equal(res.statusCode, 200, res.body)
    return res.json().data.conditionalTable.data.map((a: any) => a.name) as string[]
  }
  // Needles that match nothing, padding a list to the maximum of 50 values.
  const pad = (needles: string[]) => [...needles, ...Array.from({ length: 50 - needles.length }, (_, i) => `zz-none-${i}`)].join(',')
  const multiple = (field: string, expression: string, needles: string[]) => f(field, expression, pad(needles), 'AND', 'multiple')
  // The same as one filter per value: ORed for the matching expressions, ANDed for the Not... ones.
  const each = (field: string, expression: string, needles: string[], join: 'AND' | 'OR') => needles.map((v, i) => ({ ...f(field, expression, v, join), index: i }))

  for (const [field, needles] of [
    ['name', ['alpha', 'RAVO', '_4', '%']],
    ['model', ['latitude', '7090']],
    ['name', ['-']],
  ] as const) {
    for (const [expression, join] of [
      ['Contains', 'OR'],
      ['NotContains', 'AND'],
    ] as const) {
      const one = await keys(each(field, expression, [...needles], join))
      t.same(await keys([multiple(field, expression, [...needles])]), one, `${field} ${expression} ${needles.join(',')}: ${one.join(',')}`)
    }
  }
  for (const [expression, join] of [
    ['Exact', 'OR'],
    ['NotExact', 'AND'],
  ] as const) {
    const needles = ['alpha-1', 'Delta_4', 'ECHO%5']
    const one = await keys(each('name', expression, needles, join))
    t.same(await keys([multiple('name', expression, needles)]), one, `name ${expression}: ${one.join(',')}`)
  }
  t.same(await keys([multiple('name', 'Contains', ['alpha', 'RAVO', '_4', '%'])]), ['Alpha-1', 'BRAVO-2', 'Delta_4', 'echo%5'], 'wildcards are literal')
  t.same(await keys([multiple('model', 'NotContains', ['latitude'])]), ['BRAVO-2', 'charlie-3', 'Delta_4', 'FOXTROT-6'], 'a null field matches NotContains')
  t.same(await keys([multiple('model', 'Contains', ['e'])]), ['Alpha-1', 'BRAVO-2', 'echo%5', 'FOXTROT-6'], 'a null field never matches Contains')
  t.same(
    await keys([f('riskLevel', 'NotExact', Array.from({ length: 50 }, (_, i) => i + 100).join(','))]),
    [...names].sort((a, b) => a.toLowerCase().localeCompare(b.toLowerCase())),
  )
  t.same(await keys([f('type', 'Exact', Array.from({ length: 50 }, (_, i) => (i === 49 ? 3 : i + 100)).join(','))]), [], 'integers in a list of 50')
})
