// What happens when agents go quiet: no check-in for the disconnect timeout makes an agent
// Disconnected, and a command delivered without a result for 15 minutes becomes Failed.
// Also expires licenses whose date has passed and hands free license seats to agents that
// enrolled while none was free.
import type { Log, UnitOfWork } from '../platform/ports.js'
import type { Loop } from '../platform/loops.js'
import { iso } from '../time.js'
import { hostEvent } from './events.js'
import type { AgentStatus, EventRecorder, GatewayStore } from './ports.js'
import { NO_RESULT } from './service.js'

export const DELIVERY_TIMEOUT_MS = 15 * 60_000
const SWEEP_INTERVAL_MS = 5000
// One short batch of each kind per call: after a long outage every agent is overdue at
// once, and requests must be served between the batches (see agentSweeperLoop). A batch
// also ends after BATCH_MS: a disconnect rewrites the agent's search text (about 0.2 ms
// each at 100,000 agents), and 500 of them held the server for over 100 ms.
const BATCH = 500
const BATCH_MS = 25

export interface SweeperDeps {
  store: GatewayStore
  events: EventRecorder
  agentState: AgentStatus
  uow: UnitOfWork
  log: Log
  /** The gateway's check-in times held in memory, and its per-agent state to forget. */
  gateway: { flushHeartbeats(): Promise<void>; prune(now: number): void }
  disconnectSeconds: number
  seats: number
}

/** `budgetMs`: each batch ends once it has taken this long (after one item at least). */
export async function sweepAgents(deps: SweeperDeps, now = Date.now(), budgetMs = BATCH_MS) {
  const { store, events, agentState, uow } = deps
  await deps.gateway.flushHeartbeats()
  let disconnected = 0
  const quietSince = now - deps.disconnectSeconds * 1000
  const stale = await store.staleAgents(quietSince, BATCH)
  let until = performance.now() + budgetMs
  let cut = false
  await uow.run(async () => {
    for (const [i, a] of stale.entries()) {
      if (i > 0 && performance.now() > until) {
        cut = true
        break
      }
      if (!(await store.disconnect(a.id, quietSince))) continue
      await agentState.refreshStatus(a.id)
      await events.record(now, [hostEvent('disconnected', a, `${a.host_identifier} has not checked in since ${iso(a.last_updated_ms)}.`)], a.id)
      disconnected++
    }
  })

  let timedOut = 0
  const overdue = await store.overdueCommands(now - DELIVERY_TIMEOUT_MS, BATCH)
  until = performance.now() + budgetMs
  await uow.run(async () => {
    const agents = new Set<number>()
    for (const [i, c] of overdue.entries()) {
      if (i > 0 && performance.now() > until) {
        cut = true
        break
      }
      if (!(await store.timeOutCommand(c.id, now, NO_RESULT))) continue
      agents.add(c.agent_id)
      await events.record(now, [hostEvent('commandFailed', c, `${c.type} command ${c.id} failed on ${c.host_identifier}: ${NO_RESULT} within 15 minutes of delivery.`)], c.agent_id)
      timedOut++
    }
    for (const id of agents) await agentState.refreshAgent(id)
  })

  const expired = await store.expireLicenses(now)
  let activated = 0
  // Counting the seats in use reads most agents: only when some agent waits for one.
  const waiting = await store.waitingForSeat(BATCH)
  const seats = waiting.length ? deps.seats - (await store.activatedCount()) : 0
  if (seats > 0) {
    await uow.run(async () => {
      for (const id of waiting.slice(0, seats)) activated += (await store.activate(id)).changes
    })
  }

  deps.gateway.prune(now)
  /** Whether a batch was full: more is due now. */
  const more = cut || stale.length === BATCH || overdue.length === BATCH || activated === BATCH
  return { disconnected, timedOut, expired, activated, more }
}

/**
 * Sweeps every few seconds while the app runs; the timer never keeps the process alive.
 * One process at a time: the sweep changes shared agents, commands and seats.
 */
export function agentSweeperLoop(deps: SweeperDeps, intervalMs = SWEEP_INTERVAL_MS): Loop {
  let timer: NodeJS.Timeout | undefined
  let running = false
  let closed = false
  // While batches come back full, the next one follows at once, after pending I/O.
  const run = async () => {
    if (closed) return
    running = true
    let more = false
    try {
      more = (await sweepAgents(deps)).more
    } catch (err) {
      deps.log.error({ err }, 'agent sweep failed')
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
        if (!running) void run()
      }, intervalMs).unref()
    },
    // Stopped before the database closes; the check-in times still held are written then.
    async stop() {
      closed = true
      clearInterval(timer)
      await deps.gateway.flushHeartbeats()
    },
  }
}
