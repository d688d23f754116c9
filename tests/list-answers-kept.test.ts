// backend: sqlite-only — list answers kept in memory and dropped by SQLite's data_version
// Pins the kept list answers: a repeated query may be answered from memory, but never after
// anything changed, whether through the server or through another connection, and never
// with old check-in times.
import t from 'tap'
import Database from 'better-sqlite3'
import { build, login, call } from './helpers.js'
import { insertAgent, insertPeripheral } from './fixtures/fleet.js'
import { checkIn, enroll, gatewayEnv, hostState, mouse } from './fixtures/gateway.js'
import { registerGramFunctions } from '../db/asset-grams.js'

t.test('a kept answer never outlives a change', async (t) => {
  const app = await build(t)
  const token = await login(app)
  const agent = insertAgent(app, { host_identifier: 'KIOSK-01' })
  insertPeripheral(app, agent.id, {})
  const list = async (url: string) => (await call(app, token, { method: 'GET', url })).json()

  t.equal((await list('/prime/webui/agents?HostIdentifier=kiosk')).recordsFiltered, 1)
  t.equal((await list('/prime/webui/agents?HostIdentifier=kiosk')).recordsFiltered, 1, 'asked again')

  insertAgent(app, { host_identifier: 'KIOSK-02' })
  t.equal((await list('/prime/webui/agents?HostIdentifier=kiosk')).recordsFiltered, 2, 'a new agent is seen at once')

  app.db.prepare("UPDATE agents SET host_identifier = 'LOBBY-01' WHERE id = ?").run(agent.id)
  const page = await list('/prime/webui/agents?HostIdentifier=kiosk')
  t.same(
    page.data.map((a: { hostIdentifier: string }) => a.hostIdentifier),
    ['KIOSK-02'],
    'a renamed agent leaves the answer at once',
  )

  const peripherals = await list('/prime/webui/peripherals?hostIdentifier=lobby')
  t.equal(peripherals.recordsFiltered, 1)
  // Another process writing the same database file (a seed run, say).
  const other = new Database(app.testConfig.dbFile)
  t.teardown(() => other.close())
  // A connection that deletes peripherals needs the functions their triggers call (db/asset-grams.ts), as a seed run's has.
  registerGramFunctions(other)
  other.prepare('DELETE FROM peripherals').run()
  t.equal((await list('/prime/webui/peripherals?hostIdentifier=lobby')).recordsFiltered, 0, 'a change by another connection is seen at once')
})

t.test('a kept answer shows the current check-in times', async (t) => {
  const app = await build(t, gatewayEnv)
  const token = await login(app)
  const agent = await enroll(app)
  t.equal((await checkIn(app, agent.credential, hostState([mouse]))).statusCode, 200)
  const list = async () => (await call(app, token, { method: 'GET', url: '/prime/webui/agents?HostIdentifier=desktop' })).json()
  const before = (await list()).data[0].lastUpdated
  app.db.prepare('UPDATE agents SET last_updated_ms = last_updated_ms - 60000').run()
  t.not((await list()).data[0].lastUpdated, before, 'a change is seen')

  // An unchanged check-in only writes its time; the answer may be kept, its rows are current.
  const kept = (await list()).data[0].lastUpdated
  t.equal((await checkIn(app, agent.credential, hostState([mouse]))).statusCode, 200)
  await app.services.gateway.flushHeartbeats()
  const now = await list()
  t.equal(now.recordsFiltered, 1)
  t.ok(Date.parse(now.data[0].lastUpdated) > Date.parse(kept), 'the new check-in time shows')
  const byTime = await call(app, token, { method: 'GET', url: `/prime/webui/agents?LastUpdated=${encodeURIComponent(now.data[0].lastUpdated)}` })
  t.equal(byTime.json().recordsFiltered, 1, 'lists by check-in time are read afresh')
})
