// backend: sqlite-only — a real server process whose reader threads (SQLite's) are interrupted at shutdown; PostgreSQL's read budget: tests/pg-expensive-reads.test.ts
// A real server process (lib/server.ts) that gets SIGTERM while an expensive read runs in a
// reader thread: it stops at once, not at the end of the read's budget (30 s here), answers
// that read 503 (another node can take it), and exits 0. The read is a GraphQL asset query
// with 20 "NotContains" filters of 50 values over 10,000 seeded agents.
import crypto from 'node:crypto'
import path from 'node:path'
import t from 'tap'
import { openDatabase } from '../db/index.js'
import { seedFleet } from '../scripts/seed.js'
import { startServer, tempDir, until } from './fixtures/processes.js'
import { ADMIN_PASSWORD } from './helpers.js'

t.setTimeout(240_000)

t.test('SIGTERM while an expensive read runs: the read is stopped and answered 503, the server exits 0 at once', async (t) => {
  const dir = tempDir(t, 'prime-shutdown-reads-')
  const db = openDatabase(path.join(dir, 'prime.sqlite'))
  await seedFleet(db, { agents: 10_000, peripheralsPerAgent: 2, seed: 7 })
  db.close()

  const server = await startServer(t, dir, path.join(dir, 'server.log'), {
    PRIME_SHUTDOWN_DRAIN_SECONDS: '0',
    PRIME_READ_DEADLINE_SECONDS: '30',
    PRIME_READER_THREADS: '1',
  })
  let exited: number | null | undefined
  void server.exited.then((code) => (exited = code))
  t.equal(exited, undefined, 'listening')
  const base = server.base
  const login = await fetch(`${base}/prime/webui/Auth/LocalLogin`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'admin', password: ADMIN_PASSWORD }),
  })
  t.equal(login.status, 200, 'logged in')
  const { token } = (await login.json()) as { token: string }
  const values = () => Array.from({ length: 50 }, () => crypto.randomBytes(4).toString('hex')).join(',')
  const notContains = () => ({ field: 'name', expression: 'NotContains', value: values(), op: 'AND', conditionTypeValue: 'multiple', is_userattribute: false })
  // New values each time: nothing of one read is kept for the next.
  const body = () => ({
    query: `query Q($filters: [ConditionalRowFilterInput], $system: [ConditionalRowFilterInput]) {
      conditionalTable(query: { filters: $filters, systemFilters: $system, globalSearch: "" } pagination: { pageNumber: 1, pageSize: 10, sortBy: "riskLevel_desc" }) {
        recordsFiltered data { id name } } }`,
    variables: { filters: Array.from({ length: 10 }, notContains), system: Array.from({ length: 10 }, notContains) },
  })
  const ask = () =>
    fetch(`${base}/sepio-data`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body()) }).then(
      async (res) => ({ status: res.status, body: await res.text(), at: performance.now() }),
      (err: Error) => ({ status: 0, body: String(err), at: performance.now() }),
    )

  // The same read asked first with nothing stopping it: its length shows the stop below is not its end.
  const t0 = performance.now()
  const whole = await ask()
  const readMs = performance.now() - t0
  t.equal(whole.status, 200, `the read answers when left alone (${Math.round(readMs)} ms)`)

  const pending = ask()
  // Into the read (it is in a thread: the event loop answers meanwhile).
  await new Promise((r) => setTimeout(r, Math.min(300, readMs / 4)))
  const health = await fetch(`${base}/healthz`)
  t.equal(health.status, 200, '/healthz answers while the read runs')
  const signalled = performance.now()
  server.child.kill('SIGTERM')
  const answer = await pending
  await until(() => exited !== undefined, 'the server to exit')
  const stopMs = performance.now() - signalled
  t.equal(answer.status, 503, `the read in flight is answered 503 (${answer.body.slice(0, 120)})`)
  t.match(answer.body, /shutting down/, 'saying the server is shutting down')
  t.ok(answer.at - signalled < readMs, `answered ${Math.round(answer.at - signalled)} ms after SIGTERM, before the read would have ended`)
  t.equal(exited, 0, `a clean exit, ${Math.round(stopMs)} ms after SIGTERM`)
  t.ok(stopMs < 10_000, 'well within the read budget of 30 s')
})
