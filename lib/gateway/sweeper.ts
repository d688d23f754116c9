// What happens when agents go quiet: no check-in for the disconnect timeout makes an agent
// Disconnected, and a command delivered without a result for 15 minutes becomes Failed.
// Also expires licenses whose date has passed and hands free license seats to agents that
// enrolled while none was free.
import type { Log, UnitOfWork } from '../platform/ports.js'
import type { Loop } from '../platform/loops.js'
import { BULK_SLICE_MS, LONG_SLICE_MS, paceAfter, SliceStats } from '../platform/slices.js'
import { iso } from '../time.js'
import { agentEvents, hostEvent } from './events.js'
import type { AgentStatus, EventRecorder, GatewayStore, SweptAgent } from './ports.js'
import { NO_RESULT } from './state.js'

export const DELIVERY_TIMEOUT_MS = 15 * 60_000
const SWEEP_INTERVAL_MS = 5000
// One short batch of each kind per call: after a long outage every agent is overdue at
// once, and requests must be served between the batches (see agentSweeperLoop). A call
// runs without a pause (its awaits are the ports' promises), so it is one stall of the
// event loop: the quiet agents are disconnected in bulk (one update and one recordMany per
// call), as many as the process's measured pace fits in the slice policy's budget (short
// while requests are in flight, long when idle; BATCH_MS without a policy).
const BATCH = 500
const MAX_DISCONNECTS = 4000
const BATCH_MS = 5
// The first call's guess of the time a disconnect takes (its commit aside); measured after.
const FIRST_MS_PER_AGENT = 0.05
/** A batch taken in id order looks at most this many ids per agent it may take (a bound on its scan). */
const SCAN_IDS_PER_AGENT = 8
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
  /**
   * The budget of the next call's work (ms), asked before each call of the loop: the slice
   * policy (lib/platform/slices.ts), short while requests are in flight, long when idle.
   */
  sliceMs?: () => number
}

/** When the sweep's work other than disconnects last ran, per database (its unit of work). */
const sideWork = new WeakMap<object, number>()

// The first call's guess of the time a license activation takes, its share of the commit included.
const FIRST_MS_PER_ACTIVATION = 0.1

/**
 * What one disconnect has been taking in this process (ms, the commit aside), a disconnect
 * batch's commit, and one activation with its share of its commit: size the next call's batches.
 */
const pace = { msPerAgent: FIRST_MS_PER_AGENT, msPerActivation: FIRST_MS_PER_ACTIVATION, msPerDisconnectCommit: 0 }

/** The paces measured so far in this process (tests). */
export const sweeperPace = (): Readonly<typeof pace> => ({ ...pace })

/**
 * A mass disconnect under way, per database (its unit of work): the batches go through the
 * agents in id order, from past `after` to `end` (the highest id when it began).
 */
const passes = new WeakMap<object, { after: number; end: number }>()

/** `budgetMs`: each batch ends once it has taken this long (after one item at least). */
export async function sweepAgents(deps: SweeperDeps, now = Date.now(), budgetMs = BATCH_MS) {
  const { store, events, agentState, uow } = deps
  await deps.gateway.flushHeartbeats()
  const quietSince = now - deps.disconnectSeconds * 1000
  // An idle server's slice (the policy's long one) disconnects in bulk: fewer commits per
  // burst. The bulk slice holds the batch's commit too (it is paid on the event loop): the
  // work gets what the last commits left of it, a quarter of it at least (a disk whose commit
  // takes the whole slice would otherwise disconnect a handful of agents per fsync).
  const disconnectMs = budgetMs >= LONG_SLICE_MS ? Math.max(BULK_SLICE_MS / 4, BULK_SLICE_MS - pace.msPerDisconnectCommit) : budgetMs
  const size = Math.max(1, Math.min(MAX_DISCONNECTS, Math.floor(disconnectMs / pace.msPerAgent)))
  // The longest quiet first; once more than a batch waits (an outage), in id order instead:
  // then the rows of a batch share pages, and its commit writes far fewer of them.
  let pass = passes.get(uow)
  // Outside a pass: the agents to disconnect. In a pass: the range of ids its batch reads.
  let taken: SweptAgent[] = []
  let range: { after: number; upTo: number } | undefined
  let cut: boolean
  if (pass === undefined) {
    // One more than taken: whether others wait after them.
    const stale = await store.staleAgents(quietSince, size + 1)
    taken = stale.slice(0, size)
    cut = stale.length > size
    if (cut) passes.set(uow, (pass = { after: 0, end: await store.lastAgentId() }))
  } else {
    range = { after: pass.after, upTo: Math.min(pass.end, pass.after + SCAN_IDS_PER_AGENT * size) }
    cut = true
  }
  let disconnected = 0
  if (range || taken.length) {
    let workMs = 0
    let workEnd = 0
    let gone: SweptAgent[] = []
    await uow.run(async () => {
      const t0 = performance.now()
      // The disconnect sets the display status and the latest texts with it (disconnectMany).
      // A pass's batch is read in this transaction (disconnectRange): no second read to check it.
      const text = agentEvents.disconnected.description
      gone = range
        ? await store.disconnectRange(range.after, range.upTo, quietSince, size, text)
        : await store.disconnectMany(
            taken.map((a) => a.id),
            quietSince,
            text,
          )
      if (!gone.length) return
      await events.recordMany(gone.map((a) => ({ createdMs: now, events: [hostEvent('disconnected', a, `${a.host_identifier} has not checked in since ${iso(a.last_updated_ms)}.`)] })))
      disconnected = gone.length
      workEnd = performance.now()
      workMs = workEnd - t0
    })
    // The commit (and what the unit of work does after it): up at once, down by halves.
    if (disconnected > 0) pace.msPerDisconnectCommit = paceAfter(pace.msPerDisconnectCommit, performance.now() - workEnd)
    if (pass !== undefined && range) {
      // Past the batch once it is written (a batch that failed is read again by the next call).
      pass.after = gone.length === size ? gone[size - 1].id : range.upTo
      // The pass is over at its end; the next call looks for any left (quiet since, or enrolled after it began).
      if (pass.after >= pass.end) passes.delete(uow)
    }
    // Full batches only: a short one's fixed costs would make the pace look slower than it is.
    // The work alone, not the commit: its fsync is paid once per call whatever the batch,
    // and counted per agent it would shrink the batches until every call is one fsync for
    // a handful of agents (the bulk slice takes it off its budget instead, above).
    if ((range ? gone.length : taken.length) === size && disconnected > 0) pace.msPerAgent = Math.min(1, Math.max(0.001, 0.5 * pace.msPerAgent + (0.5 * workMs) / size))
  }
  // A pass that ended with this batch: more only if any agent is still quiet.
  if (pass !== undefined && !passes.has(uow)) cut = (await store.staleAgents(quietSince, 1)).length > 0

  // While a pass goes on, the loop calls again at once, every few milliseconds: the rest of
  // the sweep (commands, licenses, seats: three queries a call, a tenth of a short slice)
  // waits for the sweep's interval, as it does between sweeps.
  const last = sideWork.get(uow)
  if (passes.has(uow) && last !== undefined && now - last < SWEEP_INTERVAL_MS) {
    deps.gateway.prune(now)
    return { disconnected, timedOut: 0, expired: 0, activated: 0, more: true }
  }
  sideWork.set(uow, now)

  let timedOut = 0
  const overdue = await store.overdueCommands(now - DELIVERY_TIMEOUT_MS, BATCH)
  const until = performance.now() + budgetMs
  // No transaction when nothing is overdue (most calls).
  if (overdue.length)
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
  // Whether any agent waits, before the seats are counted and the waiting read (a fleet with
  // no free seat keeps agents waiting: reading a batch of them each call would find nothing to do).
  const seats = (await store.waitingForSeat(1)).length ? deps.seats - (await store.activatedCount()) : 0
  const waiting = seats > 0 ? await store.waitingForSeat(Math.min(seats, BATCH)) : []
  if (waiting.length) {
    // Under the budget as the other batches (after one agent at least): 500 activations in
    // one transaction held the event loop 50 to 100 ms at 100,000 agents. Half of it for the
    // updates; and no more of them than the budget holds at the pace of the last units,
    // commits included: on a slow disk the commit of 10 ms of updates took 40 to 100 ms.
    const most = Math.max(1, Math.floor(budgetMs / pace.msPerActivation))
    const batch = waiting.slice(0, Math.min(seats, most))
    if (batch.length < Math.min(seats, waiting.length)) cut = true
    const t0 = performance.now()
    const activateUntil = t0 + budgetMs / 2
    let tried = 0
    await uow.run(async () => {
      for (const id of batch) {
        if (tried > 0 && performance.now() > activateUntil) {
          cut = true
          break
        }
        tried++
        activated += (await store.activate(id)).changes
      }
    })
    pace.msPerActivation = paceAfter(pace.msPerActivation, (performance.now() - t0) / tried)
  }

  deps.gateway.prune(now)
  /** Whether a batch was full: more is due now. */
  const more = cut || overdue.length === BATCH || activated === BATCH
  return { disconnected, timedOut, expired, activated, more }
}

/** One call of the loop: how long it held the event loop (ms), its budget, and what it did. */
export interface SweepSlice {
  ms: number
  budgetMs: number
  result: Awaited<ReturnType<typeof sweepAgents>>
}

/**
 * Sweeps every few seconds while the app runs; the timer never keeps the process alive.
 * One process at a time: the sweep changes shared agents, commands and seats. `onSlice`
 * hears of each call that did something (the benchmark's measure).
 */
export function agentSweeperLoop(deps: SweeperDeps, intervalMs = SWEEP_INTERVAL_MS, onSlice?: (s: SweepSlice) => void): Loop {
  let timer: NodeJS.Timeout | undefined
  let running = false
  let closed = false
  // Since the last report (stats): the calls that disconnected agents, how many, their time and the longest.
  const slices = new SliceStats()
  let disconnected = 0
  // While batches come back full, the next one follows at once, after pending I/O.
  const run = async () => {
    if (closed) return
    running = true
    let more = false
    try {
      const budgetMs = deps.sliceMs?.() ?? BATCH_MS
      const t0 = performance.now()
      const result = await sweepAgents(deps, Date.now(), budgetMs)
      const ms = performance.now() - t0
      more = result.more
      if (result.disconnected > 0) {
        slices.add(ms)
        disconnected += result.disconnected
      }
      if (more || result.disconnected > 0) onSlice?.({ ms, budgetMs, result })
    } catch (err) {
      deps.log.error({ err }, 'agent sweep failed')
    }
    running = more
    if (more && !closed) setImmediate(run)
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
    stats() {
      const r = slices.take()
      if (!r) return undefined
      const stats = { slices: r.slices, disconnected, busyMs: r.busyMs, maxSliceMs: r.maxSliceMs }
      disconnected = 0
      return stats
    },
  }
}
