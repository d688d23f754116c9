// The account service without Fastify's routes, over the ports of a test app's database
// (SQLite or PostgreSQL) with no account in it: logins counted per name and source address,
// the last Administrator kept, and one's own change checked against the credential again.
import t from 'tap'
import { accountService } from '../lib/accounts/service.js'
import { sessionService } from '../lib/accounts/sessions.js'
import { auditTrail } from '../lib/audit.js'
import { systemContext } from '../lib/platform/context.js'
import { build } from './helpers.js'
import { portsOf, query } from './seed.js'

// Plain text stands in for scrypt here: the rules are under test, not the hashing.
const passwords = { hash: async (p: string) => `h:${p}`, verify: async (p: string, h: string) => h === `h:${p}`, dummy: async () => 'h:\u0000' }

async function setup(t: Parameters<typeof build>[0]) {
  const app = await build(t)
  // The app's first Administrator goes: the accounts are the test's own.
  await query(app, 'DELETE FROM users')
  const { uow } = app.storage
  const users = portsOf(app).users
  const auditPort = auditTrail({ repo: app.storage.audit, refusalWindowMs: 60_000, flushRefusal: async () => {} })
  const sessions: number[] = []
  const service = accountService({
    accounts: users,
    uow,
    audit: auditPort,
    passwords,
    lockout: { threshold: 3, ms: 60_000 },
    startSession: (userId) => {
      sessions.push(userId)
      return { token: 't', expiresAt: 'e', refreshToken: 'r', refreshTokenExpiresAt: 'e' }
    },
  })
  const audits = () => query<{ description: string; outcome: string; source_ip: string }>(app, 'SELECT description, outcome, source_ip FROM audit_trail ORDER BY id')
  return { app, uow, users, auditPort, service, sessions, audits }
}

const admin = systemContext({ actor: 'root', profile: 30, sourceAddress: '192.0.2.1' })
const from = (address: string) => systemContext({ sourceAddress: address })
const account = (userName: string, userProfile = 30) => ({ userName, email: `${userName}@example.com`, userProfile, password: 'Correct-horse-42' }) as any

t.test('logins: a wrong password counts per name and address; a stranger cannot lock the owner out', async (t) => {
  const { service, sessions, audits } = await setup(t)
  const alice = await service.create(admin, account('alice'))
  for (let i = 0; i < 3; i++) await t.rejects(service.login(from('198.51.100.9'), 'alice', 'wrong'), { code: 'invalid-credentials' })
  await t.rejects(service.login(from('198.51.100.9'), 'alice', 'Correct-horse-42'), { code: 'account-locked' }, 'locked from that address')
  const ok = await service.login(from('192.0.2.50'), 'alice', 'Correct-horse-42')
  t.equal(ok.user.userName, 'alice', 'the owner logs in from elsewhere')
  t.same(sessions, [alice.id])
  t.match((await audits()).at(-1), { description: 'Login of "alice"', outcome: 'Succeeded', source_ip: '192.0.2.50' })
  await t.rejects(service.login(from('192.0.2.50'), 'nobody', 'x'), { code: 'invalid-credentials' }, 'an unknown name answers the same')
})

t.test('the last active Administrator can be neither demoted nor deleted', async (t) => {
  const { service } = await setup(t)
  const only = await service.create(admin, account('only'))
  await t.rejects(service.update(admin, { id: only.id, userProfile: 20 } as any), { code: 'conflict' })
  const out = await service.remove(admin, { kind: 'session', id: 999 }, ['only'])
  t.match(out, { succeeded: 0, failed: 1, results: [{ code: 'not-allowed' }] })
  const self = await service.remove(admin, { kind: 'session', id: only.id }, [String(only.id)])
  t.match(self.results, [{ reason: 'You cannot delete your own account.' }])
})

t.test("one's own password change is checked against the credential inside the change", async (t) => {
  const { service, users } = await setup(t)
  const bob = await service.create(admin, account('bob', 10))
  const change = { currentPassword: 'Correct-horse-42', newPassword: 'Another-horse-43' }
  await t.rejects(
    service.updateOwn(admin, { kind: 'session', id: bob.id }, change, () => {
      throw new Error('revoked meanwhile')
    }),
    /revoked meanwhile/,
  )
  t.equal((await users.byId(bob.id))!.password_hash, 'h:Correct-horse-42', 'nothing changed')
  await service.updateOwn(admin, { kind: 'session', id: bob.id }, change, () => {})
  t.equal((await users.byId(bob.id))!.password_hash, 'h:Another-horse-43')
  await t.rejects(
    service.updateOwn(admin, { kind: 'integration', id: 'x' }, { email: 'a@b.c' }, () => {}),
    { code: 'validation' },
  )
})

t.test('a reused refresh token: refused after its session is ended and audited', async (t) => {
  const { uow, users, auditPort, audits } = await setup(t)
  const id = await users.insert({ user_name: 'carol', email: 'c@example.com', first_name: null, last_name: null, phone: null, image: null, profile: 10, password_hash: 'h', is_active: 1 }, Date.now())
  const revoked: string[] = []
  const sessions = sessionService({
    accounts: users,
    sessions: {
      revoke: async (sessionId) => {
        revoked.push(sessionId)
        return 1
      },
    },
    uow,
    audit: auditPort,
    rotate: (token) => (token === 'used' ? { reused: true, userId: id } : { reused: false, userId: id, tokens: { token: 'a', expiresAt: 'e', refreshToken: 'r2', refreshTokenExpiresAt: 'e' } }),
  })
  const fresh = await sessions.refresh(admin, 'fresh')
  t.equal(fresh.user.userName, 'carol')
  await t.rejects(sessions.refresh(admin, 'used'), { code: 'unauthenticated' })
  t.match((await audits()).at(-1), { description: 'Refresh token reused for "carol": session revoked', outcome: 'Refused' }, 'the refusal is kept')
  await t.rejects(sessions.logout(admin, { kind: 'integration', name: 'tok' }), { code: 'validation' })
  t.equal(await sessions.logout(admin, { kind: 'session', name: 'carol', sessionId: 's1' }), 1)
  t.same(revoked, ['s1'])
})
