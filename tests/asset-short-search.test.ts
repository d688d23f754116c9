// backend: sqlite-only — SQLite's counts and lists of the searched texts' grams (migration 039)
// A global search of one or two characters, counted from the grams' counts and read from
// their lists of rows (or by walking an index), answers exactly what LIKE over every row
// answers: the same assets in the same order, the same count, through writes of every kind.
import fs from 'node:fs'
import path from 'node:path'
import t from 'tap'
import { build } from './helpers.js'
import { insertAgent, insertPeripheral } from './fixtures/fleet.js'
import { assetsRepo } from '../db/assets.js'
import type { AssetQuery, AssetSort } from '../lib/assets/ports.js'
import { BUILD_ASSET_GRAMS, GRAM_CAPS } from '../db/asset-grams.js'
import { migrationsDir } from '../db/migrations-dir.js'
import { contains } from '../db/sql.js'

/** A deterministic generator (mulberry32). */
function rng(seed: number) {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

const ALPHABET = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-/_%\\é '
const WORDS = ['Logitech', 'USB', 'Receiver', 'Hub', 'Zeta_Cam', '100%', 'Ésprit', 'a/b', 'q.z', 'K-9', 'x\\y', 'Mouse']

t.test('short searches answer what LIKE over every row answers, through writes', async (t) => {
  const app = await build(t)
  const random = rng(7)
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]
  const text = () => Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(WORDS)).join(' ')
  const ip = () => `10.${Math.floor(random() * 9)}.${Math.floor(random() * 99)}.${Math.floor(random() * 255)}`
  const agents: number[] = []
  const addPeripheral = (agentId: number) =>
    insertPeripheral(app, agentId, {
      vid: pick(['046D', '0483', '1D6B']),
      pid: pick(['C52B', '5740', '0104']),
      gui_pid: random() < 0.5 ? text() : null,
      caption: random() < 0.5 ? text() : null,
      description: random() < 0.5 ? text() : null,
      gui_vid: random() < 0.5 ? text() : null,
      manufacturer: random() < 0.5 ? text() : null,
      severity: Math.floor(random() * 8),
    })
  for (let i = 0; i < 24; i++) {
    const a = insertAgent(app, {
      host_identifier: `${pick(['NYC', 'ldn', 'Zrh'])}-${text()}-${i}`,
      local_ip_address: random() < 0.8 ? ip() : null,
      pc_model: random() < 0.7 ? text() : null,
      manufacturer: random() < 0.7 ? text() : null,
      nics_text: random() < 0.5 ? `Ethernet||${ip()}||Up` : null,
      severity: Math.floor(random() * 8),
    })
    agents.push(a.id)
    for (let j = Math.floor(random() * 4); j > 0; j--) addPeripheral(a.id)
  }
  app.db
    .prepare(`INSERT INTO agentless_connections (name, address, protocol, port, user_name, credential_type, credentials, credentials_updated_ms, created_ms, updated_ms, status)
    VALUES ('db-Zeta-01', '10.4.8.1', 'SSH', 22, 'root', 'Password', x'00', 1, 1, 1, 'Reachable')`)
    .run()

  const repo = assetsRepo(app.db)
  const rare = ['0483:5740']
  // Every asset holds this, and a filter takes the search off the grams: the plain reading.
  const always = [[{ field: 'firstSeen' as const, op: 'ge' as const, values: [0] as [number] }]]
  const sorts: AssetSort[] = [
    { field: 'firstSeen', direction: 'asc' },
    { field: 'riskLevel', direction: 'desc' },
    { field: 'name', direction: 'asc' },
  ]
  const tables = () => [
    app.db.prepare('SELECT src, gram, n FROM asset_grams WHERE n > 0 ORDER BY 1, 2').all(),
    app.db.prepare('SELECT r.src, r.gram, r.id FROM asset_gram_rows r JOIN asset_grams g USING (src, gram) WHERE g.posted ORDER BY 1, 2, 3').all(),
  ]
  let checked = 0
  const check = (round: string, lists = true) => {
    for (let k = 0; k < 40; k++) {
      const term = Array.from({ length: 1 + Math.floor(random() * 2) }, () => pick([...ALPHABET])).join('')
      if (term.trim().length !== term.length) continue
      const q: AssetQuery = { filters: [], system: [], rare, search: contains(term) }
      for (const sort of sorts) {
        for (const [limit, offset] of [
          [1000, 0],
          [3, 2],
        ]) {
          const got = repo.page(q, sort, limit, offset)
          const plain = repo.page({ ...q, filters: always }, sort, limit, offset)
          const ids = (p: typeof got) => p.rows.map((r) => `${r.source}:${r.rowid}`)
          if (got.filtered !== plain.filtered || ids(got).join() !== ids(plain).join()) {
            t.fail(`${round}: "${term}" by ${sort.field}_${sort.direction}, ${limit} from ${offset}`, { got: [got.filtered, ids(got)], plain: [plain.filtered, ids(plain)] })
            return
          }
          checked++
        }
      }
    }
    // What the triggers kept is what counting every row again gives.
    const kept = tables()
    app.db.exec('SAVEPOINT rebuilt')
    app.db.exec(BUILD_ASSET_GRAMS)
    const rebuilt = tables()
    app.db.exec('ROLLBACK TO rebuilt; RELEASE rebuilt')
    // (A build lists again the grams this test took off the lists: then only the counts compare.)
    t.same(lists ? kept : kept[0], lists ? rebuilt : rebuilt[0], `${round}: the counts${lists ? ' and lists' : ''} are those of a build`)
  }

  check('seeded')
  t.ok((app.db.prepare('SELECT count(*) FROM asset_grams WHERE n > 0').pluck().get() as number) > 100, 'many grams are counted')

  // New peripherals, renames, an agent's address (its peripherals' ipAddress), deletions.
  for (let i = 0; i < 10; i++) addPeripheral(pick(agents))
  app.db.prepare('UPDATE peripherals SET gui_pid = ? WHERE id = (SELECT min(id) FROM peripherals)').run('Quartz Zz9')
  app.db.prepare("UPDATE peripherals SET manufacturer = 'Acme%Corp', gui_vid = NULL WHERE id % 3 = 0").run()
  app.db.prepare('UPDATE agents SET local_ip_address = ? WHERE id = ?').run('172.31.250.9', agents[0])
  app.db.prepare('UPDATE agents SET local_ip_address = NULL WHERE id = ?').run(agents[1])
  app.db.prepare("UPDATE agents SET host_identifier = 'renamed-Qx', nics_text = 'Wi-Fi||Down' WHERE id = ?").run(agents[2])
  check('after inserts, renames and address changes')

  app.db.prepare('DELETE FROM peripherals WHERE id IN (SELECT id FROM peripherals ORDER BY id DESC LIMIT 3)').run()
  // An agent's peripherals go with it (the cascade runs after the agent's row is gone).
  app.db.prepare('DELETE FROM agents WHERE id = ?').run(agents[3])
  app.db.prepare('DELETE FROM agents WHERE id = ?').run(agents[4])
  check('after deletions')

  // Grams whose rows are not listed (held by more rows than the cap) are found by walking an index.
  app.db.exec("UPDATE asset_grams SET posted = 0 WHERE gram GLOB '*[a-m0-4]*'")
  check('with grams not listed', false)
  for (let i = 0; i < 5; i++) addPeripheral(pick(agents.slice(5)))
  app.db.prepare('UPDATE agents SET local_ip_address = ? WHERE id = ?').run('10.0.0.77', agents[6])
  const unlisted = app.db.prepare('SELECT count(*) FROM asset_gram_rows r JOIN asset_grams g USING (src, gram) WHERE NOT g.posted').pluck()
  const before = unlisted.get() as number
  app.db.prepare('DELETE FROM agents WHERE id = ?').run(agents[7])
  t.ok((unlisted.get() as number) <= before, 'rows of a gram not listed are not added')
  check('after writes with grams not listed', false)
  t.ok(checked > 0, `${checked} pages compared`)
})

t.test('a gram held by more rows than the cap stops being listed', async (t) => {
  const app = await build(t)
  const a = insertAgent(app, { host_identifier: 'H1', local_ip_address: '10.0.0.1' })
  insertPeripheral(app, a.id, { gui_pid: 'Qq Device' })
  const g = () => app.db.prepare("SELECT n, posted FROM asset_grams WHERE src = 2 AND gram = 'qq'").get() as { n: number; posted: number }
  const listed = () => app.db.prepare("SELECT count(*) FROM asset_gram_rows WHERE src = 2 AND gram = 'qq'").pluck().get() as number
  t.same(g(), { n: 1, posted: 1 })
  t.equal(listed(), 1)
  // Just under the cap, then one more peripheral.
  app.db.prepare("UPDATE asset_grams SET n = 10000 WHERE src = 2 AND gram = 'qq'").run()
  insertPeripheral(app, a.id, { gui_pid: 'Qq Device 2' })
  t.same(g(), { n: 10001, posted: 0 }, 'counted, no longer listed')
  t.equal(listed(), 0, 'its list is dropped')
})

t.test('migration 039 builds as BUILD_ASSET_GRAMS does, with the caps GRAM_CAPS says', async (t) => {
  const norm = (x: string) => x.replace(/\s+/g, ' ').trim()
  const migration = norm(fs.readFileSync(path.join(migrationsDir, '039_asset_grams.sql'), 'utf8'))
  for (const statement of BUILD_ASSET_GRAMS.split(';').map(norm)) {
    if (statement && !statement.startsWith('DELETE')) t.ok(migration.includes(statement), statement.slice(0, 60))
  }
  t.ok(migration.includes(`CASE src WHEN 0 THEN ${GRAM_CAPS.agent} ELSE ${GRAM_CAPS.peripheral} END`), 'the triggers unlist at the caps')
})
