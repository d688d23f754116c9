// This node's metrics in Prometheus' text format (GET /metrics, an Administrator's
// credential), through prom-client. Per node by design: a scraper asks every node. Counted
// as requests are answered: requests by operation and status with a latency histogram.
// Read when scraped: the process (event loop delay, memory, CPU), the expensive reads, the
// database pool on PostgreSQL, the alarm outbox's backlog and lag per destination, the
// background loops this node runs, and its caches' counts (lib/platform/cache.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import client from 'prom-client'
import type { DestinationBacklog } from '../alarms/ports.js'
import { registerCacheMetrics } from './cache-metrics.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** This node's metrics registry (lib/platform/metrics.ts). */
    metrics: { text(): Promise<string>; contentType: string }
  }
}

/** Seconds: from a cheap read (a millisecond) to the read budget (30 s). */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

/** Decorates `app.metrics`; answers what counts a request once it is answered, for the pipeline's onResponse hook (lib/platform/pipeline.ts). */
export function registerMetrics(app: FastifyInstance): (req: FastifyRequest, reply: FastifyReply) => void {
  const registry = new client.Registry()
  client.collectDefaultMetrics({ register: registry, prefix: 'prime_' })
  const tally = requestTally(registry)
  const answered = (req: FastifyRequest, reply: FastifyReply) => tally(req.op?.operationId ?? 'none', reply.statusCode, reply.elapsedTime / 1000)

  const readers = new client.Gauge({
    name: 'prime_expensive_reads',
    help: 'Expensive reads (asset discovery, streamed pages, exports in a computed order) running and waiting.',
    labelNames: ['state'],
    registers: [registry],
    collect() {
      const s = app.readers.stats()
      readers.set({ state: 'running' }, s.running)
      readers.set({ state: 'waiting' }, s.waiting)
    },
  })
  const readerTotals = new client.Gauge({
    name: 'prime_expensive_reads_total',
    help: "Expensive reads since start: done, interrupted at their budget, refused (busy, or past the caller's share).",
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      const s = app.readers.stats()
      readerTotals.set({ outcome: 'done' }, s.done)
      readerTotals.set({ outcome: 'interrupted' }, s.interrupted)
      readerTotals.set({ outcome: 'refused_busy' }, s.refusedBusy)
      readerTotals.set({ outcome: 'refused_share' }, s.refusedCredential)
    },
  })

  const pool = app.storage.poolStats
  if (pool) {
    const clients = new client.Gauge({
      name: 'prime_db_pool_clients',
      help: "The database pools' clients (PostgreSQL): total, idle, and requests waiting for one; by pool (requests, expensive reads).",
      labelNames: ['pool', 'state'],
      registers: [registry],
      collect() {
        for (const p of pool()) {
          clients.set({ pool: p.pool, state: 'total' }, p.total)
          clients.set({ pool: p.pool, state: 'idle' }, p.idle)
          clients.set({ pool: p.pool, state: 'waiting' }, p.waiting)
        }
      },
    })
  }

  // One read of the backlog serves both gauges of a scrape (a registry collects its metrics at once).
  let backlog: { at: number; rows: Promise<DestinationBacklog[]> } | undefined
  const backlogNow = () => {
    const now = Date.now()
    if (!backlog || now - backlog.at > 1000) backlog = { at: now, rows: Promise.resolve(app.storage.alarmDelivery.backlog()) }
    return backlog.rows
  }
  const labelsOf = (d: DestinationBacklog) => ({ destination: d.destination, name: d.name, type: d.type })
  const pending = new client.Gauge({
    name: 'prime_alarm_outbox_pending',
    help: 'Alarm deliveries waiting, by destination (counted up to 100000).',
    labelNames: ['destination', 'name', 'type'],
    registers: [registry],
    async collect() {
      const rows = await backlogNow()
      pending.reset()
      for (const d of rows) pending.set(labelsOf(d), d.pending)
    },
  })
  const lag = new client.Gauge({
    name: 'prime_alarm_outbox_lag_seconds',
    help: "Age of each destination's oldest delivery waiting (0 when none waits).",
    labelNames: ['destination', 'name', 'type'],
    registers: [registry],
    async collect() {
      const rows = await backlogNow()
      const now = Date.now()
      lag.reset()
      for (const d of rows) lag.set(labelsOf(d), d.oldest === null ? 0 : Math.max(0, (now - d.oldest) / 1000))
    },
  })

  const loops = new client.Gauge({
    name: 'prime_loop_running',
    help: 'Background loops on this node: 1 while it runs the loop (for a singleton on PostgreSQL: while it holds its lease), else 0.',
    labelNames: ['loop', 'singleton'],
    registers: [registry],
    collect() {
      for (const l of app.loops.list()) loops.set({ loop: l.name, singleton: String(l.singleton) }, l.running && l.leaseHeld !== false ? 1 : 0)
    },
  })

  registerCacheMetrics(app, registry)

  app.decorate('metrics', { text: () => registry.metrics(), contentType: registry.contentType })
  return answered
}

interface Tally {
  statuses: Map<number, number>
  /** Answers per bucket (not cumulative), the last for those over every bound. */
  buckets: Float64Array
  count: number
  sum: number
}

/**
 * Requests by operation and status, and their latency by operation, as two metrics of the
 * registry. Every request is counted with plain arithmetic on its operation's tally and the
 * samples are made when scraped: prom-client's labelled counters validate and hash their
 * labels at every call, which was most of what the metrics cost a small request.
 */
function requestTally(registry: client.Registry): (operation: string, status: number, seconds: number) => void {
  const byOp = new Map<string, Tally>()
  const counter = {
    name: 'prime_http_requests_total',
    help: 'Requests answered, by operation (the contract operationId; "none" for paths outside the contract) and status.',
    type: 'counter',
    aggregator: 'sum',
    async get() {
      const values = []
      for (const [operation, t] of byOp) for (const [status, value] of t.statuses) values.push({ labels: { operation, status: String(status) }, value })
      return { name: counter.name, help: counter.help, type: counter.type, aggregator: counter.aggregator, values }
    },
    reset: () => byOp.clear(),
  }
  const name = 'prime_http_request_duration_seconds'
  const histogram = {
    name,
    help: 'Time from a request received to its answer sent, by operation.',
    type: 'histogram',
    aggregator: 'sum',
    async get() {
      const values = []
      for (const [operation, t] of byOp) {
        let below = 0
        for (let i = 0; i <= BUCKETS.length; i++) {
          below += t.buckets[i]
          values.push({ metricName: `${name}_bucket`, labels: { le: i < BUCKETS.length ? BUCKETS[i] : '+Inf', operation }, value: below })
        }
        values.push({ metricName: `${name}_sum`, labels: { operation }, value: t.sum }, { metricName: `${name}_count`, labels: { operation }, value: t.count })
      }
      return { name, help: histogram.help, type: histogram.type, aggregator: histogram.aggregator, values }
    },
    reset: () => byOp.clear(),
  }
  registry.registerMetric(counter as unknown as client.Metric)
  registry.registerMetric(histogram as unknown as client.Metric)
  return (operation, status, seconds) => {
    let t = byOp.get(operation)
    if (!t) byOp.set(operation, (t = { statuses: new Map(), buckets: new Float64Array(BUCKETS.length + 1), count: 0, sum: 0 }))
    t.statuses.set(status, (t.statuses.get(status) ?? 0) + 1)
    let i = 0
    while (i < BUCKETS.length && seconds > BUCKETS[i]) i++
    t.buckets[i]++
    t.count++
    t.sum += seconds
  }
}
