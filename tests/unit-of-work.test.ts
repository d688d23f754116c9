// backend: sqlite-only — the unit of work over one SQLite connection (db/unit-of-work.ts); PostgreSQL's: tests/pg-foundation.test.ts
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

/** Holds the event loop for `ms`, as a unit's statements do. */
function busy(ms: number) {
  const end = Date.now() + ms
  while (Date.now() < end);
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

t.test('units queued behind one another each begin in a turn of the loop of their own, in the order they came', async (t) => {
  // A burst of units (enrollments arriving together) must not hold the loop for all of them
  // in one turn: timers due meanwhile run between them.
  const { uow, things } = setup()
  const log: string[] = []
  const ticker = setInterval(() => log.push('timer'), 1)
  await Promise.all(
    Array.from({ length: 6 }, (_, i) =>
      uow.run(async () => {
        log.push(`unit ${i}`)
        await things.add(`u${i}`)
        busy(3)
      }),
    ),
  )
  clearInterval(ticker)
  const units = log.flatMap((l, i) => (l === 'timer' ? [] : [i]))
  t.ok(
    units.every((at, k) => k === 0 || at > units[k - 1] + 1),
    `a timer (every millisecond) ran between each two units: ${log.join(', ')}`,
  )
  t.same(
    log.filter((l) => l !== 'timer'),
    Array.from({ length: 6 }, (_, i) => `unit ${i}`),
    'in the order they came',
  )
  t.same(await things.names(), ['u0', 'u1', 'u2', 'u3', 'u4', 'u5'])
})

t.test('units that each find the connection free stop for the loop once a turn has run 20 ms of them', async (t) => {
  // Requests read in one poll phase each begin their unit at once (the one before has
  // committed): without a budget per turn, ten of them held the loop for all ten.
  const { uow, things } = setup()
  const log: string[] = []
  const ticker = setInterval(() => log.push('timer'), 1)
  // Immediates queued together run in one check phase, each after the last one's microtasks.
  const done = await new Promise<Promise<void>[]>((resolve) => {
    const started: Promise<void>[] = []
    for (let i = 0; i < 8; i++)
      setImmediate(() => {
        started.push(
          uow.run(async () => {
            log.push(`unit ${i}`)
            await things.add(`u${i}`)
            busy(8)
          }),
        )
        if (started.length === 8) resolve(started)
      })
  })
  await Promise.all(done)
  clearInterval(ticker)
  const runs = log
    .join(',')
    .split('timer')
    .map((between) => between.split(',').filter(Boolean).length)
  t.ok(Math.max(...runs) <= 3, `at most three 8 ms units between two timers: ${log.join(', ')}`)
  t.same(
    log.filter((l) => l !== 'timer'),
    Array.from({ length: 8 }, (_, i) => `unit ${i}`),
    'in the order they came',
  )
  t.same(await things.names(), ['u0', 'u1', 'u2', 'u3', 'u4', 'u5', 'u6', 'u7'])
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

/** The SQL the unit of work runs on the connection, in order. */
function watchExec(db: ReturnType<typeof setup>['db']) {
  const log: string[] = []
  const exec = db.exec.bind(db)
  db.exec = (sql: string) => {
    log.push(sql)
    return exec(sql)
  }
  return log
}

t.test('grouped units started together share one transaction, and every caller is answered after its COMMIT', async (t) => {
  const { db, uow, things } = setup()
  const log = watchExec(db)
  const answers = ['a', 'b', 'c', 'd'].map((name) =>
    uow
      .runGrouped(async () => {
        await things.add(name)
        return name
      })
      .then((v) => {
        log.push(`answered ${v}`)
        t.equal(db.inTransaction, false, 'committed by then')
        return v
      }),
  )
  t.same(await Promise.all(answers), ['a', 'b', 'c', 'd'])
  t.equal(log.filter((s) => s === 'BEGIN IMMEDIATE').length, 1, 'one transaction')
  t.equal(log.filter((s) => s === 'COMMIT').length, 1, 'one commit')
  t.equal(log.filter((s) => s.startsWith('SAVEPOINT')).length, 4, 'a savepoint each')
  t.ok(log.indexOf('COMMIT') < log.findIndex((s) => s.startsWith('answered')), 'nobody is answered before the commit')
  t.same(await things.names(), ['a', 'b', 'c', 'd'])
})

t.test('a group whose units take long commits once its time is spent; the rest make the next group, in order, a turn of the loop later', async (t) => {
  const { db, uow, things } = setup()
  const log = watchExec(db)
  const ticker = setInterval(() => log.push('timer'), 1)
  const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h']
  const answers = names.map((name) =>
    uow.runGrouped(async () => {
      await things.add(name)
      busy(8)
      return name
    }),
  )
  t.same(await Promise.all(answers), names)
  clearInterval(ticker)
  const commits = log.filter((s) => s === 'COMMIT').length
  t.ok(commits >= 3, `several groups (each about 20 ms of work), got ${commits}`)
  const begins = log.flatMap((s, i) => (s === 'BEGIN IMMEDIATE' ? [i] : []))
  t.ok(
    begins.every((at, k) => k === 0 || log.slice(begins[k - 1], at).includes('timer')),
    'a timer ran between each two groups',
  )
  t.same(await things.names(), names, 'every unit committed, in the order they came')
})

t.test('a grouped unit that throws, or waits for I/O, is rolled back alone', async (t) => {
  const { uow, things } = setup()
  const results = await Promise.allSettled([
    uow.runGrouped(() => things.add('kept-1')),
    uow.runGrouped(async () => {
      await things.add('undone')
      throw new Error('this one fails')
    }),
    uow.runGrouped(async () => {
      await things.add('slow')
      await new Promise((resolve) => setTimeout(resolve, 5))
    }),
    uow.runGrouped(() => things.add('kept-2')),
  ])
  t.same(
    results.map((r) => r.status),
    ['fulfilled', 'rejected', 'rejected', 'fulfilled'],
  )
  t.match((results[2] as PromiseRejectedResult).reason, /waited for I\/O/)
  t.same(await things.names(), ['kept-1', 'kept-2'])
})

t.test("another context's call waits for the group's commit; afterCommit in a grouped unit runs after it; plain units still work between", async (t) => {
  const { db, uow, things } = setup()
  const log = watchExec(db)
  const ran: string[] = []
  let began!: () => void
  const running = new Promise<void>((resolve) => (began = resolve))
  const grouped = uow.runGrouped(async () => {
    began()
    await things.add('g')
    uow.afterCommit(() => ran.push(`after commit, in transaction: ${db.inTransaction}`))
  })
  const other = (async () => {
    await running
    const inTx = await things.inTransaction()
    log.push('other read')
    return inTx
  })()
  await grouped
  t.equal(await other, false, 'the other context ran outside the group transaction')
  t.ok(log.indexOf('COMMIT') < log.indexOf('other read'))
  t.same(ran, ['after commit, in transaction: false'])
  await uow.run(() => things.add('plain'))
  await Promise.all([uow.runGrouped(() => things.add('g2')), uow.run(() => things.add('plain2')), uow.runGrouped(() => things.add('g3'))])
  t.same((await things.names()).sort(), ['g', 'g2', 'g3', 'plain', 'plain2'])
  t.equal(db.inTransaction, false)
})

t.test('while grouped units wait for their group, no transaction is open: a statement run directly on the connection meanwhile is neither taken in nor undone', async (t) => {
  const { db, uow, things } = setup()
  const failing = uow.runGrouped(async () => {
    await things.add('undone')
    throw new Error('this one fails')
  })
  // What another callback (a request's hook writing without a port) would do meanwhile.
  t.equal(db.inTransaction, false, 'nothing open once the callers have their promises')
  db.prepare(`INSERT INTO things (name) VALUES ('direct')`).run()
  await t.rejects(failing, /this one fails/)
  t.same(await things.names(), ['direct'])
})

t.test('a group whose COMMIT fails answers every one of its callers with the error, and leaves nothing', async (t) => {
  const { db, uow, things } = setup()
  const exec = db.exec.bind(db)
  let fail = true
  db.exec = (sql: string) => {
    if (sql === 'COMMIT' && fail) {
      fail = false
      throw new Error('disk I/O error')
    }
    return exec(sql)
  }
  const results = await Promise.allSettled([uow.runGrouped(() => things.add('a')), uow.runGrouped(() => things.add('b'))])
  t.same(
    results.map((r) => r.status),
    ['rejected', 'rejected'],
  )
  t.match((results[0] as PromiseRejectedResult).reason, /disk I\/O error/)
  t.equal(db.inTransaction, false)
  t.same(await things.names(), [])
  await uow.runGrouped(() => things.add('c'))
  t.same(await things.names(), ['c'], 'the next group works')
})
