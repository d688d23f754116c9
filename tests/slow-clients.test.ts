// Slow and greedy clients on a real socket (127.0.0.1): a request must arrive within the
// headers and request timeouts, an idle keep-alive connection is closed, one address may
// hold only so many connections, and what is refused before routing is a problem document.
// Long answers (the notification stream) are not cut by the request timeout.
import net from 'node:net'
import http from 'node:http'
import t from 'tap'
import { build, login } from './helpers.js'

const LOGIN = '/prime/webui/Auth/LocalLogin'
const short = { PRIME_HEADERS_TIMEOUT_SECONDS: '1', PRIME_REQUEST_TIMEOUT_SECONDS: '2', PRIME_KEEP_ALIVE_TIMEOUT_SECONDS: '1' }

async function listening(t: Parameters<typeof build>[0], env: Record<string, string> = {}) {
  const app = await build(t, { ...short, ...env })
  await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, port: (app.server.address() as net.AddressInfo).port }
}

interface Exchange {
  data: string
  closed: boolean
  ms: number
}

/**
 * Writes `parts` one every `everyMs`, and answers what came back once the server closes
 * the connection, or at `giveUpMs` (then `closed` is false).
 */
function exchange(port: number, parts: (string | Buffer)[], everyMs: number, giveUpMs: number): Promise<Exchange> {
  return new Promise((resolve) => {
    const started = Date.now()
    const socket = net.connect(port, '127.0.0.1')
    let data = ''
    let i = 0
    const writer = setInterval(() => {
      if (i < parts.length && socket.writable) socket.write(parts[i++])
    }, everyMs)
    const done = (closed: boolean) => {
      clearInterval(writer)
      clearTimeout(giveUp)
      socket.destroy()
      resolve({ data, closed, ms: Date.now() - started })
    }
    const giveUp = setTimeout(() => done(false), giveUpMs)
    socket.on('connect', () => {
      if (parts.length > 0 && everyMs === 0) for (; i < parts.length; i++) socket.write(parts[i])
    })
    socket.on('data', (chunk) => {
      data += chunk.toString('latin1')
    })
    socket.on('error', () => {})
    socket.on('close', () => done(true))
  })
}

/** The status line and the parsed problem document of a raw answer. */
function problemOf(t: Parameters<typeof build>[0] & { equal: (...args: any[]) => unknown; match: (...args: any[]) => unknown }, raw: string, status: number, code: string) {
  const [head, body] = [raw.slice(0, raw.indexOf('\r\n\r\n')), raw.slice(raw.indexOf('\r\n\r\n') + 4)]
  t.match(head, new RegExp(`^HTTP/1.1 ${status} `), `answers ${status}: ${raw.slice(0, 200)}`)
  t.match(head, /content-type: application\/problem\+json/i)
  const doc = JSON.parse(body)
  t.match(doc, { status, code, type: `urn:prime:problem:${code}` })
  t.match(head, new RegExp(`x-request-id: ${doc.requestId}`, 'i'), 'the request id in the header and the document')
  return doc
}

const bytes = (s: string) => s.split('').map((c) => Buffer.from(c, 'latin1'))

t.test('a body trickled byte by byte is cut at the request timeout with a 408', async (t) => {
  const { port } = await listening(t)
  const body = JSON.stringify({ username: 'admin', password: 'a-password-that-takes-a-while' })
  const head = `POST ${LOGIN} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
  const res = await exchange(port, [head, ...bytes(body)], 200, 8000)
  t.ok(res.closed, `closed by the server (after ${res.ms} ms)`)
  t.ok(res.ms >= 1900 && res.ms < 5000, `within the 2 s request timeout and its check (${res.ms} ms)`)
  const doc = problemOf(t as any, res.data, 408, 'request-timeout')
  t.match(doc.detail, 'within 2 s')
})

t.test('headers trickled, or never sent, are cut at the headers timeout', async (t) => {
  const { port } = await listening(t)
  const trickled = await exchange(port, bytes(`GET /prime/webui/admin/PrimeVersion HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ${'x'.repeat(100)}`), 100, 8000)
  t.ok(trickled.closed && trickled.ms < 3500, `closed after ${trickled.ms} ms`)
  problemOf(t as any, trickled.data, 408, 'request-timeout')
  const silent = await exchange(port, [], 0, 8000)
  t.ok(silent.closed && silent.ms < 3500, `a connection that sends nothing is closed after ${silent.ms} ms`)
})

t.test('a slow request within the timeouts is answered; so is a keep-alive one, then closed when idle', async (t) => {
  const { port } = await listening(t)
  const body = JSON.stringify({ username: 'admin', password: 'wrong-password-1' })
  const head = `POST ${LOGIN} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
  // Five parts 250 ms apart: about a second, under the 2 s request timeout.
  const parts = [head, body.slice(0, 10), body.slice(10, 20), body.slice(20, 30), body.slice(30)]
  const res = await exchange(port, parts, 250, 8000)
  t.match(res.data, /^HTTP\/1.1 400 /, 'answered (a wrong password)')
  t.match(res.data, /invalid-credentials/)
  t.ok(res.closed, 'then the idle keep-alive connection is closed')
  t.ok(res.ms < 6000, `soon after, at the keep-alive timeout (${res.ms} ms)`)
})

t.test('an answer may take longer than the request timeout: the notification stream stays open', async (t) => {
  const { app, port } = await listening(t)
  const token = await login(app)
  const events: string[] = []
  const stream = await new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/prime/webui/systemNotification/stream', headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, resolve)
    req.on('error', reject)
    t.teardown(() => req.destroy())
  })
  t.equal(stream.statusCode, 200)
  let ended = false
  stream.on('data', (chunk) => events.push(String(chunk)))
  stream.on('close', () => {
    ended = true
  })
  await new Promise((r) => setTimeout(r, 3500))
  t.notOk(ended, 'still open after 3.5 s, past the 2 s request timeout and 1 s keep-alive timeout')
  t.ok(events.length > 0, 'and it streamed')
})

t.test('one address holds at most the cap of connections; the others are closed at once', async (t) => {
  const { port } = await listening(t, { PRIME_MAX_CONNECTIONS_PER_ADDRESS: '3', PRIME_HEADERS_TIMEOUT_SECONDS: '5', PRIME_REQUEST_TIMEOUT_SECONDS: '5' })
  const held: net.Socket[] = []
  t.teardown(() => held.forEach((s) => s.destroy()))
  for (let i = 0; i < 3; i++) {
    const s = net.connect(port, '127.0.0.1')
    await new Promise((r) => s.once('connect', r))
    s.write('GET /prime/webui/admin/PrimeVersion HTTP/1.1\r\n')
    held.push(s)
  }
  await new Promise((r) => setTimeout(r, 100))
  const refused = await exchange(port, ['GET /prime/webui/admin/PrimeVersion HTTP/1.1\r\nHost: x\r\n\r\n'], 0, 3000)
  t.ok(refused.closed, 'a fourth connection is closed')
  t.ok(refused.ms < 1000, `at once (${refused.ms} ms)`)
  t.equal(refused.data, '', 'without reading or answering its request')
  held.pop()!.destroy()
  await new Promise((r) => setTimeout(r, 100))
  const admitted = await exchange(port, ['GET /prime/webui/admin/PrimeVersion HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'], 0, 3000)
  t.match(admitted.data, /^HTTP\/1.1 401 /, 'once one closes, a new connection is answered')
})

t.test('before routing: 431 for a request line or headers over the limit, 400 for what is not HTTP', async (t) => {
  const { port } = await listening(t)
  const longLine = await exchange(port, [`GET /prime/webui/agents?GlobalSearch=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`], 0, 5000)
  const line = problemOf(t as any, longLine.data, 431, 'headers-too-large')
  t.match(line.detail, String(http.maxHeaderSize))
  t.notMatch(longLine.data, /aaaaaaaaaa/, 'the request is not echoed')
  const longHeader = await exchange(port, [`GET /prime/webui/agents HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`], 0, 5000)
  problemOf(t as any, longHeader.data, 431, 'headers-too-large')
  for (const [what, raw] of [
    ['not HTTP', 'HELLO THERE\r\n\r\n'],
    ['a content length that is not a number', `POST ${LOGIN} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}`],
    ['two content lengths', `POST ${LOGIN} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`],
    ['a content length with chunked encoding', `POST ${LOGIN} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`],
    ['a malformed chunk', `POST ${LOGIN} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`],
  ]) {
    const res = await exchange(port, [raw], 0, 5000)
    const doc = problemOf(t as any, res.data, 400, 'malformed-request')
    t.match(doc.detail, /not valid HTTP\/1\.1/, what)
  }
  const expect = await exchange(port, [`POST ${LOGIN} HTTP/1.1\r\nHost: x\r\nExpect: something-else\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`], 0, 5000)
  t.match(problemOf(t as any, expect.data, 417, 'expectation-failed').detail, 'only 100-continue')
  // Node undoes the chunked transfer coding only: a gzip one would be read as it is.
  const gzip = await exchange(
    port,
    [`POST ${LOGIN} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n`],
    0,
    5000,
  )
  t.match(problemOf(t as any, gzip.data, 415, 'unsupported-media-type').detail, 'Transfer-Encoding gzip, chunked')
  const chunked = await exchange(port, [`POST ${LOGIN} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n`], 0, 5000)
  t.match(chunked.data, /^HTTP\/1.1 400 [\s\S]*body\/username is required/, 'a chunked body is read')
})
