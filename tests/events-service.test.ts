// The event service and the retention job without Fastify: a test app's ports (SQLite's
// with its index held, or PostgreSQL's), plain contexts. Lists and feeds answer what the
// rows hold, exports are audited in the caller's name and hold the records of the moment
// they started, and the retention job's prune is one unit of work that rolls back whole.
// What answers are kept from SQLite's event index (kept texts, a feed page's known ids) is
// tested over an in-memory SQLite database with its repositories.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import zlib from 'node:zlib'
import t from 'tap'
import { auditRepo } from '../db/audit.js'
import { eventQueriesRepo } from '../db/event-engine/event-queries.js'
import { eventsRepo } from '../db/events.js'
import type { EventInput } from '../lib/events/ports.js'
import { openDatabase } from '../db/index.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { auditTrail, type AuditEntry } from '../lib/audit.js'
import { loadConfig } from '../lib/config.js'
import { exportLimits } from '../lib/events/exports.js'
import { auditFilter, eventFilter } from '../lib/events/filter.js'
import { eventService } from '../lib/events/service.js'
import { eventsAnswer } from '../lib/events/views.js'
import { type AnswerParts, streamedPages, type Sort } from '../lib/listing.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import type { AuditTrail } from '../lib/platform/ports.js'
import { runRetention, type RetentionDeps } from '../lib/retention/job.js'
import { auditDeps } from '../lib/audit.js'
import { build, sqliteOnly, testBackend } from './helpers.js'
import { holdIndexing, indexEvents, portsOf, query, queryValue, recordEvents } from './seed.js'

const DAY = 86_400_000
const T0 = Date.UTC(2026, 0, 1)
const columns = { events: ['eventID', 'severity', 'eventEntityID'], audit: ['auditTrailID', 'user', 'description'] }

const event = (i: number): EventInput => ({
  code: '0x110001',
  severity: i % 3 === 0 ? 2 : 6,
  category: 'USB',
  entityId: i % 2 === 0 ? `HOST-EVEN-${i} (10.0.0.${i})` : `host-odd-${i} (10.0.1.${i})`,
  description: 'New USB peripheral detected',
  details: `device ${i}`,
})

/** The service over a test app's ports (either backend), SQLite's event index held. */
async function appSetup(t: Parameters<typeof build>[0], over: { audit?: AuditTrail; sortRowsMax?: number } = {}) {
  const app = await build(t)
  const ports = portsOf(app)
  holdIndexing(app, true)
  const audit = over.audit ?? auditTrail(auditDeps(app))
  const service = eventService({
    events: ports.eventRecords,
    auditRecords: ports.auditRecords,
    audit,
    csvColumns: columns,
    now: () => T0 + 100 * DAY,
    sortRowsMax: over.sortRowsMax,
  })
  /** Writes n events, a minute apart from `from`. */
  const write = async (n: number, from = T0) => {
    for (let i = 1; i <= n; i++) await recordEvents(app, from + i * 60_000, [event(i)])
  }
  // The app's own records (its start) are not the service's.
  const auditFrom = await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')
  const auditRows = () => query<Record<string, string>>(app, 'SELECT user_name, source_ip, request_id, operation_id, description, details FROM audit_trail WHERE id > ? ORDER BY id', auditFrom)
  return { app, ports, service, write, auditRows }
}

/** The service over SQLite's repositories on an in-memory database, its index held: what SQLite's index keeps. */
function setup(over: { audit?: AuditTrail; sortRowsMax?: number } = {}) {
  const db = openDatabase(':memory:')
  const uow = sqliteUnitOfWork(db)
  const queries = eventQueriesRepo(db)
  queries.holdIndexing(true)
  const events = eventsRepo(db)
  const audits = auditRepo(db)
  const audit = over.audit ?? auditTrail({ repo: audits, refusalWindowMs: 60_000, flushRefusal: () => {} }, uow)
  const service = eventService({
    events: asyncPort(queries.events, uow),
    auditRecords: asyncPort(queries.audit, uow),
    audit,
    csvColumns: columns,
    now: () => T0 + 100 * DAY,
    sortRowsMax: over.sortRowsMax,
  })
  /** The same service over another events port (one that counts its calls). */
  const serviceWith = (events: Parameters<typeof eventService>[0]['events'], keptAnswers?: number) =>
    eventService({ events, auditRecords: asyncPort(queries.audit, uow), audit, csvColumns: columns, keptAnswers })
  /** Writes n events, a minute apart from `from`. */
  const write = (n: number, from = T0) => {
    for (let i = 1; i <= n; i++) events.record(from + i * 60_000, [event(i)])
  }
  const auditRows = () => db.prepare('SELECT user_name, source_ip, request_id, operation_id, description, details FROM audit_trail ORDER BY id').all() as Record<string, string>[]
  return { db, uow, queries, audits, service, serviceWith, write, auditRows }
}

const ctx = (over: Partial<Context> = {}) =>
  systemContext({
    actor: 'alice',
    profile: 20,
    sourceAddress: '192.0.2.7',
    requestId: 'req-export',
    operation: { operationId: 'exportGetEvents', method: 'POST', path: '/events/export', auditCategory: 'Export', readOnly: true },
    ...over,
  })

const page = (pageSize: number, pageNumber = 1) => ({ pageNumber, pageSize, offset: (pageNumber - 1) * pageSize })
const byId = (direction: 'asc' | 'desc'): Sort => ({ field: 'eventID', direction })

async function text(stream: NodeJS.ReadableStream): Promise<string> {
  let out = ''
  for await (const chunk of stream) out += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString()
  return out
}

t.test('a page of events counts every event and the matches, in the order asked (rows as arrays of EVENT_FIELDS)', async (t) => {
  const { service, write } = await appSetup(t)
  await write(30)
  const all = await service.events(eventFilter({}), byId('desc'), page(5))
  t.same([all.total, all.filtered], [30, 30])
  t.same(
    all.rows.map((r) => r[0]),
    [30, 29, 28, 27, 26],
  )
  const critical = await service.events(eventFilter({ Severity: 'Critical' }), byId('asc'), page(4, 2))
  t.same([critical.total, critical.filtered], [30, 10], 'every third event is Critical')
  t.same(
    critical.rows.map((r) => r[0]),
    [15, 18, 21, 24],
  )
  // A text filter on a fresh index: the service waits for the texts, then counts exactly.
  const odd = await service.events(eventFilter({ Source: 'HOST-ODD' }), byId('asc'), page(3))
  t.same([odd.filtered, odd.rows.map((r) => (r[5] as string).startsWith('host-odd'))], [15, [true, true, true]], 'contains is case-insensitive')
})

t.test("the feed's page is the oldest matches after the offset; the incident fetch gets it newest first", async (t) => {
  const { app, service, write } = await appSetup(t)
  await write(12)
  const feed = await service.eventFeed(eventFilter({}), byId('asc'), page(5, 2))
  t.same(
    feed.rows.map((r) => r[0]),
    [6, 7, 8, 9, 10],
  )
  const incident = await service.events(eventFilter({ FromEventId: 3 }), { field: 'date', direction: 'asc' }, page(4), true)
  t.same(
    incident.rows.map((r) => r[0]),
    [6, 5, 4, 3],
    'the feed page from the first match, newest first',
  )
  const listed = await service.events(eventFilter({ FromEventId: 3 }), { field: 'date', direction: 'asc' }, page(4), false)
  t.same(
    listed.rows.map((r) => r[0]),
    [3, 4, 5, 6],
  )
  const auditFeed = await service.auditFeed(auditFilter({}), page(10))
  const own = await queryValue<number>(app, 'SELECT count(*) FROM audit_trail')
  t.same([auditFeed.total, auditFeed.rows.length], [own, own], "no audit records yet but the app's own (its start)")
})

t.test('a list sorted by a free text sorts at most sortRowsMax matches: above, 400 naming SortBy; the feed, the incident fetch and exports sort any number', async (t) => {
  const { service, write } = await appSetup(t, { sortRowsMax: 10 })
  await write(30)
  const by = (field: string, direction: 'asc' | 'desc' = 'asc'): Sort => ({ field, direction })
  for (const field of ['eventEntityID', 'details', 'assetKey', 'assetName', 'peripheralAssetId']) {
    await t.rejects(
      service.events(eventFilter({}), by(field), page(5)),
      {
        code: 'validation',
        errors: [{ location: 'query', name: 'SortBy', reason: new RegExp(`^sorting by ${field} needs filters leaving at most 10 events \\(these leave 30\\): narrow with FromDate/ToDate`) }],
      },
      `${field}: 30 matches are refused`,
    )
  }
  await t.rejects(service.events(eventFilter({ Source: 'odd' }), by('details'), page(5)), { errors: [{ reason: /these leave 15/ }] }, 'counted with the filters')
  await t.rejects(service.events(eventFilter({}), by('details'), page(10_001)), { errors: [{ name: 'SortBy', reason: /these leave 30\)/ }] }, 'a streamed page too')
  // Narrowed to 10 matches (an id range, or a text filter with one), the sort is served.
  const narrowed = await service.events(eventFilter({ FromEventId: 21 }), by('eventEntityID'), page(5))
  t.same([narrowed.filtered, narrowed.rows.map((r) => r[0])], [10, [22, 24, 26, 28, 30]], 'HOST-EVEN-* before host-odd-*, ignoring case')
  const odd = await service.events(eventFilter({ Source: 'odd', FromEventId: 11 }), by('eventEntityID', 'desc'), page(3))
  t.same([odd.filtered, odd.rows.map((r) => r[0])], [10, [29, 27, 25]])
  // Kind and time orders keep no limit.
  t.equal((await service.events(eventFilter({}), by('severity'), page(5))).filtered, 30)
  t.equal((await service.events(eventFilter({}), by('creationTime'), page(5))).filtered, 30)
  // The feed sorts its page only; the incident fetch is newest first.
  const feed = await service.eventFeed(eventFilter({}), by('details', 'desc'), page(3))
  t.same(
    feed.rows.map((r) => r[0]),
    [3, 2, 1],
    'the oldest 3, by details',
  )
  t.same(
    (await service.events(eventFilter({ FromEventId: 1 }), by('date'), page(2), true)).rows.map((r) => r[0]),
    [2, 1],
  )
  const file = await service.exportEvents(ctx(), { filter: eventFilter({}, 'body'), order: by('details', 'desc'), format: 'csv', filters: [], exportedBy: 'alice' })
  t.equal(file.matched, 30, 'an export sorts every match')
  const lines = (await text(file.body)).trim().split('\n')
  t.equal(lines.length, 31)
  t.match(lines[1], /^9,/, "'device 9' sorts last as text: first, descending")
})

t.test('a page above the streaming threshold comes as chunks of rows as arrays', async (t) => {
  const { service, write } = await appSetup(t)
  await write(25)
  const saved = streamedPages.above
  t.teardown(() => {
    streamedPages.above = saved
  })
  streamedPages.above = 10
  const big = await service.events(eventFilter({}), byId('asc'), page(20, 1))
  t.ok(big.chunks, 'streamed')
  const ids: number[] = []
  for await (const rows of big.chunks!) for (const r of rows as unknown[][]) ids.push(r[0] as number)
  t.same([big.total, big.filtered, ids.length, ids[0], ids[19]], [25, 25, 20, 1, 20])
  const small = await service.events(eventFilter({}), byId('asc'), page(10, 1))
  t.notOk(small.chunks, 'built whole at the threshold')
})

t.test("an export is audited in the caller's name and holds the records of its start", async (t) => {
  const { app, service, write, auditRows } = await appSetup(t)
  await write(8)
  const file = await service.exportEvents(ctx(), { filter: eventFilter({ Severity: 'Critical' }, 'body'), order: byId('asc'), format: 'csv', filters: [['Severity', 'Critical']], exportedBy: 'alice' })
  // Written after the export started: not in the file.
  await recordEvents(app, T0 + DAY, [{ ...event(9), severity: 2 }])
  t.match(file, { matched: 2, truncated: false, type: 'text/csv; charset=utf-8', fileName: /^events-\d{8}T\d{6}Z\.csv$/ })
  const csv = await text(file.body)
  t.same(csv.split('\r\n'), ['\ufeffeventID,severity,eventEntityID', '3,2,host-odd-3 (10.0.1.3)', '6,2,HOST-EVEN-6 (10.0.0.6)', ''])
  const [record] = await auditRows()
  t.match(record, { user_name: 'alice', source_ip: '192.0.2.7', request_id: 'req-export', operation_id: 'exportGetEvents', description: `Exported 2 events as CSV (${file.fileName})` })
  t.same(JSON.parse(record.details), { format: 'csv', fileName: file.fileName, records: 2, matched: 2, truncated: false, filters: { Severity: 'Critical' }, sortBy: 'eventID_asc' })
})

t.test('an export beyond its limit is cut and says so; an audit trail that fails refuses it', async (t) => {
  const saved = { ...exportLimits }
  t.teardown(() => Object.assign(exportLimits, saved))
  exportLimits.pdf = 3
  const { service, write, auditRows } = await appSetup(t)
  await write(5)
  const file = await service.exportEvents(ctx(), { filter: eventFilter({}, 'body'), order: byId('desc'), format: 'pdf', filters: [], exportedBy: 'alice' })
  t.match(file, { matched: 5, truncated: true, type: 'application/pdf' })
  t.ok((await text(file.body)).startsWith('%PDF-'), 'a PDF file')
  t.match((await auditRows())[0].description, /^Exported 3 events as PDF \(events-.*\.pdf\); 5 matched, cut to 3$/)

  const failing = await appSetup(t, {
    audit: {
      record: async (_ctx: Context, _entry: AuditEntry) => {
        throw new Error('the audit trail is full')
      },
    },
  })
  await failing.write(2)
  await t.rejects(
    failing.service.exportAudit(ctx(), { filter: auditFilter({}, 'body'), order: { field: 'auditTrailID', direction: 'asc' }, format: 'csv', filters: [], exportedBy: 'alice' }),
    /audit trail is full/,
  )
})

t.test(
  'a repeated question is answered from the kept text until a record is added, pruned or changed',
  sqliteOnly("what SQLite's event index keeps (answers, records' texts, a feed page's known ids) and when it starts over"),
  async (t) => {
    const { db, uow, queries, serviceWith, write } = setup()
    write(20)
    let reads = 0
    const port = asyncPort(queries.events, uow)
    const service = serviceWith({
      ...port,
      pageRows: (...a: Parameters<typeof port.pageRows>) => {
        reads++
        return port.pageRows(...a)
      },
    })
    const ask = async (q: Record<string, string> = {}, pg = page(5)) => JSON.parse((await service.eventsAnswer(eventFilter(q), byId('desc'), pg)) as string)
    const ids = (a: { data: { eventID: number }[] }) => a.data.map((e) => e.eventID)

    const first = await ask()
    t.same([first.recordsTotal, ids(first)], [20, [20, 19, 18, 17, 16]])
    t.same(await ask(), first, 'the same answer again')
    t.equal(reads, 2, 'read again: a question asked once is not kept')
    t.same(await ask(), first)
    t.equal(reads, 2, 'kept from the second time')
    t.same(ids(await ask({}, page(5, 2))), [15, 14, 13, 12, 11], 'another page is its own question')
    t.same((await ask({ Severity: 'Critical' })).recordsFiltered, 6, 'another filter is its own question')
    t.equal(reads, 4)

    write(1, T0 + DAY)
    const added = await ask()
    t.same([added.recordsTotal, ids(added)], [21, [21, 20, 19, 18, 17]], 'an added event is in the next answer')

    queries.catchUp()
    t.same(await ask(), added, 'indexing changes no answer')
    const before = reads
    await ask()
    t.equal(reads, before, 'and keeps it')

    // A record deleted outside a prune (the index starts over): the answer follows at once,
    // and after the index has caught up again.
    db.prepare('DELETE FROM events WHERE id = 19').run()
    t.same(ids(await ask()), [21, 20, 18, 17, 16], 'a deleted event is gone from the next answer')
    queries.catchUp()
    t.same(ids(await ask()), [21, 20, 18, 17, 16], 'and after the index started over')
    db.prepare('DELETE FROM events WHERE id = 18').run()
    queries.catchUp()
    t.same(ids(await ask()), [21, 20, 17, 16, 15], 'a delete not asked about until the index started over')

    const feed = async () => JSON.parse((await service.eventFeedAnswer(eventFilter({ FromEventId: 20 }), byId('asc'), page(10))) as string)
    t.same(ids(await feed()), [20, 21])
    write(1, T0 + 2 * DAY)
    t.same(ids(await feed()), [20, 21, 22], "the feed's next answer holds the new event")
  },
)

t.test(
  "a large feed page is written from each record's kept text, byte for byte the page read whole",
  sqliteOnly("what SQLite's event index keeps (answers, records' texts, a feed page's known ids) and when it starts over"),
  async (t) => {
    const { db, uow, queries, service: plain, serviceWith, write } = setup()
    write(300)
    let read = 0
    const port = asyncPort(queries.events, uow)
    const service = serviceWith(
      {
        ...port,
        rowsByIds: (ids: number[]) => {
          read += ids.length
          return port.rowsByIds(ids)
        },
      },
      0,
    )
    const textOf = (a: string | NodeJS.ReadableStream) => (typeof a === 'string' ? a : Buffer.concat((a as AnswerParts).parts).toString())
    const wholeText = async (f: Record<string, string>, order: Sort, pg = page(200)) => textOf(eventsAnswer(await plain.eventFeed(eventFilter(f), order, pg)))
    const feedText = async (f: Record<string, string>, order: Sort, pg = page(200)) => textOf(await service.eventFeedAnswer(eventFilter(f), order, pg))

    const first = await feedText({}, byId('desc'))
    t.equal(read, 200, 'every record read')
    t.equal(await feedText({}, byId('desc')), first)
    t.equal(read, 400, 'read again: a record read once is not kept')
    t.equal(await feedText({}, byId('desc')), first)
    t.equal(read, 400, 'kept from the second time')
    for (const [f, order, pg] of [
      [{}, byId('desc'), page(200)],
      [{ FromEventId: '50' }, byId('asc'), page(200)],
      [{ FromEventId: '50' }, byId('desc'), page(150, 2)],
      [{ Severity: 'Critical' }, byId('desc'), page(129)],
      [{ Source: 'host-odd' }, byId('desc'), page(140)],
    ] as [Record<string, string>, Sort, ReturnType<typeof page>][]) {
      t.equal(await feedText(f, order, pg), await wholeText(f, order, pg), `${JSON.stringify(f)} ${order.direction} ${pg.pageSize}/${pg.pageNumber}`)
    }
    // The newest records: a poller keeping up.
    const newest = { FromEventId: '250' }
    await feedText(newest, byId('desc'))
    await feedText(newest, byId('desc'))
    const read0 = read
    write(5, Date.UTC(2026, 5, 1))
    t.equal(await feedText(newest, byId('desc')), await wholeText(newest, byId('desc')), 'new records come in')
    t.equal(read, read0 + 5, 'only the new records are read')

    db.prepare('DELETE FROM events WHERE id = 300').run()
    t.equal(await feedText(newest, byId('desc')), await wholeText(newest, byId('desc')), 'a record deleted outside a prune is gone')
    // A record changed outside a prune (nothing in the product does) marks the index stale:
    // the kept texts are dropped.
    queries.catchUp()
    await feedText(newest, byId('desc'))
    await feedText(newest, byId('desc'))
    db.prepare("UPDATE events SET details = 'changed' WHERE id = 299").run()
    t.match(await feedText(newest, byId('desc')), /"details":"changed"/, 'a changed record is read again')

    const incident = textOf(await service.eventsAnswer(eventFilter({ FromEventId: '10' }), { field: 'date', direction: 'asc' }, page(150), true))
    t.equal(incident, textOf(eventsAnswer(await plain.events(eventFilter({ FromEventId: '10' }), { field: 'date', direction: 'asc' }, page(150), true))), 'the incident fetch')
  },
)

t.test(
  "a feed page's ids: an id range holding every id in it is known unread, any other is read",
  sqliteOnly("what SQLite's event index keeps (answers, records' texts, a feed page's known ids) and when it starts over"),
  (t) => {
    const { db, queries, write } = setup()
    write(60)
    const read = (q: Record<string, string>, order: Sort, size: number, offset: number) => {
      const a = queries.events.pageRows(eventFilter(q), order, size, offset, true)
      return { total: a.total, filtered: a.filtered, rows: a.rows.map((r) => r[0]) }
    }
    const check = (what: string) => {
      for (const [q, order, size, offset] of [
        [{}, byId('desc'), 200, 0],
        [{ FromEventId: '20' }, byId('desc'), 200, 0],
        [{ FromEventId: '20' }, byId('asc'), 200, 0],
        [{ FromEventId: '20' }, byId('desc'), 15, 15],
        [{ FromEventId: '20' }, byId('asc'), 15, 30],
        [{ FromEventId: '20', ToEventId: '40' }, byId('desc'), 200, 0],
        [{ FromEventId: '20', ToEventId: '40' }, byId('asc'), 5, 18],
        [{ FromEventId: '55', ToEventId: '500' }, byId('desc'), 200, 0],
        [{ FromEventId: '500' }, byId('desc'), 200, 0],
        [{ FromEventId: '20' }, byId('desc'), 200, 100],
        [{ FromEventId: '20', Severity: 'Critical' }, byId('desc'), 200, 0],
      ] as [Record<string, string>, Sort, number, number][]) {
        t.same(queries.events.feedIds(eventFilter(q), order, size, offset), read(q, order, size, offset), `${what}: ${JSON.stringify(q)} ${order.direction} ${size}+${offset}`)
      }
    }
    check('every id')
    db.prepare('DELETE FROM events WHERE id = 30').run()
    check('an id missing')
    db.prepare('DELETE FROM events WHERE id <= 5').run()
    queries.catchUp()
    check('the oldest pruned')
    t.end()
  },
)

t.test('retention: old records are archived and pruned in a unit of work that rolls back whole', async (t) => {
  const { app, ports, service, write } = await appSetup(t)
  await write(10, T0) // 10 events on T0
  await write(5, T0 + 50 * DAY)
  indexEvents(app)
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-retention-'))
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
  const settings = { ...loadConfig({}).retention, eventsDays: 30, auditDays: 0, notificationsDays: 0, commandsDays: 0, agentlessRunsDays: 0, archiveDays: 0 }
  let failGate = false
  const retention = ports.retention
  const deps: RetentionDeps = {
    retention: {
      ...retention,
      closeGate: () => {
        if (failGate) return Promise.reject(new Error('the disk is full'))
        return retention.closeGate()
      },
    },
    index: ports.retentionIndex,
    applyPrune: ports.applyPrune,
    audit: ports.systemAudit,
    uow: app.storage.uow,
    settings,
    dataDir,
    log: { info: () => {}, error: () => {} },
  }
  // PostgreSQL drops a whole past day at once (its partition, in a unit of work of its own):
  // the failing run takes the rows one by one, in the unit of work that fails.
  const withDays = (on: boolean): RetentionDeps => ({ ...deps, retention: { ...deps.retention, days: on ? retention.days : undefined } })
  const count = () => queryValue(app, 'SELECT count(*) FROM events')
  const now = T0 + 60 * DAY

  const listed = async () => JSON.parse((await service.eventsAnswer(eventFilter({}), byId('asc'), page(3))) as string)
  t.same([(await listed()).recordsTotal, (await listed()).data[0].eventID], [15, 1], 'the list before')

  failGate = true
  await t.rejects(runRetention(withDays(false), now), /the disk is full/)
  t.equal(await count(), 15, 'nothing deleted: the unit of work rolled back')
  t.equal((await service.events(eventFilter({}), byId('asc'), page(1))).filtered, 15, 'the counts are unchanged')

  failGate = false
  const run = await runRetention(withDays(true), now)
  t.match(run.events, { deleted: 10, firstId: 1, lastId: 10 })
  t.equal(await count(), 5)
  t.equal((await service.events(eventFilter({}), byId('asc'), page(1))).filtered, 5, 'the counts follow the prune')
  t.same([(await listed()).recordsTotal, (await listed()).data[0].eventID], [5, 11], 'the list answer follows the prune')
  const archived = zlib
    .gunzipSync(fs.readFileSync(path.join(dataDir, 'archive', run.events.files[0])))
    .toString()
    .trim()
    .split('\n')
  // The archive is written before the delete: the rolled back run's copy is there too.
  t.same(new Set(archived.map((l) => JSON.parse(l).eventID)).size, 10, 'every pruned event is archived')
  t.equal(archived.length, 20)
  const [record] = await query<{ user_name: null; description: string }>(app, "SELECT user_name, description FROM audit_trail WHERE description LIKE 'Retention:%'")
  t.match(record, { user_name: null, description: /^Retention: deleted 10 events older than 30 days \(ids 1 to 10, archived in 1 file\)$/ })
  if (testBackend === 'postgres') t.notOk(await queryValue(app, "SELECT to_regclass(record_partition_name('events', ?::bigint))", T0), "T0's partition went whole")
})
