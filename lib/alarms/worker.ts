// The outbox worker: delivers queued alarms to their destinations, at least once, in
// record order per destination, with retries and backoff, and records every attempt.
//
// Each destination has at most one "lane" running: it delivers that destination's pending
// deliveries in outbox order, one request (or one batch, or one socket write of syslog
// lines) in flight at a time, and stops at the first one that must wait (a retry later).
// Lanes of different destinations run side by side. A lane reads a page of deliveries and
// their records with one query each; outcomes are written in batches (one transaction, one
// statement per kind of outcome); a crash before a batch is written only means those
// deliveries are made again, which at-least-once allows. Nothing is written as delivered
// before the receiver acknowledged it.
import crypto from 'node:crypto'
import type { AlarmOutbox, AttemptRecord, DestinationRow, FailureEvents, OutboxItem, TimeRange } from './ports.js'
import type { AuditTrailRow } from '../events/ports.js'
import type { Log, UnitOfWork } from '../platform/ports.js'
import { eventCodes, eventOf } from '../event-codes.js'
import { allowList, keptResolver } from './address.js'
import { batchMode, sendRecord, sendSyslogBatch, sendWebhookBatch, unsealable, type MailOut, type Transports } from './deliver.js'
import { settingsOf, type StoredSettings } from './destinations.js'
import { auditView, eventViewOf } from '../events/views.js'
import { BATCH_ENVELOPE_BYTES, syslogLine, webhookPayload, type AlarmRecord, type DeliveryContext } from './format.js'
import { SyslogConnections, webhookAgents, type SendOutcome, type SyslogSettings, type WebhookSettings } from './transport.js'
import type { CacheRegistry } from '../platform/cache.js'

export const RETRY_BASE_MS = 10_000
export const RETRY_MAX_MS = 3600_000
export const GIVE_UP_MS = 24 * 3600_000
export const FAILURE_EVENT_CODE = eventCodes.alarmFailure.code
const POLL_MS = 250
/** Pending deliveries a lane reads at once (with their records, one query each). */
const PAGE = 1000
/** Outcomes kept before they are written (or FLUSH_MS, whichever comes first). */
const FLUSH_AT = 1000
const FLUSH_MS = 250
/** Syslog lines written to a socket at once (RFC 6587 frames back to back). */
const SYSLOG_LINES = 500
const SYSLOG_BYTES = 64 * 1024
const PRUNE_EVERY_MS = 3600_000
/** How long a tick queues the deliveries of events stored since, a slice at a time. */
const QUEUE_MS = 50
/**
 * Where destinations are leased (PostgreSQL), how often the heads are read again with nothing
 * new queued: a destination another process held is not among them, and its lease may run out
 * (that process died) while nothing new is queued for it.
 */
const LEASED_LOOK_MS = 5000
/** How long closing the app waits for deliveries in flight. */
export const STOP_BOUND_MS = 5000

/** The wait after failed attempt `attempt` (1-based): 10 s doubling, at most 1 h, ±10 % jitter. */
export function backoff(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(RETRY_BASE_MS * 2 ** Math.min(attempt - 1, 30), RETRY_MAX_MS)
  return Math.min(Math.round(base * (0.9 + 0.2 * random())), RETRY_MAX_MS)
}

/** Deliveries that failed for good together: one "Alarm delivery failure" event for them. */
interface Failure {
  destination: DestinationRow
  items: OutboxItem[]
  error: string
  attempt: number
  /** Set for a webhook batch: one event names the batch, not each delivery. */
  batchId?: string
}

/** The attempts of one send (one delivery, one batch, or syslog lines written together). */
interface Outcome {
  attempts: AttemptRecord[]
  /** Set when deliveries failed for good and "Alarm delivery failure" events are due. */
  failures?: Failure[]
}

interface Rows {
  /** As arrays of EVENT_FIELDS (db/event-rows.ts). */
  events: Map<number, unknown[]>
  audit: Map<number, AuditTrailRow>
  assets: Map<number, { id: number; created_ms: number; kind: string; body: string }>
}

/** Deliveries sent together and their serialized payloads (webhook bodies or syslog lines). */
interface Group {
  kind: 'webhook' | 'syslog'
  items: OutboxItem[]
  parts: string[]
  sentTime: number
  batchId: string
  /** Per delivery: whether its record is itself an "Alarm delivery failure" event. */
  aboutFailure: boolean[]
}

const feedNames = { events: 'event', audit: 'audit record', assets: 'asset message' } as const

export interface DeliveryDeps {
  outbox: AlarmOutbox
  events: FailureEvents
  uow: UnitOfWork
  log: Log
  mail: MailOut
  settings: { allowedHosts: string[]; denyPrivate: boolean; timeoutMs: number; deliveryDays: number }
  /** The app's caches, where the host lookups are kept (absent: a cache of its own). */
  caches?: CacheRegistry
}

export class DeliveryWorker {
  /** The worker's time; tests move it forward to make retries due. */
  clock: () => number = () => Date.now()
  private readonly lanes = new Map<string, Promise<void>>()
  /** The turns the timer started that have not ended. */
  private readonly ticks = new Set<Promise<number>>()
  /** Destinations whose lanes ran here: their claims are let go when the worker stops. */
  private readonly claimed = new Set<string>()
  private buffer: Outcome[] = []
  private lastFlush = performance.now()
  private timer: NodeJS.Timeout | undefined
  private paused = false
  private closing = false
  private closed = false
  private seenSeq = -1
  private nextDue = Infinity
  private recheck = true
  private lastPrune = -Infinity
  private readonly transports: Transports & { agents: ReturnType<typeof webhookAgents> }

  constructor(private readonly deps: DeliveryDeps) {
    const { allowedHosts, denyPrivate, timeoutMs } = deps.settings
    this.transports = {
      allow: allowList(allowedHosts, denyPrivate),
      syslog: new SyslogConnections(),
      agents: webhookAgents(),
      timeoutMs,
      resolve: keptResolver(undefined, undefined, undefined, deps.caches),
    }
  }

  start(intervalMs = POLL_MS): void {
    if (this.paused || this.closing || this.timer) return
    this.timer = setInterval(() => {
      const tick = this.tick().finally(() => this.ticks.delete(tick))
      this.ticks.add(tick)
    }, intervalMs).unref()
  }

  /**
   * Stops the timer: deliveries then happen only through turn() and drain() (tests).
   * Resolves once what the timer started has ended (a turn reading a remote database may be
   * in flight).
   */
  async pause(): Promise<void> {
    this.paused = true
    clearInterval(this.timer)
    this.timer = undefined
    await this.settled()
  }

  /** Resolves once the turns the timer started, and the lanes running, have ended. */
  private async settled(): Promise<void> {
    await Promise.all(this.ticks)
    await Promise.all([...this.lanes.values()])
  }

  resume(): void {
    this.paused = false
    this.start()
  }

  /** Destinations with a lane running now. */
  get active(): number {
    return this.lanes.size
  }

  /** Starts a lane for each destination whose next delivery is due; answers how many started. */
  async tick(): Promise<number> {
    if (this.closing) return 0
    const now = this.clock()
    const alarms = this.deps.outbox
    try {
      if (now - this.lastPrune >= PRUNE_EVERY_MS) {
        this.lastPrune = now
        // Finished deliveries and attempts are kept PRIME_RETENTION_DELIVERY_DAYS.
        await alarms.prune(now - this.deps.settings.deliveryDays * 86_400_000)
      }
      // The events stored since are queued first (the lanes queue more as they run low).
      await this.queueWaiting(QUEUE_MS)
      // Nothing queued since the last look and no retry due: nothing to do.
      const seq = await alarms.outboxSeq()
      if (!this.recheck && seq === this.seenSeq && now < this.nextDue) return 0
      this.seenSeq = seq
      this.recheck = false
      this.nextDue = alarms.release ? now + LEASED_LOOK_MS : Infinity
      let started = 0
      for (const head of await alarms.heads()) {
        const id = head.destination_id
        if (this.lanes.has(id)) continue
        if (head.next_attempt_ms > now) {
          this.nextDue = Math.min(this.nextDue, head.next_attempt_ms)
          continue
        }
        started++
        this.claimed.add(id)
        const lane = this.lane(id)
          .catch((err) => this.deps.log.error({ err, destinationId: id }, 'alarm delivery lane failed'))
          .finally(() => {
            this.lanes.delete(id)
            this.recheck = true
          })
        this.lanes.set(id, lane)
      }
      return started
    } catch (err) {
      this.deps.log.error({ err }, 'alarm delivery turn failed')
      return 0
    }
  }

  /** Starts what is due now and waits until those lanes have stopped. */
  async turn(): Promise<void> {
    this.recheck = true
    await this.tick()
    await Promise.all([...this.lanes.values()])
  }

  /** Turns until nothing is due now (deliveries waiting for a later retry stay queued). */
  async drain(): Promise<void> {
    for (;;) {
      this.recheck = true
      const started = await this.tick()
      if (started === 0 && this.lanes.size === 0) return
      await Promise.all([...this.lanes.values()])
    }
  }

  /**
   * Lets deliveries in flight finish (at most `boundMs`), writes their outcomes, lets go of
   * the destinations whose lanes have ended (another process takes them over at once) and
   * stops. A lane still sending keeps its claim until the claim expires.
   */
  async stop(boundMs = STOP_BOUND_MS): Promise<void> {
    this.closing = true
    clearInterval(this.timer)
    this.timer = undefined
    let timer: NodeJS.Timeout | undefined
    await Promise.race([this.settled(), new Promise((r) => (timer = setTimeout(r, boundMs)))])
    clearTimeout(timer)
    await this.flush()
    this.closed = true
    await this.release()
    this.transports.syslog.close()
    this.transports.agents.destroy()
  }

  private async release(): Promise<void> {
    const { outbox } = this.deps
    if (!outbox.release) return
    const ended = [...this.claimed].filter((id) => !this.lanes.has(id))
    this.claimed.clear()
    try {
      await Promise.all(ended.map((id) => outbox.release!(id)))
    } catch (err) {
      // Not let go: the claims expire on their own.
      this.deps.log.error({ err, destinations: ended.length }, 'could not let go of alarm destinations')
    }
  }

  private async lane(destinationId: string): Promise<void> {
    const alarms = this.deps.outbox
    let cursor = 0
    try {
      for (;;) {
        // Read again per page: a changed destination applies from the next page on.
        if (this.closing) return
        const dest = await alarms.byId(destinationId)
        if (!dest) return
        let items = await alarms.pendingAfter(destinationId, cursor, PAGE)
        if (items.length < PAGE && (await this.queueWaiting(0)) > 0) items = await alarms.pendingAfter(destinationId, cursor, PAGE)
        if (items.length === 0) return
        const rows = await this.rows(items)
        const settings = settingsOf(dest)
        for (let i = 0; i < items.length; ) {
          if (this.closing) return
          const now = this.clock()
          if (items[i].next_attempt_ms > now) return
          const group = this.group(dest, settings, items, i, now, rows)
          const outcome = group ? await this.deliverGroup(dest, settings, group, now) : await this.deliver(dest, items[i], now, this.recordOf(items[i], rows))
          const sent = group ? group.items : [items[i]]
          i += sent.length
          cursor = sent[sent.length - 1].id
          this.buffer.push(outcome)
          if (outcome.attempts.some((a) => a.outcome === 'retry')) return
          if (this.buffered() >= FLUSH_AT || performance.now() - this.lastFlush >= FLUSH_MS) await this.flush()
        }
        await this.flush()
      }
    } finally {
      await this.flush()
    }
  }

  /**
   * Queues the deliveries of the events stored since (db/alarms.ts queueEvents), a slice at a
   * time with other work let in between, until none waits or `ms` have passed (one slice at
   * least). Answers the deliveries queued.
   */
  private async queueWaiting(ms: number): Promise<number> {
    const alarms = this.deps.outbox
    const until = performance.now() + ms
    let rows = 0
    while (await alarms.eventsWaiting()) {
      rows += await alarms.queueEvents()
      if (performance.now() >= until) break
      await new Promise((r) => setImmediate(r))
    }
    return rows
  }

  private buffered(): number {
    let n = 0
    for (const o of this.buffer) n += o.attempts.length
    return n
  }

  /** The records of a page of deliveries: one query per feed. */
  private async rows(items: OutboxItem[]): Promise<Rows> {
    const ids = { events: [] as number[], audit: [] as number[], assets: [] as number[] }
    for (const item of items) ids[item.feed].push(item.record_id)
    const alarms = this.deps.outbox
    const [events, audit, assets] = await Promise.all([
      alarms.events(ids.events, createdRange(items, 'events')),
      alarms.auditRecords(ids.audit, createdRange(items, 'audit')),
      alarms.assetMessages(ids.assets),
    ])
    return {
      events: new Map(events.map((r) => [r[0] as number, r])),
      audit: new Map(audit.map((r) => [r.id, r])),
      assets: new Map(assets.map((r) => [r.id, r])),
    }
  }

  private recordOf(item: OutboxItem, rows: Rows): AlarmRecord | null {
    if (item.feed === 'events') {
      const row = rows.events.get(item.record_id)
      return row ? { feed: 'events', event: eventViewOf(row) } : null
    }
    if (item.feed === 'audit') {
      const row = rows.audit.get(item.record_id)
      return row ? { feed: 'audit', auditTrail: auditView(row) } : null
    }
    const row = rows.assets.get(item.record_id)
    return row ? { feed: 'assets', asset: JSON.parse(row.body), createdMs: row.created_ms } : null
  }

  /**
   * The deliveries from `start` that go out together: for a webhook in batch mode, up to
   * its maxEvents and maxBytes; for syslog, up to 500 lines and 64 KiB in one write. Only
   * deliveries due now whose records exist, in order. Null: the one at `start` goes alone,
   * as one event per request (other destinations, or its record is gone).
   */
  private group(dest: DestinationRow, settings: StoredSettings, items: OutboxItem[], start: number, now: number, rows: Rows): Group | null {
    const sentTime = Math.floor(Date.now() / 1000)
    const destination = { id: dest.id, name: dest.name }
    let max: number
    let maxBytes: number
    let form: (record: AlarmRecord, ctx: DeliveryContext) => string
    if (dest.type === 'webhook') {
      const w = settings as WebhookSettings
      if (!batchMode(w) || unsealable(w)) return null
      max = w.batch!.maxEvents
      maxBytes = w.batch!.maxBytes - BATCH_ENVELOPE_BYTES
      form = (record, ctx) => JSON.stringify(webhookPayload(record, ctx))
    } else if (dest.type === 'syslog') {
      const sl = settings as SyslogSettings
      max = SYSLOG_LINES
      maxBytes = SYSLOG_BYTES
      form = (record, ctx) => syslogLine(record, ctx, sl.format, sl.facility)
    } else return null
    const group: Group = { items: [], parts: [], aboutFailure: [], sentTime, kind: dest.type, batchId: crypto.randomUUID() }
    let bytes = 0
    for (let i = start; i < items.length && group.items.length < max; i++) {
      const item = items[i]
      if (item.next_attempt_ms > now) break
      const record = this.recordOf(item, rows)
      if (!record) break
      const part = form(record, { deliveryId: item.delivery_id, attempt: item.attempts + 1, sentTime, destination })
      const size = Buffer.byteLength(part) + 1
      if (group.items.length > 0 && bytes + size > maxBytes) break
      bytes += size
      group.items.push(item)
      group.parts.push(part)
      group.aboutFailure.push(record.feed === 'events' && record.event.eventCode === FAILURE_EVENT_CODE)
    }
    return group.items.length ? group : null
  }

  /** Sends a group with one request (or one write): one outcome for all of its deliveries. */
  private async deliverGroup(dest: DestinationRow, settings: StoredSettings, group: Group, now: number): Promise<Outcome> {
    const t0 = performance.now()
    const head = group.items[0]
    const attempt = head.attempts + 1
    let result: SendOutcome
    try {
      result =
        group.kind === 'webhook'
          ? await sendWebhookBatch(settings as WebhookSettings, { id: dest.id, name: dest.name }, group.parts, group.batchId, group.sentTime, this.transports)
          : await sendSyslogBatch(settings as SyslogSettings, group.parts, this.transports)
    } catch (err) {
      result = { outcome: 'failed', error: (err as Error).message.slice(0, 1000), code: 'delivery-failed' }
    }
    const batch = group.kind === 'webhook'
    if (result.outcome !== 'delivered') {
      this.deps.log.warn(
        {
          destinationId: dest.id,
          ...(batch ? { batchId: group.batchId } : {}),
          deliveryId: head.delivery_id,
          deliveries: group.items.length,
          attempt,
          outcome: result.outcome,
          code: result.code,
          detail: result.detail ?? result.error,
        },
        'alarm delivery attempt failed',
      )
    }
    const durationMs = Math.round((performance.now() - t0) * 1000) / 1000
    const wait = result.outcome === 'retry' ? Math.min(Math.max(backoff(attempt), result.retryAfterMs ?? 0), RETRY_MAX_MS) : 0
    const after = this.clock()
    const attempts = group.items.map((item) => this.settle(dest, item, now, durationMs, result, wait, after))
    const out: Outcome = { attempts }
    const failedItems = group.items.filter((_item, k) => attempts[k].outcome === 'failed' && !group.aboutFailure[k])
    if (failedItems.length === 0) return out
    const error = attempts[group.items.indexOf(failedItems[0])].error ?? 'failed'
    if (batch) out.failures = [{ destination: dest, items: failedItems, error, attempt, batchId: group.batchId }]
    // Syslog lines are single deliveries written together: each that failed raises its own event, as one at a time would.
    else out.failures = failedItems.map((item) => ({ destination: dest, items: [item], error: attempts[group.items.indexOf(item)].error ?? 'failed', attempt: item.attempts + 1 }))
    return out
  }

  /** The attempt record of one delivery given the send's result: a retry past the 24 h mark fails for good. */
  private settle(dest: DestinationRow, item: OutboxItem, now: number, durationMs: number, result: SendOutcome, wait: number, after: number): AttemptRecord {
    const attempt = item.attempts + 1
    let outcome = result.outcome
    let error = result.error
    let nextAttemptMs: number | undefined
    if (outcome === 'retry') {
      const deadline = item.queued_ms + GIVE_UP_MS
      if (after >= deadline) {
        outcome = 'failed'
        error = `${error} (gave up after ${attempt} attempt${attempt === 1 ? '' : 's'} over 24 h)`
      } else nextAttemptMs = Math.min(after + wait, deadline)
    }
    return { outboxId: item.id, destinationId: dest.id, attempt, startedMs: now, durationMs, outcome, error, nextAttemptMs }
  }

  private async deliver(dest: DestinationRow, item: OutboxItem, now: number, record: AlarmRecord | null): Promise<Outcome> {
    const attempt = item.attempts + 1
    const t0 = performance.now()
    let result: SendOutcome
    if (!record) result = { outcome: 'failed', error: `The ${feedNames[item.feed]} ${item.record_id} no longer exists.`, code: 'delivery-failed' }
    else {
      try {
        const ctx = { deliveryId: item.delivery_id, attempt, sentTime: Math.floor(Date.now() / 1000), destination: { id: dest.id, name: dest.name } }
        result = (await sendRecord(this.deps.mail, dest, record, ctx, this.transports)).result
      } catch (err) {
        // Not a receiver's answer but settings or a record that cannot be sent: retrying would not help.
        result = { outcome: 'failed', error: (err as Error).message.slice(0, 1000), code: 'delivery-failed' }
      }
    }
    // The receiver's answer goes to the log only; the records keep the coarse outcome.
    if (result.outcome !== 'delivered') {
      this.deps.log.warn(
        { destinationId: dest.id, deliveryId: item.delivery_id, attempt, outcome: result.outcome, code: result.code, detail: result.detail ?? result.error },
        'alarm delivery attempt failed',
      )
    }
    const durationMs = Math.round((performance.now() - t0) * 1000) / 1000
    const wait = result.outcome === 'retry' ? Math.min(Math.max(backoff(attempt), result.retryAfterMs ?? 0), RETRY_MAX_MS) : 0
    const a = this.settle(dest, item, now, durationMs, result, wait, this.clock())
    const out: Outcome = { attempts: [a] }
    // A failure to deliver an "Alarm delivery failure" raises no further one: two broken
    // destinations would otherwise report each other's failures forever.
    const aboutFailure = record?.feed === 'events' && record.event.eventCode === FAILURE_EVENT_CODE
    if (a.outcome === 'failed' && !aboutFailure) out.failures = [{ destination: dest, items: [item], error: a.error ?? 'failed', attempt }]
    return out
  }

  /** Writes the outcomes gathered so far in one transaction, with the failure events they raise. */
  async flush(): Promise<void> {
    if (this.closed || this.buffer.length === 0) return
    const batch = this.buffer
    this.buffer = []
    this.lastFlush = performance.now()
    const { uow, outbox, events } = this.deps
    try {
      await uow.run(async () => {
        const pending = await outbox.recordAttempts(batch.flatMap((o) => o.attempts))
        for (const o of batch) {
          for (const f of o.failures ?? []) {
            // A delivery cancelled meanwhile (its destination removed) raises nothing.
            const items = f.items.filter((item) => pending.has(item.id))
            if (items.length === 0) continue
            const last = o.attempts[o.attempts.length - 1]
            await events.record(last.startedMs + Math.round(last.durationMs), [
              { ...eventOf('alarmFailure'), entityId: 'Prime server', details: failureText(f, items).slice(0, 65536), alarmDestinationId: f.destination.id },
            ])
          }
        }
      })
    } catch (err) {
      // Not written: these deliveries stay pending and are made again.
      this.deps.log.error({ err, outcomes: batch.length }, 'could not record alarm delivery outcomes')
    }
  }
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`

/** The details of an "Alarm delivery failure" event: one delivery, or one webhook batch. */
function failureText(f: Failure, items: OutboxItem[]): string {
  const d = f.destination
  const to = `to alarm destination "${d.name}" (${d.type}) failed for good after ${plural(f.attempt, 'attempt')}: ${f.error}`
  if (f.batchId === undefined) {
    const item = items[0]
    return `Delivery ${item.delivery_id} of ${feedNames[item.feed]} ${item.record_id} ${to}`
  }
  const first = items[0]
  const last = items[items.length - 1]
  const which =
    items.length === 1
      ? `delivery ${first.delivery_id}`
      : `deliveries ${first.delivery_id} (${feedNames[first.feed]} ${first.record_id}) to ${last.delivery_id} (${feedNames[last.feed]} ${last.record_id})`
  return `Batch ${f.batchId} of ${items.length} deliver${items.length === 1 ? 'y' : 'ies'}, ${which}, ${to}`
}

/** The creation times of a page's records of `feed`, when the storage gave every one's. */
function createdRange(items: OutboxItem[], feed: 'events' | 'audit'): TimeRange | undefined {
  let fromMs = Number.POSITIVE_INFINITY
  let toMs = Number.NEGATIVE_INFINITY
  for (const item of items) {
    if (item.feed !== feed) continue
    if (item.record_ms == null) return undefined
    fromMs = Math.min(fromMs, item.record_ms)
    toMs = Math.max(toMs, item.record_ms)
  }
  return fromMs <= toMs ? { fromMs, toMs } : undefined
}
