// backend: none — reads the source tree, no app or database
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t, { type Test } from 'tap'
import YAML from 'yaml'
import { changelogSection, diffContracts, gate, gateRepository, releaseContract, repoRoot } from '../scripts/contract-gate.js'

type Json = Record<string, any>

/** A small contract with one of everything the rules look at. */
function base(): Json {
  return {
    openapi: '3.0.3',
    info: { title: 'x', version: '1.2.0' },
    paths: {
      '/things': {
        get: {
          operationId: 'listThings',
          'x-min-profile': 'User',
          parameters: [
            { name: 'PageSize', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 10000 } },
            { name: 'Status', in: 'query', schema: { type: 'string', enum: ['Connected', 'Disconnected'] } },
          ],
          responses: {
            '200': { description: 'ok', content: { 'application/json': { schema: { $ref: '#/components/schemas/ThingList' } }, 'text/plain': { schema: { $ref: '#/components/schemas/ThingList' } } } },
            '401': { description: 'no' },
            '501': { description: 'not built' },
          },
        },
        post: {
          operationId: 'addThing',
          'x-min-profile': 'Manager',
          requestBody: {
            required: true,
            content: { 'application/json': { schema: { $ref: '#/components/schemas/NewThing' } } },
          },
          responses: { '200': { description: 'ok' }, '400': { description: 'bad' } },
        },
      },
    },
    components: {
      schemas: {
        ThingList: { type: 'object', required: ['data'], properties: { data: { type: 'array', items: { $ref: '#/components/schemas/Thing' } } } },
        Thing: {
          type: 'object',
          required: ['id', 'name'],
          properties: { id: { type: 'integer' }, name: { type: 'string' }, kind: { type: 'string', enum: ['a', 'b'] }, note: { type: 'string', nullable: true } },
        },
        NewThing: {
          type: 'object',
          additionalProperties: false,
          required: ['name'],
          properties: { name: { type: 'string', minLength: 1, maxLength: 100 }, tags: { type: 'array', maxItems: 10, items: { type: 'string' } }, size: { type: 'integer', nullable: true } },
        },
      },
    },
  }
}

const changeLog = (...versions: string[]) => versions.map((v) => `## ${v}\n\n### Added\n- things\n`).join('\n')

function rulesOf(after: Json, before = base()) {
  return diffContracts(before, after)
}

function breakingRule(t: Test, name: string, mutate: (s: Json) => void, rule: string) {
  t.test(name, async (t) => {
    const after = base()
    mutate(after)
    const changes = rulesOf(after)
    const hit = changes.find((c) => c.rule === rule)
    t.ok(hit, `${rule} found in ${JSON.stringify(changes)}`)
    t.equal(hit?.severity, 'breaking')
    // the gate refuses it in a minor release, and takes it in a major one that says so
    after.info.version = '1.3.0'
    t.notOk(gate({ released: base(), working: after, changelog: changeLog('1.3.0') }).ok, 'refused without a new major version')
    after.info.version = '2.0.0'
    t.notOk(gate({ released: base(), working: after, changelog: changeLog('2.0.0') }).ok, 'refused when the changelog does not say so')
    const vague = gate({ released: base(), working: after, changelog: `## 2.0.0\n\n### Breaking\n- ${rule}\n` })
    t.match(vague.problems.join('\n'), /not named under "### Breaking"/, 'refused when its Breaking section does not name the change')
    // Each change named as a consumer would look for it: the operation, and the field it is to.
    const items = changes.filter((c) => c.severity === 'breaking').map((c) => `- \`${c.where.split(' ').slice(0, 2).join(' ')}\`${c.field === undefined ? '' : `: \`${c.field}\``} changed.`)
    const said = gate({ released: base(), working: after, changelog: `## 2.0.0\n\n### Breaking\n${items.join('\n')}\n` })
    t.ok(said.ok, `taken in 2.0.0 with a Breaking section naming it: ${said.problems.join('; ')}`)
  })
}

t.test('breaking changes, one pair of contracts per rule', async (t) => {
  breakingRule(t, 'a removed operation', (s) => delete s.paths['/things'].post, 'operation-removed')
  breakingRule(
    t,
    'a removed path',
    (s) => {
      s.paths['/items'] = s.paths['/things']
      delete s.paths['/things']
    },
    'operation-removed',
  )
  breakingRule(t, 'a renamed operation', (s) => (s.paths['/things'].get.operationId = 'getThings'), 'operation-renamed')
  breakingRule(t, 'a removed parameter', (s) => s.paths['/things'].get.parameters.pop(), 'parameter-removed')
  breakingRule(t, 'a renamed parameter', (s) => (s.paths['/things'].get.parameters[1].name = 'State'), 'parameter-removed')
  breakingRule(t, 'a new required parameter', (s) => s.paths['/things'].get.parameters.push({ name: 'Site', in: 'query', required: true, schema: { type: 'string' } }), 'required-parameter-added')
  breakingRule(t, 'a parameter made required', (s) => (s.paths['/things'].get.parameters[0].required = true), 'parameter-now-required')
  breakingRule(t, 'a removed response property', (s) => delete s.components.schemas.Thing.properties.kind, 'property-removed')
  breakingRule(t, 'a response property no longer always answered', (s) => (s.components.schemas.Thing.required = ['id']), 'property-now-optional')
  breakingRule(t, 'a response property that may now be null', (s) => (s.components.schemas.Thing.properties.name.nullable = true), 'null-answered')
  breakingRule(t, 'a removed request property', (s) => delete s.components.schemas.NewThing.properties.tags, 'property-removed')
  breakingRule(
    t,
    'a new required request property',
    (s) => {
      s.components.schemas.NewThing.properties.owner = { type: 'string' }
      s.components.schemas.NewThing.required.push('owner')
    },
    'required-property-added',
  )
  breakingRule(t, 'a request property made required', (s) => s.components.schemas.NewThing.required.push('tags'), 'property-now-required')
  breakingRule(t, 'a removed enum value (parameter)', (s) => s.paths['/things'].get.parameters[1].schema.enum.pop(), 'enum-value-removed')
  breakingRule(t, 'a removed enum value (response)', (s) => s.components.schemas.Thing.properties.kind.enum.pop(), 'enum-value-removed')
  breakingRule(t, 'a narrowed type', (s) => (s.components.schemas.Thing.properties.id.type = 'string'), 'type-changed')
  breakingRule(t, 'a narrowed request type', (s) => (s.components.schemas.NewThing.properties.name.type = 'integer'), 'type-changed')
  breakingRule(t, 'a lower maximum', (s) => (s.paths['/things'].get.parameters[0].schema.maximum = 1000), 'limit-narrowed')
  breakingRule(t, 'a shorter maxLength', (s) => (s.components.schemas.NewThing.properties.name.maxLength = 50), 'limit-narrowed')
  breakingRule(t, 'a longer minLength', (s) => (s.components.schemas.NewThing.properties.name.minLength = 3), 'limit-narrowed')
  breakingRule(t, 'fewer items', (s) => (s.components.schemas.NewThing.properties.tags.maxItems = 5), 'limit-narrowed')
  breakingRule(t, 'a new pattern', (s) => (s.components.schemas.NewThing.properties.name.pattern = '^[a-z]+$'), 'pattern-changed')
  breakingRule(t, 'null refused in a request', (s) => delete s.components.schemas.NewThing.properties.size.nullable, 'null-refused')
  breakingRule(
    t,
    'a changed success status',
    (s) => {
      const r = s.paths['/things'].post.responses
      r['201'] = r['200']
      delete r['200']
    },
    'status-removed',
  )
  breakingRule(t, 'a new success status', (s) => (s.paths['/things'].post.responses['202'] = { description: 'later' }), 'status-added')
  breakingRule(t, 'a removed error status', (s) => delete s.paths['/things'].post.responses['400'], 'status-removed')
  breakingRule(t, 'a removed response media type', (s) => delete s.paths['/things'].get.responses['200'].content['text/plain'], 'response-media-type-removed')
  breakingRule(
    t,
    'a removed request media type',
    (s) => {
      const c = s.paths['/things'].post.requestBody.content
      c['text/json'] = c['application/json']
      delete c['application/json']
    },
    'request-media-type-removed',
  )
  breakingRule(t, 'a higher minimum profile', (s) => (s.paths['/things'].get['x-min-profile'] = 'Manager'), 'profile-raised')
  breakingRule(
    t,
    'a body that became required',
    (s) => {
      s.paths['/things'].get.requestBody = { required: true, content: { 'application/json': { schema: { type: 'object' } } } }
    },
    'request-body-now-required',
  )
})

t.test('additive changes pass in a minor version', async (t) => {
  const after = base()
  after.info.version = '1.3.0'
  after.paths['/things'].delete = { operationId: 'deleteThing', 'x-min-profile': 'Manager', responses: { '200': { description: 'ok' } } }
  after.paths['/things'].get.parameters.push({ name: 'Site', in: 'query', schema: { type: 'string' } })
  after.paths['/things'].get.parameters[0].schema.maximum = 1000000
  after.paths['/things'].get.parameters[1].schema.enum.push('Pending')
  after.components.schemas.Thing.properties.site = { type: 'string' }
  after.components.schemas.NewThing.properties.site = { type: 'string' }
  after.components.schemas.NewThing.properties.name.maxLength = 200
  after.paths['/things'].post.responses['429'] = { description: 'slow down' }
  delete after.paths['/things'].get.responses['501']
  after.paths['/things'].get.deprecated = true
  const changes = diffContracts(base(), after)
  t.same(
    changes.filter((c) => c.severity === 'breaking'),
    [],
    'nothing breaking',
  )
  t.ok(changes.find((c) => c.rule === 'operation-added'))
  t.ok(changes.find((c) => c.rule === 'operation-implemented'))
  t.ok(changes.find((c) => c.rule === 'operation-deprecated'))
  const r = gate({ released: base(), working: after, changelog: changeLog('1.3.0', '1.2.0') })
  t.ok(r.ok, r.problems.join('; '))
})

t.test('the version and the changelog', async (t) => {
  const after = base()
  after.components.schemas.Thing.properties.site = { type: 'string' }
  t.match(gate({ released: base(), working: after, changelog: '' }).problems, [/changed since 1\.2\.0 but info\.version was not raised/])
  after.info.version = '1.2.1'
  t.match(gate({ released: base(), working: after, changelog: changeLog('1.2.0') }).problems, [/no section "## 1\.2\.1"/])
  t.ok(gate({ released: base(), working: after, changelog: changeLog('1.2.1') }).ok)
  after.info.version = '1.1.9'
  t.match(gate({ released: base(), working: after, changelog: changeLog('1.1.9') }).problems, [/lower than the released/])
  after.info.version = 'v2'
  t.match(gate({ released: base(), working: after, changelog: '' }).problems, [/not MAJOR\.MINOR\.PATCH/])
  t.ok(gate({ released: base(), working: base(), changelog: '' }).ok, 'an unchanged contract needs nothing')
  t.equal(changelogSection('# x\n\n## 2.0.0 - 2026-11-26\nA\n## 1.0.0\nB\n', '2.0.0'), 'A')
  t.equal(changelogSection('## [1.0.0]\nB\n', '1.0.0'), 'B')
  t.equal(changelogSection('## 1.0.01\nB\n', '1.0.0'), null)
})

t.test('recursive schemas are compared once', async (t) => {
  const before = base()
  before.components.schemas.Thing.properties.children = { type: 'array', items: { $ref: '#/components/schemas/Thing' } }
  const after = structuredClone(before)
  delete after.components.schemas.Thing.properties.kind
  const changes = diffContracts(before, after)
  t.equal(changes.filter((c) => c.rule === 'property-removed').length, 1)
})

t.test("the repository's contract passes the gate against its last release", async (t) => {
  const r = gateRepository()
  t.ok(r.ok, r.problems.join('\n'))
})

/** A copy of the repository's contract, its releases and its changelog, to change. */
function repoCopy(t: Test): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-gate-'))
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }))
  fs.cpSync(path.join(repoRoot, 'spec'), path.join(root, 'spec'), { recursive: true })
  return root
}
const editFile = (file: string, edit: (text: string) => string) => fs.writeFileSync(file, edit(fs.readFileSync(file, 'utf8')))
/** Removes AgentViewResource.hostIdentifier from the working contract (and from its required list). */
function removeHostIdentifier(root: string) {
  const file = path.join(root, 'spec', 'openapi.yaml')
  const spec = YAML.parse(fs.readFileSync(file, 'utf8'), { maxAliasCount: -1 })
  const schema = spec.components.schemas.AgentViewResource
  if (!schema.properties.hostIdentifier) throw new Error('AgentViewResource.hostIdentifier is not in the contract')
  delete schema.properties.hostIdentifier
  if (Array.isArray(schema.required)) schema.required = schema.required.filter((n: string) => n !== 'hostIdentifier')
  fs.writeFileSync(file, YAML.stringify(spec, { aliasDuplicateObjects: false }))
}
const changelogOf = (root: string) => path.join(root, 'spec', 'CHANGELOG.md')

t.test('the repository: every break of the new major version is named in its changelog section', async (t) => {
  t.test('no break beyond those listed: passes', async (t) => {
    const r = gateRepository(repoCopy(t))
    t.ok(r.ok, r.problems.join('\n'))
  })
  t.test('an unlisted break (AgentViewResource.hostIdentifier removed): fails, naming it', async (t) => {
    const root = repoCopy(t)
    removeHostIdentifier(root)
    const r = gateRepository(root)
    t.notOk(r.ok)
    t.match(
      r.problems.join('\n'),
      /1 breaking change\(s\) not named under "### Breaking"[^\n]*\n {2}property-removed: GET \S+ response 200 application\/json\S*\.hostIdentifier \(AgentViewResource\.hostIdentifier\)/,
    )
  })
  t.test('the same break listed by its schema and property: passes', async (t) => {
    const root = repoCopy(t)
    removeHostIdentifier(root)
    editFile(changelogOf(root), (s) => s.replace(/^### Breaking\n/m, '### Breaking\n- `AgentViewResource.hostIdentifier` is no longer answered: read `computerName`.\n'))
    const r = gateRepository(root)
    t.ok(r.ok, r.problems.join('\n'))
  })
  t.test('listed by its operation and field: passes; by the field alone, or under another version: fails', async (t) => {
    const root = repoCopy(t)
    removeHostIdentifier(root)
    const broken = gateRepository(root).changes.find((c) => c.field === 'hostIdentifier' && c.severity === 'breaking')!
    const [method, route] = broken.where.split(' ')
    const short = route.replace(/^\/prime\/webui\//, '')
    const original = fs.readFileSync(changelogOf(root), 'utf8')
    fs.writeFileSync(changelogOf(root), original.replace(/^### Breaking\n/m, `### Breaking\n- \`${method} ${short}\`: \`hostIdentifier\` is gone.\n`))
    t.ok(gateRepository(root).ok, 'operation and field')
    fs.writeFileSync(changelogOf(root), original.replace(/^### Breaking\n/m, '### Breaking\n- `hostIdentifier` is gone.\n'))
    t.notOk(gateRepository(root).ok, 'the field without its operation or schema')
    fs.writeFileSync(
      changelogOf(root),
      original.replace(/^## 2\.0\.0 - .*\n/m, (h) => `${h}\n### Breaking\n- \`AgentViewResource.hostIdentifier\` is gone.\n`),
    )
    t.notOk(gateRepository(root).ok, "in an earlier release's section")
  })
})

t.test('contract:release stores the release, so that the next comparison starts there', async (t) => {
  const root = repoCopy(t)
  const version = YAML.parse(fs.readFileSync(path.join(root, 'spec', 'openapi.yaml'), 'utf8'), { maxAliasCount: -1 }).info.version
  const r = releaseContract(root, '2027-01-15')
  t.equal(r.version, version)
  t.equal(fs.readFileSync(r.file, 'utf8'), fs.readFileSync(path.join(root, 'spec', 'openapi.yaml'), 'utf8'), 'the working contract, as it is')
  t.match(fs.readFileSync(changelogOf(root), 'utf8'), new RegExp(`^## ${version.replace(/\./g, '\\.')} - 2027-01-15$`, 'm'), 'its changelog heading dated')
  const next = gateRepository(root)
  t.equal(path.basename(next.releasedFile), `${version}.yaml`, 'the gate now compares with it')
  t.ok(next.ok)
  t.same(next.changes, [], 'nothing changed since')
  t.throws(() => releaseContract(root), /exists \(raise info\.version for a new release\)/, 'a release is never rewritten')

  const failing = repoCopy(t)
  removeHostIdentifier(failing)
  t.throws(() => releaseContract(failing), /not released: the gate fails/)
  t.same(fs.readdirSync(path.join(failing, 'spec', 'released')).sort(), ['1.0.0.yaml', '2.0.0.yaml'], 'nothing stored when the gate fails')
})
