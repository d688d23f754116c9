// npm run receiver -- [--listen 127.0.0.1:9000] [--secret <webhook secret>]
// A local webhook receiver for trying alarm destinations: prints each delivery it gets
// (headers that matter and the JSON body) and, given the destination's secret, whether
// its signature verifies. A batch (batch mode) is verified once and listed element by
// element, as the contract tells receivers to take it apart. Listens on loopback only; the server must allow it with
// PRIME_ALARM_ALLOWED_HOSTS=127.0.0.1 (npm run demo does).
import crypto from 'node:crypto'
import http from 'node:http'
import { parseArgs } from 'node:util'

const { values } = parseArgs({
  options: {
    listen: { type: 'string', default: '127.0.0.1:9000' },
    secret: { type: 'string' },
  },
})
const m = /^(127\.\d{1,3}\.\d{1,3}\.\d{1,3}|localhost|\[::1\]):(\d{1,5})$/.exec(values.listen)
if (!m) {
  console.error(`--listen must be a loopback address and port (127.0.0.1:9000), got "${values.listen}"`)
  process.exit(2)
}
const host = m[1].replace(/^\[|\]$/g, '')
const port = Number(m[2])
const MAX_BODY = 10 * 1024 * 1024

function verdict(headers: http.IncomingHttpHeaders, raw: Buffer): string {
  if (!values.secret) return 'signature not checked (no --secret)'
  const expected = `sha256=${crypto.createHmac('sha256', values.secret).update(raw).digest('hex')}`
  const given = String(headers['x-prime-signature'] ?? '')
  const ok = given.length === expected.length && crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected))
  return ok ? 'signature verified' : 'SIGNATURE DOES NOT MATCH'
}

let count = 0
const server = http.createServer((req, res) => {
  // Anything but a delivery (a browser, a readiness check) is answered, not printed.
  if (req.method !== 'POST') {
    req.resume()
    res.writeHead(200, { 'content-type': 'text/plain' }).end('receiver ready\n')
    return
  }
  const chunks: Buffer[] = []
  let size = 0
  req.on('data', (c: Buffer) => {
    size += c.length
    if (size <= MAX_BODY) chunks.push(c)
  })
  req.on('end', () => {
    const raw = Buffer.concat(chunks)
    count += 1
    let body: unknown = raw.toString('utf8')
    try {
      body = JSON.parse(raw.toString('utf8'))
    } catch {
      // printed as text
    }
    const h = req.headers
    const batch = h['x-prime-batch-size'] !== undefined && typeof body === 'object' && body !== null && Array.isArray((body as { deliveries?: unknown }).deliveries)
    if (batch) {
      const elements = (body as { deliveries: { deliveryId?: string }[] }).deliveries
      console.log(`#${count} ${new Date().toISOString()} ${req.method} ${req.url} batch ${h['x-prime-delivery-id'] ?? '-'} of ${elements.length} (${verdict(h, raw)})`)
      elements.forEach((e, i) => {
        console.log(`  ${i + 1}/${elements.length} delivery ${e.deliveryId ?? '-'}`)
        console.log(JSON.stringify(e, null, 2))
      })
    } else {
      console.log(`#${count} ${new Date().toISOString()} ${req.method} ${req.url} delivery ${h['x-prime-delivery-id'] ?? '-'} (${verdict(h, raw)})`)
      console.log(typeof body === 'string' ? body : JSON.stringify(body, null, 2))
    }
    res.writeHead(size > MAX_BODY ? 413 : 200, { 'content-type': 'text/plain' }).end(size > MAX_BODY ? 'too large\n' : 'ok\n')
  })
})
server.listen(port, host, () => console.log(`Receiving webhooks on http://${values.listen}/ (Ctrl-C stops)`))
for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => server.close(() => process.exit(0)))
