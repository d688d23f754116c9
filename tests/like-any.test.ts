// backend: sqlite-only — like_any, a function registered on SQLite's connection (db/match.ts)
// like_any (db/match.ts) answers what an OR of SQLite LIKEs (ESCAPE '\') answers, for the
// patterns the asset filters send and for any other, on texts of every kind of character.
import t from 'tap'
import { patternList } from '../db/match.js'
import { contains } from '../lib/listing.js'
import { tempDb } from './helpers.js'

const TEXTS = [
  'DESKTOP-9LR722S',
  'desktop-9lr722s',
  'Latitude 5440',
  'a_b',
  'a%b',
  'a\\b',
  'Ébène',
  'ébène',
  'ÉBÈNE',
  'straße',
  'STRASSE',
  '😀 emoji',
  '',
  ' ',
  '00:1a:2b:3c:4d:5e',
  'dormant device',
  'x\ny',
]
const NEEDLES = ['desk', 'DESK', '9lr', 'tude 54', '_', '%', '\\', 'é', 'É', 'bène', 'BÈNE', 'ß', 'SS', '😀', ' ', '', '1A:2B', 'x\ny', 'zzz']

t.test('like_any matches as LIKE does', async (t) => {
  const { db } = tempDb(t)
  const like = db.prepare<[string, string], number>("SELECT ? LIKE ? ESCAPE '\\'").pluck()
  const likeAny = db.prepare<[unknown, number], number | null>('SELECT like_any(?, ?)').pluck()
  const any = { get: (text: unknown, patterns: string[]) => likeAny.get(text, patternList(patterns)) }
  const patterns = NEEDLES.flatMap((n) => [contains(n), contains(n).slice(1), contains(n).slice(0, -1), contains(n).slice(1, -1)])
  // Patterns with wildcards of their own, as LIKE reads them.
  patterns.push('d_sk%', '%a_b%', '%_', '_', '%', '', 'a%b', '%t%e%', '\\%%', '%\\_%', 'é%', '_bène', '😀%', '_ emoji')
  let compared = 0
  for (const text of TEXTS) {
    for (const p of patterns) {
      t.equal(any.get(text, [p]), like.get(text, p), `${JSON.stringify(text)} LIKE ${JSON.stringify(p)}`)
      compared++
    }
    // A list matches when any of its patterns does.
    for (let i = 0; i + 5 <= patterns.length; i += 5) {
      const list = patterns.slice(i, i + 5)
      t.equal(any.get(text, list), list.some((p) => like.get(text, p) === 1) ? 1 : 0, `${JSON.stringify(text)} any of ${JSON.stringify(list)}`)
    }
  }
  t.ok(compared > 1000)
  t.equal(any.get(null, ['%a%']), null, 'NULL as LIKE answers it')
  t.equal(any.get(12345, ['%234%']), 1, 'a number is compared as its text')
  t.equal(patternList(['%a%', 'b%']), patternList(['%a%', 'b%']), 'one id per list')
  t.throws(() => likeAny.get('a', 0), /no pattern list 0/)
})
