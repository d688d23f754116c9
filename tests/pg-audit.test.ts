// The audit repository on PostgreSQL answers as SQLite's: the same records and refusal
// counts written to both, every method asked the same questions (absent ids, ties, windows
// closing). And the trail is immutable there too: no update, no delete but through
// retention's gate, which lasts its own transaction only.
import t from 'tap'
import { auditRepo } from '../db/audit.js'
import type { AuditRecord } from '../lib/platform/ports.js'
import { openDatabase } from '../db/index.js'
import { pgAuditRepo } from '../db/postgres/audit.js'
import { pgRecordRetention } from '../db/postgres/events-retention.js'
import { fastCommits } from './fixtures/pg-records.js'
import { noPostgres } from './pg.js'

const T0 = Date.UTC(2026, 2, 1)

const record = (i: number, over: Partial<AuditRecord> = {}): AuditRecord => ({
  createdMs: T0 + Math.floor(i / 3) * 1000,
  severity: i % 8,
  category: i % 2 ? 'Authentication' : 'Users',
  user: i % 4 ? `user${i % 5}` : null,
  sourceIp: i % 3 ? `10.0.0.${i % 7}` : null,
  description: `record ${i}`,
  details: `details ${i}`,
  operationId: i % 5 ? 'PostLogin' : null,
  outcome: i % 3 === 0 ? 'Refused' : 'Succeeded',
  asset: i % 2 ? { key: `k${i}`, name: `n${i}`, parentId: null, ipAddress: '10.1.1.1', type: 'Agent', subType: 'Laptop', detail: 'Windows', icon: 2 } : undefined,
  requestId: i % 2 ? `req-${i}` : null,
  ...over,
})

t.test('the audit repository: the same answers as SQLite', { skip: noPostgres }, async (t) => {
  const pg = await fastCommits(t)
  const sdb = openDatabase(':memory:')
  t.teardown(() => sdb.close())
  const s = auditRepo(sdb)
  const p = pgAuditRepo(pg)
  const both = async <R>(what: string, fs: () => R, fp: () => Promise<R>) => t.same(await fp(), fs(), what)

  // Records, some of them refusals of a few kinds (several with the same time: ties).
  const keys = ['login:bad-password', 'login:locked', 'token:expired', 'login:bad-password']
  for (let i = 0; i < 60; i++) {
    const r = record(i, i % 3 === 0 ? { refusalKey: keys[(i / 3) % keys.length] } : {})
    t.equal(await p.insert(r), s.insert(r), `record ${i}: the same id`)
  }
  await both(
    'latest',
    () => s.latest(5),
    () => p.latest(5),
  )
  await both(
    'latest, more than there are',
    () => s.latest(100),
    () => p.latest(100),
  )
  await both(
    'latest, none',
    () => s.latest(0),
    () => p.latest(0),
  )
  for (const id of [1, 2, 30, 60, 61, 0])
    await both(
      `byId ${id}`,
      () => s.byId(id),
      () => p.byId(id),
    )
  for (const [key, since] of [
    ['login:bad-password', 0],
    ['login:bad-password', T0 + 10_000],
    ['login:locked', T0],
    ['token:expired', T0 + 100_000],
    ['absent', 0],
  ] as const) {
    await both(
      `firstRefusal ${key} ${since}`,
      () => s.firstRefusal(key, since),
      () => p.firstRefusal(key, since),
    )
  }
  for (const [group, since] of [
    ['login', 0],
    ['login', T0 + 15_000],
    ['token', 0],
    ['log', 0],
    ['absent', 0],
  ] as const) {
    await both(
      `refusalReasons ${group} ${since}`,
      () => s.refusalReasons(group, since),
      () => p.refusalReasons(group, since),
    )
  }

  // Repeats counted, windows closing in order (ties by key), counts dropped.
  const repeats: [string, number, number, number, string][] = [
    ['login:bad-password', 1, T0 + 60_000, T0 + 5_000, '10.0.0.1'],
    ['login:bad-password', 1, T0 + 60_000, T0 + 4_000, '10.0.0.1 10.0.0.2'],
    ['token:expired', 7, T0 + 60_000, T0 + 6_000, ''],
    ['login:locked', 4, T0 + 30_000, T0 + 7_000, '10.0.0.3'],
    ['login:locked', 4, T0 + 30_000, T0 + 9_000, '10.0.0.3'],
  ]
  for (const [key, first, end, now, ips] of repeats) {
    s.countRepeat(key, first, end, now, ips)
    await p.countRepeat(key, first, end, now, ips)
  }
  for (const key of ['login:bad-password', 'login:locked', 'token:expired', 'absent'])
    await both(
      `refusalCount ${key}`,
      () => s.refusalCount(key),
      () => p.refusalCount(key),
    )
  for (const [now, limit] of [
    [T0, 10],
    [T0 + 30_000, 10],
    [T0 + 60_000, 10],
    [T0 + 60_000, 2],
  ]) {
    await both(
      `dueRefusals ${now} ${limit}`,
      () => s.dueRefusals(now, limit),
      () => p.dueRefusals(now, limit),
    )
  }
  s.dropRefusalCount('login:locked')
  await p.dropRefusalCount('login:locked')
  s.dropRefusalCount('absent')
  await p.dropRefusalCount('absent')
  await both(
    'dueRefusals after a drop',
    () => s.dueRefusals(T0 + 60_000, 10),
    () => p.dueRefusals(T0 + 60_000, 10),
  )

  for (const [id, ms, d] of [
    [1, T0, 'record 1'],
    [1, T0, 'record 2'],
    [2, T0 + 1, 'record 2'],
    [999, T0, 'record 1'],
  ] as const) {
    await both(
      `exists ${id} ${ms} ${d}`,
      () => s.exists(id, ms, d),
      () => p.exists(id, ms, d),
    )
  }
  // A record of a unit that rolled back does not exist (its id is not used again).
  let lost = 0
  await t.rejects(
    pg.uow.run(async () => {
      lost = await p.insert(record(100))
      throw new Error('rolled back')
    }),
  )
  t.notOk(await p.exists(lost, record(100).createdMs, 'record 100'))
  t.ok((await p.insert(record(101))) > lost, 'ids go on after it')
})

t.test('the audit trail is immutable: no update, no delete but through retention gate, which closes with its transaction', { skip: noPostgres }, async (t) => {
  const pg = await fastCommits(t)
  const audit = pgAuditRepo(pg)
  const retention = pgRecordRetention(pg)
  const id = await audit.insert(record(1))
  const young = await audit.insert(record(2, { createdMs: T0 + 86_400_000 }))
  await t.rejects(pg.run('UPDATE audit_trail SET details = $1 WHERE id = $2', ['changed', id]), /audit records are immutable/)
  await t.rejects(pg.run('DELETE FROM audit_trail WHERE id = $1', [id]), /audit records are immutable/)
  await t.rejects(pg.run('TRUNCATE audit_trail'), /audit records are immutable/)
  await t.rejects(
    pg.uow.run(async () => {
      await retention.openGate(T0 + 1000)
      await pg.run('UPDATE audit_trail SET details = $1 WHERE id = $2', ['changed', id])
    }),
    /audit records are immutable/,
    'the gate lets nothing be updated',
  )
  await t.rejects(
    pg.uow.run(async () => {
      await retention.openGate(T0 + 1000)
      await pg.run('DELETE FROM audit_trail WHERE id = $1', [young])
    }),
    /audit records are immutable/,
    'nor deleted when younger than its cutoff',
  )
  // Opened outside a unit of work, the gate lasts that one statement's transaction.
  await retention.openGate(T0 + 1000)
  await t.rejects(pg.run('DELETE FROM audit_trail WHERE id = $1', [id]), /audit records are immutable/, 'closed after its transaction')
  await t.rejects(
    pg.uow.run(async () => {
      await retention.openGate(T0 + 1000)
      await retention.closeGate()
      await pg.run('DELETE FROM audit_trail WHERE id = $1', [id])
    }),
    /audit records are immutable/,
    'closed again by closeGate',
  )
  const deleted = await pg.uow.run(async () => {
    await retention.openGate(T0 + 1000)
    const n = await pg.run('DELETE FROM audit_trail WHERE id = $1', [id])
    await retention.closeGate()
    return n
  })
  t.equal(deleted, 1, 'an old record goes through the gate')
  t.same(
    (await pg.query('SELECT id FROM audit_trail ORDER BY id')).map((r) => r.id),
    [young],
  )
})
