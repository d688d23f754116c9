import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import type YAMLModule from 'yaml'
import { Validator } from '@seriousme/openapi-schema-validator'
import { projectRoot, specPath } from './paths.js'
import { deprecatedInputs, deprecationHeaders, type DeprecatedInputs, type DeprecationHeaders } from './deprecation.js'

export const profiles = { User: 10, Manager: 20, Administrator: 30 } as const
export type ProfileName = keyof typeof profiles

/** Who may call an operation, from its `security` and `x-min-profile`. */
export type Access = { kind: 'public' } | { kind: 'user'; minProfile: number } | { kind: 'agent' } | { kind: 'poller' }

export interface Operation {
  operationId: string
  method: string
  path: string
  access: Access
  auditCategory: string | null
  /** `x-read-only`: a POST that changes nothing (a GraphQL query); audited only when refused. */
  readOnly: boolean
  sortFields: string[]
  defaultSort: string | null
  /** The `maximum` of its `PageSize` query parameter: the largest page a list answers (null: no such parameter). */
  pageSizeMax: number | null
  /** Media types of the request body, when it takes one. */
  requestTypes: string[]
  bodyRequired: boolean
  /** Media types of the 200 answer, in the contract's order of preference. */
  responseTypes: string[]
  /** The headers of a deprecated operation's answers. */
  deprecation?: DeprecationHeaders
  /** Deprecated parameters and body properties, whose use adds those headers. */
  deprecatedInputs?: DeprecatedInputs
  /** A load balancer's probe (`x-probe`): not rate limited, and its 200s are not logged line by line. */
  probe: boolean
  /** `x-rate-limit: login`: its failures count toward the per-address login limit (PRIME_LOGIN_RATE_LIMIT_MAX). */
  rateLimit: RateLimit | null
  /** `x-gateway-limit`: the agent gateway's own limit, instead of the per-address one (lib/gateway/limits.ts). */
  gatewayLimit: GatewayLimit | null
  /**
   * `x-expensive`: its cost grows with the data or the question; its reads run in the reader
   * threads under a time budget, counted against the caller's share (lib/platform/readers.ts).
   */
  expensive: boolean
  /**
   * `x-no-integration-token`: it manages accounts or tokens, so an integration token is
   * refused (403) whatever its profile; only an account's session may call it.
   */
  noIntegrationToken: boolean
}

export const RATE_LIMITS = ['login'] as const
export type RateLimit = (typeof RATE_LIMITS)[number]
export const GATEWAY_LIMITS = ['enrollment', 'check-in', 'result-bytes'] as const
export type GatewayLimit = (typeof GATEWAY_LIMITS)[number]

/** The value of an extension that names one of `known`, or null when it is absent. */
function named<T extends string>(op: Json, id: string, key: string, known: readonly T[]): T | null {
  const v = op[key]
  if (v === undefined) return null
  if (!known.includes(v)) throw new Error(`${id}: ${key} must be one of ${known.join(', ')}, not ${v}`)
  return v
}

type Json = Record<string, any>

const cacheFile = path.join(projectRoot, 'dist', 'openapi.json')
const memo = new Map<string, Json>()

/**
 * The contract, parsed. Parsing the YAML takes most of a second, so the JSON is cached in
 * dist/ under the YAML's hash: a changed contract is always parsed afresh.
 */
export function loadSpec(file = specPath): Json {
  const text = fs.readFileSync(file, 'utf8')
  const hash = crypto.createHash('sha256').update(text).digest('hex')
  const known = memo.get(hash)
  if (known) return structuredClone(known)
  let spec: Json | undefined
  try {
    const cached = JSON.parse(fs.readFileSync(cacheFile, 'utf8'))
    if (cached.hash === hash) spec = cached.spec
  } catch {
    // no cache yet, or an unreadable one: parse the YAML
  }
  if (!spec) {
    // The YAML parser is only loaded when the cache misses (it slows every start).
    const YAML = createRequire(import.meta.url)('yaml') as typeof YAMLModule
    spec = YAML.parse(text, { maxAliasCount: -1 }) as Json
    try {
      fs.mkdirSync(path.dirname(cacheFile), { recursive: true })
      const tmp = `${cacheFile}.${process.pid}.tmp`
      fs.writeFileSync(tmp, JSON.stringify({ hash, spec }))
      fs.renameSync(tmp, cacheFile)
    } catch {
      // a read-only install still works, only slower to start
    }
  }
  memo.set(hash, spec)
  return structuredClone(spec)
}

/**
 * fastify-openapi-glue checks each document it routes with a new Validator, and each one
 * compiled the OpenAPI meta-schema again: about 100 ms a time, and two documents are routed
 * (the multipart operation has a scope of its own). Compiled once per OpenAPI version here,
 * and only when a document has to be checked: a document that passed before (the same
 * text, the same OpenAPI version, the same validator release) passes again without it, which
 * took about 150 ms off every start after the first. The hashes of the documents that passed
 * are kept in dist/, beside the parsed contract.
 */
type MetaCheck = ((doc: unknown) => boolean) & { errors?: unknown }
const passedFile = path.join(projectRoot, 'dist', 'openapi-passed.json')
const validatorRelease: string = (() => {
  const entry = createRequire(import.meta.url).resolve('@seriousme/openapi-schema-validator')
  return JSON.parse(fs.readFileSync(path.join(path.dirname(entry), 'package.json'), 'utf8')).version
})()
/** The documents' hashes that passed, the newest last (a few: one contract routes as two documents). */
let passed: string[] | undefined
const passedHashes = (): string[] => {
  if (!passed) {
    try {
      const read = JSON.parse(fs.readFileSync(passedFile, 'utf8'))
      passed = Array.isArray(read) ? read.filter((h) => typeof h === 'string') : []
    } catch {
      passed = []
    }
  }
  return passed
}
function notePassed(hash: string): void {
  const hashes = [...passedHashes().filter((h) => h !== hash), hash].slice(-8)
  passed = hashes
  try {
    const tmp = `${passedFile}.${process.pid}.tmp`
    fs.writeFileSync(tmp, JSON.stringify(hashes))
    fs.renameSync(tmp, passedFile)
  } catch {
    // a read-only install checks the document at every start
  }
}
/** How many documents were checked against the meta-schema in this process (tests). */
export const metaSchemaWork = { checked: 0 }
const metaChecks = new Map<string, MetaCheck>()
const validatorProto = Validator.prototype as unknown as { getAjvValidator(version: string): unknown }
const ownMetaValidator = validatorProto.getAjvValidator
validatorProto.getAjvValidator = function (version: string) {
  let check = metaChecks.get(version)
  if (check) return check
  let compiled: MetaCheck | undefined
  check = (doc: unknown) => {
    const hash = crypto
      .createHash('sha256')
      .update(`${validatorRelease}\n${version}\n${JSON.stringify(doc)}`)
      .digest('hex')
    if (passedHashes().includes(hash)) {
      check!.errors = null
      return true
    }
    compiled ??= ownMetaValidator.call(this, version) as MetaCheck
    metaSchemaWork.checked++
    const valid = compiled(doc)
    check!.errors = compiled.errors
    if (valid) notePassed(hash)
    return valid
  }
  metaChecks.set(version, check)
  return check
}

/** Whether an operation of the contract takes a multipart body. */
export const takesMultipart = (op: Json): boolean => Object.keys(op.requestBody?.content ?? {}).some((type) => type.startsWith('multipart/'))

/**
 * What the router needs of the contract (of the operations `include` accepts): parameters
 * and request bodies. Every JSON media type reaches validation as application/json (the
 * request hook normalizes it), and answers are checked against the full contract in tests,
 * not by the router.
 */
export function routingView(spec: Json, include: (op: Json) => boolean = () => true): Json {
  const paths: Json = {}
  for (const [path, item] of Object.entries<Json>(spec.paths)) {
    for (const [method, op] of Object.entries<Json>(item)) {
      if (!include(op)) continue
      paths[path] ??= {}
      const { responses: _responses, callbacks: _callbacks, requestBody, ...rest } = op
      const routed: Json = { ...rest, responses: { default: { description: 'See the contract.' } } }
      if (requestBody) {
        const content: Json = {}
        for (const [type, media] of Object.entries<Json>(requestBody.content)) {
          // A multipart body is streamed to its handler, which checks it as it reads it.
          if (type.startsWith('multipart/')) continue
          content[type.includes('json') ? 'application/json' : type] = media
        }
        if (Object.keys(content).length > 0) routed.requestBody = { ...requestBody, content }
      }
      paths[path][method] = routed
    }
  }
  // Only the components those reach: the router validates the document it is given at every
  // start, and the answers' schemas (most of the contract) would only slow that down.
  const components: Json = { ...spec.components }
  const reachable = new Set<string>()
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(visit)
      return
    }
    if (!node || typeof node !== 'object') return
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith('#/components/')) {
        if (reachable.has(value)) continue
        reachable.add(value)
        const [, , kind, name] = value.split('/')
        visit(spec.components?.[kind]?.[name])
      } else visit(value)
    }
  }
  visit(paths)
  for (const kind of ['schemas', 'parameters', 'requestBodies', 'responses', 'examples', 'headers']) {
    if (!spec.components?.[kind]) continue
    components[kind] = Object.fromEntries(Object.entries<Json>(spec.components[kind]).filter(([name]) => reachable.has(`#/components/${kind}/${name}`)))
  }
  return { ...spec, paths, components }
}

function access(op: Json, spec: Json, id: string): Access {
  const security: Json[] = op.security ?? spec.security ?? []
  const min = op['x-min-profile']
  if (security.length === 0) {
    if (min !== 'Public') throw new Error(`${id}: an operation without security must declare x-min-profile: Public`)
    return { kind: 'public' }
  }
  const scheme = Object.keys(security[0])[0]
  if (scheme === 'agentAuth') return { kind: 'agent' }
  if (scheme === 'pollerAuth') return { kind: 'poller' }
  if (scheme !== 'bearerAuth' || !(min in profiles)) throw new Error(`${id}: unknown security ${scheme} / x-min-profile ${min}`)
  return { kind: 'user', minProfile: profiles[min as ProfileName] }
}

/** `x-no-integration-token`: true, or absent; only on operations a user's bearer token calls. */
function noIntegrationToken(op: Json, spec: Json, id: string): boolean {
  const v = op['x-no-integration-token']
  if (v === undefined) return false
  if (v !== true) throw new Error(`${id}: x-no-integration-token must be true when present, not ${v}`)
  if (access(op, spec, id).kind !== 'user') throw new Error(`${id}: x-no-integration-token applies only to operations of the bearerAuth scheme`)
  return true
}

/** The maximum its `PageSize` query parameter declares; a list without one would be unbounded, and is refused at start. */
function pageSizeMax(op: Json, spec: Json, id: string): number | null {
  const params: Json[] = (op.parameters ?? []).map((p: Json) => (p.$ref ? spec.components?.parameters?.[String(p.$ref).split('/').pop()!] : p))
  const size = params.find((p) => p?.in === 'query' && String(p.name).toLowerCase() === 'pagesize')
  if (!size) return null
  const max = size.schema?.maximum
  if (!Number.isInteger(max)) throw new Error(`${id}: its PageSize parameter must declare an integer maximum`)
  return max
}

export function operations(spec: Json): Map<string, Operation> {
  const out = new Map<string, Operation>()
  const pathOf = new Map<string, string>()
  for (const [path, item] of Object.entries<Json>(spec.paths)) for (const op of Object.values<Json>(item)) if (op?.operationId) pathOf.set(op.operationId, path)
  for (const [path, item] of Object.entries<Json>(spec.paths)) {
    for (const [method, op] of Object.entries<Json>(item)) {
      if (!['get', 'post', 'put', 'delete', 'patch'].includes(method)) continue
      const id: string = op.operationId
      if (method !== 'get' && !op['x-audit-category']) throw new Error(`${id}: x-audit-category is required on ${method}`)
      out.set(id, {
        operationId: id,
        method: method.toUpperCase(),
        path,
        access: access(op, spec, id),
        auditCategory: op['x-audit-category'] ?? null,
        readOnly: op['x-read-only'] === true,
        sortFields: op['x-sort-fields'] ?? [],
        defaultSort: op['x-default-sort'] ?? null,
        pageSizeMax: pageSizeMax(op, spec, id),
        requestTypes: Object.keys(op.requestBody?.content ?? {}),
        bodyRequired: Boolean(op.requestBody?.required),
        responseTypes: Object.keys(op.responses?.['200']?.content ?? {}),
        deprecation: deprecationHeaders(op, id, pathOf.get(op['x-replacement'])),
        deprecatedInputs: deprecatedInputs(spec, item, op, id),
        probe: op['x-probe'] === true,
        rateLimit: named(op, id, 'x-rate-limit', RATE_LIMITS),
        gatewayLimit: named(op, id, 'x-gateway-limit', GATEWAY_LIMITS),
        expensive: op['x-expensive'] === true,
        noIntegrationToken: noIntegrationToken(op, spec, id),
      })
    }
  }
  return out
}
