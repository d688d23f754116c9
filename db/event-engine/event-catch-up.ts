// The event and audit indexes' catch-up (db/event-engine/event-index.ts) as the queries want it: off
// until the first list, then a slice at a time from the app's loop (lib/events/indexing.ts),
// paused while the texts that text filters need are read.
import { setImmediate as pause } from 'node:timers/promises'
import type { RecordIndexer } from './event-index.js'
import type { DB } from '../index.js'

/** Records a step (one transaction, one commit) indexes at most and at least. */
const MAX_BATCH = 2048
const MIN_BATCH = 64
/**
 * A slice of at least this many ms (the server is idle: nobody waits for it) indexes in whole
 * steps of MAX_BATCH. A step costs a few ms however few records it holds (its block counts,
 * sources and commit), so steps sized to a short slice's time left fell to MIN_BATCH on a busy
 * core, and the catch-up to a third of its pace, however long the slice.
 */
export const WHOLE_STEPS_MS = 20

export function indexCatchUp(db: DB, indexer: RecordIndexer) {
  /** The pace of the last steps, commit included (first guess: 50,000 records a second): sizes the next step to the time left. */
  let msPerRecord = 0.02
  let wanted = false
  let held = false
  /** Called when indexing becomes wanted, so that the loop need not wait for its next turn. */
  let wake: (() => void) | undefined
  /** While the texts are read (textsReady below). */
  let loadingTexts: Promise<void> | null = null

  return {
    /**
     * One slice of indexing of about `budgetMs`, in steps sized to the time left at the
     * pace of the last ones (a step of 2,048 records alone took longer than the slice
     * should), or in whole steps when the slice is long (WHOLE_STEPS_MS); answers whether
     * more is waiting.
     */
    indexSlice(budgetMs = 4): boolean {
      if (!wanted || !db.open || held || loadingTexts) return false
      let more = false
      const whole = budgetMs >= WHOLE_STEPS_MS
      try {
        let now = performance.now()
        const until = now + budgetMs
        do {
          const batch = whole ? MAX_BATCH : Math.max(MIN_BATCH, Math.min(MAX_BATCH, Math.floor((until - now) / msPerRecord)))
          const n = indexer.step('events', batch) + indexer.step('audit_trail', batch)
          // Caught up: the documents of events indexed before their table existed (migration 030).
          const filled = n > 0 ? 0 : indexer.fillDocs(batch)
          const after = performance.now()
          if (n > 0) msPerRecord = Math.min(1, Math.max(0.001, (msPerRecord + (after - now) / n) / 2))
          now = after
          more = n > 0 || filled > 0
        } while (more && (whole ? now < until : now + MIN_BATCH * msPerRecord < until))
      } catch {
        // Busy (another process writes) or closing: try again on the next turn.
        more = false
      }
      return more
    },
    /** Reads the index's counts into memory (a start: the first count read them on the event loop, 260 ms at 5,000,000 events). */
    warm(): void {
      if (!db.open) return
      indexer.summary('events')
      indexer.summary('audit_trail')
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
