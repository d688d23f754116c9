// Sending one message to one destination: webhook POST, syslog over UDP or TCP, e-mail.
// Each answers an outcome instead of throwing: delivered, worth retrying, or failed for good.
//
// What a destination's receiver answers is never passed on: a caller (and whoever reads the
// stored error) learns only a coarse outcome, delivered, refused by the receiver with the
// status class, or unreachable, so that a destination cannot be used to read an internal
// service back or to map its ports. The detail goes to the server log only. An unreachable
// receiver is answered only once the send timeout has passed since the connection began,
// so that a closed port (refused at once) and a filtering host (no answer) look alike.
import crypto from 'node:crypto'
import dgram from 'node:dgram'
import http from 'node:http'
import https from 'node:https'
import net from 'node:net'
import type { LookupFunction } from 'node:net'
import { MailNotConfiguredError, type Mailer } from '../mail.js'
import { AddressRefusedError, resolveChecked, type AllowList, type CheckedAddress, type Resolver } from './address.js'
import { cutUtf8, octetFrame, UDP_MAX_BYTES, USER_AGENT, type EmailMessage } from './format.js'

export const SEND_TIMEOUT_MS = 10_000

export type FailureCode = 'address-refused' | 'unreachable' | 'rejected' | 'delivery-failed'

export interface SendOutcome {
  outcome: 'delivered' | 'retry' | 'failed'
  /** What callers and stored records show: coarse, never the receiver's answer. */
  error: string | null
  code: FailureCode | null
  /** The receiver asked to wait this long (Retry-After). */
  retryAfterMs?: number
  /** For the server log only: the receiver's answer or the network error. */
  detail?: string
}

const delivered: SendOutcome = { outcome: 'delivered', error: null, code: null }
const retry = (error: string, code: FailureCode, detail?: string, retryAfterMs?: number): SendOutcome => ({ outcome: 'retry', error, code, detail, retryAfterMs })
const fail = (error: string, code: FailureCode, detail?: string): SendOutcome => ({ outcome: 'failed', error, code, detail })

/** The public text of an unreachable receiver (no connection, no answer, a name that does not resolve, TLS failing). */
export const unreachableText = (what: 'receiver' | 'mail server', timeoutMs: number) =>
  `The ${what} could not be reached: no connection or no answer within ${timeoutMs / 1000} s (the cause is in the server log).`
/** The public text of a receiver's refusal: the status class only. */
export const refusedText = (status: number) => `The receiver refused it: HTTP ${Math.floor(status / 100)}xx${status >= 300 && status < 400 ? ' (redirects are not followed)' : ''}.`

const unreachable = (timeoutMs: number, detail: string, what: 'receiver' | 'mail server' = 'receiver') => retry(unreachableText(what, timeoutMs), 'unreachable', detail.slice(0, 2000))

class TimeoutError extends Error {}

/** Waits until `at` (performance.now() time): unreachable outcomes are answered at one time, whatever their cause. */
async function notBefore(at: number): Promise<void> {
  // A timer may fire up to a millisecond early (its delay is rounded): wait again until it is time.
  for (let wait = at - performance.now(); wait > 0; wait = at - performance.now()) await new Promise((r) => setTimeout(r, Math.ceil(wait)))
}

/**
 * Resolves and checks the host; a refused address fails at once (the rule is the server's
 * own, no receiver answered), a name that does not resolve (now) is unreachable.
 */
async function checked(host: string, allow: AllowList, timeoutMs: number, resolve?: Resolver): Promise<CheckedAddress | SendOutcome> {
  try {
    return await resolveChecked(host, allow, resolve)
  } catch (err) {
    const started = performance.now()
    if (err instanceof AddressRefusedError && err.kind !== 'unresolvable') {
      return fail(`Address refused: ${host}: ${err.reason}.`, 'address-refused', err.message)
    }
    await notBefore(started + timeoutMs)
    return unreachable(timeoutMs, (err as Error).message)
  }
}
const isOutcome = (v: CheckedAddress | SendOutcome): v is SendOutcome => 'outcome' in v

/** A `lookup` that answers the address already checked: the connection goes there and nowhere else. */
function fixedLookup(a: CheckedAddress): LookupFunction {
  return ((_host: string, options: { all?: boolean }, cb: (...args: any[]) => void) => {
    if (options?.all) cb(null, [{ address: a.address, family: a.family }])
    else cb(null, a.address, a.family)
  }) as LookupFunction
}

export interface WebhookSettings {
  url: string
  secret: string | null
  headers: Record<string, string>
  /** Batch mode (stored only when on: maxEvents above 1). */
  batch?: WebhookBatch
}

export interface WebhookBatch {
  maxEvents: number
  maxBytes: number
}

/** What a request carries beyond one record's: the worker's kept lookups, a batch's size. */
export interface SendOptions {
  resolve?: Resolver
  /** Sent as `X-Prime-Batch-Size` (batch bodies only). */
  batchSize?: number
}

/** Keep-alive agents for the delivery worker; tests of a destination use fresh connections. */
export function webhookAgents() {
  return {
    http: new http.Agent({ keepAlive: true, maxSockets: 4 }),
    https: new https.Agent({ keepAlive: true, maxSockets: 4 }),
    destroy() {
      this.http.destroy()
      this.https.destroy()
    },
  }
}
export type WebhookAgents = ReturnType<typeof webhookAgents>

/** `sha256=<hex>` of the raw body keyed with the secret. */
export const signature = (secret: string, body: Buffer | string) => 'sha256=' + crypto.createHmac('sha256', secret).update(body).digest('hex')

function retryAfter(header: string | string[] | undefined, now: number): number | undefined {
  const v = Array.isArray(header) ? header[0] : header
  if (!v) return undefined
  if (/^\d+$/.test(v.trim())) return Number(v.trim()) * 1000
  const at = Date.parse(v)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/** POSTs one JSON body; success is a 2xx within the time limit. Redirects are not followed. */
export async function sendWebhook(
  settings: WebhookSettings,
  body: Buffer,
  deliveryId: string,
  sentTime: number,
  allow: AllowList,
  agents?: WebhookAgents,
  timeoutMs = SEND_TIMEOUT_MS,
  opts: SendOptions = {},
): Promise<SendOutcome> {
  const url = new URL(settings.url)
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
  const target = await checked(host, allow, timeoutMs, opts.resolve)
  if (isOutcome(target)) return target
  const secure = url.protocol === 'https:'
  const headers: Record<string, string | number> = { ...settings.headers }
  headers['content-type'] = 'application/json'
  headers['content-length'] = body.length
  headers['user-agent'] = USER_AGENT
  headers['x-prime-delivery-id'] = deliveryId
  headers['x-prime-timestamp'] = String(sentTime)
  if (opts.batchSize !== undefined) headers['x-prime-batch-size'] = String(opts.batchSize)
  if (settings.secret) headers['x-prime-signature'] = signature(settings.secret, body)
  const options: https.RequestOptions = {
    method: 'POST',
    host,
    port: url.port || (secure ? 443 : 80),
    path: url.pathname + url.search,
    headers,
    lookup: fixedLookup(target),
    agent: agents ? (secure ? agents.https : agents.http) : false,
    servername: net.isIP(host) ? undefined : host,
  }
  const started = performance.now()
  const outcome = await new Promise<SendOutcome>((resolve) => {
    let settled = false
    let timer: NodeJS.Timeout | undefined
    const done = (o: SendOutcome) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(o)
    }
    let req: http.ClientRequest
    try {
      req = (secure ? https : http).request(options, onResponse)
    } catch (err) {
      // Settings the request cannot carry (stored before they were checked): no retry helps.
      return done(fail(`The request cannot carry the destination's settings: ${(err as Error).message}`.slice(0, 1000), 'delivery-failed'))
    }
    function onResponse(res: http.IncomingMessage) {
      const status = res.statusCode ?? 0
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        if (text.length < 300) text += chunk
      })
      res.on('error', () => undefined)
      res.on('end', () => {
        const answer = `HTTP ${status}${res.statusMessage ? ` ${res.statusMessage}` : ''}${text.trim() ? `: ${text.trim().slice(0, 200)}` : ''}`
        if (status >= 200 && status < 300) done(delivered)
        else if (status >= 300 && status < 400) done(fail(refusedText(status), 'rejected', `${answer} (redirect to ${res.headers.location ?? '?'} not followed)`))
        else if (status === 408 || status === 425 || status === 429 || status >= 500) done(retry(refusedText(status), 'rejected', answer, retryAfter(res.headers['retry-after'], Date.now())))
        else done(fail(refusedText(status), 'rejected', answer))
      })
    }
    timer = setTimeout(() => req.destroy(new TimeoutError(`no answer within ${timeoutMs / 1000} s`)), timeoutMs)
    req.on('error', (err) => {
      if (err instanceof TimeoutError) done(unreachable(timeoutMs, err.message))
      else done(unreachable(timeoutMs, networkError(err, target, options.port)))
    })
    req.end(body)
  })
  if (outcome.code === 'unreachable') await notBefore(started + timeoutMs)
  return outcome
}

function networkError(err: NodeJS.ErrnoException, target: CheckedAddress, port: unknown): string {
  const where = `${target.family === 6 ? `[${target.address}]` : target.address}:${port}`
  if (err.code && !err.message.includes(target.address)) return `${err.code} ${where}: ${err.message}`
  return err.message
}

export interface SyslogSettings {
  host: string
  port: number
  transport: 'udp' | 'tcp'
  format: 'rfc5424' | 'cef'
  facility: string
}

/**
 * Open TCP connections to syslog receivers, one per address and port, reused from one
 * message to the next (a receiver sees one stream, in order).
 */
export class SyslogConnections {
  private sockets = new Map<string, net.Socket>()
  /** One UDP socket per address family, reused for every datagram (not one per line). */
  private udp = new Map<4 | 6, dgram.Socket>()

  /** Sends datagrams in order on the family's socket; resolves once all are sent. */
  async send(target: CheckedAddress, port: number, datagrams: Buffer[], timeoutMs: number): Promise<void> {
    let socket = this.udp.get(target.family)
    if (!socket) {
      const s = dgram.createSocket(target.family === 6 ? 'udp6' : 'udp4')
      s.on('error', () => {
        if (this.udp.get(target.family) === s) this.udp.delete(target.family)
        s.close()
      })
      this.udp.set(target.family, s)
      socket = s
    }
    const s = socket
    const sent = Promise.all(datagrams.map((d) => new Promise<void>((resolve, reject) => s.send(d, port, target.address, (err) => (err ? reject(err) : resolve())))))
    // A socket closed by an error may never call back: the lane must not wait for ever.
    let timer: NodeJS.Timeout | undefined
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(`not sent within ${timeoutMs / 1000} s`)), timeoutMs)
    })
    try {
      await Promise.race([sent, late])
    } finally {
      clearTimeout(timer)
    }
  }

  async write(target: CheckedAddress, port: number, frame: Buffer, timeoutMs: number): Promise<void> {
    const key = `${target.address}|${port}`
    let socket = this.sockets.get(key)
    if (!socket || socket.destroyed || !socket.writable) {
      socket = await connect(target, port, timeoutMs)
      this.sockets.set(key, socket)
      const s = socket
      const forget = () => {
        if (this.sockets.get(key) === s) this.sockets.delete(key)
      }
      s.on('close', forget)
      s.on('end', () => s.destroy())
      s.on('error', forget)
      s.on('data', () => undefined)
      // An idle connection is closed after a while; the next message opens another.
      s.setTimeout(60_000, () => s.destroy())
    }
    const s = socket
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        s.destroy()
        reject(new TimeoutError(`not written within ${timeoutMs / 1000} s`))
      }, timeoutMs)
      s.write(frame, (err) => {
        clearTimeout(timer)
        if (err) reject(err)
        else resolve()
      })
    })
  }

  close() {
    for (const s of this.sockets.values()) s.destroy()
    this.sockets.clear()
    for (const s of this.udp.values()) s.close()
    this.udp.clear()
  }
}

function connect(target: CheckedAddress, port: number, timeoutMs: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: target.address, port, family: target.family })
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new TimeoutError(`no connection within ${timeoutMs / 1000} s`))
    }, timeoutMs)
    socket.once('connect', () => {
      clearTimeout(timer)
      socket.removeAllListeners('error')
      resolve(socket)
    })
    socket.once('error', (err) => {
      clearTimeout(timer)
      reject(err)
    })
  })
}

/** Sends one syslog line: UDP counts once sent, TCP once written (octet-counting framing). */
export function sendSyslog(settings: SyslogSettings, line: string, allow: AllowList, connections: SyslogConnections, timeoutMs = SEND_TIMEOUT_MS, resolve?: Resolver): Promise<SendOutcome> {
  return sendSyslogLines(settings, [line], allow, connections, timeoutMs, resolve)
}

/**
 * Sends syslog lines in order, with one outcome for all: over TCP their frames go in one
 * socket write and count as delivered once it is written; over UDP each is one datagram on
 * the reused socket, delivered once all are sent. The receiver sees the same stream or
 * datagrams as one line at a time would give.
 */
export async function sendSyslogLines(
  settings: SyslogSettings,
  lines: string[],
  allow: AllowList,
  connections: SyslogConnections,
  timeoutMs = SEND_TIMEOUT_MS,
  resolve?: Resolver,
): Promise<SendOutcome> {
  const target = await checked(settings.host, allow, timeoutMs, resolve)
  if (isOutcome(target)) return target
  const started = performance.now()
  try {
    if (settings.transport === 'udp')
      await connections.send(
        target,
        settings.port,
        lines.map((l) => cutUtf8(l, UDP_MAX_BYTES)),
        timeoutMs,
      )
    else await connections.write(target, settings.port, lines.length === 1 ? octetFrame(lines[0]) : Buffer.concat(lines.map(octetFrame)), timeoutMs)
    return delivered
  } catch (err) {
    const detail = err instanceof TimeoutError ? err.message : networkError(err as NodeJS.ErrnoException, target, settings.port)
    await notBefore(started + timeoutMs)
    return unreachable(timeoutMs, detail)
  }
}

export interface EmailSettings {
  recipients: string[]
  subjectPrefix: string
}

/** Sends one e-mail through the server's SMTP settings: delivered once the SMTP server accepts it. */
export async function sendEmail(mailer: Mailer, settings: EmailSettings, message: EmailMessage, deliveryId: string, timeoutMs = SEND_TIMEOUT_MS): Promise<SendOutcome> {
  let timer: NodeJS.Timeout | undefined
  try {
    const result = await Promise.race([
      mailer.send({ to: settings.recipients, subject: message.subject, text: message.text, html: message.html, headers: { 'X-Prime-Delivery-Id': deliveryId } }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new TimeoutError(`the SMTP server did not accept it within ${timeoutMs / 1000} s`)), timeoutMs)
      }),
    ])
    if (result.accepted.length === 0) return fail('The mail server accepted no recipient.', 'rejected', `No recipient accepted: ${result.response}`)
    return delivered
  } catch (err) {
    if (err instanceof TimeoutError) return unreachable(timeoutMs, err.message, 'mail server')
    if (err instanceof MailNotConfiguredError) return fail(err.message, 'delivery-failed')
    const e = err as Error & { responseCode?: number; response?: string; code?: string }
    const text = e.response ? `SMTP ${e.response}` : `${e.code ? `${e.code}: ` : ''}${e.message}`
    // 5xx: the server refuses this message for good; 4xx and network errors may pass later.
    if (e.responseCode && e.responseCode >= 400 && e.responseCode < 600) {
      const refused = `The mail server refused it: SMTP ${Math.floor(e.responseCode / 100)}xx.`
      return e.responseCode >= 500 ? fail(refused, 'rejected', text) : retry(refused, 'rejected', text)
    }
    return unreachable(timeoutMs, text, 'mail server')
  } finally {
    clearTimeout(timer)
  }
}
