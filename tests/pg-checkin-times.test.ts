// Check-in times on PostgreSQL (migration 011): writing an agent's check-in time is a HOT
// update of its row (no index holds the time), agent_checkins keeps each agent's time and
// connection equal to the row's for the sweeper's and the insights' reads by time, and the
// migration converts a database that already has agents.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import t from 'tap'
import { pgGatewayRepo } from '../db/postgres/gateway.js'
import { migratePostgres, pgMigrationFiles } from '../db/postgres/index.js'
import { noPostgres, pgEmptyDatabaseUrl, pgTestDatabase } from './pg.js'

const NOW = 1_800_000_000_000

/** Rows of agent_checkins that differ from their agent's (or lack one, either way). */
const UNEQUAL = `SELECT count(*)::int AS n FROM agents a FULL JOIN agent_checkins c ON c.agent_id = a.id
  WHERE a.id IS NULL OR c.agent_id IS NULL OR a.last_updated_ms IS DISTINCT FROM c.last_updated_ms OR (a.connection_status = 'Connected') <> c.connected`

t.test('the migration converts the agents a database already has', { skip: noPostgres }, async (t) => {
  const url = await pgEmptyDatabaseUrl(t)
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  t.teardown(() => client.end())
  const before = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-pg-migrations-'))
  t.teardown(() => fs.rmSync(before, { recursive: true, force: true }))
  const files = pgMigrationFiles()
  const at = files.findIndex((f) => f.name === 'checkin_times_hot')
  for (const f of files.slice(0, at)) fs.copyFileSync(f.file, path.join(before, path.basename(f.file)))
  await migratePostgres(client, before)
  await client.query(`INSERT INTO agents (uuid, machine_id, enrolled_ms, host_identifier, connection_status, last_updated_ms)
    SELECT 'u' || i, 'm' || i, 1, 'H' || i, CASE WHEN i % 3 = 0 THEN 'Disconnected' ELSE 'Connected' END, CASE WHEN i % 5 = 0 THEN NULL ELSE ${NOW} + i END
    FROM generate_series(1, 50) i`)
  await migratePostgres(client)
  t.equal((await client.query(UNEQUAL)).rows[0].n, 0, 'every agent has its time and connection in agent_checkins')
  t.equal((await client.query('SELECT count(*)::int AS n FROM agent_checkins WHERE connected')).rows[0].n, 34)
  const indexed = await client.query(`SELECT indexname FROM pg_indexes WHERE tablename = 'agents' AND indexdef LIKE '%last_updated_ms%'`)
  t.same(indexed.rows, [], 'no index of agents holds the check-in time')
  const options = await client.query(`SELECT reloptions FROM pg_class WHERE relname = 'agents'`)
  t.match(options.rows[0].reloptions, ['fillfactor=70'], 'pages keep room for a HOT update')
})

t.test('a check-in time is a HOT update; agent_checkins follows every write of the time or the connection', { skip: noPostgres }, async (t) => {
  const db = await pgTestDatabase(t)
  const repo = pgGatewayRepo(db)
  const ids: number[] = []
  for (let i = 0; i < 4; i++)
    ids.push(
      await repo.insertAgent({
        uuid: `00000000-0000-4000-8000-00000000000${i}`,
        machineId: `machine-${i}`,
        credentialHash: `hash-${i}`,
        enrolledMs: NOW,
        hostIdentifier: `HOST-${i}`,
        licenseStatus: 'Activated',
        expirationMs: null,
        licenseAccountName: '',
        checkInSeconds: 60,
      }),
    )
  t.equal((await db.one<{ n: number }>(UNEQUAL))!.n, 0, 'an enrolled agent has its row, no time yet')
  await db.run(`UPDATE agents SET connection_status = 'Connected', last_updated_ms = $1`, [NOW])

  // The backend's counts not yet reported (earlier transactions' too), before and after.
  const counts = () => db.one<{ upd: number; hot: number }>(`SELECT n_tup_upd::int AS upd, n_tup_hot_upd::int AS hot FROM pg_stat_xact_user_tables WHERE relname = 'agents'`)
  const stats = await db.uow.run(async () => {
    const before = (await counts())!
    await repo.heartbeats([
      [ids[0], NOW + 1000],
      [ids[1], NOW + 2000],
      [ids[2], NOW - 5000],
    ])
    const after = (await counts())!
    return { upd: after.upd - before.upd, hot: after.hot - before.hot }
  })
  t.same(stats, { upd: 3, hot: 3 }, 'the three check-in times are HOT updates of the agents (an earlier time keeps the later one)')
  t.equal((await db.one<{ n: number }>(UNEQUAL))!.n, 0)
  t.equal((await db.one<{ t: number }>('SELECT last_updated_ms AS t FROM agent_checkins WHERE agent_id = $1', [ids[1]]))!.t, NOW + 2000)

  // The sweeper reads the quiet ones through agent_checkins: the oldest first, then by status and id.
  await db.run('UPDATE agents SET last_updated_ms = $1 WHERE id = $2', [NOW - 60_000, ids[3]])
  await db.run(`UPDATE agents SET display_status = 'Free' WHERE id = $1`, [ids[2]])
  const stale = await repo.staleAgents(NOW + 1500, 10)
  t.same(
    stale.map((a) => [a.id, a.last_updated_ms]),
    [
      [ids[3], NOW - 60_000],
      [ids[2], NOW],
      [ids[0], NOW + 1000],
    ],
  )
  const gone = await repo.disconnectMany([ids[3], ids[2]], NOW + 1500, 'quiet')
  t.same(
    gone.map((a) => a.id),
    [ids[3], ids[2]],
  )
  t.same(
    (await repo.staleAgents(NOW + 1500, 10)).map((a) => a.id),
    [ids[0]],
    'disconnected agents leave the sweeper’s walk',
  )
  t.equal((await db.one<{ n: number }>(UNEQUAL))!.n, 0)

  await db.run('DELETE FROM agents WHERE id = $1', [ids[0]])
  t.equal((await db.one<{ n: number }>('SELECT count(*)::int AS n FROM agent_checkins'))!.n, 3, 'a deleted agent takes its row along')
})
