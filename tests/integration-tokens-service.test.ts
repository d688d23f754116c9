// The integration token service without Fastify's routes, over the ports of a test app's
// database (SQLite or PostgreSQL): profile rules, unique names, and the revocation told to
// listeners (open notification streams) only once it has committed.
import t from 'tap'
import { auditTrail } from '../lib/audit.js'
import { integrationTokenService } from '../lib/integration-tokens/service.js'
import { systemContext } from '../lib/platform/context.js'
import { build } from './helpers.js'
import { portsOf } from './seed.js'

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t)
  const { uow } = app.storage
  const tokens = portsOf(app).integrationTokens
  let n = 0
  const service = integrationTokenService({
    tokens,
    uow,
    audit: auditTrail({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} }),
    newSecret: () => ({ token: `pit_secret${++n}`, hash: `hash${n}` }),
  })
  // What tells the open notification streams of a revocation (either backend's).
  const authVersion = app.storage.notificationLoops.authVersion
  return { tokens, authVersion, uow, service }
}

const ctx = systemContext({ actor: 'admin', profile: 30, requestId: 'r1' })
const admin = { kind: 'session' as const, id: 1, name: 'admin', profile: 30 }

t.test('created by a session, at most its profile, names unique', async (t) => {
  const { service } = await setup(t)
  const { row, token } = await service.create(ctx, admin, { name: 'siem', userProfile: 10 })
  t.equal(token, 'pit_secret1')
  t.equal(row.token_hash, 'hash1')
  await t.rejects(service.create(ctx, { ...admin, kind: 'integration' }, { name: 'x', userProfile: 10 }), { code: 'forbidden' })
  await t.rejects(service.create(ctx, { ...admin, profile: 20 }, { name: 'y', userProfile: 30 }), { code: 'forbidden' })
  await t.rejects(service.create(ctx, admin, { name: 'siem', userProfile: 10 }), { code: 'conflict' })
  await t.rejects(service.create(ctx, admin, { name: 'z', userProfile: 10, expiresAt: '2000-01-01T00:00:00Z' }), { code: 'validation' })
  t.equal((await service.list()).length, 1)
})

t.test('a revocation is told once committed, and not when its unit rolls back', async (t) => {
  const { service, tokens, authVersion, uow } = await setup(t)
  const told: boolean[] = []
  authVersion.onBump(() => told.push(true))
  const a = (await service.create(ctx, admin, { name: 'a', userProfile: 10 })).row
  const b = (await service.create(ctx, admin, { name: 'b', userProfile: 10 })).row

  await uow.run(async () => {
    await service.revoke(ctx, a.id)
    t.same(told, [], 'not told while the unit is open')
  })
  t.same(told, [true], 'told at the commit')

  await t.rejects(
    uow.run(async () => {
      await service.revoke(ctx, b.id)
      throw new Error('undone')
    }),
  )
  await new Promise((r) => setImmediate(r))
  t.same(told, [true], 'a rolled-back revocation is not told')
  t.equal((await tokens.byId(b.id))!.revoked_ms, null)
  await t.rejects(service.revoke(ctx, a.id), { code: 'not-found' }, 'an inactive token cannot be revoked again')
})
