// The GraphQL endpoint of asset discovery (`POST /sepio-data`), served by mercurius without
// routes of its own: the contract's operation routes the request (credential, limits,
// media types, body validation, audit of refusals) and its handler runs the query here.
import fs from 'node:fs'
import path from 'node:path'
import type { FastifyInstance, FastifyReply } from 'fastify'
import mercurius from 'mercurius'
import { GraphQLError, Kind, parse, type ASTNode, type DocumentNode, type SelectionSetNode, type ValidationContext, type ASTVisitor } from 'graphql'
import { projectRoot } from '../paths.js'
import type { AssetService } from './service.js'
import { AssetQueryError, assetSort, conditionGroups, searchPattern, DEFAULT_GRAPH_PAGE_SIZE, MAX_PAGE_SIZE, type FilterInput } from './query.js'

export const schemaPath = path.join(projectRoot, 'spec', 'sepio-data.graphql')

/** Bounds of one request: tokens parsed, nesting, fields selected (fragments expanded), tables read. */
export const LIMITS = { tokens: 5000, depth: 16, fields: 300, tables: 1 } as const

/** An error of the query itself, as the GraphQL error format answers it. */
export interface GraphError {
  message: string
  locations?: { line: number; column: number }[]
  path?: (string | number)[]
  extensions: { code: string }
}

/** What the handler answers: a result, or errors (400). */
export type GraphAnswer = { ok: true; body: { data: unknown } } | { ok: false; errors: GraphError[] }

interface Counts {
  fields: number
  tables: number
}

/**
 * Fields an operation selects with every fragment spread expanded (a fragment spread a
 * hundred times counts a hundred times), and how many of them read the asset table.
 */
function costRule(context: ValidationContext): ASTVisitor {
  const memo = new Map<string, Counts>()
  const count = (set: SelectionSetNode | undefined, visiting: Set<string>): Counts => {
    const total: Counts = { fields: 0, tables: 0 }
    for (const s of set?.selections ?? []) {
      let c: Counts
      if (s.kind === Kind.FIELD) {
        const inner = count(s.selectionSet, visiting)
        c = { fields: inner.fields + 1, tables: inner.tables + (s.name.value === 'conditionalTable' ? 1 : 0) }
      } else if (s.kind === Kind.INLINE_FRAGMENT) {
        c = count(s.selectionSet, visiting)
      } else {
        const name = s.name.value
        // A cycle is reported by the specified rules; counted once here.
        if (visiting.has(name)) continue
        const known = memo.get(name)
        if (known) c = known
        else {
          visiting.add(name)
          c = count(context.getFragment(name)?.selectionSet, visiting)
          visiting.delete(name)
          memo.set(name, c)
        }
      }
      total.fields += c.fields
      total.tables += c.tables
      // Past any bound, no need to count further (a spread of spreads can reach huge numbers).
      if (total.fields > LIMITS.fields) return total
    }
    return total
  }
  return {
    OperationDefinition(node) {
      const c = count(node.selectionSet, new Set())
      if (c.fields > LIMITS.fields) {
        context.reportError(new GraphQLError(`The operation selects more than ${LIMITS.fields} fields (fragments counted as often as they are spread).`, { nodes: [node] }))
      } else if (c.tables > LIMITS.tables) {
        context.reportError(new GraphQLError(`The operation selects conditionalTable ${c.tables} times; at most ${LIMITS.tables} per request.`, { nodes: [node] }))
      }
    },
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
  const q = {
    filters: conditionGroups(args.query?.filters, 'query.filters'),
    system: conditionGroups(args.query?.systemFilters, 'query.systemFilters'),
    search: searchPattern(args.query?.globalSearch, 'query.globalSearch'),
  }
  const page = await ctx.assets.page(q, sort, pageSize, (pageNumber - 1) * pageSize)
  return { ...page, pageNumber, pageSize }
}

export async function registerAssetGraph(app: FastifyInstance): Promise<void> {
  await app.register(mercurius, {
    schema: fs.readFileSync(schemaPath, 'utf8'),
    resolvers: { Query: { conditionalTable: conditionalTable as never } },
    routes: false,
    queryDepth: LIMITS.depth,
    validationRules: [costRule],
    graphql: { parseOptions: { maxTokens: LIMITS.tokens } },
    // Errors are answered by runAssetGraph, which needs each one's original error to tell a
    // wrong request from a fault: they are passed on as they are.
    errorFormatter: (execution) => ({ statusCode: 200, response: execution }),
  })
}

const located = (e: GraphQLError, code: string): GraphError => {
  const out: GraphError = { message: e.message.slice(0, 1000), extensions: { code } }
  if (e.locations?.length) out.locations = e.locations.slice(0, 10).map((l) => ({ line: l.line, column: l.column }))
  if (e.path?.length) out.path = [...e.path]
  return out
}

/**
 * Runs one GraphQL request. The query is parsed here first: mercurius reads a source that is
 * no GraphQL but is JSON as a document tree, which is not a query language a client speaks.
 * Errors of the request (syntax, validation, limits, variables, filter values) answer as
 * GraphQL errors; anything else is thrown (a bug: a 500 that is logged).
 */
export async function runAssetGraph(
  reply: FastifyReply,
  assets: AssetService,
  source: string,
  variables: Record<string, unknown> | null | undefined,
  operationName: string | null | undefined,
): Promise<GraphAnswer> {
  let document: DocumentNode
  try {
    document = parse(source, { maxTokens: LIMITS.tokens })
  } catch (err) {
    if (err instanceof GraphQLError) return { ok: false, errors: [located(err, 'GRAPHQL_PARSE_FAILED')] }
    throw err
  }
  if (!document.definitions.some((d: ASTNode) => d.kind === Kind.OPERATION_DEFINITION)) {
    return { ok: false, errors: [{ message: 'The document holds no operation.', extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } }] }
  }
  let result: { data?: unknown; errors?: readonly GraphQLError[] }
  try {
    result = await reply.graphql(source, { assets } as never, variables ?? undefined, operationName ?? undefined)
  } catch (err) {
    const errors = (err as { errors?: unknown[] }).errors
    if (Array.isArray(errors) && errors.every((e) => e instanceof GraphQLError || e instanceof Error)) {
      return {
        ok: false,
        errors: errors
          .slice(0, 20)
          .map((e) =>
            e instanceof GraphQLError ? located(e, 'GRAPHQL_VALIDATION_FAILED') : { message: String((e as Error).message).slice(0, 1000), extensions: { code: 'GRAPHQL_VALIDATION_FAILED' } },
          ),
      }
    }
    throw err
  }
  if (result.errors?.length) {
    const own = result.errors.filter((e) => e.originalError instanceof AssetQueryError)
    const other = result.errors.find((e) => !(e.originalError instanceof AssetQueryError) && e.originalError)
    if (other) throw other.originalError
    const rest = result.errors.filter((e) => !e.originalError)
    return { ok: false, errors: [...own.map((e) => located(e, 'BAD_USER_INPUT')), ...rest.map((e) => located(e, 'GRAPHQL_VALIDATION_FAILED'))].slice(0, 20) }
  }
  return { ok: true, body: { data: result.data ?? null } }
}
