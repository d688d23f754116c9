// One record to one destination, in the destination's format: shared by the outbox
// worker and by TestAlarmDests.
import type { DestinationRow } from '../../db/alarms.js'
import type { Mailer } from '../mail.js'
import type { AllowList } from './address.js'
import { settingsOf } from './destinations.js'
import { emailMessage, syslogLine, webhookPayload, type AlarmRecord, type DeliveryContext, type EmailMessage } from './format.js'
import { sendEmail, sendSyslog, sendWebhook, type EmailSettings, type SendOutcome, type SyslogConnections, type SyslogSettings, type WebhookAgents, type WebhookSettings } from './transport.js'

export interface Transports {
  allow: AllowList
  syslog: SyslogConnections
  /** Keep-alive agents; without them each request opens its own connection. */
  agents?: WebhookAgents
  /** How long a receiver has to answer (PRIME_ALARM_TIMEOUT_SECONDS). */
  timeoutMs: number
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
    const body = webhookPayload(record, ctx)
    if ((settings as { unsealable?: boolean }).unsealable) {
      const error = "The destination's secret and header values do not open with this server's key (PRIME_AGENTLESS_KEY): save it again with them."
      return { message: body, result: { outcome: 'failed', error, code: 'delivery-failed' } }
    }
    const raw = Buffer.from(JSON.stringify(body))
    return { message: body, result: await sendWebhook(settings as WebhookSettings, raw, ctx.deliveryId, ctx.sentTime, t.allow, t.agents, t.timeoutMs) }
  }
  if (dest.type === 'syslog') {
    const s = settings as SyslogSettings
    const line = syslogLine(record, ctx, s.format, s.facility)
    return { message: line, result: await sendSyslog(s, line, t.allow, t.syslog, t.timeoutMs) }
  }
  const s = settings as EmailSettings
  const mail = emailMessage(record, ctx, s.subjectPrefix, out.publicUrl)
  return { message: { subject: mail.subject, text: mail.text }, result: await sendEmail(out.mailer, s, mail, ctx.deliveryId, t.timeoutMs) }
}
