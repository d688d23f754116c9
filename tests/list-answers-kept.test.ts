// Pins the kept list answers: a repeated query may be answered from memory, but never after
// anything changed, whether through the server or through another connection.
import t from 'tap'
import Database from 'better-sqlite3'
import { build, login, call } from './helpers.js'
import { insertAgent, insertPeripheral } from './fixtures/fleet.js'

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
  t.same(page.data.map((a: { hostIdentifier: string }) => a.hostIdentifier), ['KIOSK-02'], 'a renamed agent leaves the answer at once')

  const peripherals = await list('/prime/webui/peripherals?hostIdentifier=lobby')
  t.equal(peripherals.recordsFiltered, 1)
  // Another process writing the same database file (a seed run, say).
  const other = new Database(app.testConfig.dbFile)
  t.teardown(() => other.close())
  other.prepare('DELETE FROM peripherals').run()
  t.equal((await list('/prime/webui/peripherals?hostIdentifier=lobby')).recordsFiltered, 0, 'a change by another connection is seen at once')
})
