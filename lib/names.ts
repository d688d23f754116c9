// Case-insensitive query parameter and body property names: incoming names are renamed
// to the contract's spelling before validation, following the schema.

type Schema = Record<string, any>

const lookups = new WeakMap<Schema, Map<string, string>>()

function propertiesOf(schema: Schema): Record<string, Schema> {
  let props: Record<string, Schema> = { ...(schema.properties ?? {}) }
  for (const sub of schema.allOf ?? []) props = { ...props, ...propertiesOf(sub) }
  return props
}

function lookup(schema: Schema): Map<string, string> {
  let map = lookups.get(schema)
  if (!map) {
    map = new Map(Object.keys(propertiesOf(schema)).map((k) => [k.toLowerCase(), k]))
    lookups.set(schema, map)
  }
  return map
}

/** Renames object keys to the schema's spelling, recursively; unknown keys stay (and fail validation). */
export function canonicalize(value: unknown, schema: Schema | undefined): void {
  if (!schema || value === null || typeof value !== 'object') return
  if (Array.isArray(value)) {
    if (schema.items) for (const item of value) canonicalize(item, schema.items)
    return
  }
  const obj = value as Record<string, unknown>
  const props = propertiesOf(schema)
  const names = lookup(schema)
  for (const key of Object.keys(obj)) {
    let name = key
    if (!(key in props)) {
      const canonical = names.get(key.toLowerCase())
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
