// Randomized differential test of the event lists (the engine's answers against a plain
// reading of the base table): a seeded run of 2,000 GetEvents questions, every filter alone
// and in twos and threes, every sort in both directions, pages at random depths (past the
// end too) and the feed from random ids, with writes, retention prunes and (on SQLite) the
// index's catch-up interleaved; after each change the last questions are asked again. The
// model is tests/fixtures/events.ts over `SELECT * FROM events`. It runs on both backends,
// so the two agree with each other through the model. Zero mismatches.
import type { FastifyInstance } from 'fastify'
import t from 'tap'
import type { EventRow } from '../lib/events/ports.js'
import { DAY, EVENT_SORT_FIELDS as SORT_FIELDS, eventMaker, expectedEvents, rand, sortEvents } from './fixtures/events.js'
import { build, call, login } from './helpers.js'
import { backendOf, holdIndexing, indexEvents, query, recordEvents } from './seed.js'

const URL = '/prime/webui/Events/GetEvents'
const NOW = Date.UTC(2025, 0, 20, 12, 0, 0)
const QUESTIONS = 2_000
const KEEP_DAYS = 36_500
const iso = (ms: number) => new Date(ms).toISOString()

/** Each filter's values: present ones, absent ones, case and non-ASCII variants, edges. */
function filterValues(rows: EventRow[], r: () => number): Record<string, () => string> {
  const id = () => String(rows[Math.floor(r() * rows.length)]?.id ?? 1)
  const time = () => NOW - Math.floor(r() * 12 * DAY)
  const pick = (xs: string[]) => () => xs[Math.floor(r() * xs.length)]
  return {
    Severity: pick(['Warning', '2', 'critical', 'Emergency', 'info', '7', 'Notice']),
    MinimumSeverity: pick(['Warning', '3', 'info', 'Emergency', 'Debug', 'err']),
    Category: pick(['USB', 'usb,Host', ' network , system ', 'General', 'Host']),
    PeripheralIcon: pick(['-1', '1,2,3', '14', '3', '2,4']),
    Source: pick(['desktop-9lr', 'DESKTOP-9LR722S (10.0.0.2)', '(10.0.1', 'zÜrich', 'Prime', 'ws', 'nothing-like-this', 'x']),
    Description: pick(['usb peripheral', 'RECONNECTED', 'failed', 'mode', 'p']),
    Details: pick(['was removed', '100%', 'on fra-ops_', '=HYPERLINK', '_x', 'ü', 'kingston', 'ECONNREFUSED']),
    AssetKey: pick(['3b5e1c2a', '0000-4000', '1b5e', 'zz']),
    AssetName: pick(['lon-eng', 'büro', 'desktop', 'SRV']),
    PeripheralAssetId: pick(['VID_0951', '&0&', 'pid_c077', '\\']),
    GlobalSearch: pick(['kingston', 'warning', 'usb', '0x2100', '#attack', 'nyc-fin', 'Alarm', 'ZÜRICH', 'x', 'ws0', 'debug']),
    Date: () => iso(time()).slice(0, 10),
    FromDate: () => iso(time()),
    ToDate: () => (r() < 0.5 ? iso(time()).slice(0, 10) : iso(time())),
    FromCreationTimeEpoch: () => String(time()),
    ToCreationTimeEpoch: () => String(time()),
    FromEventId: id,
    ToEventId: id,
  }
}

interface Question {
  q: Record<string, string>
  sortBy: string
  size: number
  page: number
}

function questions(rows: EventRow[], r: () => number): () => Question {
  const values = filterValues(rows, r)
  const names = Object.keys(values)
  let n = 0
  return () => {
    const q: Record<string, string> = {}
    // In turn: each filter alone, then random twos and threes (and now and then none).
    const k = n < names.length * 2 ? 1 : r() < 0.08 ? 0 : 2 + Math.floor(r() * 2)
    if (k === 1) {
      const name = names[n % names.length]
      q[name] = values[name]()
    } else
      for (let i = 0; i < k; i++) {
        const name = names[Math.floor(r() * names.length)]
        q[name] = values[name]()
      }
    n++
    let sortBy = `${SORT_FIELDS[Math.floor(r() * SORT_FIELDS.length)]}_${r() < 0.5 ? 'asc' : 'desc'}`
    // The feed: from a random id, in id order, as a SIEM follows it.
    if (r() < 0.15) {
      for (const key of Object.keys(q)) if (r() < 0.5) delete q[key]
      q.FromEventId = values.FromEventId()
      sortBy = 'eventID_asc'
    }
    const size = [1, 7, 25, 100, 1000][Math.floor(r() * 5)]
    // Deep pages, and now and then past the end.
    const page = 1 + Math.floor(r() ** 2 * (r() < 0.1 ? 400 : 40))
    return { q, sortBy, size, page }
  }
}

async function ask(app: FastifyInstance, token: string, x: Question) {
  const res = await call(app, token, { method: 'GET', url: `${URL}?${new URLSearchParams({ ...x.q, SortBy: x.sortBy, PageSize: String(x.size), PageNumber: String(x.page) })}` })
  if (res.statusCode !== 200) throw new Error(`${JSON.stringify(x)}: ${res.statusCode} ${res.body}`)
  return res.json() as { recordsTotal: number; recordsFiltered: number; data: { eventID: number }[] }
}

t.test(`${QUESTIONS} random event questions answer as a plain reading of the table, across writes, prunes and index catch-up`, async (t) => {
  // The longest retention, so that the job's own timer (a minute after the start, by the
  // real clock) never prunes these events of 2025; the test's prunes run the job "now" a
  // century later, each cutting at its own day.
  const app = await build(t, { PRIME_RETENTION_EVENTS_DAYS: String(KEEP_DAYS), PRIME_RETENTION_AUDIT_DAYS: String(KEEP_DAYS) })
  const sqlite = backendOf(app) === 'sqlite'
  holdIndexing(app, true)
  const token = await login(app)
  const seed = Number(process.env.PRIME_DIFF_SEED ?? 20251)
  const r = rand(seed)
  const make = eventMaker(seed)
  // Events over the 12 days before NOW, a few per call as check-ins write them.
  let written = 0
  const write = async (count: number, fromMs: number, toMs: number) => {
    for (let i = 0; i < count; ) {
      const n = Math.min(count - i, 1 + Math.floor(r() * 4))
      await recordEvents(app, fromMs + Math.floor(((i + r()) / count) * (toMs - fromMs)), Array.from({ length: n }, make))
      i += n
    }
    written += count
  }
  await write(2_400, NOW - 12 * DAY, NOW - DAY)
  const table = async () =>
    query<EventRow>(
      app,
      'SELECT id, created_ms, event_code, severity, category, entity_id, description, details, hashtags, peripheral_icon, asset_key, asset_name, peripheral_asset_id FROM events ORDER BY id',
    )
  let rows = await table()
  let next = questions(rows, r)

  // The changes between stretches of questions, in turn.
  let clock = NOW
  let cut = NOW - 12 * DAY
  const prune = async () => void (await app.retention.run((cut += 2 * DAY) + KEEP_DAYS * DAY))
  const changes: [string, () => Promise<void>][] = [
    ['part of the index caught up', async () => (sqlite ? void app.repos.eventQueries.indexer.step('events', 700) : undefined)],
    ['events written', () => write(300, clock - DAY, (clock += DAY / 2))],
    ['a retention prune', prune],
    ['the index caught up', async () => indexEvents(app)],
    ['events written across the newest days', () => write(200, clock - 2 * DAY, (clock += DAY / 2))],
    ['another prune', prune],
    ['events written', () => write(250, clock - 3 * DAY, clock)],
  ]
  const stretch = Math.ceil(QUESTIONS / (changes.length + 1))
  let asked = 0
  let mismatches = 0
  const recent: Question[] = []
  const check = async (x: Question, label: string) => {
    const want = sortEvents(expectedEvents(rows, x.q), x.sortBy)
    const got = await ask(app, token, x)
    // date_asc with a lower bound is the SOAR incident fetch: the feed's page (the oldest
    // matching events by id), newest first (tests/events-incident-fetch.test.ts).
    const incident = x.sortBy === 'date_asc' && ['FromEventId', 'FromDate', 'FromCreationTimeEpoch'].some((k) => k in x.q)
    const ordered = incident ? expectedEvents(rows, x.q) : want
    const page = ordered.slice((x.page - 1) * x.size, x.page * x.size).map((e) => e.id)
    if (incident) page.reverse()
    const ids = got.data.map((e) => e.eventID)
    asked++
    if (got.recordsTotal !== rows.length || got.recordsFiltered !== want.length || JSON.stringify(ids) !== JSON.stringify(page)) {
      mismatches++
      if (mismatches <= 20) t.fail(`${label}: ${JSON.stringify(x)}: got ${got.recordsTotal}/${got.recordsFiltered} [${ids.slice(0, 8)}], want ${rows.length}/${want.length} [${page.slice(0, 8)}]`)
    }
  }
  for (let stage = 0; stage <= changes.length; stage++) {
    const label = stage === 0 ? 'seeded, nothing indexed' : `after ${changes[stage - 1][0]}`
    if (stage > 0) {
      await changes[stage - 1][1]()
      rows = await table()
      next = questions(rows, r)
      // Each question of the last stretch asked again after the change.
      for (const x of recent) await check(x, `${label} (asked again)`)
      recent.length = 0
    }
    for (let i = 0; i < stretch && asked < QUESTIONS + 7 * 40; i++) {
      const x = next()
      await check(x, label)
      if (recent.length < 40) recent.push(x)
    }
  }
  t.ok(written > 3_000 && rows.length < written, `${written} events written, ${rows.length} left after the prunes`)
  t.ok(asked >= QUESTIONS, `${asked} questions asked`)
  t.equal(mismatches, 0, `${asked} answers as the model (ids, order, recordsTotal, recordsFiltered)`)
})
