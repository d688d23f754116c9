#!/usr/bin/env node
// Runs the whole test suite with tap and closes with the line CI reads:
// "N passed, N failed" from tap's own totals, keeping tap's exit code.
//
// With PRIME_TEST_DATABASE_URL set (a PostgreSQL server; `.ci/run` sets it), the suite runs
// on SQLite, then the files listed in tests/postgres-suite.txt run again with the app on
// PostgreSQL (PRIME_TEST_BACKEND=postgres; tests/helpers.ts); the line sums both runs.
// Files named on the command line run on SQLite only.
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'

// The build first (a no-op when fresh): the reader threads run its compiled module (lib/platform/decorators.ts).
const built = spawnSync(process.execPath, [new URL('./build-if-stale.mjs', import.meta.url).pathname], { stdio: 'inherit' })
if (built.status !== 0) process.exit(built.status ?? 1)

/** Runs tap with `args`; answers its exit code and totals. */
function tap(args, env) {
  return new Promise((resolve) => {
    const child = spawn('npx', ['tap', ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, FORCE_COLOR: '0', ...env } })
    let tail = ''
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk)
      tail = (tail + chunk.toString()).slice(-20000)
    })
    child.on('close', (code, signal) => {
      const m = /# \{ total: (\d+), pass: (\d+)(?:, fail: (\d+))?(?:, skip: (\d+))?(?:, todo: (\d+))?/.exec(tail)
      const exit = code ?? (signal ? 1 : 0)
      if (!m) resolve({ exit: exit || 1, pass: 0, fail: 1, skip: 0 })
      else resolve({ exit, pass: Number(m[2]), fail: Number(m[3] ?? 0), skip: Number(m[4] ?? 0) })
    })
  })
}

const given = process.argv.slice(2)
const runs = [await tap(given, {})]
if (process.env.PRIME_TEST_DATABASE_URL && !given.some((a) => !a.startsWith('-'))) {
  const listed = fs
    .readFileSync(new URL('../tests/postgres-suite.txt', import.meta.url), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
  console.log(`\n# The app on PostgreSQL: ${listed.length} files of tests/postgres-suite.txt\n`)
  runs.push(await tap([...given, '--disable-coverage', ...listed], { PRIME_TEST_BACKEND: 'postgres' }))
}
const sum = (k) => runs.reduce((n, r) => n + r[k], 0)
const skip = sum('skip')
console.log(`${sum('pass')} passed, ${sum('fail')} failed${skip ? `, ${skip} skipped` : ''}`)
process.exit(runs.find((r) => r.exit !== 0)?.exit ?? 0)
