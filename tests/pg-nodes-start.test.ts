// Three server processes started at once on an empty PostgreSQL database: the schema is
// migrated by one of them (the others wait for its advisory lock and find nothing to do),
// and every node then serves, with the secrets given as settings shared by all.
import t from 'tap'
import { connectPostgres, pgMigrationFiles } from '../db/postgres/index.js'
import { allReady, loginAt, request, startNodes } from './fixtures/nodes.js'
import { noPostgres, pgEmptyDatabaseUrl } from './pg.js'

t.test('three nodes started together on an empty database: one migration run, all serve', { skip: noPostgres }, async (t) => {
  const url = await pgEmptyDatabaseUrl(t)
  const nodes = await startNodes(t, url, 3)
  for (const n of nodes) t.match(n.output(), /Server listening/, `node ${n.name} listens`)
  await allReady(nodes)

  const db = connectPostgres(url, { max: 1 })
  t.teardown(() => db.close())
  const files = pgMigrationFiles()
  const rows = await db.query<{ version: number; n: number }>('SELECT version, count(*)::int AS n FROM schema_migrations GROUP BY version ORDER BY version')
  t.same(
    rows.map((r) => r.version),
    files.map((f) => f.version),
    'every migration applied',
  )
  t.ok(
    rows.every((r) => r.n === 1),
    'each once',
  )
  t.equal(Number(await db.value("SELECT count(*) FROM users WHERE user_name = 'admin'")), 1, 'the first account made once')
  t.equal(Number(await db.value('SELECT count(*) FROM secrets')), 0, 'no secret generated: all came from the settings')
  for (const n of nodes) t.notMatch(n.output(), /migration .* failed|already exists/, `node ${n.name} met no failed migration`)

  // Each node signs tokens every other node accepts: the signing key is shared.
  const token = await loginAt(nodes[0])
  for (const n of nodes) {
    const res = await request(n, 'GET', '/prime/webui/admin/getuserdetails', { token })
    t.equal(res.status, 200, `node ${n.name} accepts a token node a signed`)
  }
})
