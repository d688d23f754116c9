// Requests made from the contract, valid and invalid, for the fuzz test and the attack run:
// values faked from the schemas, values no parameter should take, and body variants.
import jsf from 'json-schema-faker'

type Json = Record<string, any>

/** A small repeatable random source (Park-Miller). */
function prng(seed: number) {
  let s = seed
  return () => (s = (s * 16807) % 2147483647) / 2147483647
}
/**
 * json-schema-faker, repeatable from `seed`, filling every optional property, with short
 * strings and arrays; `password` fields get a password the server accepts.
 */
export function seededFaker(seed: number, password: string): { generate(schema: Json): any } {
  jsf.option({ alwaysFakeOptionals: true, useDefaultValue: false, fillProperties: false, failOnInvalidFormat: false, maxItems: 3, maxLength: 40, random: prng(seed) })
  jsf.format('password', () => password)
  jsf.format('binary', () => 'binary')
  jsf.format('int32', () => '1')
  jsf.format('int64', () => '1')
  return jsf
}

export function deref(node: any, spec: Json, seen = new Set<string>()): any {
  if (Array.isArray(node)) return node.map((n) => deref(n, spec, seen))
  if (!node || typeof node !== 'object') return node
  if (typeof node.$ref === 'string') {
    if (seen.has(node.$ref)) return {}
    const target = node.$ref
      .slice(2)
      .split('/')
      .reduce((o: Json, k: string) => o[k.replace(/~1/g, '/').replace(/~0/g, '~')], spec)
    return deref(target, spec, new Set([...seen, node.$ref]))
  }
  return Object.fromEntries(Object.entries(node).map(([k, v]) => [k, deref(v, spec, seen)]))
}

const BIDI = '\u202e\u2066\u200f'
const CONTROL = '\u0000\u0007\u001b[2J\r\n'
/** Query and path values that no parameter should take, and a few that test the parsers. */
export const GARBAGE = [
  '',
  ' ',
  'null',
  '-1',
  '0',
  '99999999999999999999',
  '1e309',
  '-9.9e999',
  'x'.repeat(5000),
  '\u0000',
  CONTROL,
  BIDI + 'gpj.exe',
  '😀',
  '[]',
  '{}',
  "' OR 1=1 --",
  '%',
  '%00',
  '../..',
  'true',
  'NaN',
]
// biome-ignore lint/correctness/noPrecisionLoss: an integer JSON cannot carry exactly, sent on purpose
const WRONG_TYPES = [null, 0, -1, 1.5, 1e308, -9007199254740993, 'text', true, [], {}, [null], { a: { b: { c: [1, 2, 3] } } }, 'x'.repeat(70_000), CONTROL + BIDI]

/** Body variants: wrong types, each property missing or wrong, unknown properties, oversize. */
export function bodyVariants(body: any, schema: Json): [string, any][] {
  const out: [string, any][] = [
    ['null', null],
    ['[]', []],
    ['{}', {}],
    ['string', 'string'],
    ['number', 42],
    ['unknown property only', { unknownProperty: 1 }],
  ]
  if (body && typeof body === 'object' && !Array.isArray(body)) {
    for (const key of Object.keys(body)) {
      for (const wrong of WRONG_TYPES) out.push([`${key}=${JSON.stringify(wrong)?.slice(0, 20)}`, { ...body, [key]: wrong }])
      const { [key]: _, ...rest } = body
      out.push([`without ${key}`, rest])
    }
    out.push(['with an unknown property', { ...body, unknownProperty: 'x' }])
  }
  if (Array.isArray(body)) {
    out.push(['array of wrong types', [...body, ...WRONG_TYPES]], ['1500 items', Array.from({ length: 1500 }, (_, i) => `id-${i}`)], ['an item twice', [body[0], body[0]]])
    if (schema.items?.type === 'object') out.push(['unknown property in an item', [{ unknownProperty: 1 }]])
  }
  return out
}
