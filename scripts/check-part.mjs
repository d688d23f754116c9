// Merges spec/openapi.yaml with the given fragment(s) (text-wise) and validates the result.
import fs from 'node:fs'
import { execSync } from 'node:child_process'
import YAML from 'yaml'
import { Validator } from '@seriousme/openapi-schema-validator'
const base = fs.readFileSync('spec/openapi.yaml', 'utf8')
const parts = process.argv.slice(2)
let pathsText = '', schemasText = '', paramsText = ''
for (const f of parts) {
  const t = fs.readFileSync(f, 'utf8')
  const doc = YAML.parse(t, { uniqueKeys: true })
  const m = t.match(/^paths:\n([\s\S]*?)(?=^components:|(?![\s\S]))/m)
  if (!m) throw new Error(f + ': no paths: block')
  pathsText += m[1]
  const c = t.match(/^components:\n([\s\S]*)$/m)
  if (c) {
    const sm = c[1].match(/^  schemas:\n([\s\S]*?)(?=^  \w|(?![\s\S]))/m); if (sm) schemasText += sm[1]
    const pm = c[1].match(/^  parameters:\n([\s\S]*?)(?=^  \w|(?![\s\S]))/m); if (pm) paramsText += pm[1]
  }
  const keys = Object.keys(doc.components || {}).filter(k => !['schemas', 'parameters'].includes(k))
  if (keys.length) throw new Error(f + ': only components.schemas and components.parameters allowed, got ' + keys)
}
let out = base.replace(/^paths:\n/m, () => 'paths:\n' + pathsText)
out = out.replace(/^  schemas:\n/m, () => '  schemas:\n' + schemasText)
out = out.replace(/^  parameters:\n/m, () => '  parameters:\n' + paramsText)
const outFile = process.env.OUT || '/tmp/merged-openapi.yaml'
fs.writeFileSync(outFile, out)
const parsed = YAML.parse(out, { uniqueKeys: true, maxAliasCount: -1 })
const v = new Validator()
const r = await v.validate(parsed)
if (!r.valid) { console.error(JSON.stringify(r.errors, null, 1).slice(0, 4000)); process.exit(1) }
const ops = []
for (const [p, item] of Object.entries(parsed.paths)) for (const [m, op] of Object.entries(item)) ops.push(op.operationId)
const dup = ops.filter((o, i) => ops.indexOf(o) !== i)
if (dup.length) { console.error('duplicate operationIds', dup); process.exit(1) }
const lower = Object.keys(parsed.paths).map(p => p.toLowerCase()); const dupP = lower.filter((o, i) => lower.indexOf(o) !== i)
if (dupP.length) { console.error('paths equal ignoring case', dupP); process.exit(1) }
console.log('valid OpenAPI;', ops.length, 'operations; merged into', outFile)
