// backend: sqlite-only — the reader threads' own SQLite connections and their read budget
// The reader threads (lib/platform/readers.ts): a read past its budget is stopped inside
// SQLite and its thread serves the next one; each credential has its share; the queue is
// bounded; the event loop answers meanwhile.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { deadlineExtension, readerPool, readerScope, type ReaderSettings } from '../lib/platform/readers.js'
import { ProblemError } from '../lib/errors.js'
import { build, call, login } from './helpers.js'
import { insertAgent, insertPeripheral } from './fixtures/fleet.js'
import { writeEvents } from './fixtures/events.js'

const SLOW = new URL(`./fixtures/slow-reader.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url).href

function pool(t: Tap.Test, settings: Partial<ReaderSettings>) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-readers-'))
  const file = path.join(dir, 'prime.sqlite')
  const db = openDatabase(file)
  const readers = readerPool({
    file,
    cacheMb: 4,
    settings: { threads: 1, queue: 4, deadlineMs: 1000, perCredential: 1, ...settings },
    local: { assetsPage: () => ({ filtered: 0, rows: [] }) },
    thread: SLOW,
  })
  t.teardown(async () => {
    await readers.close()
    db.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  // The fixture's task counts to its first argument.
  const count = (key: string, n: number) => readerScope.run(key, () => readers.run('assetsPage', [n as never, {} as never, 0, 0]))
  return { readers, count }
}

const refusal = async (p: Promise<unknown>) => {
  try {
    await p
    return null
  } catch (err) {
    return err instanceof ProblemError ? { code: err.code, status: err.status, headers: err.headers } : { code: String(err) }
  }
}

t.test('the deadline extension is built', async (t) => {
  t.ok(deadlineExtension(), 'dist/native/deadline.so (scripts/build-if-stale.mjs)')
})

t.test('a read past its budget is stopped inside SQLite; the thread answers the next read', async (t) => {
  const { readers, count } = pool(t, { deadlineMs: 1000 })
  t.equal(await count('a', 1000), 1000)
  const t0 = performance.now()
  // About a minute of work if nothing stopped it.
  const late = await refusal(count('a', 300_000_000))
  const took = performance.now() - t0
  t.same(late && { code: late.code, status: late.status }, { code: 'query-too-costly', status: 422 })
  t.ok(took < 1800, `answered at the budget (${Math.round(took)} ms), not at the thread's end`)
  // The interrupt came from inside SQLite: the same thread is free at once (no new thread).
  const t1 = performance.now()
  t.equal(await count('a', 1000), 1000)
  t.ok(performance.now() - t1 < 500, 'the next read is answered at once')
  t.equal(readers.stats().interrupted, 1)
})

t.test('the event loop answers while a thread reads', async (t) => {
  const { count } = pool(t, { deadlineMs: 30_000 })
  const read = count('a', 5_000_000)
  let ticks = 0
  let worst = 0
  let last = performance.now()
  const timer = setInterval(() => {
    const now = performance.now()
    worst = Math.max(worst, now - last)
    last = now
    ticks++
  }, 5)
  await read
  clearInterval(timer)
  t.ok(ticks > 10, `the loop turned ${ticks} times during the read`)
  t.ok(worst < 200, `its longest pause was ${Math.round(worst)} ms`)
})

t.test('each credential has its share of reads running or waiting', async (t) => {
  const { readers, count } = pool(t, { threads: 2, perCredential: 1, deadlineMs: 30_000 })
  const first = count('alice', 3_000_000)
  const again = await refusal(count('alice', 1000))
  t.equal(again?.code, 'expensive-in-flight')
  t.equal(again?.status, 429)
  t.same(again?.headers, { 'retry-after': '1' })
  t.equal(await count('bob', 1000), 1000, 'another credential reads meanwhile')
  await first
  t.equal(await count('alice', 1000), 1000, 'once answered, the credential reads again')
  t.equal(readers.stats().refusedCredential, 1)
})

t.test('the queue is bounded; a waiting read runs once a thread frees', async (t) => {
  const { count } = pool(t, { threads: 1, queue: 1, perCredential: 5, deadlineMs: 30_000 })
  t.equal(await count('a', 10), 10, 'the thread is started')
  const running = count('a', 2_000_000)
  const waiting = count('b', 1000)
  const full = await refusal(count('c', 1000))
  t.equal(full?.code, 'readers-busy')
  t.equal(full?.status, 503)
  t.same(full?.headers, { 'retry-after': '1' })
  t.equal(await running, 2_000_000)
  t.equal(await waiting, 1000)
})

t.test('a closing pool refuses what waits', async (t) => {
  const { readers, count } = pool(t, { threads: 1, queue: 2, perCredential: 5, deadlineMs: 30_000 })
  const running = refusal(count('a', 5_000_000))
  const waiting = refusal(count('b', 1000))
  await new Promise((r) => setTimeout(r, 50))
  const closed = readers.close()
  t.equal((await waiting)?.code, 'not-ready')
  await running
  await closed
})

t.test("asset discovery is read in the reader threads, under the caller's share", async (t) => {
  const app = await build(t, { PRIME_READER_THREADS: '1' })
  const token = await login(app)
  const res = await call(app, token, { method: 'GET', url: '/prime/webui/transformerDataApi/assets?PageSize=10' })
  t.equal(res.statusCode, 200, res.body)
  t.equal(app.readers.stats().done, 1)
  const graph = await call(app, token, { method: 'POST', url: '/sepio-data', payload: { query: '{ conditionalTable(query: {}, pagination: {pageNumber: 1, pageSize: 5}) { recordsFiltered } }' } })
  t.equal(graph.statusCode, 200, graph.body)
  t.equal(app.readers.stats().done, 2)
  // A filter of many values is matched by a function of the thread's own connection.
  const many = await call(app, token, {
    method: 'POST',
    url: '/sepio-data',
    payload: {
      query:
        '{ conditionalTable(query: { filters: [{ field: "name", expression: "NotContains", value: "a,b,c", conditionTypeValue: "multiple" }] }, pagination: {pageNumber: 1, pageSize: 5}) { recordsFiltered } }',
    },
  })
  t.equal(many.statusCode, 200, many.body)
  t.equal(app.readers.stats().done, 3)
})

t.test('a streamed page is found and ordered in a reader thread, as the event loop would', async (t) => {
  const app = await build(t, { PRIME_READER_THREADS: '1' })
  const token = await login(app)
  app.db.transaction(() => {
    for (let i = 0; i < 20; i++) {
      const a = insertAgent(app, { host_identifier: `HOST-${String(i).padStart(3, '0')}` })
      for (let j = 0; j < 600; j++) insertPeripheral(app, a.id, { device_id: `USB\\VID_046D&PID_C077\\${i}-${j}`, vid: '046D', pid: 'C077' })
    }
  })()
  const res = await call(app, token, { method: 'GET', url: '/prime/webui/peripherals?PageSize=12000&sortBy=deviceID_desc&GlobalSearch=HOST-01' })
  t.equal(res.statusCode, 200)
  const ids = res.json().data.map((p: { deviceID: string }) => p.deviceID)
  t.equal(ids.length, 6000, 'the agents HOST-010 to HOST-019')
  const agents = await call(app, token, { method: 'GET', url: '/prime/webui/agents?PageSize=20000&SortBy=hostIdentifier_desc' })
  t.same(
    agents.json().data.map((a: { hostIdentifier: string }) => a.hostIdentifier),
    Array.from({ length: 20 }, (_, i) => `HOST-${String(19 - i).padStart(3, '0')}`),
  )
  t.equal(app.readers.stats().done, 2, 'both pages were read in the thread')
  // The same page read on the server's connection.
  const filter = { globalSearch: 'HOST-01' } as never
  const here = app.repos.peripherals.pageIds(filter, { field: 'deviceID', direction: 'desc' } as never, 12000, 0)
  const byId = new Map((app.db.prepare('SELECT id, device_id FROM peripherals').all() as { id: number; device_id: string }[]).map((r) => [r.id, r.device_id]))
  t.same(
    ids,
    here.ids.map((id) => byId.get(id)),
    'in the same order as read on the event loop',
  )
})

t.test("an export in a text field's order is sorted in a reader thread, in the order the event loop would", async (t) => {
  const app = await build(t, { PRIME_READER_THREADS: '1' })
  const token = await login(app)
  const rows = writeEvents(app, 3000, { now: Date.now() })
  const exported = async () => {
    const res = await call(app, token, { method: 'POST', url: '/prime/webui/Events/ExportGetEvents', payload: { SortBy: 'details_asc' } })
    t.equal(res.statusCode, 200, res.body.slice(0, 300))
    return res.body
  }
  const inThread = await exported()
  t.equal(app.readers.stats().done, 1, 'the ids were sorted in the thread')
  t.equal(inThread.trim().split('\n').length, rows.length + 1, 'every event, after the header')
  app.repos.eventQueries.readIdsWith(null)
  t.equal(await exported(), inThread, 'the same file as sorted on the event loop')
  t.equal(app.readers.stats().done, 1)
})

t.test('a thread keeps the paging of asset pages while only check-in times are written', async (t) => {
  const app = await build(t, { PRIME_READER_THREADS: '1', PRIME_AGENT_DISCONNECT_SECONDS: '86400' })
  const token = await login(app)
  const agents = Array.from({ length: 12 }, (_, i) => insertAgent(app, { host_identifier: `HOST-${String(i).padStart(2, '0')}` }))
  const ids: string[] = []
  for (let page = 1; page <= 4; page++) {
    const res = await call(app, token, { method: 'GET', url: `/prime/webui/transformerDataApi/assets?PageSize=4&PageNumber=${page}&SortBy=name_asc` })
    t.equal(res.statusCode, 200)
    ids.push(...res.json().data.map((a: { id: string }) => a.id))
    // Check-ins commit their times between the pages: the thread's connection sees commits,
    // the server's says the data the pages show is unchanged.
    app.repos.gateway.heartbeats(agents.map((a) => [a.id, Date.now()] as [number, number]))
  }
  t.equal(new Set(ids).size, 12)
  const reads = await app.readers.run('assetReads', [])
  t.equal(reads.keyset, 2, 'pages 2 and 3 were read from where the last ended')
})

t.test('closing while a thread reads interrupts the read at once, not at its budget; other pools read on', async (t) => {
  const { readers, count } = pool(t, { deadlineMs: 30_000 })
  const other = pool(t, { deadlineMs: 30_000 })
  t.equal(await count('a', 10), 10, 'the thread is started')
  t.equal(await other.count('a', 10), 10, "the other pool's thread is started")
  // About a minute of work each if nothing stopped them; this pool's server closes (SIGTERM) meanwhile.
  const running = refusal(count('a', 300_000_000))
  const othersRead = refusal(other.count('a', 300_000_000))
  await new Promise((r) => setTimeout(r, 100))
  const t0 = performance.now()
  await readers.close()
  const took = performance.now() - t0
  t.ok(took < 3000, `closed in ${Math.round(took)} ms with a budget of 30 s`)
  t.same(await running, { code: 'not-ready', status: 503, headers: undefined }, 'the read is answered 503: another node can take it')
  t.same(await refusal(count('a', 10)), { code: 'not-ready', status: 503, headers: undefined }, 'a read asked after the close is refused at once')
  // The other pool (another app of the same process) is not interrupted by this one's close.
  const settled = await Promise.race([othersRead.then(() => 'ended'), new Promise((r) => setTimeout(() => r('running'), 300))])
  t.equal(settled, 'running', "the other pool's read goes on")
  const t1 = performance.now()
  await other.readers.close()
  t.ok(performance.now() - t1 < 3000, 'until its own pool closes')
  t.equal((await othersRead)?.code, 'not-ready')
})
