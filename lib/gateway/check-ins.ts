// Check-ins: an unchanged one answered from its digest (its time written with others once a
// second), the others compared alone or in a batch of the same turn (compare.ts).
import { invalidField } from '../errors.js'
import { sha256 } from '../passwords.js'
import type { Context } from '../platform/context.js'
import { paceAfter } from '../platform/slices.js'
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
    if (!(agent.has_pending ?? (await s.store.hasPendingCommands(agent.id)))) return { answer: answer(s, agent.uuid, now, { commands: [], more: false }), routine: true }
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
 *
 * Where the statements run on the event loop (a budget), the batch is compared in chunks,
 * one check-in first, then twice as many as the last while the pace of the chunks before says
 * they fit in what is left; the check-ins left over wait for the next batch, ahead of the
 * others. A pace carried over from earlier batches would lag: after light check-ins (a
 * changed address) it let 20 heavy ones (ten new peripherals each) into one batch.
 */
async function runBatch(s: GatewayState): Promise<void> {
  s.batchScheduled = false
  const taken: GatewayState['waiting'] = []
  const agents = new Set<number>()
  for (let i = 0; i < s.waiting.length && taken.length < BATCH_CHECK_INS; ) {
    const agentId = s.waiting[i].item.agentId
    if (agents.has(agentId) || s.inBatch.has(agentId)) i++
    else {
      agents.add(agentId)
      taken.push(...s.waiting.splice(i, 1))
    }
  }
  if (taken.length === 0) return
  for (const id of agents) s.inBatch.add(id)
  if (s.waiting.length && !s.batchScheduled) {
    s.batchScheduled = true
    setImmediate(() => void runBatch(s))
  }
  let ran = taken.length
  let outcomes: Outcome[]
  // When the batch's work ended: from there to its unit's answer is its COMMIT (and what runs
  // once committed), which holds the loop as the work does.
  let workEnded = 0
  try {
    const done = await s.uow.run(async () => {
      const budget = s.batchBudgetMs
      if (budget === undefined)
        return compareAll(
          s,
          taken.map((w) => w.item),
        )
      // From the unit's start: not the wait for the units queued before it.
      const t0 = performance.now()
      const all: Outcome[] = []
      const counted: [number, { day: number; count: number }][] = []
      let chunk = 1
      // The dearer of the last chunk's pace and the batches' before: the batches' lags.
      let pace = s.batchPace.msPerCheckIn
      ran = 0
      const commitPace = s.batchPace.commitMsPerCheckIn
      while (ran < taken.length) {
        // What is left once the commit's share of the check-ins run so far is set aside.
        const left = budget - (performance.now() - t0) - ran * commitPace
        if (ran > 0 && left < chunk * (pace + commitPace)) chunk = Math.floor(left / (pace + commitPace))
        if (ran > 0 && chunk < 1) break
        const part = taken.slice(ran, ran + chunk)
        const c0 = performance.now()
        const r = await compareAll(
          s,
          part.map((w) => w.item),
        )
        const last = (performance.now() - c0) / part.length
        s.batchPace.msPerCheckIn = 0.5 * s.batchPace.msPerCheckIn + 0.5 * last
        pace = Math.max(last, s.batchPace.msPerCheckIn)
        all.push(...r.outcomes)
        counted.push(...r.counted)
        ran += part.length
        chunk *= 2
      }
      workEnded = performance.now()
      return { outcomes: all, counted }
    })
    if (workEnded > 0 && ran > 0) {
      // Up at once, down by halves: a commit dearer than the last ones is the next one's pace.
      const last = (performance.now() - workEnded) / ran
      s.batchPace.commitMsPerCheckIn = paceAfter(s.batchPace.commitMsPerCheckIn, last)
    }
    outcomes = stored(s, done)
  } catch {
    ran = taken.length
    for (const w of taken) alone(s, w.item).then(w.resolve, w.reject)
    return
  } finally {
    for (const id of agents) s.inBatch.delete(id)
    // Not compared (the budget was spent): first in the next batch.
    s.waiting.unshift(...taken.splice(ran))
    if (s.waiting.length && !s.batchScheduled) {
      s.batchScheduled = true
      setImmediate(() => void runBatch(s))
    }
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
