// The live stream of notification changes (server-sent events). One hub serves every
// subscriber: it looks at the change counter a few times a second (one read of one row),
// reads what changed once, keeps the last events for resumption, and writes each event to
// every subscriber, rendered once per distinct read state rather than once per subscriber.
import { isPromise, type Maybe } from '../platform/maybe.js'
import { PassThrough } from 'node:stream'
import type { GroupRow, HealthRow, NotificationsRepo, RiskRow } from '../../db/notifications.js'
import type { Principal } from '../auth.js'
import { problem } from '../errors.js'
import type { Log } from '../platform/ports.js'
import { countsView, groupView, healthView, riskView } from './views.js'

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

/** The read state and open streams of one caller (an account or an integration token). */
interface Caller {
  key: string
  riskMark: number
  healthMark: number
  streams: Set<Subscriber>
  /** The counts last sent, as JSON. */
  counts?: string
}

interface Subscriber {
  caller: Caller
  out: PassThrough
  token: string
  expiry?: NodeJS.Timeout
  closed: boolean
}

interface HubEvent {
  id: number
  at: number
  /** The event as this caller sees it (isRead, unread counts are the caller's). */
  frame(c: Caller): string
}

/** The key of a caller's read state and stream limit. */
export const callerKey = (p: Principal) => `${p.kind === 'session' ? 'user' : 'token'}:${p.id}`

const frame = (name: string, data: unknown, id?: number) => `${id === undefined ? '' : `id: ${id}\n`}event: ${name}\ndata: ${JSON.stringify(data)}\n\n`

export interface HubDeps {
  /**
   * The notifications as the hub reads them: synchronously, as a streaming reader (one read
   * of the change counter a few times a second, a few rows when something changed); each
   * process runs its own hub over the shared tables.
   */
  feed: NotificationsRepo
  /** Runs `read` as one snapshot (the rows and the counter agree while another process writes). */
  snapshot<T>(read: () => T): T
  /** The credential-change counter: a bump ends the streams whose credential no longer works. */
  authVersion: { readonly value: number; onBump(fn: () => void): void }
  /** Throws when the credential no longer works (revoked, expired, its account disabled). */
  authenticate(token: string, now: number): Maybe<unknown>
  /** When a session's access token ends, in ms (0: unknown). */
  tokenExpiry(token: string): number
  log: Log
}

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

export function notificationHub(deps: HubDeps) {
  const repo = deps.feed
  const callers = new Map<string, Caller>()
  const events: HubEvent[] = []
  // Event ids continue across restarts (they start from the clock), so that an id from
  // before a restart is recognized as older than the replay buffer.
  let lastId = Date.now() * 1000
  /** Events up to this id are no longer kept (or were never seen by this process). */
  let floorId = lastId
  let seenSeq = repo.counter().seq
  let subscribers = 0
  const timers: NodeJS.Timeout[] = []
  const authVersion = deps.authVersion
  let authSeen = authVersion.value

  const caller = (key: string): Caller => {
    let c = callers.get(key)
    if (!c) {
      const m = repo.marks(key)
      c = { key, riskMark: m.risk_seq, healthMark: m.health_seq, streams: new Set() }
      callers.set(key, c)
    }
    return c
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

  function riskEvent(r: RiskRow, id: number): HubEvent {
    const data = riskView(r, false, repo.relatedEvents(r.id))
    let read: string | undefined, unread: string | undefined
    return {
      id,
      at: Date.now(),
      frame: (c) => (r.occurred_seq <= c.riskMark ? (read ??= frame('riskNotification', { ...data, isRead: true }, id)) : (unread ??= frame('riskNotification', data, id))),
    }
  }

  function healthEvent(h: HealthRow, id: number): HubEvent {
    const data = healthView(h, false)
    let read: string | undefined, unread: string | undefined
    return {
      id,
      at: Date.now(),
      frame: (c) => (h.occurred_seq <= c.healthMark ? (read ??= frame('healthNotification', { ...data, isRead: true }, id)) : (unread ??= frame('healthNotification', data, id))),
    }
  }

  function groupEvent(g: GroupRow, id: number): HubEvent {
    // The counts' `unread` is the caller's: one rendering per distinct read mark.
    const byMark = new Map<number, string>()
    return {
      id,
      at: Date.now(),
      frame(c) {
        let text = byMark.get(c.healthMark)
        if (!text) {
          text = frame(
            'group',
            groupView(
              g,
              repo.groupCounts(c.healthMark).find((n) => n.group_name === g.name),
            ),
            id,
          )
          byMark.set(c.healthMark, text)
        }
        return text
      },
    }
  }

  function keep(e: HubEvent) {
    events.push(e)
    const old = e.at - STREAM_LIMITS.replayMs
    let drop = 0
    while (drop < events.length && (events.length - drop > STREAM_LIMITS.replayEvents || events[drop].at < old)) drop++
    if (drop) floorId = events.splice(0, drop)[drop - 1].id
  }

  /** A caller's counts as JSON; `memo` shares the counting among callers with the same read marks. */
  function countsJson(c: Caller, memo = new Map<string, string>()): string {
    const key = `${c.riskMark}:${c.healthMark}`
    let json = memo.get(key)
    if (!json) {
      const risk = { unread: repo.riskUnread(c.riskMark), pinned: repo.riskPinned(), total: repo.counter().risk_open }
      json = JSON.stringify(countsView(risk, repo.healthCounts(c.healthMark)))
      memo.set(key, json)
    }
    return json
  }

  /** Every caller's counts (or one caller's), sent where they changed. */
  function sendCounts(only?: Caller) {
    const memo = new Map<string, string>()
    for (const c of only ? [only] : callers.values()) {
      const counts = countsJson(c, memo)
      if (counts === c.counts) continue
      c.counts = counts
      const text = `event: counts\ndata: ${counts}\n\n`
      for (const s of c.streams) write(s, text)
    }
  }

  function broadcast(e: HubEvent) {
    for (const c of callers.values()) for (const s of c.streams) write(s, e.frame(c))
  }

  /**
   * Reads what changed since the last look, keeps it as events and sends them. Cheap when
   * nothing changed: one read of the counter.
   */
  function poll() {
    const { seq } = repo.counter()
    if (seq === seenSeq) return
    const max = STREAM_LIMITS.replayEvents
    // One snapshot: the rows and the counter agree even if another process writes meanwhile.
    const changed = deps.snapshot(() => {
      const upTo = repo.counter().seq
      const risks = repo.riskChangedSince(seenSeq, max + 1).filter((r) => r.change_seq <= upTo)
      const healths = repo.healthChangedSince(seenSeq, max + 1).filter((h) => h.change_seq <= upTo)
      const groups = repo.groupsChangedSince(seenSeq).filter((g) => g.change_seq <= upTo)
      return {
        upTo,
        risks,
        healths,
        groups,
        muted: new Set(
          repo
            .groups()
            .filter((g) => g.muted)
            .map((g) => g.name),
        ),
      }
    })
    seenSeq = changed.upTo
    const { risks, healths, groups, muted } = changed
    if (risks.length + healths.length + groups.length > max) {
      // More than can be kept: everything before is unknown now; consoles reload their lists.
      events.length = 0
      floorId = ++lastId
      const reset = frame('reset', { reason: 'Too many notifications changed at once; reload the lists.' })
      for (const c of callers.values()) for (const s of c.streams) write(s, reset)
      sendCounts()
      return
    }
    type Change = { seq: number; make: (id: number) => HubEvent | undefined }
    const all: Change[] = [
      ...risks.map((r) => ({ seq: r.change_seq, make: (id: number) => riskEvent(r, id) })),
      // Muted groups' notifications are recorded, not streamed.
      ...healths.map((h) => ({ seq: h.change_seq, make: (id: number) => (muted.has(h.group_name) ? undefined : healthEvent(h, id)) })),
      ...groups.map((g) => ({ seq: g.change_seq, make: (id: number) => groupEvent(g, id) })),
    ].sort((a, b) => a.seq - b.seq)
    for (const change of all) {
      const e = change.make(lastId + 1)
      if (!e) continue
      lastId = e.id
      keep(e)
      broadcast(e)
    }
    sendCounts()
  }

  /** Ends the stream with `reauthenticate` when the caller's credential no longer works. */
  function revalidate(now = Date.now()) {
    for (const c of [...callers.values()]) {
      for (const s of [...c.streams]) {
        const refused = (err: unknown) => {
          const reason = /expired/i.test((err as Error).message) ? 'token-expired' : 'token-revoked'
          close(s, frame('reauthenticate', { reason }))
        }
        try {
          const checked = deps.authenticate(s.token, now)
          if (isPromise(checked)) checked.catch(refused)
        } catch (err) {
          refused(err)
        }
      }
    }
  }

  /**
   * Ends the streams whose credential a write has ended: one by this process right after
   * it (onBump), one by another process on the same database at the next look.
   */
  function checkRevocations() {
    if (subscribers === 0) return
    const version = authVersion.value
    if (version === authSeen) return
    authSeen = version
    revalidate()
  }
  authVersion.onBump(() => {
    try {
      checkRevocations()
    } catch (err) {
      deps.log.error({ err }, 'notification stream revalidation failed')
    }
  })

  function heartbeat() {
    for (const c of callers.values()) for (const s of c.streams) write(s, ': heartbeat\n\n')
  }

  return {
    poll,
    heartbeat,
    revalidate,
    get subscribers() {
      return subscribers
    },

    /** Opens a stream for the caller; answers the stream to send (server-sent events). */
    open({ principal, token, lastEventId, onClose, endAtOnce }: StreamOpening): PassThrough {
      const c = caller(callerKey(principal))
      if (c.streams.size >= STREAM_LIMITS.perCaller) {
        throw problem('rate-limited', `At most ${STREAM_LIMITS.perCaller} notification streams may be open per caller; close one first.`, { headers: { 'retry-after': '5' } })
      }
      // What changed up to now is kept before the replay, so nothing is sent twice or missed.
      poll()
      const out = new PassThrough()
      const s: Subscriber = { caller: c, out, token, closed: false }
      c.streams.add(s)
      subscribers++
      out.write('retry: 5000\n\n')
      if (lastEventId !== undefined) {
        const last = Number(lastEventId)
        if (!Number.isSafeInteger(last) || last > lastId || last < floorId) {
          out.write(frame('reset', { reason: `Last-Event-ID ${lastEventId} is unknown or older than the replay buffer; reload the lists.` }))
        } else {
          for (const e of events) if (e.id > last) out.write(e.frame(c))
        }
      }
      // The caller's counts are current after poll(); a caller new to the hub has none yet.
      c.counts ??= countsJson(c)
      out.write(`event: counts\ndata: ${c.counts}\n\n`)
      const end = () => close(s)
      onClose(end)
      out.on('error', end)
      if (principal.kind === 'session') {
        // The access token's own end; revocations are found by revalidate().
        const exp = deps.tokenExpiry(token)
        const inMs = Math.max(0, exp - Date.now())
        s.expiry = setTimeout(() => close(s, frame('reauthenticate', { reason: 'token-expired' })), Math.min(inMs, 2 ** 31 - 1)).unref()
      }
      if (endAtOnce) setImmediate(end)
      return out
    },

    /** After a read-all: the caller's streams (by `callerKey`) see the notifications it marked read. */
    markedRead(key: string, kind: 'risk' | 'health', from: number, to: number) {
      const c = callers.get(key)
      if (!c) return
      if (kind === 'risk') c.riskMark = Math.max(c.riskMark, to)
      else c.healthMark = Math.max(c.healthMark, to)
      const rows = kind === 'risk' ? repo.riskBetween(from, to, STREAM_LIMITS.readItems + 1) : repo.healthBetween(from, to, STREAM_LIMITS.readItems + 1)
      if (rows.length > STREAM_LIMITS.readItems) {
        const reset = frame('reset', { reason: 'Many notifications were marked read; reload the lists.' })
        for (const s of c.streams) write(s, reset)
      } else {
        // Oldest first, like every other change.
        for (const r of rows.reverse()) {
          const id = ++lastId
          const text = kind === 'risk' ? frame('riskNotification', riskView(r as RiskRow, true, repo.relatedEvents(r.id)), id) : frame('healthNotification', healthView(r as HealthRow, true), id)
          for (const s of c.streams) write(s, text)
        }
      }
      sendCounts(c)
    },

    start() {
      timers.push(
        setInterval(() => {
          try {
            checkRevocations()
            poll()
          } catch (err) {
            deps.log.error({ err }, 'notification stream poll failed')
          }
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

    /** Ends every stream (the server is closing); clients resume with Last-Event-ID. */
    stop() {
      for (const t of timers) clearInterval(t)
      timers.length = 0
      for (const c of [...callers.values()]) for (const s of [...c.streams]) close(s)
    },
  }
}
export type NotificationHub = ReturnType<typeof notificationHub>
