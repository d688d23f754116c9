// Case-insensitive query parameter and body property names: incoming names are renamed
// to the contract's spelling before validation, following the schema.

type Schema = Record<string, any>

interface Names {
  /** The schema's properties, `allOf` members merged. */
  props: Record<string, Schema>
  /** Lower-cased name to the contract's spelling. */
  byLower: Map<string, string>
}

// Built once per schema (the route schemas live as long as the server).
const cache = new WeakMap<Schema, Names>()

function mergedProperties(schema: Schema): Record<string, Schema> {
  let props: Record<string, Schema> = { ...(schema.properties ?? {}) }
  for (const sub of schema.allOf ?? []) props = { ...props, ...mergedProperties(sub) }
  return props
}

function namesOf(schema: Schema): Names {
  let names = cache.get(schema)
  if (!names) {
    const props = mergedProperties(schema)
    names = { props, byLower: new Map(Object.keys(props).map((k) => [k.toLowerCase(), k])) }
    cache.set(schema, names)
  }
  return names
}

/** Renames object keys to the schema's spelling, recursively; unknown keys stay (and fail validation). */
export function canonicalize(value: unknown, schema: Schema | undefined): void {
  if (!schema || value === null || typeof value !== 'object') return
  if (Array.isArray(value)) {
    if (schema.items) for (const item of value) canonicalize(item, schema.items)
    return
  }
  const obj = value as Record<string, unknown>
  const { props, byLower } = namesOf(schema)
  for (const key of Object.keys(obj)) {
    let name = key
    if (!(key in props)) {
      const canonical = byLower.get(key.toLowerCase())
      if (canonical && !(canonical in obj)) {
        obj[canonical] = obj[key]
        delete obj[key]
        name = canonical
      }
    }
    if (props[name]) canonicalize(obj[name], props[name])
  }
}

/** Query strings: canonical names, and parameters given empty are dropped. */
export function canonicalizeQuery(query: Record<string, unknown>, schema: Schema | undefined): void {
  for (const key of Object.keys(query)) {
    const v = query[key]
    if (v === '' || (Array.isArray(v) && v.every((x) => x === ''))) delete query[key]
  }
  canonicalize(query, schema)
}
