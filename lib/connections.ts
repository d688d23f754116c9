// What one client may hold of the HTTP server: the time it has to send a request, how long
// an idle keep-alive connection stays open, how many connections one address may have open;
// and the problem documents for what is refused before there is any request to route.
import crypto from 'node:crypto'
import http from 'node:http'
import type { Socket } from 'node:net'
import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify'
import type { Config } from './config.js'
import { problem, problemBody, type ProblemCode } from './errors.js'
import { limitKey } from './rate-limit.js'

/** Node's limit on a request line and its headers together (`--max-http-header-size`). */
const HEADER_BYTES = http.maxHeaderSize

/**
 * The server's timeouts. Node's `headersTimeout` and `requestTimeout` bound receiving a
 * request only (a connection leaves the check once its request is complete), so long
 * answers (exports, the notification stream) are not cut; Node checks them every
 * `connectionsCheckingInterval`, 30 s by default, which would let a slow client hold on
 * for that much longer.
 */
export function serverOptions(limits: Config['connections']): Pick<FastifyServerOptions, 'requestTimeout' | 'keepAliveTimeout' | 'clientErrorHandler'> & { http: http.ServerOptions } {
  return {
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1000, limits.headersTimeoutMs / 4),
    },
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Called with the instance as `this` (Fastify binds it).
    clientErrorHandler(this: FastifyInstance, err, socket) {
      clientError(err as unknown as ClientError, socket, limits, this.log)
    },
  }
}

/**
 * Connections over the cap are closed as they are accepted, before a byte is read: an
 * answer would have to read the request first, which is what a slow client holds.
 */
export function capConnections(server: http.Server, max: number, log: FastifyBaseLogger): void {
  if (max <= 0) return
  const open = new Map<string, number>()
  // One warning per address a minute: a flood of refused connections is not a flood of lines.
  const warned = new Map<string, { at: number; refused: number }>()
  // Ahead of the HTTP server's own listener, so a refused connection is never parsed.
  server.prependListener('connection', (socket: Socket) => {
    const key = limitKey(socket.remoteAddress ?? '')
    const count = (open.get(key) ?? 0) + 1
    if (count > max) {
      socket.destroy()
      const now = Date.now()
      const w = warned.get(key)
      if (w && now - w.at < 60_000) {
        w.refused++
        return
      }
      if (warned.size >= 10_000) warned.clear()
      warned.set(key, { at: now, refused: 0 })
      log.warn({ remoteAddress: socket.remoteAddress, open: max, refusedSinceLastWarning: w?.refused ?? 0 }, 'connections refused: too many open connections from this address (one warning a minute)')
      return
    }
    open.set(key, count)
    socket.once('close', () => {
      const left = (open.get(key) ?? 1) - 1
      if (left > 0) open.set(key, left)
      else open.delete(key)
    })
  })
}

/**
 * An `Expect` other than `100-continue` (which Node answers itself): Node would answer a
 * bare 417, before any route is chosen.
 */
export function refuseExpectations(server: http.Server): void {
  server.on('checkExpectation', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const requestId = crypto.randomUUID()
    const err = problem('expectation-failed', `Expect: ${String(req.headers.expect).slice(0, 40)} cannot be met; only 100-continue is understood.`)
    const body = JSON.stringify(problemBody(err, (req.url ?? '').split('?')[0].slice(0, 200), requestId))
    res.writeHead(err.status, {
      'content-type': 'application/problem+json',
      'content-length': Buffer.byteLength(body),
      'x-request-id': requestId,
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      connection: 'close',
    })
    res.end(body)
  })
}

type ClientError = Error & { code?: string; rawPacket?: Buffer }

/** Fastify answers these with JSON of its own: here they are problem documents like every other answer. */
function clientError(err: ClientError, socket: Socket & { _httpMessage?: http.ServerResponse | null }, limits: Config['connections'], log: FastifyBaseLogger) {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const [code, detail]: [ProblemCode, string] =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['request-timeout', `The request was not received in time: its headers must arrive within ${limits.headersTimeoutMs / 1000} s and all of it within ${limits.requestTimeoutMs / 1000} s.`]
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? ['headers-too-large', `The request line and headers together exceed ${HEADER_BYTES} bytes.`]
        : ['malformed-request', `The request is not valid HTTP/1.1 (${String(err.code ?? 'unreadable').slice(0, 40)}).`]
  const requestId = crypto.randomUUID()
  log.info({ reqId: requestId, remoteAddress: socket.remoteAddress, code: err.code }, `request refused before routing: ${code}`)
  // A request already being answered cannot be answered again: only closed.
  if (socket.writable && !socket._httpMessage?.headersSent) {
    const body = JSON.stringify(withoutInstance(problemBody(problem(code, detail), requestPath(err.rawPacket), requestId)))
    const status = problem(code, detail).status
    socket.write(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/problem+json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `x-request-id: ${requestId}\r\ncache-control: no-store\r\nx-content-type-options: nosniff\r\nconnection: close\r\n\r\n${body}`,
    )
  }
  socket.destroy(err)
}

/** The path of the request line the packet starts with, when it has one (never the query). */
function requestPath(packet: Buffer | undefined): string {
  const line = /^[A-Z]{3,10} (\/[^\s?]{0,200})/.exec(packet?.subarray(0, 256).toString('latin1') ?? '')
  return line ? line[1] : ''
}

function withoutInstance<T extends { instance: string }>(body: T): Omit<T, 'instance'> | T {
  if (body.instance) return body
  const { instance: _, ...rest } = body
  return rest
}
