// backend: none — reads the source tree, no app or database
// The code's formatter and linter (Biome, biome.jsonc) over the tree: `npm run lint` passes,
// and the same configuration catches a badly formatted file and a lint error.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { projectRoot } from '../lib/paths.js'

const biome = path.join(projectRoot, 'node_modules', '.bin', 'biome')
const run = (cwd: string, ...args: string[]) => spawnSync(biome, ['check', '--colors=off', ...args], { cwd, encoding: 'utf8' })

t.test('the tree is formatted and passes the linter (npm run format fixes the formatting)', async (t) => {
  const r = run(projectRoot, '.')
  t.equal(r.status, 0, `${r.stdout}${r.stderr}`.slice(-4000))
})

t.test('the configuration catches what it should', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-lint-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  fs.copyFileSync(path.join(projectRoot, 'biome.jsonc'), path.join(dir, 'biome.jsonc'))
  fs.mkdirSync(path.join(dir, 'lib'))
  fs.writeFileSync(path.join(dir, 'lib', 'clean.ts'), 'export const x = (a: number) => a + 1\n')
  t.equal(run(dir, '.').status, 0, 'a clean file passes')
  fs.writeFileSync(path.join(dir, 'lib', 'ugly.ts'), 'export const y = ( a:number )=>{ return a+1; };\n')
  const format = run(dir, '.')
  t.not(format.status, 0, 'a badly formatted file fails')
  t.match(format.stdout + format.stderr, /ugly\.ts format/)
  fs.rmSync(path.join(dir, 'lib', 'ugly.ts'))
  fs.writeFileSync(path.join(dir, 'lib', 'bad.ts'), 'export function f(a: number) {\n  if (a == 1) debugger\n  return a\n}\n')
  const lint = run(dir, '.')
  t.not(lint.status, 0, 'a lint error fails')
  t.match(lint.stdout + lint.stderr, /noDebugger/)
})
