// The checks a worker poller runs against a host, without logging in: SSH reads the
// server's identification banner; WinRM sends the WS-Management Identify request (which
// the service answers without credentials, or refuses with 401 when it wants them).
import http from 'node:http'
import https from 'node:https'
import net from 'node:net'

export type CheckStatus = 'Reachable' | 'Unreachable' | 'Failed'

export interface CheckTarget {
  address: string
  port: number
  protocol: 'SSH' | 'WinRM'
  useTls: boolean
  timeoutSeconds: number
}

export interface CheckResult {
  status: CheckStatus
  description: string
  error: string | null
}

const where = (t: CheckTarget) => `${t.address.includes(':') ? `[${t.address}]` : t.address}:${t.port}`
const printable = (s: string, max: number) => s.replace(/[^\x20-\x7e]/g, '?').slice(0, max)

/** Why a connection attempt failed, in words (Unreachable: no service answered). */
function connectError(err: NodeJS.ErrnoException, t: CheckTarget): CheckResult {
  const reasons: Record<string, string> = {
    ECONNREFUSED: 'Connection refused: nothing listens on that port.',
    ENOTFOUND: `Host name ${t.address} not resolved.`,
    EAI_AGAIN: `Host name ${t.address} could not be resolved now (DNS unavailable).`,
    EHOSTUNREACH: 'No route to the host.',
    ENETUNREACH: 'Network unreachable.',
    ECONNRESET: 'The connection was reset.',
    ETIMEDOUT: `No answer within ${t.timeoutSeconds} s.`,
  }
  return { status: 'Unreachable', description: `TCP connect to ${where(t)} failed.`, error: reasons[err.code ?? ''] ?? `${err.code ?? 'Error'}: ${err.message}` }
}

/** Connects, then reads the SSH identification line (RFC 4253, 4.2). */
export function checkSsh(t: CheckTarget): Promise<CheckResult> {
  return new Promise((resolve) => {
    const started = performance.now()
    let connectedMs: number | null = null
    let received = ''
    let settled = false
    const socket = net.connect({ host: t.address, port: t.port })
    const finish = (r: CheckResult) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve(r)
    }
    const timer = setTimeout(() => {
      if (connectedMs === null) finish({ status: 'Unreachable', description: `TCP connect to ${where(t)} failed.`, error: `Connection timed out after ${t.timeoutSeconds} s.` })
      else finish({ status: 'Failed', description: `Connected to ${where(t)} in ${connectedMs} ms.`, error: `No SSH banner within ${t.timeoutSeconds} s.` })
    }, t.timeoutSeconds * 1000)
    socket.setNoDelay(true)
    socket.on('connect', () => {
      connectedMs = Math.round(performance.now() - started)
    })
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1')
      // The server may send other lines before its identification; 8 KiB of them is plenty.
      for (;;) {
        const end = received.indexOf('\n')
        if (end < 0) break
        const line = received.slice(0, end).replace(/\r$/, '')
        received = received.slice(end + 1)
        if (line.startsWith('SSH-')) {
          const banner = printable(line, 255)
          if (/^SSH-(2\.0|1\.99)-/.test(line)) {
            finish({ status: 'Reachable', description: `SSH server ${banner} answered on ${where(t)} (connect ${connectedMs} ms, banner ${Math.round(performance.now() - started)} ms).`, error: null })
          } else {
            finish({ status: 'Failed', description: `Connected to ${where(t)}; the server sent ${banner}.`, error: 'The SSH server speaks only protocol version 1, which is not supported.' })
          }
          return
        }
        if (!/^[\x20-\x7e\t]*$/.test(line)) {
          finish({ status: 'Failed', description: `Connected to ${where(t)} in ${connectedMs} ms.`, error: 'The service is not SSH: it sent binary data.' })
          return
        }
      }
      if (received.length > 8192) finish({ status: 'Failed', description: `Connected to ${where(t)} in ${connectedMs} ms.`, error: `The service is not SSH: it sent "${printable(received, 60)}".` })
    })
    socket.on('end', () => {
      finish({
        status: 'Failed',
        description: `Connected to ${where(t)} in ${connectedMs} ms.`,
        error: `The service closed the connection without an SSH banner${received ? ` (it sent "${printable(received, 60)}")` : ''}.`,
      })
    })
    socket.on('error', (err: NodeJS.ErrnoException) => {
      if (connectedMs === null) finish(connectError(err, t))
      else finish({ status: 'Failed', description: `Connected to ${where(t)} in ${connectedMs} ms.`, error: `The connection failed: ${err.code ?? err.message}.` })
    })
  })
}

const IDENTIFY =
  '<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope" ' +
  'xmlns:wsmid="http://schemas.dmtf.org/wbem/wsman/identity/1/wsmanidentity.xsd"><s:Header/><s:Body><wsmid:Identify/></s:Body></s:Envelope>'

const tag = (xml: string, name: string) => new RegExp(`<(?:\\w+:)?${name}>([^<]{0,200})</(?:\\w+:)?${name}>`).exec(xml)?.[1]

/** Sends WS-Management Identify to /wsman over HTTP or HTTPS. */
export function checkWinRm(t: CheckTarget): Promise<CheckResult> {
  return new Promise((resolve) => {
    const started = performance.now()
    const scheme = t.useTls ? 'https' : 'http'
    let connected = false
    let settled = false
    const finish = (r: CheckResult) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      req.destroy()
      resolve(r)
    }
    const options: https.RequestOptions = {
      host: t.address,
      port: t.port,
      path: '/wsman',
      method: 'POST',
      headers: { 'content-type': 'application/soap+xml;charset=UTF-8', 'content-length': Buffer.byteLength(IDENTIFY), wsmanidentify: 'unauthenticated' },
      // Hosts commonly have self-signed certificates; the check is about the service, and no secret is sent.
      rejectUnauthorized: false,
      agent: false,
    }
    const req = (t.useTls ? https : http).request(options, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        if (body.length < 65536) body += chunk
      })
      res.on('end', () => {
        const ms = Math.round(performance.now() - started)
        const status = res.statusCode ?? 0
        if (status === 200 && /IdentifyResponse/.test(body)) {
          const vendor = tag(body, 'ProductVendor') ?? 'unknown vendor'
          const version = tag(body, 'ProductVersion') ?? 'unknown version'
          const stack = tag(body, 'ProtocolVersion')
          finish({ status: 'Reachable', description: printable(`WinRM on ${scheme}://${where(t)} identified as ${vendor}, ${version}${stack ? ` (${stack})` : ''} in ${ms} ms.`, 1000), error: null })
        } else if (status === 401) {
          const schemes = [res.headers['www-authenticate']].flat().filter(Boolean).join(', ')
          finish({
            status: 'Reachable',
            description: printable(`WinRM on ${scheme}://${where(t)} answered in ${ms} ms and requires authentication${schemes ? ` (${schemes})` : ''}.`, 1000),
            error: null,
          })
        } else {
          finish({
            status: 'Failed',
            description: `HTTP ${status} from ${scheme}://${where(t)}/wsman in ${ms} ms.`,
            error: `The service did not answer the WS-Management Identify request (HTTP ${status}); it is not WinRM, or WinRM is not listening at /wsman.`,
          })
        }
      })
    })
    req.on('socket', (socket) => {
      socket.once(t.useTls ? 'secureConnect' : 'connect', () => {
        connected = true
      })
    })
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (!connected && ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT'].includes(err.code ?? '')) finish(connectError(err, t))
      else
        finish({
          status: 'Failed',
          description: `Connected to ${scheme}://${where(t)}.`,
          error: printable(`The ${t.useTls ? 'TLS or HTTP' : 'HTTP'} exchange failed: ${err.code ?? ''} ${err.message}`.trim(), 2000),
        })
    })
    const timer = setTimeout(() => {
      if (connected) finish({ status: 'Failed', description: `Connected to ${scheme}://${where(t)}.`, error: `No answer to the WS-Management Identify request within ${t.timeoutSeconds} s.` })
      else finish({ status: 'Unreachable', description: `TCP connect to ${where(t)} failed.`, error: `Connection timed out after ${t.timeoutSeconds} s.` })
    }, t.timeoutSeconds * 1000)
    req.end(IDENTIFY)
  })
}

export function runCheck(t: CheckTarget): Promise<CheckResult> {
  return t.protocol === 'SSH' ? checkSsh(t) : checkWinRm(t)
}
