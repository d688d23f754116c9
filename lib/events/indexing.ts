// Catches the event and audit indexes up (db/event-index.ts) in the background: slices of
// about 4 ms one after another while behind, then every half second. It starts working
// once a list wants it (db/event-queries.ts) and pauses while the texts are read. A slice
// holds up every request that arrives meanwhile: at 10 connections on one core, slices of
// 20 ms were most of the p99 of the fastest lists.
import type { Loop } from '../platform/loops.js'
import type { IndexCatchUp } from './ports.js'

const IDLE_MS = 500
/** Milliseconds of indexing in one turn of the event loop. */
export const SLICE_MS = 4

/** Per process: the indexes' in-memory parts (texts, kinds) are this process's. */
export function eventIndexLoop(queries: IndexCatchUp, sliceMs = SLICE_MS): Loop {
  let timer: NodeJS.Timeout | undefined
  let immediate: NodeJS.Immediate | undefined
  let stopped = true
  // Since the last report (stats): the slices that found work, their time and the longest.
  let slices = 0
  let busyMs = 0
  let maxMs = 0
  const schedule = (more: boolean) => {
    if (stopped) return
    if (more) immediate = setImmediate(tick).unref()
    else timer = setTimeout(tick, IDLE_MS).unref()
  }
  const tick = () => {
    timer = immediate = undefined
    const t0 = performance.now()
    const more = queries.indexSlice(sliceMs)
    const took = performance.now() - t0
    if (more || took > 1) {
      slices++
      busyMs += took
      if (took > maxMs) maxMs = took
    }
    schedule(more)
  }
  return {
    name: 'event-index',
    singleton: false,
    start() {
      stopped = false
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
      if (slices === 0) return undefined
      const r = { slices, busyMs: Math.round(busyMs), maxSliceMs: Math.round(maxMs * 10) / 10 }
      slices = busyMs = maxMs = 0
      return r
    },
  }
}
