// Expensive reads on PostgreSQL (db/postgres/connection.ts `budgeted`, the pipeline's
// expensive hook): their statements run on a small pool of their own whose connections carry
// the read budget as statement_timeout (422 query-too-costly past it, as SQLite's reader
// threads answer), a read waits for such a connection at most a budget (503 readers-busy),
// the cheap requests' pool is not theirs.
import t from 'tap'
import { connectPostgres, ExpensiveReadsBusy, StatementPastBudget } from '../db/postgres/connection.js'
import { build, call, login } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

t.test('the budgeted pool: statement_timeout at the budget, a bounded wait, units of work included', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const pg = connectPostgres(url, { max: 2, budget: { clients: 1, budgetMs: 300 } })
  t.teardown(() => pg.close())
  const inBudget = <T>(work: () => Promise<T>) => new Promise<T>((resolve, reject) => pg.budgeted(() => void work().then(resolve, reject)))

  t.equal(await pg.value<string>('SHOW statement_timeout'), '0', 'the cheap pool has no statement budget')
  t.equal(await inBudget(() => pg.value<string>('SHOW statement_timeout')), '300ms', 'an expensive read runs on the budgeted pool')
  t.equal(await inBudget(() => pg.uow.run(() => pg.value<string>('SHOW statement_timeout'))), '300ms', 'so does a unit of work it opens')

  const late = await inBudget(() => pg.query('SELECT pg_sleep(2)')).catch((err) => err)
  t.ok(late instanceof StatementPastBudget, 'a statement past the budget is stopped by the server')
  t.match(late.message, /time budget of 0 s/, 'and says so')
  await pg.query('SELECT pg_sleep(0.4)')
  t.pass('the same statement outside an expensive read runs to its end')

  // One budgeted client, held longer than a budget by a unit of work (statement_timeout
  // stops statements, not an idle transaction): the next read waits for it at most a budget.
  const blocked = inBudget(() =>
    pg.uow.run(async () => {
      await pg.query('SELECT pg_sleep(0.2)')
      await new Promise((r) => setTimeout(r, 400))
    }),
  )
  const refused = await inBudget(() => pg.query('SELECT 1')).catch((err) => err)
  await blocked
  t.ok(refused instanceof ExpensiveReadsBusy, 'a read that waited a whole budget for a connection is refused')
})

t.test('through the routes: asset discovery runs budgeted; concurrent reads of one caller are answered', { skip: noPostgres }, async (t) => {
  const app = await build(t, { PRIME_DATABASE_URL: await pgTestDatabaseUrl(t), PRIME_EXPENSIVE_PER_CREDENTIAL: '1' })
  const admin = await login(app)
  const expensiveClients = () => countBudgeted(app)
  t.equal(await expensiveClients(), 0, 'no expensive read yet: the budgeted pool has no connection')

  const page = await call(app, admin, { method: 'GET', url: '/prime/webui/transformerDataApi/assets?PageSize=10' })
  t.equal(page.statusCode, 200, page.body)
  t.ok((await expensiveClients()) > 0, "the asset page's statements ran on the budgeted pool")

  // A console asks several lists at once: on PostgreSQL none of them is refused for its
  // caller's share (the budgeted pool bounds them, and each statement has the budget).
  const lists = await Promise.all([1, 2, 3, 4].map(() => call(app, admin, { method: 'GET', url: '/prime/webui/transformerDataApi/assets?PageSize=10' })))
  t.same(
    lists.map((r) => r.statusCode),
    [200, 200, 200, 200],
    'concurrent expensive reads of one caller are answered',
  )
})

/** The budgeted pool's connections to this app's database (their application_name). */
async function countBudgeted(app: Awaited<ReturnType<typeof build>>): Promise<number> {
  const { Client } = await import('pg')
  const url = (app.config as { databaseUrl?: string }).databaseUrl!
  const c = new Client({ connectionString: url })
  await c.connect()
  try {
    const r = await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'prime-webui expensive'")
    return r.rows[0].n
  } finally {
    await c.end()
  }
}
