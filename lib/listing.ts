// The one place that reads paging, sorting and filter values of every list operation.
import { Readable } from 'node:stream'
import type { Operation } from './contract.js'
import { invalidField, type FieldError } from './errors.js'

import { type DateRange, severityNames, type Sort, STREAM_CHUNK_CHARS } from './ports.js'

// The LIKE pattern of a "contains", which lib/assets/query.ts puts into the asset conditions
// db/ renders (the SQL side of listing lives in db/sql.ts).
export { contains } from '../db/sql.js'
export { STREAM_CHUNK_CHARS, severityNames, type Sort } from './ports.js'
export type { DateRange } from './ports.js'

/** Where a filter value came from: list queries, or export bodies that mirror them. */
export type Where = Extract<FieldError['location'], 'query' | 'body'>

/** Integrations ask for a million rows in one page (the shared PageSize parameter's maximum; a list may declare less). */
export const MAX_PAGE_SIZE = 1_000_000
export const DEFAULT_PAGE_SIZE = 20
/** Pages asking for more rows than `above` are streamed (memory stays flat); smaller ones are built whole. Tests lower it. */
export const streamedPages = { above: 10_000 }
/** The notification list keeps its own, smaller maximum (its answers are kept in memory). */
export const MAX_NOTIFICATION_PAGE_SIZE = 10_000

export interface Page {
  pageNumber: number
  pageSize: number
  offset: number
}

/**
 * The page a list asks for. The largest is the operation's own (its contract's `PageSize`
 * maximum), so that no list answers more than it documents, whichever handler reads it.
 */
export function page(query: { PageNumber?: number; PageSize?: number }, op: Pick<Operation, 'operationId' | 'pageSizeMax'>): Page {
  if (op.pageSizeMax === null) throw new Error(`${op.operationId} declares no PageSize parameter`)
  const max = Math.min(op.pageSizeMax, MAX_PAGE_SIZE)
  const pageNumber = query.PageNumber ?? 1
  const pageSize = query.PageSize ?? DEFAULT_PAGE_SIZE
  if (!Number.isInteger(pageNumber) || pageNumber < 1) throw invalidField('query', 'PageNumber', 'must be an integer of at least 1')
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > max) {
    throw invalidField('query', 'PageSize', `must be an integer from 1 to ${max}`)
  }
  return { pageNumber, pageSize, offset: (pageNumber - 1) * pageSize }
}

/** `<field>_<asc|desc>` over the operation's `x-sort-fields` (field names match case-insensitively). */
export function sort(op: Pick<Operation, 'operationId' | 'sortFields' | 'defaultSort'>, value: string | undefined, name = 'SortBy', where: Where = 'query'): Sort {
  const raw = value ?? op.defaultSort
  if (!raw) throw new Error(`${op.operationId} declares no x-default-sort`)
  const m = /^(.+)_(asc|desc)$/i.exec(raw)
  const field = m ? op.sortFields.find((f) => f.toLowerCase() === m[1].toLowerCase()) : undefined
  if (!m || !field) throw invalidField(where, name, `must be <field>_asc or <field>_desc with a field of: ${op.sortFields.join(', ')}`)
  return { field, direction: m[2].toLowerCase() as Sort['direction'] }
}

export function bool(value: string | undefined, name: string, where: Where = 'query'): boolean | undefined {
  if (value === undefined) return undefined
  if (/^(true|1)$/i.test(value)) return true
  if (/^(false|0)$/i.test(value)) return false
  throw invalidField(where, name, 'must be true or false (any case) or 1 or 0')
}

/** Values of an enumerated filter: one or a comma-separated list, matched case-insensitively. */
export function oneOrMore<T extends string>(value: string | undefined, name: string, allowed: readonly T[], where: Where = 'query'): T[] | undefined {
  if (value === undefined) return undefined
  const out: T[] = []
  for (const raw of value.split(',')) {
    const v = raw.trim()
    const known = allowed.find((a) => a.toLowerCase() === v.toLowerCase())
    if (!known) throw invalidField(where, name, `has an unknown value "${v.slice(0, 40)}": use ${allowed.join(', ')} (or a comma-separated list of them)`)
    if (!out.includes(known)) out.push(known)
  }
  return out
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?)?([Zz]|[+-]\d{2}(?::?\d{2})?)?$/

/** A date filter in epoch ms: ISO 8601 (no zone = UTC) or `YYYY-MM-DD HH:MM:SS[.ffffff]`. */
export function date(value: string | undefined, name: string, where: Where = 'query'): number | undefined {
  if (value === undefined) return undefined
  const m = DATE.exec(value.trim())
  if (!m) throw invalidField(where, name, 'must be a date such as 2024-05-01T12:00:00Z or 2024-05-01 12:00:00')
  const [, y, mo, d, h = '0', mi = '0', s = '0', frac = '0', zone] = m
  const ms = Math.floor(Number(`0.${frac}`) * 1000)
  let t = Date.UTC(+y, +mo - 1, +d, +h, +mi, +s, ms)
  const check = new Date(t)
  if (check.getUTCFullYear() !== +y || check.getUTCMonth() !== +mo - 1 || check.getUTCDate() !== +d || +h > 23 || +mi > 59 || +s > 59) {
    throw invalidField(where, name, `is not a real date and time: ${value}`)
  }
  if (zone && zone.toUpperCase() !== 'Z') {
    const sign = zone[0] === '-' ? -1 : 1
    const digits = zone.slice(1).replace(':', '')
    const offset = (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2) || 0)) * sign
    if (Math.abs(offset) > 14 * 60) throw invalidField(where, name, `has an impossible time zone offset: ${zone}`)
    t -= offset * 60_000
  }
  return t
}

/** A time range in epoch ms, `to` exclusive (null: open-ended). */
const DAY_MS = 86_400_000

/** A date filter of a list: a date alone means that UTC day, a date and time at or after that instant. */
export function dateRange(value: string | undefined, name: string, where: Where = 'query'): DateRange | undefined {
  const from = date(value, name, where)
  if (from === undefined) return undefined
  return /^\d{4}-\d{2}-\d{2}$/.test(value!.trim()) ? { from, to: from + DAY_MS } : { from, to: null }
}

const severityAliases: Record<string, number> = { info: 6, information: 6, warn: 4, err: 3, crit: 2, emerg: 0, panic: 0 }

/** A syslog severity by number (0-7) or name, in any case. */
/** A filter value as text; null, absent or empty: not given. A JSON boolean or number (export bodies) becomes its text. */
export function filterText(src: Record<string, unknown>, name: string): string | undefined {
  const v = src[name]
  if (v === undefined || v === null || v === '') return undefined
  return typeof v === 'string' ? v : String(v)
}

/** A "contains" term. NUL would end it early in SQLite (a LIKE would match everything), and no stored text holds one. */
export function filterTerm(src: Record<string, unknown>, name: string, where: Where): string | undefined {
  const v = filterText(src, name)
  if (v?.includes('\u0000')) throw invalidField(where, name, 'must not contain the NUL character')
  return v
}

export function severity(value: string | undefined, name: string, where: Where = 'query'): number | undefined {
  if (value === undefined) return undefined
  const v = value.trim()
  if (/^[0-7]$/.test(v)) return Number(v)
  const i = severityNames.findIndex((n) => n.toLowerCase() === v.toLowerCase())
  if (i >= 0) return i
  const alias = severityAliases[v.toLowerCase()]
  if (alias !== undefined) return alias
  throw invalidField(where, name, `must be 0-7 or one of ${severityNames.join(', ')}`)
}

/**
 * The list answer of every list operation. `exact`: the events' and audit trail's answers
 * say whether recordsFiltered is exact (`recordsFilteredExact`); the agents' and peripherals'
 * say it only when it is not (false, on PostgreSQL); the other lists leave it out.
 */
export const listAnswer = <T, E extends boolean = boolean>(recordsTotal: number, recordsFiltered: number, data: T[], exact?: E) =>
  exact === undefined ? { recordsTotal, recordsFiltered, data } : { recordsTotal, recordsFiltered, recordsFilteredExact: exact, data }

/** The list answer's text up to its rows (`listAnswer`'s keys in its order). */
const answerHead = (recordsTotal: number, recordsFiltered: number, exact: boolean | undefined) =>
  `{"recordsTotal":${recordsTotal},"recordsFiltered":${recordsFiltered},${exact === undefined ? '' : `"recordsFilteredExact":${exact},`}"data":[`
/** The list answer as JSON text, for rows that are JSON text already (an array). */
export const listAnswerJson = (recordsTotal: number, recordsFiltered: number, data: string, exact?: boolean) => `${answerHead(recordsTotal, recordsFiltered, exact).slice(0, -1)}${data}}`

/**
 * A whole answer held as parts (groups of rows, or each row's text), with its length in bytes
 * (sent as Content-Length), sent in chunks of about PART_BYTES, at most TURN_BYTES a turn. One
 * string of megabytes (a poller's page of 10,000 rows) lands in V8's large-object space: each
 * answer then costs fresh pages of memory to build, to flatten for its length and to encode
 * for the socket, and a full collection to free. Parts of tens of kilobytes stay in the young
 * generation.
 */
export class AnswerParts extends Readable {
  readonly bytes: number
  readonly parts: Buffer[]
  constructor(parts: (string | Buffer)[]) {
    super({ objectMode: true, highWaterMark: 1 })
    // As bytes outside V8's heap: an answer waiting for a slow socket is not copied by every young-generation collection.
    this.parts = parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))
    let bytes = 0
    for (const p of this.parts) bytes += p.length
    this.bytes = bytes
  }
  private next = 0
  /** Bytes handed on since the last pause. */
  private turnBytes = 0
  /** The same answer again, to be sent once more (a stream is read once). */
  again(): AnswerParts {
    return new AnswerParts(this.parts)
  }
  override _read() {
    if (this.next >= this.parts.length) {
      this.push(null)
      return
    }
    // A socket that takes all it is given (loopback, a fast client) would be handed a whole
    // answer in one turn: a poller's page of 10,000 rows (4 MB) held the loop 15-30 ms in the
    // socket's write alone. Past TURN_BYTES the next part waits for the next turn.
    if (this.turnBytes >= TURN_BYTES) {
      this.turnBytes = 0
      setImmediate(() => {
        if (!this.destroyed) this._read()
      })
      return
    }
    // Consecutive small parts (rows' texts) go out as one chunk of about PART_BYTES, copied
    // here, a turn's share at a time, rather than all when the answer is made.
    let end = this.next
    let size = 0
    while (end < this.parts.length && (end === this.next || size + this.parts[end].length <= PART_BYTES)) size += this.parts[end++].length
    const chunk = end - this.next === 1 ? this.parts[this.next] : Buffer.concat(this.parts.slice(this.next, end), size)
    this.next = end
    this.turnBytes += size
    this.push(chunk)
  }
}

/** The bytes of one chunk of an answer made of small parts (see AnswerParts). */
const PART_BYTES = 65_536

/** The bytes of an answer's parts handed on in one turn of the loop (see AnswerParts). */
const TURN_BYTES = 1 << 20

/** Rows in one part each up to this many: about 35 KiB of event JSON. */
const PART_ROWS = 64

/**
 * The list answer of a page built whole: one string for a small page, parts for a large
 * one (AnswerParts). Byte for byte `JSON.stringify(listAnswer(total, filtered, rows.map(view)))`.
 */
export function listAnswerOf<R>(recordsTotal: number, recordsFiltered: number, rows: R[], view: (row: R) => unknown, exact?: boolean): string | AnswerParts {
  if (rows.length <= 2 * PART_ROWS) return JSON.stringify(listAnswer(recordsTotal, recordsFiltered, rows.map(view), exact))
  const parts = [answerHead(recordsTotal, recordsFiltered, exact)]
  for (let i = 0; i < rows.length; i += PART_ROWS) {
    // The views of a part as one array: V8's JSON.stringify of fixed-shape objects is the fastest writer (lib/events/views.ts).
    const text = JSON.stringify(rows.slice(i, i + PART_ROWS).map(view))
    parts.push((i ? ',' : '') + text.slice(1, -1))
  }
  parts.push(']}')
  return new AnswerParts(parts)
}

/**
 * The same answer from each row's JSON as bytes, each with a comma before it (the first
 * row's is skipped): no text built and nothing copied until it is sent (AnswerParts groups
 * the rows into chunks then, a turn's share at a time; a poller's page of 6,000 rows copied
 * here took 20-40 ms of one turn).
 */
export function listAnswerOfBytes(recordsTotal: number, recordsFiltered: number, rows: Buffer[], exact?: boolean): AnswerParts {
  const parts: Buffer[] = new Array(rows.length + 2)
  parts[0] = Buffer.from(answerHead(recordsTotal, recordsFiltered, exact))
  for (let i = 0; i < rows.length; i++) parts[i + 1] = i === 0 ? rows[0].subarray(1) : rows[i]
  parts[rows.length + 1] = Buffer.from(']}')
  return new AnswerParts(parts)
}

/** The list answer as JSON text, streamed: the counts at once, then the rows as they are read. */
async function* listAnswerText(recordsTotal: number, recordsFiltered: number, rows: AsyncIterable<string>, exact: boolean | undefined): AsyncGenerator<string> {
  yield answerHead(recordsTotal, recordsFiltered, exact)
  let first = true
  for await (const part of rows) {
    if (!part) continue
    yield first ? part : ',' + part
    first = false
  }
  yield ']}'
}

/** Rows as JSON objects joined by commas, about STREAM_CHUNK_CHARS to a chunk (the data of a streamed page). */
export async function* jsonChunks<T>(rows: AsyncIterable<T>, view: (row: T) => unknown): AsyncGenerator<string> {
  let text = ''
  for await (const row of rows) {
    text += (text ? ',' : '') + JSON.stringify(view(row))
    if (text.length >= STREAM_CHUNK_CHARS) {
      yield text
      text = ''
    }
  }
  if (text) yield text
}

/**
 * A large page as a stream of JSON text. `rows`: the page's rows as JSON objects joined by
 * commas, a chunk at a time (about STREAM_CHUNK_CHARS each). The stream is piped to the
 * socket, which takes no more while the client is slow (it waits for 'drain'); then the
 * reader waits too: one chunk is read ahead, not the default sixteen.
 */
export const listAnswerStream = (recordsTotal: number, recordsFiltered: number, rows: AsyncIterable<string>, exact?: boolean): Readable =>
  Readable.from(listAnswerText(recordsTotal, recordsFiltered, rows, exact), { objectMode: true, highWaterMark: 1 })
