import { invalidField } from '../lib/errors.js'
import { date } from '../lib/listing.js'
import { iso } from '../lib/time.js'
import type { Handlers } from './types.js'
import { uncommonInsightName } from '../db/insights.js'

const DAY_MS = 86_400_000
const CACHE_MS = 3_600_000
// A reload this soon after the last computation answers it: a burst of clicks computes once.
const RELOAD_MS = 10_000
const ERROR_RANGE_DAYS = 366
const VIOLATION_DAYS = 30

const dateAlone = (value: string | undefined) => value !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(value.trim())

/** `[FromDate, ToDate]` of errorTotal: a date alone spans its whole UTC day; 7 days up to now by default. */
function errorRange(fromText: string | undefined, toText: string | undefined, now: number): { from: number; to: number } {
  const toStart = date(toText, 'ToDate')
  const to = toStart === undefined ? now : dateAlone(toText) ? toStart + DAY_MS - 1 : toStart
  const from = date(fromText, 'FromDate') ?? to - 7 * DAY_MS
  if (from > to) throw invalidField('query', 'FromDate', `is after ToDate (${iso(from)} > ${iso(to)})`)
  if (to - from > ERROR_RANGE_DAYS * DAY_MS) throw invalidField('query', 'FromDate', `must be at most ${ERROR_RANGE_DAYS} days before ToDate`)
  return { from, to }
}

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
    const { repos, config } = req.server
    const total = repos.insights.connectedCount()
    return { recordsTotal: total, recordsFiltered: total, disconnectAfterSeconds: config.agents.disconnectSeconds, data: repos.insights.loggedAgents() }
  },

  async getPolicyTest(req) {
    const evaluatedTime = iso(Date.now())
    return { evaluatedTime, ...(await req.server.repos.insights.policyTest()) }
  },

  async getAgentsErrorTotal(req) {
    const { from, to } = errorRange(req.query.FromDate, req.query.ToDate, Date.now())
    return req.server.repos.insights.errorTotals(from, to)
  },

  async getUncommonPeripherals(req) {
    const { repos, config } = req.server
    const maxHosts = config.agents.uncommonPeripheralMaxHosts
    return repos.insights.cached(uncommonInsightName(maxHosts), CACHE_MS, () => repos.insights.uncommonPeripherals(maxHosts))
  },

  async reloadUncommonPeripherals(req) {
    const { repos, config } = req.server
    const maxHosts = config.agents.uncommonPeripheralMaxHosts
    return repos.insights.cached(uncommonInsightName(maxHosts), RELOAD_MS, () => repos.insights.uncommonPeripherals(maxHosts))
  },

  async getVulnerablePeripherals(req) {
    const { insights } = req.server.repos
    return insights.cached('vulnerablePeripherals', CACHE_MS, () => insights.vulnerablePeripherals())
  },

  async reloadVulnerablePeripherals(req) {
    const { insights } = req.server.repos
    return insights.cached('vulnerablePeripherals', RELOAD_MS, () => insights.vulnerablePeripherals())
  },

  async getUniqueWhitelistViolation(req) {
    const now = Date.now()
    return { computedTime: iso(now), ...(await req.server.repos.insights.whitelistViolations(now - VIOLATION_DAYS * DAY_MS, now)) }
  },

  async getAgentsClassificationSummary(req) {
    return { computedTime: iso(Date.now()), ...req.server.repos.insights.classification() }
  },
}
