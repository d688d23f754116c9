// The gateway's own limits, checked before anything else (429): failed and accepted
// enrollments per address and overall, each agent's request budget, its bytes of command
// results a day, and the minimum interval between its check-ins. Kept in this process.
import { problem } from '../errors.js'
import { fixedWindowLimiter, limitKey } from '../rate-limit.js'
import type { Operation } from '../contract.js'

const ENROLL_FAILURES_PER_MINUTE = 20
export const DAY_MS = 86_400_000

/** Failed enrollments per source address, per fixed minute. */
class FailureWindow {
  private readonly entries = new Map<string, { count: number; resetMs: number }>()
  constructor(
    private readonly max: number,
    private readonly windowMs: number,
  ) {}

  /** Seconds until the address may try again, or 0. */
  blockedFor(key: string, now: number): number {
    const e = this.entries.get(key)
    return e && e.resetMs > now && e.count >= this.max ? Math.ceil((e.resetMs - now) / 1000) : 0
  }

  fail(key: string, now: number): void {
    const e = this.entries.get(key)
    if (e && e.resetMs > now) e.count++
    else this.entries.set(key, { count: 1, resetMs: now + this.windowMs })
  }

  prune(now: number): void {
    for (const [k, e] of this.entries) if (e.resetMs <= now) this.entries.delete(k)
  }
}

export interface GatewayLimitSettings {
  enrollPerMinutePerAddress: number
  enrollPerMinute: number
  /** Each agent's requests per window, whatever its address. */
  agentRequests: number
  windowMs: number
  resultBytesPerDay: number
  minCheckInSeconds: number
}

/** What a gateway call is limited by: its source address, its agent (once known), the bytes it sends. */
export interface GatewayCall {
  address: string
  agentId?: number
  bytes: number
}

const rateLimited = (detail: string, wait: number) => problem('rate-limited', detail, { headers: { 'retry-after': String(wait) } })

export function gatewayLimits(s: GatewayLimitSettings) {
  const failedEnrollments = new FailureWindow(ENROLL_FAILURES_PER_MINUTE, 60_000)
  // Accepted enrollments are limited too (per address, and overall), so that no one holding
  // the secret can create agents, events and audit records without end.
  const enrollmentsPerAddress = fixedWindowLimiter(s.enrollPerMinutePerAddress, 60_000)
  const enrollments = fixedWindowLimiter(s.enrollPerMinute, 60_000)
  const agentBudget = fixedWindowLimiter(s.agentRequests, s.windowMs)
  /** Bytes of command results each agent sent on the current UTC day. */
  const resultBytes = new Map<number, { day: number; bytes: number }>()
  /** When each agent's last accepted check-in arrived (the minimum interval). */
  const lastCheckIn = new Map<number, number>()

  return {
    /** Throws a 429 problem when the call is over one of its limits; counts it otherwise. */
    admit(call: GatewayCall, op: Pick<Operation, 'gatewayLimit'>, now: number) {
      if (op.gatewayLimit === 'enrollment') {
        const address = limitKey(call.address)
        const wait = failedEnrollments.blockedFor(address, now)
        if (wait > 0) throw rateLimited(`Too many failed enrollments from this address; retry in ${wait} seconds.`, wait)
        for (const [limiter, key, where] of [
          [enrollmentsPerAddress, address, 'from this address'],
          [enrollments, '', 'to this server'],
        ] as const) {
          const r = limiter.hit(key, now)
          if (r.exceeded) throw rateLimited(`More than ${r.max} enrollments a minute ${where}; retry in ${r.resetSeconds} seconds.`, r.resetSeconds)
        }
        return
      }
      const id = call.agentId!
      const budget = agentBudget.hit(String(id), now)
      if (budget.exceeded) throw rateLimited(`Too many requests from this agent (${budget.max} per window); retry in ${budget.resetSeconds} seconds.`, budget.resetSeconds)
      if (op.gatewayLimit === 'result-bytes') {
        // Counted as they arrive, valid or not: the day's bytes bound what results can store.
        const day = Math.floor(now / DAY_MS)
        const used = resultBytes.get(id)
        const today = used && used.day === day ? used.bytes : 0
        if (today + call.bytes > s.resultBytesPerDay) {
          const wait = Math.max(1, Math.ceil(((day + 1) * DAY_MS - now) / 1000))
          throw rateLimited(`This agent sent ${today} bytes of command results today; at most ${s.resultBytesPerDay} a day (UTC). Retry in ${wait} seconds.`, wait)
        }
        resultBytes.set(id, { day, bytes: today + call.bytes })
      } else if (op.gatewayLimit === 'check-in') {
        const minMs = s.minCheckInSeconds * 1000
        const last = lastCheckIn.get(id)
        if (last !== undefined && now - last < minMs) {
          const wait = Math.max(1, Math.ceil((minMs - (now - last)) / 1000))
          throw rateLimited(`Check in at most every ${s.minCheckInSeconds} seconds; retry in ${wait} seconds.`, wait)
        }
        lastCheckIn.set(id, now)
      }
    },
    /** Counts an enrollment answered with an error (a wrong secret, an invalid body, ...). */
    enrollmentFailed: (address: string, now: number) => failedEnrollments.fail(limitKey(address), now),
    /** A new credential starts with no minimum interval to wait. */
    forgetCheckIn: (agentId: number) => lastCheckIn.delete(agentId),
    prune(now: number) {
      failedEnrollments.prune(now)
      const minMs = s.minCheckInSeconds * 1000
      for (const [id, ms] of lastCheckIn) if (now - ms >= minMs) lastCheckIn.delete(id)
      const day = Math.floor(now / DAY_MS)
      for (const [id, used] of resultBytes) if (used.day !== day) resultBytes.delete(id)
    },
  }
}
export type GatewayLimits = ReturnType<typeof gatewayLimits>
