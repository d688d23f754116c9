// The request validators come from the build's module (dist/validators.cjs, scripts/
// validators.ts) rather than being compiled on the event loop: every schema of the app's
// routes is in it, and each precompiled validator answers as Ajv's compiled one does.
import t from 'tap'
import { makeAjv, precompiledValidator, recordSchemas, recordedSchemas, validatorsCompiledAtRunTime, warmValidators } from '../lib/validation.js'
import { build } from './helpers.js'

recordSchemas()

t.test("every route's schemas are precompiled: none is compiled at run time", async (t) => {
  const app = await build(t)
  await app.ready()
  await warmValidators()
  const schemas = recordedSchemas()
  t.ok(schemas.length > 40, `${schemas.length} schemas`)
  t.same(
    schemas.filter((s) => !precompiledValidator(s.hash)).map((s) => s.key.slice(0, 120)),
    [],
    'the module holds each of them',
  )
  t.equal(validatorsCompiledAtRunTime(), 0)
  // Answered through a precompiled validator: the contract's errors as before.
  const res = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: 7 } })
  t.equal(res.statusCode, 400)
  t.match(res.json().errors, [{ location: 'body', name: 'password' }])
})

/** Inputs that reach different branches of a schema: wrong types, empty, and its own properties each set to a string, a number, null and an array. */
function probes(schema: any): unknown[] {
  const out: unknown[] = [undefined, null, {}, [], 'x', 1, true]
  const props = schema?.properties ?? {}
  for (const name of Object.keys(props)) {
    for (const value of ['', 'abc', '2026-01-01T00:00:00Z', -1, 1.5, 0, null, [], ['a'], {}, true]) out.push({ [name]: value })
  }
  const all: Record<string, unknown> = {}
  for (const name of Object.keys(props)) all[name] = props[name]?.type === 'string' ? 'a' : props[name]?.type === 'array' ? [] : 1
  out.push(all, { ...all, unknownProperty: 1 })
  return out
}

t.test('each precompiled validator answers as the runtime compiled one, errors included', async (t) => {
  const app = await build(t)
  await app.ready()
  const strict = makeAjv(false)
  const coercing = makeAjv(true)
  let compared = 0
  for (const { hash, schema, strict: isBody } of recordedSchemas()) {
    const pre = precompiledValidator(hash)
    if (!pre) continue
    const run = (isBody ? strict : coercing).compile(schema)
    for (const probe of probes(schema)) {
      // Coercion and defaults change the data: each side gets its own copy.
      const a = structuredClone(probe)
      const b = structuredClone(probe)
      const ok = pre(a)
      const expected = run(b)
      if (ok !== expected || JSON.stringify(pre.errors ?? null) !== JSON.stringify(run.errors ?? null) || JSON.stringify(a) !== JSON.stringify(b)) {
        t.fail(`${hash}: ${JSON.stringify(probe)} answered differently`)
      }
      compared++
    }
  }
  t.ok(compared > 1000, `${compared} answers compared`)
})
