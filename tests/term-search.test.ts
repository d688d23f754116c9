// backend: sqlite-only — SQLite's trigram term search over event documents (db/event-engine/term-search.ts)
// Pins a text term's documents (db/event-engine/term-search.ts): the rarest trigrams' AND with each
// candidate tested, the device parts that prove a peripheral id's documents, and the phrase
// query where the term's trigrams are all common give the same documents as SQL's LIKE
// (event_contains for Unicode terms) over event_doc_texts: rare and common trigrams,
// repeated trigrams ("aaaa"), Unicode, terms across the device part's end, documents added
// after a search and after the parts were read.
import t from 'tap'
import { migrate, openDatabase } from '../db/index.js'
import { textMatch } from '../db/event-engine/event-plans.js'
import { devicePart, termSearch, type DocColumn } from '../db/event-engine/term-search.js'

const db = openDatabase(':memory:')
migrate(db)
db.function('event_contains', { deterministic: true }, (text: unknown, term: unknown) => (typeof text === 'string' && typeof term === 'string' && text.toLowerCase().includes(term) ? 1 : 0))
const insertText = db.prepare('INSERT INTO event_doc_texts (id, details, peripheral_asset_id) VALUES (?, ?, ?)')
const insertFts = db.prepare('INSERT INTO event_docs_fts (rowid, details, peripheral_asset_id) VALUES (?, ?, ?)')
let last = 0
function add(details: string, device: string | null) {
  last++
  insertText.run(last, details, device)
  insertFts.run(last, details, device)
}

// Common texts (every trigram of a vendor in most documents) and a few rare ones.
const vendors = ['Logitech, Inc. USB Receiver', 'Kingston DataTraveler 3.0', 'SanDisk Corp. Ultra Fit']
const pids = ['VID_046D&PID_C52B', 'VID_0951&PID_1666', 'VID_0781&PID_5583']
function addFleet(n: number) {
  for (let i = 0; i < n; i++) {
    const v = i % 3
    const host = `LON-HR-WS${String(i % 97).padStart(5, '0')}`
    const serial = `${(i * 2654435761) % 0xfffffff}`.padStart(9, '0')
    add(`${vendors[v]} (VID ${pids[v].slice(4, 8)}, PID ${pids[v].slice(-4)}, serial ${serial}) on ${host}.`, i % 5 === 4 ? null : `USB\\${pids[v]}\\${serial}`)
  }
}
addFleet(600)
// Rare texts: repeated trigrams, Unicode, a device id in a serial, a term across a part's end.
add('aaa only three', 'USB\\VID_AAAA&PID_0001\\X1')
add('aaaa four of them', 'USB\\VID_1234&PID_AAAA\\aaaa')
add('Größe GRÖSSE größe', 'USB\\VID_ÄÖÜ0&PID_0002\\S1')
add('İstanbul office', 'HID\\VID_046D&PID_C52B')
add('note', 'USB\\VID_9999&PID_0003\\VID_046D&PID_C52B')
add('note', 'USB\\VID_046D&PID_C52B&MI_00\\7&1')

const search = termSearch(db)
const expected = (term: string, column: DocColumn, after = 0, upTo = last): number[] => {
  const w = textMatch(term).on(column)
  return db
    .prepare(`SELECT id FROM event_doc_texts WHERE id > ? AND id <= ? AND ${w.sql} ORDER BY id`)
    .pluck()
    .all(after, upTo, ...w.params) as number[]
}
const terms: [string, DocColumn][] = [
  ['Logitech', 'details'],
  ['kingston datatraveler', 'details'],
  ['LON-HR-WS00042', 'details'],
  ['ws00042', 'details'],
  ['aaaa', 'details'],
  ['aaa', 'details'],
  ['aaaa', 'peripheral_asset_id'],
  ['größe', 'details'],
  ['GRÖSSE', 'details'],
  ['istanbul', 'details'],
  ['VID_046D&PID_C52B', 'peripheral_asset_id'],
  ['vid_0951&pid_1666', 'peripheral_asset_id'],
  ['PID_C52B\\', 'peripheral_asset_id'],
  ['C52B&MI', 'peripheral_asset_id'],
  ['ÄÖÜ0&PID', 'peripheral_asset_id'],
  ['usb', 'peripheral_asset_id'],
  [') on LON-HR-WS', 'details'],
  ['nothing like it', 'details'],
  ['"quoted"', 'details'],
]

t.test('before the sample is read: the phrase query, the same documents', async (t) => {
  for (const [term, column] of terms) t.same(search.docs(textMatch(term), column, 0, last), expected(term, column), `${term} in ${column}`)
  t.equal(search.lastWay(), 'phrase')
})

t.test('with the sample and the device parts: the same documents, rare terms without the phrase query', async (t) => {
  while (search.prepare());
  const ways = new Map<string, string>()
  for (const [term, column] of terms) {
    t.same(search.docs(textMatch(term), column, 0, last), expected(term, column), `${term} in ${column}`)
    ways.set(`${term} ${column}`, search.lastWay())
  }
  // A host's rare trigrams, a repeated one, a device: their AND; a term in nearly every document: the phrase.
  t.equal(ways.get('LON-HR-WS00042 details'), 'and')
  t.equal(ways.get('aaaa details'), 'and')
  t.equal(ways.get('VID_046D&PID_C52B peripheral_asset_id'), 'and')
  t.equal(ways.get(') on LON-HR-WS details'), 'phrase')
  t.ok(search.bytes() > 0)
})

t.test("a term's query asked ahead (on another connection): its answer decided gives the same documents, by either way", async (t) => {
  while (search.prepare());
  const fts = db.prepare('SELECT rowid FROM event_docs_fts WHERE event_docs_fts MATCH ? AND rowid > ? AND rowid <= ? ORDER BY rowid').pluck()
  const ways = new Set<boolean>()
  for (const [term, column] of terms) {
    const m = textMatch(term)
    if (!m.trigram) continue
    const ahead = search.aheadQuery(m, column, last)
    ways.add(ahead.and)
    const answer = fts.all(ahead.query, 0, last) as number[]
    const found = ahead.and ? search.holding(m, column, last, answer) : answer
    t.same(found, expected(term, column), `${term} in ${column} (${ahead.and ? 'AND' : 'phrase'})`)
    // From where an earlier answer ended, as a search after documents were added asks.
    const half = Math.floor(last / 2)
    const rest = fts.all(ahead.query, half, last) as number[]
    t.same(ahead.and ? search.holding(m, column, last, rest) : rest, expected(term, column, half), `${term} in ${column}, after ${half}`)
  }
  t.same([...ways].sort(), [false, true], 'both ways were asked ahead')
})

t.test('a trigram no document holds in the column but the other column holds everywhere is not asked for', async (t) => {
  // The index keeps one list per trigram for both columns: "id_" is in no details but in
  // every peripheral id, so asking for it in details reads every device's entry to find none.
  const holding = (column: DocColumn) => db.prepare(`SELECT count(*) FROM event_doc_texts WHERE instr(lower(${column}), ?) > 0`).pluck()
  const devices = db.prepare('SELECT count(*) FROM event_doc_texts WHERE peripheral_asset_id IS NOT NULL').pluck().get() as number
  for (const term of ['VID_046D&PID_C52B', 'vid_0951&pid_1666']) {
    const lower = term.toLowerCase()
    const everywhere = [...new Set(Array.from({ length: lower.length - 2 }, (_, i) => lower.slice(i, i + 3)))].filter(
      (g) => holding('details').get(g) === 0 && (holding('peripheral_asset_id').get(g) as number) > devices * 0.9,
    )
    t.ok(everywhere.length >= 2, `${term}: ${everywhere.join(' ')} are in no details and nearly every peripheral id`)
    t.same(search.docs(textMatch(term), 'details', 0, last), expected(term, 'details'), `${term} in details`)
    t.equal(search.lastWay(), 'and', `${term}: the AND`)
    t.same(
      search.lastGrams().filter((g) => everywhere.includes(g)),
      [],
      `${term}: asked for ${search.lastGrams().join(' ')}`,
    )
  }
})

t.test('documents added later: searched from where the last search ended, parts caught up', async (t) => {
  const first = last
  addFleet(40)
  add('aaaa again', 'USB\\VID_046D&PID_C52B\\NEW1')
  add('LON-HR-WS00042 lost its link', null)
  for (const [term, column] of terms) t.same(search.docs(textMatch(term), column, first, last), expected(term, column, first, last), `${term} in ${column} after ${first}`)
  t.same(search.docs(textMatch('VID_046D&PID_C52B'), 'peripheral_asset_id', 0, last), expected('VID_046D&PID_C52B', 'peripheral_asset_id'))
})

t.test('a device part: the text before the last backslash', async (t) => {
  t.equal(devicePart('USB\\VID_046D&PID_C52B\\8&B1&0&6'), 'USB\\VID_046D&PID_C52B')
  t.equal(devicePart('no backslash'), '')
  t.equal(devicePart(null), '')
  t.equal(devicePart(`${'x'.repeat(200)}\\y`), '')
})
