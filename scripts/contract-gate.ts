/**
 * The contract's breaking-change gate. Compares the working contract (spec/openapi.yaml)
 * with the last released one (spec/released/<version>.yaml) and fails when a change would
 * break a consumer, unless the major version was raised and the changelog says so.
 *
 * No maintained OpenAPI diff tool installs here without downloading a binary, so the rules
 * are written out below, one function each, and pinned by pairs of contracts in
 * tests/contract-gate.test.ts.
 *
 * Every breaking change must also be named in the changelog's `### Breaking` section of the
 * new major version: its operation and field, or its component schema's property.
 *
 *   node dist/scripts/contract-gate.js             (npm run contract:gate)
 *   node dist/scripts/contract-gate.js --release   (npm run contract:release)
 */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import YAML from 'yaml'

type Json = Record<string, any>
export type Severity = 'breaking' | 'compatible'
export interface Change {
  severity: Severity
  rule: string
  where: string
  message: string
  /** What the change is to, as a changelog names it: a parameter, property, status or media type (none: the operation itself). */
  field?: string
  /** The component schema the changed property belongs to (`AgentViewResource` of `AgentViewResource.hostIdentifier`). */
  schema?: string
}

/** What a change is to, as add() records it (Change.field, Change.schema). */
type Named = { field?: string; schema?: string }

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace']
const PROFILE_RANK: Record<string, number> = { Public: 0, Agent: 0, Poller: 0, User: 10, Manager: 20, Administrator: 30 }

/** Follows local `$ref`s (`#/components/...`); anything else is answered as it is. */
function deref(spec: Json, node: any, seen = new Set<string>()): any {
  while (node && typeof node === 'object' && typeof node.$ref === 'string') {
    const ref: string = node.$ref
    if (!ref.startsWith('#/') || seen.has(ref)) return node
    seen.add(ref)
    node = ref
      .slice(2)
      .split('/')
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .reduce((acc: any, key) => (acc == null ? acc : acc[key]), spec)
  }
  return node
}

/** Operations by `METHOD path`, with the path's own parameters merged in. */
function operationsOf(spec: Json): Map<string, { path: string; method: string; op: Json; params: Json[] }> {
  const out = new Map<string, { path: string; method: string; op: Json; params: Json[] }>()
  for (const [p, item] of Object.entries<Json>(spec.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method]
      if (!op) continue
      const params = new Map<string, Json>()
      for (const raw of [...(item.parameters ?? []), ...(op.parameters ?? [])]) {
        const param = deref(spec, raw)
        params.set(`${param.in}:${param.name}`, param)
      }
      out.set(`${method.toUpperCase()} ${p}`, { path: p, method, op, params: [...params.values()] })
    }
  }
  return out
}

type Direction = 'request' | 'response'

class Differ {
  readonly changes: Change[] = []
  private readonly compared = new Set<string>()
  /** The field and component schema being compared: what a change found there is to. */
  private named: Named = {}

  constructor(
    private readonly a: Json,
    private readonly b: Json,
  ) {}

  add(severity: Severity, rule: string, where: string, message: string, named: Named = this.named) {
    this.changes.push({ severity, rule, where, message, ...(named.field === undefined ? {} : { field: named.field }), ...(named.schema === undefined ? {} : { schema: named.schema }) })
  }

  /** Runs `fn` with `named` as what its changes are to. */
  private within<T>(named: Named, fn: () => T): T {
    const before = this.named
    this.named = named
    try {
      return fn()
    } finally {
      this.named = before
    }
  }

  run(): Change[] {
    const before = operationsOf(this.a)
    const after = operationsOf(this.b)
    const afterIds = new Map([...after.values()].map((o) => [o.op.operationId, o]))
    for (const [key, old] of before) {
      const now = after.get(key)
      if (!now) {
        const moved = old.op.operationId && afterIds.get(old.op.operationId)
        this.add('breaking', 'operation-removed', key, moved ? `moved to ${moved.method.toUpperCase()} ${moved.path}` : 'the operation was removed')
        continue
      }
      this.operation(key, old, now)
    }
    for (const key of after.keys()) if (!before.has(key)) this.add('compatible', 'operation-added', key, 'a new operation')
    return this.changes
  }

  private operation(key: string, old: { op: Json; params: Json[] }, now: { op: Json; params: Json[] }) {
    if (old.op.operationId !== now.op.operationId) {
      this.add('breaking', 'operation-renamed', key, `operationId ${old.op.operationId} became ${now.op.operationId}`)
    }
    const rankBefore = PROFILE_RANK[old.op['x-min-profile']] ?? 0
    const rankAfter = PROFILE_RANK[now.op['x-min-profile']] ?? 0
    if (rankAfter > rankBefore) this.add('breaking', 'profile-raised', key, `needs ${now.op['x-min-profile']} instead of ${old.op['x-min-profile']}`)
    if (!old.op.deprecated && now.op.deprecated) this.add('compatible', 'operation-deprecated', key, 'the operation is deprecated')

    // Parameters
    const oldParams = new Map(old.params.map((p) => [`${p.in}:${p.name}`, p]))
    const newParams = new Map(now.params.map((p) => [`${p.in}:${p.name}`, p]))
    for (const [id, p] of oldParams) {
      const q = newParams.get(id)
      const where = `${key} parameter ${p.name} (${p.in})`
      if (!q) {
        this.add('breaking', 'parameter-removed', where, 'the parameter was removed', { field: p.name })
        continue
      }
      if (!p.required && q.required) this.add('breaking', 'parameter-now-required', where, 'the parameter became required', { field: p.name })
      this.within({ field: p.name }, () => this.schema(p.schema, q.schema, 'request', where))
    }
    for (const [id, q] of newParams) {
      if (oldParams.has(id)) continue
      const where = `${key} parameter ${q.name} (${q.in})`
      this.add(q.required ? 'breaking' : 'compatible', q.required ? 'required-parameter-added' : 'parameter-added', where, q.required ? 'a new required parameter' : 'a new optional parameter', {
        field: q.name,
      })
    }

    // Request body
    const oldBody = deref(this.a, old.op.requestBody)
    const newBody = deref(this.b, now.op.requestBody)
    if (oldBody && !newBody) this.add('breaking', 'request-body-removed', `${key} request body`, 'the operation no longer takes a body')
    if (!oldBody && newBody?.required) this.add('breaking', 'request-body-now-required', `${key} request body`, 'a body is now required')
    if (oldBody && newBody) {
      if (!oldBody.required && newBody.required) this.add('breaking', 'request-body-now-required', `${key} request body`, 'the body became required')
      for (const [type, media] of Object.entries<Json>(oldBody.content ?? {})) {
        const next = newBody.content?.[type]
        const where = `${key} request body ${type}`
        if (!next) this.add('breaking', 'request-media-type-removed', where, 'the media type is no longer accepted', { field: type })
        else this.schema(media.schema, next.schema, 'request', where)
      }
    }

    // Responses
    const oldResponses = old.op.responses ?? {}
    const newResponses = now.op.responses ?? {}
    const successes = (r: Json) => Object.keys(r).filter((s) => /^2/.test(s))
    for (const status of Object.keys(oldResponses)) {
      const where = `${key} response ${status}`
      if (!newResponses[status]) {
        // 501 goes when the operation is built; a server error is never a client's to expect
        if (/^5/.test(status)) this.add('compatible', status === '501' ? 'operation-implemented' : 'server-error-removed', where, status === '501' ? 'the operation is built' : 'no longer declared')
        else this.add('breaking', 'status-removed', where, 'the status is no longer answered', { field: status })
        continue
      }
      const before = deref(this.a, oldResponses[status])
      const after = deref(this.b, newResponses[status])
      for (const [type, media] of Object.entries<Json>(before.content ?? {})) {
        const next = after.content?.[type]
        if (!next) this.add('breaking', 'response-media-type-removed', `${where} ${type}`, 'the media type is no longer answered', { field: type })
        else this.schema(media.schema, next.schema, 'response', `${where} ${type}`)
      }
    }
    const oldOk = successes(oldResponses)
    for (const status of successes(newResponses)) {
      if (!oldOk.includes(status)) this.add('breaking', 'status-added', `${key} response ${status}`, 'a new success status a client does not expect', { field: status })
    }
  }

  /**
   * Compares two schemas in the direction they travel: a request may not accept less than
   * before (narrowed types, limits, enums; new required properties), a response may not
   * promise less (removed or optional properties, changed types, values it did not send).
   */
  schema(rawA: any, rawB: any, dir: Direction, where: string): void {
    if (!rawA || !rawB) {
      if (rawA && !rawB) this.add('breaking', 'schema-removed', where, 'the schema was removed')
      return
    }
    // A component schema's changes are to it, whichever operation reached it first (each is compared once).
    const ref: unknown = rawA.$ref ?? rawB.$ref
    if (typeof ref === 'string' && ref.startsWith('#/components/schemas/')) {
      const owner = ref.slice('#/components/schemas/'.length)
      if (owner !== this.named.schema) {
        this.within({ ...this.named, schema: owner }, () => this.schema(rawA, rawB, dir, where))
        return
      }
    }
    const memoKey = `${dir}|${rawA.$ref ?? ''}|${rawB.$ref ?? ''}|${rawA.$ref || rawB.$ref ? '' : where}`
    if (rawA.$ref || rawB.$ref) {
      if (this.compared.has(memoKey)) return
      this.compared.add(memoKey)
    }
    const a = deref(this.a, rawA)
    const b = deref(this.b, rawB)
    if (!a || !b || typeof a !== 'object' || typeof b !== 'object') return

    const typeA = a.type
    const typeB = b.type
    if (typeA !== typeB) {
      // integer -> number widens a request; anything else changes what is sent or read
      const widened = dir === 'request' && ((typeA === 'integer' && typeB === 'number') || typeB === undefined)
      if (!widened) this.add('breaking', 'type-changed', where, `type ${typeA ?? 'any'} became ${typeB ?? 'any'}`)
      return
    }
    if ((a.format ?? null) !== (b.format ?? null)) {
      const loosened = dir === 'request' && b.format === undefined
      if (!loosened) this.add('breaking', 'format-changed', where, `format ${a.format ?? 'none'} became ${b.format ?? 'none'}`)
    }
    if (a.nullable && !b.nullable && dir === 'request') this.add('breaking', 'null-refused', where, 'null is no longer accepted')
    if (!a.nullable && b.nullable && dir === 'response') this.add('breaking', 'null-answered', where, 'may now answer null')

    this.enumeration(a, b, dir, where)
    if (dir === 'request') this.limits(a, b, where)

    // Properties
    const propsA: Json = a.properties ?? {}
    const propsB: Json = b.properties ?? {}
    const reqA = new Set<string>(a.required ?? [])
    const reqB = new Set<string>(b.required ?? [])
    const owner = this.named.schema
    for (const [name, schema] of Object.entries(propsA)) {
      const at = `${where}.${name}`
      const named = { field: name, schema: owner }
      if (!(name in propsB)) {
        // A response that no longer sends a property breaks readers; a request that no
        // longer takes one breaks writers when unknown properties are refused (they are).
        this.add('breaking', 'property-removed', at, 'the property was removed', named)
        continue
      }
      if (dir === 'response' && reqA.has(name) && !reqB.has(name)) this.add('breaking', 'property-now-optional', at, 'the property is no longer always answered', named)
      if (dir === 'request' && !reqA.has(name) && reqB.has(name)) this.add('breaking', 'property-now-required', at, 'the property became required', named)
      if (!schema?.deprecated && propsB[name]?.deprecated) this.add('compatible', 'property-deprecated', at, 'the property is deprecated', named)
      this.within(named, () => this.schema(schema, propsB[name], dir, at))
    }
    for (const name of Object.keys(propsB)) {
      if (name in propsA) continue
      const at = `${where}.${name}`
      const named = { field: name, schema: owner }
      if (dir === 'request' && reqB.has(name)) this.add('breaking', 'required-property-added', at, 'a new required property', named)
      else this.add('compatible', 'property-added', at, 'a new property', named)
    }
    if (dir === 'request' && a.additionalProperties !== false && b.additionalProperties === false && !a.properties) {
      this.add('breaking', 'additional-properties-refused', where, 'free-form properties are no longer accepted')
    }
    if (typeof a.additionalProperties === 'object' && typeof b.additionalProperties === 'object') {
      this.schema(a.additionalProperties, b.additionalProperties, dir, `${where}.*`)
    }
    if (a.items && b.items) this.schema(a.items, b.items, dir, `${where}[]`)
    for (const key of ['allOf', 'anyOf', 'oneOf'] as const) {
      const listA: any[] = a[key] ?? []
      const listB: any[] = b[key] ?? []
      if (listA.length !== listB.length) {
        if (listA.length || listB.length) this.add('breaking', 'composition-changed', where, `${key} has ${listB.length} schemas instead of ${listA.length}`)
        continue
      }
      listA.forEach((s, i) => this.schema(s, listB[i], dir, `${where}/${key}[${i}]`))
    }
  }

  private enumeration(a: Json, b: Json, dir: Direction, where: string) {
    if (!Array.isArray(a.enum) && !Array.isArray(b.enum)) return
    if (!Array.isArray(b.enum)) return // the enum was lifted: any value now
    if (!Array.isArray(a.enum)) {
      if (dir === 'request') this.add('breaking', 'enum-added-to-request', where, `only ${b.enum.join(', ')} accepted now`)
      return
    }
    const removed = a.enum.filter((v: unknown) => !b.enum.includes(v))
    const added = b.enum.filter((v: unknown) => !a.enum.includes(v))
    for (const v of removed) this.add('breaking', 'enum-value-removed', where, `the value ${JSON.stringify(v)} was removed`)
    for (const v of added) this.add('compatible', 'enum-value-added', where, `the value ${JSON.stringify(v)} was added${dir === 'response' ? ' (readers should accept values they do not know)' : ''}`)
  }

  /** What a request may carry: a lower maximum or higher minimum refuses what was accepted. */
  private limits(a: Json, b: Json, where: string) {
    const upper = ['maxLength', 'maxItems', 'maximum', 'exclusiveMaximum', 'maxProperties']
    const lower = ['minLength', 'minItems', 'minimum', 'exclusiveMinimum', 'minProperties']
    for (const k of upper) {
      if (typeof b[k] === 'number' && (typeof a[k] !== 'number' || b[k] < a[k])) this.add('breaking', 'limit-narrowed', where, `${k} ${a[k] ?? 'none'} became ${b[k]}`)
    }
    for (const k of lower) {
      if (typeof b[k] === 'number' && (typeof a[k] !== 'number' || b[k] > a[k])) this.add('breaking', 'limit-narrowed', where, `${k} ${a[k] ?? 'none'} became ${b[k]}`)
    }
    if (b.pattern && b.pattern !== a.pattern) this.add('breaking', 'pattern-changed', where, `pattern ${a.pattern ?? 'none'} became ${b.pattern}`)
  }
}

/** Every difference between two contracts that a consumer could notice, classified. */
export function diffContracts(before: Json, after: Json): Change[] {
  return new Differ(before, after).run()
}

export interface SemVer {
  major: number
  minor: number
  patch: number
}

export function parseVersion(text: unknown): SemVer | null {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(String(text ?? ''))
  return m ? { major: Number(m[1]), minor: Number(m[2]), patch: Number(m[3]) } : null
}

function compareVersions(a: SemVer, b: SemVer): number {
  return a.major - b.major || a.minor - b.minor || a.patch - b.patch
}

/** The changelog's section for a version: from `## <version>` to the next `## `. */
export function changelogSection(changelog: string, version: string): string | null {
  const lines = changelog.split('\n')
  const start = lines.findIndex((l) => new RegExp(`^## \\[?${version.replace(/\./g, '\\.')}\\]?(\\s|$)`).test(l))
  if (start < 0) return null
  const end = lines.findIndex((l, i) => i > start && /^## /.test(l))
  return lines
    .slice(start + 1, end < 0 ? undefined : end)
    .join('\n')
    .trim()
}

/** The `### Breaking` parts of the changelog's sections of the versions after `from` up to `to`, as their list items. */
export function breakingItems(changelog: string, from: SemVer, to: SemVer): string[] {
  const items: string[] = []
  const lines = changelog.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const v = parseVersion(/^## \[?(\d+\.\d+\.\d+)/.exec(lines[i])?.[1])
    if (!v || compareVersions(v, from) <= 0 || compareVersions(v, to) > 0) continue
    let inBreaking = false
    for (let j = i + 1; j < lines.length && !/^## /.test(lines[j]); j++) {
      if (/^### /.test(lines[j])) inBreaking = /^### Breaking/.test(lines[j])
      else if (inBreaking && /^[-*] /.test(lines[j])) items.push(lines[j].slice(2))
      else if (inBreaking && items.length && lines[j].trim()) items[items.length - 1] += ` ${lines[j].trim()}`
    }
  }
  return items
}

/** An operation's path as the changelog writes it: no server prefix, no leading slash, any case. */
const changelogPath = (p: string) => p.replace(/^\/(prime\/webui\/)?/i, '').toLowerCase()

/**
 * Whether a changelog item names the change: its component schema's property
 * (`AgentViewResource.hostIdentifier`), or its operation (`GET agents/...`, the path alone or
 * the operationId, in backquotes) together with its field (`hostIdentifier`, `PageSize`, a
 * status code, a media type) when it is to one.
 */
export function namesChange(item: string, change: Change, operationIds: Map<string, string>): boolean {
  const tokens = [...item.matchAll(/`([^`]+)`/g)].map((m) => m[1].trim())
  if (change.schema && change.field && tokens.some((tk) => tk === `${change.schema}.${change.field}` || tk.startsWith(`${change.schema}.${change.field}.`))) return true
  const [method, opPath] = change.where.split(' ')
  const wanted = changelogPath(opPath ?? '')
  const id = operationIds.get(`${method} ${opPath}`)
  const operation = tokens.some((tk) => {
    const m = /^(GET|PUT|POST|DELETE|PATCH|HEAD|OPTIONS|TRACE)\s+(\S+)$/i.exec(tk)
    if (m) return m[1].toUpperCase() === method && changelogPath(m[2]) === wanted
    return changelogPath(tk) === wanted || (id !== undefined && tk === id)
  })
  if (!operation) return false
  if (change.field === undefined) return true
  const field = change.field
  // A status code is written as a number; a field in backquotes, alone or in a dotted path.
  return /^\d{3}$/.test(field) ? new RegExp(`\\b${field}\\b`).test(item) : tokens.some((tk) => tk === field || tk.split('.').includes(field))
}

export interface GateInput {
  released: Json
  working: Json
  changelog: string
}

export interface GateResult {
  ok: boolean
  problems: string[]
  changes: Change[]
}

/**
 * The gate's rules: a changed contract raises `info.version`; a breaking change raises the
 * major number; every version after the released one has a changelog section, and one
 * with breaking changes has a `### Breaking` heading in it.
 */
export function gate({ released, working, changelog }: GateInput): GateResult {
  const problems: string[] = []
  const from = parseVersion(released.info?.version)
  const to = parseVersion(working.info?.version)
  if (!from) problems.push(`the released contract's info.version (${released.info?.version}) is not MAJOR.MINOR.PATCH`)
  if (!to) problems.push(`info.version (${working.info?.version}) is not MAJOR.MINOR.PATCH`)
  const changes = diffContracts(released, working)
  if (!from || !to) return { ok: false, problems, changes }
  const breaking = changes.filter((c) => c.severity === 'breaking')
  const changed = JSON.stringify(released.paths) !== JSON.stringify(working.paths) || JSON.stringify(released.components) !== JSON.stringify(working.components)
  const order = compareVersions(to, from)
  if (order < 0) problems.push(`info.version ${working.info.version} is lower than the released ${released.info.version}`)
  if (changed && order === 0) problems.push(`the contract changed since ${released.info.version} but info.version was not raised`)
  if (breaking.length && to.major === from.major) {
    problems.push(`${breaking.length} breaking change(s) without a new major version (${released.info.version} -> ${working.info.version}):`)
    for (const c of breaking) problems.push(`  ${c.rule}: ${c.where}: ${c.message}`)
  }
  if (order > 0) {
    const section = changelogSection(changelog, working.info.version)
    if (section === null) problems.push(`the changelog has no section "## ${working.info.version}"`)
    else if (breaking.length && !/^### Breaking/m.test(section))
      problems.push(`the changelog's section for ${working.info.version} has no "### Breaking" heading for its ${breaking.length} breaking change(s)`)
    else if (breaking.length && to.major > from.major) {
      // A consumer reads the changelog to learn what to change: every break is named there.
      const items = breakingItems(changelog, from, to)
      const ids = new Map([...operationsOf(working).entries(), ...operationsOf(released).entries()].map(([key, o]) => [key, o.op.operationId as string]))
      const unnamed = breaking.filter((c) => !items.some((item) => namesChange(item, c, ids)))
      if (unnamed.length) {
        problems.push(
          `${unnamed.length} breaking change(s) not named under "### Breaking" in the changelog's section for ${working.info.version} (the operation and the field in backquotes, or \`Schema.property\`):`,
        )
        for (const c of unnamed) problems.push(`  ${c.rule}: ${c.where}${c.schema && c.field ? ` (${c.schema}.${c.field})` : ''}: ${c.message}`)
      }
    }
  }
  return { ok: problems.length === 0, problems, changes }
}

const here = path.dirname(fileURLToPath(import.meta.url))
/** The repository's root, from scripts/ or dist/scripts/. */
export const repoRoot = path.basename(path.dirname(here)) === 'dist' ? path.resolve(here, '../..') : path.resolve(here, '..')

/** The newest released contract kept in spec/released/. */
export function releasedContractFile(root = repoRoot): string {
  const dir = path.join(root, 'spec', 'released')
  const files = fs
    .readdirSync(dir)
    .map((f) => ({ f, v: parseVersion(f.replace(/\.yaml$/, '')) }))
    .filter((x): x is { f: string; v: SemVer } => x.v !== null)
    .sort((x, y) => compareVersions(y.v, x.v))
  if (!files.length) throw new Error(`no released contract in ${dir}`)
  return path.join(dir, files[0].f)
}

export function gateRepository(root = repoRoot): GateResult & { releasedFile: string } {
  const releasedFile = releasedContractFile(root)
  const read = (f: string) => YAML.parse(fs.readFileSync(f, 'utf8'), { maxAliasCount: -1 })
  return {
    releasedFile,
    ...gate({
      released: read(releasedFile),
      working: read(path.join(root, 'spec', 'openapi.yaml')),
      changelog: fs.readFileSync(path.join(root, 'spec', 'CHANGELOG.md'), 'utf8'),
    }),
  }
}

export interface Released {
  version: string
  file: string
  /** The changelog heading that was marked with the release's date, if one said "unreleased". */
  dated: string | null
}

/**
 * Releases the working contract: after the gate passes, stores it as
 * spec/released/<version>.yaml (the next comparison starts there) and dates its changelog
 * heading (`## 3.0.0 - unreleased` becomes `## 3.0.0 - <date>`). A version already
 * released is refused: a release is never rewritten.
 */
export function releaseContract(root = repoRoot, date = new Date().toISOString().slice(0, 10)): Released {
  const r = gateRepository(root)
  if (!r.ok) throw new Error(`not released: the gate fails:\n${r.problems.join('\n')}`)
  const source = path.join(root, 'spec', 'openapi.yaml')
  const version = String(YAML.parse(fs.readFileSync(source, 'utf8'), { maxAliasCount: -1 }).info.version)
  const file = path.join(root, 'spec', 'released', `${version}.yaml`)
  if (fs.existsSync(file)) throw new Error(`not released: ${path.relative(root, file)} exists (raise info.version for a new release)`)
  const changelogFile = path.join(root, 'spec', 'CHANGELOG.md')
  const changelog = fs.readFileSync(changelogFile, 'utf8')
  const heading = new RegExp(`^## \\[?${version.replace(/\./g, '\\.')}\\]? - unreleased$`, 'm')
  const dated = heading.exec(changelog)?.[0] ?? null
  fs.copyFileSync(source, file)
  if (dated) fs.writeFileSync(changelogFile, changelog.replace(heading, `## ${version} - ${date}`))
  return { version, file, dated }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1]) && process.argv.includes('--release')) {
  try {
    const r = releaseContract()
    console.log(`released ${r.version}: ${path.relative(repoRoot, r.file)}${r.dated ? `; the changelog's "${r.dated}" is dated` : ''}`)
  } catch (err) {
    console.error((err as Error).message)
    process.exit(1)
  }
} else if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const r = gateRepository()
  const released = path.relative(repoRoot, r.releasedFile)
  const breaking = r.changes.filter((c) => c.severity === 'breaking').length
  console.log(`compared spec/openapi.yaml with ${released}: ${r.changes.length} change(s), ${breaking} breaking`)
  if (process.argv.includes('--verbose')) for (const c of r.changes) console.log(`${c.severity.padEnd(10)} ${c.rule}: ${c.where}: ${c.message}`)
  for (const p of r.problems) console.error(p)
  process.exit(r.ok ? 0 : 1)
}
