// How much a sweeper call disconnects for its budget: an idle server's slice (the slice
// policy's long one) disconnects in bulk (BULK_SLICE_MS of measured pace), so that a burst
// pays fewer commits. Alone in its file: the pace
// is measured per process, and this pins the first call's, made before any measure.
import crypto from 'node:crypto'
import t from 'tap'
import { sweepAgents } from '../lib/gateway/sweeper.js'
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
    Array.from({ length: 1300 }, (_, i) => ({
      uuid: crypto.randomUUID(),
      machine_id: crypto.randomUUID(),
      enrolled_ms: now - 60_000,
      host_identifier: `HOST-${i}`,
      connection_status: 'Connected',
      last_updated_ms: now - 86_400_000,
    })),
  )
  const ports = portsOf(app)
  const deps = {
    store: ports.gatewayStore,
    events: ports.eventRecorder,
    agentState: ports.agentState,
    uow: app.storage.uow,
    log: { warn: () => {}, error: () => {} },
    gateway: { flushHeartbeats: async () => {}, prune: () => {} },
    disconnectSeconds: 180,
    seats: 0,
  }
  t.ok(BULK_SLICE_MS > LONG_SLICE_MS)
  const first = await sweepAgents(deps, now, LONG_SLICE_MS)
  t.equal(first.disconnected, Math.floor(BULK_SLICE_MS / FIRST_MS_PER_AGENT), 'the first idle call: a bulk slice at the assumed pace')
  t.ok(first.more)
})
