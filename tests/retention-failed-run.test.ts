// backend: none — the retention loop's timer with a store that fails; no app built, no database opened
// A retention run that fails (the database unreachable, as while PostgreSQL restarts) is
// logged by its loop and tried again at the next interval: it never reaches the process as
// an unhandled rejection, which would stop the server (lib/server.ts).
import t from 'tap'
import type { RetentionDeps } from '../lib/retention/job.js'
import { retentionJob } from '../lib/retention/job.js'

t.test('a failed run of the retention loop is logged, not left unhandled', async (t) => {
  const unhandled: unknown[] = []
  const onUnhandled = (err: unknown) => unhandled.push(err)
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => process.off('unhandledRejection', onUnhandled))

  const logged: string[] = []
  const gone = async () => {
    throw new Error('the database connection was lost')
  }
  const deps = {
    retention: { firstPending: gone, due: gone },
    index: { indexed: gone },
    settings: { eventsDays: 1, auditDays: 0, deliveryDays: 30, notificationsDays: 0, commandsDays: 0, agentlessRunsDays: 0, archiveDays: 0, intervalSeconds: 3600 },
    log: { info: () => {}, error: (_: object, message: string) => logged.push(message) },
  } as unknown as RetentionDeps
  const job = retentionJob(deps, 0)
  job.loop.start()
  t.teardown(() => job.loop.stop())
  const deadline = Date.now() + 10_000
  while (logged.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
  t.same(logged, ['retention run failed'], 'the failure is logged once')
  // Rejections are reported after the microtasks of their turn: give them a few turns.
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r))
  t.same(unhandled, [], 'no unhandled rejection')
})
