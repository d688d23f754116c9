// Events and audit records on PostgreSQL answer as SQLite's do: the same records written
// through both recorders, then hundreds of random list questions (every filter alone and
// combined, every sort both ways, pages deep and shallow, the feeds from random ids, the
// streamed pages and exports) compared for rows, order and counts. Then what only
// PostgreSQL has: concurrent writers while a reader follows the feed, and day partitions.
import t from 'tap'
import { auditRepo } from '../db/audit.js'
import type { AuditRecord } from '../lib/platform/ports.js'
import { eventQueriesRepo } from '../db/event-engine/event-queries.js'
import { eventsRepo } from '../db/events.js'
import { auditCategories, type EventBatch, type EventInput } from '../lib/events/ports.js'
import { openDatabase } from '../db/index.js'
import { pgAuditRepo } from '../db/postgres/audit.js'
import { pgRecordStores } from '../db/postgres/events-query.js'
import { pgRecordRetention } from '../db/postgres/events-retention.js'
import { pgEventsRepo, recordPartitions } from '../db/postgres/events-write.js'
import { auditFilter, eventFilter } from '../lib/events/filter.js'
import { eventMaker } from './fixtures/events.js'
import { fastCommits, rand } from './fixtures/pg-records.js'
import { noPostgres } from './pg.js'

/** Counts compared with the model's: exact whatever the machine's load (the budget's estimates: tests/events-count-estimate.test.ts). */
const EXACT = { countBudgetMs: 600_000 }

const DAY = 86_400_000
const T0 = Date.UTC(2026, 0, 1)
const SEVERITIES = ['Emergency', 'Alert', 'Critical', 'Error', 'Warning', 'Notice', 'Informational', 'Debug', 'info', 'warn', '3']

const EVENT_SORTS = [
  'eventID',
  'date',
  'creationTime',
  'creationTimeEpoch',
  'eventCode',
  'severity',
  'severityString',
  'category',
  'eventEntityID',
  'description',
  'details',
  'hashtags',
  'peripheralIcon',
  'assetKey',
  'assetName',
  'peripheralAssetId',
]
const AUDIT_SORTS = [
  'auditTrailID',
  'date',
  'creationTime',
  'severity',
  'severityString',
  'category',
  'user',
  'sourceIp',
  'description',
  'details',
  'operationId',
  'outcome',
  'assetReference.key',
  'assetReference.name',
  'assetReference.ipAddress',
  'assetReference.type',
]

/** Texts beyond the fixture's: non-ASCII in several cases, LIKE's wildcards, nulls. */
const extraTexts = ['Überprüfung des Geräts', 'ÉCOLE straße', 'café CAFÉ', 'Zürich', 'κόσμε ΚΌΣΜΕ', '50%_off \\path', 'plain text']

function seedEvents(r: () => number): EventBatch[] {
  const make = eventMaker(7)
  const batches: EventBatch[] = []
  let n = 0
  let at = T0
  while (n < 3000) {
    const size = 1 + Math.floor(r() * 6)
    const events: EventInput[] = Array.from({ length: size }, () => {
      const e = make()
      const x = r()
      if (x < 0.08) return { ...e, assetKey: null, assetName: null }
      if (x < 0.16) return { ...e, details: `${extraTexts[Math.floor(r() * extraTexts.length)]} ${e.details}`, hashtags: r() < 0.5 ? '#Überwacht #café' : e.hashtags }
      if (x < 0.2) return { ...e, description: extraTexts[Math.floor(r() * extraTexts.length)], entityId: `Gerät-${Math.floor(r() * 5)} (10.1.0.1)` }
      return e
    })
    // Mostly forward in time, sometimes a batch from the past (a late check-in).
    at += Math.floor(r() * 40 * 60_000)
    const createdMs = r() < 0.05 ? at - Math.floor(r() * 3 * DAY) : at
    batches.push({ createdMs, events })
    n += size
  }
  return batches
}

function seedAudit(r: () => number): AuditRecord[] {
  const users = ['admin', 'Alice', 'bob.smith', 'Jürgen', null]
  const ips = ['10.0.0.1', '192.168.1.20', '::1', null]
  const ops = ['PostLogin', 'DeleteUser', 'GetEvents', 'ArmAgent', null]
  const out: AuditRecord[] = []
  let at = T0
  for (let i = 0; i < 1200; i++) {
    at += Math.floor(r() * 12 * 60_000)
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]
    const hasAsset = r() < 0.6
    out.push({
      createdMs: r() < 0.04 ? at - Math.floor(r() * 2 * DAY) : at,
      severity: Math.floor(r() * 8),
      category: pick(auditCategories),
      user: pick(users),
      sourceIp: pick(ips),
      description: pick(['User logged in', 'Login FAILED', 'Agent armed', 'Report created', 'Überprüfung', 'café ouvert']),
      details: `${pick(['Request', 'request', 'Änderung', '100% done', 'a_b'])} ${i} by ${pick(['console', 'API', 'Prime'])}`,
      operationId: pick(ops),
      outcome: pick(['Succeeded', 'Failed', 'Refused'] as const),
      asset: hasAsset
        ? {
            key: pick(['a1b2-c3', 'A1B2-FF', 'zz-9', null]),
            name: pick(['Host-One', 'host-two', 'Gerät-3', null]),
            parentId: pick(['p-1', 'P-2', null]),
            ipAddress: pick(['10.0.0.7', '10.0.0.70', null]),
            type: pick(['Agent', 'User', 'Unknown']),
            subType: pick(['None', 'Laptop', 'Desktop']),
            detail: pick(['Unknown', 'Windows', 'Linux']),
            icon: pick([-1, 1, 2, 14]),
          }
        : undefined,
      requestId: r() < 0.5 ? `req-${i}` : null,
    })
  }
  return out
}

/** A random "contains" term: part of a stored value in another case, or a term of its own. */
function termOf(r: () => number, values: (string | null)[]): string {
  const x = r()
  if (x < 0.15) return ['ü', 'Ü', 'zürich', 'ZÜRICH', 'CAFÉ', 'straße', 'ΚΌΣΜΕ', 'é', 'É', '%', '_', '\\', '100%', 'a_b', 'VID_0', 'qqqxyz', 'e'][Math.floor(r() * 17)]
  const v = values.filter((s): s is string => !!s)[Math.floor(r() * values.length)] ?? 'x'
  const len = 1 + Math.floor(r() * 8)
  const from = Math.floor(r() * Math.max(1, v.length - len))
  const s = v.slice(from, from + len) || v
  return r() < 0.5 ? s.toUpperCase() : r() < 0.5 ? s.toLowerCase() : s
}

const iso = (ms: number) => new Date(ms).toISOString()

function boundsOf(r: () => number, top: number, times: number[], names: { idFrom: string; idTo: string; epoch: boolean }): Record<string, string> {
  const q: Record<string, string> = {}
  const time = () => times[Math.floor(r() * times.length)]
  const x = r()
  if (x < 0.15) q[names.idFrom] = String(1 + Math.floor(r() * top))
  else if (x < 0.25) q[names.idTo] = String(Math.floor(r() * top))
  else if (x < 0.3) {
    const a = Math.floor(r() * top)
    q[names.idFrom] = String(a)
    q[names.idTo] = String(a + Math.floor(r() * 300))
  }
  const y = r()
  if (y < 0.1) q.Date = iso(time()).slice(0, 10)
  else if (y < 0.2) q.FromDate = iso(time())
  else if (y < 0.28) q.ToDate = iso(time()).slice(0, 10)
  else if (y < 0.36 && names.epoch) {
    const a = time()
    q.FromCreationTimeEpoch = String(a)
    q.ToCreationTimeEpoch = String(a + Math.floor(r() * 2 * DAY))
  }
  const z = r()
  if (z < 0.1) q.Severity = SEVERITIES[Math.floor(r() * SEVERITIES.length)]
  else if (z < 0.2) q.MinimumSeverity = SEVERITIES[Math.floor(r() * SEVERITIES.length)]
  return q
}

/** A page's size and offset: mostly shallow, some deep, some past the end. */
function pageOf(r: () => number): { limit: number; offset: number } {
  const x = r()
  const limit = [1, 5, 10, 25, 50, 200][Math.floor(r() * 6)]
  const offset = x < 0.5 ? 0 : x < 0.8 ? Math.floor(r() * 100) : x < 0.95 ? Math.floor(r() * 3000) : 5000
  return { limit, offset }
}

async function collect(it: AsyncIterable<unknown[]>): Promise<unknown[]> {
  const out: unknown[] = []
  for await (const chunk of it) out.push(...chunk)
  return out
}

t.test('events and audit records: PostgreSQL answers every list question as SQLite does', { skip: noPostgres }, async (t) => {
  const pg = await fastCommits(t)
  const sdb = openDatabase(':memory:')
  t.teardown(() => sdb.close())
  const sEvents = eventsRepo(sdb)
  const sQueries = eventQueriesRepo(sdb)
  const sAudit = auditRepo(sdb)
  const partitions = recordPartitions(pg)
  const pEvents = pgEventsRepo(pg, {}, partitions)
  const pAudit = pgAuditRepo(pg, partitions)
  const pStores = pgRecordStores(pg, EXACT)

  const started = Date.now()
  const r = rand(42)
  const batches = seedEvents(r)
  // Through both recorders, a few callers' batches a call (as the gateway groups check-ins).
  for (let i = 0; i < batches.length; ) {
    const n = 1 + Math.floor(r() * 8)
    const part = batches.slice(i, i + n)
    i += n
    const sIds = sEvents.recordMany(part)
    const pIds = await pEvents.recordMany(part)
    if (JSON.stringify(sIds) !== JSON.stringify(pIds)) t.fail(`ids differ: ${JSON.stringify(sIds)} / ${JSON.stringify(pIds)}`)
  }
  t.comment(`events seeded ${Date.now() - started} ms`)
  const audits = seedAudit(r)
  for (const a of audits) {
    const s = sAudit.insert(a)
    const p = await pAudit.insert(a)
    if (s !== p) t.fail(`audit ids differ: ${s} / ${p}`)
  }
  t.comment(`audit seeded ${Date.now() - started} ms`)
  // Half the SQLite index is caught up: its pages read both the counted blocks and the rows above the mark.
  sQueries.holdIndexing(true)
  sQueries.indexer.step('events', 1500)
  sQueries.indexer.step('audit_trail', 600)
  t.equal(await pStores.events.lastId(), sQueries.events.lastId(), 'the same newest event')
  t.equal(await pStores.audit.lastId(), sQueries.audit.lastId(), 'the same newest audit record')
  t.ok(Number(await pg.value(`SELECT count(DISTINCT tableoid) FROM events`)) >= 10, 'events spread over day partitions')
  t.equal(await pg.value('SELECT count(*) FROM events_default'), 0, 'none in the default partition')

  const eventRows = sdb.prepare('SELECT * FROM events').all() as Record<string, string | null>[]
  const auditRows = sdb.prepare('SELECT * FROM audit_trail').all() as Record<string, string | null>[]
  const eventTimes = eventRows.map((e) => Number(e.created_ms))
  const auditTimes = auditRows.map((e) => Number(e.created_ms))
  const eventTop = eventRows.length
  const auditTop = auditRows.length
  const column = (rows: Record<string, string | null>[], c: string) => rows.map((x) => x[c])

  const eventTerms: [string, string][] = [
    ['Source', 'entity_id'],
    ['Description', 'description'],
    ['Details', 'details'],
    ['AssetKey', 'asset_key'],
    ['AssetName', 'asset_name'],
    ['PeripheralAssetId', 'peripheral_asset_id'],
    ['GlobalSearch', 'details'],
    ['GlobalSearch', 'entity_id'],
    ['GlobalSearch', 'event_code'],
  ]
  const eventQuery = (): Record<string, string> => {
    const q = boundsOf(r, eventTop, eventTimes, { idFrom: 'FromEventId', idTo: 'ToEventId', epoch: true })
    const filters = Math.floor(r() * 3)
    for (let i = 0; i < filters; i++) {
      const x = r()
      if (x < 0.15) q.Category = ['USB', 'Host,Network', 'system', 'General,USB,Host'][Math.floor(r() * 4)]
      else if (x < 0.25) q.PeripheralIcon = ['-1', '2', '3,4', '1,14,-1'][Math.floor(r() * 4)]
      else if (x < 0.35) q.GlobalSearch = ['usb', 'Alert', 'warn', 'host', 'ERROR', 'debug', 'Network'][Math.floor(r() * 7)]
      else {
        const [name, col] = eventTerms[Math.floor(r() * eventTerms.length)]
        q[name] = termOf(r, column(eventRows, col))
      }
    }
    return q
  }
  const auditTerms: [string, string][] = [
    ['User', 'user_name'],
    ['Description', 'description'],
    ['Details', 'details'],
    ['Asset', 'asset_name'],
    ['AssetReference.Key', 'asset_key'],
    ['AssetReference.Name', 'asset_name'],
    ['AssetReference.ParentID', 'asset_parent_id'],
    ['AssetReference.IpAddress', 'asset_ip'],
    ['GlobalSearch', 'source_ip'],
    ['GlobalSearch', 'operation_id'],
    ['GlobalSearch', 'category'],
  ]
  const auditQuery = (): Record<string, string> => {
    const q = boundsOf(r, auditTop, auditTimes, { idFrom: 'FromAuditTrailId', idTo: 'ToAuditTrailId', epoch: false })
    const filters = Math.floor(r() * 3)
    for (let i = 0; i < filters; i++) {
      const x = r()
      if (x < 0.12) q.Category = ['Users', 'Agents,Reports', 'authentication,System'][Math.floor(r() * 3)]
      else if (x < 0.18) q['AssetReference.Type'] = ['Agent', 'User', 'Unknown'][Math.floor(r() * 3)]
      else if (x < 0.22) q['AssetReference.SubType'] = ['None', 'Laptop'][Math.floor(r() * 2)]
      else if (x < 0.26) q['AssetReference.AllAssetTypeDetail'] = ['Windows', 'Unknown'][Math.floor(r() * 2)]
      else if (x < 0.3) q['AssetReference.Icon'] = ['-1', '14', '2'][Math.floor(r() * 3)]
      else {
        const [name, col] = auditTerms[Math.floor(r() * auditTerms.length)]
        q[name] = termOf(r, column(auditRows, col))
      }
    }
    return q
  }

  const kinds = [
    { name: 'events', s: sQueries.events, p: pStores.events, query: eventQuery, filter: eventFilter, sorts: EVENT_SORTS, idSort: 'eventID' },
    { name: 'audit', s: sQueries.audit, p: pStores.audit, query: auditQuery, filter: auditFilter, sorts: AUDIT_SORTS, idSort: 'auditTrailID' },
  ] as const

  let asked = 0
  let nonEmpty = 0
  for (const k of kinds) {
    const s = k.s as unknown as Record<string, (...a: unknown[]) => any>
    const p = k.p as unknown as Record<string, (...a: unknown[]) => Promise<any>>
    for (let i = 0; i < 220; i++) {
      const src = k.query()
      const f = k.filter(src)
      const sort = { field: k.sorts[Math.floor(r() * k.sorts.length)], direction: r() < 0.5 ? 'asc' : 'desc' } as const
      const { limit, offset } = pageOf(r)
      const what = `${k.name} ${JSON.stringify(src)} ${sort.field} ${sort.direction} ${limit}@${offset}`
      const x = r()
      let sa: unknown
      let pa: unknown
      if (x < 0.45) {
        sa = s.pageRows(f, sort, limit, offset)
        pa = await p.pageRows(f, sort, limit, offset)
      } else if (x < 0.6) {
        // The feed: the oldest matches after the offset, in the sort's order.
        sa = s.pageRows(f, sort, limit, offset, true)
        pa = await p.pageRows(f, sort, limit, offset, true)
      } else if (x < 0.68) {
        const sortMax = [0, 10, 1000][Math.floor(r() * 3)]
        sa = s.pageRows(f, sort, limit, offset, false, sortMax)
        pa = await p.pageRows(f, sort, limit, offset, false, sortMax)
      } else if (x < 0.78) {
        const idSort = { field: k.idSort, direction: sort.direction }
        sa = s.feedIds(f, idSort, limit, offset)
        pa = await p.feedIds(f, idSort, limit, offset)
      } else if (x < 0.84) {
        sa = s.count(f)
        pa = await p.count(f)
      } else if (x < 0.92) {
        const feed = r() < 0.4
        const sc = await s.pageChunks(f, sort, limit * 10, offset, feed)
        const pc = await p.pageChunks(f, sort, limit * 10, offset, feed)
        sa = { total: sc.total, filtered: sc.filtered, rows: await collect(sc.chunks) }
        pa = { total: pc.total, filtered: pc.filtered, rows: await collect(pc.chunks) }
      } else if (x < 0.96) {
        sa = await collect(await s.rawChunks(f, sort, limit * 20))
        pa = await collect(await p.rawChunks(f, sort, limit * 20))
      } else {
        const rows = async (it: AsyncIterable<unknown>) => {
          const out: unknown[] = []
          for await (const row of it) out.push(row)
          return out
        }
        sa = await rows(await s.iterate(f, sort, limit * 5))
        pa = await rows(await p.iterate(f, sort, limit * 5))
      }
      asked++
      if (JSON.stringify(sa) !== JSON.stringify(pa)) t.same(pa, sa, what)
      else if (JSON.stringify(sa).length > 80) nonEmpty++
    }
  }
  t.comment(`asked ${Date.now() - started} ms`)
  t.ok(asked >= 440, `${asked} questions asked`)
  t.ok(nonEmpty > asked / 2, `most answers hold records (${nonEmpty})`)

  await t.test('rows by ids, the newest id, the version', async (t) => {
    const ids = [3, 1, 999_999, 2000, 2]
    const sorted = (rows: unknown[][]) => [...rows].sort((a, b) => (a[0] as number) - (b[0] as number))
    t.same(sorted(await pStores.events.rowsByIds(ids)), sorted(sQueries.events.rowsByIds(ids)))
    t.same(sorted(await pStores.audit.rowsByIds(ids)), sorted(sQueries.audit.rowsByIds(ids)))
    t.same(await pStores.events.rowsByIds([]), [])
    const v = await pStores.events.version()
    t.equal(await pStores.events.version(), v, 'unchanged without a write')
    await pEvents.record(T0 + 20 * DAY, [{ code: '0x110001', severity: 6, category: 'USB', entityId: 'x', description: 'd', details: 'e' }])
    t.not(await pStores.events.version(), v, 'a record moves it')
    const a = await pStores.audit.version()
    await pgRecordRetention(pg).dropDay('audit_trail', T0)
    t.not(await pStores.audit.version(), a, 'a prune moves it')
    t.resolves(pStores.events.ready(eventFilter({ GlobalSearch: 'x' })))
  })
})

const event = (i: number): EventInput => ({ code: '0x110001', severity: 6, category: 'USB', entityId: `host-${i} (10.0.0.1)`, description: 'New USB peripheral detected', details: `device ${i}` })
/** A pause of a few ms (a writer holding its transaction open while others want ids). */
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

t.test('four writers with pauses inside their transactions: a reader following the feed sees every id once, in order', { skip: noPostgres }, async (t) => {
  const pg = await fastCommits(t, 8)
  const events = pgEventsRepo(pg)
  const audit = pgAuditRepo(pg)
  const stores = pgRecordStores(pg, EXACT)
  const r = rand(9)
  const committed = { events: [] as number[], audit: [] as number[] }
  let writing = true
  const writer = async (w: number) => {
    for (let i = 0; i < 40; i++) {
      const rollback = r() < 0.1
      try {
        await pg.uow.run(async () => {
          // A unit that starts with other work, then records, then holds on before it commits.
          await pause(Math.floor(r() * 3))
          const ids = await events.recordMany([{ createdMs: T0 + i * 60_000, events: Array.from({ length: 1 + Math.floor(r() * 4) }, (_, j) => event(w * 1000 + i * 10 + j)) }])
          const a = await audit.insert({
            createdMs: T0 + i * 60_000,
            severity: 6,
            category: 'Agents',
            user: null,
            sourceIp: null,
            description: `w${w}`,
            details: `${i}`,
            operationId: null,
            outcome: 'Succeeded',
          })
          await pause(Math.floor(r() * 4))
          if (rollback) throw new Error('rolled back')
          pg.uow.afterCommit(() => {
            committed.events.push(...ids[0])
            committed.audit.push(a)
          })
        })
      } catch (err) {
        if (!rollback) throw err
      }
    }
  }
  const follow = async (store: typeof stores.events | typeof stores.audit, from: string, idSort: string) => {
    const seen: number[] = []
    let after = 0
    for (;;) {
      const done = !writing
      const page = await store.feedIds((from === 'FromEventId' ? eventFilter : auditFilter)({ [from]: String(after + 1) }) as never, { field: idSort, direction: 'asc' }, 7, 0)
      for (const id of page.rows) {
        if (id <= after) t.fail(`id ${id} after ${after}`)
        seen.push(id)
        after = id
      }
      if (done && page.rows.length === 0) return seen
      if (page.rows.length === 0) await pause(1)
    }
  }
  const readers = Promise.all([follow(stores.events, 'FromEventId', 'eventID'), follow(stores.audit, 'FromAuditTrailId', 'auditTrailID')])
  await Promise.all([0, 1, 2, 3].map(writer))
  writing = false
  const [seenEvents, seenAudit] = await readers
  const sorted = (xs: number[]) => [...xs].sort((a, b) => a - b)
  t.same(seenEvents, sorted(committed.events), 'every committed event once, in id order')
  t.same(seenAudit, sorted(committed.audit), 'every committed audit record once, in id order')
  t.ok(committed.events.length > 200, `${committed.events.length} events committed`)
})

t.test('day partitions: made as records come, records of a day without one moved into it, whole days dropped by retention', { skip: noPostgres }, async (t) => {
  const pg = await fastCommits(t)
  const partitions = recordPartitions(pg)
  const events = pgEventsRepo(pg, {}, partitions)
  const audit = pgAuditRepo(pg, partitions)
  const retention = pgRecordRetention(pg, partitions)
  const stores = pgRecordStores(pg, EXACT)
  const day = (d: number, h = 0) => T0 + d * DAY + h * 3_600_000
  for (let d = 0; d < 5; d++) {
    await events.recordMany([0, 6, 23].map((h) => ({ createdMs: day(d, h), events: [event(d * 100 + h)] })))
    await audit.insert({ createdMs: day(d, 12), severity: 6, category: 'Users', user: 'admin', sourceIp: null, description: `day ${d}`, details: '', operationId: null, outcome: 'Succeeded' })
  }
  const partsOf = async (table: string) =>
    (
      await pg.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass AND c.relname LIKE '%_p202601%' ORDER BY 1`,
        [table],
      )
    ).map((x) => x.name)
  t.same(await partsOf('events'), ['events_p20260101', 'events_p20260102', 'events_p20260103', 'events_p20260104', 'events_p20260105'])

  // A record written straight into the parent for a day without a partition lands in the
  // default partition; making the day moves it out (an audit record too: it is not deleted).
  await pg.run(`INSERT INTO audit_trail (created_ms, severity, category, description, details, outcome) VALUES ($1, 6, 'Users', 'late', '', 'Succeeded')`, [day(9, 1)])
  t.equal(await pg.value('SELECT count(*) FROM audit_trail_default'), 1)
  t.equal(await pg.value(`SELECT ensure_partitions('audit_trail', $1, $1)`, [day(9, 1)]), 1)
  t.equal(await pg.value('SELECT count(*) FROM audit_trail_default'), 0, 'moved out of the default partition')
  t.equal(await pg.value('SELECT count(*) FROM audit_trail_p20260110'), 1)
  t.equal(await pg.value(`SELECT ensure_partitions('audit_trail', $1, $1)`, [day(9, 1)]), 0, 'a day made once')

  // Concurrent callers make each day once.
  const made = await Promise.all([1, 2, 3, 4].map(() => pg.value<number>(`SELECT ensure_partitions('events', $1, $2)`, [day(20), day(22)])))
  t.equal(
    made.reduce((a, b) => a + (b ?? 0), 0),
    3,
  )

  t.same(
    (await retention.wholeDays('events', day(2, 5))).map((p) => p.name),
    ['events_p20260101', 'events_p20260102'],
    'the days wholly before the cutoff',
  )
  const firstOfDay1 = (await pg.value<number>('SELECT min(id) FROM events WHERE created_ms >= $1', [day(1)]))!
  t.equal(await retention.dropDay('events', day(1), firstOfDay1 - 1), null, 'a day holding an id a destination waits for is kept')
  t.equal(await retention.dropDay('events', day(0)), 3, 'a whole day dropped')
  t.equal(await retention.dropDay('events', day(0)), 0, 'twice: nothing')
  t.equal(await stores.events.count(eventFilter({})), 12)
  t.equal(await retention.dropDay('audit_trail', day(0)), 1, 'audit records go by their partition too')
  t.equal(await stores.audit.count(auditFilter({})), 5)

  // The part of a day past the cutoff goes row by row.
  const due = await retention.due('events', day(1, 7), [Number.MIN_SAFE_INTEGER, 0], Number.MAX_SAFE_INTEGER, 10)
  t.same(
    due.map((r) => r.created_ms),
    [day(1, 0), day(1, 6)],
  )
  const pruned = await pg.uow.run(() =>
    retention.prune(
      'events',
      due.map((r) => r.id),
    ),
  )
  t.equal(pruned.deleted, 2)
  const dueAudit = await retention.due('audit_trail', day(1, 13), [Number.MIN_SAFE_INTEGER, 0], Number.MAX_SAFE_INTEGER, 10)
  t.equal(dueAudit.length, 1)
  await t.rejects(retention.prune('audit_trail', [dueAudit[0].id]), /immutable/, 'an audit record goes only through the gate')
  const deleted = await pg.uow.run(async () => {
    await retention.openGate(day(1, 13))
    const r = await retention.prune('audit_trail', [dueAudit[0].id])
    await retention.closeGate()
    return r.deleted
  })
  t.equal(deleted, 1, 'through the gate')
  t.equal(await retention.indexed('events'), Number.MAX_SAFE_INTEGER)

  // A record of a dropped day arriving late is made a partition again (this process forgot the day).
  await events.record(day(0, 3), [event(1)])
  t.equal(await pg.value('SELECT count(*) FROM events_p20260101'), 1)

  // The kept totals followed every insert, move, drop and delete.
  for (const table of ['events', 'audit_trail']) {
    t.equal(await pg.value('SELECT n FROM record_counts WHERE name = $1', [table]), await pg.value(`SELECT count(*) FROM ${table}`), `${table}: the kept total is the count`)
    // The newest id written, kept beside it, is what max(id) visits every partition for; it
    // never goes down, as ids are not given again.
    t.equal(await pg.value('SELECT top FROM record_counts WHERE name = $1', [table]), await pg.value(`SELECT last_value FROM ${table}_id_seq`), `${table}: the kept top is the newest id given`)
  }
  t.equal(await stores.events.lastId(), await pg.value('SELECT max(id) FROM events'), "the feed's horizon is the newest event")
  t.equal((await stores.events.pageRows(eventFilter({}), { field: 'eventID', direction: 'desc' }, 1, 0)).total, 11)

  // Every record lies in its day's span of ids (migration 016), which reads by id are bounded to.
  for (const table of ['events', 'audit_trail']) {
    const outside = await pg.value(
      `SELECT count(*) FROM ${table} e LEFT JOIN record_days d ON d.name = $1 AND d.day_ms = floor(e.created_ms / 86400000.0)::bigint * 86400000
       WHERE d.low IS NULL OR e.id NOT BETWEEN d.low AND d.high`,
      [table],
    )
    t.equal(outside, 0, `${table}: every record within its day's span`)
    t.same(
      await pg.query(`SELECT day_ms, n FROM record_days WHERE name = $1 AND n > 0 ORDER BY 1`, [table]),
      await pg.query(`SELECT floor(created_ms / 86400000.0)::bigint * 86400000 AS day_ms, count(*) AS n FROM ${table} GROUP BY 1 ORDER BY 1`),
      `${table}: each day's count is its records, after the deletes`,
    )
  }
  t.same(
    await pg.query(`SELECT low, high, n FROM record_days WHERE name = 'events' AND day_ms = $1`, [day(0)]),
    [{ low: await stores.events.lastId(), high: await stores.events.lastId(), n: 1 }],
    "a dropped day's span went with it: the late record's is new",
  )
  await pg.run('TRUNCATE events')
  t.equal(await pg.value(`SELECT count(*) FROM record_days WHERE name = 'events'`), 0, 'TRUNCATE empties the spans')
})

t.test('feeds over day partitions: records written late into old days are read in id order, the fewest days read first', { skip: noPostgres }, async (t) => {
  const pg = await fastCommits(t)
  const events = pgEventsRepo(pg, {}, recordPartitions(pg))
  const audit = pgAuditRepo(pg, recordPartitions(pg))
  const stores = pgRecordStores(pg, EXACT)
  const r = rand(16)
  // Thirty days written in order, a record in four written later into a day of the past
  // (an id of today in an old partition), some categories rare, so that a filtered feed
  // needs more days than the spans' counts promise.
  const categories = ['USB', 'USB', 'USB', 'Network', 'System'] as const
  for (let d = 0; d < 30; d++) {
    for (let i = 0; i < 8; i++) {
      const late = r() < 0.25 && d > 0
      const createdMs = T0 + (late ? Math.floor(r() * d) : d) * DAY + i * 3_600_000
      await events.record(createdMs, [{ ...event(d * 10 + i), category: categories[Math.floor(r() * categories.length)] }])
      if (i % 4 === 0) await audit.insert({ createdMs, severity: 6, category: 'Users', user: 'admin', sourceIp: null, description: `d${d}`, details: '', operationId: null, outcome: 'Succeeded' })
    }
  }
  const ids = async (table: string, where: string, limit: number, offset: number) =>
    (await pg.query<{ id: number }>(`SELECT id FROM ${table} WHERE ${where} ORDER BY id LIMIT ${limit} OFFSET ${offset}`)).map((x) => x.id)
  const top = (await stores.events.lastId()) + 2
  let asked = 0
  for (let from = 1; from <= top; from += 1 + Math.floor(r() * 3)) {
    for (const { limit, offset } of [
      { limit: 1, offset: 0 },
      { limit: 5, offset: 0 },
      { limit: 8, offset: 3 },
      { limit: 40, offset: 0 },
    ]) {
      const rare = r() < 0.3
      const f = eventFilter(rare ? { FromEventId: String(from), Category: 'Network' } : { FromEventId: String(from) })
      const where = `id >= ${from}${rare ? " AND category = 'Network'" : ''}`
      const want = await ids('events', where, limit, offset)
      const page = await stores.events.pageRows(f, { field: 'eventID', direction: 'asc' }, limit, offset, true)
      const feed = await stores.events.feedIds(f, { field: 'eventID', direction: 'asc' }, limit, offset)
      if (
        !tSame(
          page.rows.map((x) => x[0]),
          want,
        ) ||
        !tSame(feed.rows, want)
      ) {
        t.fail(`feed from ${from}${rare ? ' (Network)' : ''}, ${limit} after ${offset}: ${JSON.stringify(feed.rows)}, expected ${JSON.stringify(want)}`)
        return
      }
      const matches = await pg.value<number>(`SELECT count(*) FROM events WHERE ${where}`)
      if (page.filtered !== matches || feed.filtered !== matches) t.fail(`feed from ${from}: counted ${page.filtered}, ${feed.filtered}, expected ${matches}`)
      asked++
    }
    const auditWant = await ids('audit_trail', `id >= ${from}`, 5, 0)
    const auditPage = await stores.audit.pageRows(auditFilter({ FromAuditTrailId: String(from) }), { field: 'auditTrailID', direction: 'asc' }, 5, 0, true)
    if (
      !tSame(
        auditPage.rows.map((x) => x[0]),
        auditWant,
      )
    )
      t.fail(`audit feed from ${from}: ${JSON.stringify(auditPage.rows.map((x) => x[0]))}, expected ${JSON.stringify(auditWant)}`)
  }
  t.ok(asked > 150, `${asked} feed pages as plain SQL reads them`)
  const some = (await ids('events', 'true', 1000, 0)).filter(() => r() < 0.2)
  t.same(
    (await stores.events.rowsByIds(some)).map((x) => x[0]).sort((a, b) => (a as number) - (b as number)),
    some,
    'records by id, each from its day',
  )
  t.same(await stores.events.rowsByIds([top + 5]), [], 'an id not written: none')
})

const tSame = (a: unknown[], b: unknown[]) => a.length === b.length && a.every((x, i) => x === b[i])

t.test("the recorder's hooks run in its unit of work: the risk notifications' and the agents' latest texts", { skip: noPostgres }, async (t) => {
  const pg = await fastCommits(t)
  const calls: { ids: number[]; rows: number; inUnit: boolean; visible: number }[] = []
  const texts: [number, string[]][][] = []
  let fail = false
  const events = pgEventsRepo(pg, {
    async recorded(ids, rows) {
      calls.push({ ids, rows: rows.length, inUnit: pg.uow.inUnit(), visible: Number(await pg.value('SELECT count(*) FROM events WHERE id = ANY($1::bigint[])', [ids])) })
      if (fail) throw new Error('the hook failed')
    },
    async agentTexts(m) {
      texts.push([...m])
    },
  })
  const e = (d: string): EventInput => ({ ...event(0), description: d })
  const ids = await events.recordMany([
    { createdMs: T0, events: [e('a1'), e('a2')], agentId: 1 },
    { createdMs: T0 + 1, events: [e('b1')] },
    { createdMs: T0 + 2, events: [e('a3'), e('a4'), e('a5'), e('a6')], agentId: 1 },
    { createdMs: T0 + 3, events: [], agentId: 2 },
    { createdMs: T0 + 4, events: [e('c1')], agentId: 3 },
  ])
  t.same(ids, [[1, 2], [3], [4, 5, 6, 7], [], [8]])
  t.same(calls, [{ ids: [1, 2, 3, 4, 5, 6, 7, 8], rows: 8, inUnit: true, visible: 8 }], 'after the insert, in its unit')
  t.same(
    texts,
    [
      [
        [1, ['a4', 'a5', 'a6']],
        [3, ['c1']],
      ],
    ],
    "each agent's last three texts, oldest first",
  )
  t.same(await events.recordMany([{ createdMs: T0, events: [] }]), [[]], 'nothing to write: no unit, no hook')
  t.equal(calls.length, 1)
  fail = true
  await t.rejects(events.record(T0, [e('x')]), /the hook failed/)
  t.equal(await pg.value('SELECT count(*) FROM events'), 8, 'a failing hook undoes the events')
  await t.rejects(events.record(T0, [{ ...e('x'), severity: 9 }]), /severity 9 is not 0-7/, 'checked before anything is written')
})
