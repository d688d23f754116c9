// A new term's first search (db/event-engine/term-search.ts) against the trigram index's phrase query it
// replaces, in process, on an existing data dir: BENCH_EVENTS_DIR=<dir> npm run bench -- terms.
// The terms are the events bench's (scripts/bench-events.ts): vendors in Details, devices in
// PeripheralAssetId, hosts and sites in the details as GlobalSearch asks them. Each search
// is a first one (nothing kept from a term's search before); the two ways alternate (ABBA)
// over BENCH_ROUNDS rounds, and every answer of the new way is checked against the old.
import os from 'node:os'
import path from 'node:path'
import { openDatabase } from '../db/index.js'
import { eventQueriesRepo } from '../db/event-engine/event-queries.js'
import { textMatch } from '../db/event-engine/event-plans.js'
import { termSearch, type DocColumn } from '../db/event-engine/term-search.js'
import { benchTerms } from './bench-support.js'

const dir = process.env.BENCH_EVENTS_DIR
if (!dir) throw new Error('BENCH_EVENTS_DIR: a data dir with events (scripts/bench-events.ts seeds one)')
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2)

const db = openDatabase(path.join(path.resolve(dir), 'prime.sqlite'))
const repo = eventQueriesRepo(db)
repo.holdIndexing(true)
repo.catchUp()

// The events bench's terms.
const { hosts, sites, vendors, devices } = benchTerms(db)
// A sample of the hosts (the phrase query takes tens of ms each).
const hostSample = hosts.filter((_, i) => i % 10 === 0)

const sets: [string, DocColumn, string[]][] = [
  ['vendors (Details)', 'details', vendors],
  ['devices (PeripheralAssetId)', 'peripheral_asset_id', devices],
  ['hosts (GlobalSearch, details)', 'details', hostSample],
  ['sites (GlobalSearch, details)', 'details', sites],
]

const last = db.prepare('SELECT coalesce(max(id), 0) FROM event_doc_texts').pluck().get() as number
const phrase = db.prepare<[string, number, number], number>('SELECT rowid FROM event_docs_fts WHERE event_docs_fts MATCH ? AND rowid > ? AND rowid <= ? ORDER BY rowid').pluck()
const search = termSearch(db)
// The background's slices, one after another: the sample, then the device parts.
const t0 = performance.now()
let slices = 1
let longest = 0
for (let more = true; more; slices++) {
  const s = performance.now()
  more = search.prepare()
  longest = Math.max(longest, performance.now() - s)
}
const prepareMs = performance.now() - t0

const before = (term: string, column: DocColumn) => phrase.all(textMatch(term).phrase([column]), 0, last)
const after = (term: string, column: DocColumn) => search.docs(textMatch(term), column, 0, last)

const times = new Map<string, { old: number[]; now: number[] }>()
let wrong = 0
const ways = new Map<string, number>()
const run = (way: 'old' | 'now') => {
  for (const [name, column, terms] of sets) {
    const t = times.get(name) ?? { old: [], now: [] }
    times.set(name, t)
    for (const term of terms) {
      const s = performance.now()
      const ids = way === 'old' ? before(term, column) : after(term, column)
      t[way].push(performance.now() - s)
      if (way === 'now') ways.set(search.lastWay(), (ways.get(search.lastWay()) ?? 0) + 1)
      if (way === 'now' && ids.join() !== before(term, column).join()) {
        wrong++
        console.error(`different ids for ${JSON.stringify(term)} in ${column}`)
      }
    }
  }
}
for (let r = 0; r < ROUNDS; r++) for (const way of ['old', 'now', 'now', 'old'] as const) run(way)

const q = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]
}
const ms = (x: number) => `${x.toFixed(1)} ms`
console.log(`${last} documents; the sample and the device parts read in ${ms(prepareMs)} (${slices} slices, the longest ${ms(longest)}), held ${(search.bytes() / 1048576).toFixed(1)} MB`)
for (const [name, t] of times) {
  console.log(`${name} (${t.now.length / (2 * ROUNDS)} terms): phrase query p50 ${ms(q(t.old, 0.5))} p99 ${ms(q(t.old, 0.99))}; term search p50 ${ms(q(t.now, 0.5))} p99 ${ms(q(t.now, 0.99))}`)
}
console.log(
  `ways: ${[...ways].map(([w, n]) => `${w} ${n}`).join(', ')}; ${wrong ? `${wrong} answers differ` : 'every answer the same'}; load ${os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
)
db.close()
if (wrong) process.exitCode = 1
