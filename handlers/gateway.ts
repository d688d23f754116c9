import { contextOf } from '../lib/platform/context.js'
import type { Handlers } from './types.js'

export const gatewayHandlers: Handlers<'enrollAgent' | 'agentCheckIn' | 'reportCommandResults' | 'decideAgentReEnrollment'> = {
  async enrollAgent(req, reply) {
    const answer = await req.server.services.gateway.enroll(contextOf(req), req.body)
    // Held for an Administrator's approval: accepted, not yet in effect.
    return answer.pendingApproval ? reply.code(202).send(answer) : answer
  },

  async agentCheckIn(req) {
    const { answer, routine } = await req.server.services.gateway.checkIn(contextOf(req), req.agent!, req.body)
    // Routine traffic: logged in the per-minute summary, not line by line (lib/log.ts).
    req.routine = routine
    return answer
  },

  async reportCommandResults(req) {
    return req.server.services.gateway.reportResults(contextOf(req), req.agent!.id, req.body)
  },

  async decideAgentReEnrollment(req) {
    return req.server.services.gateway.decideReEnrollment(contextOf(req), req.params.agentId, req.body.decision, req.body.reEnrollmentId)
  },
}
