// Keeps the trigram indexes of changing rows compact (see db/fts-upkeep.ts): once a minute
// each index is measured, and one whose leftovers are due is merged into one segment a few
// pages at a time. A merge of the agents' index at 100,000 agents is about 3 s of work in a
// thousand steps of a few milliseconds; requests are served between slices of it (4 ms each).
// And keeps the in-memory agent search (db/agent-texts.ts) following the agents' changes
// between requests, in slices of the same length.
import { UPKEPT_INDEXES, type UpkeptIndex } from '../db/fts-upkeep.js'
import type { Loop } from './platform/loops.js'
import { SliceStats } from './platform/slices.js'

/**
 * The trigram indexes' upkeep (db/fts-upkeep.ts). Synchronous: a merge runs as steps of a
 * few milliseconds inside a 4 ms slice, all in one turn of a timer (which never falls
 * inside a unit of work).
 */
export interface SearchIndexUpkeep {
  measure(name: UpkeptIndex): { segments: number; pages: number; due: boolean }
  /**
   * Merges about `pages` pages of the index's segments; false once they are one. `begin`:
   * the first step of a merge, which gathers every segment into it.
   */
  mergeStep(name: UpkeptIndex, pages: number, begin: boolean): boolean
}

/** The in-memory agent search (db/agent-texts.ts); synchronous like the upkeep above. */
export interface AgentSearchUpkeep {
  /** Builds the dictionaries if they are not; answers how long it took (ms). */
  warm(): number
  /** Drops the change notes every search has applied. */
  prune(): unknown
  /** Applies change notes for about `budgetMs`; answers whether some are left. */
  catchUp(budgetMs: number): boolean
}

interface UpkeepLog {
  info(details: object, message: string): void
  warn(details: object, message: string): void
}

const CHECK_MS = 60_000
/** Pages a merge step writes (about 2 ms each; a step now and then takes 20). */
const STEP_PAGES = 16
/**
 * A slice of steps ends after this long; the next one starts after PAUSE_MS (a third of the
 * time, as with slices of 10 ms every 20 ms, but no request waits behind more than a slice of 4).
 */
const SLICE_MS = 4
const PAUSE_MS = 8

export function searchUpkeep({ upkeep, log }: { upkeep: SearchIndexUpkeep; log: UpkeepLog }) {
  let merging: { name: UpkeptIndex; steps: number; started: number } | null = null
  return {
    get merging() {
      return merging?.name ?? null
    },
    /** Starts merging the first index that is due (none while one is being merged). */
    check(): UpkeptIndex | null {
      if (merging) return merging.name
      for (const name of UPKEPT_INDEXES) {
        const m = upkeep.measure(name)
        if (!m.due) continue
        log.info({ index: name, segments: m.segments, pages: m.pages }, 'merging a search index')
        merging = { name, steps: 0, started: Date.now() }
        return name
      }
      return null
    },
    /** One slice of the merge under way; false once it is done (or failed: the next check retries). */
    slice(budgetMs = SLICE_MS): boolean {
      const m = merging
      if (!m) return false
      const until = performance.now() + budgetMs
      try {
        do {
          m.steps++
          if (!upkeep.mergeStep(m.name, STEP_PAGES, m.steps === 1)) {
            log.info({ index: m.name, steps: m.steps, ms: Date.now() - m.started, ...upkeep.measure(m.name) }, 'merged a search index')
            merging = null
            return false
          }
        } while (performance.now() < until)
      } catch (err) {
        // Busy (another process writes) or closing: the next check starts again.
        log.warn({ err, index: m.name }, 'merging a search index stopped')
        merging = null
        return false
      }
      return true
    },
  }
}

/**
 * Checks every minute, merges in slices; the timers never keep the process alive. One
 * process at a time: the indexes are the database's.
 */
export function searchUpkeepLoop(deps: { upkeep: SearchIndexUpkeep; log: UpkeepLog }, checkMs = CHECK_MS): Loop {
  const upkeep = searchUpkeep(deps)
  let timer: NodeJS.Timeout | undefined
  let closed = false
  const slices = new SliceStats()
  const run = () => {
    if (closed) return
    const t0 = performance.now()
    const more = upkeep.slice()
    slices.add(performance.now() - t0)
    if (more) setTimeout(run, PAUSE_MS).unref()
  }
  return {
    name: 'search-upkeep',
    singleton: true,
    stats: () => slices.take(),
    start() {
      closed = false
      timer = setInterval(() => {
        if (closed || upkeep.merging) return
        try {
          if (upkeep.check()) run()
        } catch (err) {
          deps.log.warn({ err }, 'measuring the search indexes failed')
        }
      }, checkMs).unref()
    },
    stop() {
      closed = true
      clearInterval(timer)
    },
  }
}

/** How often the agent search looks for change notes to apply between requests. */
const CATCH_UP_MS = 250

/**
 * The in-memory agent search of this process (db/agent-texts.ts): built before the first
 * request rather than in it; the notes of changed agents applied between requests, in
 * slices of SLICE_MS, so that a search seldom finds many to apply first; the notes it has
 * applied pruned every minute.
 */
export function agentSearchLoop({ texts, log }: { texts: AgentSearchUpkeep; log: UpkeepLog }, checkMs = CHECK_MS, catchUpMs = CATCH_UP_MS): Loop {
  let timers: NodeJS.Timeout[] = []
  let closed = false
  let catchingUp = false
  const slices = new SliceStats()
  const slice = () => {
    if (closed) {
      catchingUp = false
      return
    }
    const t0 = performance.now()
    let more = false
    try {
      more = texts.catchUp(SLICE_MS)
    } catch (err) {
      log.warn({ err }, 'applying the agent search notes failed')
    }
    slices.add(performance.now() - t0)
    if (more) setTimeout(slice, PAUSE_MS).unref()
    else catchingUp = false
  }
  return {
    name: 'agent-search',
    singleton: false,
    stats: () => slices.take(),
    start() {
      closed = false
      const ms = texts.warm()
      if (ms > 100) log.info({ ms: Math.round(ms) }, 'agent search built')
      timers = [
        setInterval(() => {
          if (catchingUp) return
          catchingUp = true
          slice()
        }, catchUpMs).unref(),
        setInterval(() => {
          try {
            texts.prune()
          } catch (err) {
            log.warn({ err }, 'pruning the agent search notes failed')
          }
        }, checkMs).unref(),
      ]
    },
    stop() {
      closed = true
      for (const t of timers) clearInterval(t)
    },
  }
}
