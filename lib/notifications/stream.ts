// The live stream of notification changes (server-sent events). One hub serves every
// subscriber: it looks at the change counter a few times a second (one read of one row),
// reads what changed once, keeps the last events for resumption, and writes each event to
// every subscriber, rendered once per distinct read state rather than once per subscriber.
// Its reads answer through Promises (on both backends): its looks, the streams' openings and
// the read-alls run one at a time, in the order asked for, so that each stream gets its
// events in order.
import { isPromise } from '../platform/maybe.js'
import type { HealthRow, RiskRow } from './ports.js'
import { healthView, riskView } from './views.js'
import { PassThrough } from 'node:stream'
import type { Principal } from '../auth.js'
import { problem } from '../errors.js'
import { type Caller, countsJson, frame, groupEvent, type HubDeps, type HubEvent, healthEvent, readChanges, riskEvent, type Subscriber } from './stream-frames.js'

export type { HubDeps } from './stream-frames.js'

export const STREAM_LIMITS = {
  /** Events kept for resumption with Last-Event-ID. */
  replayEvents: 1000,
  replayMs: 3_600_000,
  perCaller: 5,
  heartbeatMs: 15_000,
  pollMs: 250,
  /**
   * How often every subscriber's credential is checked again in any case (an integration
   * token's expiry); revocations are acted on as soon as they are written.
   */
  revalidateMs: 5000,
  /** A subscriber this far behind is dropped; it resumes with Last-Event-ID. */
  backlogBytes: 1024 * 1024,
  /** Read-all changes sent item by item up to this many; beyond, a `reset`. */
  readItems: 100,
}

/** The key of a caller's read state and stream limit. */
export const callerKey = (p: Principal) => `${p.kind === 'session' ? 'user' : 'token'}:${p.id}`

/** Who opens a stream, and how its connection tells the hub it ended. */
export interface StreamOpening {
  principal: Principal
  token: string
  lastEventId: string | undefined
  /** Called with the function that ends the stream when the client goes away. */
  onClose(end: () => void): void
  /** No connection to hold open (an in-process request): the stream ends after its opening. */
  endAtOnce: boolean
}

/**
 * Checks a stream's credential, calling `refused` with the reason when it no longer works;
 * a Promise that never rejects where the check answers through one (PostgreSQL).
 */
function checkCredential(deps: HubDeps, token: string, now: number, refused: (reason: 'token-expired' | 'token-revoked') => void): Promise<unknown> | undefined {
  const refuse = (err: unknown) => refused(/expired/i.test((err as Error).message) ? 'token-expired' : 'token-revoked')
  try {
    const checked = deps.authenticate(token, now)
    return isPromise(checked) ? checked.catch(refuse) : undefined
  } catch (err) {
    refuse(err)
    return undefined
  }
}

export function notificationHub(deps: HubDeps) {
  const repo = deps.feed
  const callers = new Map<string, Caller>()
  const events: HubEvent[] = []
  // Event ids continue across restarts (they start from the clock), so that an id from
  // before a restart is recognized as older than the replay buffer.
  let lastId = Date.now() * 1000
  /** Events up to this id are no longer kept (or were never seen by this process). */
  let floorId = lastId
  /** The change number read up to (undefined until the hub's first look). */
  let seenSeq: number | undefined
  let subscribers = 0
  const timers: NodeJS.Timeout[] = []
  let stopped = false
  const authVersion = deps.authVersion
  let authSeen = authVersion.value

  /** The hub's work that reads and then writes to streams: one at a time, in the order asked for. */
  let queue: Promise<unknown> = Promise.resolve()
  const serial = <T>(work: () => Promise<T>): Promise<T> => {
    const run = queue.then(work)
    queue = run.catch(() => {})
    return run
  }

  function write(s: Subscriber, text: string) {
    if (s.closed) return
    s.out.write(text)
    if (s.out.writableLength + s.out.readableLength > STREAM_LIMITS.backlogBytes) close(s)
  }

  function close(s: Subscriber, last?: string) {
    if (s.closed) return
    if (last) s.out.write(last)
    s.closed = true
    clearTimeout(s.expiry)
    s.caller.streams.delete(s)
    if (s.caller.streams.size === 0) callers.delete(s.caller.key)
    subscribers--
    s.out.end()
  }

  function keep(e: HubEvent) {
    events.push(e)
    const old = e.at - STREAM_LIMITS.replayMs
    let drop = 0
    while (drop < events.length && (events.length - drop > STREAM_LIMITS.replayEvents || events[drop].at < old)) drop++
    if (drop) floorId = events.splice(0, drop)[drop - 1].id
  }

  /** Every caller's counts (or one caller's), sent where they changed. */
  async function sendCounts(only?: Caller) {
    const memo = new Map<string, Promise<string>>()
    for (const c of only ? [only] : [...callers.values()]) {
      const counts = await countsJson(repo, c, memo)
      if (counts === c.counts) continue
      c.counts = counts
      const text = `event: counts\ndata: ${counts}\n\n`
      for (const s of c.streams) write(s, text)
    }
  }

  async function broadcast(e: HubEvent) {
    for (const c of [...callers.values()]) {
      const text = await e.frame(c)
      for (const s of c.streams) write(s, text)
    }
  }

  /**
   * Reads what changed since the last look, keeps it as events and sends them. Cheap when
   * nothing changed: one read of the change number. Runs in its turn (see `serial`).
   */
  async function look() {
    const seq = await repo.changeSeq()
    // The first look: what changed before it is not this hub's to send.
    seenSeq ??= seq
    if (seq === seenSeq) return
    const changed = await readChanges(deps, seenSeq, STREAM_LIMITS.replayEvents)
    seenSeq = changed.upTo
    const { risks, related, healths, groups, muted } = changed
    if (changed.reset) {
      // More than can be kept: everything before is unknown now; consoles reload their lists.
      events.length = 0
      floorId = ++lastId
      const reset = frame('reset', { reason: 'Too many notifications changed at once; reload the lists.' })
      for (const c of callers.values()) for (const s of c.streams) write(s, reset)
      await sendCounts()
      return
    }
    type Change = { seq: number; make: (id: number) => HubEvent | undefined }
    const all: Change[] = [
      ...risks.map((r, i) => ({ seq: r.change_seq, make: (id: number) => riskEvent(r, related[i], id) })),
      // Muted groups' notifications are recorded, not streamed.
      ...healths.map((h) => ({ seq: h.change_seq, make: (id: number) => (muted.has(h.group_name) ? undefined : healthEvent(h, id)) })),
      ...groups.map((g) => ({ seq: g.change_seq, make: (id: number) => groupEvent(repo, g, id) })),
    ].sort((a, b) => a.seq - b.seq)
    for (const change of all) {
      const e = change.make(lastId + 1)
      if (!e) continue
      lastId = e.id
      keep(e)
      await broadcast(e)
    }
    await sendCounts()
  }

  /** A look waiting for its turn: callers asking meanwhile share it (it starts after they asked). */
  let waiting: Promise<void> | undefined
  /** Looks in its turn; resolves once what changed before the call has been sent. */
  const poll = (): Promise<void> =>
    (waiting ??= serial(() => {
      waiting = undefined
      return look()
    }))

  /**
   * Ends the stream with `reauthenticate` when the caller's credential no longer works.
   * Where the checks answer through Promises (PostgreSQL), answers one that resolves once
   * every stream refused is closed (it never rejects).
   */
  function revalidate(now = Date.now()): Promise<void> | undefined {
    const checks: Promise<unknown>[] = []
    for (const c of [...callers.values()]) {
      for (const s of [...c.streams]) {
        const checked = checkCredential(deps, s.token, now, (reason) => close(s, frame('reauthenticate', { reason })))
        if (checked) checks.push(checked)
      }
    }
    return checks.length ? Promise.allSettled(checks).then(() => undefined) : undefined
  }

  /**
   * Ends the streams whose credential a write has ended: one by this process right after
   * it (onBump), one by another process on the same database at the next look where the
   * counter sees other connections' commits (SQLite's data_version); on PostgreSQL, where
   * it does not, at the periodic revalidation (revalidateMs).
   */
  function checkRevocations(): Promise<void> | undefined {
    if (subscribers === 0) return
    const version = authVersion.value
    if (version === authSeen) return
    authSeen = version
    return revalidate()
  }
  // The revoking write waits for what this answers (db/auth-version.ts), so that its request
  // is answered after the streams it ends are closed, on either backend. Always a check of
  // its own: one the poll timer began between the write and its commit read the credential
  // before the commit (on PostgreSQL, another connection) and may have found it still valid.
  authVersion.onBump(() => {
    try {
      if (subscribers === 0) return
      authSeen = authVersion.value
      return revalidate()
    } catch (err) {
      deps.log.error({ err }, 'notification stream revalidation failed')
    }
  })

  function heartbeat() {
    for (const c of callers.values()) for (const s of c.streams) write(s, ': heartbeat\n\n')
  }

  const tooMany = () => problem('rate-limited', `At most ${STREAM_LIMITS.perCaller} notification streams may be open per caller; close one first.`, { headers: { 'retry-after': '5' } })

  return {
    poll,
    heartbeat,
    revalidate,
    get subscribers() {
      return subscribers
    },

    /** Opens a stream for the caller; answers the stream to send (server-sent events). */
    open({ principal, token, lastEventId, onClose, endAtOnce }: StreamOpening): Promise<PassThrough> {
      const key = callerKey(principal)
      if ((callers.get(key)?.streams.size ?? 0) >= STREAM_LIMITS.perCaller) return Promise.reject(tooMany())
      // Told at once: the client may go away while the opening waits for its turn.
      let s: Subscriber | undefined
      let gone = false
      onClose(() => {
        gone = true
        if (s) close(s)
      })
      return serial(async () => {
        // What changed up to now is kept before the replay, so nothing is sent twice or missed.
        await look()
        let c = callers.get(key)
        if (!c) {
          const m = await repo.marks(key)
          c = { key, riskMark: m.risk_seq, healthMark: m.health_seq, streams: new Set() }
        }
        if (c.streams.size >= STREAM_LIMITS.perCaller) throw tooMany()
        // The opening is read first, then written as the stream joins, with no wait between:
        // no event can come in between (the hub's other work waits for its turn).
        const opening = ['retry: 5000\n\n']
        if (lastEventId !== undefined) {
          const last = Number(lastEventId)
          if (!Number.isSafeInteger(last) || last > lastId || last < floorId) {
            opening.push(frame('reset', { reason: `Last-Event-ID ${lastEventId} is unknown or older than the replay buffer; reload the lists.` }))
          } else {
            for (const e of events) if (e.id > last) opening.push(await e.frame(c))
          }
        }
        // The caller's counts are current after the look; a caller new to the hub has none yet.
        const counts = c.counts ?? (await countsJson(repo, c))
        const out = new PassThrough()
        if (gone || stopped) {
          out.end()
          return out
        }
        c.counts = counts
        opening.push(`event: counts\ndata: ${counts}\n\n`)
        // Its last stream may have closed meanwhile (which forgets the caller).
        callers.set(key, c)
        const joined: Subscriber = { caller: c, out, token, closed: false }
        s = joined
        c.streams.add(joined)
        subscribers++
        for (const text of opening) out.write(text)
        out.on('error', () => close(joined))
        if (principal.kind === 'session') {
          // The access token's own end; revocations are found by revalidate().
          const exp = deps.tokenExpiry(token)
          const inMs = Math.max(0, exp - Date.now())
          joined.expiry = setTimeout(() => close(joined, frame('reauthenticate', { reason: 'token-expired' })), Math.min(inMs, 2 ** 31 - 1)).unref()
        }
        if (endAtOnce) setImmediate(() => close(joined))
        return out
      })
    },

    /**
     * After a read-all: the caller's streams (by `callerKey`) see the notifications it marked
     * read. Resolves when they are sent; a failure is logged.
     */
    markedRead(key: string, kind: 'risk' | 'health', from: number, to: number): Promise<void> {
      const c = callers.get(key)
      if (!c) return Promise.resolve()
      if (kind === 'risk') c.riskMark = Math.max(c.riskMark, to)
      else c.healthMark = Math.max(c.healthMark, to)
      return serial(async () => {
        const rows = kind === 'risk' ? await repo.riskBetween(from, to, STREAM_LIMITS.readItems + 1) : await repo.healthBetween(from, to, STREAM_LIMITS.readItems + 1)
        if (rows.length > STREAM_LIMITS.readItems) {
          const reset = frame('reset', { reason: 'Many notifications were marked read; reload the lists.' })
          for (const s of c.streams) write(s, reset)
        } else {
          // Oldest first, like every other change.
          for (const r of rows.reverse()) {
            const text =
              kind === 'risk'
                ? frame('riskNotification', riskView(r as RiskRow, true, await repo.relatedEvents(r.id)), ++lastId)
                : frame('healthNotification', healthView(r as HealthRow, true), ++lastId)
            for (const s of c.streams) write(s, text)
          }
        }
        await sendCounts(c)
      }).catch((err) => deps.log.error({ err }, 'notification stream: the notifications marked read could not be sent'))
    },

    /** Takes the first look (what changed before it is not sent), then looks every pollMs. */
    async start() {
      stopped = false
      try {
        await poll()
      } catch (err) {
        deps.log.error({ err }, 'notification stream poll failed')
      }
      timers.push(
        setInterval(() => {
          try {
            checkRevocations()
          } catch (err) {
            deps.log.error({ err }, 'notification stream revalidation failed')
          }
          poll().catch((err) => deps.log.error({ err }, 'notification stream poll failed'))
        }, STREAM_LIMITS.pollMs).unref(),
        setInterval(heartbeat, STREAM_LIMITS.heartbeatMs).unref(),
        setInterval(() => {
          try {
            revalidate()
          } catch (err) {
            deps.log.error({ err }, 'notification stream revalidation failed')
          }
        }, STREAM_LIMITS.revalidateMs).unref(),
      )
    },

    /** Ends every stream (the server is closing), then waits for the work in hand; clients resume with Last-Event-ID. */
    async stop() {
      stopped = true
      for (const t of timers) clearInterval(t)
      timers.length = 0
      for (const c of [...callers.values()]) for (const s of [...c.streams]) close(s)
      await queue
    },
  }
}
export type NotificationHub = ReturnType<typeof notificationHub>
