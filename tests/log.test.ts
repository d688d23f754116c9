import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import pino from 'pino'
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify'
import { LineBatcher, lazyChildLogger, requestLineWriter } from '../lib/log.js'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { ADMIN_PASSWORD, testDatabaseEnv } from './helpers.js'

/** A destination that keeps what it is given, block by block. */
function sink() {
  const blocks: string[] = []
  let syncFlushes = 0
  return {
    blocks,
    get syncFlushes() {
      return syncFlushes
    },
    lines: () =>
      blocks
        .join('')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l)),
    write(text: string) {
      blocks.push(text)
    },
    flushSync() {
      syncFlushes++
    },
  }
}

const fakeRequest = (over: Record<string, unknown> = {}) =>
  ({ id: 'req-7', method: 'GET', url: '/prime/webui/admin/all?x="a"\n', headers: {}, principal: { name: 'ana "the admin"' }, ...over }) as unknown as FastifyRequest
const fakeReply = { statusCode: 200, elapsedTime: 1.26 } as unknown as FastifyReply

t.test('LineBatcher hands lines on in blocks, in order', async (t) => {
  const out = sink()
  const lines = new LineBatcher(out, 30, 60_000)
  t.teardown(() => lines.close())
  lines.write('{"n":1}\n')
  lines.write('{"n":2}\n')
  t.same(out.blocks, [], 'held below the block size')
  lines.write('{"n":3}\n{"n":4}\n')
  t.same(out.blocks, ['{"n":1}\n{"n":2}\n{"n":3}\n{"n":4}\n'], 'one block once the size is reached')
  lines.write('{"n":5}\n')
  let called = false
  lines.flush(() => {
    called = true
  })
  t.ok(called, 'flush calls back')
  t.same(
    out.lines(),
    [1, 2, 3, 4, 5].map((n) => ({ n })),
    'every line once, in order',
  )
  lines.flush()
  t.equal(out.blocks.length, 2, 'nothing pending: nothing written')
  lines.write('{"n":6}\n')
  lines.flushSync()
  t.equal(out.syncFlushes, 1, 'flushSync reaches the destination')
  t.same(out.lines().at(-1), { n: 6 })
})

t.test('LineBatcher writes what is pending every interval', async (t) => {
  const out = sink()
  const lines = new LineBatcher(out, 1 << 20, 20)
  t.teardown(() => lines.close())
  lines.write('{"late":true}\n')
  await new Promise((r) => setTimeout(r, 80))
  t.same(out.lines(), [{ late: true }])
})

t.test('a request line is the line pino writes for the same fields', async (t) => {
  const out = sink()
  const lines = new LineBatcher(out, 0, 60_000)
  t.teardown(() => lines.close())
  const log = pino({ level: 'info' }, lines)
  const write = requestLineWriter(log as unknown as FastifyBaseLogger)
  const req = fakeRequest()
  write(req, fakeReply)
  log.info({ reqId: 'req-7', method: 'GET', url: req.url, statusCode: 200, ms: 1.3, user: 'ana "the admin"' }, 'request')
  const [ours, pinos] = out.blocks
  t.match(ours, /^\{"level":30,"time":\d+,"pid":\d+,"hostname":/)
  const strip = (line: string) => line.replace(/"time":\d+/, '"time":0')
  t.equal(strip(ours), strip(pinos), 'the same text, field for field')
  t.same(JSON.parse(ours).url, '/prime/webui/admin/all?x="a"\n', 'quotes and control characters escaped')

  write(fakeRequest({ principal: undefined }), fakeReply)
  t.notOk('user' in JSON.parse(out.blocks[2]), 'no user field for an anonymous request')
  t.notOk('clientRequestId' in JSON.parse(out.blocks[2]), 'nor a client request id when none was sent')

  write(fakeRequest({ headers: { 'x-request-id': 'dup "id"' } }), fakeReply)
  log.info({ reqId: 'req-7', method: 'GET', url: req.url, statusCode: 200, ms: 1.3, user: 'ana "the admin"', clientRequestId: 'dup "id"' }, 'request')
  t.equal(strip(out.blocks[3]), strip(out.blocks[4]), "a caller's refused id: the same text as pino's")
  write(fakeRequest({ headers: { 'x-request-id': 'x'.repeat(500) } }), fakeReply)
  t.equal(JSON.parse(out.blocks[5]).clientRequestId, 'x'.repeat(128), 'cut to 128 characters')
  write(fakeRequest({ headers: { 'x-request-id': 'req-7' } }), fakeReply)
  t.notOk('clientRequestId' in JSON.parse(out.blocks[6]), 'an id taken as the request id is not repeated')
})

t.test('a request line follows the logger level, and other loggers get it through req.log', async (t) => {
  const out = sink()
  const lines = new LineBatcher(out, 0, 60_000)
  t.teardown(() => lines.close())
  const log = pino({ level: 'warn' }, lines)
  requestLineWriter(log as unknown as FastifyBaseLogger)(fakeRequest(), fakeReply)
  t.same(out.blocks, [], 'nothing below the level')

  const seen: unknown[][] = []
  const other = { info: (...args: unknown[]) => seen.push(args) } as unknown as FastifyBaseLogger
  requestLineWriter(other)(fakeRequest({ log: other }), fakeReply)
  t.same(seen, [[{ method: 'GET', url: '/prime/webui/admin/all?x="a"\n', statusCode: 200, ms: 1.3, user: 'ana "the admin"' }, 'request']])
})

t.test('the per-request child logger is made when it is used', async (t) => {
  const out = sink()
  const lines = new LineBatcher(out, 0, 60_000)
  t.teardown(() => lines.close())
  const log = pino({ level: 'info' }, lines)
  let children = 0
  const parent = new Proxy(log, {
    get: (target, key) =>
      key === 'child'
        ? (...a: Parameters<typeof log.child>) => {
            children++
            return target.child(...a)
          }
        : Reflect.get(target, key),
  })
  const child = lazyChildLogger.call({} as never, parent as unknown as FastifyBaseLogger, { reqId: 'r-1' }, {}, {} as never)
  t.equal(children, 0, 'no child yet')
  t.equal(child.level, 'info', "the level is the parent's")
  child.debug('not written')
  child.error({ code: 'E1' }, 'went wrong')
  child.warn('twice')
  t.equal(children, 1, 'made once, when first used')
  t.match(out.lines(), [
    { level: 50, reqId: 'r-1', code: 'E1', msg: 'went wrong' },
    { level: 40, reqId: 'r-1', msg: 'twice' },
  ])
  const withLevel = lazyChildLogger.call({} as never, parent as unknown as FastifyBaseLogger, { reqId: 'r-2' }, { level: 'debug' }, {} as never)
  t.equal(children, 2, 'a child with its own options is made at once')
  t.equal(withLevel.level, 'debug')
})

t.test('the server writes one line per request, with its id and no credentials', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-log-'))
  const out = sink()
  const lines = new LineBatcher(out, 1 << 20, 60_000)
  const app = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'info', ...(await testDatabaseEnv(t)) }), logStream: lines })
  t.teardown(async () => {
    await app.close()
    lines.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const login = await app.inject({ method: 'POST', url: '/prime/webui/Auth/LocalLogin', payload: { username: 'admin', password: ADMIN_PASSWORD } })
  const token = login.json().token as string
  const res = await app.inject({ method: 'GET', url: '/prime/webui/admin/getuserdetails', headers: { authorization: `Bearer ${token}` } })
  t.equal(res.statusCode, 200)
  await app.inject({ method: 'GET', url: '/prime/webui/no/such/path' })
  lines.flush()
  const requests = out.lines().filter((l) => l.msg === 'request')
  t.match(requests, [
    { level: 30, method: 'POST', url: '/prime/webui/Auth/LocalLogin', statusCode: 200, reqId: String },
    { level: 30, method: 'GET', url: '/prime/webui/admin/getuserdetails', statusCode: 200, reqId: res.headers['x-request-id'], user: 'admin', ms: Number },
    { level: 30, method: 'GET', url: '/prime/webui/no/such/path', statusCode: 404, reqId: String },
  ])
  t.equal(requests.length, 3, 'one line each')
  const text = out.blocks.join('')
  t.notOk(text.includes(token), 'the access token is not logged')
  t.notOk(text.includes(ADMIN_PASSWORD), 'the password is not logged')
})

t.test("a caller's x-request-id is the request's id only from a trusted proxy, and only in the form of one", async (t) => {
  // The server's own ids: UUIDs of version 8, a random part per process and a count.
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
  const serve = async (env: Record<string, string>) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-log-'))
    const out = sink()
    const lines = new LineBatcher(out, 1 << 20, 60_000)
    const app = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'info', ...(await testDatabaseEnv(t)), ...env }), logStream: lines })
    t.teardown(async () => {
      await app.close()
      lines.close()
      fs.rmSync(dir, { recursive: true, force: true })
    })
    /** The answer's id and the request's log line, for an `x-request-id` sent. */
    return async (given: string) => {
      const problem = await app.inject({ method: 'GET', url: '/prime/webui/agents', headers: { 'x-request-id': given } })
      lines.flush()
      const line = out
        .lines()
        .filter((l) => l.msg === 'request' && l.url === '/prime/webui/agents')
        .at(-1)
      t.equal(problem.json().requestId, problem.headers['x-request-id'], 'the problem document names the same id')
      return { problemId: problem.headers['x-request-id'] as string, line }
    }
  }

  const direct = await serve({})
  const wellFormed = '5f0c9a3e-1d2b-4c7a-9e8f-0a1b2c3d4e5f'
  const untrusted = await direct(wellFormed)
  t.match(untrusted.problemId, UUID)
  t.not(untrusted.problemId, wellFormed, 'without a trusted proxy, even a well-formed id is not taken')
  t.match(untrusted.line, { reqId: untrusted.problemId, clientRequestId: wellFormed, statusCode: 401 }, "the log line keeps the caller's value beside the server's id")
  const again = await direct(wellFormed)
  t.not(again.problemId, untrusted.problemId, 'a repeated id names two requests apart')

  const proxied = await serve({ PRIME_TRUST_PROXY: 'true' })
  const other = (await proxied('short')).problemId
  t.match(other, UUID)
  t.not(other.slice(0, 23), untrusted.problemId.slice(0, 23), "another server's ids do not share its random part")
  const kept = await proxied(wellFormed)
  t.equal(kept.problemId, wellFormed, "a trusted proxy's well-formed id is the request's id")
  t.equal(kept.line.reqId, wellFormed)
  t.notOk('clientRequestId' in kept.line, 'and is not repeated as a client request id')
  const trace = await proxied('4bf92f3577b34da6a3ce929d0e0e4736')
  t.equal(trace.problemId, '4bf92f3577b34da6a3ce929d0e0e4736', 'a W3C trace id is kept')
  for (const bad of ['trace-42', 'not valid but long enough!', 'a:b:c:d:e:f:g:h:i:j', 'x'.repeat(65)]) {
    const replaced = await proxied(bad)
    t.match(replaced.problemId, UUID, `"${bad.slice(0, 20)}" from a trusted proxy is replaced`)
    t.equal(replaced.line.clientRequestId, bad, 'and kept in the log line')
  }
})
