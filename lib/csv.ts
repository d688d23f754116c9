// CSV files as streams, for every export: UTF-8, a header row, CRLF line ends, null as an
// empty cell, booleans as true/false, and safe to open in a spreadsheet.
import { Readable, pipeline } from 'node:stream'
import { stringify } from 'csv-stringify'

export const CSV_TYPE = 'text/csv; charset=utf-8'

/**
 * The records as CSV, the columns in the given order (a record's other keys are left
 * out). Rows are pulled from `rows` only as fast as the reader takes the text, so memory
 * stays flat whatever the count. Cells that begin with = + - @ tab or CR (or their
 * full-width forms) get a leading ' so that spreadsheets do not run them as formulas.
 */
export function csvStream(columns: readonly string[], rows: AsyncIterable<object> | Iterable<object>): Readable {
  const out = stringify({
    header: true,
    columns: [...columns],
    record_delimiter: '\r\n',
    escape_formulas: true,
    // A lone CR or LF inside a cell would otherwise split the row in spreadsheet readers.
    quoted_match: /[\r\n]/,
    cast: {
      boolean: (value) => (value ? 'true' : 'false'),
      date: (value) => value.toISOString(),
      object: (value) => JSON.stringify(value),
    },
  })
  // A failure while reading rows destroys `out` with the error, which ends the response.
  pipeline(Readable.from(rows), out, () => {})
  return out
}
