// backend: none — pure functions: no app is built and no database opened
import t from 'tap'
import { csvCell, csvStream } from '../lib/csv.js'
import { stringify } from 'csv-stringify/sync'

const text = async (rows: object[]) => {
  let out = ''
  for await (const chunk of csvStream(['a', 'b'], rows)) out += chunk
  return out
}

t.test('cells with a lone line break are quoted, formulas defused, plain numbers left alone', async (t) => {
  const out = await text([
    { a: 'line one\nline two', b: 'cr\ronly' },
    { a: '=HYPERLINK("x")', b: -1 },
  ])
  t.equal(out, 'a,b\r\n"line one\nline two","cr\ronly"\r\n"\'=HYPERLINK(""x"")",-1\r\n')
})

t.test('the bytes are those of csv-stringify with the same rules, across every kind of cell', async (t) => {
  const columns = ['a', 'b', 'c', 'd']
  const values: unknown[] = [
    null,
    undefined,
    '',
    'plain',
    'with,comma',
    'with "quotes"',
    'crlf\r\nhere',
    '=SUM(A1:A2)',
    '+1',
    '-1',
    '@cmd',
    '\tTab',
    '\r\nCRLF',
    '＝full',
    '＋x',
    '－y',
    '＠z',
    -5,
    0,
    3.25,
    12345678901234,
    true,
    false,
    new Date(Date.UTC(2025, 0, 2, 3, 4, 5, 6)),
    { x: 1, y: 'a,"b"' },
    ['l', 1],
    '=a,"b"',
    'ü unicode, 漢字',
    ' leading space',
    "'quote",
  ]
  // More rows than one chunk holds, so that chunk boundaries are crossed.
  const rows: Record<string, unknown>[] = []
  for (let i = 0; i < 700; i++) {
    const v = (k: number) => values[(i + k) % values.length]
    rows.push({ a: v(0), b: v(7), c: v(13), d: i, ignored: 'x' })
  }
  let mine = ''
  for await (const chunk of csvStream(
    columns,
    (async function* () {
      yield* rows
    })(),
  ))
    mine += chunk
  const reference = stringify(rows, {
    header: true,
    columns,
    record_delimiter: '\r\n',
    escape_formulas: true,
    quoted_match: /[\r\n]/,
    cast: { boolean: (v) => (v ? 'true' : 'false'), date: (v) => v.toISOString(), object: (v) => JSON.stringify(v) },
  })
  t.equal(mine, reference)
  t.ok(mine.includes(`'=SUM(A1:A2)`) && mine.includes('\r\n-5,'), 'formulas defused, negative numbers kept')
})

t.test('a failure while reading rows ends the stream with the error', async (t) => {
  const rows = (function* () {
    yield { a: 1, b: 2 }
    throw new Error('read failed')
  })()
  await t.rejects(async () => {
    for await (const _ of csvStream(['a', 'b'], rows)) void _
  }, /read failed/)
})

t.test('quoteDefused (events and audit exports): a defused formula is always quoted, nothing else changes', async (t) => {
  t.equal(csvCell('=1+1', true), `"'=1+1"`)
  t.equal(csvCell('-x', true), `"'-x"`)
  t.equal(csvCell('＠y', true), `"'＠y"`)
  t.equal(csvCell('=a"b', true), `"'=a""b"`)
  t.equal(csvCell('=1+1'), `'=1+1`, 'by default only cells that need it are quoted')
  t.equal(csvCell(-5, true), '-5', 'numbers are not formulas')
  t.equal(csvCell('plain', true), 'plain')
  t.equal(csvCell('a,b', true), '"a,b"')
  t.equal(csvCell(null, true), '')
  t.equal(csvCell(true, true), 'true')
})
