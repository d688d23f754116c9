// CSV files as streams, for every export and report: UTF-8, a header row, CRLF line ends,
// null as an empty cell, booleans as true/false, quoted only when needed, and safe to open
// in a spreadsheet. Written by hand, a few hundred lines at a time: a general-purpose
// stringifier called cell by cell took most of a large export's time. tests/csv.test.ts
// checks the bytes against csv-stringify with the same rules.
import { Readable } from 'node:stream'

export const CSV_TYPE = 'text/csv; charset=utf-8'

const NEEDS_QUOTES = /[",\r\n]/
const LINES_PER_CHUNK = 256

/**
 * One cell. A text that begins with = + - @ tab or CR (or their full-width forms) gets a
 * leading ' so that spreadsheets do not run it as a formula; numbers (-5) are left alone.
 * A lone CR or LF is quoted too: bare, it would split the row in spreadsheet readers.
 * `quoteDefused`: a defused formula is always quoted (the events and audit exports' rule).
 */
export function csvCell(v: unknown, quoteDefused = false): string {
  if (v === null || v === undefined) return ''
  let s: string
  let numeric = false
  switch (typeof v) {
    case 'string':
      s = v
      break
    case 'boolean':
      return v ? 'true' : 'false'
    case 'number':
    case 'bigint':
      s = String(v)
      numeric = true
      break
    default:
      s = v instanceof Date ? v.toISOString() : JSON.stringify(v)
  }
  if (s === '') return ''
  switch (s.charCodeAt(0)) {
    // biome-ignore lint/suspicious/noFallthroughSwitchClause: a text starting with - is neutralised as the others are
    case 0x2d: // - (a negative number is left as it is)
      if (numeric) break
    // falls through
    case 0x3d: // =
    case 0x2b: // +
    case 0x40: // @
    case 0x09: // tab
    case 0x0d: // CR
    case 0xff1d: // full-width =
    case 0xff0b: // full-width +
    case 0xff0d: // full-width -
    case 0xff20: // full-width @
      s = "'" + s
      if (quoteDefused) return '"' + s.replaceAll('"', '""') + '"'
  }
  return NEEDS_QUOTES.test(s) ? '"' + s.replaceAll('"', '""') + '"' : s
}

/**
 * The records as CSV, the columns in the given order (a record's other keys are left
 * out). Rows are pulled from `rows` only as fast as the reader takes the text, so memory
 * stays flat whatever the count; a failure while reading rows destroys the stream with
 * the error, which ends the response.
 */
export function csvStream(columns: readonly string[], rows: AsyncIterable<object> | Iterable<object>): Readable {
  const line = (row: Record<string, unknown>) => {
    let out = ''
    for (let i = 0; i < columns.length; i++) {
      if (i > 0) out += ','
      out += csvCell(row[columns[i]])
    }
    return out + '\r\n'
  }
  async function* chunks() {
    yield columns.map((c) => csvCell(c)).join(',') + '\r\n'
    let chunk = ''
    let n = 0
    for await (const row of rows) {
      chunk += line(row as Record<string, unknown>)
      if (++n === LINES_PER_CHUNK) {
        yield chunk
        chunk = ''
        n = 0
      }
    }
    if (chunk) yield chunk
  }
  return Readable.from(chunks(), { objectMode: false })
}
