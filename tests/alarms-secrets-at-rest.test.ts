// Pins webhook secrets and custom header values at rest: sealed in the database with the
// data dir's key and bound to their destination, so that a copied database file reveals
// none of them; deliveries still sign with the secret and send the headers; settings
// stored in the clear by an earlier version are sealed at the next start; under another
// key the destination still reads (masked) and its deliveries fail with a reason.
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../lib/app.js'
import { loadConfig } from '../lib/config.js'
import { ADMIN_PASSWORD, call, login, testDatabaseEnv } from './helpers.js'
import { closeQueries, query, queryValue } from './seed.js'
import { ALARM_PATH, alarmEnv, httpReceiver } from './fixtures/receivers.js'

const SECRET = 'whsec-at-rest-0123456789'
const HEADER_VALUE = 'Bearer header-token-9876543210'

/** The app on the data dir (and, on PostgreSQL, the test's database), closed with the pool `query` opened for it. */
async function start(dir: string, env: Record<string, string> = {}) {
  const config = loadConfig({ PRIME_DATA_DIR: dir, PRIME_ADMIN_PASSWORD: ADMIN_PASSWORD, LOG_LEVEL: 'silent', ...alarmEnv, ...env })
  const app = await buildApp({ config, logger: false, validateResponses: true })
  app.addHook('onClose', () => closeQueries(app))
  return { app, token: await login(app) }
}
const stored = (app: FastifyInstance, id: string) => queryValue<string>(app, 'SELECT settings FROM alarm_destinations WHERE id = ?', id)
async function test(app: FastifyInstance, token: string, id: string) {
  const res = await call(app, token, { method: 'POST', url: `${ALARM_PATH}/TestAlarmDests`, payload: [id] })
  if (res.statusCode !== 200) throw new Error(res.body)
  return res.json().results[0]
}
const view = async (app: FastifyInstance, token: string, id: string) => (await call(app, token, { url: `${ALARM_PATH}/GetAlarmDests` })).json().data.find((d: { id: string }) => d.id === id)

t.test('webhook secrets and header values are sealed at rest, and still used', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-sealed-test-'))
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
  const receiver = await httpReceiver(SECRET)
  t.teardown(() => receiver.close())

  const database = await testDatabaseEnv(t)
  let { app, token } = await start(dir, database)
  const res = await call(app, token, {
    method: 'POST',
    url: `${ALARM_PATH}/AddOrUpdateAlarmDest`,
    payload: { name: 'soar', type: 'webhook', webhook: { url: receiver.url, secret: SECRET, headers: { Authorization: HEADER_VALUE } } },
  })
  t.equal(res.statusCode, 200, res.body)
  const id = res.json().id
  const raw = await stored(app, id)
  t.notOk(raw.includes(SECRET) || raw.includes(HEADER_VALUE), 'neither the secret nor the header value is in the database')
  t.match(JSON.parse(raw), { url: receiver.url, sealed: /^[A-Za-z0-9+/]+=*$/ })
  t.match(await view(app, token, id), { webhook: { url: receiver.url, hasSecret: true, headers: { Authorization: '***' } } })
  t.match(await test(app, token, id), { status: 'delivered' })
  t.ok(receiver.deliveries[0].verified, 'signed with the secret')
  t.equal(receiver.deliveries[0].headers.authorization, HEADER_VALUE, 'the header value sent')

  // Sealed for this destination only: copied onto another, it does not open.
  const other = await call(app, token, {
    method: 'POST',
    url: `${ALARM_PATH}/AddOrUpdateAlarmDest`,
    payload: { name: 'other', type: 'webhook', webhook: { url: receiver.url, secret: 'whsec-other-0123456789' } },
  })
  t.equal(other.statusCode, 200, other.body)
  await query(app, 'UPDATE alarm_destinations SET settings = ? WHERE id = ?', raw, other.json().id)
  t.match(await test(app, token, other.json().id), { status: 'failed', error: /do not open with this server's key/ })

  // Stored in the clear (as an earlier version did): read as it is, sealed at the next start.
  await query(app, 'UPDATE alarm_destinations SET settings = ? WHERE id = ?', JSON.stringify({ url: receiver.url, secret: SECRET, headers: { Authorization: HEADER_VALUE } }), id)
  t.match(await test(app, token, id), { status: 'delivered' })
  await app.close()
  ;({ app, token } = await start(dir, database))
  t.notOk((await stored(app, id)).includes(SECRET), 'sealed at the start')
  t.match(await test(app, token, id), { status: 'delivered' })
  t.ok(receiver.deliveries.every((d) => d.verified))
  await app.close()

  // Under another key: still listed (masked), deliveries fail with the reason.
  ;({ app, token } = await start(dir, { ...database, PRIME_AGENTLESS_KEY: crypto.randomBytes(32).toString('hex') }))
  t.teardown(() => app.close())
  t.match(await view(app, token, id), { webhook: { hasSecret: true } })
  t.match(await test(app, token, id), { status: 'failed', code: 'delivery-failed', error: /PRIME_AGENTLESS_KEY/ })
})
