// Asset discovery: the page of a query (assets mapped in lib/assets/views.ts), the overview
// and the distribution. Shared by the REST operations and the GraphQL endpoint; takes its
// ports and settings, so it runs without Fastify.
import type { components } from '../../generated/openapi.js'
import { ASSET_TYPES, type AssetCounts, type AssetQuery, type AssetSort, type AssetStore, type InsightCache } from './ports.js'
import { uncommonInsightName } from '../insights/rules.js'
import { uncommonView } from '../insights/views.js'
import { iso } from '../time.js'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { riskWords, TYPE_NAMES, type AssetView } from './views.js'

type Schemas = components['schemas']
type TypeCode = AssetView['type']

export interface AssetDeps {
  assets: AssetStore
  insights: InsightCache
  /** Peripheral models on at most this many hosts are rare (the uncommon-peripherals insight). */
  uncommonMaxHosts: number
  /** An asset first seen within this many hours is new. */
  newHours: number
}

// The uncommon-peripherals insight as its own operation keeps it: computed at most hourly.
const RARE_CACHE_MS = 3_600_000
// The overview and the distribution read every asset: their counts are kept this long (a
// dashboard polling both costs one reading of the fleet), and are then computed again in
// slices while the counts last computed are answered.
const SUMMARY_CACHE_MS = 30_000

const modelsOf = (r: { data: { vid: string; pid: string }[] }) => r.data.map((m) => `${m.vid}:${m.pid}`)
const isHost = (type: number) => type !== ASSET_TYPES.Peripheral

interface Summary {
  since: number
  counts: AssetCounts[]
  switches: { n: number; fresh: number }
}
type Kept<T> = { computedMs: number; result: T }

export interface AssetPage {
  recordsTotal: number
  recordsFiltered: number
  data: AssetView[]
}

/**
 * One keeps a computation under way by name, so that callers at the same time share it:
 * made once per app, it is what a database's cache is computed by.
 */
function underWay<T>() {
  const runs = new Map<string, Promise<T>>()
  return (name: string, make: () => Promise<T>): Promise<T> => {
    let run = runs.get(name)
    if (!run) {
      run = make()
      runs.set(name, run)
      const done = () => {
        runs.delete(name)
      }
      run.then(done, done)
    }
    return run
  }
}

/** What a walk in steps (a generator that yields between ranges of rows) answers, each step in a turn of its own. */
async function inTurns<T>(steps: Generator<void, T> | AsyncGenerator<void, T>): Promise<T> {
  let r = await steps.next()
  while (!r.done) {
    await nextTurn()
    r = await steps.next()
  }
  return r.value
}

export function assetService(deps: AssetDeps) {
  const { assets, insights, uncommonMaxHosts } = deps
  const rareRun = underWay<string[]>()
  const summaryRun = underWay<Summary & { computedTime: string }>()

  /**
   * `VID:PID` of the rare peripheral models. They are computed in slices (no request waits
   * behind the walk over a million peripherals); once an hour has passed, the models last
   * computed are answered while the next ones are computed.
   */
  async function rareModels(): Promise<string[]> {
    const name = uncommonInsightName(uncommonMaxHosts)
    const hit = (await insights.peek(name)) as Kept<{ data: { vid: string; pid: string }[] }> | undefined
    const now = Date.now()
    if (hit && now - hit.computedMs < RARE_CACHE_MS && hit.computedMs <= now) return modelsOf(hit.result)
    const run = rareRun(name, () =>
      insights.uncommonPeripheralsSliced(uncommonMaxHosts).then(async (r) => modelsOf((await insights.store(name, now, uncommonView(r))) as ReturnType<typeof uncommonView>)),
    )
    if (hit) {
      // Nobody waits for this refresh: its failure (the server closing) is not a request's.
      run.catch(() => {})
      return modelsOf(hit.result)
    }
    return run
  }

  /** The counts behind the overview and the distribution. */
  async function summary(): Promise<Summary & { computedTime: string }> {
    const name = `assetSummary:${deps.newHours}:${uncommonMaxHosts}`
    const hit = (await insights.peek(name)) as Kept<Summary & { computedTime: string }> | undefined
    const now = Date.now()
    if (hit && now - hit.computedMs < SUMMARY_CACHE_MS && hit.computedMs <= now) return hit.result
    const run = summaryRun(name, async () => {
      const rare = await rareModels()
      const since = now - deps.newHours * 3_600_000
      const counts = await inTurns(assets.summary(rare, since))
      const switches = await inTurns(assets.switches(since))
      return (await insights.store(name, now, { since, counts, switches })) as Summary & { computedTime: string }
    })
    if (hit) {
      run.catch(() => {})
      return hit.result
    }
    return run
  }

  /** A page of the assets a query matches, its views as a JSON array (`data`). */
  async function pageJson(q: Omit<AssetQuery, 'rare'>, sort: AssetSort, limit: number, offset: number): Promise<{ recordsTotal: number; recordsFiltered: number; data: string }> {
    const rare = await rareModels()
    const recordsTotal = await assets.total()
    const { filtered, json } = await assets.pageJson({ ...q, rare }, sort, limit, offset, uncommonMaxHosts)
    return { recordsTotal, recordsFiltered: filtered, data: json }
  }

  return {
    rareModels,

    pageJson,

    /** A page of the assets a query matches (the views as objects, for GraphQL's resolvers). */
    async page(q: Omit<AssetQuery, 'rare'>, sort: AssetSort, limit: number, offset: number): Promise<AssetPage> {
      const p = await pageJson(q, sort, limit, offset)
      return { recordsTotal: p.recordsTotal, recordsFiltered: p.recordsFiltered, data: JSON.parse(p.data) as AssetView[] }
    },

    async overview(): Promise<Schemas['AssetsOverview']> {
      const { since, counts, switches, computedTime } = await summary()
      const sum = (keep: (c: (typeof counts)[number]) => boolean) => counts.filter(keep).reduce((n, c) => n + c.n, 0)
      return {
        totalAssets: sum(() => true),
        newAssets: sum((c) => c.is_new === 1),
        totalHosts: sum((c) => isHost(c.type)),
        newHosts: sum((c) => isHost(c.type) && c.is_new === 1),
        totalPeripherals: sum((c) => !isHost(c.type)),
        newPeripherals: sum((c) => !isHost(c.type) && c.is_new === 1),
        networking: switches.n,
        newNetworking: switches.fresh,
        onlineAssets: sum((c) => c.is_online === 1),
        assetsRisk: {
          high: sum((c) => riskWords(c.risk_level) === 'High'),
          medium: sum((c) => riskWords(c.risk_level) === 'Medium'),
          low: sum((c) => riskWords(c.risk_level) === 'Low'),
        },
        newSinceTime: iso(since),
        computedTime,
      }
    },

    async distribution(): Promise<Schemas['AssetsDistribution']> {
      const { counts, computedTime } = await summary()
      const types = new Map<number, { count: number; online: number; high: number; medium: number; low: number }>()
      const levels = new Map<number, number>()
      for (const c of counts) {
        const t = types.get(c.type) ?? { count: 0, online: 0, high: 0, medium: 0, low: 0 }
        t.count += c.n
        if (c.is_online === 1) t.online += c.n
        t[riskWords(c.risk_level).toLowerCase() as 'high' | 'medium' | 'low'] += c.n
        types.set(c.type, t)
        levels.set(c.risk_level, (levels.get(c.risk_level) ?? 0) + c.n)
      }
      return {
        totalAssets: counts.reduce((n, c) => n + c.n, 0),
        byType: [...types.entries()]
          .sort(([a], [b]) => a - b)
          .map(([type, t]) => ({
            type: type as TypeCode,
            typeDescription: TYPE_NAMES[type] ?? 'Unknown',
            count: t.count,
            online: t.online,
            risk: { high: t.high, medium: t.medium, low: t.low },
          })),
        byRiskLevel: [...levels.entries()].sort(([a], [b]) => b - a).map(([riskLevel, count]) => ({ riskLevel, riskIndicationString: riskWords(riskLevel), count })),
        computedTime,
      }
    },
  }
}

export type AssetService = ReturnType<typeof assetService>
