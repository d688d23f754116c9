import type { Handlers } from './types.js'

export const gatewayHandlers: Handlers<'enrollAgent' | 'agentCheckIn' | 'reportCommandResults'> = {
  async enrollAgent(req) {
    return req.server.gateway.enroll(req, req.body)
  },

  async agentCheckIn(req) {
    return req.server.gateway.checkIn(req, req.body)
  },

  async reportCommandResults(req) {
    return req.server.gateway.reportResults(req, req.body)
  },
}
