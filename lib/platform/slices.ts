// How long a slice of background work on the event loop may be, by whether anyone is asking.
// While requests are in flight (or one ended a moment ago), slices are short: a request that
// arrives during a slice waits for it, and at 10 connections on one core slices of 20 ms were
// most of the p99 of the fastest lists. When nobody is asking, slices are long, so that the
// event index catches up after a burst at full pace: at 4 ms it fell from about 41,000 to
// about 15,000 records a second, below what ingest needs.

/** A slice's budget while requests are in flight (ms). */
export const SHORT_SLICE_MS = 4
/** A slice's budget while the server is idle (ms): the one request that comes waits at most this. */
export const LONG_SLICE_MS = 20
/**
 * A slice's budget for bulk writes with a backlog while the server is idle (ms), the batch's
 * commit included: a mass disconnect's batches. Each ends with a commit of its own, whose
 * fsync costs a few ms on the event loop whatever the batch's size: at 20 ms a third of a
 * burst's time went to commits. A request that arrives meanwhile waits at most this once;
 * the slices after it are short. Every fourth or fifth batch of a mass disconnect takes 1.6-1.8
 * times its budget (at 100,000 agents: 42 ms longest at 25, 49 at 30, 56-68 at 40, for the
 * same 84,000-88,000 disconnects a second): 25 keeps those under the 50 ms that no task may
 * hold the loop.
 */
export const BULK_SLICE_MS = 25
/**
 * Idle only once no request has been in flight for this long (ms): a client that asks again
 * as soon as it is answered leaves the server without a request for a moment between two.
 */
export const QUIET_MS = 100

export interface RequestActivity {
  /** A request arrived. */
  begin(): void
  /** That request's answer is ready (or it was given up): once per begin(). */
  end(): void
  /** Requests begun and not ended. */
  inFlight(): number
  /** The budget of the next slice of background work (ms): short while anyone is asking, long when idle. */
  sliceMs(): number
}

/** `now`: a monotonic clock in ms (tests pass their own). */
export function requestActivity(now: () => number = () => performance.now()): RequestActivity {
  let inFlight = 0
  let lastEnd = Number.NEGATIVE_INFINITY
  return {
    begin() {
      inFlight++
    },
    end() {
      if (inFlight > 0) inFlight--
      // The clock is read only when the last one ends: while others are in flight, slices
      // are short whatever it says (a clock read on every answer showed in profiles).
      if (inFlight === 0) lastEnd = now()
    },
    inFlight: () => inFlight,
    sliceMs: () => (inFlight > 0 || now() - lastEnd < QUIET_MS ? SHORT_SLICE_MS : LONG_SLICE_MS),
  }
}

/** A loop's slices since its last report (its `stats()` in the loop statistics). */
/**
 * A work's pace (ms per item) after one more measurement: up at once, down by halves. One
 * slow commit is reason enough to expect another, and the next batch is sized for it.
 */
export const paceAfter = (pace: number, last: number): number => Math.max(last, 0.5 * pace + 0.5 * last)

export class SliceStats {
  private slices = 0
  private busyMs = 0
  private maxMs = 0

  /** One slice that took `ms`. */
  add(ms: number): void {
    this.slices++
    this.busyMs += ms
    if (ms > this.maxMs) this.maxMs = ms
  }

  /** The slices, their time and the longest since the last take (undefined: none); counted afresh after. */
  take(): { slices: number; busyMs: number; maxSliceMs: number } | undefined {
    if (this.slices === 0) return undefined
    const r = { slices: this.slices, busyMs: Math.round(this.busyMs), maxSliceMs: Math.round(this.maxMs * 10) / 10 }
    this.slices = this.busyMs = this.maxMs = 0
    return r
  }
}
