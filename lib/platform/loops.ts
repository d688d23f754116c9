// The background loops of a server process, in one registry: each declares whether only
// one process sharing the database may run it at a time (`singleton`: a multi-node setup
// puts a lease in front of these), and the app starts them all when it is ready and stops
// them in reverse order when it closes. It also knows whether requests are in flight, which
// sets how long a slice of background work may be (lib/platform/slices.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { LoopStats } from '../log.js'
import { requestActivity, type RequestActivity } from './slices.js'

export interface Loop {
  name: string
  /** Only one process sharing the database may run it at a time (it changes shared state on a schedule). */
  singleton: boolean
  /**
   * Stopped as closing begins, before the server stops taking requests (it holds
   * connections open, or its work must not run into the close); the others are stopped
   * after the requests in flight have been answered, before the database closes.
   */
  stopsFirst?: boolean
  start(): void | Promise<void>
  stop(): void | Promise<void>
  /**
   * What the loop did since it was last asked (say its slices and the longest of them, in
   * ms), for the loop statistics line (PRIME_LOOP_STATS_SECONDS); undefined: nothing to say.
   */
  stats?(): Record<string, number> | undefined
}

export interface LoopState {
  name: string
  singleton: boolean
  running: boolean
}

export interface Loops {
  /** Registers a loop; it starts when the app is ready (at once if it is already running). */
  add(loop: Loop): void
  /** Every loop registered, in start order. */
  list(): LoopState[]
  /** The budget of a loop's next slice on the event loop (ms): short while requests are in flight, long when idle. */
  sliceMs(): number
}

/** Set on a request while it counts as in flight. */
const kInFlight = Symbol('in flight')

/**
 * The app's loop registry (decorated as `app.loops`): starts every loop on ready, in
 * registration order, and stops them in reverse order on close, awaiting each. `activity`
 * counts the requests in flight (tests pass one with their own clock).
 */
export function registerLoops(app: FastifyInstance, activity: RequestActivity = requestActivity()): Loops {
  const loops: { loop: Loop; running: boolean }[] = []
  let started = false
  const start = async (l: (typeof loops)[number]) => {
    await l.loop.start()
    l.running = true
  }
  const stop = async (first: boolean) => {
    for (const l of [...loops].reverse()) {
      if (!l.running || !!l.loop.stopsFirst !== first) continue
      l.running = false
      try {
        await l.loop.stop()
      } catch (err) {
        app.log.error({ err, loop: l.loop.name }, 'stopping a background loop failed')
      }
    }
  }
  const registry: Loops = {
    add(loop) {
      if (loops.some((l) => l.loop.name === loop.name)) throw new Error(`loop ${loop.name} is registered twice`)
      const entry = { loop, running: false }
      loops.push(entry)
      if (started) start(entry).catch((err) => app.log.error({ err, loop: loop.name }, 'starting a background loop failed'))
    },
    list: () => loops.map(({ loop, running }) => ({ name: loop.name, singleton: loop.singleton, running })),
    sliceMs: activity.sliceMs,
  }
  app.decorate('loops', registry)
  // In flight from its arrival until its answer is handed over (a stream's, such as the
  // notification stream's, included: a long-lived stream waits for no slice), or until its
  // connection closes first; registered before the pipeline, so refused requests count too.
  const ended = (req: FastifyRequest) => {
    if (!(req as Flagged)[kInFlight]) return
    ;(req as Flagged)[kInFlight] = false
    activity.end()
  }
  app.addHook('onRequest', (req: FastifyRequest, reply: FastifyReply, done: () => void) => {
    ;(req as Flagged)[kInFlight] = true
    activity.begin()
    reply.raw.once('close', () => ended(req))
    done()
  })
  app.addHook('onSend', (req: FastifyRequest, _reply: FastifyReply, payload: unknown, done: (err: null, payload: unknown) => void) => {
    ended(req)
    done(null, payload)
  })
  // The event loop's delay and the loops' slices, logged when asked for (lib/log.ts).
  let loopStats: LoopStats | undefined
  app.addHook('onReady', async () => {
    started = true
    for (const l of loops) await start(l)
    if (app.config.loopStatsSeconds > 0) loopStats = new LoopStats(app.log, app.config.loopStatsSeconds * 1000, () => loops.map((l) => l.loop))
  })
  app.addHook('preClose', async () => {
    // A loop added while closing is not started.
    started = false
    loopStats?.close()
    loopStats = undefined
    await stop(true)
  })
  app.addHook('onClose', async () => stop(false))
  return registry
}

type Flagged = FastifyRequest & { [kInFlight]?: boolean }

declare module 'fastify' {
  interface FastifyInstance {
    /** The background loops (lib/platform/loops.ts). */
    loops: Loops
  }
}

/**
 * A loop that runs `work` every `intervalMs` (the first time after one interval), never
 * two at once (a round still running skips the next) and never keeping the process alive; a
 * failure is logged and the next round runs as planned. Stopping waits for a running round.
 */
export function everyInterval(
  log: { error(details: object, message: string): void },
  opts: { name: string; singleton: boolean; intervalMs: number | (() => number); what: string },
  work: () => unknown,
): Loop {
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined
  const ms = typeof opts.intervalMs === 'number' ? () => opts.intervalMs as number : opts.intervalMs
  const fail = (err: unknown) => log.error({ err }, `${opts.what} failed`)
  return {
    name: opts.name,
    singleton: opts.singleton,
    start() {
      timer = setInterval(() => {
        if (running) return
        try {
          const round = work()
          if (round instanceof Promise) running = round.then(() => {}, fail).finally(() => (running = undefined))
        } catch (err) {
          fail(err)
        }
      }, ms()).unref()
    },
    async stop() {
      clearInterval(timer)
      timer = undefined
      await running
    },
  }
}
