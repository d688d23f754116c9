// How much a sweeper call disconnects for its budget: an idle server's slice (the slice
// policy's long one) disconnects in bulk (BULK_SLICE_MS of measured pace, less the batch's
// measured commit), so that a burst pays fewer commits. Alone in its file: the pace
// is measured per process, and this pins the first call's, made before any measure.
import crypto from 'node:crypto'
import t from 'tap'
import { sweepAgents, sweeperPace } from '../lib/gateway/sweeper.js'
import { BULK_SLICE_MS, LONG_SLICE_MS } from '../lib/platform/slices.js'
import { build } from './helpers.js'
import { insertRows, portsOf } from './seed.js'

// The pace a first call assumes (sweeper.ts FIRST_MS_PER_AGENT).
const FIRST_MS_PER_AGENT = 0.05

t.test("an idle slice disconnects a bulk slice's worth of agents", async (t) => {
  const app = await build(t)
  const now = Date.now()
  // Connected agents, quiet for a day: every one is due for a disconnect.
  await insertRows(
    app,
    'agents',
    Array.from({ length: 3000 }, (_, i) => ({
      uuid: crypto.randomUUID(),
      machine_id: crypto.randomUUID(),
      enrolled_ms: now - 60_000,
      host_identifier: `HOST-${i}`,
      connection_status: 'Connected',
      last_updated_ms: now - 86_400_000,
    })),
  )
  const ports = portsOf(app)
  // Later, a disk on which a commit takes `commitMs`: the unit's end holds the loop that long.
  // One unit of work throughout: a mass disconnect's pass is kept per unit of work.
  let commitMs = 0
  const uow = {
    ...app.storage.uow,
    run: async <T>(work: () => Promise<T>): Promise<T> => {
      const r = await app.storage.uow.run(work)
      const until = performance.now() + commitMs
      while (performance.now() < until);
      return r
    },
  }
  const deps = {
    store: ports.gatewayStore,
    events: ports.eventRecorder,
    agentState: ports.agentState,
    uow,
    log: { warn: () => {}, error: () => {} },
    gateway: { flushHeartbeats: async () => {}, prune: () => {} },
    disconnectSeconds: 180,
    seats: 0,
  }
  t.ok(BULK_SLICE_MS > LONG_SLICE_MS)
  const first = await sweepAgents(deps, now, LONG_SLICE_MS)
  t.equal(first.disconnected, Math.floor(BULK_SLICE_MS / FIRST_MS_PER_AGENT), 'the first idle call: a bulk slice at the assumed pace')
  t.ok(first.more)

  // Commits of 10 ms: the next bulk batch leaves that much of the slice to its commit.
  commitMs = 10
  await sweepAgents(deps, now, LONG_SLICE_MS)
  const pace = sweeperPace()
  t.ok(pace.msPerDisconnectCommit >= 10, `the commit measured: ${pace.msPerDisconnectCommit.toFixed(1)} ms`)
  const third = await sweepAgents(deps, now, LONG_SLICE_MS)
  const workMs = Math.max(BULK_SLICE_MS / 4, BULK_SLICE_MS - pace.msPerDisconnectCommit)
  t.ok(workMs <= BULK_SLICE_MS - 10, `${workMs.toFixed(1)} ms of work`)
  t.equal(third.disconnected, Math.floor(workMs / pace.msPerAgent), 'the batch: what the commit leaves of the slice, at the measured pace')
})
