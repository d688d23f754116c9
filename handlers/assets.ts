// Asset discovery: the NAC connector's GraphQL endpoint and REST list, and the automation
// client's overview and distribution.
import { runAssetGraph } from '../lib/assets/graph.js'
import type { AssetField, Condition } from '../lib/assets/ports.js'
import { AssetQueryError, condition, searchPattern } from '../lib/assets/query.js'
import { invalidField } from '../lib/errors.js'
import { bool, listAnswerJson, page, sort } from '../lib/listing.js'
import type { Handlers } from './types.js'

/** A REST filter given as a comma-separated list of integers (any of them). */
function anyOf(field: AssetField, name: string, value: string | undefined): Condition | undefined {
  if (value === undefined) return undefined
  try {
    return condition({ field, expression: 'Exact', value }, name)
  } catch (err) {
    if (err instanceof AssetQueryError) throw invalidField('query', name, 'must be an integer or a comma-separated list of integers')
    throw err
  }
}

export const assetsHandlers: Handlers<'querySepioData' | 'getAssets' | 'getAssetsOverview' | 'getAssetsDistribution'> = {
  async querySepioData(req, reply) {
    const { query, variables, operationName } = req.body
    const answer = await runAssetGraph((source, context, vars, name) => reply.graphql(source, context, vars, name), req.server.services.assets, query, variables, operationName, {
      suggestions: req.server.config.graphqlIntrospection,
    })
    if (answer.ok) return answer.body as never
    // GraphQL clients read errors from the body in the GraphQL format; the status says it failed.
    return reply.code(400).type('application/json; charset=utf-8').send({ data: null, errors: answer.errors })
  },

  async getAssets(req, reply) {
    const q = req.query
    const order = sort(req.routeOptions.config.op!, q.SortBy)
    const { pageSize, offset } = page(q, req.routeOptions.config.op!)
    const online = bool(q.IsOnline, 'IsOnline')
    const and = [
      anyOf('type', 'Type', q.Type),
      anyOf('riskLevel', 'RiskLevel', q.RiskLevel),
      online === undefined ? undefined : ({ field: 'isOnline', op: 'in', values: [online ? 1 : 0] } as Condition),
    ].filter((c): c is Condition => c !== undefined)
    let search: string | undefined
    try {
      search = searchPattern(q.GlobalSearch, 'GlobalSearch')
    } catch (err) {
      if (err instanceof AssetQueryError) throw invalidField('query', 'GlobalSearch', err.message.replace(/^GlobalSearch /, ''))
      throw err
    }
    const answer = await req.server.services.assets.pageJson({ filters: and.length ? [and] : [], system: [], search }, order as { field: AssetField; direction: 'asc' | 'desc' }, pageSize, offset)
    // The views are written as JSON where the page was read (a reader thread): sent as written.
    return reply.type('application/json').send(listAnswerJson(answer.recordsTotal, answer.recordsFiltered, answer.data))
  },

  async getAssetsOverview(req) {
    return req.server.services.assets.overview()
  },

  async getAssetsDistribution(req) {
    return req.server.services.assets.distribution()
  },
}
