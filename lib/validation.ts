import Ajv, { type ErrorObject } from 'ajv'
import addFormats from 'ajv-formats'
import type { FastifySchemaCompiler } from 'fastify'
import type { FieldError } from './errors.js'

function makeAjv(coerce: boolean) {
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

/** Strict for bodies; coercing (strings to numbers and booleans) for query, path and headers. */
export const validatorCompiler: FastifySchemaCompiler<any> = ({ schema, httpPart }) =>
  (httpPart === 'body' ? strictAjv : coercingAjv).compile(schema as object) as any

/** Compiles schemas for checking answers against the contract (tests). */
export const compileResponseSchema = (schema: object) => strictAjv.compile(schema)

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
