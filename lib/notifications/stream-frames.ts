// The notification stream's parts that hold no state of the hub (lib/notifications/stream.ts):
// the callers' and events' shapes, an event's rendering per caller, the counts, and the read
// of what changed.
import type { PassThrough } from 'node:stream'
import type { Maybe } from '../platform/maybe.js'
import type { Log } from '../platform/ports.js'
import type { GroupRow, HealthRow, NotificationFeed, RiskRow } from './ports.js'
import { countsView, groupView, healthView, riskView } from './views.js'

/** What the hub is given. */
export interface HubDeps {
  /**
   * The notifications as the hub reads them, as a streaming reader (one read of the change
   * number a few times a second, a few rows when something changed); each process runs its
   * own hub over the shared tables.
   */
  feed: NotificationFeed
  /** Runs `read` (reads of `feed`) as one snapshot (the rows and the change number agree while another process writes). */
  snapshot<T>(read: () => Promise<T>): Promise<T>
  /** The credential-change counter: a bump ends the streams whose credential no longer works. */
  authVersion: { readonly value: number; onBump(fn: () => unknown): void }
  /** Throws when the credential no longer works (revoked, expired, its account disabled). */
  authenticate(token: string, now: number): Maybe<unknown>
  /** When a session's access token ends, in ms (0: unknown). */
  tokenExpiry(token: string): number
  log: Log
}

/** The read state and open streams of one caller (an account or an integration token). */
export interface Caller {
  key: string
  riskMark: number
  healthMark: number
  streams: Set<Subscriber>
  /** The counts last sent, as JSON. */
  counts?: string
}

export interface Subscriber {
  caller: Caller
  out: PassThrough
  token: string
  expiry?: NodeJS.Timeout
  closed: boolean
}

export interface HubEvent {
  id: number
  at: number
  /** The event as this caller sees it (isRead, unread counts are the caller's). */
  frame(c: Caller): Maybe<string>
}

export const frame = (name: string, data: unknown, id?: number) => `${id === undefined ? '' : `id: ${id}\n`}event: ${name}\ndata: ${JSON.stringify(data)}\n\n`

export function riskEvent(r: RiskRow, related: number[], id: number): HubEvent {
  const data = riskView(r, false, related)
  let read: string | undefined, unread: string | undefined
  return {
    id,
    at: Date.now(),
    frame: (c) => (r.occurred_seq <= c.riskMark ? (read ??= frame('riskNotification', { ...data, isRead: true }, id)) : (unread ??= frame('riskNotification', data, id))),
  }
}

export function healthEvent(h: HealthRow, id: number): HubEvent {
  const data = healthView(h, false)
  let read: string | undefined, unread: string | undefined
  return {
    id,
    at: Date.now(),
    frame: (c) => (h.occurred_seq <= c.healthMark ? (read ??= frame('healthNotification', { ...data, isRead: true }, id)) : (unread ??= frame('healthNotification', data, id))),
  }
}

export function groupEvent(repo: NotificationFeed, g: GroupRow, id: number): HubEvent {
  // The counts' `unread` is the caller's: one rendering per distinct read mark.
  const byMark = new Map<number, string>()
  return {
    id,
    at: Date.now(),
    frame(c) {
      const mark = c.healthMark
      return (
        byMark.get(mark) ??
        repo.groupCounts(mark).then((counts) => {
          const text = frame(
            'group',
            groupView(
              g,
              counts.find((n) => n.group_name === g.name),
            ),
            id,
          )
          byMark.set(mark, text)
          return text
        })
      )
    },
  }
}

/** A caller's counts as JSON; `memo` shares the counting among callers with the same read marks. */
export function countsJson(repo: NotificationFeed, c: Caller, memo = new Map<string, Promise<string>>()): Promise<string> {
  const key = `${c.riskMark}:${c.healthMark}`
  let json = memo.get(key)
  if (!json) {
    json = Promise.all([repo.riskUnread(c.riskMark), repo.riskPinned(), repo.counter(), repo.healthCounts(c.healthMark)]).then(([unread, pinned, counter, health]) =>
      JSON.stringify(countsView({ unread, pinned, total: counter.risk_open }, health)),
    )
    memo.set(key, json)
  }
  return json
}

/**
 * What changed since the change number `since`, read as one snapshot: the rows and the change
 * number agree even if another process writes meanwhile. `reset` when more than `max` changed.
 */
export function readChanges(deps: Pick<HubDeps, 'feed' | 'snapshot'>, since: number, max: number) {
  const repo = deps.feed
  return deps.snapshot(async () => {
    const upTo = await repo.changeSeq()
    const risks = (await repo.riskChangedSince(since, max + 1)).filter((r) => r.change_seq <= upTo)
    const healths = (await repo.healthChangedSince(since, max + 1)).filter((h) => h.change_seq <= upTo)
    const groups = (await repo.groupsChangedSince(since)).filter((g) => g.change_seq <= upTo)
    const muted = new Set((await repo.groups()).filter((g) => g.muted).map((g) => g.name))
    const reset = risks.length + healths.length + groups.length > max
    // Each risk notification's latest events, as of the same snapshot (none for a reset).
    const related: number[][] = []
    if (!reset) for (const r of risks) related.push(await repo.relatedEvents(r.id))
    return { upTo, risks, related, healths, groups, muted, reset }
  })
}
