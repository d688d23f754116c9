// backend: sqlite-only — SQLite's trigram indexes, interned texts and risk indexes
// A global search whose candidates are read from the trigram indexes and the interned
// texts, and the risk order read from the risk indexes (rare models folded in by the
// query), answer exactly what matching and sorting every row would.
import t from 'tap'
import { build } from './helpers.js'
import { insertAgent, insertPeripheral } from './fixtures/fleet.js'
import { assetsRepo, SOURCES } from '../db/assets.js'
import type { AssetQuery, AssetRow } from '../lib/assets/ports.js'
import { contains } from '../db/sql.js'

/** LIKE's case folding: ASCII letters only. */
const fold = (s: string) => s.replace(/[A-Z]/g, (c) => c.toLowerCase())

t.test('indexed global search and risk order match a reading of every row', async (t) => {
  const app = await build(t)
  const a1 = insertAgent(app, { host_identifier: 'NYC-Finance-WS00017', pc_model: 'OptiPlex 7090', manufacturer: 'Dell Inc.', local_ip_address: '10.44.7.19', severity: 2 })
  const a2 = insertAgent(app, { host_identifier: 'LDN-HR-LT00002', pc_model: 'ThinkPad T14', manufacturer: 'LENOVO', local_ip_address: '192.168.99.3', has_attack_tool: 1 })
  const a3 = insertAgent(app, { host_identifier: 'DESKTOP-Q7XZ1AB', pc_model: null, manufacturer: null, local_ip_address: null, nics_text: 'Wi-Fi||F4-26-79-AA-BB-CC||||Down' })
  insertPeripheral(app, a1.id, { vid: '0483', pid: '5740', gui_pid: 'STM32 Virtual COM Port', gui_vid: 'STMicroelectronics', severity: 6 })
  insertPeripheral(app, a1.id, { vid: '046D', pid: 'C52B', is_vulnerable: 1 })
  insertPeripheral(app, a2.id, { vid: '0483', pid: '5740', gui_pid: null, caption: null, description: 'Serial Bridge Zeta', gui_vid: null, manufacturer: 'Acme Widgets', is_unapproved: 1 })
  insertPeripheral(app, a2.id, { vid: '1D6B', pid: '0104', gui_pid: null, caption: null, description: null, serial_number: 'SER"QUOTE%_1', present: 0, is_attack_tool: 1 })
  insertPeripheral(app, a3.id, { vid: '1915', pid: '0102' })
  // A base risk below the rare risk (the fixture derives the flags from the catalogue).
  app.db.prepare("UPDATE peripherals SET severity = 5, is_attack_tool = 0, is_vulnerable = 0, is_unapproved = 0 WHERE vid = '1915'").run()
  app.db
    .prepare(`INSERT INTO agentless_connections (name, address, protocol, port, user_name, credential_type, credentials, credentials_updated_ms, created_ms, updated_ms, status)
    VALUES ('db-finance-01', '10.44.8.1', 'SSH', 22, 'root', 'Password', x'00', 1, 1, 1, 'Reachable')`)
    .run()
  const repo = assetsRepo(app.db)
  const rare = ['0483:5740', '1915:0102']
  const everything = (q: AssetQuery, field: 'firstSeen' | 'riskLevel') => repo.page(q, { field, direction: field === 'riskLevel' ? 'desc' : 'asc' }, 1000, 0).rows
  const all = everything({ filters: [], system: [], rare }, 'firstSeen')
  const nics = new Map((app.db.prepare('SELECT uuid, nics_text FROM agents').all() as { uuid: string; nics_text: string | null }[]).map((r) => [r.uuid, r.nics_text]))
  const texts = (r: AssetRow) => [r.name, r.key, r.ip_address, r.model, r.vendor, r.source === 'agent' ? nics.get(r.key) : null]
  const uuidPart = a2.uuid.slice(9, 18).toUpperCase()

  // A term from each text an asset is searched by, in another case, and terms no index holds as they are.
  const terms = [
    'finance',
    'nyc-FIN',
    '10.44',
    '.168.99',
    'optiplex',
    'lenovo',
    'f4-26-79',
    'stm32 virtual',
    'STMICRO',
    'zeta',
    'acme wid',
    'vid_1d6b',
    'SER"QUOTE%_',
    uuidPart,
    'no such text',
    'q7x',
    'é',
    '/usb',
    'ab',
    'c',
  ]
  for (const term of terms) {
    const expected = all.filter((r) => texts(r).some((x) => x !== null && x !== undefined && fold(x).includes(fold(term)))).map((r) => r.key)
    const got = repo.page({ filters: [], system: [], rare, search: contains(term) }, { field: 'firstSeen', direction: 'asc' }, 1000, 0)
    t.same(
      got.rows.map((r) => r.key),
      expected,
      `"${term}" finds ${expected.length}`,
    )
    t.equal(got.filtered, expected.length, `"${term}" counts ${expected.length}`)
  }
  t.ok(terms.filter((x) => all.some((r) => texts(r).some((y) => y && fold(y).includes(fold(x))))).length >= 14, 'most terms find something')

  // Risk order: level, then source, then id, all descending; the rare models' peripherals at least the rare risk.
  const byRisk = [...all].sort((x, y) => y.risk_level - x.risk_level || SOURCES.indexOf(y.source) - SOURCES.indexOf(x.source) || y.rowid - x.rowid)
  t.same(
    everything({ filters: [], system: [], rare }, 'riskLevel').map((r) => [r.key, r.risk_level]),
    byRisk.map((r) => [r.key, r.risk_level]),
  )
  t.ok(
    all.some((r) => r.vid === '1915' && r.risk_level === 5),
    'a rare model of a low base risk is read at the rare risk',
  )
  // Paged by one, each page from where the last ended: the same order.
  const paged: string[] = []
  for (let offset = 0; offset < all.length; offset++) paged.push(...repo.page({ filters: [], system: [], rare }, { field: 'riskLevel', direction: 'desc' }, 1, offset).rows.map((r) => r.key))
  t.same(
    paged,
    byRisk.map((r) => r.key),
  )
  // A riskLevel list the agents' index serves: the same assets as the levels filtered row by row.
  const levels = [1, 9]
  t.same(
    everything({ filters: [[{ field: 'riskLevel', op: 'in', values: levels }]], system: [], rare }, 'riskLevel').map((r) => r.key),
    byRisk.filter((r) => levels.includes(r.risk_level)).map((r) => r.key),
  )
})
