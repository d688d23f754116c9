// One record to one destination, in the destination's format: shared by the outbox
// worker and by TestAlarmDests. And the worker's bulk sends: a webhook batch, syslog lines
// in one write.
import crypto from 'node:crypto'
import type { DestinationRow } from './ports.js'
import type { Mailer } from '../mail.js'
import type { AllowList, Resolver } from './address.js'
import { settingsOf } from './destinations.js'
import { emailMessage, syslogLine, webhookBatchBody, webhookPayload, type AlarmRecord, type DeliveryContext, type EmailMessage } from './format.js'
import {
  sendEmail,
  sendSyslog,
  sendSyslogLines,
  sendWebhook,
  type EmailSettings,
  type SendOutcome,
  type SyslogConnections,
  type SyslogSettings,
  type WebhookAgents,
  type WebhookSettings,
} from './transport.js'

export interface Transports {
  allow: AllowList
  syslog: SyslogConnections
  /** Keep-alive agents; without them each request opens its own connection. */
  agents?: WebhookAgents
  /** How long a receiver has to answer (PRIME_ALARM_TIMEOUT_SECONDS). */
  timeoutMs: number
  /** The delivery worker's lookups kept for a few seconds; without it each send looks the host up. */
  resolve?: Resolver
}

/** Whether a webhook destination takes batches (`webhook.batch.maxEvents` above 1). */
export const batchMode = (s: WebhookSettings) => (s.batch?.maxEvents ?? 1) > 1

const UNSEALABLE = "The destination's secret and header values do not open with this server's key (PRIME_AGENTLESS_KEY): save it again with them."
/** A webhook whose stored secrets do not open cannot be sent to: a failure no retry mends. */
export const unsealable = (s: WebhookSettings): SendOutcome | null => ((s as { unsealable?: boolean }).unsealable ? { outcome: 'failed', error: UNSEALABLE, code: 'delivery-failed' } : null)

/**
 * Sends a batch to a batch webhook destination: the single payloads already serialized
 * (`parts`, in outbox order) in one body signed as a whole, `X-Prime-Delivery-Id` the
 * batch's id and `X-Prime-Batch-Size` its count. Any 2xx acknowledges them all.
 */
export function sendWebhookBatch(settings: WebhookSettings, destination: DeliveryContext['destination'], parts: string[], batchId: string, sentTime: number, t: Transports): Promise<SendOutcome> {
  const raw = webhookBatchBody(batchId, sentTime, destination, parts)
  return sendWebhook(settings, raw, batchId, sentTime, t.allow, t.agents, t.timeoutMs, { resolve: t.resolve, batchSize: parts.length })
}

/** Sends syslog lines in order with one outcome (one socket write over TCP). */
export function sendSyslogBatch(settings: SyslogSettings, lines: string[], t: Transports): Promise<SendOutcome> {
  return sendSyslogLines(settings, lines, t.allow, t.syslog, t.timeoutMs, t.resolve)
}

export interface Sent {
  result: SendOutcome
  /** The message as sent (or attempted): webhook body, syslog line or e-mail. */
  message: Record<string, unknown> | string | Pick<EmailMessage, 'subject' | 'text'>
}

/** What e-mail destinations need: the mailer, and the server's public address for links. */
export interface MailOut {
  mailer: Mailer
  publicUrl: string | null
}

export async function sendRecord(out: MailOut, dest: DestinationRow, record: AlarmRecord, ctx: DeliveryContext, t: Transports): Promise<Sent> {
  const settings = settingsOf(dest)
  if (dest.type === 'webhook') {
    const w = settings as WebhookSettings
    const body = webhookPayload(record, ctx)
    const refused = unsealable(w)
    if (refused) return { message: body, result: refused }
    if (batchMode(w)) {
      // A batch destination's receiver takes batches: a single record goes as a batch of one.
      const batchId = crypto.randomUUID()
      const raw = webhookBatchBody(batchId, ctx.sentTime, ctx.destination, [JSON.stringify(body)])
      const result = await sendWebhook(w, raw, batchId, ctx.sentTime, t.allow, t.agents, t.timeoutMs, { resolve: t.resolve, batchSize: 1 })
      // The answer shows the element, the payload the contract's test result describes.
      return { message: body, result }
    }
    const raw = Buffer.from(JSON.stringify(body))
    return { message: body, result: await sendWebhook(w, raw, ctx.deliveryId, ctx.sentTime, t.allow, t.agents, t.timeoutMs, { resolve: t.resolve }) }
  }
  if (dest.type === 'syslog') {
    const s = settings as SyslogSettings
    const line = syslogLine(record, ctx, s.format, s.facility)
    return { message: line, result: await sendSyslog(s, line, t.allow, t.syslog, t.timeoutMs, t.resolve) }
  }
  const s = settings as EmailSettings
  const mail = emailMessage(record, ctx, s.subjectPrefix, out.publicUrl)
  return { message: { subject: mail.subject, text: mail.text }, result: await sendEmail(out.mailer, s, mail, ctx.deliveryId, t.timeoutMs) }
}
