// Catches the event and audit indexes up (db/event-index.ts) in the background: slices of
// about 20 ms one after another while behind, then every half second. It starts working
// once a list wants it (db/event-queries.ts) and pauses while the texts are read.
import type { Loop } from '../platform/loops.js'
import type { IndexCatchUp } from './ports.js'

const IDLE_MS = 500

/** Per process: the indexes' in-memory parts (texts, kinds) are this process's. */
export function eventIndexLoop(queries: IndexCatchUp): Loop {
  let timer: NodeJS.Timeout | undefined
  let immediate: NodeJS.Immediate | undefined
  let stopped = true
  const schedule = (more: boolean) => {
    if (stopped) return
    if (more) immediate = setImmediate(tick).unref()
    else timer = setTimeout(tick, IDLE_MS).unref()
  }
  const tick = () => {
    timer = immediate = undefined
    schedule(queries.indexSlice())
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
  }
}
