// CSV files of reports: the same text as lib/csv.ts writes (UTF-8, a header row, CRLF,
// null as an empty cell, true/false, quoted only when needed, and a leading ' on cells a
// spreadsheet would run as a formula), written a few hundred lines at a time. A report
// of 100,000 agents has four million cells: a general-purpose stringifier called cell by
// cell took most of the run; tests/reports-files.test.ts checks that both write the
// same bytes.
import { Readable } from 'node:stream'

const NEEDS_QUOTES = /[",\r\n]/
const LINES_PER_CHUNK = 256

/** One cell, by the rules of lib/csv.ts (csv-stringify with escape_formulas). */
export function csvCell(v: unknown): string {
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
  }
  return NEEDS_QUOTES.test(s) ? '"' + s.replaceAll('"', '""') + '"' : s
}

/** The rows as CSV text, pulled from `rows` only as fast as the reader takes it. */
export function csvText(columns: readonly string[], rows: AsyncIterable<object>): Readable {
  const line = (row: Record<string, unknown>) => {
    let out = ''
    for (let i = 0; i < columns.length; i++) {
      if (i > 0) out += ','
      out += csvCell(row[columns[i]])
    }
    return out + '\r\n'
  }
  async function* chunks() {
    yield columns.map(csvCell).join(',') + '\r\n'
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
