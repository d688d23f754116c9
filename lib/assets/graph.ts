// Runs one request of asset discovery's GraphQL endpoint (`POST /sepio-data`) and answers
// its result or its errors in the GraphQL format. The endpoint itself (mercurius, its schema
// and validation rules) is registered by the feature's wiring (lib/assets/index.ts); the
// handler gives the executor it made, so this module never sees Fastify.
import { GraphQLError, Kind, parse, type ASTNode, type DocumentNode } from 'graphql'
import type { AssetService } from './service.js'
import { AssetQueryError } from './query.js'

/** Bounds of one request: tokens parsed, nesting, fields selected (fragments expanded), tables read. */
export const LIMITS = { tokens: 5000, depth: 16, fields: 300, tables: 1 } as const

/** Runs a request on the registered schema: mercurius' `reply.graphql`, as the handler gives it. */
export type GraphExecutor = (
  source: string,
  context: Record<string, unknown>,
  variables: Record<string, unknown> | undefined,
  operationName: string | undefined,
) => Promise<{ data?: unknown; errors?: readonly GraphQLError[] }>

/** An error of the query itself, as the GraphQL error format answers it. */
export interface GraphError {
  message: string
  locations?: { line: number; column: number }[]
  path?: (string | number)[]
  extensions: { code: string }
}

/** What the handler answers: a result, or errors (400). */
export type GraphAnswer = { ok: true; body: { data: unknown } } | { ok: false; errors: GraphError[] }

/** GraphQL's "Did you mean ...?" hints, which spell out the schema to whoever guesses at it. */
const SUGGESTION = / ?Did you mean [^?]*\?/g

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
  execute: GraphExecutor,
  assets: AssetService,
  source: string,
  variables: Record<string, unknown> | null | undefined,
  operationName: string | null | undefined,
  { suggestions }: { suggestions: boolean },
): Promise<GraphAnswer> {
  const answer = await run(execute, assets, source, variables, operationName)
  // Removed from every error here: validation and the variables' coercion both write them.
  if (!answer.ok && !suggestions) for (const e of answer.errors) e.message = e.message.replace(SUGGESTION, '')
  return answer
}

async function run(
  execute: GraphExecutor,
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
    result = await execute(source, { assets }, variables ?? undefined, operationName ?? undefined)
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
