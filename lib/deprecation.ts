/**
 * Deprecation as the contract declares it. An operation, parameter or request-body
 * property marked `deprecated: true` carries `x-deprecated-at` (the date it was
 * deprecated), `x-replacement` (what to use instead) and optionally `x-sunset` (the date
 * after which it may go, in a new major version). Calls that use it are answered with
 * `Deprecation` (RFC 9745), `Sunset` (RFC 8594) and, for an operation replaced by
 * another, a `Link` to the successor.
 */
type Json = Record<string, any>
export type DeprecationHeaders = Record<string, string>

export interface DeprecatedInputs {
  /** Query parameters by their contract name. */
  query: Map<string, DeprecationHeaders>
  /** Top-level request-body properties by their contract name. */
  body: Map<string, DeprecationHeaders>
}

const DATE = /^\d{4}-\d{2}-\d{2}$/

function date(text: unknown, what: string): Date {
  if (typeof text !== 'string' || !DATE.test(text) || Number.isNaN(Date.parse(`${text}T00:00:00Z`))) {
    throw new Error(`${what}: a deprecated item needs a YYYY-MM-DD date, got ${JSON.stringify(text)}`)
  }
  return new Date(`${text}T00:00:00Z`)
}

/** The headers a deprecated item's answers carry, or undefined when it is not deprecated. */
export function deprecationHeaders(node: Json | undefined, what: string, successor?: string): DeprecationHeaders | undefined {
  if (!node?.deprecated) return undefined
  if (typeof node['x-replacement'] !== 'string' || !node['x-replacement']) throw new Error(`${what}: a deprecated item names its x-replacement`)
  const headers: DeprecationHeaders = { deprecation: `@${Math.floor(date(node['x-deprecated-at'], what).getTime() / 1000)}` }
  if (node['x-sunset'] !== undefined) headers.sunset = date(node['x-sunset'], what).toUTCString()
  if (successor) headers.link = `<${successor}>; rel="successor-version"`
  return headers
}

function deref(spec: Json, node: any): any {
  let seen = 0
  while (node?.$ref && seen++ < 20)
    node = String(node.$ref)
      .slice(2)
      .split('/')
      .reduce((acc: any, k: string) => acc?.[k], spec)
  return node
}

/** An object schema's properties, with those its `allOf` parts bring. */
function propertiesOf(spec: Json, raw: unknown, out = new Map<string, Json>(), depth = 0): Map<string, Json> {
  const schema = deref(spec, raw)
  if (!schema || depth > 10) return out
  for (const [name, prop] of Object.entries<Json>(schema.properties ?? {})) out.set(name, prop)
  for (const part of schema.allOf ?? []) propertiesOf(spec, part, out, depth + 1)
  return out
}

/** The parameters and body properties of an operation that are deprecated. */
export function deprecatedInputs(spec: Json, pathItem: Json, op: Json, id: string): DeprecatedInputs | undefined {
  const query = new Map<string, DeprecationHeaders>()
  const body = new Map<string, DeprecationHeaders>()
  for (const raw of [...(pathItem.parameters ?? []), ...(op.parameters ?? [])]) {
    const param = deref(spec, raw)
    const headers = deprecationHeaders(param, `${id} parameter ${param?.name}`)
    if (headers && param.in === 'query') query.set(param.name, headers)
  }
  for (const media of Object.values<Json>(deref(spec, op.requestBody)?.content ?? {})) {
    for (const [name, prop] of propertiesOf(spec, media.schema)) {
      const headers = deprecationHeaders(deref(spec, prop), `${id} body property ${name}`)
      if (headers) body.set(name, headers)
    }
  }
  return query.size || body.size ? { query, body } : undefined
}

/** The headers for the deprecated inputs a request used (after names are canonical). */
export function usedDeprecatedInputs(inputs: DeprecatedInputs, query: unknown, body: unknown): DeprecationHeaders | undefined {
  for (const [name, headers] of inputs.query) if (query && typeof query === 'object' && name in query) return headers
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    for (const [name, headers] of inputs.body) if (name in body) return headers
  }
  return undefined
}
