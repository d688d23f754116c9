#!/usr/bin/env node
// Compiles to dist/ only when a source is newer than the last build, so that `npm start`,
// `npm run simulate` and the tools start in a second after `npm ci` (which builds once,
// through `prepare`) and still never run stale code after an edit or a pull.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const stamp = path.join(root, 'dist', '.built')

/** The newest modification time among the files tsc compiles (tsconfig's `include`). */
function newestSource() {
  let newest = 0
  const visit = (p, filter) => {
    let st
    try {
      st = fs.statSync(p)
    } catch {
      return
    }
    if (st.isDirectory()) {
      for (const name of fs.readdirSync(p)) visit(path.join(p, name), filter)
    } else if (filter(p)) newest = Math.max(newest, st.mtimeMs)
  }
  const ts = (p) => p.endsWith('.ts')
  for (const dir of ['lib', 'db', 'handlers', 'generated', 'client', 'examples']) visit(path.join(root, dir), ts)
  for (const name of fs.readdirSync(path.join(root, 'scripts'))) if (ts(name)) visit(path.join(root, 'scripts', name), ts)
  for (const file of ['tsconfig.json', 'package-lock.json']) visit(path.join(root, file), () => true)
  return newest
}

// The read deadline extension (db/native/deadline.c), against the SQLite headers that
// better-sqlite3 ships. Without a C compiler the server still runs: a read past its budget is
// then answered at the budget, but its thread runs on to the statement's end (a warning says so).
function buildExtension() {
  const source = path.join(root, 'db', 'native', 'deadline.c')
  const target = path.join(root, 'dist', 'native', 'deadline.so')
  const mtime = (p) => {
    try {
      return fs.statSync(p).mtimeMs
    } catch {
      return 0
    }
  }
  if (mtime(target) >= mtime(source)) return
  fs.mkdirSync(path.dirname(target), { recursive: true })
  const headers = path.join(root, 'node_modules', 'better-sqlite3', 'deps', 'sqlite3')
  const res = spawnSync(process.env.CC || 'cc', ['-O2', '-shared', '-fPIC', '-I', headers, '-o', target, source, '-lpthread'], { stdio: 'inherit' })
  if (res.status !== 0) console.error(`warning: ${source} was not compiled (no C compiler?): reads past their budget cannot be stopped inside SQLite`)
}
buildExtension()

let built = 0
try {
  built = fs.statSync(stamp).mtimeMs
} catch {
  /* never built */
}
if (built === 0 || newestSource() > built) {
  const started = Date.now()
  // The same build as `npm run build`; a type error stops here, as it always did.
  const res = spawnSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', root], { stdio: 'inherit' })
  if (res.status !== 0) process.exit(res.status ?? 1)
  const { loadSpec } = await import(pathToFileURL(path.join(root, 'dist', 'lib', 'contract.js')).href)
  loadSpec()
  fs.writeFileSync(stamp, `${new Date().toISOString()}\n`)
  console.error(`compiled to dist/ in ${((Date.now() - started) / 1000).toFixed(1)} s`)
}

// The request validators as code (scripts/validators.ts), after every build and whenever the
// contract changed since. Without them the server still runs: it compiles each validator on
// first use, holding the event loop up to tens of ms per schema.
const mtimeOf = (p) => {
  try {
    return fs.statSync(p).mtimeMs
  } catch {
    return 0
  }
}
const validators = path.join(root, 'dist', 'validators.cjs')
if (mtimeOf(validators) < Math.max(mtimeOf(stamp), mtimeOf(path.join(root, 'spec', 'openapi.yaml')))) {
  const res = spawnSync(process.execPath, [path.join(root, 'dist', 'scripts', 'validators.js')], { stdio: 'inherit' })
  if (res.status !== 0) console.error('warning: the request validators were not precompiled: each compiles on its first request')
}
