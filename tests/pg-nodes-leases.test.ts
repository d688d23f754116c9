// Three server processes on one PostgreSQL database; the node holding the singleton loops'
// leases is killed with SIGKILL (no close, no release) a moment before a scheduled report is
// due. The report runs exactly once, on a surviving node, on time; the dead node's loops are
// taken over once its leases expire (PRIME_LOOP_LEASE_SECONDS).
import t from 'tap'
import { connectPostgres } from '../db/postgres/index.js'
import { allReady, killNode, LEASE_SECONDS, loginAt, loopsRunning, request, startNodes, type Node } from './fixtures/nodes.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('kill -9 of the lease holder while a report is due: it runs once, on another node', { skip: noPostgres }, async (t) => {
  const url = await pgTestDatabaseUrl(t)
  const nodes = await startNodes(t, url, 3)
  await allReady(nodes)
  const token = await loginAt(nodes[0])
  const db = connectPostgres(url, { max: 1 })
  t.teardown(() => db.close())

  // The node that runs the agent sweeper (a singleton loop) holds its lease.
  const holderOf = async (loop: string, among: Node[]) => {
    for (const n of among) if ((await loopsRunning(n, token)).has(loop)) return n
    return undefined
  }
  let holder: Node | undefined
  for (let end = Date.now() + 10_000; !holder && Date.now() < end; await sleep(100)) holder = await holderOf('agent-sweeper', nodes)
  if (!holder) throw new Error('no node runs the agent sweeper')
  const fenceBefore = Number(await db.value(`SELECT fence FROM leases WHERE name = 'loop:agent-sweeper'`))

  // A report created through the API (schedules name minutes), then made due in 12 s: each
  // node's scheduler looks at least every 10 s, so every one of them is waiting for that time.
  const created = await request(nodes[1], 'POST', '/prime/webui/reports/create', {
    token,
    body: { name: 'Due soon', type: 'auditTrailDigest', format: 'CSV', recipients: [], schedule: { frequency: 'daily', timeOfDay: '06:00', timeZone: 'UTC' } },
  })
  t.equal(created.status, 200, 'report created')
  const reportId = created.json().id as string
  const due = Date.now() + 12_000
  await db.run('UPDATE reports SET next_run_ms = $1 WHERE id = $2', [due, reportId])

  await sleep(due - 1500 - Date.now())
  const killedAt = Date.now()
  await killNode(holder)
  const survivors = nodes.filter((n) => n !== holder)

  // The dead node's singleton loops: taken over once its lease expires.
  let taker: Node | undefined
  for (let end = Date.now() + 4 * LEASE_SECONDS * 1000; !taker && Date.now() < end; await sleep(50)) taker = await holderOf('agent-sweeper', survivors)
  const takeOverMs = Date.now() - killedAt
  t.ok(taker, `the agent sweeper taken over by node ${taker?.name}`)
  t.ok(takeOverMs <= LEASE_SECONDS * 1000 + 1000, `within a lease period and a renewal (${takeOverMs} ms after the kill, lease ${LEASE_SECONDS} s)`)
  t.ok(Number(await db.value(`SELECT fence FROM leases WHERE name = 'loop:agent-sweeper'`)) > fenceBefore, 'a new holder, a new fence')

  // The report: one run, finished, started after the kill by a node still alive.
  type Run = { id: string; status: string; due_ms: number; started_ms: number; finished_ms: number; trigger: string }
  let runs: Run[] = []
  for (let end = due + 15_000; Date.now() < end; await sleep(200)) {
    runs = await db.query<Run>('SELECT id, status, due_ms, started_ms, finished_ms, trigger FROM report_runs WHERE report_id = $1', [reportId])
    if (runs.length && runs.every((r) => r.status === 'succeeded' || r.status === 'failed')) break
  }
  t.equal(runs.length, 1, 'one run row')
  t.match(runs[0], { status: 'succeeded', due_ms: due, trigger: 'schedule' })
  t.ok(runs[0].started_ms > killedAt, 'started after the kill: on a surviving node')
  const lateMs = runs[0].started_ms - due
  t.ok(lateMs >= 0 && lateMs <= LEASE_SECONDS * 1000, `started ${lateMs} ms after its due time`)
  t.equal(Number(await db.value('SELECT count(*) FROM report_files WHERE run_id = $1', [runs[0].id])), 1, 'one file')

  // A few seconds more: nothing runs it again, and every survivor serves the file.
  await sleep(3000)
  t.equal(Number(await db.value('SELECT count(*) FROM report_runs WHERE report_id = $1', [reportId])), 1, 'still one run')
  for (const n of survivors) {
    const file = await request(n, 'POST', '/prime/webui/reports/GetReportFile', { token, body: { reportId } })
    t.equal(file.status, 200, `node ${n.name} serves the file`)
  }
})
