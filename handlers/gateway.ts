import type { Handlers } from './types.js'

export const gatewayHandlers: Handlers<'enrollAgent' | 'agentCheckIn' | 'reportCommandResults' | 'decideAgentReEnrollment'> = {
  async enrollAgent(req, reply) {
    const answer = req.server.gateway.enroll(req, req.body)
    // Held for an Administrator's approval: accepted, not yet in effect.
    return answer.pendingApproval ? reply.code(202).send(answer) : answer
  },

  async agentCheckIn(req) {
    return req.server.gateway.checkIn(req, req.body)
  },

  async reportCommandResults(req) {
    return req.server.gateway.reportResults(req, req.body)
  },

  async decideAgentReEnrollment(req) {
    return req.server.gateway.decideReEnrollment(req, req.params.agentId, req.body.decision)
  },
}
