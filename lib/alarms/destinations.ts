// Alarm destinations as the API sends and answers them: the rules of AddOrUpdateAlarmDest
// (settings per type, secrets kept or replaced, reserved headers, the address rule) and
// the masked view of GetAlarmDests.
import crypto from 'node:crypto'
import type { components } from '../../generated/openapi.js'
import { parseList, type AlarmFeed, type AlarmType, type DeliveryCounts, type DestinationInput, type DestinationRow } from './ports.js'
import { problem, type FieldError } from '../errors.js'
import { iso } from '../time.js'
import { AddressRefusedError, isHostSyntax, resolveChecked, type AllowList } from './address.js'
import { severityNames } from '../listing.js'
import type { EmailSettings, SyslogSettings, WebhookSettings } from './transport.js'

type View = components['schemas']['AlarmDestinationView']
type Answer = components['schemas']['AlarmDestination']

export const MAX_DESTINATIONS = 100
export const MASK = '***'
const TYPES: AlarmType[] = ['syslog', 'webhook', 'email']
const RESERVED_HEADERS = new Set(['host', 'content-length', 'content-type', 'transfer-encoding', 'connection'])
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
// Header values travel as is: tab, printable ASCII and Latin-1 only (what HTTP/1.1 carries;
// no line breaks or other control characters).
const HEADER_VALUE_BAD = /[^\t\x20-\x7e\x80-\xff]/

export type StoredSettings = SyslogSettings | WebhookSettings | EmailSettings

/** Webhook batch mode's defaults: off (one event per request), 1 MiB when on. */
export const BATCH_DEFAULTS = { maxEvents: 1, maxBytes: 1024 * 1024 }

export function settingsOf(row: DestinationRow): StoredSettings {
  return JSON.parse(row.settings)
}

/** The destination as answered: secrets masked, defaults filled, delivery state. */
export function destinationView(row: DestinationRow, counts: DeliveryCounts): Answer {
  const s = settingsOf(row) as any
  const feeds: AlarmFeed[] = []
  if (row.feed_events) feeds.push('events')
  if (row.feed_audit) feeds.push('audit')
  if (row.feed_assets) feeds.push('assets')
  return {
    id: row.id,
    name: row.name,
    type: row.type,
    enabled: row.enabled === 1,
    filters: {
      minimumSeverity: severityNames[row.min_severity],
      categories: parseList(row.categories) as Answer['filters']['categories'],
      auditCategories: parseList(row.audit_categories) as Answer['filters']['auditCategories'],
      feeds,
    },
    syslog: row.type === 'syslog' ? { host: s.host, port: s.port, transport: s.transport, format: s.format, facility: s.facility } : null,
    webhook:
      row.type === 'webhook' ? { url: s.url, hasSecret: !!s.secret || !!s.unsealable, headers: maskHeaders(s.headers) as Record<string, '***'>, batch: { ...BATCH_DEFAULTS, ...s.batch } } : null,
    email: row.type === 'email' ? { recipients: s.recipients, subjectPrefix: s.subjectPrefix } : null,
    createdTime: iso(row.created_ms),
    createdBy: row.created_by,
    updatedTime: iso(row.updated_ms),
    updatedBy: row.updated_by,
    delivery: {
      pending: counts.pending,
      lastAttemptTime: row.last_attempt_ms === null ? null : iso(row.last_attempt_ms),
      lastStatus: row.last_status,
      lastError: row.last_error === null ? null : row.last_error.slice(0, 1000),
      lastDeliveredTime: row.last_delivered_ms === null ? null : iso(row.last_delivered_ms),
      failedLast24h: counts.failedLast24h,
    },
  }
}

const maskHeaders = (headers: Record<string, string> | undefined) => Object.fromEntries(Object.keys(headers ?? {}).map((k) => [k, MASK]))

/** The settings as audit details show them: secrets masked. */
export function maskedSettings(type: AlarmType, settings: StoredSettings): Record<string, unknown> {
  if (type !== 'webhook') return { ...settings }
  const w = settings as WebhookSettings
  return { url: w.url, secret: w.secret ? MASK : null, headers: maskHeaders(w.headers), ...(w.batch ? { batch: w.batch } : {}) }
}

/** A destination in the API's words, secrets masked: what audit records show. */
export function auditForm(d: DestinationInput): Record<string, any> {
  return {
    name: d.name,
    type: d.type,
    enabled: d.enabled,
    filters: { minimumSeverity: severityNames[d.minSeverity], categories: d.categories, auditCategories: d.auditCategories, feeds: d.feeds },
    [d.type]: maskedSettings(d.type, d.settings as StoredSettings),
  }
}

/**
 * What an update changed, for the audit record: the fields that differ, secrets masked
 * (a changed secret or header value shows as `***`).
 */
export function changes(before: DestinationInput, after: DestinationInput): Record<string, unknown> {
  const a = auditForm(after)
  const b = auditForm(before)
  const out: Record<string, unknown> = {}
  const same = (x: unknown, y: unknown) => JSON.stringify(x) === JSON.stringify(y)
  for (const k of ['name', 'type', 'enabled'] as const) if (!same(a[k], b[k])) out[k] = a[k]
  const filters = Object.fromEntries(
    Object.keys(a.filters)
      .filter((k) => !same(a.filters[k], b.filters[k]))
      .map((k) => [k, a.filters[k]]),
  )
  if (Object.keys(filters).length) out.filters = filters
  if (before.type !== after.type) out[after.type] = a[after.type]
  else {
    // Secrets compare by value (masked output alike), headers by names and values.
    const bs = before.settings as Record<string, unknown>
    const as = after.settings as Record<string, unknown>
    const masked = a[after.type] as Record<string, unknown>
    // A setting stored only when on (webhook batch) shows as null when turned off.
    const diff = Object.fromEntries([...new Set([...Object.keys(as), ...('batch' in bs ? ['batch'] : [])])].filter((k) => !same(as[k], bs[k])).map((k) => [k, masked[k] ?? null]))
    if (Object.keys(diff).length) out[after.type] = diff
  }
  return out
}

/** The stored destination as input again (to compare with an update). */
export function inputOf(row: DestinationRow): DestinationInput {
  const feeds: AlarmFeed[] = []
  if (row.feed_events) feeds.push('events')
  if (row.feed_audit) feeds.push('audit')
  if (row.feed_assets) feeds.push('assets')
  return {
    id: row.id,
    name: row.name,
    type: row.type,
    enabled: row.enabled === 1,
    minSeverity: row.min_severity,
    categories: parseList(row.categories),
    auditCategories: parseList(row.audit_categories),
    feeds,
    settings: settingsOf(row),
  }
}

const field = (name: string, reason: string): FieldError => ({ location: 'body', name, reason })

function invalid(errors: FieldError[], detail?: string): never {
  throw problem('validation', detail ?? errors.map((e) => `${e.name}: ${e.reason}`).join('; '), { errors })
}

/**
 * Turns a body of AddOrUpdateAlarmDest (already valid against the contract's schema) into
 * the destination to store, applying the rules the schema cannot express. `existing` is
 * the stored destination when updating. Resolves and checks webhook and syslog hosts.
 */
export async function destinationInput(body: View, existing: DestinationRow | undefined, allow: AllowList, mailConfigured: boolean): Promise<DestinationInput> {
  const errors: FieldError[] = []
  const type = body.type
  if (/[\u0000-\u001f\u007f]/.test(body.name)) errors.push(field('name', 'must not contain control characters'))
  else if (body.name.trim() === '') errors.push(field('name', 'must not be blank'))
  const given = body as unknown as Record<string, unknown>
  for (const other of TYPES) {
    if (other === type) continue
    if (given[other] !== undefined && given[other] !== null) errors.push(field(other, `must be null or left out for a ${type} destination`))
  }
  if (given[type] === undefined || given[type] === null) errors.push(field(type, `is required for a ${type} destination`))
  // It could deliver nothing: every alarm would fail and raise a failure event.
  else if (type === 'email' && !mailConfigured) errors.push(field('email', 'needs outgoing mail, which is not configured on this server (PRIME_SMTP_URL)'))
  if (errors.length) invalid(errors)

  const filters: Partial<NonNullable<View['filters']>> = body.filters ?? {}
  const previous = existing && existing.type === type ? (settingsOf(existing) as any) : undefined
  let settings: StoredSettings
  if (type === 'syslog') settings = await syslogSettings(body.syslog!, allow)
  else if (type === 'webhook') settings = await webhookSettings(body.webhook!, previous as WebhookSettings | undefined, allow)
  else settings = emailSettings(body.email!)

  return {
    id: existing?.id ?? crypto.randomUUID(),
    name: body.name,
    type,
    enabled: body.enabled ?? true,
    minSeverity: severityNames.indexOf(filters.minimumSeverity ?? 'Warning'),
    categories: filters.categories ?? [],
    auditCategories: filters.auditCategories ?? [],
    // In the order of the contract's enumeration, so that a re-sent list compares equal.
    feeds: (['events', 'audit', 'assets'] as AlarmFeed[]).filter((f) => (filters.feeds ?? ['events']).includes(f)),
    settings,
  }
}

async function checkHost(name: string, host: string, allow: AllowList): Promise<void> {
  try {
    await resolveChecked(host, allow)
  } catch (err) {
    if (err instanceof AddressRefusedError) invalid([field(name, err.reason)], `${name}: ${err.message}`)
    throw err
  }
}

async function syslogSettings(s: NonNullable<View['syslog']>, allow: AllowList): Promise<SyslogSettings> {
  if (!isHostSyntax(s.host)) invalid([field('syslog/host', 'is not a host name or IP address')])
  await checkHost('syslog/host', s.host, allow)
  return { host: s.host, port: s.port ?? 514, transport: s.transport ?? 'udp', format: s.format ?? 'rfc5424', facility: s.facility ?? 'local0' }
}

async function webhookSettings(w: NonNullable<View['webhook']>, previous: WebhookSettings | undefined, allow: AllowList): Promise<WebhookSettings> {
  const errors: FieldError[] = []
  let url: URL | undefined
  try {
    url = new URL(w.url)
  } catch {
    errors.push(field('webhook/url', 'is not a URL'))
  }
  if (url) {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') errors.push(field('webhook/url', 'must be an http or https URL'))
    else if (url.username || url.password) errors.push(field('webhook/url', 'must not carry a user name or password'))
    else if (!url.hostname) errors.push(field('webhook/url', 'has no host'))
  }
  const { secret, headers } = webhookSecrets(w, previous, errors)
  if (errors.length) invalid(errors)
  await checkHost('webhook/url', url!.hostname, allow)
  // Stored only when on, so that a destination without it keeps exactly its settings of before.
  const batch = { ...BATCH_DEFAULTS, ...w.batch }
  return batch.maxEvents > 1 ? { url: w.url, secret, headers, batch } : { url: w.url, secret, headers }
}

/**
 * The webhook's secret and headers: those the body gives, and the stored ones it keeps (no
 * secret, a header value of `***`) taken from `previous`, the stored webhook settings. What
 * cannot be kept is added to `errors`.
 */
function webhookSecrets(w: NonNullable<View['webhook']>, previous: WebhookSettings | undefined, errors: FieldError[]): { secret: string | null; headers: Record<string, string> } {
  const secret = w.secret ?? previous?.secret ?? null
  if (!secret) errors.push(field('webhook/secret', 'is required: this destination has no stored secret to keep'))
  const headers: Record<string, string> = {}
  const seen = new Set<string>()
  const stored = new Map(Object.entries(previous?.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]))
  for (const [name, value] of Object.entries(w.headers ?? {})) {
    const lower = name.toLowerCase()
    const at = `webhook/headers/${name}`
    if (!HEADER_NAME.test(name)) errors.push(field(at, 'is not a valid header name'))
    else if (RESERVED_HEADERS.has(lower) || lower.startsWith('x-prime-')) errors.push(field(at, 'is a reserved header name'))
    else if (seen.has(lower)) errors.push(field(at, 'is given twice (header names are case-insensitive)'))
    else if (value === MASK) {
      const kept = stored.get(lower)
      if (kept === undefined) errors.push(field(at, `"${MASK}" keeps the stored value, but this header has none`))
      else headers[name] = kept
    } else if (HEADER_VALUE_BAD.test(value)) errors.push(field(at, 'must hold only printable characters (no line breaks, no characters beyond Latin-1)'))
    else headers[name] = value
    seen.add(lower)
  }
  return { secret, headers }
}

/**
 * `input` (made by destinationInput from a read before the host names were resolved) with
 * the secrets it keeps taken again from `current`, the destination as the unit of work that
 * writes it reads it: a change committed in between (a new secret) is kept, not put back.
 * Refuses with 400 as destinationInput does when a value to keep is no longer stored.
 */
export function keepingStoredSecrets(body: View, input: DestinationInput, current: DestinationRow | undefined): DestinationInput {
  if (input.type !== 'webhook') return input
  const previous = current && current.type === 'webhook' ? (settingsOf(current) as WebhookSettings) : undefined
  const errors: FieldError[] = []
  const { secret, headers } = webhookSecrets(body.webhook!, previous, errors)
  if (errors.length) invalid(errors)
  return { ...input, settings: { ...(input.settings as WebhookSettings), secret: secret!, headers } }
}

function emailSettings(e: NonNullable<View['email']>): EmailSettings {
  const prefix = e.subjectPrefix ?? '[Prime]'
  if (/[\u0000-\u001f\u007f]/.test(prefix)) invalid([field('email/subjectPrefix', 'must not contain line breaks or control characters')])
  return { recipients: e.recipients, subjectPrefix: prefix }
}
