// Singleton loops under leases on PostgreSQL: two app instances on one database run each
// singleton loop on one of them only; the other takes over when the holder closes (it
// releases its leases) and when a holder's lease expires (a holder that died).
import t from 'tap'
import { connectPostgres } from '../db/postgres/index.js'
import { build } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const SINGLETONS = ['agent-sweeper', 'agentless-sweeper', 'health-checks', 'retention']
const env = { PRIME_AGENT_ENROLLMENT_SECRET: 'pes_loop-leases-enrollment', PRIME_LOOP_LEASE_SECONDS: '1' }

type App = Awaited<ReturnType<typeof build>>
const holds = (app: App, name: string) => app.loops.list().find((l) => l.name === name)?.leaseHeld === true

async function until(what: string, ok: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out: ${what}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

t.test('one instance runs each singleton loop; the other takes over at close and at expiry', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const db = connectPostgres(url, { max: 2 })
  t.teardown(() => db.close())
  const a = await build(t, { ...env, PRIME_DATABASE_URL: url })
  await a.ready()
  const b = await build(t, { ...env, PRIME_DATABASE_URL: url })
  await b.ready()
  for (const name of SINGLETONS) {
    await until(`${name} held`, () => holds(a, name) || holds(b, name))
    t.ok(holds(a, name) !== holds(b, name), `${name}: one instance runs it`)
  }
  t.same(
    a.loops
      .list()
      .filter((l) => !l.singleton)
      .map((l) => l.leaseHeld),
    a.loops
      .list()
      .filter((l) => !l.singleton)
      .map(() => undefined),
    'loops per process take no lease',
  )
  const fence = async () => Number(await db.value(`SELECT fence FROM leases WHERE name = 'loop:agent-sweeper'`))
  // Held for a few renewals, by the same instance, the fence unchanged.
  const first = holds(a, 'agent-sweeper') ? a : b
  const other = first === a ? b : a
  const f1 = await fence()
  await new Promise((r) => setTimeout(r, 1500))
  t.ok(holds(first, 'agent-sweeper') && !holds(other, 'agent-sweeper'), 'the holder keeps it while it renews')
  t.equal(await fence(), f1, 'renewals keep the fence')

  // The holder closes: its leases are released, the other takes over within a renewal.
  const closed = Date.now()
  await first.close()
  await until('take-over after close', () => holds(other, 'agent-sweeper'), 2000)
  t.ok(Date.now() - closed < 1500, 'taken over within a renewal period')
  for (const name of SINGLETONS) await until(`${name} taken over`, () => holds(other, name), 2000)
  const f2 = await fence()
  t.ok(f2 > f1, 'a new holder, a new fence')

  // A holder that died: its lease is taken by no one until it expires.
  await db.run(`UPDATE leases SET holder = 'gone', fence = fence + 1, expires_at = now() + interval '1500 milliseconds' WHERE name = 'loop:agent-sweeper'`)
  await until('the loop stops when another holds its lease', () => !holds(other, 'agent-sweeper'), 2000)
  const lost = Date.now()
  await until('take-over after expiry', () => holds(other, 'agent-sweeper'), 4000)
  t.ok(Date.now() - lost >= 800, 'not before the lease expired')
  t.ok((await fence()) > f2 + 1, 'the fence grew again')
})
