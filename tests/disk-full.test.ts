// backend: none — the error handler alone, on a Fastify instance of its own
// A full disk under the database answers 503 with a Retry-After and says why, never a 500:
// SQLite's SQLITE_FULL, a file's ENOSPC and PostgreSQL's disk_full (SQLSTATE 53100).
import Fastify from 'fastify'
import t from 'tap'
import { errorHandler } from '../lib/platform/errors-handler.js'

for (const code of ['SQLITE_FULL', 'ENOSPC', '53100']) {
  t.test(`${code}: 503, try again later`, async (t) => {
    const app = Fastify({ logger: false })
    app.setErrorHandler(errorHandler)
    app.post('/write', async () => {
      throw Object.assign(new Error('database or disk is full'), { code })
    })
    const res = await app.inject({ method: 'POST', url: '/write' })
    t.equal(res.statusCode, 503)
    t.equal(res.headers['retry-after'], '60')
    t.match(res.headers['content-type'], /^application\/problem\+json/)
    t.match(res.json(), { status: 503, detail: /disk is full/ })
    await app.close()
  })
}

t.test('any other error of the database stays a 500 that names no internals', async (t) => {
  const app = Fastify({ logger: false })
  app.setErrorHandler(errorHandler)
  app.post('/write', async () => {
    throw Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' })
  })
  const res = await app.inject({ method: 'POST', url: '/write' })
  t.equal(res.statusCode, 500)
  t.notMatch(res.body, /malformed/)
  await app.close()
})
