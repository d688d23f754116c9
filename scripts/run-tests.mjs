#!/usr/bin/env node
// Runs the whole test suite with tap and closes with the line CI reads:
// "N passed, N failed" from tap's own totals, keeping tap's exit code.
import { spawn, spawnSync } from 'node:child_process'

// The build first (a no-op when fresh): the reader threads run its compiled module (lib/platform/decorators.ts).
const built = spawnSync(process.execPath, [new URL('./build-if-stale.mjs', import.meta.url).pathname], { stdio: 'inherit' })
if (built.status !== 0) process.exit(built.status ?? 1)

const args = ['tap', ...process.argv.slice(2)]
const child = spawn('npx', args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, FORCE_COLOR: '0' } })
let tail = ''
child.stdout.on('data', (chunk) => {
  process.stdout.write(chunk)
  tail = (tail + chunk.toString()).slice(-20000)
})
child.on('close', (code, signal) => {
  const m = /# \{ total: (\d+), pass: (\d+)(?:, fail: (\d+))?(?:, skip: (\d+))?(?:, todo: (\d+))?/.exec(tail)
  const exit = code ?? (signal ? 1 : 0)
  if (!m) {
    console.log(`0 passed, 1 failed`)
    process.exit(exit || 1)
  }
  const [, , pass, fail = '0', skip = '0'] = m
  console.log(`${pass} passed, ${fail} failed${skip !== '0' ? `, ${skip} skipped` : ''}`)
  process.exit(exit)
})
