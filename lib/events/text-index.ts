// Builds the text indexes a backend keeps behind the writes (lib/events/ports.ts
// TextIndexUpkeep; PostgreSQL: each ended day's trigram index), one at a time: at start,
// then every minute, each round until none is wanted. The work is the database server's,
// not this process's event loop: a round only waits. One process at a time (a singleton
// under a lease): the indexes are the database's.
import type { Loop } from '../platform/loops.js'
import type { TextIndexUpkeep } from './ports.js'

const CHECK_MS = 60_000

interface TextIndexLog {
  info(details: object, message: string): void
  error(details: object, message: string): void
}

export function textIndexLoop(deps: { upkeep: TextIndexUpkeep; log: TextIndexLog; now?: () => number }, checkMs = CHECK_MS): Loop {
  const now = deps.now ?? Date.now
  let timer: NodeJS.Timeout | undefined
  let round: Promise<void> | undefined
  let stopped = true
  let built = 0
  let buildMs = 0
  const run = async () => {
    try {
      while (!stopped) {
        const b = await deps.upkeep.buildNext(now())
        if (!b) break
        built++
        buildMs += b.ms
        deps.log.info({ partition: b.partition, ms: Math.round(b.ms) }, 'text index built')
      }
    } catch (err) {
      // Stopped: the build was cancelled.
      if (!stopped) deps.log.error({ err }, 'building a text index failed')
    }
  }
  const tick = () => {
    timer = undefined
    if (stopped) return
    round = run().finally(() => {
      round = undefined
      if (!stopped) timer = setTimeout(tick, checkMs).unref()
    })
  }
  return {
    name: 'text-index',
    singleton: true,
    start() {
      stopped = false
      timer = setTimeout(tick, 0).unref()
    },
    async stop() {
      stopped = true
      clearTimeout(timer)
      timer = undefined
      // A build under way would hold the close up for as long as it runs (minutes for a large day): it is cancelled.
      if (round) {
        await deps.upkeep.cancel().catch(() => {})
        await round
      }
    },
    stats() {
      if (!built) return undefined
      const r = { built, buildMs: Math.round(buildMs) }
      built = buildMs = 0
      return r
    },
  }
}
