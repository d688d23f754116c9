// What an alarm destination receives for one record: the webhook body, the syslog line
// (RFC 5424 or CEF) and the e-mail, as the contract's AlarmWebhookPayload,
// AlarmSyslogMessage, AlarmCefMessage and AlarmEmailMessage describe them.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import type { components } from '../../generated/openapi.js'
import { eventCodes } from '../event-codes.js'
import { severityNames } from '../listing.js'
import { projectRoot } from '../paths.js'
import { iso } from '../time.js'

type PrimeEventView = components['schemas']['PrimeEventView']
type AuditTrailView = components['schemas']['AuditTrailView']

export const VERSION: string = JSON.parse(fs.readFileSync(path.join(projectRoot, 'package.json'), 'utf8')).version
export const USER_AGENT = `Prime-Alarm/${VERSION}`

/** Asset messages have no severity: they travel as Informational. */
const ASSET_SEVERITY = 6
/**
 * The test message is no stored event; its `eventID` in a webhook body is this id, which
 * no stored event reaches.
 */
export const TEST_EVENT_ID = Number.MAX_SAFE_INTEGER

/** One record to deliver, as read from the database (or the test message). */
export type AlarmRecord =
  | { feed: 'events'; event: PrimeEventView }
  | { feed: 'test'; event: PrimeEventView }
  | { feed: 'audit'; auditTrail: AuditTrailView }
  | { feed: 'assets'; asset: Record<string, any>; createdMs: number }

export interface DeliveryContext {
  deliveryId: string
  attempt: number
  /** Wall clock of this attempt, Unix seconds (the signed `X-Prime-Timestamp`). */
  sentTime: number
  destination: { id: string; name: string }
}

/** The test message of `TestAlarmDests`: an event never stored. */
export function testRecord(destinationName: string, nowMs: number): AlarmRecord {
  return {
    feed: 'test',
    event: {
      eventID: TEST_EVENT_ID,
      creationTime: iso(nowMs),
      creationTimeEpoch: nowMs,
      eventCode: eventCodes.alarmTest.code,
      severity: eventCodes.alarmTest.severity,
      severityString: 'Informational',
      category: eventCodes.alarmTest.category,
      eventEntityID: 'Prime server',
      description: eventCodes.alarmTest.description,
      details: `Test message from Prime to ${destinationName}.`,
      hashtags: null,
      peripheralIcon: '-1',
      assetKey: null,
      assetName: null,
      peripheralAssetId: null,
    },
  }
}

// ---- Webhook ---------------------------------------------------------------------------

export function webhookPayload(record: AlarmRecord, ctx: DeliveryContext): Record<string, unknown> {
  // Written out, not spread from a common base: one per record delivered, and Node 20 takes
  // about a microsecond for a property added after a spread.
  const { deliveryId, sentTime, attempt, destination } = ctx
  if (record.feed === 'audit') return { deliveryId, feed: record.feed, sentTime, attempt, destination, auditTrail: record.auditTrail }
  if (record.feed === 'assets') return { deliveryId, feed: record.feed, sentTime, attempt, destination, asset: record.asset }
  return { deliveryId, feed: record.feed, sentTime, attempt, destination, event: record.event }
}

/** Room kept in a batch's `maxBytes` for its envelope around the payloads. */
export const BATCH_ENVELOPE_BYTES = 1024

/**
 * The body of a webhook batch (`AlarmWebhookBatch`): each element is a single payload as
 * serialized for one event per request (`parts`, in outbox order), byte for byte.
 */
export function webhookBatchBody(batchId: string, sentTime: number, destination: DeliveryContext['destination'], parts: string[]): Buffer {
  const head = JSON.stringify({ batchId, sentTime, destination, count: parts.length })
  return Buffer.from(`${head.slice(0, -1)},"deliveries":[${parts.join(',')}]}`)
}

// ---- Syslog ----------------------------------------------------------------------------

export const FACILITIES: Record<string, number> = {
  kern: 0,
  user: 1,
  mail: 2,
  daemon: 3,
  auth: 4,
  syslog: 5,
  lpr: 6,
  news: 7,
  uucp: 8,
  cron: 9,
  authpriv: 10,
  ftp: 11,
  ntp: 12,
  audit: 13,
  alert: 14,
  clock: 15,
  local0: 16,
  local1: 17,
  local2: 18,
  local3: 19,
  local4: 20,
  local5: 21,
  local6: 22,
  local7: 23,
}
const CEF_SEVERITY = [10, 9, 8, 7, 5, 3, 1, 0]

/** RFC 5424 HOSTNAME: printable US-ASCII without spaces, at most 255. */
const headerToken = (s: string, max: number) => s.replace(/[^\x21-\x7e]/g, '').slice(0, max) || '-'
export const SYSLOG_HOSTNAME = headerToken(os.hostname(), 255)

/** RFC 5424 PARAM-VALUE: `"`, `\` and `]` escaped with a backslash. */
export const sdEscape = (v: string) => v.replace(/["\\\]]/g, (c) => '\\' + c)
/** CEF header field: `\` and `|` escaped; no line breaks. */
export const cefHeaderEscape = (v: string) => v.replace(/[\\|]/g, (c) => '\\' + c).replace(/\r\n|[\r\n]/g, ' ')
/** CEF extension value: `\` and `=` escaped, line breaks as `\n`. */
export const cefValueEscape = (v: string) => v.replace(/[\\=]/g, (c) => '\\' + c).replace(/\r\n|[\r\n]/g, '\\n')

/** The address at the end of an event source `<host> (<address>)`. */
function sourceAddress(entity: string): string | null {
  const m = /\(([0-9a-fA-F.:]+)\)\s*$/.exec(entity)
  return m ? m[1] : null
}

interface SyslogParts {
  severity: number
  timeMs: number
  msgId: string
  sd: [string, string | number | null | undefined][]
  message: string
  /** Made only for a CEF line (a syslog lane formats hundreds of lines per write). */
  cef: () => { signature: string; name: string; ext: [string, string | number | null | undefined][] }
}

function syslogParts(record: AlarmRecord, ctx: DeliveryContext): SyslogParts {
  if (record.feed === 'audit') {
    const a = record.auditTrail
    const source = `${a.user ?? 'unknown'}${a.sourceIp ? ` (${a.sourceIp})` : ''}`
    return {
      severity: a.severity,
      timeMs: a.creationTimeEpoch,
      msgId: 'audit',
      sd: [
        ['deliveryId', ctx.deliveryId],
        ['auditTrailID', a.auditTrailID],
        ['category', a.category],
        ['severity', a.severity],
        ['source', source],
        ['asset', a.assetReference.name],
      ],
      message: `${a.description}: ${a.details}`,
      cef: () => ({
        signature: 'audit',
        name: a.description,
        ext: [
          ['rt', a.creationTimeEpoch],
          ['externalId', a.auditTrailID],
          ['cat', a.category],
          ['dvchost', a.assetReference.name],
          ['src', a.sourceIp],
          ['suser', a.user],
          ['msg', a.details],
        ],
      }),
    }
  }
  if (record.feed === 'assets') {
    const m = record.asset
    const name = m.kind === 'locationChanged' ? 'Asset location changed' : 'Asset snapshot'
    return {
      severity: ASSET_SEVERITY,
      timeMs: typeof m.timeEpoch === 'number' ? m.timeEpoch : record.createdMs,
      msgId: 'asset',
      sd: [
        ['deliveryId', ctx.deliveryId],
        ['messageId', m.messageId],
        ['kind', m.kind],
        ['category', m.assetType],
        ['asset', m.name],
      ],
      message: JSON.stringify(m),
      cef: () => ({
        signature: 'asset',
        name,
        ext: [
          ['rt', typeof m.timeEpoch === 'number' ? m.timeEpoch : record.createdMs],
          ['externalId', m.messageId],
          ['cat', m.assetType],
          ['dvchost', m.name],
          ['src', m.location?.ipAddress],
          ['msg', JSON.stringify(m)],
        ],
      }),
    }
  }
  const e = record.event
  const stored = record.feed === 'events'
  return {
    severity: e.severity,
    timeMs: e.creationTimeEpoch,
    msgId: e.eventCode,
    sd: [
      ['deliveryId', ctx.deliveryId],
      ['eventID', stored ? e.eventID : null],
      ['category', e.category],
      ['severity', e.severity],
      ['source', e.eventEntityID],
      ['asset', e.assetName],
    ],
    message: `${e.description}: ${e.details}`,
    cef: () => ({
      signature: e.eventCode,
      name: e.description,
      ext: [
        ['rt', e.creationTimeEpoch],
        ['externalId', stored ? e.eventID : null],
        ['cat', e.category],
        ['dvchost', e.assetName],
        ['src', sourceAddress(e.eventEntityID)],
        ['msg', e.details],
      ],
    }),
  }
}

/** The syslog line of a record (without the TCP octet count), in the destination's format. */
export function syslogLine(record: AlarmRecord, ctx: DeliveryContext, format: 'rfc5424' | 'cef', facility: string): string {
  const p = syslogParts(record, ctx)
  const pri = (FACILITIES[facility] ?? FACILITIES.local0) * 8 + p.severity
  const header = `<${pri}>1 ${iso(p.timeMs)} ${SYSLOG_HOSTNAME} prime - ${headerToken(p.msgId, 32)}`
  if (format === 'cef') {
    const c = p.cef()
    const ext = [...c.ext, ['cs1Label', 'deliveryId'], ['cs1', ctx.deliveryId]]
      .filter(([, v]) => v !== null && v !== undefined)
      .map(([k, v]) => `${k}=${cefValueEscape(String(v))}`)
      .join(' ')
    const cef = ['CEF:0', 'Prime', 'Prime Device Security', VERSION, c.signature, c.name, String(CEF_SEVERITY[p.severity])].map(cefHeaderEscape).join('|')
    return `${header} - ${cef}|${ext}`
  }
  let params = ''
  for (const [k, v] of p.sd) {
    if (v === null || v === undefined) continue
    params += `${params ? ' ' : ''}${k}="${sdEscape(String(v))}"`
  }
  return `${header} [prime@32473 ${params}] ${p.message}`
}

/** Cuts a message to at most `max` bytes of UTF-8 without splitting a character. */
export function cutUtf8(text: string, max: number): Buffer {
  const buf = Buffer.from(text, 'utf8')
  if (buf.length <= max) return buf
  let end = max
  while (end > 0 && (buf[end] & 0xc0) === 0x80) end--
  return buf.subarray(0, end)
}

export const UDP_MAX_BYTES = 2048
export const TCP_MAX_BYTES = 65536

/** RFC 6587 octet-counting frame: `<byte length> <message>`. */
export function octetFrame(line: string): Buffer {
  const msg = cutUtf8(line, TCP_MAX_BYTES)
  return Buffer.concat([Buffer.from(`${msg.length} `), msg])
}

// ---- E-mail ----------------------------------------------------------------------------

export interface EmailMessage {
  subject: string
  text: string
  html: string
}

const oneLine = (s: string) =>
  s
    .replace(/[\u0000-\u001f\u007f]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!)

function location(l: Record<string, any> | null | undefined): string | null {
  if (!l) return null
  const parts = [
    l.ipAddress,
    l.hostName && l.hostName !== l.ipAddress ? l.hostName : null,
    l.switchName || l.switchIp ? `switch ${l.switchName ?? l.switchIp}` : null,
    l.switchPortName || l.switchPortId ? `port ${l.switchPortName ?? l.switchPortId}` : null,
    l.agentHostIdentifier ? `on ${l.agentHostIdentifier}` : null,
  ]
  return parts.filter(Boolean).join(', ') || null
}

function emailFields(record: AlarmRecord, ctx: DeliveryContext): { severity: number; description: string; about: string; lines: [string, unknown][] } {
  if (record.feed === 'audit') {
    const a = record.auditTrail
    const r = a.assetReference
    return {
      severity: a.severity,
      description: a.description,
      about: r.name ?? a.user ?? 'Prime server',
      lines: [
        ['Audit record', a.description],
        ['Severity', `${a.severityString} (${a.severity})`],
        ['Category', a.category],
        ['Time', a.creationTime],
        ['User', a.user],
        ['Source IP', a.sourceIp],
        ['Operation', a.operationId],
        ['Outcome', a.outcome],
        ['Asset', r.key || r.name ? `${r.type} ${r.name ?? ''}${r.key ? ` (${r.key})` : ''}`.replace(/\s+/g, ' ') : null],
        ['Details', a.details],
        ['Audit record id', a.auditTrailID],
        ['Delivery id', ctx.deliveryId],
      ],
    }
  }
  if (record.feed === 'assets') {
    const m = record.asset
    const what = m.kind === 'locationChanged' ? 'Asset location changed' : 'Asset snapshot'
    return {
      severity: ASSET_SEVERITY,
      description: what,
      about: m.name ?? m.assetId ?? 'asset',
      lines: [
        ['Asset message', `${what}${m.trigger ? ` (${m.trigger})` : ''}`],
        ['Asset', `${m.assetType ?? 'Asset'} ${m.name ?? ''} (${m.assetId})`.replace(/\s+/g, ' ')],
        ['Time', m.time ?? iso(record.createdMs)],
        ['Location', location(m.location)],
        ['Previous location', m.kind === 'locationChanged' ? (location(m.previousLocation) ?? 'none published') : null],
        ['Mode', m.operationalStatus],
        ['Connection', m.connectionStatus],
        ['Peripherals', Array.isArray(m.peripherals) && m.assetType === 'Agent' ? m.peripherals.length : null],
        ['Message id', m.messageId],
        ['Delivery id', ctx.deliveryId],
      ],
    }
  }
  const e = record.event
  return {
    severity: e.severity,
    description: e.description,
    about: e.assetName ?? e.eventEntityID,
    lines: [
      ['Event', `${e.eventCode} ${e.description}`],
      ['Severity', `${e.severityString} (${e.severity})`],
      ['Category', e.category],
      ['Time', e.creationTime],
      ['Source', e.eventEntityID],
      ['Agent', e.assetKey ? `${e.assetName ?? ''} (${e.assetKey})`.trim() : null],
      ['Peripheral', e.peripheralAssetId],
      ['Details', e.details],
      ['Event id', record.feed === 'events' ? e.eventID : null],
      ['Delivery id', ctx.deliveryId],
    ],
  }
}

/** The e-mail of a record: subject, plain text and the same as simple HTML. */
export function emailMessage(record: AlarmRecord, ctx: DeliveryContext, subjectPrefix: string, publicUrl: string | null): EmailMessage {
  const f = emailFields(record, ctx)
  const subject = oneLine(`${subjectPrefix} [${severityNames[f.severity]}] ${f.description} - ${f.about}`).slice(0, 998)
  const lines = f.lines.filter(([, v]) => v !== null && v !== undefined && v !== '').map(([k, v]) => `${k}: ${v}`)
  const link = publicUrl ? `Open the console: ${publicUrl}/` : null
  const text = lines.join('\n') + '\n' + (link ? `\n${link}\n` : '')
  const html =
    '<!DOCTYPE html><html><body><p>' +
    lines.map((l) => escapeHtml(l).replace(/\r?\n/g, '<br>')).join('<br>\n') +
    '</p>' +
    (publicUrl ? `\n<p><a href="${escapeHtml(publicUrl)}/">Open the console</a></p>` : '') +
    '</body></html>\n'
  return { subject, text, html }
}
