#!/usr/bin/env node
// Runs the whole test suite with tap and closes with the line CI reads:
// "N passed, N failed" from tap's own totals, keeping tap's exit code.
//
// With PRIME_TEST_DATABASE_URL set (a PostgreSQL server; `.ci/run` sets it), the suite runs
// on SQLite, then EVERY test file runs again with the app on PostgreSQL
// (PRIME_TEST_BACKEND=postgres: tests/helpers.ts gives each app a database of its own from a
// template, tests/pg.ts), except the files that say they are about one backend. The line sums
// both runs. A full run then runs the events, agents and assets files once more on SQLite
// with every cache off (PRIME_CACHES=off, `cachesOffFiles`): a cache must only ever be a cache.
//
// A file says so in its leading comment lines, with a reason (tests/backends.md):
//   // backend: sqlite-only — <what it tests that PostgreSQL does not have>
//   // backend: postgres-pending — <what PostgreSQL still lacks for it>
//   // backend: none — <why no storage is involved: it builds no app and opens no database>
// tests/pg-*.test.ts are about PostgreSQL itself: they open their own databases and run in
// the first pass.
//
//   npm test                                   both passes
//   npm run coverage                           the same, with a coverage table of the first pass
//                                              (--coverage: a report, not a gate; V8's block
//                                              coverage makes that pass about 1.6 times as long)
//   npm test -- tests/x.test.ts                the named files, on SQLite only
//   PRIME_TEST_BACKEND=postgres npm test -- tests/x.test.ts   the named files on PostgreSQL
//   node scripts/run-tests.mjs --backends      which files run where, and why
// PRIME_TEST_PG_JOBS sets how many files the PostgreSQL pass runs at once (default: tap's jobs).
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const KINDS = new Set(['sqlite-only', 'postgres-pending', 'none'])

/**
 * The backend marker of a test file: its kind and reason, or null. Read from the leading
 * comment lines only, so that a marker quoted in a test's body is never taken for one.
 */
export function backendMarker(text, file = '') {
  for (const line of text.split('\n')) {
    const l = line.trim()
    if (l === '') continue
    if (!l.startsWith('//')) break
    const m = /^\/\/\s*backend:\s*(\S+)\s*(?:—|--|-)\s*(.*)$/.exec(l)
    if (!m) {
      if (/^\/\/\s*backend:/.test(l)) throw new Error(`${file}: a backend marker needs a kind and a reason: "${l}"`)
      continue
    }
    if (!KINDS.has(m[1])) throw new Error(`${file}: unknown backend "${m[1]}" (one of ${[...KINDS].join(', ')})`)
    if (m[2].trim().length < 10) throw new Error(`${file}: the backend marker "${m[1]}" needs its reason`)
    return { kind: m[1], reason: m[2].trim() }
  }
  return null
}

/** Every test file with where it runs: `postgres` true when the PostgreSQL pass runs it. */
export function suiteFiles() {
  const dir = path.join(root, 'tests')
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .sort()
    .map((f) => {
      const file = `tests/${f}`
      if (f.startsWith('pg-')) return { file, postgres: false, kind: 'postgres-only', reason: 'about PostgreSQL itself: opens its own databases, in the first pass' }
      const marker = backendMarker(fs.readFileSync(path.join(dir, f), 'utf8'), file)
      return { file, postgres: marker === null, kind: marker?.kind ?? 'both', reason: marker?.reason ?? '' }
    })
}

/**
 * The files the caches-off pass runs: the events', agents' and assets' files that build an
 * app with tests/helpers.ts `build` (it passes PRIME_CACHES to the app), on SQLite. Those
 * that make a service or repository alone test it with its caches, as made there.
 */
export function cachesOffFiles(files = suiteFiles()) {
  return files
    .filter((f) => /^tests\/(events|agents|assets?-)[^/]*\.test\.ts$/.test(f.file) && f.kind !== 'none' && f.kind !== 'postgres-only')
    .filter((f) => /\bbuild\(/.test(fs.readFileSync(path.join(root, f.file), 'utf8')))
    .map((f) => f.file)
}

/** Runs tap with `args`; answers its exit code and totals. */
function tap(args, env) {
  return new Promise((resolve) => {
    const child = spawn('npx', ['tap', ...args], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, FORCE_COLOR: '0', ...env } })
    let tail = ''
    let partial = ''
    const failures = []
    child.stdout.on('data', (chunk) => {
      process.stdout.write(chunk)
      tail = (tail + chunk.toString()).slice(-20000)
      // The failures are named again at the end: in a long run's log they are far above it.
      const lines = (partial + chunk.toString()).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) if (/^\s*not ok \d+ - /.test(line) && failures.length < 200) failures.push(line.replace(/ # time=.*$/, ''))
    })
    child.on('close', (code, signal) => {
      const m = /# \{ total: (\d+), pass: (\d+)(?:, fail: (\d+))?(?:, skip: (\d+))?(?:, todo: (\d+))?/.exec(tail)
      const exit = code ?? (signal ? 1 : 0)
      if (!m) resolve({ exit: exit || 1, pass: 0, fail: 1, skip: 0, failures })
      else resolve({ exit, pass: Number(m[2]), fail: Number(m[3] ?? 0), skip: Number(m[4] ?? 0), failures })
    })
  })
}

async function main() {
  const coverage = process.argv.includes('--coverage')
  const argv = process.argv.slice(2).filter((a) => a !== '--coverage')
  // Every marker is read first: a malformed one stops the run before anything runs.
  const files = suiteFiles()
  if (argv.includes('--backends')) {
    for (const f of files) console.log(`${f.kind.padEnd(17)} ${f.file}${f.reason ? `  ${f.reason}` : ''}`)
    const count = (k) => files.filter((f) => f.kind === k).length
    console.log(
      `\n${files.filter((f) => f.postgres).length} of ${files.length} files run on both backends; sqlite-only ${count('sqlite-only')}, postgres-pending ${count('postgres-pending')}, none ${count('none')}, postgres-only ${count('postgres-only')}`,
    )
    return 0
  }

  // The build first (a no-op when fresh): the reader threads run its compiled module (lib/platform/decorators.ts).
  const built = spawnSync(process.execPath, [path.join(root, 'scripts/build-if-stale.mjs')], { stdio: 'inherit' })
  if (built.status !== 0) return built.status ?? 1

  // Coverage is off in .taprc; asked for, it is the whole suite's report (for named files only noise).
  const named = argv.some((a) => !a.startsWith('-'))
  const runs = [{ label: 'SQLite', ...(await tap(coverage && !named ? [...argv, '--no-disable-coverage'] : argv, {})) }]
  if (process.env.PRIME_TEST_DATABASE_URL && process.env.PRIME_TEST_BACKEND !== 'postgres' && !argv.some((a) => !a.startsWith('-'))) {
    const listed = files.filter((f) => f.postgres).map((f) => f.file)
    const left = files.length - listed.length
    console.log(`\n# The app on PostgreSQL: ${listed.length} files (${left} about one backend or none: node scripts/run-tests.mjs --backends)\n`)
    const jobs = process.env.PRIME_TEST_PG_JOBS ? [`--jobs=${Number(process.env.PRIME_TEST_PG_JOBS)}`] : []
    runs.push({ label: 'PostgreSQL', ...(await tap([...argv, ...jobs, '--disable-coverage', ...listed], { PRIME_TEST_BACKEND: 'postgres' })) })
  }
  if (!named && process.env.PRIME_TEST_BACKEND !== 'postgres') {
    const off = cachesOffFiles(files)
    console.log(`\n# Every cache off (PRIME_CACHES=off), on SQLite: ${off.length} files\n`)
    runs.push({ label: 'SQLite, caches off', ...(await tap([...argv, '--disable-coverage', ...off], { PRIME_CACHES: 'off' })) })
  }
  const sum = (k) => runs.reduce((n, r) => n + r[k], 0)
  const skip = sum('skip')
  runs.forEach((r) => {
    if (r.failures.length) console.log(`\n# Failed${runs.length > 1 ? ` (${r.label})` : ''}, innermost first:\n${r.failures.join('\n')}`)
  })
  console.log(`${sum('pass')} passed, ${sum('fail')} failed${skip ? `, ${skip} skipped` : ''}`)
  return runs.find((r) => r.exit !== 0)?.exit ?? 0
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) process.exitCode = await main()
