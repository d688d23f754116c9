// Catches the event and audit indexes up (db/event-engine/event-index.ts) in the background: slices one
// after another while behind, then every half second. It starts working once a list wants
// it (db/event-engine/event-queries.ts) and pauses while the texts are read. A slice holds up every
// request that arrives meanwhile, so its budget is asked for before each one
// (lib/platform/slices.ts): about 4 ms while requests are in flight, 20 ms when idle.
import type { Loop } from '../platform/loops.js'
import { LONG_SLICE_MS, SHORT_SLICE_MS, SliceStats } from '../platform/slices.js'
import type { IndexCatchUp } from './ports.js'

const IDLE_MS = 500
/** Milliseconds of indexing in one turn of the event loop while requests are in flight. */
export const SLICE_MS = SHORT_SLICE_MS

/**
 * Per process: the indexes' in-memory parts (texts, kinds) are this process's. `sliceMs`
 * answers the budget of the next slice (the app's loops: short while requests are in flight).
 */
export function eventIndexLoop(queries: IndexCatchUp, sliceMs: () => number = () => SLICE_MS): Loop {
  let timer: NodeJS.Timeout | undefined
  let immediate: NodeJS.Immediate | undefined
  let stopped = true
  // Since the last report (stats): the slices that found work, their time, the longest, and
  // the longest of those given a short budget (requests were in flight).
  const slices = new SliceStats()
  let maxShortMs = 0
  const schedule = (more: boolean) => {
    if (stopped) return
    if (more) immediate = setImmediate(tick).unref()
    else timer = setTimeout(tick, IDLE_MS).unref()
  }
  const tick = () => {
    timer = immediate = undefined
    const budget = sliceMs()
    const t0 = performance.now()
    const more = queries.indexSlice(budget)
    const took = performance.now() - t0
    if (more || took > 1) {
      slices.add(took)
      if (budget < LONG_SLICE_MS && took > maxShortMs) maxShortMs = took
    }
    schedule(more)
  }
  return {
    name: 'event-index',
    singleton: false,
    start() {
      stopped = false
      queries.warm()
      // Wanted while waiting for the next turn: the turn comes now.
      queries.onIndexWanted(() => {
        if (!timer) return
        clearTimeout(timer)
        timer = undefined
        schedule(true)
      })
      schedule(false)
    },
    stop() {
      stopped = true
      queries.onIndexWanted(undefined)
      clearTimeout(timer)
      if (immediate) clearImmediate(immediate)
      timer = immediate = undefined
    },
    stats() {
      const r = slices.take()
      if (!r) return undefined
      const stats = { ...r, maxShortSliceMs: Math.round(maxShortMs * 10) / 10 }
      maxShortMs = 0
      return stats
    },
  }
}
