// The alarm destination service and the unit of work it runs in, without Fastify's routes:
// plain context, the ports of a test app's database (SQLite or PostgreSQL), a delivery
// function of the test's own; and SQLite's unit of work itself.
import t from 'tap'
import { openDatabase, type DB } from '../db/index.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { allowList } from '../lib/alarms/address.js'
import type { Sent } from '../lib/alarms/deliver.js'
import { alarmDestinationService, type AlarmDestinationDeps } from '../lib/alarms/service.js'
import { recordAudit, type AuditEntry } from '../lib/audit.js'
import { systemContext, type Context } from '../lib/platform/context.js'
import { build, sqliteOnly } from './helpers.js'
import { portsOf, query, queryValue } from './seed.js'

const webhook = (name: string) => ({ name, type: 'webhook' as const, webhook: { url: 'http://127.0.0.1:9/hooks', secret: 'whsec-0123456789abcdef' } })

async function setup(t: Parameters<typeof build>[0], over: Partial<AlarmDestinationDeps> = {}) {
  const app = await build(t)
  const { uow } = app.storage
  const warnings: object[] = []
  const sent: string[] = []
  let failAudit = false
  const record = async (ctx: Context, entry: AuditEntry) => {
    if (failAudit) throw new Error('the audit trail is full')
    await recordAudit({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }, ctx, entry)
  }
  const deps: AlarmDestinationDeps = {
    destinations: portsOf(app).alarmDestinations,
    uow,
    audit: { record },
    log: { warn: (details) => void warnings.push(details) },
    allow: allowList(['127.0.0.1']),
    mailConfigured: () => false,
    send: async (dest): Promise<Sent> => {
      sent.push(dest.name)
      return dest.name.startsWith('down')
        ? { message: {}, result: { outcome: 'failed', code: 'unreachable', error: 'The receiver could not be reached.', detail: 'ECONNREFUSED 127.0.0.1:9' } }
        : { message: {}, result: { outcome: 'delivered' } }
    },
    timeoutMs: 1000,
    ...over,
  }
  const service = alarmDestinationService(deps)
  // Only what the service wrote from here on.
  const mark = (await queryValue<number>(app, 'SELECT coalesce(max(id), 0) FROM audit_trail')) ?? 0
  const auditRows = () => query(app, 'SELECT user_name, source_ip, request_id, operation_id, description, outcome FROM audit_trail WHERE id > ? ORDER BY id', mark)
  return { app, deps, service, warnings, sent, auditRows, failAudit: (on: boolean) => (failAudit = on) }
}

const ctx = (over: Partial<Context> = {}) =>
  systemContext({
    actor: 'alice',
    profile: 30,
    sourceAddress: '192.0.2.7',
    requestId: 'req-1',
    operation: { operationId: 'addOrUpdateAlarmDest', method: 'POST', path: '/x', auditCategory: 'Configuration', readOnly: false },
    ...over,
  })

t.test('a destination is saved with its audit record, named after the context', async (t) => {
  const { service, auditRows } = await setup(t)
  const saved = await service.save(ctx(), webhook('soc'))
  t.equal(saved.row.name, 'soc')
  t.equal(saved.row.created_by, 'alice')
  t.same(saved.counts, { pending: 0, failedLast24h: 0 })
  t.match(await auditRows(), [
    { user_name: 'alice', source_ip: '192.0.2.7', request_id: 'req-1', operation_id: 'addOrUpdateAlarmDest', description: 'Alarm destination "soc" created', outcome: 'Succeeded' },
  ])
  t.equal((await service.list()).length, 1)
})

t.test('a clashing name is refused and nothing is written', async (t) => {
  const { service, auditRows } = await setup(t)
  await service.save(ctx(), webhook('soc'))
  await t.rejects(service.save(ctx(), webhook('SOC')), { code: 'conflict' })
  t.equal((await service.list()).length, 1)
  t.equal((await auditRows()).length, 1)
})

t.test('when the audit record cannot be written, the change is rolled back', async (t) => {
  const { service, auditRows, failAudit } = await setup(t)
  failAudit(true)
  await t.rejects(service.save(ctx(), webhook('soc')), /audit trail is full/)
  failAudit(false)
  t.same(await service.list(), [])
  t.same(await auditRows(), [])
})

t.test('a save whose host names resolve slowly keeps the secrets another save stored meanwhile, and answers 404 if it was removed', async (t) => {
  const { app, deps, service } = await setup(t)
  const URL = 'http://127.0.0.1:9/hooks'
  const made = await service.save(ctx(), { name: 'hook', type: 'webhook', webhook: { url: URL, secret: 'whsec-old-0123456789', headers: { Authorization: 'Bearer old' } } })
  const stored = async () => JSON.parse((await deps.destinations.byId(made.row.id))!.settings)
  // The other request lands where the save resolves host names: after its first read of the
  // destination, before its unit of work (SQLite too: that read is outside the unit).
  const racing = (meanwhile: () => Promise<unknown>) => {
    let first = true
    const destinations = Object.create(deps.destinations)
    destinations.byId = async (id: string, hold?: boolean) => {
      const row = await deps.destinations.byId(id, hold)
      if (first) {
        first = false
        await meanwhile()
      }
      return row
    }
    return alarmDestinationService({ ...deps, destinations })
  }
  const newSecret = () => service.save(ctx(), { id: made.row.id, name: 'hook', type: 'webhook', webhook: { url: URL, secret: 'whsec-new-0123456789', headers: { Authorization: 'Bearer new' } } })
  // Sends neither the secret nor the header value: both are kept as stored.
  const kept = { id: made.row.id, name: 'hook', type: 'webhook' as const, enabled: false, webhook: { url: URL, headers: { Authorization: '***' } } }
  const saved = await racing(newSecret).save(ctx(), kept)
  t.equal(saved.row.enabled, 0, 'the slow save applied')
  t.same(await stored(), { url: URL, secret: 'whsec-new-0123456789', headers: { Authorization: 'Bearer new' } }, 'the secret and header value stored meanwhile are kept, not put back')
  await t.rejects(racing(() => service.remove(ctx(), [made.row.id])).save(ctx(), kept), { code: 'not-found' }, 'removed meanwhile: 404, nothing written')
  t.equal(await queryValue(app, 'SELECT count(*) FROM alarm_destinations'), 0)
})

t.test('saves at once near the limit of 100 destinations: never more than 100, the others 409', async (t) => {
  const { app, service } = await setup(t)
  for (let i = 0; i < 97; i++) await service.save(ctx(), webhook(`hook-${i}`))
  for (let round = 0; round < 3; round++) {
    const outcomes = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => service.save(ctx(), webhook(`race-${round}-${i}`))))
    const refused = outcomes.filter((o) => o.status === 'rejected')
    t.ok(
      refused.every((o) => (o.reason as { code?: string }).code === 'conflict'),
      `round ${round}: every refusal is the limit's 409 (${refused.map((o) => (o.reason as Error).message).join(' | ')})`,
    )
    t.equal(await queryValue<number>(app, 'SELECT count(*) FROM alarm_destinations'), 100, `round ${round}: exactly 100 destinations`)
    t.equal(outcomes.length - refused.length, round === 0 ? 3 : 0, `round ${round}: only the saves the limit left room for`)
  }
})

t.test('removing: one result per id, unknown ids fail, one audit record', async (t) => {
  const { service, auditRows } = await setup(t)
  const { row } = await service.save(ctx(), webhook('soc'))
  const out = await service.remove(ctx(), [row.id.toUpperCase(), 'nope', row.id])
  t.same(out, {
    succeeded: 2,
    failed: 1,
    results: [
      { id: row.id.toUpperCase(), status: 'done', reason: null, code: null },
      { id: 'nope', status: 'failed', reason: 'No alarm destination with this id.', code: 'not-found' },
      { id: row.id, status: 'done', reason: null, code: null },
    ],
  })
  t.equal((await auditRows()).at(-1)!.description, 'Alarm destinations removed: "soc"')
})

t.test('testing: coarse outcomes to the caller, the detail to the log with the request id', async (t) => {
  const { service, warnings, sent } = await setup(t)
  const up = (await service.save(ctx(), webhook('up'))).row
  const down = (await service.save(ctx(), webhook('down'))).row
  const out = await service.test(ctx({ requestId: 'req-9' }), [up.id, down.id, up.id])
  t.same(sent.sort(), ['down', 'up'], 'each destination once')
  t.same(
    out.results.map((r) => [r.name, r.status, r.code]),
    [
      ['up', 'delivered', null],
      ['down', 'failed', 'unreachable'],
      ['up', 'delivered', null],
    ],
  )
  t.notMatch(JSON.stringify(out), /ECONNREFUSED/)
  t.match(warnings, [{ reqId: 'req-9', destinationId: down.id, detail: 'ECONNREFUSED 127.0.0.1:9' }])
})

t.test('unit of work: commits, rolls back, joins, and keeps other contexts out while open', sqliteOnly("SQLite's unit of work over one connection (db/unit-of-work.ts)"), async (t) => {
  const db: DB = openDatabase(':memory:')
  db.exec('CREATE TABLE t (v TEXT)')
  const uow = sqliteUnitOfWork(db)
  const port = asyncPort(
    { add: (v: string) => db.prepare('INSERT INTO t VALUES (?)').run(v).changes, all: () => (db.prepare('SELECT v FROM t ORDER BY rowid').all() as { v: string }[]).map((r) => r.v) },
    uow,
  )

  await uow.run(async () => {
    await port.add('a')
    await uow.run(async () => void (await port.add('b')))
  })
  t.same(await port.all(), ['a', 'b'], 'committed, the inner unit joined the outer one')

  await t.rejects(
    uow.run(async () => {
      await port.add('c')
      throw new Error('no')
    }),
    /no/,
  )
  t.same(await port.all(), ['a', 'b'], 'rolled back')

  // Another context writes while a unit is open: it waits for the unit's end, so the
  // unit's rollback does not take its write along.
  let release!: () => void, opened!: () => void
  const gate = new Promise<void>((r) => (release = r))
  const isOpen = new Promise<void>((r) => (opened = r))
  const unit = uow.run(async () => {
    await port.add('inside')
    opened()
    await gate
    throw new Error('rolled back')
  })
  await isOpen
  t.ok(db.inTransaction, 'the unit is open')
  const outside = port.add('outside')
  release()
  await t.rejects(unit, /rolled back/)
  await outside
  t.same(await port.all(), ['a', 'b', 'outside'])

  await t.rejects(
    uow.run(async () => {
      await port.add('slow')
      await new Promise((r) => setTimeout(r, 5))
    }),
    /waited for I\/O/,
    'a unit that waits for I/O is refused',
  )
  t.same(await port.all(), ['a', 'b', 'outside'])
  t.notOk(db.inTransaction)
})
