// The background loops of a server process, in one registry: each declares whether only
// one process sharing the database may run it at a time (`singleton`: a multi-node setup
// puts a lease in front of these), and the app starts them all when it is ready and stops
// them in reverse order when it closes. It also knows whether requests are in flight, which
// sets how long a slice of background work may be (lib/platform/slices.ts).
import type { Socket } from 'node:net'
import type { FastifyInstance, FastifyRequest } from 'fastify'
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
  /** Under a lease (PostgreSQL): whether this process holds it, and so runs the loop. */
  leaseHeld?: boolean
}

export interface Loops {
  /** Registers a loop; it starts when the app is ready (at once if it is already running). */
  add(loop: Loop): void
  /** Every loop registered, in start order. */
  list(): LoopState[]
  /** The budget of a loop's next slice on the event loop (ms): short while requests are in flight, long when idle. */
  sliceMs(): number
  /** The requests in flight, counted by the pipeline's hooks (lib/platform/pipeline.ts). */
  requests: RequestFlights
}

/**
 * A request is in flight from its arrival until its answer is handed over (a stream's, such
 * as the notification stream's, included: a long-lived stream waits for no slice), or until
 * its connection closes first.
 */
export interface RequestFlights {
  /** It arrived: called first thing on every request, before admission, so refused requests count too. */
  begin(req: FastifyRequest): void
  /** Its answer is handed over (onSend); a request not begun, or already ended, is left alone. */
  end(req: FastifyRequest): void
  /** Requests begun and not ended. */
  inFlight(): number
}

/**
 * Leases on singleton loops where several processes share the database (PostgreSQL): a
 * lease names its loop, lasts a while unless renewed, and carries a fencing token that grows
 * with every change of holder.
 */
export interface LoopLeases {
  /** Takes the lease `name` for `ms` (or renews this process's); its fencing token, or null while another process holds it. */
  hold(name: string, ms: number): Promise<number | null>
  /** Lets it go at once (another process may take it), if this process still holds it with `fence`. */
  release(name: string, fence: number): Promise<void>
}

/**
 * A singleton loop under a lease: started while this process holds the lease, stopped when
 * it does not. The lease is renewed every third of its time; without a renewal the loop
 * stops once the lease would have expired by this process's clock (counted from the renewal's
 * request, so never later than the database's expiry), and a renewal that finds another
 * fencing token (someone else held the lease meanwhile) restarts it. Closing releases it.
 */
function leased(loop: Loop, leases: LoopLeases, ms: number, log: { error(details: object, message: string): void; info(details: object, message: string): void }): Loop {
  const name = `loop:${loop.name}`
  let fence: number | null = null
  let running = false
  let closed = false
  let renewal: NodeJS.Timeout | undefined
  let expiry: NodeJS.Timeout | undefined
  let turn: Promise<void> = Promise.resolve()
  const halt = async () => {
    clearTimeout(expiry)
    if (!running) return
    running = false
    await loop.stop()
  }
  const renew = async () => {
    if (closed) return
    const sent = Date.now()
    let got: number | null
    try {
      got = await leases.hold(name, ms)
    } catch (err) {
      // The loop runs on until the lease would expire; a renewal may come back before.
      log.error({ err, loop: loop.name }, 'renewing a loop lease failed')
      return
    }
    if (closed) return
    if (got === null) {
      if (running) log.info({ loop: loop.name }, 'another process holds the loop lease: stopping the loop')
      await halt()
      fence = null
      return
    }
    // Held by another process since this one's last renewal: what it did then is not ours to continue.
    if (running && got !== fence) await halt()
    fence = got
    clearTimeout(expiry)
    expiry = setTimeout(
      () => {
        turn = turn.then(halt, halt)
      },
      Math.max(0, sent + ms - Date.now()),
    ).unref()
    if (!running) {
      running = true
      await loop.start()
    }
  }
  const next = () => {
    turn = turn.then(renew, renew)
    return turn
  }
  return {
    ...loop,
    start() {
      closed = false
      renewal = setInterval(next, Math.max(1, Math.floor(ms / 3))).unref()
      return next()
    },
    async stop() {
      closed = true
      clearInterval(renewal)
      await turn
      await halt()
      if (fence !== null) {
        const held = fence
        fence = null
        await leases.release(name, held).catch((err) => log.error({ err, loop: loop.name }, 'releasing a loop lease failed'))
      }
    },
    /** Whether the loop itself runs now (this process holds its lease). */
    get held() {
      return running
    },
  } as Loop & { held: boolean }
}

/** On a request while it counts as in flight: its connection's count. */
const kFlight = Symbol('in flight')
/** On a socket that carried a request: its requests in flight. */
const kSocketFlights = Symbol('requests in flight')

/** A connection's requests in flight; once it closed they no longer count, and their own end is a no-op. */
interface SocketFlights {
  open: number
  closed: boolean
}

type Flagged = FastifyRequest & { [kFlight]: SocketFlights | null }
type Counted = Socket & { [kSocketFlights]?: SocketFlights }

const CLOSED: SocketFlights = { open: 0, closed: true }

/**
 * Counts requests in flight. A connection closing ends what it still carried: one listener
 * per connection (a keep-alive connection carries many requests) rather than one per request.
 */
function requestFlights(activity: RequestActivity): RequestFlights {
  return {
    begin(req) {
      const socket = req.raw.socket as Counted | null
      let flights = socket?.[kSocketFlights]
      if (flights === undefined) {
        // A request on a connection already gone has nobody waiting for it.
        if (!socket || socket.destroyed) {
          ;(req as Flagged)[kFlight] = CLOSED
          return
        }
        const own: SocketFlights = (flights = { open: 0, closed: false })
        socket[kSocketFlights] = own
        socket.on('close', () => {
          own.closed = true
          for (; own.open > 0; own.open--) activity.end()
        })
      }
      ;(req as Flagged)[kFlight] = flights
      if (flights.closed) return
      flights.open++
      activity.begin()
    },
    end(req) {
      const flights = (req as Flagged)[kFlight]
      if (!flights) return
      ;(req as Flagged)[kFlight] = null
      if (flights.closed) return
      flights.open--
      activity.end()
    },
    inFlight: activity.inFlight,
  }
}

/**
 * The app's loop registry (decorated as `app.loops`): starts every loop on ready, in
 * registration order, and stops them in reverse order on close, awaiting each. `activity`
 * counts the requests in flight (tests pass one with their own clock), which the pipeline
 * reports through `requests` (lib/platform/pipeline.ts).
 */
export function registerLoops(app: FastifyInstance, activity: RequestActivity = requestActivity(), leases?: { store: LoopLeases; ms: number }): Loops {
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
      // Where processes share the database, a singleton runs only under its lease.
      const entry = { loop: leases && loop.singleton ? leased(loop, leases.store, leases.ms, app.log) : loop, running: false }
      loops.push(entry)
      if (started) start(entry).catch((err) => app.log.error({ err, loop: loop.name }, 'starting a background loop failed'))
    },
    list: () =>
      loops.map(({ loop, running }) => {
        const held = (loop as { held?: boolean }).held
        return { name: loop.name, singleton: loop.singleton, running, ...(held === undefined ? {} : { leaseHeld: held }) }
      }),
    sliceMs: activity.sliceMs,
    requests: requestFlights(activity),
  }
  app.decorate('loops', registry)
  // Declared, so that every request has the same shape from its making.
  app.decorateRequest(kFlight, null)
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
