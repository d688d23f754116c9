// Check-ins: an unchanged one answered from its digest (its time written with others once a
// second), the others compared alone or in a batch of the same turn (compare.ts).
import { invalidField } from '../errors.js'
import { sha256 } from '../passwords.js'
import type { Context } from '../platform/context.js'
import type { GatewayAgent } from './ports.js'
import { ALONE, type Answer, answer, BATCH_CHECK_INS, type CheckIn, type CheckInAnswer, type Comparison, deliver, type GatewayState, HEARTBEAT_FLUSH_MS, type Outcome } from './state.js'
import { compareAll } from './compare.js'
function heartbeat(s: GatewayState, agentId: number, now: number) {
  s.heartbeats.set(agentId, now)
  s.flushTimer ??= setTimeout(() => {
    flushHeartbeats(s).catch((err) => s.log.error({ err }, 'writing check-in times failed; retrying with the next ones'))
  }, HEARTBEAT_FLUSH_MS).unref()
}

export async function flushHeartbeats(s: GatewayState): Promise<void> {
  if (s.flushTimer) clearTimeout(s.flushTimer)
  s.flushTimer = undefined
  if (s.heartbeats.size === 0) return
  const batch = [...s.heartbeats]
  s.heartbeats.clear()
  try {
    await s.uow.run(() => s.store.heartbeats(batch))
  } catch (err) {
    // Kept for the next flush, unless a newer time came meanwhile.
    for (const [id, ms] of batch) if (!s.heartbeats.has(id)) s.heartbeats.set(id, ms)
    throw err
  }
}

/** `agent`: the one whose credential the call carries. */
export async function checkIn(s: GatewayState, ctx: Context, agent: GatewayAgent, body: CheckIn): Promise<CheckInAnswer> {
  const now = Date.now()
  const seen = new Set<string>()
  body.peripherals.forEach((p, i) => {
    if (seen.has(p.deviceID)) throw invalidField('body', `peripherals/${i}/deviceID`, 'is listed twice')
    seen.add(p.deviceID)
  })
  // The digest covers the state as sent, key order included: an agent that reorders its
  // keys only costs a full comparison, which then finds nothing new.
  const { agentTime: _time, errors, ...state } = body
  const reportedIp = body.localIpAddress ?? ctx.sourceAddress ?? ''
  const digest = sha256(s.digestSalt + JSON.stringify(state) + (body.localIpAddress ? '' : reportedIp))
  if (digest === agent.state_digest && agent.connection_status === 'Connected' && !errors?.length) {
    // Nothing changed: no comparison, no audit record (the contract audits changes only).
    ctx.audit.audited = true
    heartbeat(s, agent.id, now)
    if (!(await s.store.hasPendingCommands(agent.id))) return { answer: answer(s, agent.uuid, now, { commands: [], more: false }), routine: true }
    const d = await s.checkIns.run(async () => {
      const d = await deliver(s, agent.id, now)
      await s.agentState.refreshStatus(agent.id)
      return d
    })
    return { answer: answer(s, agent.uuid, now, d), routine: false }
  }
  const held = s.heartbeats.get(agent.id)
  s.heartbeats.delete(agent.id)
  const item: Comparison = { ctx, agentId: agent.id, body, localIp: reportedIp, digest, now, heldCheckInMs: held }
  return { answer: s.batchCheckIns ? await queued(s, item) : await alone(s, item), routine: false }
}

function queued(s: GatewayState, item: Comparison): Promise<Answer> {
  return new Promise((resolve, reject) => {
    s.waiting.push({ item, resolve, reject })
    if (!s.batchScheduled) {
      s.batchScheduled = true
      setImmediate(() => void runBatch(s))
    }
  })
}

/** One check-in in a unit of its own (its group's savepoint under group commit). */
async function alone(s: GatewayState, item: Comparison): Promise<Answer> {
  const [outcome] = stored(s, await s.checkIns.run(() => compareAll(s, [item])))
  if (!outcome.ok) throw outcome.err
  return outcome.answer
}

/**
 * Compares and writes the waiting check-ins together (at most BATCH_CHECK_INS, one per
 * agent: an agent's later one waits for the next batch, as it would for the commit of its
 * first). Each is answered only after the batch's COMMIT. If the batch fails, each of its
 * check-ins runs again alone, so that a bad one fails by itself.
 */
async function runBatch(s: GatewayState): Promise<void> {
  s.batchScheduled = false
  const taken: GatewayState['waiting'] = []
  const agents = new Set<number>()
  // Where the statements run on the event loop, as many as the budget holds at the last
  // batches' pace: ten first check-ins of ten new peripherals each held it 70-90 ms.
  const most = s.batchBudgetMs === undefined ? BATCH_CHECK_INS : Math.max(1, Math.min(BATCH_CHECK_INS, Math.floor(s.batchBudgetMs / s.batchPace.msPerCheckIn)))
  for (let i = 0; i < s.waiting.length && taken.length < most; ) {
    if (agents.has(s.waiting[i].item.agentId)) i++
    else {
      agents.add(s.waiting[i].item.agentId)
      taken.push(...s.waiting.splice(i, 1))
    }
  }
  if (s.waiting.length && !s.batchScheduled) {
    s.batchScheduled = true
    setImmediate(() => void runBatch(s))
  }
  let outcomes: Outcome[]
  try {
    // From the unit's start to its commit: not the wait for the units queued before it.
    let t0 = 0
    outcomes = stored(
      s,
      await s.uow.run(() => {
        t0 = performance.now()
        return compareAll(
          s,
          taken.map((w) => w.item),
        )
      }),
    )
    s.batchPace.msPerCheckIn = 0.5 * s.batchPace.msPerCheckIn + (0.5 * (performance.now() - t0)) / taken.length
  } catch {
    for (const w of taken) alone(s, w.item).then(w.resolve, w.reject)
    return
  }
  for (const [i, w] of taken.entries()) {
    const o = outcomes[i]
    if (o.ok) w.resolve(o.answer)
    else if (o.err === ALONE) alone(s, w.item).then(w.resolve, w.reject)
    else w.reject(o.err)
  }
}

/** Counts the errors stored, once they are stored for good (a unit that rolls back stored none). */
function stored<T>(s: GatewayState, r: { outcomes: T; counted: [number, { day: number; count: number }][] }): T {
  for (const [id, used] of r.counted) s.errorsStored.set(id, used)
  return r.outcomes
}
