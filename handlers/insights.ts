import type { Handlers } from './types.js'

export const insightsHandlers: Handlers<
  | 'getLoggedAgents'
  | 'getPolicyTest'
  | 'getAgentsErrorTotal'
  | 'getUncommonPeripherals'
  | 'reloadUncommonPeripherals'
  | 'getVulnerablePeripherals'
  | 'reloadVulnerablePeripherals'
  | 'getUniqueWhitelistViolation'
  | 'getAgentsClassificationSummary'
> = {
  async getLoggedAgents(req) {
    return req.server.services.insights.loggedAgents()
  },

  async getPolicyTest(req) {
    return req.server.services.insights.policyTest()
  },

  async getAgentsErrorTotal(req) {
    return req.server.services.insights.errorTotals(req.query.FromDate, req.query.ToDate)
  },

  async getUncommonPeripherals(req) {
    return req.server.services.insights.uncommonPeripherals()
  },

  async reloadUncommonPeripherals(req) {
    return req.server.services.insights.reloadUncommonPeripherals()
  },

  async getVulnerablePeripherals(req) {
    return req.server.services.insights.vulnerablePeripherals()
  },

  async reloadVulnerablePeripherals(req) {
    return req.server.services.insights.reloadVulnerablePeripherals()
  },

  async getUniqueWhitelistViolation(req) {
    return req.server.services.insights.whitelistViolations()
  },

  async getAgentsClassificationSummary(req) {
    return req.server.services.insights.classification()
  },
}
