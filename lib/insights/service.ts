// The risk insights: which are kept and for how long, the date rules of the error totals,
// and the answers' times. Takes plain inputs, so it runs without Fastify.
import { invalidField } from '../errors.js'
import { date } from '../listing.js'
import type { UnitOfWork } from '../platform/ports.js'
import { iso } from '../time.js'
import type { InsightStore } from './ports.js'
import { uncommonInsightName, VULNERABLE_INSIGHT } from './rules.js'
import { classificationView, errorTotalsView, loggedAgentView, policyTestView, uncommonView, violationsView, vulnerableView } from './views.js'

export { uncommonInsightName, VULNERABLE_INSIGHT } from './rules.js'

const DAY_MS = 86_400_000
/** A kept insight is answered for an hour. */
const CACHE_MS = 3_600_000
// A reload this soon after the last computation answers it: a burst of clicks computes once.
const RELOAD_MS = 10_000
const ERROR_RANGE_DAYS = 366
const VIOLATION_DAYS = 30

export interface InsightDeps {
  insights: InsightStore
  uow: UnitOfWork
  /** When an agent not heard from is disconnected (PRIME_AGENT_DISCONNECT_SECONDS). */
  disconnectSeconds: number
  /** Peripheral models on at most this many hosts are uncommon (PRIME_UNCOMMON_PERIPHERAL_MAX_HOSTS). */
  uncommonMaxHosts: number
  now?: () => number
}

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

export function insightService(deps: InsightDeps) {
  const { insights, uow } = deps
  const now = deps.now ?? Date.now

  /**
   * The kept answer of an insight when it is younger than `maxAgeMs`, else computes, keeps
   * and answers it, in one unit of work: the aggregate and its detail queries see the same
   * data, and concurrent callers are served one after the other (the later ones find the
   * fresh answer).
   */
  async function kept<T extends object>(name: string, maxAgeMs: number, compute: () => Promise<T>): Promise<T & { computedTime: string }> {
    const at = now()
    const fresh = (hit: { computed_ms: number; result: string } | undefined) => hit !== undefined && at - hit.computed_ms < maxAgeMs && hit.computed_ms <= at
    const hit = await insights.cacheGet(name)
    if (fresh(hit)) return JSON.parse(hit!.result)
    return uow.run(async () => {
      const again = await insights.cacheGet(name)
      if (fresh(again)) return JSON.parse(again!.result)
      const result = { computedTime: iso(at), ...(await compute()) }
      await insights.cachePut(name, at, JSON.stringify(result))
      return result
    })
  }

  const uncommon = (maxAgeMs: number) => {
    const maxHosts = deps.uncommonMaxHosts
    return kept(uncommonInsightName(maxHosts), maxAgeMs, async () => uncommonView(await insights.uncommonPeripherals(maxHosts)))
  }
  const vulnerable = (maxAgeMs: number) => kept(VULNERABLE_INSIGHT, maxAgeMs, async () => vulnerableView(await insights.vulnerablePeripherals()))

  return {
    async loggedAgents() {
      const total = await insights.connectedCount()
      return { recordsTotal: total, recordsFiltered: total, disconnectAfterSeconds: deps.disconnectSeconds, data: (await insights.loggedAgents()).map(loggedAgentView) }
    },

    async policyTest() {
      const evaluatedTime = iso(now())
      return { evaluatedTime, ...policyTestView(await insights.policyTest()) }
    },

    /** Error totals between two dates as the query gives them (strings; a date alone is its whole UTC day). */
    async errorTotals(fromText: string | undefined, toText: string | undefined) {
      const { from, to } = errorRange(fromText, toText, now())
      return errorTotalsView(from, to, await insights.errorTotals(from, to))
    },

    /** Kept for an hour. */
    uncommonPeripherals: () => uncommon(CACHE_MS),
    /** Computed again unless the kept answer is a few seconds old. */
    reloadUncommonPeripherals: () => uncommon(RELOAD_MS),
    vulnerablePeripherals: () => vulnerable(CACHE_MS),
    reloadVulnerablePeripherals: () => vulnerable(RELOAD_MS),

    /** The last 30 days' whitelist violations, by model. */
    async whitelistViolations() {
      const at = now()
      const from = at - VIOLATION_DAYS * DAY_MS
      return { computedTime: iso(at), ...violationsView(from, at, await insights.whitelistViolations(from, at)) }
    },

    async classification() {
      return { computedTime: iso(now()), ...classificationView(await insights.classification()) }
    },
  }
}

export type InsightService = ReturnType<typeof insightService>
