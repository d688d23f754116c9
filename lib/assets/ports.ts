// The storage asset discovery needs: the assets (db/assets.ts) and the insight cache where
// the rare models and the counts are kept (db/insights.ts). Handlers that name a query's
// parts take their types from here.
import type { AssetCounts, AssetQuery, AssetSort } from '../../db/assets.js'

export type { AssetCounts, AssetField, AssetQuery, AssetRow, AssetSort, Condition } from '../../db/assets.js'

export interface AssetStore {
  /** How many assets there are. */
  total(): Promise<number>
  /**
   * A page of the assets a query matches, with how many match: their views
   * (lib/assets/views.ts, `maxHosts` as there) as a JSON array, made where the page is read
   * (a reader thread), so that a page of 10,000 costs the event loop one copy of its text.
   */
  pageJson(q: AssetQuery, sort: AssetSort, limit: number, offset: number, maxHosts: number): Promise<{ filtered: number; json: string }>
  /**
   * The counts of every asset by type, risk level, online and new, read a range of rows at
   * a time: a generator that yields between ranges so that the caller lets other work run
   * in between (a walk over a million rows), not a promise per row. SQLite's is synchronous;
   * a database server's answers each range through a Promise.
   */
  summary(rare: string[], since: number): Generator<void, AssetCounts[]> | AsyncGenerator<void, AssetCounts[]>
  /** Switches the agents report, and those first reported since `since`. */
  switches(since: number): Promise<{ n: number; fresh: number }>
}

/** The insight cache, and the rare peripheral models computed in slices. */
export type { UncommonRows } from '../../db/insights.js'
import type { UncommonRows } from '../../db/insights.js'

export interface InsightCache {
  /** The kept result of an insight, however old, with the time it was computed. */
  peek(name: string): Promise<{ computedMs: number; result: object } | undefined>
  /** Keeps a result computed at `computedMs`; answers it with its computedTime. */
  store(name: string, computedMs: number, result: object): Promise<object>
  /** The peripheral models plugged into at most `maxHosts` hosts. */
  uncommonPeripheralsSliced(maxHosts: number): Promise<UncommonRows>
}
