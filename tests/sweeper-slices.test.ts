// backend: postgres-pending — not yet converted: seeds or checks through SQLite's repositories (app.repos, app.db); the loop itself runs on PostgreSQL and is tested there by tests/pg-background-loops.test.ts
// How much a sweeper call disconnects for its budget: an idle server's slice (the slice
// policy's long one) disconnects in bulk (BULK_SLICE_MS of measured pace), so that a burst
// pays fewer commits. Alone in its file: the pace
// is measured per process, and this pins the first call's, made before any measure.
import t from 'tap'
import { asyncPort } from '../db/unit-of-work.js'
import { sweepAgents } from '../lib/gateway/sweeper.js'
import { BULK_SLICE_MS, LONG_SLICE_MS } from '../lib/platform/slices.js'
import { createRepos } from '../lib/repos.js'
import { seedFleet } from '../scripts/seed.js'
import { tempDb } from './helpers.js'

// The pace a first call assumes (sweeper.ts FIRST_MS_PER_AGENT).
const FIRST_MS_PER_AGENT = 0.05

t.test("an idle slice disconnects a bulk slice's worth of agents", async (t) => {
  const { db } = tempDb(t)
  const now = Date.now()
  await seedFleet(db, { agents: 1300, peripheralsPerAgent: 1, seed: 5, now: now - 60_000 })
  db.prepare(`UPDATE agents SET connection_status = 'Connected', last_updated_ms = ?`).run(now - 86_400_000)
  const repos = createRepos(db)
  const deps = {
    store: asyncPort(repos.gateway, repos.uow),
    events: asyncPort(repos.events, repos.uow),
    agentState: asyncPort(repos.agentState, repos.uow),
    uow: repos.uow,
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
