// The outbox worker: delivers queued alarms to their destinations, at least once, in
// record order per destination, with retries and backoff, and records every attempt.
//
// Each destination has at most one "lane" running: it delivers that destination's pending
// deliveries one after the other in outbox order, and stops at the first one that must wait
// (a retry later). Lanes of different destinations run side by side. Outcomes are written
// in batches (one transaction per batch, not per delivery); a crash before a batch is
// written only means those deliveries are made again, which at-least-once allows.
import type { AttemptRecord, DestinationRow, OutboxItem } from '../../db/alarms.js'
import type { Log, UnitOfWork } from '../platform/ports.js'
import { eventCodes, eventOf } from '../event-codes.js'
import { allowList } from './address.js'
import { sendRecord, type MailOut, type Transports } from './deliver.js'
import { auditView, eventView } from '../events/views.js'
import type { AlarmRecord } from './format.js'
import type { AlarmOutbox, FailureEvents } from './ports.js'
import { SyslogConnections, webhookAgents, type SendOutcome } from './transport.js'

export const RETRY_BASE_MS = 10_000
export const RETRY_MAX_MS = 3600_000
export const GIVE_UP_MS = 24 * 3600_000
export const FAILURE_EVENT_CODE = eventCodes.alarmFailure.code
const POLL_MS = 250
const BATCH = 100
const FLUSH_MS = 250
const PRUNE_EVERY_MS = 3600_000
/** How long closing the app waits for deliveries in flight. */
export const STOP_BOUND_MS = 5000

/** The wait after failed attempt `attempt` (1-based): 10 s doubling, at most 1 h, ±10 % jitter. */
export function backoff(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(RETRY_BASE_MS * 2 ** Math.min(attempt - 1, 30), RETRY_MAX_MS)
  return Math.min(Math.round(base * (0.9 + 0.2 * random())), RETRY_MAX_MS)
}

interface Outcome {
  attempt: AttemptRecord
  /** Set when the delivery failed for good and an "Alarm delivery failure" event is due. */
  failure?: { destination: DestinationRow; item: OutboxItem; error: string }
}

const feedNames = { events: 'event', audit: 'audit record', assets: 'asset message' } as const

export interface DeliveryDeps {
  outbox: AlarmOutbox
  events: FailureEvents
  uow: UnitOfWork
  log: Log
  mail: MailOut
  settings: { allowedHosts: string[]; denyPrivate: boolean; timeoutMs: number; deliveryDays: number }
}

export class DeliveryWorker {
  /** The worker's time; tests move it forward to make retries due. */
  clock: () => number = () => Date.now()
  private readonly lanes = new Map<string, Promise<void>>()
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
    this.transports = { allow: allowList(allowedHosts, denyPrivate), syslog: new SyslogConnections(), agents: webhookAgents(), timeoutMs }
  }

  start(intervalMs = POLL_MS): void {
    if (this.paused || this.closing || this.timer) return
    this.timer = setInterval(() => void this.tick(), intervalMs).unref()
  }

  /** Stops the timer: deliveries then happen only through turn() and drain() (tests). */
  pause(): void {
    this.paused = true
    clearInterval(this.timer)
    this.timer = undefined
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
      // Nothing queued since the last look and no retry due: nothing to do.
      const seq = await alarms.outboxSeq()
      if (!this.recheck && seq === this.seenSeq && now < this.nextDue) return 0
      this.seenSeq = seq
      this.recheck = false
      this.nextDue = Infinity
      let started = 0
      for (const head of await alarms.heads()) {
        const id = head.destination_id
        if (this.lanes.has(id)) continue
        if (head.next_attempt_ms > now) {
          this.nextDue = Math.min(this.nextDue, head.next_attempt_ms)
          continue
        }
        started++
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

  /** Lets deliveries in flight finish (at most `boundMs`), writes their outcomes and stops. */
  async stop(boundMs = STOP_BOUND_MS): Promise<void> {
    this.closing = true
    clearInterval(this.timer)
    this.timer = undefined
    let timer: NodeJS.Timeout | undefined
    await Promise.race([Promise.all([...this.lanes.values()]), new Promise((r) => (timer = setTimeout(r, boundMs)))])
    clearTimeout(timer)
    await this.flush()
    this.closed = true
    this.transports.syslog.close()
    this.transports.agents.destroy()
  }

  private async lane(destinationId: string): Promise<void> {
    const alarms = this.deps.outbox
    let cursor = 0
    try {
      for (;;) {
        // Read again per batch: a changed destination applies from the next batch on.
        if (this.closing) return
        const dest = await alarms.byId(destinationId)
        if (!dest) return
        const items = await alarms.pendingAfter(destinationId, cursor, BATCH)
        if (items.length === 0) return
        for (const item of items) {
          if (this.closing) return
          const now = this.clock()
          if (item.next_attempt_ms > now) return
          const outcome = await this.deliver(dest, item, now)
          cursor = item.id
          this.buffer.push(outcome)
          if (outcome.attempt.outcome === 'retry') return
          if (this.buffer.length >= BATCH || performance.now() - this.lastFlush >= FLUSH_MS) await this.flush()
        }
        await this.flush()
      }
    } finally {
      await this.flush()
    }
  }

  private async record(item: OutboxItem): Promise<AlarmRecord | null> {
    const alarms = this.deps.outbox
    if (item.feed === 'events') {
      const row = await alarms.event(item.record_id)
      return row ? { feed: 'events', event: eventView(row) } : null
    }
    if (item.feed === 'audit') {
      const row = await alarms.auditRecord(item.record_id)
      return row ? { feed: 'audit', auditTrail: auditView(row) } : null
    }
    const row = await alarms.assetMessage(item.record_id)
    return row ? { feed: 'assets', asset: JSON.parse(row.body), createdMs: row.created_ms } : null
  }

  private async deliver(dest: DestinationRow, item: OutboxItem, now: number): Promise<Outcome> {
    const attempt = item.attempts + 1
    const t0 = performance.now()
    const record = await this.record(item)
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
    let outcome = result.outcome
    let error = result.error
    let nextAttemptMs: number | undefined
    if (outcome === 'retry') {
      const deadline = item.queued_ms + GIVE_UP_MS
      const after = this.clock()
      if (after >= deadline) {
        outcome = 'failed'
        error = `${error} (gave up after ${attempt} attempt${attempt === 1 ? '' : 's'} over 24 h)`
      } else {
        const wait = Math.min(Math.max(backoff(attempt), result.retryAfterMs ?? 0), RETRY_MAX_MS)
        nextAttemptMs = Math.min(after + wait, deadline)
      }
    }
    const out: Outcome = {
      attempt: { outboxId: item.id, destinationId: dest.id, attempt, startedMs: now, durationMs, outcome, error, nextAttemptMs },
    }
    // A failure to deliver an "Alarm delivery failure" raises no further one: two broken
    // destinations would otherwise report each other's failures forever.
    const aboutFailure = record?.feed === 'events' && record.event.eventCode === FAILURE_EVENT_CODE
    if (outcome === 'failed' && !aboutFailure) out.failure = { destination: dest, item, error: error ?? 'failed' }
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
        for (const o of batch) {
          const pending = await outbox.recordAttempt(o.attempt)
          if (!o.failure || !pending) continue
          const { destination: d, item, error } = o.failure
          await events.record(o.attempt.startedMs + Math.round(o.attempt.durationMs), [
            {
              ...eventOf('alarmFailure'),
              entityId: 'Prime server',
              details:
                `Delivery ${item.delivery_id} of ${feedNames[item.feed]} ${item.record_id} to alarm destination "${d.name}" (${d.type}) failed for good after ${o.attempt.attempt} attempt${o.attempt.attempt === 1 ? '' : 's'}: ${error}`.slice(
                  0,
                  65536,
                ),
              alarmDestinationId: d.id,
            },
          ])
        }
      })
    } catch (err) {
      // Not written: these deliveries stay pending and are made again.
      this.deps.log.error({ err, outcomes: batch.length }, 'could not record alarm delivery outcomes')
    }
  }
}
