// A console's working set of text questions, in process, on an existing data dir:
// BENCH_EVENTS_DIR=<dir> npm run bench -- working-set. The terms are the events bench's
// (scripts/bench-events.ts): vendors in Details and GlobalSearch, devices in
// PeripheralAssetId, hosts and sites, each with a random page or a random day. Two
// repositories on the one connection answer the same questions in turn (ABBA), one keeping
// text counts up to KEPT_DOCS_MAX listed documents, the other up to BENCH_KEPT_DOCS_OTHER
// (4,000,000 by default): whether the kept counts hold the working set, or are made again
// in turn. The figures are over the second half (every term asked by then); BENCH_QUESTIONS
// (6,000) questions each.
import path from 'node:path'
import { openDatabase } from '../db/index.js'
import { KEPT_DOCS_MAX } from '../db/event-engine/event-counts.js'
import { eventQueriesRepo, type EventQueriesRepo } from '../db/event-engine/event-queries.js'
import { eventFilter } from '../lib/events/filter.js'
import { benchTerms, ms, pct, textsReadAsServer } from './bench-support.js'

const dir = process.env.BENCH_EVENTS_DIR
if (!dir) throw new Error('BENCH_EVENTS_DIR: a data dir with events (scripts/bench-events.ts seeds one)')
const QUESTIONS = Number(process.env.BENCH_QUESTIONS ?? 6000)
const OTHER = Number(process.env.BENCH_KEPT_DOCS_OTHER ?? 4_000_000)
/** A question slower than this is counted (a text count made again takes 20-30 ms at 5,000,000 events). */
const SLOW_MS = 15

const db = openDatabase(path.join(path.resolve(dir), 'prime.sqlite'))
const { hosts, sites, vendors, devices } = benchTerms(db)
const DAY = 86_400_000
const newest = db.prepare('SELECT max(created_ms) FROM events').pluck().get() as number
const pick = <T>(l: T[]) => l[Math.floor(Math.random() * l.length)]
const page = () => String(1 + Math.floor(Math.random() * 20))
const day = () => {
  const from = newest - DAY * (1 + Math.random() * 28)
  return { FromDate: new Date(from).toISOString(), ToDate: new Date(from + DAY).toISOString() }
}
const shapes: (() => Record<string, string>)[] = [
  () => ({ PeripheralAssetId: pick(devices), ...day() }),
  () => ({ PeripheralAssetId: pick(devices), PageNumber: page() }),
  () => ({ Details: pick(vendors), ...day() }),
  () => ({ Details: pick(vendors), PageNumber: page() }),
  () => ({ GlobalSearch: pick(vendors), ...day() }),
  () => ({ GlobalSearch: pick(vendors), PageNumber: page() }),
  () => ({ GlobalSearch: pick(hosts) }),
  () => ({ Source: pick(hosts) }),
  () => ({ Source: pick(sites), PageNumber: page() }),
  () => ({ AssetName: pick(sites), ...day() }),
]

interface Way {
  name: string
  repo: EventQueriesRepo
  times: number[]
}
const wayOf = (name: string, keptDocsMax: number): Way => {
  const repo = eventQueriesRepo(db, { keptDocsMax })
  repo.holdIndexing(true)
  return { name, repo, times: [] }
}
const ways = [wayOf(`up to ${KEPT_DOCS_MAX.toLocaleString('en')} listed documents (KEPT_DOCS_MAX)`, KEPT_DOCS_MAX), wayOf(`up to ${OTHER.toLocaleString('en')}`, OTHER)]
ways[0].repo.catchUp()
// As the server is once its first text filter has run: the texts, the sources' names and the device parts read.
for (const w of ways) await textsReadAsServer(w.repo, sites[0], devices[0])

async function ask(w: Way, q: Record<string, string>) {
  const f = eventFilter(q)
  const t = performance.now()
  await w.repo.events.ready(f)
  w.repo.events.pageRows(f, { field: 'eventID', direction: 'desc' }, 100, 100 * (Number(q.PageNumber ?? 1) - 1))
  return performance.now() - t
}
for (let i = 0; i < QUESTIONS; i++) {
  const q = pick(shapes)()
  const order = i % 2 ? [ways[1], ways[0]] : ways
  for (const w of order) w.times.push(await ask(w, q))
}

console.log(`\n${QUESTIONS} questions, each to both ways in turn (ABBA); ${vendors.length} vendors, ${devices.length} devices, ${hosts.length} hosts, ${sites.length} sites.`)
console.log('\n| kept text counts | p50 ms | p99 ms | questions over 15 ms (second half) | counts kept at the end, documents and sources they list |\n|---|---|---|---|---|')
for (const w of ways) {
  const late = w.times.slice(w.times.length >> 1)
  const slow = late.filter((t) => t > SLOW_MS).length
  const kept = w.repo.keptTexts()
  console.log(
    `| ${w.name} | ${ms(pct(late, 0.5))} | ${ms(pct(late, 0.99))} | ${slow} of ${late.length} (${((100 * slow) / late.length).toFixed(1)}%) | ${kept.counts}, ${kept.docs.toLocaleString('en')} |`,
  )
}
for (const w of ways) await w.repo.close()
db.close()
