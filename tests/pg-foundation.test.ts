// PostgreSQL's foundation (db/postgres): migrations run once however many processes start
// together, and the unit of work commits, rolls back, joins and says when it committed.
import { spawn } from 'node:child_process'
import path from 'node:path'
import pg from 'pg'
import t from 'tap'
import { connectPostgres, pgMigrationFiles } from '../db/postgres/index.js'
import { projectRoot } from '../lib/paths.js'
import { TS_LOADER } from './helpers.js'
import { noPostgres, pgTestDatabase, testDatabaseUrl } from './pg.js'

t.test('four processes started together on an empty database: each migration runs once', { skip: noPostgres }, async (t) => {
  // An empty database of the test's own (not the template: nothing migrated yet).
  const admin = new pg.Client({ connectionString: testDatabaseUrl })
  await admin.connect()
  const name = `prime_test_empty_${process.pid}`
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
  t.teardown(async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
  })
  const url = new URL(testDatabaseUrl!)
  url.pathname = `/${name}`
  const script = path.join(projectRoot, 'tests', 'fixtures', 'pg', 'migrate-once.ts')
  const runs = await Promise.all(
    [1, 2, 3, 4].map(
      () =>
        new Promise<{ version: number; applied: number[] }>((resolve, reject) => {
          const child = spawn(process.execPath, [...TS_LOADER, script, url.toString()], { stdio: ['ignore', 'pipe', 'pipe'] })
          let out = ''
          let err = ''
          child.stdout.on('data', (c) => (out += c))
          child.stderr.on('data', (c) => (err += c))
          child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`exit ${code}: ${err}`))))
        }),
    ),
  )
  const latest = pgMigrationFiles().length
  t.same(
    runs.map((r) => r.version),
    [latest, latest, latest, latest],
    'every process ends at the latest version',
  )
  const applied = runs.flatMap((r) => r.applied).sort((a, b) => a - b)
  t.same(
    applied,
    Array.from({ length: latest }, (_, i) => i + 1),
    'each migration was applied by exactly one process',
  )
  const db = connectPostgres(url.toString(), { max: 1 })
  t.teardown(() => db.close())
  t.equal(await db.value('SELECT count(*) FROM schema_migrations'), latest, 'one row per migration')
})

t.test('the unit of work', { skip: noPostgres }, async (t) => {
  const db = await pgTestDatabase(t)
  await db.run('CREATE TABLE uow_probe (id bigint PRIMARY KEY, note text)')

  await t.test('commits, and runs what waits for the commit after it', async (t) => {
    const seen: string[] = []
    await db.uow.run(async () => {
      await db.run('INSERT INTO uow_probe VALUES (1, $1)', ['one'])
      t.ok(db.uow.afterCommit(() => seen.push('committed')))
      t.same(seen, [], 'not before the commit')
      // Outside the unit (another connection of the pool), the row is not seen yet.
      const other = await db.pool.query('SELECT count(*)::int AS n FROM uow_probe')
      t.equal(other.rows[0].n, 0, 'not visible outside the unit before the commit')
    })
    t.same(seen, ['committed'])
    t.equal(await db.value('SELECT note FROM uow_probe WHERE id = 1'), 'one')
    t.notOk(
      db.uow.afterCommit(() => {}),
      'outside a unit: false',
    )
  })

  await t.test('rolls back on an error, and what waited for the commit never runs', async (t) => {
    let ran = false
    await t.rejects(
      db.uow.run(async () => {
        await db.run('INSERT INTO uow_probe VALUES (2, $1)', ['two'])
        db.uow.afterCommit(() => (ran = true))
        throw new Error('no')
      }),
      /no/,
    )
    t.notOk(ran)
    t.equal(await db.value('SELECT count(*) FROM uow_probe WHERE id = 2'), 0)
  })

  await t.test('a unit opened inside another joins it', async (t) => {
    await t.rejects(
      db.uow.run(async () => {
        await db.uow.run(async () => db.run('INSERT INTO uow_probe VALUES (3, $1)', ['three']))
        throw new Error('outer fails')
      }),
    )
    t.equal(await db.value('SELECT count(*) FROM uow_probe WHERE id = 3'), 0, 'the inner unit went with the outer')
  })

  await t.test('concurrent units each get a client of their own', async (t) => {
    await Promise.all([10, 11, 12, 13, 14].map((id) => db.uow.run(async () => db.run('INSERT INTO uow_probe VALUES ($1, $2)', [id, `n${id}`]))))
    t.equal(await db.value('SELECT count(*) FROM uow_probe WHERE id BETWEEN 10 AND 14'), 5)
  })

  await t.test('a deadlock between two units: the loser runs again and both land', async (t) => {
    await db.run("INSERT INTO uow_probe VALUES (20, 'a'), (21, 'b')")
    let attempts = 0
    let bothIn!: () => void
    let arrived = 0
    const gate = new Promise<void>((resolve) => (bothIn = resolve))
    const cross = (first: number, second: number) =>
      db.uow.run(async () => {
        attempts++
        await db.run("UPDATE uow_probe SET note = note || '+' WHERE id = $1", [first])
        if (++arrived === 2) bothIn()
        await gate
        await db.run("UPDATE uow_probe SET note = note || '+' WHERE id = $1", [second])
      })
    await Promise.all([cross(20, 21), cross(21, 20)])
    // PostgreSQL aborts one of the two: 3 attempts. A loaded CI machine once counted more
    // (which retry it was did not show); what must hold is that the loser ran again and both landed.
    t.ok(attempts >= 3 && attempts <= 6, `a unit ran again (${attempts} attempts in all)`)
    t.same(await db.query('SELECT id, note FROM uow_probe WHERE id IN (20, 21) ORDER BY id'), [
      { id: 20, note: 'a++' },
      { id: 21, note: 'b++' },
    ])
  })

  await t.test('int8 and numeric come back as numbers', async (t) => {
    t.same(await db.one('SELECT count(*) AS n, sum(id) AS s, 9007199254740991::bigint AS big FROM uow_probe'), { n: 8, s: 20 + 21 + 1 + 10 + 11 + 12 + 13 + 14, big: 9007199254740991 })
  })
})
