// The GraphQL endpoint of asset discovery (`POST /sepio-data`), served by mercurius without
// routes of its own: the contract's operation routes the request (credential, limits,
// media types, body validation, audit of refusals) and its handler runs the query
// (lib/assets/graph.ts, `runAssetGraph`).
import fs from 'node:fs'
import path from 'node:path'
import type { FastifyInstance } from 'fastify'
import mercurius from 'mercurius'
import {
  GraphQLError,
  GraphQLObjectType,
  Kind,
  NoSchemaIntrospectionCustomRule,
  getNamedType,
  valueFromASTUntyped,
  type FieldNode,
  type SelectionSetNode,
  type ValidationContext,
  type ValidationRule,
  type ASTVisitor,
} from 'graphql'
import { projectRoot } from '../paths.js'
import { LIMITS } from './graph.js'
import type { AssetService } from './service.js'
import { AssetQueryError, assetSort, conditionGroups, filterValueCount, searchPattern, DEFAULT_GRAPH_PAGE_SIZE, MAX_FILTERS, MAX_PAGE_SIZE, type FilterInput } from './query.js'

export const schemaPath = path.join(projectRoot, 'spec', 'sepio-data.graphql')

/**
 * The most a query may cost, computed before it runs (`costRule`): every field selected
 * counts 1, a field inside `data` once per asset of the page (`pageSize`, default 20; fields
 * of an asset's own lists once per asset), and every filter value FILTER_VALUE_COST. The NAC
 * connector's query costs 17 per asset: 170,173 at pageSize 10000 with its filters; 300
 * aliases of `id` cost 3,000,002 there (a 287 MB answer).
 */
export const MAX_COST = 250_000
/** Each value of a filter is matched against every asset, whatever the page's size. */
export const FILTER_VALUE_COST = 10

interface Counts {
  fields: number
  tables: number
  cost: number
}

type Variables = Record<string, unknown> | undefined

/** An argument of a field as plain JSON, its variables taken from the request as sent (null when absent or not an object). */
function argument(node: FieldNode, name: string, variables: Variables): Record<string, unknown> | null {
  const arg = node.arguments?.find((a) => a.name.value === name)
  const value = arg ? valueFromASTUntyped(arg.value, variables) : undefined
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : null
}

/** The rows a `conditionalTable` answers for cost: its pageSize within the allowed range (out of range is refused when it runs). */
function pageSizeOf(node: FieldNode, variables: Variables): number {
  const size = argument(node, 'pagination', variables)?.pageSize
  return typeof size === 'number' && Number.isInteger(size) ? Math.min(Math.max(size, 1), MAX_PAGE_SIZE) : DEFAULT_GRAPH_PAGE_SIZE
}

/** The values of a `conditionalTable`'s filters and system filters. */
function filterValuesOf(node: FieldNode, variables: Variables): number {
  const query = argument(node, 'query', variables)
  let n = 0
  for (const list of [query?.filters, query?.systemFilters]) {
    if (!Array.isArray(list)) continue
    for (const f of list) if (f && typeof f === 'object') n += filterValueCount(f as FilterInput)
  }
  return n
}

/**
 * Fields an operation selects with every fragment spread expanded (a fragment spread a
 * hundred times counts a hundred times), how many of them read the asset table, and what
 * it costs (MAX_COST). `variables` are the request's, as sent.
 */
function costRule(variables: Variables) {
  return (context: ValidationContext): ASTVisitor => {
    const schema = context.getSchema()
    const memo = new Map<string, Counts>()
    const count = (set: SelectionSetNode | undefined, parent: GraphQLObjectType | undefined, rows: number, visiting: Set<string>): Counts => {
      const total: Counts = { fields: 0, tables: 0, cost: 0 }
      for (const s of set?.selections ?? []) {
        let c: Counts
        if (s.kind === Kind.FIELD) {
          const def = parent?.getFields()[s.name.value]
          const type = def ? getNamedType(def.type) : undefined
          const child = type instanceof GraphQLObjectType ? type : undefined
          const table = parent === schema.getQueryType() && s.name.value === 'conditionalTable'
          // The page's rows: what a field inside `data` is answered for.
          const inner = table ? pageSizeOf(s, variables) : rows
          const perRow = parent?.name === 'ConditionalTablePage' && s.name.value === 'data'
          const sub = count(s.selectionSet, child, inner, visiting)
          c = {
            fields: sub.fields + 1,
            tables: sub.tables + (table ? 1 : 0),
            cost: (perRow ? sub.cost * inner : sub.cost) + 1 + (table ? filterValuesOf(s, variables) * FILTER_VALUE_COST : 0),
          }
        } else if (s.kind === Kind.INLINE_FRAGMENT) {
          const on = s.typeCondition ? schema.getType(s.typeCondition.name.value) : parent
          c = count(s.selectionSet, on instanceof GraphQLObjectType ? on : undefined, rows, visiting)
        } else {
          const name = s.name.value
          // A cycle is reported by the specified rules; counted once here.
          if (visiting.has(name)) continue
          const key = `${name}:${rows}`
          const known = memo.get(key)
          if (known) c = known
          else {
            const fragment = context.getFragment(name)
            const on = fragment ? schema.getType(fragment.typeCondition.name.value) : undefined
            visiting.add(name)
            c = count(fragment?.selectionSet, on instanceof GraphQLObjectType ? on : undefined, rows, visiting)
            visiting.delete(name)
            memo.set(key, c)
          }
        }
        total.fields += c.fields
        total.tables += c.tables
        total.cost += c.cost
        // Past any bound, no need to count further (a spread of spreads can reach huge numbers).
        if (total.fields > LIMITS.fields || total.cost > MAX_COST) return total
      }
      return total
    }
    return {
      OperationDefinition(node) {
        const root = node.operation === 'query' ? (schema.getQueryType() ?? undefined) : undefined
        const c = count(node.selectionSet, root, 1, new Set())
        if (c.fields > LIMITS.fields) {
          context.reportError(new GraphQLError(`The operation selects more than ${LIMITS.fields} fields (fragments counted as often as they are spread).`, { nodes: [node] }))
        } else if (c.tables > LIMITS.tables) {
          context.reportError(new GraphQLError(`The operation selects conditionalTable ${c.tables} times; at most ${LIMITS.tables} per request.`, { nodes: [node] }))
        } else if (c.cost > MAX_COST) {
          context.reportError(
            new GraphQLError(
              `The operation costs more than ${MAX_COST}: each field counts 1, a field inside data once per asset of the page (pageSize), each filter value ${FILTER_VALUE_COST}. Select fewer fields or ask for smaller pages.`,
              { nodes: [node] },
            ),
          )
        }
      },
    }
  }
}

interface Context {
  assets: AssetService
}
interface TableArgs {
  query?: { filters?: (FilterInput | null)[] | null; systemFilters?: (FilterInput | null)[] | null; globalSearch?: string | null } | null
  pagination?: { pageNumber?: number | null; pageSize?: number | null; sortBy?: string | null } | null
}

async function conditionalTable(_root: unknown, args: TableArgs, ctx: Context) {
  const p = args.pagination ?? {}
  const pageNumber = p.pageNumber ?? 1
  const pageSize = p.pageSize ?? DEFAULT_GRAPH_PAGE_SIZE
  if (pageNumber < 1) throw new AssetQueryError('pagination.pageNumber', 'must be at least 1')
  if (pageSize < 1 || pageSize > MAX_PAGE_SIZE) throw new AssetQueryError('pagination.pageSize', `must be from 1 to ${MAX_PAGE_SIZE}`)
  const sort = assetSort(p.sortBy, 'riskLevel_desc', 'pagination.sortBy')
  // Each filter is a pass over the fleet's rows: bounded for the two lists together.
  const given = [...(args.query?.filters ?? []), ...(args.query?.systemFilters ?? [])].filter((f) => f !== null).length
  if (given > MAX_FILTERS) throw new AssetQueryError('query', `has ${given} filters and system filters: at most ${MAX_FILTERS} in all`)
  const q = {
    filters: conditionGroups(args.query?.filters, 'query.filters'),
    system: conditionGroups(args.query?.systemFilters, 'query.systemFilters'),
    search: searchPattern(args.query?.globalSearch, 'query.globalSearch'),
  }
  const page = await ctx.assets.page(q, sort, pageSize, (pageNumber - 1) * pageSize)
  return { ...page, pageNumber, pageSize }
}

/**
 * `introspection`: the schema is answered to `__schema`/`__type` and error messages suggest
 * names ("Did you mean ...?"); off, both are refused or removed (PRIME_GRAPHQL_INTROSPECTION).
 */
export async function registerAssetGraph(app: FastifyInstance, { introspection }: { introspection: boolean }): Promise<void> {
  const fixed: ValidationRule[] = introspection ? [] : [NoSchemaIntrospectionCustomRule]
  await app.register(mercurius, {
    schema: fs.readFileSync(schemaPath, 'utf8'),
    resolvers: { Query: { conditionalTable: conditionalTable as never } },
    routes: false,
    queryDepth: LIMITS.depth,
    // The cost depends on the variables (the page size, the filters), so every request is
    // validated with its own: mercurius keeps no validated query then (cache: false).
    validationRules: ({ variables }) => [...fixed, costRule(variables as Variables)],
    cache: false,
    graphql: { parseOptions: { maxTokens: LIMITS.tokens } },
    // Errors are answered by runAssetGraph, which needs each one's original error to tell a
    // wrong request from a fault: they are passed on as they are.
    errorFormatter: (execution) => ({ statusCode: 200, response: execution }),
  })
}
