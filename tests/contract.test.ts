import crypto from 'node:crypto'
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { Validator } from '@seriousme/openapi-schema-validator'
import t from 'tap'
import { loadSpec, metaSchemaWork, operations } from '../lib/contract.js'
import { projectRoot } from '../lib/paths.js'
import { handlers } from '../handlers/index.js'

const spec = loadSpec()
const ops = operations(spec)
const bin = (name: string) => path.join(projectRoot, 'node_modules', '.bin', name)

t.test('generated types match the contract', async (t) => {
  const r = spawnSync(bin('openapi-typescript'), ['spec/openapi.yaml', '-o', 'generated/openapi.ts', '--check'], { cwd: projectRoot, encoding: 'utf8' })
  t.equal(r.status, 0, `generated/openapi.ts is stale: run npm run generate\n${r.stdout}${r.stderr}`)
})

t.test('the contract passes spectral:oas with no warning', async (t) => {
  const r = spawnSync(bin('spectral'), ['lint', 'spec/openapi.yaml', '-r', '.spectral.yaml', '--fail-severity=warn'], { cwd: projectRoot, encoding: 'utf8' })
  t.equal(r.status, 0, r.stdout + r.stderr)
})

t.test('every operation has a handler, or declares 501 until it has one', async (t) => {
  for (const op of ops.values()) {
    const declares501 = Boolean(spec.paths[op.path][op.method.toLowerCase()].responses['501'])
    if (handlers[op.operationId]) t.notOk(declares501, `${op.operationId} is implemented but still declares 501`)
    else t.ok(declares501, `${op.operationId} has no handler and does not declare 501`)
  }
  for (const id of Object.keys(handlers)) t.ok(ops.has(id), `handler ${id} is not an operation of the contract`)
})

t.test('every operation declares who may call it and how it is audited', async (t) => {
  for (const op of ops.values()) {
    const raw = spec.paths[op.path][op.method.toLowerCase()]
    t.ok(['Public', 'User', 'Manager', 'Administrator', 'Agent', 'Poller'].includes(raw['x-min-profile']), `${op.operationId} x-min-profile`)
    if (op.method !== 'GET') t.ok(op.auditCategory, `${op.operationId} x-audit-category`)
    t.ok(raw.responses['200'], `${op.operationId} declares 200`)
    if (op.access.kind !== 'public') t.ok(raw.responses['401'], `${op.operationId} declares 401`)
    if (op.access.kind === 'user') t.ok(raw.responses['403'], `${op.operationId} declares 403`)
    if (op.sortFields.length) t.ok(op.sortFields.includes(op.defaultSort?.replace(/_(asc|desc)$/i, '') ?? ''), `${op.operationId} default sort is a sort field`)
  }
})

t.test('the code type-checks against the generated types', async (t) => {
  const r = spawnSync(bin('tsc'), ['--noEmit', '-p', '.'], { cwd: projectRoot, encoding: 'utf8' })
  t.equal(r.status, 0, r.stdout + r.stderr)
})

t.test('answers the contract does not describe are caught in tests', async (t) => {
  const { build, login, bearer } = await import('./helpers.js')
  const spec = loadSpec()
  spec.components.schemas.VersionResource.required.push('releaseNotes')
  const app = await build(t, {}, spec)
  const token = await login(app)
  const res = await app.inject({ url: '/prime/webui/admin/PrimeVersion', headers: bearer(token) })
  t.equal(res.statusCode, 500)
  t.match(res.json().detail, "getPrimeVersion 200: (root) must have required property 'releaseNotes'")
  const undeclared = await app.inject({ url: '/prime/webui/admin/PrimeVersion', headers: { ...bearer(token), accept: 'text/plain' } })
  t.equal(undeclared.statusCode, 500, 'checked whatever the negotiated media type')
})

t.test('the router compiles the OpenAPI meta-schema once per start', async (t) => {
  // lib/contract.ts shares it between the Validators fastify-openapi-glue makes: the glue must
  // load the same validator module as we do, or each routed document compiles it again.
  const fromGlue = createRequire(createRequire(import.meta.url).resolve('fastify-openapi-glue')).resolve('@seriousme/openapi-schema-validator')
  const ours = fileURLToPath(import.meta.resolve('@seriousme/openapi-schema-validator'))
  t.equal(fromGlue, ours, 'one copy of @seriousme/openapi-schema-validator')
  const a = new Validator() as unknown as { getAjvValidator(version: string): unknown }
  const b = new Validator() as unknown as { getAjvValidator(version: string): unknown }
  t.equal(a.getAjvValidator('3.0'), b.getAjvValidator('3.0'), 'two validators share the compiled meta-schema')
})

t.test('a document that passed the meta-schema passes again unchecked; a changed or failing one is checked', async (t) => {
  // A title of its own: no earlier run has passed this document.
  const doc = { openapi: '3.0.3', info: { title: `passed-${crypto.randomUUID()}`, version: '1' }, paths: {} }
  const checked = metaSchemaWork.checked
  t.same((await new Validator().validate(structuredClone(doc))).valid, true)
  t.equal(metaSchemaWork.checked, checked + 1, 'a new document is checked')
  t.same((await new Validator().validate(structuredClone(doc))).valid, true)
  t.equal(metaSchemaWork.checked, checked + 1, 'the same document again is not')
  const changed = { ...doc, info: { ...doc.info, version: '2' } }
  t.same((await new Validator().validate(structuredClone(changed))).valid, true)
  t.equal(metaSchemaWork.checked, checked + 2, 'a changed document is checked')
  const failing = { ...doc, paths: { 'no-slash': {} } }
  for (const time of ['first', 'second']) {
    const res = await new Validator().validate(structuredClone(failing))
    t.equal(res.valid, false, `a failing document fails the ${time} time`)
    t.ok(res.errors, 'and says why')
  }
  t.equal(metaSchemaWork.checked, checked + 4, 'a failing document is checked every time')
})
