// backend: sqlite-only — the sources' names kept in memory for SQLite's event engine (db/event-engine/source-names.ts)
// Pins the sources' names in memory (db/event-engine/source-names.ts): the chunks a term's trigrams pass
// over never hold a match, so a search finds exactly the sources a scan of every name finds
// (the term's own test deciding): hosts that share most trigrams, names across chunk
// boundaries, Unicode that lower-cases to more code units, empty and missing names, short
// terms, several columns, sources added after a search, and names read a slice at a time.
import t from 'tap'
import { migrate, openDatabase } from '../db/index.js'
import { textMatch } from '../db/event-engine/event-plans.js'
import { sourceNames, type SourceColumn } from '../db/event-engine/source-names.js'

const db = openDatabase(':memory:')
migrate(db)
const insert = db.prepare('INSERT INTO event_sources (entity_id, asset_key, asset_name) VALUES (?, ?, ?)')
const sites = ['LON-ENG', 'NYC-MKT', 'SFO-IT', 'ZÜR-OPS', 'İST-HR']
let seed = 7
const random = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff
  return seed / 0x7fffffff
}
function addSources(n: number) {
  db.transaction(() => {
    for (let i = 0; i < n; i++) {
      const host = `${sites[Math.floor(random() * sites.length)]}-WS${String(Math.floor(random() * 100000)).padStart(5, '0')}`
      const key = random() < 0.2 ? null : `k-${Math.floor(random() * 1e9).toString(16)}`
      const name = random() < 0.1 ? null : random() < 0.05 ? '' : random() < 0.5 ? host : `\u212Aelvin-${host.toLowerCase()}`
      insert.run(`${host} (10.${Math.floor(random() * 255)}.${Math.floor(random() * 255)}.1)`, key, name)
    }
  })()
}

const columnSets: SourceColumn[][] = [['entity_id'], ['asset_key'], ['asset_name'], ['entity_id', 'asset_name'], ['entity_id', 'asset_key', 'asset_name']]
/** What every name's own test says, over all the rows. */
function expected(rows: Record<string, string | null>[], term: string, columns: SourceColumn[]): number[] {
  const m = textMatch(term)
  return rows.filter((r) => columns.some((c) => m.test(r[c]))).map((r) => r.id as unknown as number)
}
/** Terms from stored names (whole, parts, across a name's pieces) and a few that match nothing. */
function termsOf(): string[] {
  const names = db.prepare('SELECT entity_id, asset_name FROM event_sources WHERE id % 150 = 7 ORDER BY id').raw().all() as (string | null)[][]
  const out = ['ws0', 'lon', 'zür', 'İst', 'kelvin-', 'KELVIN', 'k-', 'ws', 'w', '10.1', 'nothing-here', 'nyc-mkt-ws9', ')']
  for (const [entity, asset] of names) {
    out.push(entity!, entity!.slice(4, 14), entity!.slice(-8))
    if (asset) out.push(asset, asset.slice(2, 9).toUpperCase())
  }
  return out
}

function check(t: Tap.Test, names: ReturnType<typeof sourceNames>, label: string) {
  let checks = 0
  const rows = db.prepare('SELECT id, entity_id, asset_key, asset_name FROM event_sources ORDER BY id').all() as Record<string, string | null>[]
  for (const term of termsOf())
    for (const columns of columnSets) {
      const m = textMatch(term)
      const got = names.scan(m.folded, columns, m.test)
      const want = expected(rows, term, columns)
      if (JSON.stringify(got) !== JSON.stringify(want)) t.same(got, want, `${label}: ${JSON.stringify(term)} in ${columns.join(', ')}`)
      checks++
    }
  t.pass(`${label}: ${checks} searches as every name's own test answers`)
}

t.test('a search finds the sources every name holding the term is, chunks passed over or not', async (t) => {
  addSources(3000)
  const names = sourceNames(db)
  check(t, names, 'first search')
  // Added after a search: read by the next one.
  addSources(700)
  check(t, names, 'sources added since')
  t.equal(
    names.scan('\u0000', ['entity_id'], () => true),
    null,
    'a NUL in the term: the names cannot tell',
  )
})

t.test('names read a slice at a time answer as those read at once', async (t) => {
  const names = sourceNames(db)
  const columns: SourceColumn[] = ['entity_id', 'asset_name']
  t.ok(names.lagging(columns), 'more than a slice to read at first')
  let slices = 0
  while (names.prepare(columns, 500)) slices++
  t.ok(slices >= 14, `read in ${slices + 1} slices of 500 (3,700 sources, two columns)`)
  t.notOk(names.lagging(columns), 'caught up')
  t.notOk(names.prepare(columns), 'nothing more to read')
  check(t, names, 'read in slices')
  addSources(10)
  t.notOk(names.lagging(columns), 'a few new sources are read by the search itself')
  check(t, names, 'a few added after the slices')
})
