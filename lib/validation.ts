import Ajv, { type ErrorObject } from 'ajv'
import addFormats from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'
import type { FieldError } from './errors.js'

export function makeAjv(coerce: boolean) {
  const ajv = new Ajv.default({
    allErrors: true,
    strict: false,
    // Bodies are taken as sent: no coercion, no defaults, no silent removal of properties.
    coerceTypes: coerce ? 'array' : false,
    useDefaults: coerce,
    removeAdditional: false,
    discriminator: true,
  })
  addFormats.default(ajv, { mode: 'full' })
  return ajv
}

const strictAjv = makeAjv(false)
const coercingAjv = makeAjv(true)

type Validate = ((data: unknown) => boolean) & { errors?: ErrorObject[] | null }
const compiled = new Map<string, Validate>()
const pending: (() => void)[] = []

function compileOnce(schema: object, strict: boolean): Validate {
  // The contract offers each body under four JSON media types with one schema: compile it once.
  const key = (strict ? 'b' : 'p') + JSON.stringify(schema)
  let v = compiled.get(key)
  if (!v) {
    v = (strict ? strictAjv : coercingAjv).compile(schema) as Validate
    compiled.set(key, v)
  }
  return v
}

/**
 * Strict for bodies; coercing (strings to numbers and booleans) for query, path and headers.
 * Validators compile on first use, or when warmValidators() gets to them, so that the server
 * listens without first compiling every schema of the contract.
 */
export const validatorCompiler: FastifySchemaCompiler<any> = ({ schema, httpPart }) => {
  let real: Validate | undefined
  const strict = httpPart === 'body'
  const get = () => (real ??= compileOnce(schema as object, strict))
  const lazy = ((data: unknown) => {
    const v = get()
    const ok = v(data)
    lazy.errors = v.errors
    return ok
  }) as Validate
  pending.push(get)
  return lazy as any
}

/**
 * Compiles the validators not used yet, in turns of the event loop of about `sliceMs` each
 * (one validator at least): eight a turn held the loop up to 50 ms after a start (the
 * contract's largest schemas take tens of ms each); these hold it about 25.
 */
export function warmValidators(sliceMs = 10): Promise<void> {
  return new Promise((resolve) => {
    const step = () => {
      const until = performance.now() + sliceMs
      do pending.shift()?.()
      while (pending.length && performance.now() < until)
      if (pending.length) setImmediate(step)
      else resolve()
    }
    setImmediate(step)
  })
}

const partNames: Record<string, FieldError['location']> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' }

/** Turns Ajv's errors into the problem document's `errors`. */
export function fieldErrors(errors: ErrorObject[], context: string): FieldError[] {
  const location = partNames[context] ?? 'body'
  return errors.map((e) => {
    let name = e.instancePath.replace(/^\//, '')
    let reason = e.message ?? 'is invalid'
    if (e.keyword === 'required') name = [name, e.params.missingProperty].filter(Boolean).join('/')
    if (e.keyword === 'required') reason = 'is required'
    if (e.keyword === 'additionalProperties') {
      name = [name, e.params.additionalProperty].filter(Boolean).join('/')
      reason = 'is not a known property'
    }
    if (e.keyword === 'enum') reason = `must be one of: ${(e.params.allowedValues as unknown[]).map(String).join(', ')}`
    return { location, name: name || '(root)', reason }
  })
}
