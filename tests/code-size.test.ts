// backend: none — reads the source tree, no app or database
// The sizes of scripts/code-size.ts (no function over 300 lines, no file over 600, in db/, lib/
// and handlers/). What is over today is listed below with its size: it may shrink, never grow,
// and a new one fails. An entry that is no longer over must leave the list, so it only shrinks.
import t from 'tap'
import { describe, oversized } from '../scripts/code-size.js'

const KNOWN: Record<string, number> = {}

t.test('no function over 300 lines and no file over 600, beyond the known ones, which only shrink', async (t) => {
  const over = oversized()
  const key = (o: { file: string; name: string | null }) => (o.name === null ? o.file : `${o.file} ${o.name}`)
  const grown = over.filter((o) => !(key(o) in KNOWN) || o.lines > KNOWN[key(o)])
  t.same(grown.map(describe), [], 'nothing new over the limits, nothing known grown (npm run lint:sizes)')
  const gone = Object.keys(KNOWN).filter((k) => !over.some((o) => key(o) === k))
  t.same(gone, [], 'entries no longer over the limits are taken out of KNOWN')
})
