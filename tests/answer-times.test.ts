// backend: none — pure functions: no app is built and no database opened
// Pins the one time format of every answer (lib/time.ts iso): exactly what toISOString
// writes, for any time, in any order of calls.
import t from 'tap'
import { iso } from '../lib/time.js'

t.test('iso writes what toISOString writes', async (t) => {
  const edges = [0, 1, 9, 10, 99, 100, 999, 1000, 59_999, 60_000, 86_399_999, 951_782_400_000, Date.now(), 253402300799999, 253402300800000, 8.64e15, -1, -62198755200000, 1.5, 1e12 + 0.25]
  for (const ms of edges) t.equal(iso(ms), new Date(ms).toISOString(), String(ms))
  // Random times, and runs within one minute (the kept prefix), in both directions.
  let wrong = 0
  for (let i = 0; i < 200_000; i++) {
    const ms = i % 2 ? Math.floor(Math.random() * 253402300800000) : 1_795_000_000_000 + ((i * 7919) % 180_000)
    if (iso(ms) !== new Date(ms).toISOString()) wrong++
  }
  t.equal(wrong, 0, 'no difference over 200,000 times')
  t.throws(() => iso(NaN), RangeError, 'an invalid time throws as toISOString does')
})
