// Commands and the catalogue on PostgreSQL (db/postgres/commands.ts, catalogue.ts) against
// SQLite's (db/commands.ts, catalogue.ts): the same calls answer alike and leave the same rows.
import t from 'tap'
import { catalogueRepo } from '../db/catalogue.js'
import { commandsRepo } from '../db/commands.js'
import { pgCatalogueRepo } from '../db/postgres/catalogue.js'
import { pgCommandsRepo } from '../db/postgres/commands.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { tempDb } from './helpers.js'
import { noPostgres, pgTestDatabase } from './pg.js'

type Row = Record<string, unknown>

async function sides(t: Tap.Test) {
  const { db } = tempDb(t)
  const pg = await pgTestDatabase(t)
  const uow = sqliteUnitOfWork(db)
  const agents = `INSERT INTO agents (id, uuid, machine_id, enrolled_ms, host_identifier) VALUES (1, 'u1', 'm1', 1, 'H1'), (2, 'u2', 'm2', 1, 'H2')`
  db.exec(agents)
  await pg.run(agents)
  return [
    {
      commands: asyncPort(commandsRepo(db), uow),
      catalogue: asyncPort(catalogueRepo(db), uow),
      rows: async (sql: string) => db.prepare(sql).all() as Row[],
      exec: async (sql: string) => void db.exec(sql),
    },
    { commands: pgCommandsRepo(pg), catalogue: pgCatalogueRepo(pg), rows: (sql: string) => pg.query(sql), exec: async (sql: string) => void (await pg.run(sql)) },
  ]
}

t.test('commands on both backends', { skip: noPostgres }, async (t) => {
  const [sqlite, pg] = await sides(t)
  async function both(step: string, fn: (s: typeof sqlite) => Promise<unknown>) {
    const a = await fn(sqlite)
    const b = await fn(pg)
    t.same(b, a, `${step}: answers`)
    for (const table of ['agent_commands', 'agent_debug_logs'])
      t.same(await pg.rows(`SELECT * FROM ${table} ORDER BY id`), await sqlite.rows(`SELECT * FROM ${table} ORDER BY id`), `${step}: ${table}`)
  }
  await both('nothing yet', async (s) => [
    await s.commands.open(1, 'SetMode'),
    await s.commands.pending(1),
    await s.commands.ofAgent(1),
    await s.commands.latestDebugLogs(1),
    await s.commands.cancelPending(1, 5, 'none'),
  ])
  await both('queued', async (s) => [
    await s.commands.queue(1, 'SetMode', { mode: 'Armed' }, 10, 'alice'),
    await s.commands.queue(1, 'UpdatePolicy', {}, 11, 'x'.repeat(150)),
    await s.commands.queue(1, 'SetMode', { mode: 'Free' }, 12, 'bob'),
    await s.commands.queue(2, 'FetchDebugLogs', {}, 13, 'bob'),
  ])
  await both('open, pending, ofAgent', async (s) => [await s.commands.open(1, 'SetMode'), await s.commands.open(1, 'UpdateAgent'), await s.commands.pending(1), await s.commands.ofAgent(1)])
  await both('cancelled by type, then all', async (s) => {
    await s.exec(`UPDATE agent_commands SET status = 'Delivered', delivered_ms = 20 WHERE id = 1`)
    return [await s.commands.cancelPending(1, 30, 'superseded', 'SetMode'), await s.commands.cancelPending(1, 31, 'r'.repeat(1200)), await s.commands.cancelPending(1, 32, 'again')]
  })
  await both('many finished: the latest twenty shown after the open ones', async (s) => {
    for (let i = 0; i < 25; i++) await s.commands.queue(1, 'UpdateAgent', { n: i }, 40 + i, 'carol')
    await s.commands.cancelPending(1, 70, 'bulk')
    await s.commands.queue(1, 'UpdateAgent', {}, 80, 'carol')
    return s.commands.ofAgent(1)
  })
  await both('debug logs: the latest', async (s) => {
    await s.exec(`INSERT INTO agent_debug_logs (agent_id, command_id, created_ms, content) VALUES (2, 4, 90, 'first'), (2, 4, 91, 'second')`)
    return [await s.commands.latestDebugLogs(2), await s.commands.latestDebugLogs(1)]
  })
})

t.test('the catalogue on both backends', { skip: noPostgres }, async (t) => {
  const [sqlite, pg] = await sides(t)
  // Inserted entries have random ids: compared without them, and found again by key.
  const withoutId = (r: unknown): unknown => (Array.isArray(r) ? r.map(withoutId) : r && typeof r === 'object' && 'id' in r ? { ...(r as Row), id: 'id' } : r)
  async function both(step: string, fn: (s: typeof sqlite) => Promise<unknown>) {
    const a = await fn(sqlite)
    const b = await fn(pg)
    t.same(withoutId(b), withoutId(a), `${step}: answers`)
    t.same(
      (await pg.rows('SELECT * FROM catalogue ORDER BY created_ms, kind, vid, pid')).map(withoutId),
      (await sqlite.rows('SELECT * FROM catalogue ORDER BY created_ms, kind, vid, pid')).map(withoutId),
      `${step}: rows`,
    )
  }
  t.same(await pg.catalogue.all(), await sqlite.catalogue.all(), 'the built-in entries, ids and all')
  await both('built in: all, count, byId, byKey, absent ones', async (s) => [
    await s.catalogue.all(),
    await s.catalogue.count(),
    await s.catalogue.byId('7e4b2c90-3a6d-4f85-b1c7-0d9e8a5f3b62'),
    await s.catalogue.byId('nope'),
    await s.catalogue.byKey('KnownAttackTool', '0483', '5740'),
    await s.catalogue.byKey('VulnerableDevice', '0483', '5740'),
  ])
  const entry = { kind: 'VulnerableDevice' as const, vid: '0483', pid: '5740', name: 'Both kinds', vulnerability: null, severity: 1, reference: 'https://example.com', created_by: 'alice' }
  await both('inserted, a second kind of one model; a lower-case VID sorts after', async (s) => [
    await s.catalogue.insert(entry, 100),
    await s.catalogue.insert({ ...entry, kind: 'KnownAttackTool', vid: 'abcd', pid: '0001' }, 101),
    await s.catalogue.all(),
    await s.catalogue.count(),
  ])
  await both('a duplicate is refused', async (s) =>
    s.catalogue.insert(entry, 102).then(
      () => 'inserted',
      () => 'refused',
    ),
  )
  await both('removed, then not found', async (s) => {
    const id = (await s.catalogue.byKey('VulnerableDevice', '0483', '5740'))!.id
    return [await s.catalogue.remove(id), await s.catalogue.remove(id), await s.catalogue.byId(id)]
  })
})
