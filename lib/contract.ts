import fs from 'node:fs'
import YAML from 'yaml'
import { specPath } from './paths.js'

export const profiles = { User: 10, Manager: 20, Administrator: 30 } as const
export type ProfileName = keyof typeof profiles

/** Who may call an operation, from its `security` and `x-min-profile`. */
export type Access =
  | { kind: 'public' }
  | { kind: 'user'; minProfile: number }
  | { kind: 'agent' }
  | { kind: 'poller' }

export interface Operation {
  operationId: string
  method: string
  path: string
  access: Access
  auditCategory: string | null
  sortFields: string[]
  defaultSort: string | null
  /** Media types of the request body, when it takes one. */
  requestTypes: string[]
  bodyRequired: boolean
  /** Media types of the 200 answer, in the contract's order of preference. */
  responseTypes: string[]
}

type Json = Record<string, any>

export function loadSpec(file = specPath): Json {
  return YAML.parse(fs.readFileSync(file, 'utf8'), { maxAliasCount: -1 })
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

export function operations(spec: Json): Map<string, Operation> {
  const out = new Map<string, Operation>()
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
        sortFields: op['x-sort-fields'] ?? [],
        defaultSort: op['x-default-sort'] ?? null,
        requestTypes: Object.keys(op.requestBody?.content ?? {}),
        bodyRequired: Boolean(op.requestBody?.required),
        responseTypes: Object.keys(op.responses?.['200']?.content ?? {}),
      })
    }
  }
  return out
}
