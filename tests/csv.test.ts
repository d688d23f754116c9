import t from 'tap'
import { csvStream } from '../lib/csv.js'

const text = async (rows: object[]) => {
  let out = ''
  for await (const chunk of csvStream(['a', 'b'], rows)) out += chunk
  return out
}

t.test('cells with a lone line break are quoted, formulas defused, plain numbers left alone', async (t) => {
  const out = await text([{ a: 'line one\nline two', b: 'cr\ronly' }, { a: '=HYPERLINK("x")', b: -1 }])
  t.equal(out, 'a,b\r\n"line one\nline two","cr\ronly"\r\n"\'=HYPERLINK(""x"")",-1\r\n')
})
