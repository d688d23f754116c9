// The event and audit indexes' catch-up (db/event-index.ts) as the queries want it: off
// until the first list, then a slice at a time from the app's loop (lib/events/indexing.ts),
// paused while the texts that text filters need are read.
import { setImmediate as pause } from 'node:timers/promises'
import type { RecordIndexer } from './event-index.js'
import type { DB } from './index.js'

export function indexCatchUp(db: DB, indexer: RecordIndexer) {
  let wanted = false
  let held = false
  /** Called when indexing becomes wanted, so that the loop need not wait for its next turn. */
  let wake: (() => void) | undefined
  /** While the texts are read (textsReady below). */
  let loadingTexts: Promise<void> | null = null

  return {
    /** One slice of indexing of about `budgetMs`; answers whether more is waiting. */
    indexSlice(budgetMs = 20): boolean {
      if (!wanted || !db.open || held || loadingTexts) return false
      let more = false
      try {
        const until = performance.now() + budgetMs
        do {
          more = indexer.step('events', 2048) + indexer.step('audit_trail', 2048) > 0
        } while (more && performance.now() < until)
      } catch {
        // Busy (another process writes) or closing: try again on the next turn.
        more = false
      }
      return more
    },
    /** Wants indexing in the background (the first list does it). */
    startIndexing() {
      if (wanted) return
      wanted = true
      wake?.()
    },
    // The documents and sources that text filters need are read on the first such query,
    // a slice at a time, with indexing paused meanwhile (the counts must stay at the mark
    // they are read at); other requests are answered between slices.
    /** Resolves once the events' texts are in memory; undefined when they are already. */
    textsReady(): Promise<void> | undefined {
      if (indexer.hasTexts()) return undefined
      loadingTexts ??= indexer.loadTextsGradually(pause).finally(() => {
        loadingTexts = null
        wanted = true
        wake?.()
      })
      return loadingTexts
    },
    /** `fn` is called when indexing becomes wanted (the loop that runs the slices). */
    onIndexWanted(fn: (() => void) | undefined) {
      wake = fn
    },
    /** Stops (true) or allows (false) indexing in the background: tests drive it with `catchUp` and `indexer.step`. */
    holdIndexing(hold: boolean) {
      held = hold
    },
  }
}
