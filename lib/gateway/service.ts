// The agent gateway: enrollment, check-ins and command results. A check-in carries the
// agent's whole state; the server records what changed since the last one as events.
// Takes plain inputs (the caller's context, the agent its credential named, the parsed
// body), so it runs without Fastify. Its parts (enrollment.ts, check-ins.ts, compare.ts,
// results.ts) take the gateway's state (state.ts), made once here.
import type { Context } from '../platform/context.js'
import { checkIn, flushHeartbeats } from './check-ins.js'
import { decideReEnrollment, enroll } from './enrollment.js'
import { DAY_MS } from './limits.js'
import type { GatewayAgent } from './ports.js'
import { reportResults } from './results.js'
import { type CheckIn, type GatewayDeps, gatewayState, type Schemas } from './state.js'

export { type CheckInAnswer, type GatewayDeps, MAX_ERRORS_PER_AGENT_PER_DAY, NO_RESULT } from './state.js'

export function agentGateway(deps: GatewayDeps) {
  const s = gatewayState(deps)
  const { limits, errorsStored } = s

  return {
    /** The gateway's limits, checked before anything else (lib/gateway/limits.ts). */
    admit: limits.admit,
    /** Counts an enrollment answered with an error (a wrong secret, an invalid body, ...). */
    enrollmentFailed: limits.enrollmentFailed,
    enroll: (ctx: Context, body: Schemas['GatewayEnrollRequest']) => enroll(s, ctx, body),
    /**
     * An Administrator's decision on the held re-enrollment `reEnrollmentId` (the one reviewed):
     * approved, its credential replaces the agent's.
     */
    decideReEnrollment: (ctx: Context, uuid: string, decision: 'Approve' | 'Reject', reEnrollmentId: string) => decideReEnrollment(s, ctx, uuid, decision, reEnrollmentId),
    /** `agent`: the one whose credential the call carries. */
    checkIn: (ctx: Context, agent: GatewayAgent, body: CheckIn) => checkIn(s, ctx, agent, body),
    /** `agentId`: the agent whose credential the call carries. */
    reportResults: (ctx: Context, agentId: number, body: Schemas['GatewayCommandResultsRequest']) => reportResults(s, ctx, agentId, body),
    flushHeartbeats: () => flushHeartbeats(s),
    /** Forgets what no longer matters: expired enrollment windows and old check-in times. */
    prune(now: number) {
      limits.prune(now)
      const day = Math.floor(now / DAY_MS)
      for (const [id, used] of errorsStored) if (used.day !== day) errorsStored.delete(id)
    },
  }
}
export type AgentGateway = ReturnType<typeof agentGateway>
