// The storage the insight service needs; db/insights.ts implements it on SQLite.
import type { InsightsRepo } from '../../db/insights.js'
import type { Async } from '../../db/unit-of-work.js'

export type {
  ClassificationRows,
  ErrorTotalsRows,
  HostRow,
  LoggedAgentRow,
  PolicyTestRows,
  UncommonRows,
  ViolationRows,
  VulnerableRows,
} from '../../db/insights.js'

/**
 * The aggregates behind the insights, each one call answering rows, and the kept answers
 * (`cacheGet`, `cachePut`, `invalidate`). The long ones (`policyTest`, `whitelistViolations`)
 * pace themselves inside the implementation, a slice of rows at a time between turns of the
 * event loop, rather than by a call per row; they run outside any unit of work.
 */
export type InsightStore = Async<
  Pick<
    InsightsRepo,
    | 'cacheGet'
    | 'cachePut'
    | 'invalidate'
    | 'loggedAgents'
    | 'connectedCount'
    | 'policyTest'
    | 'errorTotals'
    | 'uncommonPeripherals'
    | 'vulnerablePeripherals'
    | 'whitelistViolations'
    | 'classification'
  >
>
