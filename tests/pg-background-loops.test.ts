// The background loops that PostgreSQL runs as SQLite does, the same scenario on both
// backends ending in the same state: the sweeper (quiet agents disconnected, an unanswered
// delivery failed), retention (the same records archived, in the same archive files, and
// deleted, whole past days by their partition on PostgreSQL; records a destination has not
// had kept; one audit record per run) and the agentless sweep with its health check.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import zlib from 'node:zlib'
import t from 'tap'
import { connectPostgres } from '../db/postgres/index.js'
import { sweeperDeps } from '../lib/gateway/index.js'
import { sweepAgents, DELIVERY_TIMEOUT_MS } from '../lib/gateway/sweeper.js'
import { sweepAgentless, workerPollerHealth } from '../lib/agentless/index.js'
import { build, call, login } from './helpers.js'
import { noPostgres, pgTestDatabaseUrl } from './pg.js'

const SECRET = 'pes_background-loops-enrollment'
const POLLER_SECRET = 'pes_background-loops-poller-secret'
const AGENTLESS = '/prime/webui/agents/agentless'
const DAY = 86_400_000
const env = {
  PRIME_AGENT_ENROLLMENT_SECRET: SECRET,
  PRIME_POLLER_ENROLLMENT_SECRET: POLLER_SECRET,
  PRIME_AGENT_MIN_CHECKIN_SECONDS: '0',
  PRIME_RETENTION_EVENTS_DAYS: '3',
  PRIME_RETENTION_AUDIT_DAYS: '3',
  PRIME_RETENTION_COMMANDS_DAYS: '3',
}

type App = Awaited<ReturnType<typeof build>>
/** Plain SQL on either backend (`?` placeholders). */
type Sql = (sql: string, params?: unknown[]) => Promise<Record<string, any>[]>

async function backend(t: Parameters<typeof build>[0], kind: 'sqlite' | 'postgres'): Promise<{ app: App; sql: Sql }> {
  if (kind === 'sqlite') {
    const app = await build(t, { ...env, PRIME_DATABASE_URL: '' })
    return {
      app,
      sql: async (q, p = []) => {
        const stmt = app.db.prepare(q)
        if (stmt.reader) return stmt.all(...p) as Record<string, any>[]
        stmt.run(...p)
        return []
      },
    }
  }
  const url = await pgTestDatabaseUrl(t)
  const db = connectPostgres(url, { max: 2 })
  const app = await build(t, { ...env, PRIME_DATABASE_URL: url })
  t.teardown(() => db.close())
  return {
    app,
    sql: (q, p = []) => {
      let n = 0
      return db.query(
        q.replace(/\?/g, () => `$${++n}`),
        p,
      )
    },
  }
}

const checkIn = (app: App, credential: string) =>
  app.inject({
    method: 'POST',
    url: '/prime/webui/gateway/checkin',
    headers: { authorization: `Bearer ${credential}` },
    payload: { hostIdentifier: 'HOST', operationalStatus: 'Free', localIpAddress: '10.0.0.5', serviceVersion: '4.2.1.118', peripherals: [] },
  })

/** The sweeper's scenario: answers the agents' and the command's state after it. */
async function sweeperScenario(t: Parameters<typeof build>[0], app: App, sql: Sql) {
  const agents: { uuid: string; credential: string; id: number }[] = []
  for (const host of ['HOST-1', 'HOST-2', 'HOST-3']) {
    const res = await app.inject({ method: 'POST', url: '/prime/webui/gateway/enroll', payload: { enrollmentSecret: SECRET, machineId: crypto.randomUUID(), hostIdentifier: host } })
    t.equal(res.statusCode, 200, res.body)
    const { uuid, credential } = res.json()
    const [{ id }] = await sql('SELECT id FROM agents WHERE uuid = ?', [uuid])
    agents.push({ uuid, credential, id: Number(id) })
    t.equal((await checkIn(app, credential)).statusCode, 200)
  }
  // A command delivered to the first agent at its next check-in, never answered.
  const created = Date.now()
  await sql(`INSERT INTO agent_commands (agent_id, type, parameters, status, created_ms, created_by) VALUES (?, 'SetMode', '{"mode":"Armed"}', 'Pending', ?, 'admin')`, [agents[0].id, created])
  await app.storage.ports!.agentState.refreshAgent(agents[0].id)
  t.equal((await checkIn(app, agents[0].credential)).statusCode, 200)
  const deps = sweeperDeps(app)
  t.same(await sweepAgents(deps), { disconnected: 0, timedOut: 0, expired: 0, activated: 0, more: false }, 'nothing is due yet')
  const later = Date.now() + DELIVERY_TIMEOUT_MS + 1000
  t.same(await sweepAgents(deps, later), { disconnected: 3, timedOut: 1, expired: 0, activated: 0, more: false }, 'quiet agents disconnected, the delivery failed')
  t.same(await sweepAgents(deps, later), { disconnected: 0, timedOut: 0, expired: 0, activated: 0, more: false }, 'once')
  const rows = await sql('SELECT host_identifier, connection_status, display_status, latest_event_text FROM agents ORDER BY id')
  const commands = await sql('SELECT type, status, result_message FROM agent_commands ORDER BY id')
  const events = await sql(`SELECT event_code, severity, category FROM events WHERE event_code IN ('0x310002', '0x310005') ORDER BY id`)
  return { rows: rows.map((r) => ({ ...r })), commands: commands.map((r) => ({ ...r })), events: events.map((r) => ({ ...r, severity: Number(r.severity) })) }
}

/** What an archive file holds, one parsed record a line. */
function archived(dir: string): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {}
  const folder = path.join(dir, 'archive')
  if (!fs.existsSync(folder)) return out
  for (const name of fs.readdirSync(folder).sort()) {
    out[name] = zlib
      .gunzipSync(fs.readFileSync(path.join(folder, name)))
      .toString()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l))
  }
  return out
}

/** The retention scenario: events and audit records over six days, a destination still owed some. */
async function retentionScenario(t: Parameters<typeof build>[0], app: App, sql: Sql, now: number) {
  const ports = app.storage.ports!
  const event = (n: number) => ({ code: '0x310002', severity: 4, category: 'Host' as const, entityId: `host-${n}`, description: `event ${n}`, details: '{}' })
  // Two events a day for six days back, at fixed times of their day (whole past days, the
  // cutoff's day partly past, and younger ones).
  const day0 = Math.floor(now / DAY) * DAY
  let n = 0
  for (let d = 6; d >= 0; d--) {
    for (const hour of [2, 20]) {
      const at = day0 - d * DAY + hour * 3_600_000
      if (at > now) continue
      await app.storage.uow.run(() => ports.eventRecorder.record(at, [event(++n)]))
      await ports.systemAudit.insert({
        createdMs: at,
        severity: 6,
        category: 'System',
        user: null,
        sourceIp: null,
        operationId: null,
        outcome: 'Succeeded',
        description: `audit ${n}`,
        details: '{}',
      })
    }
  }
  if (app.storage.backend === 'sqlite') {
    // SQLite prunes only what its query index has counted (its loop's work, done here at once).
    app.repos.eventQueries.indexer.catchUp('events')
    app.repos.eventQueries.indexer.catchUp('audit_trail')
  }
  const before = await sql('SELECT count(*) AS n FROM events')
  const run = await app.retention.run(now)
  const cutoff = now - 3 * DAY
  const left = await sql('SELECT description, created_ms FROM events ORDER BY created_ms, id')
  t.ok(
    left.every((r) => Number(r.created_ms) >= cutoff),
    'no event older than the retention is left',
  )
  t.ok(run.events.deleted > 0 && run.events.deleted < Number(before[0].n), 'some events went, the young stayed')
  const audit = await sql(`SELECT description, details FROM audit_trail WHERE description LIKE 'Retention:%' ORDER BY id`)
  t.equal(audit.length, 1, 'one audit record for the run')
  return {
    deleted: { events: run.events.deleted, audit: run.audit.deleted, other: run.other },
    left: left.map((r) => r.description),
    archive: archived(app.testConfig.dataDir),
    audit: audit.map((r) => r.description),
  }
}

t.test('the sweeper ends in the same state on SQLite and PostgreSQL', { skip: noPostgres }, async (t) => {
  const results = []
  for (const kind of ['sqlite', 'postgres'] as const) {
    const { app, sql } = await backend(t, kind)
    t.equal(app.storage.backend, kind)
    results.push(await sweeperScenario(t, app, sql))
  }
  t.same(results[1], results[0], 'agents, command and events alike')
  t.match(results[1].rows, [
    { connection_status: 'Disconnected', latest_event_text: 'Agent command failed' },
    { connection_status: 'Disconnected', display_status: 'Disconnected', latest_event_text: 'Agent disconnected' },
    { connection_status: 'Disconnected' },
  ])
  t.match(results[1].commands, [{ status: 'Failed', result_message: 'No result reported' }])
})

t.test('retention archives and deletes the same records on SQLite and PostgreSQL', { skip: noPostgres }, async (t) => {
  // Mid-day: the cutoff's day is partly past.
  const now = Math.floor(Date.now() / DAY) * DAY + 14 * 3_600_000
  const results = []
  for (const kind of ['sqlite', 'postgres'] as const) {
    const { app, sql } = await backend(t, kind)
    results.push(await retentionScenario(t, app, sql, now))
  }
  const strip = (archive: Record<string, unknown[]>) =>
    Object.fromEntries(Object.entries(archive).map(([name, records]) => [name, (records as Record<string, unknown>[]).filter((r) => r.description !== undefined).map((r) => JSON.stringify(r))]))
  t.same(results[1].deleted, results[0].deleted, 'as many of each kind')
  t.same(results[1].left, results[0].left, 'the same events left')
  t.same(Object.keys(results[1].archive), Object.keys(results[0].archive), 'the same archive files')
  t.same(strip(results[1].archive), strip(results[0].archive), 'holding the same records')
  t.same(results[1].audit, results[0].audit, 'the same audit record')
  t.ok(Object.keys(results[0].archive).some((f) => f.startsWith('events-')) && Object.keys(results[0].archive).some((f) => f.startsWith('audit-')))
})

t.test('on PostgreSQL whole past days go by their partition; records a destination is owed stay', { skip: noPostgres }, async (t) => {
  const { app, sql } = await backend(t, 'postgres')
  const now = Math.floor(Date.now() / DAY) * DAY + 14 * 3_600_000
  const ports = app.storage.ports!
  const ids: number[] = []
  for (const d of [6, 5, 4]) {
    await app.storage.uow.run(() => ports.eventRecorder.record(now - d * DAY, [{ code: '0x310002', severity: 4, category: 'Host', entityId: 'h', description: `day -${d}`, details: '{}' }]))
    ids.push(Number((await sql('SELECT max(id) AS id FROM events'))[0].id))
  }
  const partitions = async () => (await sql(`SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'events'::regclass`))[0].n
  // A delivery still pending of the second one (its destination gone since: no loop takes it): it and those after it stay.
  await sql(`INSERT INTO alarm_outbox (destination_id, feed, record_id, delivery_id, queued_ms, status, attempts, next_attempt_ms) VALUES ('d1', 'events', ?, 'x', 0, 'pending', 0, 0)`, [ids[1]])
  await sql('UPDATE alarm_events_queued SET up_to = (SELECT max(id) FROM events) WHERE id = 1')
  const had = await partitions()
  const first = await app.retention.run(now)
  t.equal(first.events.deleted, 1, 'the first day went')
  t.equal(await partitions(), had - 1, 'by its partition')
  t.same(
    (await sql('SELECT id FROM events WHERE id = ANY(?) ORDER BY id', [ids])).map((r) => Number(r.id)),
    ids.slice(1),
    'the owed record and the younger one stay',
  )
  await sql(`UPDATE alarm_outbox SET status = 'delivered'`)
  const second = await app.retention.run(now)
  t.equal(second.events.deleted, 2, 'once delivered, they go too')
  t.equal((await sql('SELECT count(*) AS n FROM events WHERE id = ANY(?)', [ids]))[0].n, 0)
  t.same(archived(app.testConfig.dataDir)[`events-${new Date(now - 6 * DAY).toISOString().slice(0, 10)}.jsonl.gz`].length, 1, 'archived before the drop')
})

t.test('the agentless sweep and its health check on PostgreSQL', { skip: noPostgres }, async (t) => {
  const { app } = await backend(t, 'postgres')
  t.ok(app.agentless.vault, 'the settings and the vault are on the app')
  t.match(await workerPollerHealth(app), { status: 'Healthy', detail: /No worker pollers/ })
  const admin = await login(app)
  const registered = await app.inject({ method: 'POST', url: `${AGENTLESS}/poller/register`, payload: { enrollmentSecret: POLLER_SECRET, name: 'poller-a', hostName: 'vm', version: '1.0.0' } })
  t.equal(registered.statusCode, 200, registered.body)
  const poller = registered.json()
  t.equal((await call(app, admin, { method: 'PUT', url: `${AGENTLESS}/workerpollerdetails/activatedstatus`, payload: { pollerId: poller.pollerId, isActivated: true } })).statusCode, 200)
  const beat = await app.inject({ method: 'POST', url: `${AGENTLESS}/poller/heartbeat`, headers: { authorization: `Bearer ${poller.credential}` }, payload: { version: '1.0.0' } })
  t.equal(beat.statusCode, 200, beat.body)
  t.match(await workerPollerHealth(app), { status: 'Healthy', detail: /All 1 activated/ })
  const later = Date.now() + 10 * 60_000
  t.match(await sweepAgentless(app, later), { offline: 1, abandoned: 0 })
  t.match(await sweepAgentless(app, later), { offline: 0 }, 'offline once')
  const names = app.loops.list().map((l) => l.name)
  for (const name of ['agent-sweeper', 'agentless-sweeper', 'retention']) t.ok(names.includes(name), `${name} registered on PostgreSQL`)
})
