// What happens when agents go quiet: no check-in for the disconnect timeout makes an agent
// Disconnected, and a command delivered without a result for 15 minutes becomes Failed.
// Also expires licenses whose date has passed and hands free license seats to agents that
// enrolled while none was free.
import type { FastifyInstance } from 'fastify'
import { hostEvent, NO_RESULT } from './gateway.js'
import { iso } from './time.js'
import type { Loop } from './platform/loops.js'

export const DELIVERY_TIMEOUT_MS = 15 * 60_000
const SWEEP_INTERVAL_MS = 5000
// One short batch of each kind per call: after a long outage every agent is overdue at
// once, and requests must be served between the batches (see agentSweeperLoop). A batch
// also ends after BATCH_MS: a disconnect rewrites the agent's search text (about 0.2 ms
// each at 100,000 agents), and 500 of them held the server for over 100 ms.
const BATCH = 500
const BATCH_MS = 25

/** `budgetMs`: each batch ends once it has taken this long (after one item at least). */
export function sweepAgents(app: FastifyInstance, now = Date.now(), budgetMs = BATCH_MS) {
  const { db, repos, config } = app
  app.gateway.flushHeartbeats()
  let disconnected = 0
  const quietSince = now - config.agents.disconnectSeconds * 1000
  const stale = repos.gateway.staleAgents(quietSince, BATCH)
  let until = performance.now() + budgetMs
  let cut = false
  db.transaction(() => {
    for (const [i, a] of stale.entries()) {
      if (i > 0 && performance.now() > until) {
        cut = true
        break
      }
      if (!repos.gateway.disconnect(a.id, quietSince)) continue
      repos.agentState.refreshStatus(a.id)
      repos.events.record(now, [hostEvent('disconnected', a, `${a.host_identifier} has not checked in since ${iso(a.last_updated_ms)}.`)], a.id)
      disconnected++
    }
  })()

  let timedOut = 0
  const overdue = repos.gateway.overdueCommands(now - DELIVERY_TIMEOUT_MS, BATCH)
  until = performance.now() + budgetMs
  db.transaction(() => {
    const agents = new Set<number>()
    for (const [i, c] of overdue.entries()) {
      if (i > 0 && performance.now() > until) {
        cut = true
        break
      }
      if (!repos.gateway.timeOutCommand(c.id, now, NO_RESULT)) continue
      agents.add(c.agent_id)
      repos.events.record(now, [hostEvent('commandFailed', c, `${c.type} command ${c.id} failed on ${c.host_identifier}: ${NO_RESULT} within 15 minutes of delivery.`)], c.agent_id)
      timedOut++
    }
    for (const id of agents) repos.agentState.refreshAgent(id)
  })()

  const expired = repos.gateway.expireLicenses(now)
  let activated = 0
  // Counting the seats in use reads most agents: only when some agent waits for one.
  const waiting = repos.gateway.waitingForSeat(BATCH)
  const seats = waiting.length ? config.license.seats - repos.gateway.activatedCount() : 0
  if (seats > 0) {
    db.transaction(() => {
      for (const id of waiting.slice(0, seats)) activated += repos.gateway.activate(id).changes
    })()
  }

  app.gateway.prune(now)
  /** Whether a batch was full: more is due now. */
  const more = cut || stale.length === BATCH || overdue.length === BATCH || activated === BATCH
  return { disconnected, timedOut, expired, activated, more }
}

/**
 * Sweeps every few seconds while the app runs; the timer never keeps the process alive.
 * One process at a time: the sweep changes shared agents, commands and seats.
 */
export function agentSweeperLoop(app: FastifyInstance, intervalMs = SWEEP_INTERVAL_MS): Loop {
  let timer: NodeJS.Timeout | undefined
  let running = false
  let closed = false
  // While batches come back full, the next one follows at once, after pending I/O.
  const run = () => {
    if (closed) return
    running = true
    let more = false
    try {
      more = sweepAgents(app).more
    } catch (err) {
      app.log.error({ err }, 'agent sweep failed')
    }
    running = more
    if (more) setImmediate(run)
  }
  return {
    name: 'agent-sweeper',
    singleton: true,
    start() {
      closed = false
      timer = setInterval(() => {
        if (!running) run()
      }, intervalMs).unref()
    },
    // Stopped before the database closes; the check-in times still held are written then.
    stop() {
      closed = true
      clearInterval(timer)
      app.gateway.flushHeartbeats()
    },
  }
}
