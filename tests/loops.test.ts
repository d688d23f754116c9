// Pins the registry of background loops (lib/platform/loops.ts): every loop of the server
// is registered there with whether one process at a time may run it, all run once the app
// is ready, and closing stops them all, in reverse order, awaiting each.
import t from 'tap'
import { build, testBackend } from './helpers.js'

const SQLITE = [
  { name: 'wal-checkpoint', singleton: false },
  { name: 'agent-sweeper', singleton: true },
  { name: 'event-index', singleton: false },
  { name: 'agent-search', singleton: false },
  { name: 'search-upkeep', singleton: true },
  { name: 'alarm-delivery', singleton: true },
  { name: 'report-scheduler', singleton: true },
  { name: 'agentless-sweeper', singleton: true },
  { name: 'notification-stream', singleton: false },
  { name: 'health-checks', singleton: true },
  { name: 'retention', singleton: true },
  { name: 'audit-refusal-flush', singleton: false },
]
// PostgreSQL has none of SQLite's upkeep (checkpoints, its search structures, its event
// index) but its own (each ended day's text index of events); alarm deliveries and report runs are leased one by one, so any node runs them.
const POSTGRES = [
  { name: 'agent-sweeper', singleton: true },
  { name: 'alarm-delivery', singleton: false },
  { name: 'report-scheduler', singleton: false },
  { name: 'agentless-sweeper', singleton: true },
  { name: 'notification-stream', singleton: false },
  { name: 'health-checks', singleton: true },
  { name: 'retention', singleton: true },
  { name: 'audit-refusal-flush', singleton: false },
  { name: 'text-index', singleton: true },
  { name: 'risk-feed', singleton: true },
]
const EXPECTED = testBackend === 'sqlite' ? SQLITE : POSTGRES

/** The registry's list without whether a lease is held right now (PostgreSQL's singletons; a matter of timing). */
const listed = (app: Awaited<ReturnType<typeof build>>) => app.loops.list().map(({ name, singleton, running }) => ({ name, singleton, running }))

t.test('every background loop is registered, runs once the app is ready and stops on close', async (t) => {
  const app = await build(t)
  t.same(
    listed(app),
    EXPECTED.map((l) => ({ ...l, running: false })),
    'registered in start order, none running before ready',
  )
  await app.ready()
  t.same(
    listed(app),
    EXPECTED.map((l) => ({ ...l, running: true })),
    'all running once ready',
  )
  await app.close()
  t.same(
    listed(app),
    EXPECTED.map((l) => ({ ...l, running: false })),
    'all stopped after close',
  )
})

t.test('closing stops the loops in reverse order and awaits each; those that stop first go before the rest', async (t) => {
  const app = await build(t)
  const seen: string[] = []
  const loop = (name: string, stopsFirst = false) => ({
    name,
    singleton: false,
    stopsFirst,
    start: () => void seen.push(`start ${name}`),
    stop: async () => {
      await new Promise((r) => setTimeout(r, 5))
      seen.push(`stop ${name}`)
    },
  })
  app.loops.add(loop('a'))
  app.loops.add(loop('b', true))
  app.loops.add(loop('c'))
  t.throws(() => app.loops.add(loop('a')), /registered twice/)
  await app.ready()
  let dbOpenAtStop = false
  // The database still answers when the loop stops (a closed one throws or rejects).
  const answers = async () => {
    try {
      await app.storage.health.system.schemaVersion()
      return true
    } catch {
      return false
    }
  }
  // Not a singleton: on PostgreSQL one would first wait for its lease.
  app.loops.add({ name: 'd', singleton: false, start() {}, stop: async () => void (dbOpenAtStop = await answers()) })
  await new Promise((r) => setImmediate(r))
  t.equal(app.loops.list().find((l) => l.name === 'd')?.running, true, 'a loop added after ready starts at once')
  await app.close()
  t.same(seen, ['start a', 'start b', 'start c', 'stop b', 'stop c', 'stop a'])
  t.ok(dbOpenAtStop, 'loops stop before the database closes')
})
