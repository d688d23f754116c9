// E-mail of reports: each run's file to its recipients (retried with backoff when the
// SMTP server cannot be reached or answers "try later"), and the test message of
// sendtestreport, which says what the server answered.
import os from 'node:os'
import { MailNotConfiguredError, type Mailer } from '../mail.js'
import { iso } from '../time.js'
import { visibleName } from '../file-names.js'
import { timeText, type Definition } from './content.js'
import { filesOf, type RunFiles } from './files.js'
import type { EmailStatus, RunRow } from './ports.js'
import { formats, typeInfo } from './types.js'

/** Files above this are not attached (many mail servers refuse them); the message says where to get them. */
export const MAX_ATTACHMENT_BYTES = 10 * 1024 * 1024
/** Waits before the 2nd, 3rd, 4th and 5th attempt; the 5th failure is final. */
export const MAIL_BACKOFF_MS = [60_000, 5 * 60_000, 15 * 60_000, 60 * 60_000]
export const MAX_MAIL_ATTEMPTS = MAIL_BACKOFF_MS.length + 1
const TEST_TIMEOUT_MS = 30_000
/** The e-mail detail of a run with recipients on a server without outgoing mail. */
export const NOT_MAILED = 'Not mailed: outgoing mail is not configured on this server (PRIME_SMTP_URL); the file is stored.'

interface SmtpError extends Error {
  code?: string
  responseCode?: number
  response?: string
  permanent?: boolean
  rejected?: string[]
}

/** What report e-mail needs: the mailer and the settings its messages name. */
export interface ReportMailDeps {
  mailer: Pick<Mailer, 'configured' | 'from' | 'send'>
  /** PRIME_SMTP_URL (credentials are never shown). */
  smtpUrl: string | null
  /** PRIME_PUBLIC_URL: the console a message points to. */
  publicUrl: string | null
  /** Where the report files are. */
  dataDir: string
  /** Where the files are kept: the data directory's when not given. */
  files?: RunFiles
}

/** `host:port` of the configured SMTP server, without credentials; null when none. */
export function smtpServer(smtpUrl: string | null): string | null {
  const raw = smtpUrl
  if (!raw) return null
  const u = new URL(raw)
  const secure = u.protocol.toLowerCase() === 'smtps:'
  return `${u.hostname}:${u.port || (secure ? 465 : 587)}`
}

const codeOf = (response: string | undefined) => {
  const m = /^([1-5]\d\d)\b/.exec(response ?? '')
  return m ? Number(m[1]) : null
}

/** Whether trying again later may help: the connection failed, timed out, or the server said 4xx. */
function transient(err: SmtpError): boolean {
  if (err instanceof MailNotConfiguredError) return false
  if (err.permanent !== undefined) return !err.permanent
  if (err.responseCode) return err.responseCode < 500
  return true
}

const errorText = (err: SmtpError) => (err.response ? err.response : `${err.code ? `${err.code}: ` : ''}${err.message}`).replace(/\s+/g, ' ').slice(0, 1000)

const sizeText = (bytes: number) => (bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(1)} MiB` : `${Math.max(1, Math.round(bytes / 1024))} KiB`)

/** Whether a run's file goes with its message (else the message says where to get it). */
const attached = (run: RunRow) => (run.size_bytes ?? 0) <= MAX_ATTACHMENT_BYTES

/** The message of a run: what the report is, its file attached (or where to get it). */
function reportMessage(deps: ReportMailDeps, run: RunRow, d: Definition, file: { path?: string; content?: Buffer }) {
  const zone = d.schedule?.timeZone ?? 'UTC'
  const generated = timeText(run.started_ms ?? run.queued_ms, zone)
  const size = run.size_bytes ?? 0
  const attach = attached(run)
  const lines = [
    `The ${typeInfo[d.type].title.toLowerCase()} report "${d.name}" was generated on ${generated}.`,
    '',
    `File: ${visibleName(run.file_name!)} (${sizeText(size)}, ${run.row_count ?? 0} rows${run.truncated ? ", cut at the format's row limit" : ''})`,
    attach ? 'The file is attached.' : `The file is larger than ${sizeText(MAX_ATTACHMENT_BYTES)} and is not attached: download it from the console (Reports, "${d.name}").`,
  ]
  if (d.description) lines.push('', d.description)
  if (deps.publicUrl) lines.push('', `Console: ${deps.publicUrl}`)
  lines.push('', `You receive this message because you are a recipient of this report. Report id: ${d.id}; run id: ${run.id}.`)
  return {
    from: d.sender ?? deps.mailer.from(),
    to: d.recipients,
    subject: `Report: ${d.name} (${generated})`,
    text: lines.join('\n'),
    attachments: attach ? [{ filename: visibleName(run.file_name!), ...file, contentType: formats[d.format].mediaType }] : [],
    headers: { 'X-Prime-Report-Id': d.id, 'X-Prime-Run-Id': run.id },
  }
}

export interface MailOutcome {
  status: EmailStatus
  detail: string
  attempts: number
  nextMs: number | null
}

/** Sends a run's file to its recipients once; says what to record (and when to try again). */
export async function mailRun(deps: ReportMailDeps, run: RunRow, now: number): Promise<MailOutcome> {
  const d = JSON.parse(run.definition) as Definition
  const attempts = run.email_attempts + 1
  const file = run.file_path && run.file_deleted_ms === null ? await filesOf(deps).forMail(run, attached(run)) : undefined
  if (!file) return { status: 'failed', detail: 'The file was removed before it could be sent.', attempts, nextMs: null }
  try {
    const r = await deps.mailer.send(reportMessage(deps, run, d, file))
    if (r.rejected.length === 0) return { status: 'sent', detail: r.response.slice(0, 2000), attempts, nextMs: null }
    const detail = `Refused: ${r.rejected.join(', ')}; accepted: ${r.accepted.join(', ') || 'none'}; server said: ${r.response}`
    return { status: r.accepted.length ? 'partial' : 'failed', detail: detail.slice(0, 2000), attempts, nextMs: null }
  } catch (e) {
    // Mail switched off (PRIME_SMTP_URL removed) after the run was queued: a choice, not a failure.
    if (e instanceof MailNotConfiguredError) return { status: 'none', detail: NOT_MAILED, attempts: run.email_attempts, nextMs: null }
    const err = e as SmtpError
    const detail = errorText(err)
    if (transient(err) && attempts < MAX_MAIL_ATTEMPTS) {
      const wait = MAIL_BACKOFF_MS[attempts - 1]
      return { status: 'pending', detail: `Attempt ${attempts} of ${MAX_MAIL_ATTEMPTS} failed (${detail}); next attempt at ${iso(now + wait)}.`, attempts, nextMs: now + wait }
    }
    const final = transient(err) ? `Gave up after ${attempts} attempts: ${detail}` : detail
    return { status: 'failed', detail: final.slice(0, 2000), attempts, nextMs: null }
  }
}

export interface TestMailResult {
  accepted: boolean
  sender: string
  recipient: string
  smtpServer: string | null
  smtpCode: number | null
  smtpResponse: string | null
  messageId: string | null
  error: string | null
  durationMs: number
}

/** Sends the test message and waits (at most 30 seconds) for the SMTP server's verdict. */
export async function sendTestMessage(deps: ReportMailDeps, sender: string | undefined, recipient: string, requestedBy: string): Promise<TestMailResult> {
  const from = sender ?? deps.mailer.from()
  const server = smtpServer(deps.smtpUrl)
  const started = performance.now()
  const result = (r: Partial<TestMailResult>): TestMailResult => ({
    accepted: false,
    sender: from.slice(0, 254),
    recipient,
    smtpServer: server,
    smtpCode: null,
    smtpResponse: null,
    messageId: null,
    error: null,
    durationMs: Math.min(60_000, Math.round(performance.now() - started)),
    ...r,
  })
  if (!deps.mailer.configured()) return result({ error: 'E-mail is not configured on this server (set PRIME_SMTP_URL).' })
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`No verdict from the SMTP server within ${TEST_TIMEOUT_MS / 1000} seconds.`), { code: 'ETIMEDOUT' })), TEST_TIMEOUT_MS)
  })
  try {
    const r = await Promise.race([
      deps.mailer.send({
        from,
        to: recipient,
        subject: 'Prime test message: report e-mail works',
        text: [
          `This is a test message from Prime (${os.hostname()}), sent by ${requestedBy} at ${iso(Date.now())}.`,
          '',
          `If you can read it, report e-mails sent from ${from} reach this address.`,
        ].join('\n'),
      }),
      timeout,
    ])
    const refused = r.rejected.length > 0 || !r.accepted.some((a) => a.toLowerCase() === recipient.toLowerCase())
    return result({
      accepted: !refused,
      smtpCode: codeOf(r.response),
      smtpResponse: r.response.slice(0, 2000) || null,
      messageId: r.messageId.slice(0, 300) || null,
      error: refused ? 'The SMTP server refused the recipient.' : null,
    })
  } catch (e) {
    const err = e as SmtpError
    const code = err.responseCode ?? codeOf(err.response)
    const refusedRecipient = err.code === 'EENVELOPE' && (err.rejected?.length ?? 0) > 0
    return result({
      smtpCode: code !== null && code >= 100 && code <= 599 ? code : null,
      smtpResponse: err.response ? err.response.slice(0, 2000) : null,
      error: (refusedRecipient ? `The SMTP server refused the recipient: ${errorText(err)}` : errorText(err)).slice(0, 1000),
    })
  } finally {
    clearTimeout(timer)
  }
}
