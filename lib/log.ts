// The request-path parts of logging. Each request writes one line, so what a line costs is
// paid by every request: these pieces keep it to the formatting and an append.
import { monitorEventLoopDelay } from 'node:perf_hooks'
import pino from 'pino'
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import type { FastifyChildLoggerFactory } from 'fastify/types/logger.js'

const { streamSym, chindingsSym, timeSym, lsCacheSym, endSym, messageKeySym, formattersSym, mixinSym } = pino.symbols

/**
 * Lines collected here and handed to sonic-boom in blocks of `minLength` characters, every
 * `intervalMs`, on `flush()` and at exit. sonic-boom's own `minLength` measures its whole
 * pending buffer on every write, which cost more than formatting a line; it still does the
 * writing (partial writes, EAGAIN on a full pipe).
 */
export class LineBatcher {
  private parts: string[] = []
  private length = 0
  private readonly timer: NodeJS.Timeout

  constructor(
    private readonly out: { write(text: string): unknown; flushSync(): void },
    private readonly minLength = 16384,
    intervalMs = 1000,
  ) {
    this.timer = setInterval(() => this.flush(), intervalMs).unref()
  }

  write(line: string): boolean {
    this.parts.push(line)
    this.length += line.length
    if (this.length >= this.minLength) this.flush()
    return true
  }

  /** Hands what is pending to the destination (pino calls this for warnings and errors). */
  flush(cb?: (err?: Error) => void): void {
    if (this.length > 0) {
      const text = this.parts.length === 1 ? this.parts[0] : this.parts.join('')
      this.parts = []
      this.length = 0
      this.out.write(text)
    }
    cb?.()
  }

  flushSync(): void {
    this.flush()
    this.out.flushSync()
  }

  close(): void {
    clearInterval(this.timer)
    this.flushSync()
  }
}

/**
 * A line's `time`: ISO 8601 in UTC, which people and log tools read without converting.
 * Made once per millisecond: a busy server writes tens of lines in each, and formatting the
 * date cost more than the rest of a request line.
 */
export const logTimestamp = (() => {
  let ms = Number.NaN
  let text = ''
  return (): string => {
    const now = Date.now()
    if (now !== ms) {
      ms = now
      text = `,"time":"${new Date(now).toISOString()}"`
    }
    return text
  }
})()

export type LogFormat = 'auto' | 'pretty' | 'json'

/** `auto`: pretty when standard output is a terminal (a person reads it), JSON otherwise. */
export function resolveLogFormat(format: LogFormat, isTTY = process.stdout.isTTY === true): 'pretty' | 'json' {
  return format === 'auto' ? (isTTY ? 'pretty' : 'json') : format
}

/**
 * Standard output in blocks of 16 KiB, every second and at exit: a write(2) per request line
 * cost about a sixth of a small request's time. Each block is written synchronously. The
 * server flushes it once it listens, so that the start-up lines are there at once. In the
 * pretty format each JSON line is rewritten for people as it is written (PrettyLines).
 */
export function stdoutLines(format: LogFormat = 'json'): LineBatcher {
  const out = pino.destination({ dest: 1, sync: true })
  const pretty = resolveLogFormat(format) === 'pretty'
  const lines = new LineBatcher(pretty ? new PrettyLines(out, { color: process.stdout.isTTY === true && !process.env.NO_COLOR }) : out)
  process.once('exit', () => lines.flushSync())
  return lines
}

const LEVELS: Record<number, [label: string, color: string]> = {
  10: ['TRACE', '90'],
  20: ['DEBUG', '90'],
  30: ['INFO ', '32'],
  40: ['WARN ', '33'],
  50: ['ERROR', '31'],
  60: ['FATAL', '35'],
}
/** What every line carries and the pretty format leaves out or shows in its own place. */
const SHOWN = new Set(['level', 'time', 'pid', 'hostname', 'msg'])
/** What a request line shows first, in this order. */
const REQUEST = ['method', 'url', 'statusCode', 'ms']

const pad = (n: number, width = 2) => String(n).padStart(width, '0')

/**
 * One JSON log line for people: `10:04:05.123 INFO  message  key=value …` in local time;
 * a request line as `GET /prime/webui/… 200 3.2 ms`, an error's stack on the lines below.
 * A line that is not JSON is passed on as it is.
 */
export function prettyLine(line: string, opts: { color?: boolean } = {}): string {
  let entry: Record<string, any>
  try {
    entry = JSON.parse(line)
  } catch {
    return `${line}\n`
  }
  if (entry === null || typeof entry !== 'object') return `${line}\n`
  const at = new Date(entry.time)
  const time = Number.isNaN(at.getTime()) ? String(entry.time) : `${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}.${pad(at.getMilliseconds(), 3)}`
  const [label, color] = LEVELS[entry.level] ?? [String(entry.level).padEnd(5), '0']
  const level = opts.color ? `\x1b[${color}m${label}\x1b[0m` : label
  const isRequest = entry.msg === 'request' && typeof entry.method === 'string'
  const head = isRequest ? `${entry.method} ${entry.url} ${entry.statusCode} ${entry.ms} ms` : String(entry.msg ?? '')
  const rest: string[] = []
  let stack = ''
  for (const [key, value] of Object.entries(entry)) {
    if (SHOWN.has(key) || (isRequest && REQUEST.includes(key)) || value === undefined) continue
    if (key === 'err' && value && typeof value.stack === 'string') {
      stack = `\n    ${value.stack.split('\n').join('\n    ')}`
      continue
    }
    rest.push(`${key}=${typeof value === 'string' && /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)}`)
  }
  return `${time} ${level} ${head}${rest.length ? `  ${rest.join(' ')}` : ''}${stack}\n`
}

/** A destination that writes each JSON line it is handed as prettyLine makes it. */
export class PrettyLines {
  private partial = ''
  constructor(
    private readonly out: { write(text: string): unknown; flushSync(): void },
    private readonly opts: { color?: boolean } = {},
  ) {}

  write(text: string): boolean {
    const parts = (this.partial + text).split('\n')
    this.partial = parts.pop() ?? ''
    if (parts.length) this.out.write(parts.map((l) => (l ? prettyLine(l, this.opts) : '')).join(''))
    return true
  }

  flushSync(): void {
    this.out.flushSync()
  }
}

/**
 * The per-request child logger, made when something logs through it: most requests log
 * nothing but their request line, which is written with the request id without a child.
 */
export const lazyChildLogger: FastifyChildLoggerFactory = (logger, bindings, opts) => {
  // Options (a route's log level) change the child itself: made at once then.
  if (Object.keys(opts).length > 0) return logger.child(bindings, opts)
  return new LazyChild(logger, bindings) as unknown as FastifyBaseLogger
}

class LazyChild {
  private made?: FastifyBaseLogger
  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly childBindings: Record<string, unknown>,
  ) {}
  private get real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.childBindings))
  }
  get level(): string {
    return this.made?.level ?? this.parent.level
  }
  set level(level: string) {
    this.real.level = level
  }
  isLevelEnabled(level: string): boolean {
    return ((this.made ?? this.parent) as unknown as pino.Logger).isLevelEnabled(level)
  }
  bindings(): Record<string, unknown> {
    return (this.real as unknown as pino.Logger).bindings()
  }
  child(bindings: Record<string, unknown>, opts?: Record<string, unknown>) {
    return this.real.child(bindings, opts)
  }
  fatal(...args: unknown[]) {
    ;(this.real.fatal as (...a: unknown[]) => void)(...args)
  }
  error(...args: unknown[]) {
    ;(this.real.error as (...a: unknown[]) => void)(...args)
  }
  warn(...args: unknown[]) {
    ;(this.real.warn as (...a: unknown[]) => void)(...args)
  }
  info(...args: unknown[]) {
    ;(this.real.info as (...a: unknown[]) => void)(...args)
  }
  debug(...args: unknown[]) {
    ;(this.real.debug as (...a: unknown[]) => void)(...args)
  }
  trace(...args: unknown[]) {
    ;(this.real.trace as (...a: unknown[]) => void)(...args)
  }
  silent() {}
}

/** The longest part of a caller's refused `x-request-id` a request line keeps. */
const CLIENT_REQUEST_ID_CHARS = 128

/**
 * The `x-request-id` a caller sent that the server did not take as the request's id (not
 * from a trusted proxy, or not of the form of one), cut to 128 characters; else undefined.
 */
export function clientRequestId(req: FastifyRequest): string | undefined {
  const given = req.headers['x-request-id']
  if (given === undefined || given === req.id) return undefined
  const text = Array.isArray(given) ? given.join(', ') : given
  return text.slice(0, CLIENT_REQUEST_ID_CHARS)
}

/** What a request line says besides the request id. */
function requestFields(req: FastifyRequest, reply: FastifyReply) {
  return {
    method: req.method,
    url: req.url,
    statusCode: reply.statusCode,
    ms: Math.round(reply.elapsedTime * 10) / 10,
    user: req.principal?.name,
    clientRequestId: clientRequestId(req),
  }
}

/**
 * Writes a request's line: `{"level":30,"time":…,"pid":…,"hostname":…,"reqId":…,"method":…,
 * "url":…,"statusCode":…,"ms":…,"user":…,"clientRequestId":…,"msg":"request"}`. With a pino logger in its
 * default format it is put together here from the logger's own pieces (level label, time,
 * base bindings, stream), the same line pino's generic path writes at several times the cost;
 * any other logger gets it through `req.log.info`.
 */
export function requestLineWriter(log: FastifyBaseLogger): (req: FastifyRequest, reply: FastifyReply) => void {
  const slow = (req: FastifyRequest, reply: FastifyReply) => req.log.info(requestFields(req, reply), 'request')
  const l = log as unknown as Record<symbol, any>
  const plainPino = l[streamSym] !== undefined && l[mixinSym] === undefined && l[messageKeySym] === 'msg' && l[formattersSym]?.log === undefined && typeof l[timeSym] === 'function'
  if (!plainPino) return slow
  const stream = l[streamSym] as { write(line: string): unknown }
  const info = (log as unknown as pino.Logger).levels.values.info
  return (req, reply) => {
    if (!(log as unknown as pino.Logger).isLevelEnabled('info')) return
    const user = req.principal?.name
    const client = clientRequestId(req)
    stream.write(
      `${l[lsCacheSym][info]}${l[timeSym]()}${l[chindingsSym]},"reqId":${JSON.stringify(req.id)},"method":${JSON.stringify(req.method)},"url":${JSON.stringify(req.url)}` +
        `,"statusCode":${reply.statusCode},"ms":${Math.round(reply.elapsedTime * 10) / 10}${user === undefined ? '' : `,"user":${JSON.stringify(user)}`}` +
        `${client === undefined ? '' : `,"clientRequestId":${JSON.stringify(client)}`},"msg":"request"${l[endSym]}`,
    )
  }
}

/**
 * Routine agent traffic (check-ins that succeed with nothing changed and nothing to hand
 * out), counted and written as one line every `intervalMs` instead of a line each: at
 * 100,000 agents checking in every minute, that traffic alone made most of the log.
 * Every other request keeps its line, errors and refusals included.
 */
export class RoutineSummary {
  private count = 0
  private totalMs = 0
  private maxMs = 0
  private readonly agents = new Set<string>()
  private since = Date.now()
  private readonly timer: NodeJS.Timeout

  constructor(
    private readonly log: FastifyBaseLogger,
    intervalMs: number,
  ) {
    this.timer = setInterval(() => this.flush(), intervalMs).unref()
  }

  add(req: FastifyRequest, reply: FastifyReply): void {
    this.count++
    const ms = reply.elapsedTime
    this.totalMs += ms
    if (ms > this.maxMs) this.maxMs = ms
    if (req.agent) this.agents.add(req.agent.uuid)
  }

  /** Writes the summary of what was counted since the last one (nothing when nothing was). */
  flush(now = Date.now()): void {
    if (this.count > 0) {
      this.log.info(
        {
          routine: {
            operation: 'agentCheckIn',
            unchanged: this.count,
            agents: this.agents.size,
            seconds: Math.round((now - this.since) / 1000),
            avgMs: Math.round((this.totalMs / this.count) * 10) / 10,
            maxMs: Math.round(this.maxMs * 10) / 10,
          },
        },
        'routine agent check-ins',
      )
    }
    this.count = 0
    this.totalMs = 0
    this.maxMs = 0
    this.agents.clear()
    this.since = now
  }

  close(): void {
    clearInterval(this.timer)
    this.flush()
  }
}

/** Milliseconds between the samples of the event loop's delay. */
const DELAY_RESOLUTION_MS = 10

/**
 * The event loop's delay (perf_hooks.monitorEventLoopDelay: a timer every 10 ms, and how
 * late it fired) and what each background loop reports of its slices (`stats()` of
 * lib/platform/loops.ts), written as one line `{"loop":{…},"msg":"event loop"}` every
 * `intervalMs` and whenever the process receives SIGUSR2; each line covers the time since
 * the one before (`fromMs`, `toMs`). A benchmark sends the signal at the start and at the
 * end of a case and reads the delay during the case from the second line. A delay is what
 * a request arriving at that moment waits before its turn: the p99 of the requests' times
 * cannot be below it.
 */
export class LoopStats {
  private readonly histogram = monitorEventLoopDelay({ resolution: DELAY_RESOLUTION_MS })
  private since = Date.now()
  private readonly timer: NodeJS.Timeout
  private readonly onSignal = () => this.flush('signal')

  constructor(
    private readonly log: { info(details: object, message: string): void },
    intervalMs: number,
    private readonly loops: () => { name: string; stats?(): Record<string, number> | undefined }[],
  ) {
    this.histogram.enable()
    this.timer = setInterval(() => this.flush('interval'), intervalMs).unref()
    process.on('SIGUSR2', this.onSignal)
  }

  /** Writes the line of the time since the last one, and starts the next. */
  flush(reason: 'interval' | 'signal' | 'close', now = Date.now()): void {
    const h = this.histogram
    // The histogram holds the time between two of the timer's turns (ns): the delay is what exceeds its interval.
    const ms = (ns: number) => (h.count === 0 ? 0 : Math.max(0, Math.round((ns / 1e6 - DELAY_RESOLUTION_MS) * 100) / 100))
    const loops: Record<string, Record<string, number>> = {}
    for (const loop of this.loops()) {
      const stats = loop.stats?.()
      if (stats) loops[loop.name] = stats
    }
    this.log.info({ loop: { reason, fromMs: this.since, toMs: now, samples: h.count, delayMs: { p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max) }, loops } }, 'event loop')
    h.reset()
    this.since = now
  }

  close(): void {
    clearInterval(this.timer)
    process.off('SIGUSR2', this.onSignal)
    this.flush('close')
    this.histogram.disable()
  }
}
