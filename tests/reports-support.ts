// What the report tests share: a real SMTP server on 127.0.0.1 whose messages are parsed
// with postal-mime, a reader of ZIP archives, and report definitions made through the API
// (CSV and PDF readers: fixtures/documents.ts).
import net, { type AddressInfo } from 'node:net'
import zlib from 'node:zlib'
import type { FastifyInstance } from 'fastify'
import { SMTPServer } from 'smtp-server'
import PostalMime, { type Email } from 'postal-mime'
import { call } from './helpers.js'

export interface Smtp {
  port: number
  url: string
  messages: (Email & { envelopeFrom: string; envelopeTo: string[] })[]
  /** Recipients RCPT TO refuses with 550. */
  refuse: Set<string>
  /** Answer every RCPT TO with 451 (try again later) while set. */
  busy: boolean
  listening: boolean
  start(): Promise<void>
  stop(): Promise<void>
}

/** An SMTP server (no TLS, no auth) on 127.0.0.1; stopped and started again on the same port. */
export async function smtp(t: { teardown: (fn: () => unknown) => void }, listen = true): Promise<Smtp> {
  const probe = net.createServer()
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r))
  const port = (probe.address() as AddressInfo).port
  await new Promise<void>((r) => probe.close(() => r()))
  let server: SMTPServer | null = null
  const s: Smtp = {
    port,
    url: `smtp://127.0.0.1:${port}`,
    messages: [],
    refuse: new Set(),
    busy: false,
    listening: false,
    async start() {
      server = new SMTPServer({
        disabledCommands: ['STARTTLS', 'AUTH'],
        authOptional: true,
        logger: false,
        size: 50 * 1024 * 1024,
        onRcptTo(address, _session, cb) {
          if (s.busy) return cb(Object.assign(new Error('Mailbox busy, try again later'), { responseCode: 451 }))
          if (s.refuse.has(address.address.toLowerCase())) return cb(Object.assign(new Error(`5.7.1 Relaying denied for ${address.address}`), { responseCode: 550 }))
          cb()
        },
        onData(stream, session, cb) {
          const chunks: Buffer[] = []
          stream.on('data', (c: Buffer) => chunks.push(c))
          stream.on('end', () => {
            PostalMime.parse(Buffer.concat(chunks), { attachmentEncoding: 'arraybuffer' }).then((email) => {
              s.messages.push({
                ...email,
                envelopeFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
                envelopeTo: session.envelope.rcptTo.map((r) => r.address),
              })
              cb(null, 'Ok: queued as TEST' + s.messages.length)
            }, cb)
          })
        },
      })
      await new Promise<void>((r) => server!.listen(port, '127.0.0.1', () => r()))
      s.listening = true
    },
    async stop() {
      if (!server) return
      const closing = server
      server = null
      s.listening = false
      await new Promise<void>((r) => closing.close(() => r()))
    },
  }
  if (listen) await s.start()
  t.teardown(() => s.stop())
  return s
}

/** The entries of a ZIP archive (name and content), every CRC checked. */
export function unzip(zip: Buffer): { name: string; data: Buffer }[] {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]))
  if (eocd < 0) throw new Error('not a ZIP archive')
  const count = zip.readUInt16LE(eocd + 10)
  let p = zip.readUInt32LE(eocd + 16)
  const out: { name: string; data: Buffer }[] = []
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(p) !== 0x02014b50) throw new Error('bad central directory')
    const method = zip.readUInt16LE(p + 10)
    const crc = zip.readUInt32LE(p + 16)
    const size = zip.readUInt32LE(p + 20)
    const nameLen = zip.readUInt16LE(p + 28)
    const extraLen = zip.readUInt16LE(p + 30)
    const commentLen = zip.readUInt16LE(p + 32)
    const local = zip.readUInt32LE(p + 42)
    const name = zip.subarray(p + 46, p + 46 + nameLen).toString('utf8')
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28)
    const raw = zip.subarray(start, start + size)
    const data = method === 8 ? zlib.inflateRawSync(raw) : Buffer.from(raw)
    if (zlib.crc32(data) !== crc) throw new Error(`CRC mismatch in ${name}`)
    out.push({ name, data })
    p += 46 + nameLen + extraLen + commentLen
  }
  return out
}

export const REPORTS = '/prime/webui/reports'

/** Creates a report through the API (failing the test setup when refused). */
export async function createReport(app: FastifyInstance, token: string, body: Record<string, unknown>): Promise<Record<string, any>> {
  const res = await call(app, token, { method: 'POST', url: `${REPORTS}/create`, payload: body })
  if (res.statusCode !== 200) throw new Error(`create report: ${res.statusCode} ${res.body}`)
  return res.json()
}

/** Queues a run now and waits until it (and its e-mail) is done; answers the run. */
export async function runNow(app: FastifyInstance, token: string, reportId: string): Promise<Record<string, any>> {
  const res = await call(app, token, { method: 'POST', url: `${REPORTS}/RequestForRun`, payload: [reportId] })
  if (res.statusCode !== 200 || res.json().succeeded !== 1) throw new Error(`RequestForRun: ${res.statusCode} ${res.body}`)
  const runId = res.json().runIds[0]
  await app.reportScheduler.idle()
  const report = await call(app, token, { method: 'GET', url: `${REPORTS}/get/${reportId}` })
  return report.json().runs.find((r: { runId: string }) => r.runId === runId)
}

/** Downloads one file: status, headers and bytes. */
export async function download(app: FastifyInstance, token: string, reportId: string, fileId?: string | null, accept?: string) {
  return call(app, token, { method: 'POST', url: `${REPORTS}/GetReportFile`, payload: fileId === undefined ? { reportId } : { reportId, fileId }, headers: accept ? { accept } : {} })
}
