// The unit of work over one SQLite connection (db/unit-of-work.ts): one transaction at a
// time, known by its async context; other contexts' port calls wait for it to end.
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'

function setup() {
  const db = openDatabase(':memory:')
  db.exec('CREATE TABLE things (id INTEGER PRIMARY KEY, name TEXT NOT NULL)')
  const uow = sqliteUnitOfWork(db)
  const repo = {
    add: (name: string) => Number(db.prepare('INSERT INTO things (name) VALUES (?)').run(name).lastInsertRowid),
    names: () => (db.prepare('SELECT name FROM things ORDER BY id').all() as { name: string }[]).map((r) => r.name),
    inTransaction: () => db.inTransaction,
  }
  return { db, uow, things: asyncPort(repo, uow) }
}

t.test('a unit commits when its work resolves and rolls back when it throws', async (t) => {
  const { uow, things } = setup()
  await uow.run(async () => {
    await things.add('a')
    t.equal(await things.inTransaction(), true)
  })
  await t.rejects(
    uow.run(async () => {
      await things.add('b')
      throw new Error('no')
    }),
    /no/,
  )
  t.same(await things.names(), ['a'])
  t.equal(await things.inTransaction(), false)
})

t.test('a unit opened inside another joins it', async (t) => {
  const { uow, things } = setup()
  await t.rejects(
    uow.run(async () => {
      await uow.run(() => things.add('inner'))
      await things.add('outer')
      throw new Error('undo both')
    }),
  )
  t.same(await things.names(), [])
})

t.test("another context's port call waits for the open unit, and never joins it", async (t) => {
  const { uow, things } = setup()
  for (let round = 0; round < 3; round++) {
    // Several rounds: the context tracking is turned off between units and on again.
    const order: string[] = []
    const unit = uow.run(async () => {
      await things.add(`unit-${round}`)
      order.push('unit wrote')
      await Promise.resolve()
      await Promise.resolve()
      throw new Error('rolled back')
    })
    const other = (async () => {
      await Promise.resolve()
      const id = await things.add(`other-${round}`)
      order.push('other wrote')
      return id
    })()
    await t.rejects(unit)
    await other
    t.same(order, ['unit wrote', 'other wrote'], 'the other waited for the unit to end')
  }
  t.same(await things.names(), ['other-0', 'other-1', 'other-2'], "the rolled-back units took no other context's write with them")
})

t.test('two units started in the same turn run one after the other', async (t) => {
  const { uow, things } = setup()
  await Promise.all([uow.run(() => things.add('x')), uow.run(() => things.add('y'))])
  t.same(await things.names(), ['x', 'y'])
})

t.test('a unit that waits for I/O while open is refused and rolled back', async (t) => {
  const { uow, things } = setup()
  await t.rejects(
    uow.run(async () => {
      await things.add('slow')
      await new Promise((resolve) => setTimeout(resolve, 5))
    }),
    /waited for I\/O/,
  )
  t.same(await things.names(), [])
})

t.test('afterCommit runs after a commit only, and answers false outside a unit', async (t) => {
  const { uow, things } = setup()
  const ran: string[] = []
  t.equal(
    uow.afterCommit(() => ran.push('outside')),
    false,
  )
  await uow.run(async () => {
    await things.add('a')
    t.equal(
      uow.afterCommit(() => ran.push('committed')),
      true,
    )
    t.same(ran, [], 'not before the commit')
  })
  await t.rejects(
    uow.run(async () => {
      uow.afterCommit(() => ran.push('rolled back'))
      throw new Error('no')
    }),
  )
  t.same(ran, ['committed'])
})
