// Pins the loop statistics (lib/log.ts LoopStats, PRIME_LOOP_STATS_SECONDS): the event loop's
// delay and the background loops' slices, logged on a timer and on SIGUSR2 (how a benchmark
// reads the delay during one case), each line covering the time since the one before.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { ADMIN_PASSWORD, testDatabaseEnv } from './helpers.js'

function appWith(t: Test, env: Record<string, string>) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-loop-stats-'))
  const lines: Record<string, any>[] = []
  const stream = new Writable({
    write(chunk, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line.trim()) lines.push(JSON.parse(line))
      done()
    },
  })
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
  const app = testDatabaseEnv(t).then((database) =>
    buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, ...database, ...env }), logger: { level: 'info', stream } }),
  )
  return { lines, app }
}

const statLines = (lines: Record<string, any>[]) => lines.filter((l) => l.msg === 'event loop')

t.test('SIGUSR2 writes the delay since the last line, and the loops that did something', async (t) => {
  const { lines, app: building } = appWith(t, { PRIME_LOOP_STATS_SECONDS: '3600' })
  const app = await building
  await app.ready()
  const t0 = Date.now()
  // A stall of 60 ms, as a long slice of background work would make.
  await new Promise((resolve) => setTimeout(resolve, 30))
  const until = performance.now() + 60
  while (performance.now() < until);
  await new Promise((resolve) => setTimeout(resolve, 30))
  process.kill(process.pid, 'SIGUSR2')
  await new Promise((resolve) => setTimeout(resolve, 20))
  const [line] = statLines(lines)
  t.ok(line, 'one line on the signal')
  t.equal(line.loop.reason, 'signal')
  t.ok(line.loop.fromMs <= t0 && line.loop.toMs >= t0 + 120, `it covers the time since the start (${line.loop.fromMs} - ${line.loop.toMs})`)
  t.ok(line.loop.samples > 0, `${line.loop.samples} samples`)
  t.ok(line.loop.delayMs.max >= 40, `the stall is in it (max ${line.loop.delayMs.max} ms)`)
  t.ok(line.loop.delayMs.p50 < line.loop.delayMs.max, `the usual delay is below it (p50 ${line.loop.delayMs.p50} ms)`)
  t.type(line.loop.loops, 'object')

  process.kill(process.pid, 'SIGUSR2')
  await new Promise((resolve) => setTimeout(resolve, 20))
  const second = statLines(lines)[1]
  t.ok(second && second.loop.fromMs === line.loop.toMs, 'the next line starts where the last one ended')
  t.ok(second.loop.delayMs.max < 40, `and does not hold the stall again (max ${second.loop.delayMs.max} ms)`)

  const listeners = process.listenerCount('SIGUSR2')
  await app.close()
  t.equal(process.listenerCount('SIGUSR2'), listeners - 1, 'closing removes the signal handler')
})

t.test('off by default: no lines, no signal handler', async (t) => {
  const { lines, app: building } = appWith(t, {})
  const app = await building
  const listeners = process.listenerCount('SIGUSR2')
  await app.ready()
  t.equal(process.listenerCount('SIGUSR2'), listeners)
  await app.close()
  t.same(statLines(lines), [])
})
