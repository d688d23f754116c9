import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { LineBatcher } from '../lib/log.js'
import { ADMIN_PASSWORD, build, testDatabaseEnv } from './helpers.js'
import { query, queryValue } from './seed.js'

const auditCount = (app: Awaited<ReturnType<typeof build>>) => queryValue<number>(app, 'SELECT count(*) FROM audit_trail')

t.test('liveness and readiness answer without a credential, audit nothing and are not rate limited', async (t) => {
  const app = await build(t, { PRIME_RATE_LIMIT_MAX: '3' })
  const before = await auditCount(app)
  for (let i = 0; i < 10; i++) {
    const live = await app.inject({ url: '/healthz' })
    t.equal(live.statusCode, 200)
    t.same(live.json(), { status: 'ok' })
    t.notOk(live.headers['x-ratelimit-limit'], 'no rate limit headers')
    const ready = await app.inject({ url: '/readyz' })
    t.equal(ready.statusCode, 200)
    t.same(ready.json(), { status: 'ready' })
  }
  t.equal(await auditCount(app), before, 'no audit record')
  const other = await app.inject({ url: '/prime/webui/admin/PrimeVersion' })
  t.equal(other.headers['x-ratelimit-remaining'], '2', 'probes did not count toward the address limit')
  t.equal((await app.inject({ url: '/HEALTHZ' })).statusCode, 200, 'matched case-insensitively like every path')
  t.equal((await app.inject({ method: 'POST', url: '/readyz' })).statusCode, 405)
})

t.test('readiness answers 503 naming why: shutting down, schema, database', async (t) => {
  const app = await build(t)
  app.lifecycle.shuttingDown = true
  const down = await app.inject({ url: '/readyz' })
  t.equal(down.statusCode, 503)
  t.match(down.headers['content-type'], /application\/problem\+json/)
  t.match(down.json(), { code: 'not-ready', detail: 'The server is shutting down.' })
  t.equal((await app.inject({ url: '/healthz' })).statusCode, 200, 'alive while draining')
  app.lifecycle.shuttingDown = false

  // The schema's version as each backend keeps it: SQLite's user_version, PostgreSQL's migrations table.
  const sqlite = app.storage.backend === 'sqlite'
  const version = sqlite ? (app.db.pragma('user_version', { simple: true }) as number) : await queryValue<number>(app, 'SELECT max(version) FROM schema_migrations')
  if (sqlite) app.db.pragma(`user_version = ${version - 1}`)
  else await query(app, 'UPDATE schema_migrations SET version = ? WHERE version = ?', -version, version)
  t.match((await app.inject({ url: '/readyz' })).json(), { status: 503, detail: /schema is not at the version/ })
  if (sqlite) app.db.pragma(`user_version = ${version}`)
  else await query(app, 'UPDATE schema_migrations SET version = ? WHERE version = ?', version, -version)

  // The readiness check's write probe (the same object on both backends).
  const system = app.storage.health.system
  const probe = system.probe
  system.probe = () => {
    throw new Error('SQLITE_READONLY: attempt to write a readonly database')
  }
  const ro = await app.inject({ url: '/readyz' })
  t.equal(ro.statusCode, 503)
  t.equal(ro.json().detail, 'The database does not take writes.', 'says what, not the internals')
  system.probe = probe
  t.equal((await app.inject({ url: '/readyz' })).statusCode, 200)
})

t.test('shutdown turns readiness off before the server closes', async (t) => {
  const app = await build(t)
  let seen: boolean | undefined
  app.addHook('onClose', async () => {
    seen = app.lifecycle.shuttingDown
  })
  t.equal(app.lifecycle.shuttingDown, false)
  await app.close()
  t.equal(seen, true)
})

t.test('probes that pass write no request line; a failing one does', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-test-'))
  const blocks: string[] = []
  const lines = new LineBatcher({ write: (s: string) => blocks.push(s), flushSync() {} }, 1 << 20, 60_000)
  const app = await buildApp({ config: loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'info', ...(await testDatabaseEnv(t)) }), logStream: lines })
  t.teardown(async () => {
    await app.close()
    lines.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  for (let i = 0; i < 5; i++) {
    await app.inject({ url: '/healthz' })
    await app.inject({ url: '/readyz' })
  }
  app.lifecycle.shuttingDown = true
  await app.inject({ url: '/readyz' })
  lines.flush()
  const requests = blocks
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l))
    .filter((l) => l.msg === 'request')
  t.match(requests, [{ url: '/readyz', statusCode: 503 }])
  t.equal(requests.length, 1)
})
