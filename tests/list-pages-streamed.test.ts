// Pins the large pages: every list answers PageSize up to 1,000,000 (the SOAR integration
// asks that much), a page of more than 10,000 rows is streamed as JSON with the same rows,
// order and counts as the same query in smaller pages and valid against the contract, and
// above 1,000,000 the answer is 400 naming PageSize. The comparisons lower the size from
// which pages stream (streamedPages.above), so that they run on a few hundred rows; the
// wire test streams a real page of more than 10,000.
import http from 'node:http'
import t from 'tap'
import { build, login, call } from './helpers.js'
import { addEvents, expectedEvents, eventMaker } from './fixtures/events.js'
import { recordEvents } from './seed.js'
import { STREAM_CHUNK_CHARS } from '../lib/listing.js'
import { get, paged, streamAbove, validator, type List } from './fixtures/pages.js'

const ids = (l: List, key: string) => l.data.map((r) => r[key])

t.test('events, the feeds and audit records: a streamed page holds what smaller pages hold', async (t) => {
  const app = await build(t)
  const token = await login(app)
  streamAbove(t, 100)
  const now = Date.now()
  const rows = await addEvents(app, 700, { now, days: 5, jumps: [300] })
  const valid = validator(app, 'PrimeEventViewWrapper')
  const E = '/prime/webui/Events/GetEvents'
  const since = new Date(now - 4 * 86_400_000).toISOString()
  const until = new Date(now - 86_400_000).toISOString()
  for (const query of [
    'SortBy=eventID_desc',
    'SortBy=eventID_asc',
    'SortBy=severity_asc',
    'SortBy=eventEntityID_desc',
    'SortBy=date_asc&Category=USB,Network',
    'MinimumSeverity=Notice&GlobalSearch=desktop',
    `SortBy=creationTime_asc&FromDate=${since}&ToDate=${until}`,
  ]) {
    const small = await paged(app, token, `${E}?${query}`, 100)
    const big = await get(app, token, `${E}?${query}&PageSize=1000000`)
    t.equal(valid(big), '', `${query}: valid against the contract`)
    t.same([big.recordsTotal, big.recordsFiltered], [small.recordsTotal, small.recordsFiltered], `${query}: the same counts`)
    t.same(big.data, small.data, `${query}: the same ${small.data.length} events, fields and order`)
    // A second large page starts where the first ends.
    const second = await get(app, token, `${E}?${query}&PageSize=101&PageNumber=2`)
    t.same(ids(second, 'eventID'), ids(small, 'eventID').slice(101, 202), `${query}: page 2 of 101`)
  }

  // The feed and the SOAR incident fetch stream their page too: the oldest, newest first.
  const from = rows[100].id
  const want = expectedEvents(rows, { FromEventId: String(from), MinimumSeverity: 'Warning', Category: 'USB' })
    .map((e) => e.id)
    .reverse()
  t.ok(want.length > 100)
  const feed = await get(app, token, `/prime/webui/Events/GetEventsIntegration?FromEventId=${from}&MinimumSeverity=Warning&Category=USB&PageSize=1000000`)
  t.equal(validator(app, 'PrimeEventViewWrapperIntegration')(feed), '')
  t.same(ids(feed, 'eventID'), want, 'the feed: every match, newest first')
  const soar = await get(app, token, `/prime/webui/events/getevents?pageSize=1000000&pageNumber=1&sortBy=date_asc&category=USB&minimumSeverity=Warning&FromEventId=${from}`)
  t.same(ids(soar, 'eventID'), want, 'the incident fetch with its largest limit: every match, newest first')
  const window = expectedEvents(rows, { FromDate: since, ToDate: until, Category: 'USB' })
    .map((e) => e.id)
    .reverse()
  t.ok(window.length > 100)
  const firstFetch = await get(app, token, `/prime/webui/events/getevents?pageSize=1000000&pageNumber=1&sortBy=date_asc&category=USB&FromDate=${since}&ToDate=${until}`)
  t.same(ids(firstFetch, 'eventID'), window, "the incident fetch's first call by date, with its largest limit: the whole window, newest first")
  const all = rows.map((e) => e.id)
  const cut = await get(app, token, '/prime/webui/Events/GetEventsIntegration?PageSize=101&PageNumber=2')
  t.same(ids(cut, 'eventID'), all.slice(101, 202).reverse(), 'the feed: page 2 is the next 101 oldest, newest first')
  const bySeverity = await get(app, token, `/prime/webui/Events/GetEventsIntegration?PageSize=150&FromEventId=${from}&SortBy=severity_desc`)
  const small = await get(app, token, `/prime/webui/Events/GetEventsIntegration?PageSize=100&FromEventId=${from}&SortBy=severity_desc`)
  t.same(new Set(ids(bySeverity, 'eventID')), new Set(all.filter((id) => id >= from).slice(0, 150)), 'the feed sorted: the oldest 150')
  t.same(
    ids(bySeverity, 'eventID').filter((id) => ids(small, 'eventID').includes(id)),
    ids(small, 'eventID'),
    'in the same order as a built page',
  )
  for (let i = 0; i < 150; i++) {
    await app.storage.audit.insert({
      createdMs: Date.now(),
      severity: 5 + (i % 2),
      category: 'Users',
      user: 'admin',
      sourceIp: '127.0.0.1',
      description: `Change ${i}`,
      details: '{}',
      operationId: 'updateUser',
      outcome: 'Succeeded',
    })
  }
  const A = '/prime/webui/Events/GetAuditTrails?SortBy=auditTrailID_asc'
  const audits = await paged(app, token, A, 50)
  t.ok(audits.recordsFiltered > 100, `audit records: ${audits.recordsFiltered}`)
  const streamed = await get(app, token, `${A}&PageSize=1000000`)
  t.equal(validator(app, 'AuditTrailViewWrapper')(streamed), '')
  t.same(streamed.data.slice(0, audits.data.length), audits.data, 'audit records: the same records')
  const auditFeed = await get(app, token, '/prime/webui/Events/GetAuditsIntegration?PageSize=1000000&FromAuditTrailId=1')
  t.equal(validator(app, 'AuditTrailViewWrapperIntegration')(auditFeed), '')
  t.same(ids(auditFeed, 'auditTrailID'), ids(streamed, 'auditTrailID').slice(0, auditFeed.data.length).reverse(), 'the audit feed: oldest first, newest first in the page')
})

t.test('above 1,000,000 rows a page answers 400 naming PageSize and the maximum', async (t) => {
  const app = await build(t)
  const token = await login(app)
  for (const url of [
    '/prime/webui/agents?PageSize=1000001',
    '/prime/webui/peripherals?pageSize=1000001',
    '/prime/webui/Events/GetEvents?PageSize=1000001',
    '/prime/webui/Events/GetEventsIntegration?PageSize=1000001',
    '/prime/webui/Events/GetAuditTrails?PageSize=1000001',
    '/prime/webui/Events/GetAuditsIntegration?PageSize=1000001',
    '/prime/webui/agents/agentless/connectiondetailsstatus?PageSize=1000001',
  ]) {
    const res = await call(app, token, { method: 'GET', url })
    t.equal(res.statusCode, 400, url)
    t.match(res.json(), { errors: [{ name: 'PageSize' }] }, `${url}: names PageSize`)
    t.match(res.body, /1000000/, `${url}: says what the maximum is`)
    const ok = await call(app, token, { method: 'GET', url: url.replace('1000001', '1000000') })
    t.equal(ok.statusCode, 200, `${url}: 1000000 is served`)
  }
})

t.test('a large page is written as it is read: chunks on the wire, JSON once whole', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const make = eventMaker(5)
  await recordEvents(app, Date.now(), Array.from({ length: 10_200 }, make))
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  const chunks: string[] = []
  const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/prime/webui/Events/GetEvents?PageSize=1000000', headers: { authorization: `Bearer ${token}` } }, (res) => {
        res.setEncoding('utf8')
        res.on('data', (c: string) => chunks.push(c))
        res.on('end', () => resolve(res))
        res.on('error', reject)
      })
      .on('error', reject)
  })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['transfer-encoding'], 'chunked', 'no length known in advance: the answer is streamed')
  t.notOk(res.headers['content-length'])
  t.match(res.headers['content-type'], /^application\/json/)
  t.ok(chunks.length > 5, `the rows arrive in chunks (${chunks.length})`)
  t.match(chunks[0], /^\{"recordsTotal":10200,"recordsFiltered":10200,"recordsFilteredExact":true,"data":\[/, 'the counts come first')
  t.notMatch(chunks[0], /\]\}$/, 'the first chunk is not the whole answer')
  const body = JSON.parse(chunks.join(''))
  t.equal(body.data.length, 10_200, 'the whole page parses as one JSON document')
})

t.test('a client that stops reading holds the page up: the server waits for it and keeps at most a few small chunks', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const make = eventMaker(7)
  // Far more than loopback's socket buffers take in (some MB), so that the client's pause reaches the server.
  const n = 40_000
  await recordEvents(app, Date.now(), Array.from({ length: n }, make))
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as { port: number }
  let served: http.ServerResponse | undefined
  app.server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    served = res
  })
  // What the server has produced of the answer: handed to the kernel, or queued in its own buffers.
  const produced = () => (served?.socket?.bytesWritten ?? 0) + (served?.writableLength ?? 0)
  const queued: number[] = []
  const chunks: Buffer[] = []
  let reply!: http.IncomingMessage
  await new Promise<void>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/prime/webui/Events/GetEvents?PageSize=1000000', headers: { authorization: `Bearer ${token}` } }, (res) => {
        reply = res
        res.pause()
        resolve()
      })
      .on('error', reject)
  })
  t.equal(reply.statusCode, 200)
  // Until the server has stopped producing (nothing more for 300 ms), sampling what it queues.
  let last = -1
  for (let still = 0, waited = 0; still < 300 && waited < 10_000; waited += 20) {
    await new Promise((r) => setTimeout(r, 20))
    queued.push(served?.writableLength ?? 0)
    const now = produced()
    still = now === last ? still + 20 : 0
    last = now
  }
  const stalledAt = produced()
  const body = await new Promise<string>((resolve, reject) => {
    reply.on('data', (c: Buffer) => chunks.push(c))
    reply.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    reply.on('error', reject)
    reply.resume()
  })
  const page = JSON.parse(body) as List
  t.equal(page.data.length, n, 'once read again, the whole page arrives')
  t.ok(stalledAt < Buffer.byteLength(body) / 2, `while the client read nothing the server stopped: ${stalledAt} of ${Buffer.byteLength(body)} bytes produced`)
  const most = Math.max(...queued)
  t.ok(most <= 3 * STREAM_CHUNK_CHARS, `the server queued at most ${most} bytes (about two chunks of ${STREAM_CHUNK_CHARS}), not the page`)
})
