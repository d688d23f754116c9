import { createRequire } from 'node:module'
import type { Transporter, SendMailOptions } from 'nodemailer'
import type { Config } from './config.js'

export interface MailResult {
  /** The SMTP server's last answer, e.g. `250 2.0.0 Ok: queued as 1A2B3C`. */
  response: string
  messageId: string
  accepted: string[]
  rejected: string[]
}

export class MailNotConfiguredError extends Error {
  constructor() {
    super('Outgoing mail is not configured (set PRIME_SMTP_URL).')
  }
}

/**
 * The server's one way to send mail (alarm e-mails and reports), from `PRIME_SMTP_URL`
 * and `PRIME_SMTP_FROM`. One pooled transport, so that a burst of alarms reuses its
 * connections instead of opening one per message.
 */
export function createMailer(config: Pick<Config, 'smtp'>) {
  let transport: Transporter | null = null
  const get = (): Transporter => {
    if (!config.smtp.url) throw new MailNotConfiguredError()
    // Loaded on first use: most servers never send mail, and loading it slows every start.
    transport ??= (createRequire(import.meta.url)('nodemailer') as typeof import('nodemailer')).createTransport(config.smtp.url, {
      pool: true,
      maxConnections: 2,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    } as any)
    return transport
  }
  return {
    configured: () => config.smtp.url !== null,
    from: () => config.smtp.from,
    /** Sends one message; `from` defaults to the configured sender. Rejects with the SMTP error. */
    async send(message: SendMailOptions): Promise<MailResult> {
      const info = await get().sendMail({ from: config.smtp.from, ...message })
      return {
        response: String(info.response ?? ''),
        messageId: String(info.messageId ?? ''),
        accepted: (info.accepted ?? []).map(String),
        rejected: (info.rejected ?? []).map(String),
      }
    },
    close() {
      transport?.close()
      transport = null
    },
  }
}
export type Mailer = ReturnType<typeof createMailer>
