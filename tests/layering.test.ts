// backend: none — reads the source tree, no app or database
// The layering rules of .dependency-cruiser.cjs, run on the tree (as `npm run lint:layers`)
// and on a small fixture tree that breaks each of them, so that a rule that stops catching
// anything fails here too.
import { spawnSync } from 'node:child_process'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../lib/paths.js'

const depcruise = path.join(projectRoot, 'node_modules', '.bin', 'depcruise')
const config = path.join(projectRoot, '.dependency-cruiser.cjs')

interface Violation {
  rule: { name: string; severity: string }
  from: string
  to: string
  cycle?: { name: string }[]
}

function cruise(cwd: string, dirs: string[], ignoreKnown: boolean): { violations: Violation[]; known: number; output: string } {
  const args = [...dirs, '--config', config, '--output-type', 'json', ...(ignoreKnown ? ['--ignore-known', path.join(projectRoot, '.dependency-cruiser-known-violations.json')] : [])]
  const r = spawnSync(depcruise, args, { cwd, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
  if (!r.stdout) throw new Error(`depcruise gave nothing: ${r.stderr}`)
  const out = JSON.parse(r.stdout) as { summary: { violations: Violation[]; ignore?: number } }
  // Known violations come back with the severity "ignore".
  const known = out.summary.violations.filter((v) => v.rule.severity === 'ignore')
  return { violations: out.summary.violations.filter((v) => v.rule.severity !== 'ignore'), known: known.length, output: r.stderr }
}

const describe = (v: Violation) => `${v.rule.name}: ${v.from} -> ${v.to}${v.cycle ? ` (cycle: ${v.cycle.map((c) => c.name ?? c).join(' -> ')})` : ''}`

t.test('the tree keeps the layering rules', async (t) => {
  const { violations, known } = cruise(projectRoot, ['lib', 'db', 'handlers', 'generated', 'client', 'examples', 'scripts'], true)
  // Known violations (being removed) are listed in .dependency-cruiser-known-violations.json.
  t.comment(`${known} known violations left`)
  t.same(violations.map(describe), [], 'no violation beyond the known ones (npm run lint:layers)')
})

t.test('each rule catches its violation', async (t) => {
  const { violations } = cruise(path.join(projectRoot, 'tests', 'fixtures', 'layering'), ['db', 'lib', 'handlers'], false)
  const found = new Set(violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`))
  t.ok(found.has('db-returns-rows: db/store.ts -> lib/view.ts'), 'db importing lib')
  t.notOk(
    [...found].some((f) => f.startsWith('db-returns-rows: db/things.ts ->')),
    "a repository naming a feature's port and using the cache registry is allowed",
  )
  t.ok(found.has('features-import-no-storage: lib/things/rows.ts -> db/store.ts'), 'a feature importing the storage')
  t.ok(
    [...found].some((f) => /^no-circular: lib\/(view|format)\.ts -> lib\/(view|format)\.ts$/.test(f)),
    'an import circle',
  )
  t.ok(found.has('only-app-wiring-imports-handlers: lib/service.ts -> handlers/things.ts'), 'lib importing a handler')
  t.ok(found.has('handlers-go-through-services: handlers/things.ts -> db/store.ts'), 'a handler importing db')
  t.ok(found.has('event-engine-one-entry: db/alarms.ts -> db/event-engine/counts.ts'), 'a repository importing a part of the event engine')
  t.notOk(
    [...found].some((f) => f.endsWith('-> db/event-engine/index.ts') || f.startsWith('event-engine-one-entry: db/event-engine/')),
    "the engine's entry, and the engine's parts among themselves, are allowed",
  )
  const fastify = [...found].filter((f) => f.startsWith('services-take-plain-inputs:'))
  t.equal(fastify.length, 1, 'one: the wiring may import fastify')
  t.match(fastify, [/^services-take-plain-inputs: lib\/things\/service\.ts -> .*node_modules\/fastify\//], "a feature's service importing fastify, and not its wiring")
  t.ok(found.has('platform-imports-no-feature: lib/config.ts -> lib/things/settings.ts'), "the platform importing a feature's module")
  t.ok(found.has('platform-names-feature-ports-as-types-only: lib/platform/loops.ts -> lib/things/ports.ts'), "the platform importing a value from a feature's ports")
  t.notOk(
    [...found].some((f) => f.includes('lib/platform/storage.ts ->')),
    "the platform naming a feature's port as a type only is allowed",
  )
  t.ok(found.has('handlers-import-no-wiring: handlers/wired.ts -> lib/things/index.ts'), "a handler importing a feature's wiring")
  t.ok(found.has('features-import-no-other-service: lib/others/service.ts -> lib/things/service.ts'), "a feature importing another feature's service")
  t.notOk(
    [...found].some((f) => f.endsWith('-> lib/things/views.ts') || f.startsWith('features-import-no-other-service: lib/things/')),
    "another feature's views, and a feature's own service, are allowed",
  )
})
